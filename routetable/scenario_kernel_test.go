//go:build linux

package routetable_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// kernelEnv is the scenario environment in a fresh network namespace,
// opened with kernel.Open. Interfaces are veth pairs (this kernel has no
// dummy links); faults are injected by the recorder in front of the
// namespace.
func kernelEnv(t *testing.T, fam rt.Family, table uint32) *env {
	t.Helper()
	nst := kerneltest.NewNS(t)
	ns, err := kernel.Open(nst.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	e := newEnv(t, fam, table, ns, ns)
	rec := e.kernel
	e.arm = func(f failure) {
		rec.mu.Lock()
		rec.fault, rec.faultHit = f, false
		rec.mu.Unlock()
	}
	e.disarm = func() { e.arm(failNone) }
	// The kernel sets a veth's carrier asynchronously once both ends are
	// up; the interface monitor would report it up only then.
	e.waitRunning = func(t *testing.T, name string, on bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			l, err := ns.LinkByName(context.Background(), name)
			return err == nil && l.Running == on
		}, 5*time.Second, time.Millisecond, "%s: carrier never became %v", name, on)
	}
	e.ipCmd = func(t *testing.T, args ...string) {
		t.Helper()
		out, err := nst.Exec(context.Background(), "ip", args...)
		require.NoError(t, err, "ip %v: %s", args, out)
	}
	h := nst.Handle()
	e.renameLink = func(t *testing.T, name, newName string) {
		t.Helper()
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, h.LinkSetDown(l))
		require.NoError(t, h.LinkSetName(l, newName))
		require.NoError(t, h.LinkSetUp(l))
		e.waitRunning(t, newName, true)
	}
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
	return e
}

// TestKernelScenarios runs the scenario suite against the real kernel, in a
// table above 255 and in the main table, for both families, without
// faults and with the faults that hit route writes and dumps.
func TestKernelScenarios(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, table := range []uint32{1000, kernel.TableMain} {
			for _, f := range allFailures {
				if table == kernel.TableMain && f != failNone {
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

			k, err := kernel.Open(host.NS.Path())
			require.NoError(t, err)
			defer k.Close()
			tbl, err := rt.New(rt.Options{Kernel: k, Family: fam, Table: kernel.TableMain, InterfacePatterns: []string{"^np-"}})
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

// TestKernelCoexistingForeignRoutes is coexistingForeignRoutes in a fresh
// namespace of the running kernel.
func TestKernelCoexistingForeignRoutes(t *testing.T) {
	kerneltest.RequireKernel(t)
	coexistingForeignRoutes(t, func(t *testing.T) *env { return kernelEnv(t, rt.IPv6, kernel.TableMain) })
}

// TestKernelRouteEventsThroughMonitor is routeEventsThroughMonitor in
// fresh namespaces of the running kernel, for both families, in the main
// table and a table of its own; routes are deleted by iproute2.
func TestKernelRouteEventsThroughMonitor(t *testing.T) {
	kerneltest.RequireCommands(t, "ip")
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for _, table := range []uint32{1000, kernel.TableMain} {
			t.Run(fmt.Sprintf("%v/table%d", fam, table), func(t *testing.T) { routeEventsThroughMonitor(t, kernelEnv(t, fam, table)) })
		}
	}
}

// TestKernelNexthopObjectRoutes: routes of ours (our protocol) that use a
// nexthop object (`ip route … nhid N`, written by hand or another tool
// with our mark). One nobody wants is deleted: the kernel matches a delete
// naming an interface against none of its hops, so the Table deletes it by
// its key (it answered "no such route", taken as already gone, at every
// resync). One with the key of a desired route is replaced by the desired
// form, which the Table writes without nexthop objects.
func TestKernelNexthopObjectRoutes(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip")
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			self, gw, stale, wanted := "192.0.2.1/24", "192.0.2.2", "10.56.0.0/24", "10.57.0.0/24"
			if fam == rt.IPv6 {
				self, gw, stale, wanted = "2001:db8::1/64", "2001:db8::2", "fd56::/64", "fd57::/64"
			}
			ctx := context.Background()
			k, ip := vethNamespace(t, self)
			ip("nexthop", "add", "id", "7", "via", gw, "dev", "v0")
			ip("route", "add", stale, "nhid", "7", "proto", "78", "table", "1000")
			ip("route", "add", wanted, "nhid", "7", "proto", "78", "table", "1000")

			routes, err := kernelRoutes(ctx, k, fam)
			require.NoError(t, err)
			require.Len(t, routes, 2)
			for _, r := range routes {
				assert.Equal(t, uint32(7), r.NexthopID, "%v: the dump names the nexthop object", r.Dst)
			}
			tbl, err := rt.New(rt.Options{Kernel: k, Family: fam, Table: 1000, Ownership: rt.ExclusivePolicy{}})
			require.NoError(t, err)
			v0, err := k.LinkByName(ctx, "v0")
			require.NoError(t, err)
			tbl.OnIfaceStateChanged("v0", v0.Index, kernel.LinkUp)
			require.NoError(t, tbl.SetRoutes(10, "v0", []rt.Target{{CIDR: netip.MustParsePrefix(wanted), Gateway: netip.MustParseAddr(gw)}}))
			for range 2 {
				tbl.QueueResync()
				_, err = tbl.Apply(ctx)
				require.NoError(t, err)
			}
			routes, err = kernelRoutes(ctx, k, fam)
			require.NoError(t, err)
			require.Len(t, routes, 1, "%v", routes)
			assert.Equal(t, netip.MustParsePrefix(wanted), routes[0].Dst)
			assert.Zero(t, routes[0].NexthopID, "the desired form, without the nexthop object")
			writes := tbl.Stats().Writes
			tbl.QueueResync()
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			assert.Equal(t, writes, tbl.Stats().Writes, "a resync writes nothing")
		})
	}
}

