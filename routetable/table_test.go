package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

func mustP(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustA(s string) netip.Addr   { return netip.MustParseAddr(s) }

var bg = context.Background()

// newNS returns a fake namespace as the unit tests want it: duplicate
// address detection off (addresses are usable at once) and IPv6 addresses
// kept when a link goes down, as on hosts with static addresses.
func newNS(t testing.TB) *kernelfake.Namespace {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	for key, v := range map[string]string{"net.ipv6.conf.all.accept_dad": "0", "net.ipv6.conf.default.accept_dad": "0",
		"net.ipv6.conf.all.keep_addr_on_down": "1"} {
		require.NoError(t, ns.Admin().SetSysctl(bg, key, v))
	}
	return ns
}

// linkAddrs are the addresses of the n-th link of a unit test:
// 192.168.n.1/24 and fd99:n::1/64.
func linkAddrs(n int) []netip.Prefix {
	return []netip.Prefix{
		netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(n), 1}), 24),
		netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x99, 0, byte(n), 15: 1}), 64),
	}
}

// gw is a gateway on the n-th link's subnet: 192.168.n.2 or fd99:n::2.
func gw(fam rt.Family, n int) netip.Addr {
	a := linkAddrs(n)[0].Addr().As4()
	if fam == rt.IPv6 {
		a16 := linkAddrs(n)[1].Addr().As16()
		a16[15] = 2
		return netip.AddrFrom16(a16)
	}
	a[3] = 2
	return netip.AddrFrom4(a)
}

// addLink creates interface name as the n-th link: a veth pair (its peer
// "x"+name) with linkAddrs(n), both ends up, so it is running. It goes
// through the Admin view: not counted. It returns the link's index.
func addLink(t testing.TB, ns *kernelfake.Namespace, name string, n int) int {
	t.Helper()
	k := ns.Admin()
	l, err := k.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "x" + name}})
	require.NoError(t, err)
	for _, p := range linkAddrs(n) {
		require.NoError(t, k.AddAddr(bg, kernel.Addr{LinkIndex: l.Index, Prefix: p}))
	}
	setUp(t, ns, "x"+name, true)
	setUp(t, ns, name, true)
	return l.Index
}

// index returns the index of the link called name.
func index(t testing.TB, ns *kernelfake.Namespace, name string) int {
	t.Helper()
	l, ok := ns.Link(name)
	require.True(t, ok, "no link %s", name)
	return l.Index
}

// setUp sets a link up or down, as an administrator would.
func setUp(t testing.TB, ns *kernelfake.Namespace, name string, up bool) {
	t.Helper()
	require.NoError(t, ns.Admin().SetLinkUp(bg, index(t, ns, name), up))
}

// setCarrier gives a link (a veth) its carrier or takes it away, through
// its peer.
func setCarrier(t testing.TB, ns *kernelfake.Namespace, name string, on bool) {
	t.Helper()
	setUp(t, ns, "x"+name, on)
}

// routes returns the routes of family in the main table, except the ones
// the kernel made for addresses.
func routes(ns *kernelfake.Namespace, fam rt.Family) []kernel.Route {
	var out []kernel.Route
	for _, r := range ns.Routes(fam, kernel.TableMain) {
		if r.Protocol != kernel.ProtoKernel {
			out = append(out, r)
		}
	}
	return out
}

// route returns the route of family to dst in the main table.
func route(ns *kernelfake.Namespace, fam rt.Family, dst netip.Prefix) (kernel.Route, bool) {
	for _, r := range routes(ns, fam) {
		if r.Dst == dst {
			return r, true
		}
	}
	return kernel.Route{}, false
}

// neighbors returns the neighbour entries of family.
func neighbors(t testing.TB, ns *kernelfake.Namespace, fam rt.Family) []kernel.Neighbor {
	t.Helper()
	n, err := ns.Admin().Neighbors(bg, fam, 0)
	require.NoError(t, err)
	return n
}

// refuseRoutes makes the namespace refuse the route writes of kind to dst
// with err: the first times ones (every one when times < 0).
func refuseRoutes(ns *kernelfake.Namespace, kind kernel.OpKind, dst netip.Prefix, err error, times int) {
	ns.Refuse(func(_ kernelfake.Op, obj any) error {
		op, ok := obj.(kernel.RouteOp)
		if !ok || op.Kind != kind || op.Route.Dst != dst || times == 0 {
			return nil
		}
		times--
		return err
	})
}

