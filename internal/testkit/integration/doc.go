// Package integration holds nodeplane's cross-package kernel tests: tests
// that drive several real drivers (ipsets, iptables, routetable) through one
// dataplane.Loop against the kernel, to prove the contracts that no single
// package can prove on its own.
//
// The main one is the loop's apply order: within one apply pass, ip sets
// are created before the iptables rules that match them are written, and
// those rules are removed before the sets are destroyed (the kernel refuses
// to destroy a set a rule still refers to). The tests also check that
// foreign kernel state beside ours survives, that real traffic follows the
// rules, and that a restarted loop adopts what it finds and writes nothing.
//
// Others prove that one bad object never holds the loop back (a route the
// kernel keeps refusing is retried on its own backoff while a route and a
// rule declared after it reach the kernel in the very next pass), and that
// ifacemonitor wired to a routetable Table as its documentation shows wakes
// the loop, so that a re-created interface gets its routes back at once
// rather than at the next periodic resync.
//
// # How it is used
//
// The package has no code of its own, only tests: run them as root with
// `go test ./internal/testkit/integration/`. They are named TestKernel…, are
// Linux-only, and build their own network namespaces with
// internal/testkit/kerneltest; without root they skip (or fail with CI=true or
// NODEPLANE_REQUIRE_KERNEL=1).
//
// # What it never touches
//
// The host's own network namespace: every link, route, rule and set the
// tests create or inspect lives in a namespace the test made and removes.
package integration
