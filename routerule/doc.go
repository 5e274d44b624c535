// Package routerule keeps a network namespace's routing policy rules (`ip
// rule`) equal to a declared set, for one address family: the rules that
// send marked, sourced or interface-bound traffic to a dedicated route table.
//
// # What it owns
//
// A *Rules owns, in the namespace its Options.Kernel reaches, the rules of
// its family whose priority is one of Options.Priorities and that
//
//   - look up one of Options.Tables, or
//   - do anything but a lookup: jump (goto) anywhere, or drop (blackhole,
//     unreachable, prohibit), or nothing (nop).
//
// Every other rule is foreign and never touched: rules at other priorities,
// lookup rules at an owned priority that target a table not in
// Options.Tables, and the kernel's own rules ("0: lookup local", "32766:
// lookup main", "32767: lookup default", protocol kernel) whatever is
// owned. Do not let another agent put goto or drop rules at an
// owned priority. Rules of ours that are not desired are deleted, including
// ones that use attributes or actions this package does not express (TOS,
// ports, UID ranges, suppressors; unreachable, prohibit, nop). The rules it
// writes carry Protocol ("proto 78"), and so do its delete requests: a
// rule of ours equal to one of the kernel's (a "32766: lookup main" of its
// own) is deleted alone, never the kernel's in its place.
//
// # How it is used
//
// Open the namespace once with package kernel and give the instance its
// rules (kernel.Rules; in tests, a kernelfake.Namespace):
//
//	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
//	if err != nil { … }
//	defer ns.Close()
//	rules, err := routerule.New(routerule.Options{
//		Family:     routerule.IPv4,
//		Kernel:     ns,
//		Priorities: []uint32{100},
//		Tables:     []uint32{200},
//	})
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
// Kernel.AddRule and Kernel.DeleteRule. It reads the kernel's rules on its
// first call, after QueueResync and after a failed read, so a rule that
// systemd-networkd or an administrator deleted is added back at the next
// resync: a dataplane.Loop calls QueueResync every
// dataplane.Options.ResyncInterval; a Rules used without a loop resyncs
// when its user calls QueueResync. An Apply with nothing changed and no
// read due does no I/O. A restarted agent that declares the same rules
// writes nothing. A nil context is context.Background().
//
// A rule the kernel refuses never holds back the others: they are written
// in the same Apply, and the refused rule is tried again on its own
// exponential backoff (100 ms, doubling up to 30 s), not on the passes in
// between; declaring it anew or withdrawing it ends the backoff. Apply then
// returns an error wrapping dataplane.ErrPartial (a
// *dataplane.PartialError of one *dataplane.ObjectError per rule, kept in
// a dataplane.Ledger) and asks through ApplyResult.RetryAfter for the next
// attempt, so a dataplane.Loop reports the refused rules in its Health and
// goes on serving everything else. A failed read of the kernel is an error
// of the whole instance: nothing is written. Stats gives the
// dataplane.DriverStats (desired, in the kernel, failing, writes).
//
// Plan lists the additions and deletions the next Apply would make, in its
// order, without writing: Apply's own converge runs on a copy of the
// model. State gives the rules of the instance in the kernel, the drift
// from the desired rules and the failing writes (dataplane.Planner and
// dataplane.Stater).
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
// manages those), links, and any namespace other than its Kernel's. New
// does no I/O and starts no goroutine; neither does a Rules.
//
// # Testing
//
// A kernelfake.Namespace holds rules with the kernel's matching behaviour
// (the model is shared with this package, and proven against the kernel
// by kernelfake's differential tests), with failure injection (Fail,
// Refuse) and call counting (Calls); pass it as Options.Kernel.
package routerule
