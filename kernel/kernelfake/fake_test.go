package kernelfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
	"github.com/nodeplane/nodeplane/kernel"
)

var (
	bg  = context.Background()
	mac = func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	pfx = netip.MustParsePrefix
	ip  = netip.MustParseAddr
)

// routeLines renders the routes of family in table for assertions.
func routeLines(ns *Namespace, family kernel.Family, table uint32) []string {
	defer ns.lock()()
	var out []string
	for _, r := range ns.s.sorted(family, table) {
		out = append(out, ns.s.routeString(r))
	}
	return out
}

// mustLink adds l and returns its index.
func mustLink(t *testing.T, ns *Namespace, l kernel.Link) int {
	t.Helper()
	got, err := ns.AddLink(bg, l)
	require.NoError(t, err)
	return got.Index
}

func veth(name, peer string) kernel.Link {
	return kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: peer}}
}

func TestNewIsAFreshNamespaceWithLoUp(t *testing.T) {
	ns := New(Options{})
	links, err := ns.Links(bg)
	require.NoError(t, err)
	require.Equal(t, []kernel.Link{{Index: 1, Name: "lo", Kind: kernel.KindDevice, Encap: "loopback", MTU: 65536, AdminUp: true, Running: true}}, links)
	assert.Equal(t, []netip.Prefix{pfx("127.0.0.1/8"), pfx("::1/128")}, ns.LinkAddrs("lo"))
	assert.Equal(t, []string{
		"local 127.0.0.0/8 table 255 proto 2 scope 254 metric 0 dev lo src 127.0.0.1",
		"local 127.0.0.1/32 table 255 proto 2 scope 254 metric 0 dev lo src 127.0.0.1",
		"broadcast 127.255.255.255/32 table 255 proto 2 scope 253 metric 0 dev lo src 127.0.0.1",
	}, routeLines(ns, kernel.IPv4, 0))
	assert.Equal(t, []string{"local ::1/128 table 255 proto 2 scope 0 metric 0 dev lo"}, routeLines(ns, kernel.IPv6, 0))
	rules, err := ns.Rules(bg, kernel.IPv4)
	require.NoError(t, err)
	require.Len(t, rules, 3)
	assert.Equal(t, []uint32{0, 32766, 32767}, []uint32{rules[0].Priority, rules[1].Priority, rules[2].Priority})
	rules, err = ns.Rules(bg, kernel.IPv6)
	require.NoError(t, err)
	assert.Len(t, rules, 2)
	for key, want := range map[string]string{"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0",
		"net.ipv4.conf.all.rp_filter": "0", "net.ipv6.conf.default.accept_ra": "1", "net/ipv6/conf/lo/mtu": "65536"} {
		v, err := ns.Sysctl(bg, key)
		require.NoError(t, err, key)
		assert.Equal(t, want, v, key)
	}
	assert.Equal(t, 0, ns.Writes())
}

func TestLinkIndexesIncreaseAndAreNeverReused(t *testing.T) {
	ns := New(Options{})
	a := mustLink(t, ns, kernel.Link{Name: "a", Kind: kernel.KindBridge})
	require.NoError(t, ns.DeleteLink(bg, a))
	b := mustLink(t, ns, kernel.Link{Name: "a", Kind: kernel.KindBridge})
	assert.Equal(t, []int{2, 3}, []int{a, b})
	v := mustLink(t, ns, veth("v0", "v1"))
	peer, ok := ns.Link("v1")
	require.True(t, ok)
	assert.Equal(t, []int{4, 5}, []int{peer.Index, v}, "the peer is created first")
}

func TestAddLinkRefusals(t *testing.T) {
	ns := New(Options{})
	mustLink(t, ns, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	for _, c := range []struct {
		l    kernel.Link
		want error
	}{
		{kernel.Link{Name: "br0", Kind: kernel.KindBridge}, kernel.ErrExists},
		{kernel.Link{Name: "0123456789abcdef", Kind: kernel.KindBridge}, kernel.ErrInvalid},
		{kernel.Link{Name: "a/b", Kind: kernel.KindBridge}, kernel.ErrInvalid},
		{kernel.Link{Name: "..", Kind: kernel.KindBridge}, kernel.ErrInvalid},
		{kernel.Link{Name: "a b", Kind: kernel.KindBridge}, kernel.ErrInvalid},
		{kernel.Link{Name: "t0", Kind: kernel.KindIPIP}, kernel.ErrNotSupported},
		{kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard}, syscall.EOPNOTSUPP},
		{veth("v0", "br0"), kernel.ErrExists},
		{kernel.Link{Name: "vx", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 1, ParentIndex: 42}}, syscall.ENODEV},
		{kernel.Link{Name: "b1", Kind: kernel.KindBridge, MTU: 67}, syscall.EINVAL},
	} {
		_, err := ns.AddLink(bg, c.l)
		assert.ErrorIs(t, err, c.want, c.l.Name)
	}
	_, ok := ns.Link("v0")
	assert.False(t, ok, "a refused veth leaves nothing behind")

	ipip := New(Options{Kinds: []string{kernel.KindIPIP}})
	_, err := ipip.AddLink(bg, kernel.Link{Name: "t0", Kind: kernel.KindIPIP})
	assert.NoError(t, err, "a namespace that supports ipip")
}

func TestVethRunsWhileBothEndsAreUp(t *testing.T) {
	ns := New(Options{})
	a := mustLink(t, ns, veth("a", "b"))
	b, _ := ns.Link("b")
	require.NoError(t, ns.SetLinkUp(bg, a, true))
	l, _ := ns.Link("a")
	assert.Equal(t, kernel.LinkDown, l.State(), "up without carrier")
	require.NoError(t, ns.SetLinkUp(bg, b.Index, true))
	l, _ = ns.Link("a")
	assert.Equal(t, kernel.LinkUp, l.State())
	require.NoError(t, ns.DeleteLink(bg, b.Index))
	_, ok := ns.Link("a")
	assert.False(t, ok, "deleting one end deletes the pair")
}

