//go:build linux

package routetable_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/kerneltest"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// kernelEnv is the scenario environment in a fresh network namespace.
// Interfaces are veth pairs (this kernel has no dummy links); faults are
// injected by the recorder in front of the real kernel.
func kernelEnv(t *testing.T, fam rt.Family, table uint32) *env {
	t.Helper()
	ns := kerneltest.NewNS(t)
	// IPv6 flushes a link's global addresses when it goes down, and with
	// them the gateways' subnets; keep them, as hosts with static
	// addresses do.
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.keep_addr_on_down", "1"))
	k, err := rt.OpenKernel(ns.NsHandle())
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	rec := &recorder{k: k}
	e := &env{fam: fam, table: table, kernel: rec, clock: clock.NewFake(t0)}
	e.arm = func(f failure) {
		rec.mu.Lock()
		rec.fault, rec.faultHit = f, false
		rec.mu.Unlock()
	}
	e.disarm = func() { e.arm(failNone) }
	h := ns.Handle()
	link := func(t *testing.T, name string) netlink.Link {
		t.Helper()
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		return l
	}
	// running waits until the link has carrier (the kernel sets it
	// asynchronously after a veth pair comes up), as the interface monitor
	// would report it up only then.
	carrier := func(t *testing.T, name string, on bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			l, err := h.LinkByName(name)
			return err == nil && (l.Attrs().Flags&net.FlagRunning != 0) == on
		}, 5*time.Second, time.Millisecond, "%s: carrier never became %v", name, on)
	}
	running := func(t *testing.T, name string) { t.Helper(); carrier(t, name, true) }
	n := 0
	peers := map[int]string{} // by index: a rename keeps the peer
	e.addLink = func(t *testing.T, name string) int {
		t.Helper()
		n++
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: fmt.Sprintf("peer%d", n)}
		require.NoError(t, h.LinkAdd(veth))
		l := link(t, name)
		addr := e.pfx(linkAddr(n))
		a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen())}}
		if fam == rt.IPv6 {
			a.Flags = unix.IFA_F_NODAD
		}
		require.NoError(t, h.AddrAdd(l, a))
		require.NoError(t, h.LinkSetUp(link(t, veth.PeerName)))
		require.NoError(t, h.LinkSetUp(l))
		running(t, name)
		peers[l.Attrs().Index] = veth.PeerName
		return l.Attrs().Index
	}
	// The carrier of a veth is its peer being up.
	e.setCarrier = func(t *testing.T, name string, on bool) {
		t.Helper()
		peer := link(t, peers[link(t, name).Attrs().Index])
		if on {
			require.NoError(t, h.LinkSetUp(peer))
		} else {
			require.NoError(t, h.LinkSetDown(peer))
		}
		carrier(t, name, on)
	}
	e.setUp = func(t *testing.T, name string, up bool) {
		t.Helper()
		if up {
			require.NoError(t, h.LinkSetUp(link(t, name)))
			running(t, name)
		} else {
			require.NoError(t, h.LinkSetDown(link(t, name)))
		}
	}
	e.deleteLink = func(t *testing.T, name string) { t.Helper(); require.NoError(t, h.LinkDel(link(t, name))) }
	e.renameLink = func(t *testing.T, name, newName string) {
		t.Helper()
		l := link(t, name)
		require.NoError(t, h.LinkSetDown(l))
		require.NoError(t, h.LinkSetName(l, newName))
		require.NoError(t, h.LinkSetUp(l))
		running(t, newName)
	}
	write := func(t *testing.T, kind rt.OpKind, r rt.KernelRoute) {
		t.Helper()
		errs := k.ApplyRoutes(context.Background(), []rt.RouteOp{{Kind: kind, Route: r}})
		require.NoError(t, errs[0], "%v %v", kind, r.Dst)
	}
	e.addRoute = func(t *testing.T, r rt.KernelRoute) { t.Helper(); write(t, rt.OpAdd, r) }
	e.deleteRoute = func(t *testing.T, r rt.KernelRoute) { t.Helper(); write(t, rt.OpDelete, r) }
	// Conntrack entries created through ctnetlink (UDP, unreplied), so the
	// scenario checks the real deletion; TestKernelConntrackOfMovedIPDeleted
	// does it with real traffic.
	ports := uint16(40000)
	e.addFlow = func(t *testing.T, src, dst netip.Addr) {
		t.Helper()
		ports++
		flow := &netlink.ConntrackFlow{
			FamilyType: uint8(fam.AF()),
			Forward:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), SrcPort: ports, DstPort: 53},
			Reverse:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: dst.AsSlice(), DstIP: src.AsSlice(), SrcPort: 53, DstPort: ports},
			TimeOut:    300,
		}
		require.NoError(t, h.ConntrackCreate(netlink.ConntrackTable, netlink.InetFamily(fam.AF()), flow))
	}
	e.flows = func(t *testing.T) []string {
		t.Helper()
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(fam.AF()))
		require.NoError(t, err)
		var out []string
		for _, f := range flows {
			s, _ := netip.AddrFromSlice(f.Forward.SrcIP)
			d, _ := netip.AddrFromSlice(f.Forward.DstIP)
			if fam == rt.IPv4 {
				s, d = s.Unmap(), d.Unmap()
			}
			out = append(out, fmt.Sprintf("%v %v", s, d))
		}
		return out
	}
	e.neighbors = func(t *testing.T) []rt.Neighbor {
		ns, err := k.Neighbors(context.Background(), fam)
		require.NoError(t, err)
		return ns
	}
	return e
}

