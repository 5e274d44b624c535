//go:build linux

// Package kerneltest is nodeplane's harness for kernel tests: tests named
// TestKernel… that run against the real kernel, as root, inside network
// namespaces they create and remove.
//
// # What it owns
//
// Only namespaces it creates itself, named npt-<pid>-<n>, and everything
// inside them. They are bind-mounted in a directory of their own, NetnsDir
// (/run/nodeplane-netns, a shared mount point as iproute2 makes /run/netns),
// and linked from /run/netns, so `ip netns exec` works while a test runs.
// They are not mounted in /run/netns itself: the first `ip netns add` on a
// machine bind-mounts /run/netns over itself and would hide them. A mount
// hidden all the same is still removed, from a private mount namespace. It never changes the host namespace's links, routes, firewall
// or sysctls: links are created with a handle bound to a test namespace (veth
// peers are created directly in their target namespace), sysctls are written
// from a thread inside the namespace and only under net.*, and no test
// traffic leaves the namespaces. The calling goroutine's thread never changes
// namespace; work inside a namespace runs on a separate locked thread that is
// discarded if it cannot be returned.
//
// # Root check
//
// RequireKernel skips a test without root, with a message; with CI=true or
// NODEPLANE_REQUIRE_KERNEL=1 the skip becomes a failure, so CI cannot pass by
// skipping. NewNS and NewTopology call it. RequireCommands does the same for
// missing binaries (ping, iptables, ipset, nft…).
//
// # One namespace
//
// NewNS returns an *NS with `lo` up and registers its removal with
// t.Cleanup: processes started in it are killed, its netlink handle is closed
// and its bind mount and link removed, also when the test fails. NS.Handle is a
// netlink handle bound to it; NS.Do runs Go code on a thread inside it
// (sockets created there stay there); NS.Exec and NS.ExecInput run a binary
// inside it (iptables-restore, ipset, nft -f -) from such a thread, so the
// mount namespace, /sys and bpffs stay as they are; NS.Start starts a
// long-running process. NS.SetSysctl writes the namespace's own net.*
// sysctls. The first NewNS of a process removes namespaces left by test
// processes that died without cleaning up (only the harness's own names; one
// it cannot remove is logged, never a failure).
//
// # Topologies
//
// NewTopology builds N hosts, each with pods:
//
//   - Underlay: with UnderlayBridge every host's eth0 is a veth to port h<N>
//     of bridge br0 in a separate switch namespace (IPv6 and multicast
//     snooping off there); with UnderlayVeth two hosts' eth0 are the two ends
//     of one veth. Host N has 198.18.0.N/24 and fd00:198:18::N/64.
//   - Pods: pod P of host N is a namespace whose eth0 is a veth to vethP in
//     the host (prefix configurable), with 10.244.N.P/32 and
//     fd00:10:244:N::P/128 (N and P in hex for IPv6). Its default routes go
//     via the link-local gateways 169.254.1.1 (onlink) and fe80::1, which
//     resolve through permanent neighbour entries to the host veth's fixed
//     MAC ee:ee:ee:ee:ee:ee, so the host needs no gateway address and no
//     proxy ARP. The host routes each pod address to its veth (scope link).
//   - Hosts have IPv4 and IPv6 forwarding on; every host and pod namespace
//     has IPv6 duplicate address detection off, so addresses work at once,
//     and no ICMP error rate limit, so unreachable probes are answered at
//     once however many came before.
//   - Nothing routes to another host's pods: that is the job of the package
//     under test. Topology.AddPodRoutesViaUnderlay installs plain routes
//     (pod CIDR via the other host's underlay address) to test the wiring
//     end to end.
//
// UnderlayPrefixes, PodCIDRs and PodAddrs compute the address plan.
//
// # Reachability
//
// NS.Ping (ping -c1 -w3), NS.ListenTCP (a Go echo server whose socket lives
// in the namespace) and NS.DialTCP (connect and exchange a token) probe
// connectivity; their errors wrap ErrUnreachable when the network did not
// answer, and not when the harness failed. A Check names a probe; Require
// runs it once, Eventually retries it until a timeout, and Not inverts it
// (only ErrUnreachable counts as a pass). RequireReachable and
// RequireUnreachable are the ping shortcuts.
//
// A typical test:
//
//	func TestKernelPodToPod(t *testing.T) {
//		topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1})
//		a, b := topo.Hosts[0].Pods[0], topo.Hosts[1].Pods[0]
//		kerneltest.RequireUnreachable(t, a.NS, b.IPv4)
//		require.NoError(t, topo.AddPodRoutesViaUnderlay())
//		kerneltest.RequireReachable(t, a.NS, b.IPv4)
//	}
//
// Namespace names include the process ID, so test binaries of different
// packages can run in parallel. The package is Linux-only and meant for
// tests; it is internal to nodeplane.
package kerneltest