func TestVethPeerInAnotherNamespace(t *testing.T) {
	host := New(Options{})
	pod := host.NewNamespace(Options{Name: "pod"})
	a := mustLink(t, host, kernel.Link{Name: "cali1", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "eth0", PeerNamespaceFD: pod.FD()}})
	eth0, ok := pod.Link("eth0")
	require.True(t, ok)
	assert.Equal(t, 2, eth0.Index, "indexes are per namespace")
	require.NoError(t, host.SetLinkUp(bg, a, true))
	require.NoError(t, pod.SetLinkUp(bg, eth0.Index, true))
	l, _ := host.Link("cali1")
	assert.True(t, l.Running)
	require.NoError(t, pod.SetLinkUp(bg, eth0.Index, false))
	l, _ = host.Link("cali1")
	assert.False(t, l.Running)
	require.NoError(t, pod.DeleteLink(bg, eth0.Index))
	_, ok = host.Link("cali1")
	assert.False(t, ok)

	_, err := host.AddLink(bg, kernel.Link{Name: "x", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "y", PeerNamespaceFD: 12345}})
	assert.ErrorIs(t, err, syscall.EBADF)
}

func TestBridgeAndTunCarrier(t *testing.T) {
	ns := New(Options{})
	br := mustLink(t, ns, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	require.NoError(t, ns.SetLinkUp(bg, br, true))
	l, _ := ns.Link("br0")
	assert.True(t, l.Running, "an empty bridge that chose its MAC runs")
	require.NoError(t, ns.SetLinkMAC(bg, br, mac("02:00:00:00:00:01")))
	l, _ = ns.Link("br0")
	assert.False(t, l.Running, "an empty bridge given a MAC loses its carrier")

	tun, err := ns.AddTUN("tun0")
	require.NoError(t, err)
	require.NoError(t, ns.SetLinkUp(bg, tun.Index, true))
	l, _ = ns.Link("tun0")
	assert.False(t, l.Running, "no process has the tun open")
	require.NoError(t, ns.SetCarrier("tun0", true))
	l, _ = ns.Link("tun0")
	assert.True(t, l.Running)
	assert.ErrorIs(t, ns.SetCarrier("nope", true), kernel.ErrNotFound)
}

func TestVXLANMTU(t *testing.T) {
	ns := New(Options{})
	br := mustLink(t, ns, kernel.Link{Name: "br0", Kind: kernel.KindBridge, MTU: 9000})
	vx := mustLink(t, ns, kernel.Link{Name: "vx", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 1, Port: 4789, ParentIndex: br}})
	vx6 := mustLink(t, ns, kernel.Link{Name: "vx6", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 2, Port: 4789, ParentIndex: br, Local: ip("fd00::1")}})
	solo := mustLink(t, ns, kernel.Link{Name: "solo", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 3, Port: 4789}})
	for name, want := range map[string]int{"vx": 8950, "vx6": 8930, "solo": 1500} {
		l, _ := ns.Link(name)
		assert.Equal(t, want, l.MTU, name)
	}
	assert.ErrorIs(t, ns.SetLinkMTU(bg, vx, 8951), syscall.EINVAL)
	assert.NoError(t, ns.SetLinkMTU(bg, vx, 1450))
	assert.NoError(t, ns.SetLinkMTU(bg, solo, 65535))
	assert.ErrorIs(t, ns.SetLinkMTU(bg, solo, 65536), syscall.EINVAL)
	assert.ErrorIs(t, ns.SetLinkMTU(bg, vx, 0), kernel.ErrInvalid)
	v, err := ns.Sysctl(bg, "net.ipv6.conf.vx.mtu")
	require.NoError(t, err)
	assert.Equal(t, "1450", v)
	require.NoError(t, ns.DeleteLink(bg, br))
	for _, name := range []string{"vx", "vx6"} {
		_, ok := ns.Link(name)
		assert.False(t, ok, "%s goes with its parent", name)
	}
	_, err = ns.Sysctl(bg, "net.ipv4.conf.vx.rp_filter")
	assert.ErrorIs(t, err, kernel.ErrNotFound, "per-interface sysctls go with the link")
	_ = vx6
}

func TestLinkCallsOnMissingLinks(t *testing.T) {
	ns := New(Options{})
	assert.ErrorIs(t, ns.DeleteLink(bg, 42), kernel.ErrNotFound)
	assert.ErrorIs(t, ns.SetLinkUp(bg, 42, true), syscall.ENODEV)
	assert.ErrorIs(t, ns.SetLinkUp(bg, 0, true), kernel.ErrInvalid)
	_, err := ns.LinkByName(bg, "nope")
	assert.ErrorIs(t, err, kernel.ErrNotFound)
	_, err = ns.LinkByName(bg, "a/b")
	assert.ErrorIs(t, err, kernel.ErrInvalid)
	assert.ErrorIs(t, ns.DeleteLink(bg, 1), kernel.ErrNotSupported, "lo cannot be deleted")
	assert.NoError(t, ns.SetLinkMAC(bg, 1, mac("02:00:00:00:00:01")), "lo takes a MAC")
	tun, err := ns.AddTUN("tun0")
	require.NoError(t, err)
	assert.ErrorIs(t, ns.SetLinkMAC(bg, tun.Index, mac("02:00:00:00:00:01")), syscall.EOPNOTSUPP)
}