// newFake returns a fake namespace with up links named names, and a Table
// of family fam on it (the main table, pattern ^np-, fake clock).
func newFake(t *testing.T, fam rt.Family, names ...string) (*kernelfake.Namespace, *rt.Table, *clock.Fake) {
	t.Helper()
	ns := newNS(t)
	for i, n := range names {
		addLink(t, ns, n, i+1)
	}
	clk := clock.NewFake(t0)
	tbl, err := rt.New(rt.Options{Kernel: ns, Family: fam, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}, Clock: clk})
	require.NoError(t, err)
	return ns, tbl, clk
}

func TestNewValidatesOptions(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{})
	tests := []struct {
		name string
		opts rt.Options
	}{
		{"no kernel", rt.Options{Family: rt.IPv4}},
		{"nil *kernel.Namespace", rt.Options{Kernel: (*kernel.Namespace)(nil), Family: rt.IPv4, Table: 1000}},
		{"nil *kernelfake.Namespace", rt.Options{Kernel: (*kernelfake.Namespace)(nil), Family: rt.IPv4, Table: 1000}},
		{"no family", rt.Options{Kernel: k}},
		{"bad family", rt.Options{Kernel: k, Family: 7}},
		{"kernel protocol", rt.Options{Kernel: k, Family: rt.IPv4, Protocol: kernel.ProtoKernel}},
		{"bad pattern", rt.Options{Kernel: k, Family: rt.IPv4, InterfacePatterns: []string{"np-("}}},
		{"patterns with a policy", rt.Options{Kernel: k, Family: rt.IPv4, InterfacePatterns: []string{"x"}, Ownership: rt.ExclusivePolicy{}}},
		{"negative batch", rt.Options{Kernel: k, Family: rt.IPv4, BatchSize: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := rt.New(tc.opts)
			require.ErrorIs(t, err, rt.ErrInvalidOptions)
			assert.Nil(t, tbl)
		})
	}
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: kernel.TableMain})
	require.NoError(t, err)
	assert.Equal(t, kernel.TableMain, tbl.Index())
	assert.Zero(t, k.Calls(kernelfake.OpDumpRoutes)+k.Calls(kernelfake.OpLinks), "New does no I/O")
}

func TestTargetValidation(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	longMAC, _ := net.ParseMAC("02:00:00:00:00:00:00:01")
	type tc struct {
		name   string
		fam    rt.Family
		iface  string
		target rt.Target
		ok     bool
	}
	tests := []tc{
		{"device route", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24")}, true},
		{"host bits", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.7/24")}, false},
		{"host bits v6", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::1/64")}, false},
		{"largest MTU", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), MTU: rt.MaxMTU}, true},
		{"MTU the kernel caps", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), MTU: rt.MaxMTU + 1}, false},
		{"unspecified gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), Gateway: mustA("0.0.0.0")}, false},
		{"unspecified source", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/64"), Src: mustA("::")}, false},
		{"unspecified hop gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: mustA("0.0.0.0")}}}, false},
		{"gateway", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/64"), Gateway: gw(rt.IPv6, 1)}, true},
		{"local", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), Type: rt.TargetLocal}, true},
		{"blackhole", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole}, true},
		{"throw v6", rt.IPv6, rt.InterfaceNone, rt.Target{CIDR: mustP("fd00::/8"), Type: rt.TargetThrow}, true},
		{"dest mac", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}, true},
		{"multipath v4 device hops", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"),
			NextHops: []rt.NextHop{{Iface: "np-a"}, {Iface: "np-b", Weight: 2}}}, true},
		{"interface name", rt.IPv4, "np:a", rt.Target{CIDR: mustP("10.0.0.0/8")}, false},
		{"invalid cidr", rt.IPv4, "np-a", rt.Target{}, false},
		{"wrong family", rt.IPv4, "np-a", rt.Target{CIDR: mustP("fd00::/64")}, false},
		{"mapped address", rt.IPv6, "np-a", rt.Target{CIDR: mustP("::ffff:10.0.0.0/120")}, false},
		{"unknown type", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: 99}, false},
		{"gateway of the other family", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Gateway: mustA("fd00::1")}, false},
		{"source of the other family", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/8"), Src: mustA("10.0.0.1")}, false},
		{"onlink without gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetOnlink}, false},
		{"local with gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), Type: rt.TargetLocal, Gateway: mustA("10.0.0.2")}, false},
		{"unicast without interface", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8")}, false},
		{"blackhole with interface", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole}, false},
		{"blackhole with gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole, Gateway: mustA("10.0.0.1")}, false},
		{"multipath under an interface", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath with a gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Gateway: mustA("10.0.0.1"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath local", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetLocal, NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath bad hop iface", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "a:b"}}}, false},
		{"multipath v6 without gateway", rt.IPv6, rt.InterfaceNone, rt.Target{CIDR: mustP("fd00::/8"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath hop of the other family", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: mustA("fd00::1")}}}, false},
		{"multipath onlink without gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Onlink: true}}}, false},
		{"multipath duplicate hop", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a"}, {Iface: "np-a", Weight: 3}}}, false},
		{"dest mac on a network", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), DestMAC: mac}, false},
		{"dest mac too long", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), DestMAC: longMAC}, false},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			k, tbl, _ := newFake(t, c.fam, "np-a", "np-b")
			err := tbl.SetRoutes(1, c.iface, []rt.Target{c.target})
			if !c.ok {
				require.True(t, errors.Is(err, rt.ErrInvalidTarget) || errors.Is(err, rt.ErrInvalidInterface), "%v", err)
				assert.Zero(t, tbl.Counters().Declared, "nothing recorded")
				require.Error(t, tbl.RouteUpdate(1, c.iface, c.target))
				_, err := tbl.Apply(context.Background())
				require.NoError(t, err)
				assert.Zero(t, k.Writes(), "nothing written")
				return
			}
			require.NoError(t, err)
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 1, k.Calls(kernelfake.OpApplyRoutes), "one route written")
		})
	}
}

