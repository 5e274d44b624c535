//go:build linux

package kerneltest

import (
	"fmt"
	"net/netip"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
)

func linkNames(t *testing.T, ns *NS) []string {
	t.Helper()
	links, err := ns.Handle().LinkList()
	require.NoError(t, err)
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	sort.Strings(names)
	return names
}

func addrsOn(t *testing.T, ns *NS, ifname string) []netip.Prefix {
	t.Helper()
	link, err := ns.Handle().LinkByName(ifname)
	require.NoError(t, err)
	addrs, err := ns.Handle().AddrList(link, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var out []netip.Prefix
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		require.True(t, ok)
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}

// checkWiring verifies the namespaces and links NewTopology promises.
func checkWiring(t *testing.T, topo *Topology) {
	t.Helper()
	opts := topo.Options
	require.Len(t, topo.Hosts, opts.Hosts)
	if opts.Underlay == UnderlayBridge {
		require.NotNil(t, topo.Switch)
		want := []string{BridgeName, "lo"}
		for _, h := range topo.Hosts {
			want = append(want, fmt.Sprintf("h%d", h.Number))
		}
		sort.Strings(want)
		assert.Equal(t, want, linkNames(t, topo.Switch))
	} else {
		assert.Nil(t, topo.Switch)
	}
	for i, h := range topo.Hosts {
		assert.Equal(t, i+1, h.Number)
		assert.Equal(t, fmt.Sprintf("host%d", i+1), h.Name)
		u4, u6, err := UnderlayPrefixes(h.Number)
		require.NoError(t, err)
		c4, c6, err := PodCIDRs(h.Number)
		require.NoError(t, err)
		var wantUnderlay []netip.Prefix
		if opts.Stack.IPv4() {
			assert.Equal(t, u4, h.UnderlayIPv4)
			assert.Equal(t, c4, h.PodCIDRv4)
			wantUnderlay = append(wantUnderlay, u4)
		} else {
			assert.False(t, h.UnderlayIPv4.IsValid() || h.PodCIDRv4.IsValid())
		}
		if opts.Stack.IPv6() {
			assert.Equal(t, u6, h.UnderlayIPv6)
			assert.Equal(t, c6, h.PodCIDRv6)
			wantUnderlay = append(wantUnderlay, u6)
		} else {
			assert.False(t, h.UnderlayIPv6.IsValid() || h.PodCIDRv6.IsValid())
		}
		assert.ElementsMatch(t, wantUnderlay, addrsOn(t, h.NS, h.UnderlayIf))

		wantLinks := []string{h.UnderlayIf, "lo"}
		require.Len(t, h.Pods, opts.PodsPerHost)
		for j, p := range h.Pods {
			assert.Equal(t, j+1, p.Number)
			assert.Same(t, h, p.Host)
			assert.Equal(t, fmt.Sprintf("%s%d", opts.PodIfacePrefix, j+1), p.HostVeth)
			wantLinks = append(wantLinks, p.HostVeth)
			veth, err := h.NS.Handle().LinkByName(p.HostVeth)
			require.NoError(t, err)
			assert.Equal(t, GatewayMAC, veth.Attrs().HardwareAddr.String())
			assert.Equal(t, []string{p.Iface, "lo"}, linkNames(t, p.NS))

			a4, a6, err := PodAddrs(h.Number, p.Number)
			require.NoError(t, err)
			var wantPod []netip.Prefix
			for _, a := range []netip.Addr{a4, a6} {
				if (a.Is4() && opts.Stack.IPv4()) || (a.Is6() && opts.Stack.IPv6()) {
					wantPod = append(wantPod, netip.PrefixFrom(a, a.BitLen()))
				}
			}
			assert.ElementsMatch(t, wantPod, addrsOn(t, p.NS, p.Iface))
			assert.Len(t, p.Addrs(), len(wantPod))
		}
		sort.Strings(wantLinks)
		assert.Equal(t, wantLinks, linkNames(t, h.NS))
	}
}

func TestKernelTopology(t *testing.T) {
	RequireKernel(t)
	RequireCommands(t, "ping")
	tests := []TopologyOptions{
		{Hosts: 2, PodsPerHost: 2, Underlay: UnderlayBridge},
		{Hosts: 3, PodsPerHost: 2, Underlay: UnderlayBridge},
		{Hosts: 2, PodsPerHost: 2, Underlay: UnderlayVeth},
		{Hosts: 2, PodsPerHost: 1, Underlay: UnderlayBridge, Stack: IPv4Only, PodIfacePrefix: "cali"},
		{Hosts: 2, PodsPerHost: 1, Underlay: UnderlayVeth, Stack: IPv6Only},
	}
	for _, opts := range tests {
		t.Run(fmt.Sprintf("%s-%dhosts-%s", opts.Underlay, opts.Hosts, opts.Stack), func(t *testing.T) {
			topo := NewTopology(t, opts)
			checkWiring(t, topo)

			// Hosts reach each other over the underlay.
			for _, a := range topo.Hosts {
				for _, b := range topo.Hosts {
					for _, addr := range b.UnderlayAddrs() {
						RequireReachable(t, a.NS, addr)
					}
				}
			}
			// Pods reach their host and the pods of their host, in both directions.
			for _, h := range topo.Hosts {
				for _, p := range h.Pods {
					for _, addr := range h.UnderlayAddrs() {
						RequireReachable(t, p.NS, addr)
					}
					for _, addr := range p.Addrs() {
						RequireReachable(t, h.NS, addr)
					}
					for _, q := range h.Pods {
						for _, addr := range q.Addrs() {
							RequireReachable(t, p.NS, addr)
						}
					}
				}
			}

			// One echo server per pod, on every address.
			servers := map[*Pod]uint16{}
			for _, p := range topo.Pods() {
				addr, _ := p.NS.ListenTCP(t, netip.AddrPort{})
				servers[p] = addr.Port()
			}

			// No route to another host's pods yet: probe one pair per family.
			a, b := topo.Hosts[0].Pods[0], topo.Hosts[1].Pods[0]
			for _, addr := range b.Addrs() {
				RequireUnreachable(t, a.NS, addr)
			}
			if b.IPv4.IsValid() {
				// IPv4 only: over IPv6 the kernel fails the connect only
				// after one SYN retransmission (about a second).
				Require(t, Not(TCPCheck(a.NS, netip.AddrPortFrom(b.IPv4, servers[b]))))
			}

			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			require.NoError(t, topo.AddPodRoutesViaUnderlay(), "routes are replaced, not duplicated")

			for _, from := range topo.Pods() {
				for _, to := range topo.Pods() {
					if from.Host == to.Host {
						continue
					}
					for _, addr := range to.Addrs() {
						RequireReachable(t, from.NS, addr)
						Require(t, TCPCheck(from.NS, netip.AddrPortFrom(addr, servers[to])))
					}
				}
			}
			// Hosts reach remote pods too.
			for _, addr := range b.Addrs() {
				Eventually(t, 5*time.Second, PingCheck(topo.Hosts[0].NS, addr))
			}
		})
	}
}

func TestKernelTopologyStopsWhenListenerCloses(t *testing.T) {
	topo := NewTopology(t, TopologyOptions{Hosts: 1, PodsPerHost: 2})
	a, b := topo.Hosts[0].Pods[0], topo.Hosts[0].Pods[1]
	addr, stop := b.NS.ListenTCP(t, netip.AddrPortFrom(b.IPv6, 0))
	assert.Equal(t, b.IPv6, addr.Addr())
	assert.NotZero(t, addr.Port())
	Require(t, TCPCheck(a.NS, addr))

	stop()
	stop() // idempotent
	err := a.NS.DialTCP(t.Context(), addr)
	require.ErrorIs(t, err, ErrUnreachable, "connection refused once the server is gone")

	err = a.NS.DialTCP(t.Context(), netip.AddrPort{})
	require.ErrorIs(t, err, ErrInvalid)
	require.NotErrorIs(t, err, ErrUnreachable)
	err = a.NS.Ping(t.Context(), netip.Addr{})
	require.ErrorIs(t, err, ErrInvalid)
}

func TestKernelTopologyNoLeaks(t *testing.T) {
	RequireKernel(t) // the subtest's skip would not stop this test
	RequireCommands(t, "ping")
	home := currentNS(t)
	runtime.GC()
	baseline := runtime.NumGoroutine()

	t.Run("inner", func(t *testing.T) {
		topo := NewTopology(t, TopologyOptions{Hosts: 2, PodsPerHost: 1, Underlay: UnderlayVeth})
		require.NoError(t, topo.AddPodRoutesViaUnderlay())
		a, b := topo.Hosts[0].Pods[0], topo.Hosts[1].Pods[0]
		addr, _ := b.NS.ListenTCP(t, netip.AddrPortFrom(b.IPv4, 0))
		Require(t, TCPCheck(a.NS, addr))
		RequireReachable(t, a.NS, b.IPv6)
		_, err := b.NS.Start(t.Context(), "sleep", "60")
		require.NoError(t, err)
	})

	leakcheck.BackTo(t, 5*time.Second, baseline)
	assert.Empty(t, threadsOutside(t, home))
}
