package routetablefake_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/routetable/routetablefake"
)

var ctx = context.Background()

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func setup(t *testing.T) (*routetablefake.Kernel, int, int) {
	t.Helper()
	k := routetablefake.New()
	a, err := k.AddLink("a")
	require.NoError(t, err)
	b, err := k.AddLink("b")
	require.NoError(t, err)
	require.NoError(t, k.SetLinkUp("a", true))
	return k, a, b // b stays down
}

func apply(k *routetablefake.Kernel, kind rt.OpKind, r rt.KernelRoute) error {
	return k.ApplyRoutes(ctx, []rt.RouteOp{{Kind: kind, Route: r}})[0]
}

func TestRouteSemantics(t *testing.T) {
	k, a, b := setup(t)
	dev := func(dst string, oif int) rt.KernelRoute {
		return rt.KernelRoute{Family: rt.IPv4, Dst: p(dst), Type: rt.RTNUnicast, Protocol: 78, Scope: rt.ScopeLink, OIF: oif}
	}
	tests := []struct {
		name string
		kind rt.OpKind
		r    rt.KernelRoute
		want error
	}{
		{"add", rt.OpAdd, dev("10.0.0.0/24", a), nil},
		{"add twice", rt.OpAdd, dev("10.0.0.0/24", a), syscall.EEXIST},
		{"replace", rt.OpReplace, dev("10.0.0.0/24", a), nil},
		{"other metric is another route", rt.OpAdd, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Priority: 5, Type: rt.RTNBlackhole}, nil},
		{"missing link", rt.OpReplace, dev("10.0.1.0/24", 99), syscall.ENODEV},
		{"down link", rt.OpReplace, dev("10.0.1.0/24", b), syscall.ENETDOWN},
		{"down link in a next hop", rt.OpReplace, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.2.0/24"), Type: rt.RTNUnicast,
			NextHops: []rt.KernelNextHop{{OIF: a}, {OIF: b}}}, syscall.ENETDOWN},
		{"unicast without a path", rt.OpReplace, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.3.0/24"), Type: rt.RTNUnicast}, syscall.EINVAL},
		{"blackhole with a path", rt.OpReplace, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.3.0/24"), Type: rt.RTNBlackhole, OIF: a}, syscall.EINVAL},
		{"unknown type", rt.OpReplace, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.3.0/24"), Type: 42}, syscall.EINVAL},
		{"host bits", rt.OpReplace, dev("10.0.3.1/24", a), syscall.EINVAL},
		{"family mismatch", rt.OpReplace, rt.KernelRoute{Family: rt.IPv6, Dst: p("10.0.3.0/24"), Type: rt.RTNBlackhole}, syscall.EINVAL},
		{"delete wrong type", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Type: rt.RTNLocal, Scope: rt.ScopeNowhere}, syscall.ESRCH},
		{"delete wrong protocol", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Protocol: 4, Scope: rt.ScopeNowhere}, syscall.ESRCH},
		{"delete wrong interface", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), OIF: b, Scope: rt.ScopeNowhere}, syscall.ESRCH},
		{"delete wrong scope", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Scope: rt.ScopeHost}, syscall.ESRCH},
		{"delete", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Type: rt.RTNUnicast, Protocol: 78, OIF: a, Scope: rt.ScopeNowhere}, nil},
		{"delete missing", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Priority: 9, Scope: rt.ScopeNowhere}, syscall.ESRCH},
		{"delete any metric", rt.OpDelete, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Scope: rt.ScopeNowhere}, nil},
		{"unknown op", 0, dev("10.0.0.0/24", a), syscall.EOPNOTSUPP},
	}
	for _, tc := range tests {
		err := apply(k, tc.kind, tc.r)
		if tc.want == nil {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, tc.want, tc.name)
		}
	}
	assert.Empty(t, k.Routes(rt.IPv4, 0))
	assert.Equal(t, 3, k.Calls(routetablefake.CallAdd))
	assert.Equal(t, 7, k.Calls(routetablefake.CallDelete))
}