func TestInterfaceNameValidation(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv4)
	for _, name := range []string{"", "a/b", "a:b", "a b", ".", "..", "a-very-long-name0"} {
		require.ErrorIs(t, tbl.SetRoutes(1, name, nil), rt.ErrInvalidInterface, "%q", name)
		require.ErrorIs(t, tbl.RouteUpdate(1, name, rt.Target{CIDR: mustP("10.0.0.0/8")}), rt.ErrInvalidInterface, "%q", name)
		require.ErrorIs(t, tbl.RouteRemove(1, name, rt.RouteKey{CIDR: mustP("10.0.0.0/8")}), rt.ErrInvalidInterface, "%q", name)
	}
	require.ErrorIs(t, tbl.RouteRemove(1, "np-a", rt.RouteKey{CIDR: mustP("fd00::/8")}), rt.ErrInvalidTarget)
	require.ErrorIs(t, tbl.RouteRemove(1, "np-a", rt.RouteKey{}), rt.ErrInvalidTarget)
}

func TestDuplicateKeysRejected(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv6, "np-a")
	err := tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("fd00::/64")}, {CIDR: mustP("fd00::/64"), Metric: 1024}})
	require.ErrorIs(t, err, rt.ErrDuplicateRoute, "metric 0 is 1024")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("fd00::/64")}, {CIDR: mustP("fd00::/64"), Metric: 1}}))
	assert.Equal(t, 2, tbl.Counters().Declared)
}

func TestOnIfaceStateChangedIgnoresBadInput(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	tbl.OnIfaceStateChanged("", 3, kernel.LinkDown)
	tbl.OnIfaceStateChanged("np-a", -1, kernel.LinkDown)
	tbl.OnIfaceStateChanged("np-a", 3, 9)
	tbl.OnIfaceStateChanged("np-a", 1<<40, kernel.LinkUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Len(t, routes(k, rt.IPv4), 1, "ignored: the route stays")
}

// Periodic resync is the caller's (a dataplane.Loop's): a Table asks for
// no call of its own when nothing waits, and re-reads the kernel only when
// QueueResync asks it to.
func TestNoRefreshOfItsOwn(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	ctx := context.Background()
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	res, err := tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
	require.Equal(t, 1, k.Calls(kernelfake.OpDumpRoutes))

	clk.Advance(time.Hour)
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, k.Calls(kernelfake.OpDumpRoutes), "no read of its own")

	tbl.QueueResync()
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, k.Calls(kernelfake.OpDumpRoutes), "read when asked")
}

func TestGracePeriodOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		kept  bool
	}{{"default", 0, true}, {"none", -1, false}, {"custom", time.Minute, true}} {
		t.Run(tc.name, func(t *testing.T) {
			k := newNS(t)
			idx := addLink(t, k, "np-a", 1)
			require.NoError(t, k.Admin().ApplyRoutes(bg, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: kernel.Route{Family: rt.IPv4,
				Dst: mustP("10.0.0.1/32"), Type: kernel.RTNUnicast, Protocol: 3, Scope: kernel.ScopeLink, OIF: idx}}})[0])
			clk := clock.NewFake(t0)
			tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}, GracePeriod: tc.grace, Clock: clk})
			require.NoError(t, err)
			res, err := tbl.Apply(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.kept, len(routes(k, rt.IPv4)) == 1)
			if tc.grace > 0 {
				assert.Equal(t, tc.grace, res.RetryAfter)
			}
		})
	}
}

func TestDumpFailuresWriteNothing(t *testing.T) {
	for _, call := range []kernelfake.Op{kernelfake.OpDumpRoutes, kernelfake.OpLinks, kernelfake.OpNeighbors} {
		t.Run(string(call), func(t *testing.T) {
			k, tbl, _ := newFake(t, rt.IPv4, "np-a")
			mac, _ := net.ParseMAC("02:00:00:00:00:01")
			require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}}))
			k.Fail(call, 1, nil)
			_, err := tbl.Apply(context.Background())
			require.ErrorIs(t, err, rt.ErrDump)
			require.ErrorIs(t, err, kernelfake.ErrInjected)
			assert.Zero(t, k.Writes())
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err, "the next Apply reads again and writes")
			assert.Equal(t, 2, k.Writes(), "the route and its neighbour entry")
		})
	}
}

func TestApplyErrors(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	var targets []rt.Target
	for i := range 40 {
		targets = append(targets, rt.Target{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)})
	}
	require.NoError(t, tbl.SetRoutes(1, "np-a", targets))
	k.Fail(kernelfake.OpApplyRoutes, 5, syscall.EINVAL)
	k.Fail(kernelfake.OpApplyRoutes, 30, syscall.ENODEV)
	res, err := tbl.Apply(context.Background())
	assert.ErrorIs(t, err, dataplane.ErrPartial, "the rest was written")
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe, "a dataplane.Loop counts the failed routes")
	assert.Equal(t, 35, pe.Failed)
	assert.Len(t, pe.Objects(), 35, "one object error per route")
	assert.ErrorIs(t, err, rt.ErrRouteFailed)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.ErrorIs(t, err, rt.ErrIfaceGone)
	assert.ErrorIs(t, err, syscall.ENODEV)
	assert.Contains(t, err.Error(), "routetable: 35 object(s) failed")
	var re *dataplane.ObjectError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "replace", re.Op)
	ro, ok := re.Object.(rt.RouteObject)
	require.True(t, ok, "a route's object is its RouteObject")
	assert.Equal(t, "np-a", ro.Iface)
	assert.Contains(t, re.Error(), "dev np-a")
	assert.Equal(t, 1, re.Attempts)
	assert.Equal(t, dataplane.DriverStats{Desired: 40, InKernel: 5, Failing: 35, Writes: 40}, tbl.Stats())
	assert.Equal(t, 5, tbl.Counters().InKernel)
	assert.Equal(t, 35, tbl.Counters().PendingUpdates)
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter, "the failed routes' first retry")

	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err, "retried")
	assert.Equal(t, 40, tbl.Counters().InKernel)
	assert.Len(t, routes(k, rt.IPv4), 40)
}

func TestNeighborFailures(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}}))
	k.Fail(kernelfake.OpApplyNeighbors, 1, nil)
	res, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Empty(t, neighbors(t, k, rt.IPv4))
	_, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor, "still failing: waits for its retry")
	assert.Equal(t, 1, k.Calls(kernelfake.OpApplyNeighbors))
	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	n := neighbors(t, k, rt.IPv4)
	require.Len(t, n, 1)
	assert.Equal(t, kernel.NUDPermanent, n[0].State)
	assert.Equal(t, mac, n[0].MAC)

	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	k.Fail(kernelfake.OpApplyNeighbors, 1, syscall.EBUSY)
	res, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor)
	require.ErrorIs(t, err, syscall.EBUSY)
	assert.Len(t, neighbors(t, k, rt.IPv4), 1)
	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, neighbors(t, k, rt.IPv4))

	// An entry already gone (its interface went down) counts as deleted.
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}}))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, k.Admin().ApplyNeighbors(bg, []kernel.NeighborOp{{Kind: kernel.OpDelete, Neighbor: n[0]}})[0])
	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
}

