//go:build linux

package endpoints_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/sysctls"
)

var (
	gatewayMAC = net.HardwareAddr{0xee, 0xee, 0xee, 0xee, 0xee, 0xee}
	podEthMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x05}
	podV4      = netip.MustParsePrefix("10.244.1.5/32")
	podV6      = netip.MustParsePrefix("fd00:10:244:1::5/128")
	gatewayV4  = netip.MustParseAddr("169.254.1.1")
	gatewayV6  = netip.MustParseAddr("fe80::1")
)

// wirePod does what a CNI plugin does for a pod: a veth whose host side is
// hostIf (MAC ee:ee:ee:ee:ee:ee) and whose pod side is eth0 in pod, the
// pod's addresses, and its default routes via link-local gateways that
// resolve to the host side. It adds no route on the host: that is the
// Manager's job.
func wirePod(t *testing.T, host, pod *kerneltest.NS, hostIf string) {
	t.Helper()
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: hostIf, HardwareAddr: gatewayMAC},
		PeerName:         "eth0",
		PeerHardwareAddr: podEthMAC,
		PeerNamespace:    netlink.NsFd(pod.NsHandle()),
	}
	require.NoError(t, host.Handle().LinkAdd(veth))
	hl, err := host.Handle().LinkByName(hostIf)
	require.NoError(t, err)
	require.NoError(t, host.Handle().LinkSetUp(hl))
	pl, err := pod.Handle().LinkByName("eth0")
	require.NoError(t, err)
	require.NoError(t, pod.Handle().LinkSetUp(pl))
	for _, a := range []struct {
		addr netip.Prefix
		gw   netip.Addr
	}{{podV4, gatewayV4}, {podV6, gatewayV6}} {
		require.NoError(t, pod.Handle().AddrAdd(pl, &netlink.Addr{IPNet: &net.IPNet{IP: a.addr.Addr().AsSlice(), Mask: net.CIDRMask(a.addr.Bits(), a.addr.Addr().BitLen())}}))
		fam := netlink.FAMILY_V4
		if a.gw.Is6() {
			fam = netlink.FAMILY_V6
		}
		require.NoError(t, pod.Handle().NeighAdd(&netlink.Neigh{LinkIndex: pl.Attrs().Index, Family: fam, State: netlink.NUD_PERMANENT,
			IP: a.gw.AsSlice(), HardwareAddr: gatewayMAC}))
		def := &netlink.Route{LinkIndex: pl.Attrs().Index, Gw: a.gw.AsSlice(), Family: fam}
		if fam == netlink.FAMILY_V4 {
			def.Flags = int(netlink.FLAG_ONLINK)
		}
		require.NoError(t, pod.Handle().RouteAdd(def))
	}
}

// statusLog collects the statuses of both managers.
type statusLog struct {
	mu   sync.Mutex
	last map[ipfamily.Family]endpoints.Status
	all  []string
}

func (l *statusLog) add(s endpoints.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last[s.Family] = s
	l.all = append(l.all, s.String())
}

func (l *statusLog) state(f ipfamily.Family) endpoints.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[f].State
}