func TestIPv6Normalised(t *testing.T) {
	k, a, _ := setup(t)
	require.NoError(t, apply(k, rt.OpReplace, rt.KernelRoute{Family: rt.IPv6, Dst: p("fd00::/64"), Type: rt.RTNUnicast, Scope: rt.ScopeLink, OIF: a}))
	require.NoError(t, apply(k, rt.OpReplace, rt.KernelRoute{Family: rt.IPv6, Dst: p("fd01::/64"), Type: rt.RTNBlackhole}))
	rs := k.Routes(rt.IPv6, 0)
	require.Len(t, rs, 2)
	assert.Equal(t, uint32(1024), rs[0].Priority)
	assert.Equal(t, rt.ScopeUniverse, rs[0].Scope)
	assert.Equal(t, 1, rs[1].OIF, "blackhole routes sit on lo")
	_, ok := k.Route(rt.IPv6, 0, p("fd00::/64"), 1024)
	assert.True(t, ok)
	require.NoError(t, apply(k, rt.OpDelete, rt.KernelRoute{Family: rt.IPv6, Dst: p("fd01::/64"), Type: rt.RTNBlackhole, Priority: 1024, Scope: rt.ScopeNowhere}))
}

// The kernel caps a route's MTU at 65520 and stores the capped value; it
// refuses an unspecified gateway or source. So does the fake.
func TestNormalisedLikeTheKernel(t *testing.T) {
	k, a, _ := setup(t)
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		dst := map[rt.Family]netip.Prefix{rt.IPv4: p("10.0.0.0/24"), rt.IPv6: p("fd00::/64")}[fam]
		require.NoError(t, apply(k, rt.OpReplace, rt.KernelRoute{Family: fam, Dst: dst, Type: rt.RTNUnicast, Scope: rt.ScopeLink, OIF: a, MTU: 70000}))
		r, ok := k.Route(fam, 0, dst, map[rt.Family]uint32{rt.IPv4: 0, rt.IPv6: 1024}[fam])
		require.True(t, ok)
		assert.Equal(t, uint32(rt.MaxMTU), r.MTU, "%v", fam)
	}
	for _, r := range []rt.KernelRoute{
		{Gateway: netip.IPv4Unspecified()},
		{PrefSrc: netip.IPv4Unspecified()},
		{NextHops: []rt.KernelNextHop{{OIF: a, Gateway: netip.MustParseAddr("10.9.0.1")}, {OIF: a, Gateway: netip.IPv4Unspecified()}}},
	} {
		r.Family, r.Dst, r.Type, r.OIF = rt.IPv4, p("10.1.0.0/24"), rt.RTNUnicast, a
		require.ErrorIs(t, apply(k, rt.OpReplace, r), syscall.EINVAL)
	}
}