// upVeth returns a veth "a" (peer "b") that is up and running with
// 10.0.0.1/24 and fd00::1/64.
func upVeth(t *testing.T, ns *Namespace) (a, b int) {
	t.Helper()
	a = mustLink(t, ns, veth("a", "b"))
	bl, _ := ns.Link("b")
	b = bl.Index
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("10.0.0.1/24")}))
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("fd00::1/64")}))
	require.NoError(t, ns.SetLinkUp(bg, a, true))
	require.NoError(t, ns.SetLinkUp(bg, b, true))
	return a, b
}

func TestAddressesBringTheirRoutes(t *testing.T) {
	ns := New(Options{})
	a := mustLink(t, ns, kernel.Link{Name: "a", Kind: kernel.KindVeth, MAC: mac("02:00:00:00:00:0a"), Veth: &kernel.Veth{PeerName: "b"}})
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("10.0.0.1/24")}))
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("fd00::1/64")}))
	assert.Equal(t, []string{"local 10.0.0.1/32 table 255 proto 2 scope 254 metric 0 dev a src 10.0.0.1"}, routeLines(ns, kernel.IPv4, 0)[:1],
		"a down link has only the local route")
	assert.NotContains(t, strings.Join(routeLines(ns, kernel.IPv6, 0), "\n"), "fd00::1", "and IPv6 waits for DAD")

	require.NoError(t, ns.SetLinkUp(bg, a, true))
	b, _ := ns.Link("b")
	require.NoError(t, ns.SetLinkUp(bg, b.Index, true))
	assert.Equal(t, []string{
		"unicast 10.0.0.0/24 table 254 proto 2 scope 253 metric 0 dev a src 10.0.0.1",
		"local 10.0.0.1/32 table 255 proto 2 scope 254 metric 0 dev a src 10.0.0.1",
		"broadcast 10.0.0.255/32 table 255 proto 2 scope 253 metric 0 dev a src 10.0.0.1",
	}, routeLines(ns, kernel.IPv4, 0)[:3])
	v6 := routeLines(ns, kernel.IPv6, 0)
	for _, want := range []string{
		"unicast fd00::/64 table 254 proto 2 scope 0 metric 256 dev a",
		"unicast fe80::/64 table 254 proto 2 scope 0 metric 256 dev a",
		"local fd00::1/128 table 255 proto 2 scope 0 metric 0 dev a",
		"local fe80::ff:fe00:a/128 table 255 proto 2 scope 0 metric 0 dev a",
		"multicast ff00::/8 table 255 proto 2 scope 0 metric 256 dev a",
	} {
		assert.Contains(t, v6, want)
	}
	assert.Contains(t, ns.LinkAddrs("a"), pfx("fe80::ff:fe00:a/64"), "the EUI-64 link-local address")

	assert.ErrorIs(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("10.0.0.1/24")}), kernel.ErrExists)
	assert.ErrorIs(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("fd00::1/128")}), syscall.EEXIST)
	assert.ErrorIs(t, ns.DeleteAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("10.0.0.1/25")}), syscall.EADDRNOTAVAIL)
	assert.ErrorIs(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: 42, Prefix: pfx("10.0.0.1/24")}), kernel.ErrNotFound)

	require.NoError(t, ns.DeleteAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("10.0.0.1/24")}))
	assert.Len(t, routeLines(ns, kernel.IPv4, 0), 3, "only lo's routes are left")
}

func TestSecondaryAddresses(t *testing.T) {
	ns := New(Options{})
	br := mustLink(t, ns, kernel.Link{Name: "br", Kind: kernel.KindBridge})
	require.NoError(t, ns.SetLinkUp(bg, br, true))
	for _, p := range []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.3/24"} {
		require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: br, Prefix: pfx(p)}))
	}
	require.NoError(t, ns.DeleteAddr(bg, kernel.Addr{LinkIndex: br, Prefix: pfx("10.0.0.1/24")}))
	assert.Empty(t, ns.LinkAddrs("br")[:1:1][0:0], "")
	for _, a := range ns.LinkAddrs("br") {
		assert.False(t, a.Addr().Is4(), "deleting the primary deleted the secondaries: %v", a)
	}
	require.NoError(t, ns.SetSysctl(bg, "net.ipv4.conf.br.promote_secondaries", "1"))
	for _, p := range []string{"10.0.0.1/24", "10.0.0.2/24"} {
		require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: br, Prefix: pfx(p)}))
	}
	require.NoError(t, ns.DeleteAddr(bg, kernel.Addr{LinkIndex: br, Prefix: pfx("10.0.0.1/24")}))
	assert.Contains(t, ns.LinkAddrs("br"), pfx("10.0.0.2/24"), "promoted")
	assert.Contains(t, routeLines(ns, kernel.IPv4, kernel.TableMain), "unicast 10.0.0.0/24 table 254 proto 2 scope 253 metric 0 dev br src 10.0.0.2")
}

func TestIPv6AddressesOnDown(t *testing.T) {
	ns := New(Options{})
	a, _ := upVeth(t, ns)
	require.NoError(t, ns.SetLinkUp(bg, a, false))
	assert.Equal(t, []netip.Prefix{pfx("10.0.0.1/24")}, ns.LinkAddrs("a"), "IPv6 addresses go, IPv4 ones stay")
	assert.Equal(t, []string{"local 10.0.0.1/32 table 255 proto 2 scope 254 metric 0 dev a src 10.0.0.1"}, routeLines(ns, kernel.IPv4, 0)[:1])

	require.NoError(t, ns.SetSysctl(bg, "net.ipv6.conf.a.keep_addr_on_down", "1"))
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: a, Prefix: pfx("fd00::1/64")}))
	require.NoError(t, ns.SetLinkUp(bg, a, true))
	require.NoError(t, ns.SetLinkUp(bg, a, false))
	assert.Contains(t, ns.LinkAddrs("a"), pfx("fd00::1/64"), "kept")
	assert.NotContains(t, strings.Join(routeLines(ns, kernel.IPv6, 0), "\n"), "dev a", "without their routes")
	require.NoError(t, ns.SetLinkUp(bg, a, true))
	assert.Contains(t, routeLines(ns, kernel.IPv6, 0), "unicast fd00::/64 table 254 proto 2 scope 0 metric 256 dev a", "which come back")
}