// TestKernelScenarios runs the scenario suite against the real kernel, in a
// table above 255 and in the main table, for both families, without
// faults and with the faults that hit route writes and dumps.
func TestKernelScenarios(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, table := range []uint32{1000, rt.TableMain} {
			for _, f := range allFailures {
				if table == rt.TableMain && f != failNone {
					continue
				}
				t.Run(fmt.Sprintf("%v/table%d/%s", fam, table, f), func(t *testing.T) {
					for _, sc := range scenarios {
						t.Run(sc.name, func(t *testing.T) { sc.run(t, kernelEnv(t, fam, table), f) })
					}
				})
			}
		}
	}
}

// TestKernelConntrackOfMovedIPDeleted moves a pod address's route to
// another interface through the Table while real flows to the pod exist,
// and checks with netlink that exactly those conntrack entries are gone.
func TestKernelConntrackOfMovedIPDeleted(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables", "ip6tables", "ping")
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			stack := kerneltest.IPv4Only
			if fam == rt.IPv6 {
				stack = kerneltest.IPv6Only
			}
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2, Stack: stack, PodIfacePrefix: "np-"})
			host := topo.Hosts[0]
			p1, p2 := host.Pods[0], host.Pods[1]
			addr := func(p *kerneltest.Pod) netip.Addr {
				if fam == rt.IPv4 {
					return p.IPv4
				}
				return p.IPv6
			}
			ctx := context.Background()
			// Conntrack is per namespace and only tracks once something
			// needs it: a conntrack match in the host's forward chain.
			ipt := "iptables"
			if fam == rt.IPv6 {
				ipt = "ip6tables"
			}
			_, err := host.NS.Exec(ctx, ipt, "-A", "FORWARD", "-m", "conntrack", "--ctstate", "NEW,ESTABLISHED,RELATED", "-j", "ACCEPT")
			require.NoError(t, err)

			k, err := rt.OpenKernel(host.NS.NsHandle())
			require.NoError(t, err)
			defer k.Close()
			tbl, err := rt.New(rt.Options{Kernel: k, Family: fam, Table: rt.TableMain, InterfacePatterns: []string{"^np-"}})
			require.NoError(t, err)
			host1 := netip.PrefixFrom(addr(p1), addr(p1).BitLen())
			host2 := netip.PrefixFrom(addr(p2), addr(p2).BitLen())
			require.NoError(t, tbl.SetRoutes(classLocal, p1.HostVeth, []rt.Target{{CIDR: host1}}))
			require.NoError(t, tbl.SetRoutes(classLocal, p2.HostVeth, []rt.Target{{CIDR: host2}}))
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)

			// Real flows: pod1 -> pod2 (ICMP and TCP, forwarded by the host),
			// and host -> pod1, which must survive.
			kerneltest.Require(t, kerneltest.PingCheck(p1.NS, addr(p2)))
			server, _ := p2.NS.ListenTCP(t, netip.AddrPortFrom(addr(p2), 0))
			kerneltest.Require(t, kerneltest.TCPCheck(p1.NS, server))
			kerneltest.Require(t, kerneltest.PingCheck(host.NS, addr(p1)))
			withP2, other := flowsWith(t, host.NS, fam, addr(p2), addr(p1))
			require.GreaterOrEqual(t, withP2, 2, "ICMP and TCP flows to pod2 are tracked in the host namespace")
			require.Positive(t, other)

			// Pod2's address moves to pod1's interface.
			require.NoError(t, tbl.RouteUpdate(classLocal-1, p1.HostVeth, rt.Target{CIDR: host2}))
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			withP2, otherAfter := flowsWith(t, host.NS, fam, addr(p2), addr(p1))
			assert.Zero(t, withP2, "the moved address's flows are deleted")
			assert.Equal(t, other, otherAfter, "other flows stay")
			routes, err := host.NS.Handle().RouteListFiltered(fam.AF(), &netlink.Route{Dst: &net.IPNet{IP: addr(p2).AsSlice(), Mask: net.CIDRMask(addr(p2).BitLen(), addr(p2).BitLen())}}, netlink.RT_FILTER_DST)
			require.NoError(t, err)
			require.Len(t, routes, 1)
			l1, err := host.NS.Handle().LinkByName(p1.HostVeth)
			require.NoError(t, err)
			assert.Equal(t, l1.Attrs().Index, routes[0].LinkIndex)
			assert.Equal(t, netlink.RouteProtocol(rt.DefaultProtocol), routes[0].Protocol)
		})
	}
}