func TestLinkLifecycle(t *testing.T) {
	k, a, _ := setup(t)
	for _, r := range []rt.KernelRoute{
		{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Type: rt.RTNUnicast, Scope: rt.ScopeLink, OIF: a},
		{Family: rt.IPv4, Dst: p("10.0.0.1/32"), Type: rt.RTNLocal, Scope: rt.ScopeHost, OIF: a},
		{Family: rt.IPv6, Dst: p("fd00::1/128"), Type: rt.RTNLocal, OIF: a},
		{Family: rt.IPv4, Dst: p("10.1.0.0/24"), Type: rt.RTNUnicast, NextHops: []rt.KernelNextHop{{OIF: a, Gateway: netip.MustParseAddr("10.9.0.1")}}},
	} {
		require.NoError(t, k.AddRoute(r))
	}
	single := k.Routes(rt.IPv4, 0)[1]
	assert.Equal(t, a, single.OIF, "a one-hop multipath route is stored as a plain route")
	assert.Nil(t, single.NextHops)
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	require.NoError(t, k.SetNeighbor(ctx, rt.Neighbor{LinkIndex: a, IP: netip.MustParseAddr("10.0.0.5"), MAC: mac, Permanent: true}))
	require.ErrorIs(t, k.SetNeighbor(ctx, rt.Neighbor{LinkIndex: 77, IP: netip.MustParseAddr("10.0.0.5"), MAC: mac}), syscall.ENODEV)

	require.ErrorIs(t, k.RenameLink("a", "z"), syscall.EBUSY, "only a link that is down")
	require.NoError(t, k.SetLinkUp("a", false))
	assert.Len(t, k.Routes(rt.IPv4, 0), 1, "IPv4 local routes survive down")
	assert.Empty(t, k.Routes(rt.IPv6, 0))
	assert.Empty(t, k.NeighborList(rt.IPv4))
	require.NoError(t, k.RenameLink("a", "z"))
	_, ok := k.LinkIndex("a")
	assert.False(t, ok)
	require.ErrorIs(t, k.RenameLink("z", "b"), syscall.EEXIST)
	require.NoError(t, k.DeleteLink("z"))
	assert.Empty(t, k.Routes(rt.IPv4, 0))
	for _, err := range []error{k.SetLinkUp("z", true), k.DeleteLink("z"), k.RenameLink("z", "y")} {
		assert.ErrorIs(t, err, syscall.ENODEV)
	}
	_, err := k.AddLink("b")
	assert.ErrorIs(t, err, syscall.EEXIST)
	links, err := k.Links(ctx)
	require.NoError(t, err)
	assert.Equal(t, []rt.Link{{Name: "lo", Index: 1, Up: true}, {Name: "b", Index: 3}}, links)
}

