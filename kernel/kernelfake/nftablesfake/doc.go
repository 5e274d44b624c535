// Package nftablesfake is the fake of package nftables: a Namespace is
// an in-memory nf_tables of one network namespace that a Table talks to as
// it talks to the kernel — the same netlink messages, batched transactions
// committed whole or not at all, the kernel's errnos — for unit tests of
// agents and managers that use nftables, with no root and no namespace.
//
// # What it models
//
// Tables of every family; chains (base chains with their hook, priority,
// type and policy; the kernel's checks of types and priorities); rules
// with their handles, user data and expressions (kept encoded, walked for
// what they refer to: the chains their verdicts jump to, the sets they look
// up); sets and maps with their elements; references (a chain or set in use
// is not deleted: EBUSY; a jump to a missing chain or base chain, a loop
// from a base chain, a lookup of a missing set are refused); handles
// allocated as the kernel allocates them, also by requests it refuses; the
// ruleset generation, which moves with every committed change. A refused
// request is answered with the kernel's errno and, for an element, the
// offset of that element. TestKernelFakeMatchesKernel sends the same
// transactions to the fake and to the kernel and compares the answers and
// the dumps.
//
// # What it does not model
//
// What expressions do to packets, and what the kernel checks of them
// beyond references (register lengths, the hooks an expression is allowed
// at); overlaps of interval elements; set timeouts, counters of rules and
// anything a dump of the kernel would show that a Table does not read.
//
// # Failure injection and inspection
//
// Refuse refuses chosen requests (and elements) with an errno, as the
// kernel refuses what it does not take; FailTransactions fails whole
// transactions, FailDumps reads. Counts counts transactions, requests and
// dumps. Tables, Chains, Sets, Elements and Dump show the state; Admin
// changes it behind the Table's back, as an administrator or another agent
// would (each change a committed transaction of its own).
//
// The package owns nothing outside its values and touches no kernel
// state. A Namespace is safe for concurrent use.
package nftablesfake