func TestRouteWrites(t *testing.T) {
	ns := New(Options{})
	a, _ := upVeth(t, ns)
	down := mustLink(t, ns, kernel.Link{Name: "down", Kind: kernel.KindBridge})
	r4 := func(dst string, f func(r *kernel.Route)) kernel.Route {
		r := kernel.Route{Family: kernel.IPv4, Dst: pfx(dst), Type: kernel.RTNUnicast, Protocol: 99, OIF: a}
		if f != nil {
			f(&r)
		}
		return r
	}
	r6 := func(dst string, f func(r *kernel.Route)) kernel.Route {
		r := kernel.Route{Family: kernel.IPv6, Dst: pfx(dst), Type: kernel.RTNUnicast, OIF: a}
		if f != nil {
			f(&r)
		}
		return r
	}
	ops := []kernel.RouteOp{
		{Kind: kernel.OpAdd, Route: r4("10.1.0.0/24", nil)},
		{Kind: kernel.OpAdd, Route: r4("10.1.0.0/24", nil)},
		{Kind: kernel.OpReplace, Route: r4("10.1.0.0/24", func(r *kernel.Route) { r.MTU = 1400 })},
		{Kind: kernel.OpAdd, Route: r4("10.2.0.0/24", func(r *kernel.Route) { r.OIF = 42 })},
		{Kind: kernel.OpAdd, Route: r4("10.2.0.0/24", func(r *kernel.Route) { r.OIF = down })},
		{Kind: kernel.OpAdd, Route: r4("10.3.0.0/24", func(r *kernel.Route) { r.OIF, r.Gateway = 0, ip("10.9.0.1") })},
		{Kind: kernel.OpAdd, Route: r4("10.3.0.0/24", func(r *kernel.Route) { r.Gateway, r.Flags = ip("10.9.0.1"), kernel.FlagOnlink })},
		{Kind: kernel.OpAdd, Route: r4("10.4.0.0/24", func(r *kernel.Route) { r.OIF, r.Gateway = 0, ip("10.0.0.9") })},
		{Kind: kernel.OpAdd, Route: r4("10.5.0.1/24", nil)},
		{Kind: kernel.OpDelete, Route: r4("10.6.0.0/24", nil)},
		{Kind: kernel.OpAdd, Route: r6("fd01::/64", nil)},
		{Kind: kernel.OpAdd, Route: r6("fd02::/64", func(r *kernel.Route) { r.OIF, r.Gateway = 0, ip("fd99::1") })},
		{Kind: kernel.OpDelete, Route: r6("fd01::/64", func(r *kernel.Route) { r.Priority = 1024 })},
	}
	errs := ns.ApplyRoutes(bg, ops)
	want := []error{nil, syscall.EEXIST, nil, syscall.ENODEV, syscall.ENETDOWN, syscall.ENETUNREACH, nil, nil, kernel.ErrInvalid, syscall.ESRCH,
		nil, syscall.EHOSTUNREACH, nil}
	require.Len(t, errs, len(want))
	for i := range want {
		if want[i] == nil {
			assert.NoError(t, errs[i], "op %d", i)
			continue
		}
		assert.ErrorIs(t, errs[i], want[i], "op %d", i)
		var oe *kernel.OpError
		assert.ErrorAs(t, errs[i], &oe, "op %d", i)
	}
	assert.ErrorIs(t, errs[1], kernel.ErrExists)
	assert.ErrorIs(t, errs[9], kernel.ErrNotFound)
	main := routeLines(ns, kernel.IPv4, kernel.TableMain)
	assert.Contains(t, main, "unicast 10.1.0.0/24 table 254 proto 99 scope 0 metric 0 dev a mtu 1400")
	assert.Contains(t, main, "unicast 10.3.0.0/24 table 254 proto 99 scope 0 metric 0 via 10.9.0.1 dev a onlink")
	assert.Contains(t, main, "unicast 10.4.0.0/24 table 254 proto 99 scope 0 metric 0 via 10.0.0.9 dev a", "the gateway gave the interface")
	assert.NotContains(t, strings.Join(routeLines(ns, kernel.IPv6, 0), "\n"), "fd01::", "the IPv6 metric 0 became 1024")
}

func TestMultipathNextHopsDieAndRevive(t *testing.T) {
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			ns := New(Options{})
			a := mustLink(t, ns, kernel.Link{Name: "a", Kind: kernel.KindBridge})
			b := mustLink(t, ns, kernel.Link{Name: "b", Kind: kernel.KindBridge})
			gw := []netip.Addr{ip("10.0.0.9"), ip("10.0.1.9")}
			dst := pfx("10.9.0.0/24")
			if fam == kernel.IPv6 {
				gw, dst = []netip.Addr{ip("fe80::1"), ip("fe80::2")}, pfx("fd09::/64")
			}
			for i, l := range []int{a, b} {
				require.NoError(t, ns.SetLinkUp(bg, l, true))
				require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: l, Prefix: netip.PrefixFrom(ip(fmt.Sprintf("10.0.%d.1", i)), 24)}))
			}
			mp := kernel.Route{Family: fam, Dst: dst, Type: kernel.RTNUnicast, NextHops: []kernel.NextHop{{OIF: a, Gateway: gw[0]}, {OIF: b, Gateway: gw[1]}}}
			require.NoError(t, ns.ApplyRoutes(bg, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: mp}})[0])
			get := func() *kernel.Route {
				for _, r := range ns.Routes(fam, kernel.TableMain) {
					if r.Dst == dst {
						return &r
					}
				}
				return nil
			}
			require.NoError(t, ns.SetLinkUp(bg, b, false))
			r := get()
			require.NotNil(t, r)
			assert.Equal(t, kernel.FlagDead|kernel.FlagLinkdown, r.NextHops[1].Flags)
			require.NoError(t, ns.SetLinkUp(bg, b, true))
			r = get()
			require.NotNil(t, r)
			assert.Zero(t, r.NextHops[1].Flags, "revived")
			require.NoError(t, ns.DeleteLink(bg, b))
			r = get()
			if fam == kernel.IPv4 {
				assert.Nil(t, r, "IPv4 drops the route")
				return
			}
			require.NotNil(t, r, "IPv6 drops the next hop")
			assert.Equal(t, a, r.OIF)
			assert.Nil(t, r.NextHops)
		})
	}
}

