//go:build linux

package serviceloop_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/serviceloop"
)

// TestKernelServiceLoopDropped builds a real loop — host1 routes the
// service range to host2, which routes it back — and shows that a pod's
// packet to an unhandled service IP circles between the hosts until the
// Manager runs on host1, after which it is dropped in host1's forward path
// (host2 sees none of it), while a service a proxy translated
// (a foreign DNAT rule) and ordinary forwarded traffic still pass.
func TestKernelServiceLoopDropped(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			ctx := context.Background()
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{
				Hosts: 2, PodsPerHost: 2, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f),
			})
			host1, host2 := topo.Hosts[0], topo.Hosts[1]
			pod, pod2 := host1.Pods[0], host1.Pods[1]
			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			host1IP, host2IP := managertest.Pick(f, host1.UnderlayAddrs()...), managertest.Pick(f, host2.UnderlayAddrs()...)
			pod2IP := managertest.Pick(f, pod2.Addrs()...)
			svcCIDR := netip.MustParsePrefix("10.96.0.0/16")
			svcIP, handledIP := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("10.96.0.20")
			ip, ipt := []string{"ip"}, "iptables-nft"
			if f == ipfamily.IPv6 {
				svcCIDR = netip.MustParsePrefix("fd00:96::/112")
				svcIP, handledIP = netip.MustParseAddr("fd00:96::a"), netip.MustParseAddr("fd00:96::14")
				ip, ipt = []string{"ip", "-6"}, "ip6tables-nft"
			}
			_, err := host1.NS.Exec(ctx, ip[0], append(ip[1:], "route", "add", svcCIDR.String(), "via", host2IP.String())...)
			require.NoError(t, err)
			_, err = host2.NS.Exec(ctx, ip[0], append(ip[1:], "route", "add", svcCIDR.String(), "via", host1IP.String())...)
			require.NoError(t, err)

			// Without the Manager the packet loops.
			before := managertest.Forwarded(t, host2.NS, f)
			require.ErrorIs(t, pod.NS.Ping(ctx, svcIP), kerneltest.ErrUnreachable)
			looped := managertest.Forwarded(t, host2.NS, f) - before
			t.Logf("without the manager, host2 forwarded the pod's packets to %s %d times", svcIP, looped)
			require.Greater(t, looped, uint64(1), "the packet came back to host2 at least once")

			// A service a proxy handles: its translation happens before
			// routing, so the Manager never sees the service address.
			server, _ := pod2.NS.ListenTCP(t, netip.AddrPortFrom(pod2IP, 0))
			_, err = host1.NS.Exec(ctx, ipt, "-w", "5", "-t", "nat", "-A", "PREROUTING", "-d", handledIP.String(),
				"-p", "tcp", "--dport", fmt.Sprint(server.Port()), "-j", "DNAT", "--to-destination", pod2IP.String())
			require.NoError(t, err)
			handled := kerneltest.TCPCheck(pod.NS, netip.AddrPortFrom(handledIP, server.Port()))
			kerneltest.Require(t, handled)

			k := managertest.Open(t, host1.NS)
			filter := b.NewTable(t, k, "filter", f, "nps-")
			m, err := serviceloop.New(serviceloop.Options{Family: f, Table: filter, Chain: "nps-svc-loop"})
			require.NoError(t, err)
			loop := managertest.StartLoop(t, dataplane.Options{}, []dataplane.Manager{m}, filter)
			managertest.Send(t, loop, serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{
				netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")}})
			managertest.InSync(loop)
			managertest.WaitReady(t, loop, managertest.Converge)
			t.Logf("%s filter table on host1:\n%s", b.Name, b.Dump(t, host1.NS, "filter", f))

			before1, before2 := managertest.Forwarded(t, host1.NS, f), managertest.Forwarded(t, host2.NS, f)
			require.ErrorIs(t, pod.NS.Ping(ctx, svcIP), kerneltest.ErrUnreachable)
			after1, after2 := managertest.Forwarded(t, host1.NS, f), managertest.Forwarded(t, host2.NS, f)
			// Kernels since 6.x count a forwarded packet before the forward
			// hook, so host1's counter shows the probes that reached its
			// forward path; host2's shows that none went further.
			t.Logf("with the manager: host1's forward path saw %d probes, host2 forwarded %d", after1-before1, after2-before2)
			assert.Zero(t, after2-before2, "nothing left host1: dropped in its forward path")

			kerneltest.Require(t, handled)
			kerneltest.Require(t, kerneltest.PingCheck(pod.NS, host2IP))
		})
	})
}