// vethNamespace is a fresh namespace with a veth pair up, v0 (with
// address self) and v0p, its carrier on; it returns the namespace opened
// with kernel.Open and a runner of iproute2 in it.
func vethNamespace(t *testing.T, self string) (*kernel.Namespace, func(args ...string) string) {
	t.Helper()
	nst := kerneltest.NewNS(t)
	ip := func(args ...string) string {
		t.Helper()
		out, err := nst.Exec(context.Background(), "ip", args...)
		require.NoError(t, err, "ip %v: %s", args, out)
		return string(out)
	}
	ip("link", "add", "v0", "type", "veth", "peer", "name", "v0p")
	ip("addr", "add", self, "dev", "v0", "nodad")
	ip("link", "set", "v0", "up")
	ip("link", "set", "v0p", "up")
	require.Eventually(t, func() bool { return !strings.Contains(ip("link", "show", "v0"), "NO-CARRIER") }, 5*time.Second, 10*time.Millisecond)
	k, err := kernel.Open(nst.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return k, ip
}

// kernelRoutes returns table 1000's routes of family fam.
func kernelRoutes(ctx context.Context, k *kernel.Namespace, fam rt.Family) ([]kernel.Route, error) {
	var out []kernel.Route
	err := k.DumpRoutes(ctx, fam, 1000, func(r *kernel.Route) error {
		out = append(out, *r)
		return nil
	}, func() { out = nil })
	return out, err
}

// TestKernelSourceSpecificRoutesAreApart: a foreign IPv6 source-specific
// route (`from S`) of the destination and metric of one of ours. The
// kernel keeps them apart, and so does the Table: it writes its route
// beside it whether the foreign one was there at the table's read or came
// after (it was taken for a foreign holder of the key and ours refused).
func TestKernelSourceSpecificRoutesAreApart(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip")
	ctx := context.Background()
	k, ip := vethNamespace(t, "2001:db8::1/64")
	ip("-6", "route", "add", "2001:db8:55::/64", "from", "2001:db8:77::/64", "via", "2001:db8::2", "dev", "v0", "proto", "static")
	v0, err := k.LinkByName(ctx, "v0")
	require.NoError(t, err)
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv6, Table: kernel.TableMain})
	require.NoError(t, err)
	tbl.OnIfaceStateChanged("v0", v0.Index, kernel.LinkUp)
	require.NoError(t, tbl.SetRoutes(10, "v0", []rt.Target{{CIDR: netip.MustParsePrefix("2001:db8:55::/64"), Gateway: netip.MustParseAddr("2001:db8::3")}}))
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	out := ip("-6", "route", "show", "2001:db8:55::/64")
	assert.Contains(t, out, "from 2001:db8:77::/64 via 2001:db8::2", "the foreign route stays")
	assert.Contains(t, out, "2001:db8:55::/64 via 2001:db8::3 dev v0 proto 78", "ours is written beside it")
	st, err := tbl.State(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Drift)
	assert.Empty(t, st.Failing)
}
