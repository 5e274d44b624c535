// Package iptables is the iptables writer of the rule model of package
// netfilter: a Table keeps one table of one IP family (for example the IPv4
// filter table) in the state its owner declares, through iptables-restore,
// with the legacy or the nft backend. *Table implements netfilter.Table, the
// interface managers take.
//
// # What a Table owns
//
// A Table has an identity made of two prefixes (Options.ChainPrefix, such
// as "np-", and Options.HashPrefix, by default derived from it, "np:"):
//
//   - the chains whose names start with ChainPrefix (its "owned" chains),
//     whose full content it sets; owned chains in the kernel that are no
//     longer wanted, including leftovers of a previous run, are deleted;
//   - the rules that carry its hash comment, `-m comment --comment
//     "np:<16 characters>"`, which it puts in every rule it writes. The hash
//     covers the chain, the rule and its position, so a rule that changes
//     or moves gets a new hash. In the built-in chains (INPUT,
//     FORWARD, OUTPUT, PREROUTING, POSTROUTING) the hash is how it tells its
//     rules from everyone else's.
//
// It never touches anything else: it never flushes a built-in chain, never
// deletes or moves a foreign rule (one without its hash), whether it was
// there before, sits between ours, or is inserted later by another agent
// such as kube-proxy, and never touches a chain without its prefix. Its
// own rules in built-in chains are deleted by their full text as
// iptables-save printed them, never by position.
//
// # Declaring and applying
//
// New validates the options and does no I/O. SetChains sets the full
// content of owned chains; RemoveChains forgets them. InsertRules puts our
// rules at the top of a built-in chain (a netfilter.Hook), before every
// foreign rule; AppendRules puts them at its bottom, after every foreign
// rule; a chain can hold both groups. An owned chain is programmed only
// while one of those rules (or a chain they reach, or a foreign rule in
// the kernel) jumps to it, or when it is forced.
//
//	ns, err := kernel.Open("/run/netns/pod1") // or leave Kernel nil: this namespace
//	...
//	tbl, err := iptables.New(iptables.Options{
//		Table:       "filter",
//		Family:      ipfamily.IPv4,
//		Backend:     iptables.BackendNFT, // or DetectBackend
//		ChainPrefix: "np-",
//		Kernel:      ns,
//	})
//	...
//	err = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{
//		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))},
//		Action:  netfilter.Accept(),
//	}}})
//	err = tbl.InsertRules("np", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})
//	res, err := tbl.Apply(ctx) // res.RetryAfter: when to call Apply again
//
// What the Table can tell on its own is refused when declared, with an
// error and nothing changed: a rule that netfilter.Rule.Validate refuses
// (a prefix of the other family, a prefix with host bits set such as
// 10.0.0.1/24, a port without a protocol…), a rule past a limit of
// iptables (MaxCommentLength, MaxMultiPorts…), a chain name iptables does
// not take, a jump to a built-in chain or to the chain itself, a target or
// option that the table does not allow (DROP in nat, REJECT outside
// filter, MASQUERADE, SNAT and DNAT outside nat, NoTrack outside raw), or
// that the built-in chain does not allow (MASQUERADE outside POSTROUTING,
// -i in OUTPUT…). What depends on other declarations or on the kernel is
// found by Apply and held back per object (see below): a jump to an owned
// chain not declared (it may be declared later, in any order) or a loop of
// owned chains, a jump to a foreign chain the table does not have, a set
// the kernel does not have or has of the other family, a target an owned
// chain holds that a built-in chain reaching it does not allow. An
// address type match limited to an interface (LimitIfaceIn, LimitIfaceOut)
// in an owned chain that a built-in chain without that interface reaches
// is left to the kernel: iptables-legacy refuses it, iptables-nft takes it
// (and then matched every packet there when tried); declare such a match
// only in chains of the hooks that have the interface.
//
// Apply reads the table, in process or with iptables-save (see
// Options.Kernel; hash comments, jumps and chain names only: rules are
// never parsed), computes the difference and writes
// it in one `iptables-restore -w <LockTimeout> --noflush` transaction:
// only changed rules are replaced (-R), surplus ones deleted (-D) and new
// ones appended (-A), so the packet counters of unchanged rules survive;
// in a built-in chain a changed rule of ours is deleted by its text and
// the new one inserted at its place, the others untouched. New chains are
// declared before anything jumps to them and removed chains are deleted
// after the jumps to them; a chain a foreign rule still jumps to is
// flushed and kept (ErrChainInUse) and deleted by the first Apply that
// reads nothing jumping to it. When nothing differs it runs no restore at
// all, and when nothing changed since the last Apply and no recheck or
// retry is due it runs nothing. Between reads it trusts what it wrote; the kernel
// is read again on the first Apply (so a restarted agent adopts its rules
// and writes nothing if they are right), after QueueResync (which a
// dataplane.Loop calls every ResyncInterval; a standalone user calls it
// to repair drift), at the PostWriteRecheck delays after each write
// (which catches another agent clobbering our rules right after us), when
// a retry is due, and after a failure. WorkStats counts saves, restores and
// lines written; Stats gives the dataplane.DriverStats a Loop reports
// (objects desired, in the kernel and failing, and lines written).
//
// A Table is a dataplane.Driver (Apply, QueueResync, Phase); Apply's
// RetryAfter asks the loop to come back for the next recheck or retry.
//
// # One object never holds back the others
//
// The objects of a Table are its owned chains and, per built-in chain,
// our rules in it. When the restore binary refuses a line, Apply reads the
// table again (the picture may be stale: another writer changed the table
// since it was read) and writes again; when a line is still refused, Apply
// leaves out the object it belongs to, keeping the kernel's version of it
// (an owned chain that did not exist is created empty, so that the jumps
// to it stay valid), and writes the rest, in the same Apply. When the
// binary names no line of an object (the legacy kernel checks the rules
// only when the whole table is committed), Apply finds the object by
// writing halves of the changed objects alone.
//
// What the kernel would refuse for want of something it lacks is found
// before writing, and the object is left out without a failed restore: a
// jump or goto (in an owned chain or a built-in one) to a foreign chain
// the table does not have — when the jump was declared after the table
// was read, Apply reads the table again first, since the read could not
// tell — and a rule that matches an ip set the kernel does not have, or
// has of the other family. What is left out is the object holding the
// rule, never the rule alone: the chain without it would mean something
// else. For the sets, Apply lists the kernel's sets (`ipset list -t`
// through the Kernel's runner) when it is about to write a rule matching
// a set it has not listed since the table was read, or that no rule
// matched at the last listing; when the listing fails (no ipset binary)
// such rules are written unchecked until the next read, and the restore
// judges them.
//
// Apply then returns a *dataplane.PartialError (errors.Is(err,
// dataplane.ErrPartial)) naming each object left out: a
// *dataplane.ObjectError of Driver "iptables", Kind "chain" and Name the
// chain (the owned chain, or the built-in chain holding our rules), whose
// Reason is ErrRefused (Detail quotes the refused line and Err holds the
// binary's message, or Detail names the missing chain or set),
// ErrChainInUse, ErrUnknownChain or ErrChainLoop; PartialError.Objects
// lists them. The Table keeps them on a dataplane.Ledger and returns the
// error while they stand. A refused object is tried again after a second,
// then after a delay that doubles up to five minutes (ObjectError.RetryAt;
// RetryAfter asks the loop to come back then), with a re-read, since what
// changes the outcome is the kernel; a new declaration of the object
// tries it at once. An object left out for what the read showed (a chain
// in use, a missing chain or set) does not even wait for its retry: the
// first read that shows the cause gone, such as a resync's, writes it on
// that pass. Only a failure that belongs to no object (the binary is
// missing, the table cannot be read, the lock wait timed out, a failure
// the binary reports without a line) is returned as such: the next Apply
// starts with a re-read, and a dataplane.Loop retries the Table with
// backoff.
//
// # Plan and State
//
// Plan lists the writes of the restore transaction the next Apply would
// run, without running it, as a dataplane.Plan: an owned chain added,
// replaced whole (it is edited in place, rule by rule, but listed as one
// write with its rule counts) or deleted ("+ chain np-fw (2 rules)", "~
// chain np-fw (1 rule, was 2 rules)", "- chain np-old (was 1 rule)"),
// and a group of our rules in a built-in chain added, changed or removed
// ("+ rule FORWARD top (1 rule)" for the InsertRules group, "… bottom"
// for the AppendRules one; a rule of ours no group declares any more
// counts in the top group when no foreign rule comes before it, else in
// the bottom one). It is Apply's decision run dry: the same read, the same
// objects held back, the same transaction built, counted a success; an
// Apply right after it runs that transaction (and more only when the
// kernel refuses a line, which Plan cannot know), and an Apply whose Plan
// is empty runs nothing. State lists the owned chains and groups of our
// rules the kernel holds, every difference with the declared state (also
// what the next Apply leaves for later) and the failing objects.
//
// # Backends and namespaces
//
// Options.Backend picks ip[6]tables-legacy-save/-restore or
// ip[6]tables-nft-save/-restore (iptables 1.8.3 or later). DetectBackend
// follows what the node already uses: kube-proxy's hint chains, else the
// backend holding more rules, else nft. The restore binaries wait for the
// xtables lock (legacy only) up to LockTimeout, so the Table coexists with
// kube-proxy and others writing at the same time.
//
// Options.Kernel is the one way to target a network namespace: the
// binaries run through its Runner (a *kernel.Namespace starts them inside
// its namespace), and the in-process read through its Do. Unit tests hand the Table a kernelfake.Namespace, whose
// Runner serves the binaries from the in-memory kernel of package
// iptablesfake.
//
// # Reading iptables-save
//
// A rule line is split into arguments as iptables-restore splits its
// input: blanks separate them, double quotes group them, and inside quotes
// a backslash takes the next character (iptables-save quotes and escapes
// comments and prefixes that way; a quoted newline continues the rule on
// the next line). A rule is ours only when one of its comment matches has
// exactly one of our hash comments as its text, and it jumps to a chain
// when its last two arguments are "-j CHAIN" or "-g CHAIN" (iptables-save
// prints the target last, and a jump to a chain takes no options): a
// foreign comment that holds our hash or " -j np-x" fools neither. The
// in-process read takes the same comment texts and jump targets from the
// kernel's rules, so both reads see the same rules as ours.
//
// # Limits
//
// A Table manages the filter, nat, mangle and raw tables. Two agents that
// both insert their rules at the top of the same built-in chain will keep
// moving their rules in front of each other's. Hashes depend on the
// position in the group, so inserting a rule at the top of a group
// rewrites the rules after it.
package iptables