func TestCarrierLossMarksRoutesLinkdown(t *testing.T) {
	ns := New(Options{})
	a, b := upVeth(t, ns)
	route := kernel.Route{Family: kernel.IPv4, Dst: pfx("10.1.0.0/24"), Type: kernel.RTNUnicast, OIF: a}
	require.NoError(t, ns.ApplyRoutes(bg, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: route}})[0])
	require.NoError(t, ns.ApplyNeighbors(bg, []kernel.NeighborOp{
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02")}},
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.3"), MAC: mac("02:00:00:00:00:03"), State: kernel.NUDReachable}},
	})[1])
	require.NoError(t, ns.SetLinkUp(bg, b, false))
	assert.Contains(t, routeLines(ns, kernel.IPv4, kernel.TableMain), "unicast 10.1.0.0/24 table 254 proto 0 scope 0 metric 0 dev a linkdown")
	neighs, err := ns.Neighbors(bg, kernel.IPv4, a)
	require.NoError(t, err)
	require.Len(t, neighs, 1, "the reachable entry went, the permanent one stayed")
	route.Dst = pfx("10.2.0.0/24")
	assert.NoError(t, ns.ApplyRoutes(bg, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: route}})[0], "writes through a link without carrier work")
	require.NoError(t, ns.SetLinkUp(bg, a, false))
	neighs, err = ns.Neighbors(bg, kernel.IPv4, 0)
	require.NoError(t, err)
	assert.Empty(t, neighs, "a link going down loses every entry")
}

func TestRules(t *testing.T) {
	ns := New(Options{})
	rule := kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 100, Src: pfx("10.0.0.0/8")}
	require.NoError(t, ns.AddRule(bg, rule))
	assert.ErrorIs(t, ns.AddRule(bg, rule), kernel.ErrExists)
	wide := rule
	wide.Src = netip.Prefix{}
	assert.ErrorIs(t, ns.AddRule(bg, wide), syscall.EEXIST, "a request without a source matches any")
	auto := rule
	auto.Priority, auto.Mark = 0, 7
	require.NoError(t, ns.AddRule(bg, auto))
	rules, err := ns.Rules(bg, kernel.IPv4)
	require.NoError(t, err)
	require.Len(t, rules, 5)
	assert.Equal(t, uint32(99), rules[1].Priority, "priority 0: one less than the second rule's, as the kernel chooses")
	assert.Equal(t, uint32(0xffffffff), rules[1].Mask, "a mark without a mask")
	assert.ErrorIs(t, ns.AddRule(bg, kernel.Rule{Family: kernel.IPv4, Action: kernel.RuleLookup}), kernel.ErrInvalid)
	require.NoError(t, ns.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Table: 100}))
	rules, _ = ns.Rules(bg, kernel.IPv4)
	assert.Equal(t, uint32(100), rules[1].Priority, "the first match (priority 99) went")
	assert.ErrorIs(t, ns.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Priority: 4242}), kernel.ErrNotFound)
}

func TestNeighborsAndFDB(t *testing.T) {
	ns := New(Options{})
	a, _ := upVeth(t, ns)
	n := kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02")}
	n6 := kernel.Neighbor{LinkIndex: a, IP: ip("fd00::2"), MAC: mac("02:00:00:00:00:02")}
	errs := ns.ApplyNeighbors(bg, []kernel.NeighborOp{
		{Kind: kernel.OpReplace, Neighbor: n}, {Kind: kernel.OpReplace, Neighbor: n6}, {Kind: kernel.OpAdd, Neighbor: n},
		{Kind: kernel.OpDelete, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.9")}},
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: 42, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02")}},
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.2")}},
	})
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.ErrorIs(t, errs[2], kernel.ErrExists)
	assert.ErrorIs(t, errs[3], syscall.ENOENT)
	assert.ErrorIs(t, errs[4], syscall.ENODEV)
	assert.ErrorIs(t, errs[5], kernel.ErrInvalid)
	got, err := ns.Neighbors(bg, kernel.IPv6, 0)
	require.NoError(t, err)
	n6.State = kernel.NUDPermanent
	assert.Equal(t, []kernel.Neighbor{n6}, got)

	vx := mustLink(t, ns, kernel.Link{Name: "vx", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 1, Port: 4789}})
	zero := mac("00:00:00:00:00:00")
	errs = ns.ApplyFDB(bg, []kernel.FDBOp{
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: zero, Dst: ip("192.0.2.1"), Permanent: true}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: zero, Dst: ip("192.0.2.2"), Permanent: true}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: mac("02:00:00:00:00:05"), Dst: ip("192.0.2.3"), Permanent: true}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: mac("02:00:00:00:00:05"), Dst: ip("192.0.2.4"), Permanent: true}},
		{Kind: kernel.OpAdd, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: zero, Dst: ip("192.0.2.9")}},
		{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: mac("02:00:00:00:00:06")}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: mac("02:00:00:00:00:07")}},
	})
	for i := range 4 {
		assert.NoError(t, errs[i], "op %d", i)
	}
	assert.ErrorIs(t, errs[4], kernel.ErrExists)
	assert.ErrorIs(t, errs[5], kernel.ErrNotFound)
	assert.ErrorIs(t, errs[6], syscall.EINVAL)
	entries, err := ns.FDB(bg, vx)
	require.NoError(t, err)
	require.Len(t, entries, 3, "two flood remotes, one unicast entry whose remote was replaced")
	assert.Equal(t, ip("192.0.2.4"), entries[2].Dst)
}

