// Package iptables writes iptables rules declaratively: a typed rule model
// (Rule, Match, Action) and a Table that keeps one table of one IP version
// (for example the IPv4 filter table) in the state its owner declares,
// through iptables-restore, with the legacy or the nft backend.
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
// New validates the options and does no I/O. UpdateChain / UpdateChains set
// the full content of owned chains (each rule is validated for the table's
// IP version; a bad rule is an error and nothing changes); RemoveChain
// forgets one. InsertOrAppendRules puts our rules at the top of a built-in
// chain (InsertModeInsert, the default) or after the foreign rules
// (InsertModeAppend); AppendRules puts rules at the very end. An owned
// chain is programmed only while one of those rules (or a chain they reach,
// or a foreign rule in the kernel) jumps to it, or when it is forced.
//
//	tbl, err := iptables.New(iptables.Options{
//		Table:       "filter",
//		IPVersion:   iptables.IPv4,
//		Backend:     iptables.BackendNFT, // or DetectBackend
//		ChainPrefix: "np-",
//	})
//	...
//	err = tbl.UpdateChain(iptables.Chain{Name: "np-fw", Rules: []iptables.Rule{{
//		Match:  iptables.Match{iptables.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))},
//		Action: iptables.Accept(),
//	}}})
//	err = tbl.InsertOrAppendRules("FORWARD", []iptables.Rule{{Action: iptables.Jump("np-fw")}})
//	res, err := tbl.Apply(ctx) // res.RetryAfter: when to call Apply again
//
// Apply reads the table with iptables-save, or in process when
// Options.Namespace is set (see below; hash comments and jumps only, rules
// are never parsed), computes the difference and writes it in one
// `iptables-restore -w <LockTimeout> --noflush` transaction: only changed
// rules are replaced (-R), surplus ones deleted (-D) and new ones appended
// (-A), so the packet counters of unchanged rules survive; new chains are
// declared before anything jumps to them and removed chains are deleted
// after the jumps to them. When nothing differs it runs no restore at all,
// and when nothing changed since the last Apply and no refresh is due it
// runs nothing. Between reads it trusts what it wrote; the kernel is read
// again on the first Apply (so a restarted agent adopts its rules and
// writes nothing if they are right), after QueueResync, every
// RefreshInterval, at the PostWriteRecheck delays after each write (which
// catches another agent clobbering our rules right after us), and after a
// failure. A failed restore is retried after a full re-read, MaxAttempts
// times with backoff; the error (a *RestoreError) keeps the input, the
// failing line and the binary's output. Stats counts saves, restores and
// lines written.
//
// # Cost
//
// Declaring renders each rule once, straight into the restore-input text
// kept for its chain (one string per chain, not per rule). Declaring a
// chain again with the same rules renders and compares it, and changes
// nothing: no allocation, no hashing, nothing for Apply to do. Hashes are
// computed by Apply, while its iptables-save runs (in a goroutine that
// Apply always waits for). Between reads, when only some chains or
// built-in-chain groups changed and no jump target, forced chain or chain
// set did, Apply compares and writes just those, so changing one rule of
// a big table costs little more than the one restore line.
//
// # Reading in process
//
// Running iptables-save costs a millisecond or more, most of the price of
// a small first Apply. With Options.Namespace set (a handle of the
// namespace the Runner runs the binaries in), Apply reads the table
// without it: through the xtables getsockopt interface of a raw socket
// opened in the namespace (legacy; the kernel hands out a consistent
// snapshot, no lock is taken) or over nf_tables netlink (nft). It gets
// exactly what the iptables-save parser gets (the chains, each rule's
// hash or none, the foreign jumps to owned chains) except the text of
// our rules in built-in chains, which deleting them needs: those texts
// come from what the Table declared or wrote or read earlier, and when
// one is unknown (a rule left by another declaration, such as a previous
// run's), that Apply reads again with iptables-save. Any error of the
// in-process read falls back to iptables-save too, and so does the re-read
// after a failed restore (a rule that carries one of our hashes but is not
// ours, copied by another writer, can only be deleted by the kernel's own
// text). Stats counts FastReads and FastReadFallbacks.
//
// A Table is a dataplane.Driver (Apply, QueueResync, Phase), so a
// dataplane.Loop can drive it; Apply's RetryAfter asks the loop to come back
// for the next refresh or recheck.
//
// # Backends
//
// Options.Backend picks ip[6]tables-legacy-save/-restore or
// ip[6]tables-nft-save/-restore (iptables 1.8.3 or later). DetectBackend
// follows what the node already uses: kube-proxy's hint chains, else the
// backend holding more rules, else nft. The restore binaries wait for the
// xtables lock (legacy only) up to LockTimeout, so the Table coexists with
// kube-proxy and others writing at the same time.
//
// Binaries run through Options.Runner (a command.Runner): command.Local by
// default, a runner bound to another network namespace, or the in-memory
// fake of package iptablesfake in unit tests. The save runs on a goroutine
// of Apply's own, so the runner, not the calling thread, decides the
// network namespace.
//
// # Limits
//
// A Table manages the filter, nat, mangle and raw tables. Two agents that
// both use InsertModeInsert in the same built-in chain will keep moving
// their rules in front of each other's. A chain that a foreign rule still
// jumps to is flushed instead of deleted (deleting it would fail the whole
// transaction). The in-process nft read does not make every check of
// iptables-nft-save: a table the nft tool changed in ways iptables-nft
// cannot show (which iptables-save reports as incompatible) may be read
// without error when its rules use only expressions iptables-nft writes.
package iptables