// flowsWith counts the conntrack entries of the host namespace that involve
// a, and those that involve only b.
func flowsWith(t *testing.T, ns *kerneltest.NS, fam rt.Family, a, b netip.Addr) (withA, withB int) {
	t.Helper()
	flows, err := ns.Handle().ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(fam.AF()))
	require.NoError(t, err)
	for _, f := range flows {
		ips := []net.IP{f.Forward.SrcIP, f.Forward.DstIP, f.Reverse.SrcIP, f.Reverse.DstIP}
		has := func(x netip.Addr) bool {
			for _, ip := range ips {
				if ip.Equal(x.AsSlice()) {
					return true
				}
			}
			return false
		}
		switch {
		case has(a):
			withA++
		case has(b):
			withB++
		}
	}
	return withA, withB
}

// TestKernelFakeMatchesKernel makes the same link and route changes on
// routetablefake and on the real kernel and compares the table after each
// step, flags and scopes included: routes going with their interface,
// kept (linkdown) through a lost carrier and written through one,
// multipath next hops marked dead and revived, and the IPv4/IPv6
// difference when a multipath route's link is deleted.
func TestKernelFakeMatchesKernel(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			envs := []*env{fakeEnv(fam, 1000), kernelEnv(t, fam, 1000)}
			each := func(do func(e *env)) {
				for _, e := range envs {
					do(e)
				}
			}
			compare := func(step string) {
				t.Helper()
				fake, kernel := envs[0].detailed(t), envs[1].detailed(t)
				require.NotEmpty(t, kernel, step)
				assert.Equal(t, kernel, fake, "after %s: kernel (-) vs fake (+)", step)
			}
			idx := map[*env][2]int{}
			each(func(e *env) { idx[e] = [2]int{e.addLink(t, "np-a"), e.addLink(t, "np-b")} })
			route := func(e *env, dst string, r rt.KernelRoute) rt.KernelRoute {
				r.Family, r.Table, r.Dst, r.Protocol = e.fam, e.table, e.pfx(dst), rt.DefaultProtocol
				if r.Type == 0 {
					r.Type = rt.RTNUnicast
				}
				return r
			}
			each(func(e *env) {
				a, b := idx[e][0], idx[e][1]
				e.addRoute(t, route(e, "10.0.1.0/24", rt.KernelRoute{OIF: a, Scope: rt.ScopeLink}))
				e.addRoute(t, route(e, "10.0.2.0/24", rt.KernelRoute{OIF: a, Gateway: e.gw(1)}))
				e.addRoute(t, route(e, "10.0.3.0/24", rt.KernelRoute{OIF: b, Scope: rt.ScopeLink}))
				e.addRoute(t, route(e, "10.0.4.0/24", rt.KernelRoute{NextHops: []rt.KernelNextHop{
					{OIF: a, Gateway: e.gw(1)}, {OIF: b, Gateway: e.gw(2)},
				}}))
				e.addRoute(t, route(e, "10.0.5.0/24", rt.KernelRoute{Type: rt.RTNBlackhole}))
				// Above what the kernel stores: capped.
				e.addRoute(t, route(e, "10.0.8.0/24", rt.KernelRoute{OIF: a, Scope: rt.ScopeLink, MTU: 70000}))
				if fam == rt.IPv4 {
					e.addRoute(t, route(e, "10.0.6.1/32", rt.KernelRoute{Type: rt.RTNLocal, OIF: a, Scope: rt.ScopeHost}))
				}
			})
			compare("writing")
			each(func(e *env) { e.setCarrier(t, "np-a", false) })
			compare("np-a lost its carrier")
			each(func(e *env) {
				e.addRoute(t, route(e, "10.0.7.0/24", rt.KernelRoute{OIF: idx[e][0], Scope: rt.ScopeLink}))
			})
			compare("a write through np-a without carrier")
			each(func(e *env) { e.setCarrier(t, "np-a", true) })
			compare("np-a got its carrier back")
			each(func(e *env) { e.setUp(t, "np-b", false) })
			compare("np-b down")
			each(func(e *env) { e.setUp(t, "np-b", true) })
			compare("np-b up")
			each(func(e *env) { e.deleteLink(t, "np-b") })
			compare("np-b deleted")
			each(func(e *env) { e.setUp(t, "np-a", false) })
			compare("np-a down")
		})
	}
}

// TestKernelResyncWritesNothing is TestResyncWritesNothing against the
// real kernel: a few hundred generated targets per family, written in a
// fresh namespace, then a resync that must write nothing. A route the
// kernel stores in another form than the Table compares (an MTU it caps,
// a flag it adds, a field it drops) would be rewritten at every resync,
// forever.
func TestKernelResyncWritesNothing(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, seed := range []uint64{1, 2} {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				written := resyncWritesNothing(t, kernelEnv(t, fam, 1000), seed, 400)
				assert.Greater(t, written, 100, "most generated routes are the kernel's to take")
			})
		}
	}
}