func TestSysctls(t *testing.T) {
	ns := New(Options{})
	mustLink(t, ns, kernel.Link{Name: "eth0.100", Kind: kernel.KindBridge})
	require.NoError(t, ns.SetSysctl(bg, "net.ipv4.conf.default.rp_filter", "2"))
	mustLink(t, ns, kernel.Link{Name: "b", Kind: kernel.KindBridge})
	get := func(key string) string {
		t.Helper()
		v, err := ns.Sysctl(bg, key)
		require.NoError(t, err, key)
		return v
	}
	assert.Equal(t, "0", get("net/ipv4/conf/eth0.100/rp_filter"), "created before default changed; the slash form keeps the dot")
	assert.Equal(t, "2", get("net.ipv4.conf.b.rp_filter"), "copied from default")
	require.NoError(t, ns.SetSysctl(bg, "net.ipv4.ip_forward", " 1\n"))
	assert.Equal(t, []string{"1", "1", "1", "0"}, []string{get("net.ipv4.conf.all.forwarding"), get("net.ipv4.conf.default.forwarding"),
		get("net.ipv4.conf.b.forwarding"), get("net.ipv4.conf.all.accept_redirects")})
	require.NoError(t, ns.SetSysctl(bg, "net.ipv6.conf.all.forwarding", "1"))
	assert.Equal(t, "1", get("net/ipv6/conf/eth0.100/forwarding"))
	assert.Equal(t, "1024\t65000", func() string {
		require.NoError(t, ns.SetSysctl(bg, "net.ipv4.ip_local_port_range", "1024 65000"))
		return get("net.ipv4.ip_local_port_range")
	}())
	err := ns.SetSysctl(bg, "net.ipv4.ip_forward", "yes")
	assert.ErrorIs(t, err, kernel.ErrInvalid)
	assert.ErrorIs(t, err, syscall.EINVAL)
	_, err = ns.Sysctl(bg, "net.ipv4.nope")
	assert.ErrorIs(t, err, kernel.ErrNotFound)
	assert.ErrorIs(t, ns.SetSysctl(bg, "net.ipv4.nope", "1"), syscall.ENOENT)
	for _, key := range []string{"kernel.hostname", "/proc/sys/net/ipv4/ip_forward", "net..ipv4", "net/../x"} {
		_, err = ns.Sysctl(bg, key)
		assert.ErrorIs(t, err, kernel.ErrInvalid, key)
	}
}

func TestConntrack(t *testing.T) {
	ns := New(Options{})
	ns.AddFlow(Flow{Family: kernel.IPv4, Src: ip("10.0.0.1"), Dst: ip("10.0.0.2")})
	ns.AddFlow(Flow{Family: kernel.IPv4, Src: ip("10.0.0.3"), Dst: ip("10.0.0.4"), ReplySrc: ip("10.0.0.5"), ReplyDst: ip("10.0.0.3")})
	ns.AddFlow(Flow{Family: kernel.IPv6, Src: ip("fd00::1"), Dst: ip("fd00::2")})
	n, err := ns.DeleteConntrack(bg, kernel.IPv4, []netip.Addr{ip("10.0.0.2"), ip("10.0.0.5")})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Len(t, ns.Flows(), 1)
	assert.Equal(t, 1, ns.Writes())
}

func TestFailCountAndRefuse(t *testing.T) {
	ns := New(Options{})
	ns.Fail(OpAddLink, 2, syscall.ENOMEM)
	for range 2 {
		_, err := ns.AddLink(bg, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
		assert.ErrorIs(t, err, syscall.ENOMEM)
	}
	_, err := ns.AddLink(bg, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	require.NoError(t, err, "two failures, then it works")
	assert.Equal(t, 3, ns.Calls(OpAddLink))

	ns.Fail(OpLinks, -1, nil)
	for range 3 {
		_, err = ns.Links(bg)
		assert.ErrorIs(t, err, ErrInjected)
		assert.ErrorIs(t, err, syscall.EIO)
	}
	ns.ClearFailures()
	_, err = ns.Links(bg)
	assert.NoError(t, err)

	ns.Fail(OpApplyRoutes, 1, syscall.ENODEV)
	blackhole := func(dst string) kernel.RouteOp {
		return kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Dst: pfx(dst), Type: kernel.RTNBlackhole}}
	}
	errs := ns.ApplyRoutes(bg, []kernel.RouteOp{blackhole("10.1.0.0/24"), blackhole("10.2.0.0/24")})
	assert.ErrorIs(t, errs[0], kernel.ErrNotFound, "an injected errno is classified like a refusal")
	assert.NoError(t, errs[1], "the batch's other operations go on")

	ns.Refuse(func(op Op, obj any) error {
		if ro, ok := obj.(kernel.RouteOp); ok && ro.Route.Dst == pfx("10.3.0.0/24") {
			return syscall.EPERM
		}
		return nil
	})
	errs = ns.ApplyRoutes(bg, []kernel.RouteOp{blackhole("10.3.0.0/24"), blackhole("10.4.0.0/24")})
	assert.ErrorIs(t, errs[0], syscall.EPERM)
	assert.NoError(t, errs[1])
	assert.Equal(t, 4, ns.Calls(OpApplyRoutes), "each operation counts")
	assert.Equal(t, 3+4, ns.Writes())

	admin := ns.Admin()
	assert.NoError(t, admin.ApplyRoutes(bg, []kernel.RouteOp{blackhole("10.3.0.0/24")})[0], "the admin is never refused")
	assert.Equal(t, 7, ns.Writes(), "nor counted")
	ns.ResetCounts()
	assert.Zero(t, ns.Writes())
	assert.Zero(t, ns.Calls(OpApplyRoutes))

	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = ns.Links(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, ns.ApplyRoutes(ctx, []kernel.RouteOp{blackhole("10.5.0.0/24")})[0], context.Canceled)
}

