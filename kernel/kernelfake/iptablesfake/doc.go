// Package iptablesfake is an in-memory kernel for the iptables binaries, for
// unit tests of code that writes iptables rules, such as iptables.Table and
// the managers built on it. Tests reach it through kernelfake.Namespace:
// its Runner, the Kernel a Table takes, serves the iptables binaries from
// the namespace's *Kernel (kernelfake.Namespace.IPTables), which tests
// inspect and break with the methods below.
//
// A *Kernel implements command.Runner and serves
// ip[6]tables-{legacy,nft}-save, ip[6]tables-{legacy,nft}-restore and single
// ip[6]tables-{legacy,nft} commands (the names without -legacy or -nft
// mean nft), with separate tables per backend and IP version, as the kernel
// keeps them. It behaves like the real binaries for the rules nodeplane
// emits: restore with and without --noflush (a chain declaration flushes an
// existing user chain, built-in chains are appended to again), -A, -I, -R,
// -D by index and by rule text, -C, -N, -X, -F, -P and -E, COMMIT atomicity
// (a failing line aborts its whole transaction; transactions committed
// before it stay), -X of a referenced or non-empty chain fails, jumps to
// missing chains fail (at their line with the legacy binaries, at COMMIT
// with the nft ones, which resolve jumps when they commit; a failure names
// its input line as the real binary does), a set match fails at its line
// when the set does not exist or is of the other family (once UseSets says
// which sets exist: kernelfake.Namespace hands it its ipset fake), each of
// these with the real binary's words and exit status, and save output
// formatted like
// iptables-save with
// rules in their canonical form (header criteria first, addresses with
// prefix lengths, implicit protocol matches made explicit, and so on for
// the common matches and targets). Package tests run the same behaviour
// table against the fake and against the real binaries in a network
// namespace, for both backends and both IP versions. Matches and targets
// the fake does not know are accepted as written, without validation.
//
// Beyond the runner it offers:
//
//   - failure injection: FailNext, AddFault (per kind of call or binary, a
//     number of times or until ClearFaults, or at the first restore line
//     containing a text, reported at that line or, as the legacy kernel
//     reports a rule it refuses when the table is committed, at COMMIT),
//     SetIncompatible;
//   - inspection: Save, Chains, Rules, ListRules (with serial numbers that
//     show whether a rule was rewritten), Calls and Count;
//   - playing another agent: Exec and Restore change the tables without
//     being recorded, and OnCall runs a function before every call, for
//     example to change the kernel between a save and a restore.
//
// It never runs a real binary and touches no kernel state.
package iptablesfake