// Losing the carrier keeps the routes and lets writes through, unlike
// going down; an interface dump reports the routes through the link,
// multipath ones included.
func TestCarrierAndInterfaceDumps(t *testing.T) {
	k, a, b := setup(t)
	require.NoError(t, k.SetLinkUp("b", true))
	dev := func(dst string, oif int) rt.KernelRoute {
		return rt.KernelRoute{Family: rt.IPv4, Dst: p(dst), Type: rt.RTNUnicast, Protocol: 78, Scope: rt.ScopeLink, OIF: oif}
	}
	require.NoError(t, apply(k, rt.OpAdd, dev("10.0.0.0/24", a)))
	require.NoError(t, apply(k, rt.OpAdd, dev("10.0.1.0/24", b)))
	require.NoError(t, apply(k, rt.OpAdd, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.2.0/24"), Type: rt.RTNUnicast,
		NextHops: []rt.KernelNextHop{{OIF: a}, {OIF: b}}}))
	require.NoError(t, apply(k, rt.OpAdd, rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.3.0/24"), Type: rt.RTNBlackhole}))

	dump := func(oif int) []netip.Prefix {
		var out []netip.Prefix
		require.NoError(t, k.DumpInterfaceRoutes(ctx, rt.IPv4, 0, oif, func(r *rt.KernelRoute) error {
			out = append(out, r.Dst)
			return nil
		}, func() { out = nil }))
		return out
	}
	assert.Equal(t, []netip.Prefix{p("10.0.0.0/24"), p("10.0.2.0/24")}, dump(a))
	assert.Equal(t, []netip.Prefix{p("10.0.1.0/24"), p("10.0.2.0/24")}, dump(b))
	assert.ErrorIs(t, k.DumpInterfaceRoutes(ctx, rt.IPv4, 0, 0, func(*rt.KernelRoute) error { return nil }, nil), syscall.EINVAL)
	assert.Equal(t, 2, k.Calls(routetablefake.CallDumpInterface))
	assert.Zero(t, k.Calls(routetablefake.CallDump))

	require.NoError(t, k.SetLinkCarrier("a", false))
	links, err := k.Links(ctx)
	require.NoError(t, err)
	assert.Contains(t, links, rt.Link{Name: "a", Index: a}, "reported down")
	assert.Len(t, k.Routes(rt.IPv4, 0), 4, "routes kept")
	require.NoError(t, apply(k, rt.OpReplace, dev("10.0.4.0/24", a)), "writes still accepted")
	require.NoError(t, k.SetLinkCarrier("a", true))
	links, err = k.Links(ctx)
	require.NoError(t, err)
	assert.Contains(t, links, rt.Link{Name: "a", Index: a, Up: true})
	assert.ErrorIs(t, k.SetLinkCarrier("nope", true), syscall.ENODEV)

	require.NoError(t, k.SetLinkUp("a", false))
	_, ok := k.Route(rt.IPv4, 0, p("10.0.0.0/24"), 0)
	assert.False(t, ok, "going down removes the routes through it")
	_, ok = k.Route(rt.IPv4, 0, p("10.0.1.0/24"), 0)
	assert.True(t, ok)
}

// A multipath route keeps its other next hops when one's link goes down
// (marked dead, revived on up) and goes when all are dead; deleting a
// link removes an IPv4 multipath route but only the next hop in IPv6.
func TestMultipathOnLinkChanges(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			k, a, b := setup(t)
			require.NoError(t, k.SetLinkUp("b", true))
			dst := p("10.0.4.0/24")
			if fam == rt.IPv6 {
				dst = p("fd00:4::/64")
			}
			require.NoError(t, apply(k, rt.OpAdd, rt.KernelRoute{Family: fam, Dst: dst, Type: rt.RTNUnicast,
				NextHops: []rt.KernelNextHop{{OIF: a}, {OIF: b}}}))
			hopFlags := func() []uint8 {
				r, ok := k.Route(fam, 0, dst, map[rt.Family]uint32{rt.IPv4: 0, rt.IPv6: 1024}[fam])
				require.True(t, ok)
				var out []uint8
				for _, h := range r.NextHops {
					out = append(out, h.Flags)
				}
				return out
			}
			dead := uint8(rt.FlagDead | rt.FlagLinkdown)
			require.NoError(t, k.SetLinkUp("b", false))
			assert.Equal(t, []uint8{0, dead}, hopFlags())
			require.NoError(t, k.SetLinkUp("b", true))
			assert.Equal(t, []uint8{0, 0}, hopFlags(), "revived")
			require.NoError(t, k.SetLinkCarrier("a", false))
			assert.Equal(t, []uint8{uint8(rt.FlagLinkdown), 0}, hopFlags())
			require.NoError(t, k.SetLinkCarrier("a", true))

			require.NoError(t, k.DeleteLink("b"))
			routes := k.Routes(fam, 0)
			if fam == rt.IPv4 {
				assert.Empty(t, routes, "IPv4 drops the whole route")
			} else if assert.Len(t, routes, 1) {
				assert.Equal(t, a, routes[0].OIF, "IPv6 keeps the other next hop, as a single path")
				assert.Empty(t, routes[0].NextHops)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	k, a, _ := setup(t)
	r := rt.KernelRoute{Family: rt.IPv4, Dst: p("10.0.0.0/24"), Type: rt.RTNUnicast, Scope: rt.ScopeLink, OIF: a}
	k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Dst: p("10.9.0.0/24"), Times: -1})
	k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Times: 2, Err: syscall.ENETDOWN})
	for range 2 {
		assert.ErrorIs(t, apply(k, rt.OpReplace, r), syscall.ENETDOWN)
	}
	require.NoError(t, apply(k, rt.OpReplace, r))
	other := r
	other.Dst = p("10.9.0.0/24")
	for range 3 {
		err := apply(k, rt.OpReplace, other)
		assert.ErrorIs(t, err, routetablefake.ErrInjected)
		assert.ErrorIs(t, err, syscall.EIO)
		assert.Equal(t, "routetablefake: replace 10.9.0.0/24: injected failure (input/output error)", err.Error(),
			"the package named once")
	}
	k.ClearFaults()
	require.NoError(t, apply(k, rt.OpReplace, other))

	// An interrupted dump restarts once, calling reset.
	k.Inject(routetablefake.Fault{Call: routetablefake.CallDump, Interrupt: true})
	var seen []netip.Prefix
	resets := 0
	require.NoError(t, k.DumpRoutes(ctx, rt.IPv4, 0, func(r *rt.KernelRoute) error { seen = append(seen, r.Dst); return nil },
		func() { resets++; seen = nil }))
	assert.Equal(t, 1, resets)
	assert.Equal(t, []netip.Prefix{p("10.0.0.0/24"), p("10.9.0.0/24")}, seen)

	// A failed dump reports half, then the error.
	k.Inject(routetablefake.Fault{Call: routetablefake.CallDump, Err: syscall.EINTR})
	seen = nil
	err := k.DumpRoutes(ctx, rt.IPv4, 254, func(r *rt.KernelRoute) error { seen = append(seen, r.Dst); return nil }, nil)
	require.ErrorIs(t, err, syscall.EINTR)
	assert.Len(t, seen, 1)
	stop := errors.New("stop")
	require.ErrorIs(t, k.DumpRoutes(ctx, rt.IPv4, 254, func(*rt.KernelRoute) error { return stop }, nil), stop)

	for _, c := range []routetablefake.Call{routetablefake.CallLinks, routetablefake.CallNeighbors, routetablefake.CallSetNeighbor,
		routetablefake.CallDeleteNeighbor, routetablefake.CallConntrack} {
		k.Inject(routetablefake.Fault{Call: c})
	}
	_, err = k.Links(ctx)
	assert.Error(t, err)
	_, err = k.Neighbors(ctx, rt.IPv4)
	assert.Error(t, err)
	assert.Error(t, k.SetNeighbor(ctx, rt.Neighbor{LinkIndex: a}))
	assert.Error(t, k.DeleteNeighbor(ctx, rt.Neighbor{LinkIndex: a}))
	_, err = k.DeleteConntrack(ctx, rt.IPv4, nil)
	assert.Error(t, err)
	assert.Equal(t, 1, k.Calls(routetablefake.CallLinks))
	assert.Zero(t, k.Calls(99))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, apply(k, rt.OpReplace, r), nil)
	assert.ErrorIs(t, k.ApplyRoutes(cctx, []rt.RouteOp{{Kind: rt.OpReplace, Route: r}})[0], context.Canceled)
	assert.ErrorIs(t, k.DumpRoutes(cctx, rt.IPv4, 254, func(*rt.KernelRoute) error { return nil }, nil), context.Canceled)
}

