// Package managertest holds what the node managers' tests share (endpoints,
// masquerade, hostips, floatingips, serviceloop, sysctls): Pass, which runs
// one apply pass of managers and drivers synchronously, in the loop's phase
// order, for unit tests on kernelfake; StartLoop and its helpers; and, on
// Linux, the rule backends the kernel tests run on, a conntrack reader, the
// forward counters, a kernel snapshot and a runner that counts what the
// drivers run.
//
// The backends are listed once, in Backends — iptables-legacy,
// iptables-nft and the native nftables writer — and every manager's kernel
// tests range over it, so a new netfilter.Table writer is tested with every
// manager by adding one entry there. A backend also gives the set driver
// its rules match: the kernel's ip sets for iptables, the Table's own sets
// (nftables.IPSets, the netfilter.Sets over an nftables.Table) for nftables.
//
// It owns nothing and touches no kernel state of its own: the kernel tests
// that use it run in namespaces they created with internal/testkit/kerneltest.
package managertest