// waitFor polls cond until it holds, failing the test with what() after
// managertest.Converge.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(managertest.Converge)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKernelEndpointRoutesComeBack wires both families' managers as the
// package documentation says (an interface monitor wired to the loop, which
// hands its link updates to the managers)
// for a pod whose veth a CNI plugin makes: the routes, static neighbours
// and sysctls appear and the host reaches the pod; when the veth is deleted
// the status says interface-missing and the routes are gone; when it is
// re-created (a new index, the kernel's default sysctls) everything comes
// back and the host reaches the pod again.
func TestKernelEndpointRoutesComeBack(t *testing.T) {
	ctx := context.Background()
	host, pod := kerneltest.NewNS(t), kerneltest.NewNS(t)
	for _, ns := range []*kerneltest.NS{host, pod} {
		require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.accept_dad", "0"))
		require.NoError(t, ns.SetSysctl("net.ipv6.conf.default.accept_dad", "0"))
	}
	// The host's own addresses, on an empty bridge that keeps its carrier,
	// so its pings have a source address the pod can answer.
	k := managertest.Open(t, host)
	br, err := k.AddLink(ctx, kernel.Link{Name: "br-host", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.NoError(t, k.SetLinkUp(ctx, br.Index, true))
	for _, p := range []string{"198.18.0.1/24", "fd00:198:18::1/64"} {
		require.NoError(t, k.AddAddr(ctx, kernel.Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix(p)}))
	}

	statuses := &statusLog{last: map[ipfamily.Family]endpoints.Status{}}
	var managers []dataplane.Manager
	// One sysctls driver keeps both families' interface sysctls.
	sys, err := sysctls.New(sysctls.Options{Kernel: k, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	drivers := []dataplane.Driver{sys}
	for _, f := range ipfamily.All {
		routes, err := routetable.New(routetable.Options{Kernel: k, Family: f, Table: kernel.TableMain, InterfacePatterns: []string{`^npveth`}})
		require.NoError(t, err)
		m, err := endpoints.New(endpoints.Options{Family: f, Kernel: k, Routes: routes, SysctlDriver: sys, StaticNeighbors: true, OnStatus: statuses.add})
		require.NoError(t, err)
		managers, drivers = append(managers, m), append(drivers, m.RouteDriver())
	}
	loop := managertest.StartLoop(t, dataplane.Options{}, managers, drivers...)
	managertest.RunMonitor(t, ifacemonitor.Options{
		Kernel:      k,
		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
		OnAddrs:     loop.OnAddrs,
		OnInSync:    loop.InterfacesInSync,
	})

	managertest.Send(t, loop, cluster.Endpoint{ID: "default/pod1", Iface: "npveth1",
		Addrs: []netip.Prefix{podV4, podV6}, MAC: podEthMAC})
	loop.DatastoreInSync()

	show := func() string {
		var b strings.Builder
		for _, c := range [][]string{{"ip", "link", "show", "npveth1"}, {"ip", "route", "show", "dev", "npveth1"},
			{"ip", "-6", "route", "show", "dev", "npveth1"}, {"ip", "neigh", "show", "dev", "npveth1"}, {"ip", "-6", "neigh", "show", "dev", "npveth1"}} {
			out, _ := host.Exec(ctx, c[0], c[1:]...)
			fmt.Fprintf(&b, "$ %s\n%s", strings.Join(c, " "), out)
		}
		statuses.mu.Lock()
		fmt.Fprintf(&b, "statuses: %v\n", statuses.all)
		statuses.mu.Unlock()
		return b.String()
	}
	both := func(s endpoints.State) func() bool {
		return func() bool { return statuses.state(ipfamily.IPv4) == s && statuses.state(ipfamily.IPv6) == s }
	}

	// No interface yet.
	waitFor(t, show, both(endpoints.StateInterfaceMissing))

	check := func(round string) int {
		t.Helper()
		waitFor(t, show, both(endpoints.StateProgrammed))
		t.Logf("%s:\n%s", round, show())
		l, err := k.LinkByName(ctx, "npveth1")
		require.NoError(t, err)
		for _, c := range []struct {
			f ipfamily.Family
			p netip.Prefix
		}{{ipfamily.IPv4, podV4}, {ipfamily.IPv6, podV6}} {
			var found bool
			require.NoError(t, k.DumpRoutes(ctx, c.f, kernel.TableMain, func(r *kernel.Route) error {
				if r.Dst == c.p && r.OIF == l.Index && r.Protocol == routetable.DefaultProtocol {
					found = true
				}
				return nil
			}, nil))
			assert.True(t, found, "%s: route to %v via npveth1 (index %d)", round, c.p, l.Index)
			neighs, err := k.Neighbors(ctx, c.f, l.Index)
			require.NoError(t, err)
			var permanent bool
			for _, n := range neighs {
				permanent = permanent || (n.IP == c.p.Addr() && n.State&kernel.NUDPermanent != 0 && n.MAC.String() == podEthMAC.String())
			}
			assert.True(t, permanent, "%s: static neighbour for %v", round, c.p.Addr())
		}
		for key, want := range map[string]string{
			"net/ipv4/conf/npveth1/proxy_arp": "1", "net/ipv4/conf/npveth1/rp_filter": "1", "net/ipv4/conf/npveth1/forwarding": "1",
			"net/ipv4/neigh/npveth1/proxy_delay": "0",
			"net/ipv6/conf/npveth1/proxy_ndp":    "1", "net/ipv6/conf/npveth1/forwarding": "1", "net/ipv6/conf/npveth1/accept_ra": "0",
		} {
			v, err := host.Sysctl(key)
			require.NoError(t, err)
			assert.Equal(t, want, v, "%s: %s", round, key)
		}
		kerneltest.Eventually(t, managertest.Converge, kerneltest.PingCheck(host, podV4.Addr()))
		kerneltest.Eventually(t, managertest.Converge, kerneltest.PingCheck(host, podV6.Addr()))
		return l.Index
	}

	// The CNI plugin makes the interface: everything appears.
	wirePod(t, host, pod, "npveth1")
	first := check("first interface")

	// The pod's interface is deleted: missing, no route.
	hl, err := host.Handle().LinkByName("npveth1")
	require.NoError(t, err)
	require.NoError(t, host.Handle().LinkDel(hl))
	waitFor(t, show, both(endpoints.StateInterfaceMissing))
	kerneltest.Require(t, kerneltest.Not(kerneltest.PingCheck(host, podV4.Addr())))

	// Re-created, with the kernel's defaults: everything comes back.
	wirePod(t, host, pod, "npveth1")
	v, err := host.Sysctl("net/ipv4/conf/npveth1/proxy_arp")
	require.NoError(t, err)
	t.Logf("re-created npveth1: proxy_arp is %s before the manager sees it", v)
	second := check("re-created interface")
	assert.NotEqual(t, first, second, "a new interface index")
}
