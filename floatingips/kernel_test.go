//go:build linux

package floatingips_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// TestKernelFloatingIP gives a pod of host1 a floating IP that host2
// routes to host1: host2 connects to the floating IP and reaches the pod
// (TCP completes, so the replies came from the floating IP, and conntrack
// shows the destination translated to the pod); the pod's own connection
// to host2, which has no route to the pod, leaves from the floating IP; the
// pod reaches itself through its floating IP, and so does host1.
func TestKernelFloatingIP(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			kerneltest.RequireCommands(t, "conntrack")
			ctx := context.Background()
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{
				Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f),
			})
			host1, host2 := topo.Hosts[0], topo.Hosts[1]
			pod := host1.Pods[0]
			podIP := managertest.Pick(f, pod.Addrs()...)
			host1IP, host2IP := managertest.Pick(f, host1.UnderlayAddrs()...), managertest.Pick(f, host2.UnderlayAddrs()...)
			floating, ip := netip.MustParseAddr("198.51.100.10"), []string{"ip"}
			if f == ipfamily.IPv6 {
				floating, ip = netip.MustParseAddr("2001:db8:f::10"), []string{"ip", "-6"}
			}
			_, err := host2.NS.Exec(ctx, ip[0], append(ip[1:], "route", "add", floating.String(), "via", host1IP.String())...)
			require.NoError(t, err)

			podServer, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(podIP, 0))
			viaFloating := netip.AddrPortFrom(floating, podServer.Port())
			fromHost2 := kerneltest.TCPCheck(host2.NS, viaFloating)
			outsideServer, _ := host2.NS.ListenTCP(t, netip.AddrPortFrom(host2IP, 0))
			fromPod := kerneltest.TCPCheck(pod.NS, outsideServer)
			kerneltest.Require(t, kerneltest.Not(fromHost2))
			kerneltest.Require(t, kerneltest.Not(fromPod)) // host2 cannot answer the pod's address

			k := managertest.Open(t, host1.NS)
			nat := b.NewTable(t, k, "nat", f, "npf-")
			m, err := floatingips.New(floatingips.Options{Family: f, Table: nat,
				DNATChain: "npf-dnat", SNATChain: "npf-snat", OutboundSNAT: true})
			require.NoError(t, err)
			loop := managertest.StartLoop(t, dataplane.Options{}, []dataplane.Manager{m}, nat)
			managertest.Send(t, loop, cluster.Endpoint{ID: "pod1", Iface: "veth0",
				Addrs: []netip.Prefix{netip.PrefixFrom(podIP, podIP.BitLen())}, FloatingIPs: []cluster.NAT{{Floating: floating, Internal: podIP}}})
			managertest.InSync(loop)

			// In: host2 → floating IP reaches the pod; the replies leave
			// from the floating IP (TCP would not complete otherwise).
			kerneltest.Eventually(t, managertest.Converge, fromHost2)
			t.Logf("%s nat table on host1:\n%s", b.Name, b.Dump(t, host1.NS, "nat", f))
			flows := managertest.Conntrack(t, host1.NS, f, "-p", "tcp", "--orig-dst", floating.String())
			require.NotEmpty(t, flows)
			for _, fl := range flows {
				t.Logf("host1 conntrack, inbound: %s", fl.Line)
				to, dnat := fl.DNAT()
				assert.True(t, dnat, fl.Line)
				assert.Equal(t, podIP, to, "destination translated to the pod")
				_, snat := fl.SNAT()
				assert.False(t, snat, "the client's address is kept: %s", fl.Line)
			}

			// Out: the pod's own connection leaves from the floating IP.
			kerneltest.Require(t, fromPod)
			flows = managertest.Conntrack(t, host1.NS, f, "-p", "tcp", "--orig-src", podIP.String(), "--orig-dst", host2IP.String())
			require.NotEmpty(t, flows)
			for _, fl := range flows {
				t.Logf("host1 conntrack, outbound: %s", fl.Line)
				to, snat := fl.SNAT()
				assert.True(t, snat, fl.Line)
				assert.Equal(t, floating, to, "source translated to the floating IP")
			}

			// Hairpin: the pod reaches itself through its floating IP, and
			// host1 reaches it too (OUTPUT).
			kerneltest.Require(t, kerneltest.TCPCheck(pod.NS, viaFloating))
			flows = managertest.Conntrack(t, host1.NS, f, "-p", "tcp", "--orig-src", podIP.String(), "--orig-dst", floating.String())
			require.NotEmpty(t, flows)
			for _, fl := range flows {
				t.Logf("host1 conntrack, hairpin: %s", fl.Line)
				to, _ := fl.DNAT()
				from, _ := fl.SNAT()
				assert.Equal(t, podIP, to)
				assert.Equal(t, floating, from)
			}
			// A host routes a connection before its OUTPUT hook translates
			// it, so it needs a route towards the floating IP, such as the
			// default route every real host has.
			_, err = host1.NS.Exec(ctx, ip[0], append(ip[1:], "route", "add", "default", "via", host2IP.String())...)
			require.NoError(t, err)
			kerneltest.Require(t, kerneltest.TCPCheck(host1.NS, viaFloating))

			// Withdrawn: host2 no longer reaches the pod.
			managertest.Send(t, loop, cluster.EndpointRemove{ID: "pod1"})
			kerneltest.Eventually(t, managertest.Converge, kerneltest.Not(kerneltest.TCPCheck(host2.NS, viaFloating)))
		})
	})
}