func TestConntrackFailureHoldsTheMove(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a", "np-b")
	host := rt.Target{CIDR: mustP("10.0.0.7/32")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{host}))
	require.NoError(t, tbl.SetRoutes(2, "np-b", []rt.Target{host, {CIDR: mustP("10.0.1.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	k.AddFlow(kernelfake.Flow{Family: rt.IPv4, Src: mustA("10.9.9.9"), Dst: mustA("10.0.0.7")})

	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	require.NoError(t, tbl.RouteUpdate(2, "np-b", rt.Target{CIDR: mustP("10.0.2.0/24")}))
	k.Fail(kernelfake.OpDeleteConntrack, 1, nil)
	res, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrConntrack)
	r, ok := route(k, rt.IPv4, host.CIDR)
	require.True(t, ok)
	assert.Equal(t, index(t, k, "np-a"), r.OIF, "the moved route waits for its flows to go")
	_, ok = route(k, rt.IPv4, mustP("10.0.2.0/24"))
	assert.True(t, ok, "other routes are written")
	assert.Len(t, k.Flows(), 1)

	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, _ = route(k, rt.IPv4, host.CIDR)
	assert.Equal(t, index(t, k, "np-b"), r.OIF)
	assert.Empty(t, k.Flows())

	// Without conntrack cleanup nothing is deleted.
	k2 := newNS(t)
	tbl2, err := rt.New(rt.Options{Kernel: k2, Family: rt.IPv4, Table: kernel.TableMain, NoConntrackCleanup: true})
	require.NoError(t, err)
	addLink(t, k2, "np-a", 1)
	require.NoError(t, tbl2.SetRoutes(1, "np-a", []rt.Target{host}))
	_, err = tbl2.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, tbl2.SetRoutes(1, "np-a", nil))
	_, err = tbl2.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, k2.Calls(kernelfake.OpDeleteConntrack))
}

// A conntrack deletion that fails is tried again on its own backoff, not
// on every Apply; the route deletion that needed it is not held up.
func TestFailedConntrackFlushBacksOff(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	host := rt.Target{CIDR: mustP("10.0.0.7/32")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{host}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	k.AddFlow(kernelfake.Flow{Family: rt.IPv4, Src: mustA("10.9.9.9"), Dst: mustA("10.0.0.7")})

	// The deletion leaves a flush pending; it fails, waits 100 ms, fails
	// again, waits 200 ms.
	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	k.Fail(kernelfake.OpDeleteConntrack, 2, nil)
	for _, step := range []struct {
		advance time.Duration
		calls   int
	}{{0, 1}, {0, 0}, {100 * time.Millisecond, 1}, {199 * time.Millisecond, 0}} {
		clk.Advance(step.advance)
		before := k.Calls(kernelfake.OpDeleteConntrack)
		res, err := tbl.Apply(context.Background())
		require.ErrorIs(t, err, rt.ErrConntrack)
		require.ErrorIs(t, err, dataplane.ErrPartial)
		assert.Equal(t, step.calls, k.Calls(kernelfake.OpDeleteConntrack)-before, "after %v", step.advance)
		assert.Positive(t, res.RetryAfter)
		assert.LessOrEqual(t, res.RetryAfter, 200*time.Millisecond)
		assert.Len(t, k.Flows(), 1)
	}
	_, ok := route(k, rt.IPv4, host.CIDR)
	assert.False(t, ok, "the route is deleted even though its flows are not")

	clk.Advance(time.Millisecond)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, k.Flows())
}

// Interfaces that come up have their routes re-read one by one, up to a
// limit past which one read of the whole table is cheaper; a failed
// re-read writes nothing and makes the next Apply read the whole table.
func TestRescanOfInterfacesThatComeUp(t *testing.T) {
	for _, n := range []int{1, 4, 5, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var names []string
			for i := range n {
				names = append(names, fmt.Sprintf("np-%d", i))
			}
			k, tbl, _ := newFake(t, rt.IPv4, names...)
			ctx := context.Background()
			for i, name := range names {
				require.NoError(t, tbl.SetRoutes(1, name, []rt.Target{{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 0}), 24)}}))
			}
			_, err := tbl.Apply(ctx)
			require.NoError(t, err)
			for _, name := range names {
				setCarrier(t, k, name, false)
				tbl.OnIfaceStateChanged(name, index(t, k, name), kernel.LinkDown)
			}
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			k.ResetCounts()
			for _, name := range names {
				setCarrier(t, k, name, true)
				tbl.OnIfaceStateChanged(name, index(t, k, name), kernel.LinkUp)
			}
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			if n <= 4 {
				assert.Equal(t, n, k.Calls(kernelfake.OpDumpInterfaceRoutes))
				assert.Zero(t, k.Calls(kernelfake.OpDumpRoutes))
			} else {
				assert.Zero(t, k.Calls(kernelfake.OpDumpInterfaceRoutes))
				assert.Equal(t, 1, k.Calls(kernelfake.OpDumpRoutes), "one read of the table instead")
			}
			assert.Zero(t, k.Writes(), "the kernel kept every route")
			assert.Len(t, routes(k, rt.IPv4), n)
		})
	}

	t.Run("failure", func(t *testing.T) {
		k, tbl, _ := newFake(t, rt.IPv4, "np-a")
		ctx := context.Background()
		require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
		_, err := tbl.Apply(ctx)
		require.NoError(t, err)
		idx := index(t, k, "np-a")
		setUp(t, k, "np-a", false) // routes flushed
		tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkDown)
		_, err = tbl.Apply(ctx)
		require.NoError(t, err)
		setUp(t, k, "np-a", true)
		tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkUp)
		k.ResetCounts()
		k.Fail(kernelfake.OpDumpInterfaceRoutes, 1, nil)
		_, err = tbl.Apply(ctx)
		require.ErrorIs(t, err, rt.ErrDump)
		assert.Zero(t, k.Writes())
		_, err = tbl.Apply(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, k.Calls(kernelfake.OpDumpRoutes), "the whole table read after the failure")
		assert.Equal(t, 1, k.Writes())
		assert.Len(t, routes(k, rt.IPv4), 1)
		assert.Equal(t, uint64(1), tbl.Counters().Rescans)
	})
}