func TestDumpInterrupted(t *testing.T) {
	ns := New(Options{})
	ns.Fail(OpDumpRoutes, 1, ErrInterrupted)
	var got []netip.Prefix
	resets := 0
	require.NoError(t, ns.DumpRoutes(bg, kernel.IPv4, 0, func(r *kernel.Route) error {
		got = append(got, r.Dst)
		return nil
	}, func() { resets++; got = nil }))
	assert.Equal(t, 1, resets)
	assert.Len(t, got, 3, "the whole table after the restart")
	stop := errors.New("stop")
	assert.ErrorIs(t, ns.DumpRoutes(bg, kernel.IPv4, 0, func(*kernel.Route) error { return stop }, nil), stop)
	assert.ErrorIs(t, ns.DumpInterfaceRoutes(bg, kernel.IPv4, 0, 0, func(*kernel.Route) error { return nil }, nil), kernel.ErrInvalid)
	n := 0
	require.NoError(t, ns.DumpInterfaceRoutes(bg, kernel.IPv6, 0, 1, func(*kernel.Route) error { n++; return nil }, nil))
	assert.Equal(t, 1, n, "::1 on lo")
}

// next receives one event or fails.
func next(t *testing.T, ch <-chan kernel.Event) kernel.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "channel closed")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return kernel.Event{}
}

func TestSubscribe(t *testing.T) {
	ns := New(Options{})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	links, err := ns.Subscribe(ctx, kernel.EventLinks)
	require.NoError(t, err)
	all, err := ns.Subscribe(ctx, kernel.EventLinks|kernel.EventAddrs|kernel.EventRoutes)
	require.NoError(t, err)
	assert.Equal(t, &kernel.Resync{Kinds: kernel.EventLinks}, next(t, links).Resync)
	assert.NotNil(t, next(t, all).Resync)

	br := mustLink(t, ns, kernel.Link{Name: "br", Kind: kernel.KindBridge})
	require.NoError(t, ns.SetSysctl(bg, "net.ipv6.conf.br.disable_ipv6", "1"))
	require.NoError(t, ns.SetLinkUp(bg, br, true))
	require.NoError(t, ns.AddAddr(bg, kernel.Addr{LinkIndex: br, Prefix: pfx("10.0.0.1/24")}))

	ev := next(t, links)
	require.NotNil(t, ev.Link)
	assert.Equal(t, "br", ev.Link.Link.Name)
	assert.False(t, ev.Link.Link.AdminUp)
	ev = next(t, links)
	assert.True(t, ev.Link.Link.AdminUp, "then up")

	var kinds []string
	for range 2 + 4 { // two link events; the address, then the routes it brings
		ev := next(t, all)
		switch {
		case ev.Link != nil:
			kinds = append(kinds, "link")
		case ev.Addr != nil:
			kinds = append(kinds, "addr "+ev.Addr.Addr.Prefix.String())
		case ev.Route != nil:
			kinds = append(kinds, "route "+ev.Route.Route.Dst.String())
		}
	}
	assert.Equal(t, []string{"link", "link", "addr 10.0.0.1/24", "route 10.0.0.1/32", "route 10.0.0.0/24", "route 10.0.0.255/32"}, kinds)

	require.NoError(t, ns.SetLinkMTU(bg, br, 1400))
	ns.Overflow()
	ev = next(t, links)
	require.NotNil(t, ev.Resync, "the queued event was dropped")
	assert.ErrorIs(t, ev.Resync.Reason, kernel.ErrOverflow)
	assert.Equal(t, kernel.EventLinks, ev.Resync.Kinds)

	_, err = ns.Subscribe(ctx, 0)
	assert.ErrorIs(t, err, kernel.ErrInvalid)
	ns.Fail(OpSubscribe, 1, nil)
	retried, err := ns.Subscribe(ctx, kernel.EventLinks)
	require.NoError(t, err)
	assert.ErrorIs(t, next(t, retried).Err, ErrInjected, "a failed attempt, retried")
	assert.NotNil(t, next(t, retried).Resync)

	cancel()
	for range links { //nolint:revive // drain until closed
	}
	for range all { //nolint:revive // drain until closed
	}
	for range retried { //nolint:revive // drain until closed
	}
	leakcheck.NoGoroutines(t, 10*time.Second, "kernelfake.(*Namespace).forward")
}