func TestConntrackAndNeighbors(t *testing.T) {
	k, a, _ := setup(t)
	x, y := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	k.AddFlow(routetablefake.Flow{Family: rt.IPv4, Src: x, Dst: y})
	k.AddFlow(routetablefake.Flow{Family: rt.IPv4, Src: y, Dst: netip.MustParseAddr("10.0.0.3")})
	k.AddFlow(routetablefake.Flow{Family: rt.IPv6, Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2")})
	n, err := k.DeleteConntrack(ctx, rt.IPv4, []netip.Addr{x})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Len(t, k.Flows(), 2)

	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	k.AddNeighbor(rt.Neighbor{LinkIndex: a, IP: netip.MustParseAddr("fd00::9"), MAC: mac})
	require.NoError(t, k.SetNeighbor(ctx, rt.Neighbor{LinkIndex: a, IP: x, MAC: mac, Permanent: true}))
	require.ErrorIs(t, k.SetNeighbor(ctx, rt.Neighbor{LinkIndex: a, IP: x}), syscall.EINVAL)
	v4, err := k.Neighbors(ctx, rt.IPv4)
	require.NoError(t, err)
	require.Len(t, v4, 1)
	assert.Equal(t, mac, v4[0].MAC)
	assert.Len(t, k.NeighborList(rt.IPv6), 1)
	require.NoError(t, k.DeleteNeighbor(ctx, v4[0]))
	require.NoError(t, k.DeleteNeighbor(ctx, v4[0]), "a missing entry is not an error")
	assert.Empty(t, k.NeighborList(rt.IPv4))
	k.ResetCalls()
	assert.Zero(t, k.Calls(routetablefake.CallDeleteNeighbor))
}