func TestIfaceIndexChanges(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)

	// Re-created between two monitor reports: only "up with a new index"
	// is seen.
	require.NoError(t, k.Admin().DeleteLink(bg, index(t, k, "np-a")))
	idx := addLink(t, k, "np-a", 1)
	tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, ok := route(k, rt.IPv4, mustP("10.0.0.0/24"))
	require.True(t, ok)
	assert.Equal(t, idx, r.OIF)

	// A rename (which the kernel makes only while the link is down, so
	// its routes go) reported new name first: the index moves to the new
	// name. The fake does not rename: deleting the link is what the Table
	// sees of it in the kernel.
	require.NoError(t, k.Admin().DeleteLink(bg, idx))
	tbl.OnIfaceStateChanged("np-z", idx, kernel.LinkUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, routes(k, rt.IPv4), "np-a is gone: its route is held")
	assert.Equal(t, 1, tbl.Counters().Declared)
	assert.Zero(t, tbl.Counters().Desired)
}

func TestPolicies(t *testing.T) {
	p, err := rt.NewDefaultPolicy(90, []string{`^np-`, `^tunl0$`})
	require.NoError(t, err)
	tests := []struct {
		proto uint8
		iface string
		ours  bool
		grace bool
	}{
		{90, "", true, false},
		{90, "eth0", true, false},
		{3, "np-1", true, true},
		{4, "tunl0", true, true},
		{kernel.ProtoKernel, "np-1", false, true},
		{3, "eth0", false, false},
		{3, "", false, false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.ours, p.RouteIsOurs(&kernel.Route{Protocol: tc.proto}, tc.iface), "%d %q", tc.proto, tc.iface)
		assert.Equal(t, tc.grace, p.IfaceHasGracePeriod(tc.iface), "%q", tc.iface)
	}
	_, err = rt.NewDefaultPolicy(90, []string{"("})
	require.ErrorIs(t, err, rt.ErrInvalidOptions)
	var ex rt.ExclusivePolicy
	assert.True(t, ex.RouteIsOurs(&kernel.Route{Protocol: kernel.ProtoKernel}, "eth0"))
	assert.False(t, ex.IfaceHasGracePeriod("np-1"))
	p2 := &rt.DefaultPolicy{Protocol: 5, Interfaces: []*regexp.Regexp{regexp.MustCompile("x")}}
	assert.True(t, p2.RouteIsOurs(&kernel.Route{Protocol: 1}, "x"))
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "IPv4", rt.IPv4.String())
	assert.Equal(t, "IPv6", rt.IPv6.String())
	assert.Equal(t, "Family(3)", rt.Family(3).String())
	assert.Equal(t, "throw", rt.TargetThrow.String())
	assert.Equal(t, "TargetType(42)", rt.TargetType(42).String())
	assert.Equal(t, "10.0.0.0/8", rt.RouteKey{CIDR: mustP("10.0.0.0/8")}.String())
	assert.Equal(t, "10.0.0.0/8 metric 5", rt.RouteKey{CIDR: mustP("10.0.0.0/8"), Metric: 5}.String())
}