// A barrier comes after the events queued before it and survives an
// overflow, which drops the events around it; options are checked as the
// kernel checks them.
func TestSubscribeBarriers(t *testing.T) {
	ns := New(Options{})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var barrier kernel.BarrierFunc
	events, err := ns.Subscribe(ctx, kernel.EventLinks, kernel.SubscribeOptions{ReceiveBufferSize: 4096, Barriers: func(f kernel.BarrierFunc) { barrier = f }})
	require.NoError(t, err)
	require.NotNil(t, barrier)
	require.NotNil(t, next(t, events).Resync)

	br := mustLink(t, ns, kernel.Link{Name: "br", Kind: kernel.KindBridge})
	id1, err := barrier()
	require.NoError(t, err)
	require.NoError(t, ns.SetLinkMTU(bg, br, 1400))
	assert.NotNil(t, next(t, events).Link)
	assert.Equal(t, &kernel.Barrier{ID: id1}, next(t, events).Barrier)
	assert.Equal(t, 1400, next(t, events).Link.Link.MTU)

	require.NoError(t, ns.SetLinkMTU(bg, br, 1300))
	id2, err := barrier()
	require.NoError(t, err)
	assert.Greater(t, id2, id1)
	require.NoError(t, ns.SetLinkMTU(bg, br, 1200))
	ns.Overflow()
	assert.Equal(t, &kernel.Barrier{ID: id2}, next(t, events).Barrier, "kept by the overflow")
	assert.ErrorIs(t, next(t, events).Resync.Reason, kernel.ErrOverflow)

	for _, bad := range []kernel.SubscribeOptions{{ReceiveBufferSize: -1}, {ReceiveBufferSize: kernel.MaxReceiveBufferSize + 1}} {
		_, err := ns.Subscribe(ctx, kernel.EventLinks, bad)
		assert.ErrorIs(t, err, kernel.ErrInvalid)
	}
	cancel()
	for range events { //nolint:revive // drain until closed
	}
	leakcheck.NoGoroutines(t, 10*time.Second, "kernelfake.(*Namespace).forward")
	_, err = barrier()
	assert.Error(t, err, "the stream has ended")
}

func TestRunner(t *testing.T) {
	ns := New(Options{})
	r := ns.Runner()
	_, err := r.Run(bg, strings.NewReader("create s1 hash:ip family inet\n"), "/usr/sbin/ipset", "restore")
	require.NoError(t, err)
	out, err := r.Run(bg, nil, "ipset", "list", "-name")
	require.NoError(t, err)
	assert.Equal(t, "s1\n", string(out))
	_, err = r.Run(bg, nil, "iptables-nft-save")
	require.NoError(t, err)
	assert.NotEmpty(t, ns.IPTables().Calls())
	_, err = r.Run(bg, nil, "nft", "list", "ruleset")
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, exec.ErrNotFound)
	assert.Equal(t, []string{"nft", "list", "ruleset"}, ce.Argv)
	assert.Equal(t, 4, ns.Calls(OpRun))
	ns.Fail(OpRun, 1, nil)
	_, err = r.Run(bg, nil, "ipset", "list")
	assert.ErrorIs(t, err, ErrInjected)
}

func TestConcurrentUse(t *testing.T) {
	host := New(Options{})
	pod := host.NewNamespace(Options{})
	ctx, cancel := context.WithCancel(bg)
	events, err := host.Subscribe(ctx, kernel.EventLinks|kernel.EventAddrs|kernel.EventRoutes)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range events { //nolint:revive // consume
		}
	}()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("v%d", i)
			l, err := host.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "p" + name, PeerNamespaceFD: pod.FD()}})
			if !assert.NoError(t, err) {
				return
			}
			for j := range 20 {
				_ = host.SetLinkUp(bg, l.Index, j%2 == 0)
				_ = host.AddAddr(bg, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(ip(fmt.Sprintf("10.%d.0.1", i)), 24)})
				_ = host.ApplyRoutes(bg, []kernel.RouteOp{{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4,
					Dst: netip.PrefixFrom(ip(fmt.Sprintf("10.%d.%d.0", 100+i, j)), 24), Type: kernel.RTNUnicast, OIF: l.Index}}})
				_ = host.DumpRoutes(bg, kernel.IPv4, 0, func(*kernel.Route) error { return nil }, nil)
				_, _ = pod.Links(bg)
				_ = host.Dump()
				if j == 10 {
					host.Overflow()
				}
			}
			assert.NoError(t, host.DeleteLink(bg, l.Index))
		}()
	}
	wg.Wait()
	cancel()
	<-done
	links, err := pod.Links(bg)
	require.NoError(t, err)
	assert.Len(t, links, 1, "only lo: every peer went with its veth")
}

func TestDumpShowsEverything(t *testing.T) {
	ns := New(Options{Name: "test"})
	a, _ := upVeth(t, ns)
	require.NoError(t, ns.ApplyNeighbors(bg, []kernel.NeighborOp{{Kind: kernel.OpReplace,
		Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02")}}})[0])
	ns.AddFlow(Flow{Family: kernel.IPv4, Src: ip("10.0.0.1"), Dst: ip("10.0.0.2")})
	d := ns.Dump()
	for _, want := range []string{"namespace test\n", "link 3 a veth mtu 1500 up,running", "  addr 10.0.0.1/24\n",
		"route unicast 10.0.0.0/24 table 254 proto 2 scope 253 metric 0 dev a src 10.0.0.1\n", "rule IPv4 32766 action 1 table 254\n",
		"neigh 10.0.0.2 dev a lladdr 02:00:00:00:00:02 nud 0x80\n", "flow IPv4 10.0.0.1 -> 10.0.0.2\n"} {
		assert.Contains(t, d, want)
	}
	assert.Equal(t, "kernelfake test", ns.String())
}

func TestDumpShowsNeighbourProtocol(t *testing.T) {
	ns := New(Options{})
	a, _ := upVeth(t, ns)
	require.NoError(t, ns.ApplyNeighbors(bg, []kernel.NeighborOp{
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.2"), MAC: mac("02:00:00:00:00:02"), Protocol: 78}},
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: a, IP: ip("10.0.0.3"), MAC: mac("02:00:00:00:00:03")}},
	})[0])
	dump := ns.Dump()
	assert.Contains(t, dump, "neigh 10.0.0.2 dev a lladdr 02:00:00:00:00:02 nud 0x80 proto 78\n")
	assert.Contains(t, dump, "neigh 10.0.0.3 dev a lladdr 02:00:00:00:00:03 nud 0x80\n", "no protocol, none shown")
}
