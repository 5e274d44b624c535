//go:build linux

// Package routerule keeps a network namespace's routing policy rules (`ip
// rule`) equal to a declared set, for one address family: the rules that
// send marked, sourced or interface-bound traffic to a dedicated route table.
//
// # What it owns
//
// A *Rules owns, in the namespace its netlink handle is bound to, the rules
// of its family whose priority is one of Options.Priorities and that
//
//   - look up one of Options.Tables, or
//   - jump (goto) anywhere, or
//   - have no table (blackhole; the kernel's dump does not tell blackhole,
//     unreachable, prohibit and nop rules apart, so any of them counts).
//
// Every other rule is foreign and never touched: rules at other priorities,
// lookup rules at an owned priority that target a table not in
// Options.Tables, and the kernel's own rules ("0: lookup local", "32766:
// lookup main", "32767: lookup default", protocol kernel) whatever is
// owned. Do not let another agent put goto or drop rules at an
// owned priority. Rules of ours that are not desired are deleted, including
// ones that use attributes this package does not express (TOS, ports, UID
// ranges, suppressors).
//
// # How it is used
//
// Declare rules with SetRule, RemoveRule or SetRules. A Rule matches on
// source and destination prefix (net/netip), firewall mark and mask, input
// and output interface, optionally inverted as a whole (`not`), and acts
// with ActionLookup (a table), ActionGoto (a later priority) or
// ActionBlackhole. These calls only validate and record intent: a malformed
// rule, a rule of the other family, a source or destination with host bits
// set (10.1.2.3/16; the error names it), or one at a priority or table the
// instance does not own is an error wrapping ErrInvalidRule, and nothing
// changes. Error texts name the package once; errors.Is matches every
// sentinel they speak of (ErrNotOwned and ErrInvalidRule, say).
//
// Apply (a dataplane.Driver, in PhaseRoutes) writes the difference with
// RuleAdd and RuleDel. It reads the kernel (RuleList, retried when a dump is
// interrupted) on its first call, after QueueResync or a failed read, and
// every RefreshInterval (90 s by default), so a rule that systemd-networkd or
// an administrator deleted is added back at the next refresh. An Apply with
// nothing changed and no read due does no netlink I/O. A restarted agent that
// declares the same rules writes nothing.
//
// A rule the kernel refuses never holds back the others: they are written
// in the same Apply, and the refused rule is tried again on its own
// exponential backoff (100 ms, doubling up to 30 s), not on the passes in
// between; declaring it anew or withdrawing it ends the backoff. Apply then
// returns an error wrapping dataplane.ErrPartial and asks through
// ApplyResult.RetryAfter for the next attempt, so a dataplane.Loop reports
// the refused rules in its Health and goes on serving everything else. A
// failed read of the kernel is an error of the whole instance: nothing is
// written.
//
// # Kernel behaviour it handles
//
// The kernel deletes the first rule that matches the fields a delete sets,
// ignoring the invert flag and the goto target, and refuses to add a rule
// when one exists that equals it in everything but those two fields, where
// a source or destination the new rule leaves out matches any. So
// "100: from 10.0.0.0/8 lookup 7" blocks adding "100: lookup 7", and a
// delete of "100: lookup 7" may remove "100: from 10.0.0.0/8 lookup 7" if
// that comes first. Apply predicts both from its model of the kernel's
// ordered list: it adds catch-alls before narrower rules, adds before it
// deletes when it can (make before break), and when a change cannot be made
// in place it rebuilds that one priority (deletes our rules there in list
// order, then adds the desired ones), which briefly interrupts its rules.
// Two rules that differ only in Invert or goto target cannot coexist:
// SetRule replaces one with the other, and SetRules refuses such a pair
// with ErrConflict. Rules that share a priority are tried in the kernel's
// list order, which this package does not control: give rules whose order
// matters different priorities.
//
// # What it never touches
//
// Foreign rules (see above), routes and route tables (package routetable
// manages those), links, and any namespace other than the handle's. It
// never falls back to the calling thread's namespace: a nil or zero
// *netlink.Handle is refused.
//
// # Testing
//
// Package routerulefake is an in-memory kernel with the same matching
// behaviour and failure injection; pass it as Options.Handle.
package routerule