func TestMultipathWeightsAndHops(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a", "np-b")
	require.NoError(t, tbl.SetRoutes(1, rt.InterfaceNone, []rt.Target{{
		CIDR: mustP("10.0.0.0/8"),
		NextHops: []rt.NextHop{
			{Iface: "np-b", Gateway: mustA("10.1.0.1"), Weight: 3, Onlink: true},
			{Iface: "np-a", Gateway: gw(rt.IPv4, 1)},
			{Iface: "np-c", Gateway: gw(rt.IPv4, 3)}, // not there: left out
		},
	}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	r, ok := route(k, rt.IPv4, mustP("10.0.0.0/8"))
	require.True(t, ok)
	require.Len(t, r.NextHops, 2)
	var got []string
	for _, h := range r.NextHops {
		got = append(got, fmt.Sprintf("%v w%d f%d", h.Gateway, h.Weight, h.Flags))
	}
	assert.ElementsMatch(t, []string{"10.1.0.1 w2 f4", "192.168.1.2 w0 f0"}, got)

	// np-c appears: the route gets its third path.
	idx := addLink(t, k, "np-c", 3)
	tbl.OnIfaceStateChanged("np-c", idx, kernel.LinkUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, _ = route(k, rt.IPv4, mustP("10.0.0.0/8"))
	assert.Len(t, r.NextHops, 3)
}

// TestConcurrentUse drives a Table from several goroutines at once, as an
// agent may (the monitor's callback, the loop, a metrics scraper); run
// with -race.
func TestConcurrentUse(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a", "np-b")
	a := index(t, k, "np-a")
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tbl.OnIfaceStateChanged("np-a", a, kernel.LinkState(1+i%2))
			tbl.QueueResync()
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 200 {
			cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)
			_ = tbl.RouteUpdate(rt.RouteClass(i%3), []string{"np-a", "np-b"}[i%2], rt.Target{CIDR: cidr})
			_ = tbl.Counters()
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			_, _ = tbl.Apply(ctx)
		}
	}()
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	tbl.OnIfaceStateChanged("np-a", a, kernel.LinkUp)
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 200, tbl.Counters().InKernel)
	assert.Len(t, routes(k, rt.IPv4), 200)
}

func TestNilContext(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv4)
	//lint:ignore SA1012 a nil context is the input under test
	_, err := tbl.Apply(nil) //nolint:staticcheck
	require.NoError(t, err)
}

func TestApplyHonoursContext(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, strings.Contains(err.Error(), "canceled"))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	_, ok := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	assert.True(t, ok)
}

func TestErrorsWrapSentinels(t *testing.T) {
	// A refused deletion of a route with no device.
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, rt.InterfaceNone, []rt.Target{{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, tbl.SetRoutes(1, rt.InterfaceNone, nil))
	k.Fail(kernelfake.OpApplyRoutes, 1, syscall.EBUSY)
	_, err = tbl.Apply(context.Background())
	assert.ErrorIs(t, err, rt.ErrRouteFailed)
	assert.ErrorIs(t, err, syscall.EBUSY)
	assert.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, "routetable: 1 object(s) failed; delete route 10.0.0.0/8: route write failed: kernel: delete route 10.0.0.0/8 table 254: device or resource busy", err.Error())
}
