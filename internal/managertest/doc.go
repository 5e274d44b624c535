// Package managertest holds what the node managers' tests share (endpoints,
// masquerade, hostips, floatingips, serviceloop, sysctls): Pass, which runs
// one apply pass of managers and drivers synchronously, in the loop's phase
// order, for unit tests on kernelfake; and, on Linux, the rule backends the
// kernel tests run on, a conntrack reader and a runner that counts what the
// drivers run.
//
// The backends are listed once, in Backends: every manager's kernel tests
// range over it, so a new netfilter.Table writer (the nftables one) is
// tested with every manager by adding one entry there.
//
// It owns nothing and touches no kernel state of its own: the kernel tests
// that use it run in namespaces they created with internal/kerneltest.
package managertest
