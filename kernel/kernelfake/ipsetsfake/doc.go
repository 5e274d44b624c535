// Package ipsetsfake is an in-memory ipset kernel for tests: a
// command.Runner that understands the ipset commands the ipsets driver
// runs, and behaves like the real binary and kernel for them.
//
// A driver reaches it as it reaches the real binary, through the runner of
// its namespace: kernelfake.Namespace's Runner serves ipset from the
// Kernel that kernelfake.Namespace.IPSets returns, so a test hands the
// driver the fake namespace and inspects or breaks the sets here. A
// Kernel alone serves focused tests of the fake itself.
//
// # What it emulates
//
// `ipset restore` (create with or without -exist, add, del, swap,
// destroy, flush, rename; -exist per line or for the whole input), `ipset
// list -name`, `ipset list [-t] [NAME]`, `ipset save [NAME]`, `ipset list
// -o save [NAME]`, `ipset test NAME MEMBER`, and the same commands given
// as arguments (`ipset add NAME MEMBER`, `ipset destroy NAME`, …) to
// simulate an administrator's edits. Of the set options only family,
// maxelem, hashsize, range and counters are emulated (bucketsize and
// initval are accepted, so that the output of save restores). Members are
// canonicalised as the binary and kernel do (10.0.0.1/32 in a hash:net is
// 10.0.0.1, 10.0.0.1/24 is masked to 10.0.0.0/24, "10.0.0.1,80" is TCP,
// an IPv4-compatible IPv6 address prints as ::a.b.c.d), the unspecified
// address is refused in hash:ip and hash:ip,port sets, and errors carry the
// real binary's wording and exit status ("ipset v7.17: Error in line 3:
// Hash is full, cannot add more elements"). A restore stops at its first failing
// line and keeps the lines before it, as the real one mostly does (the real
// binary batches consecutive lines into one kernel message and can lose a
// few just before the failing one); either way a caller must not assume a
// failed restore changed nothing, nor that it changed everything before the
// failing line.
//
// Kernel semantics that matter to a driver are kept: a set referenced by a
// kernel component (SetReferences, standing for an iptables rule) cannot be
// destroyed ("Set cannot be destroyed: it is in use by a kernel
// component"); references stay with the name across a swap; swap requires
// sets of equal type and family; create -exist fails when the existing
// set's header differs; maxelem and bitmap ranges are enforced; types can
// be made unsupported (SetUnsupported), as hash:net,net is on kernels built
// without it.
//
// # Failure injection and inspection
//
// FailNext fails the next N invocations of a subcommand; FailLine fails
// every restore line or command line (`save NAME` included) containing a
// string until ClearFailures. Calls records every
// invocation with its arguments and input; Names, Members, Header and Save
// show the state.
//
// The package owns nothing outside the Kernel value: it runs no binary and
// touches no kernel state.
package ipsetsfake
