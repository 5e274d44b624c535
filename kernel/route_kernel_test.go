//go:build linux

package kernel

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestKernelRoutesApply10k(t *testing.T) {
	for _, isV4 := range []bool{true, false} {
		name := map[bool]string{true: "ipv4", false: "ipv6"}[isV4]
		t.Run(name, func(t *testing.T) {
			e := newKernelEnv(t)
			const n, table = 10_000, 100
			ops := genRoutes(isV4, n, table, e.links.v0)
			if !isV4 {
				for i := range ops { // what the kernel stores for IPv6
					ops[i].Route.Scope, ops[i].Route.Priority = ScopeUniverse, 1024
				}
			}
			e.apply(t, ops)
			got := e.checkOracle(t, ops[0].Route.Family, table)
			want := make([]Route, n)
			for i := range ops {
				want[i] = ops[i].Route
			}
			sortRoutes(want)
			require.Equal(t, want, got)

			// Replacing everything again is a no-op that succeeds.
			e.apply(t, ops)
			assert.Len(t, e.ours(t, ops[0].Route.Family, table), n)
			// The main table was not touched.
			for _, r := range e.ours(t, ops[0].Route.Family, TableMain) {
				assert.NotEqual(t, uint8(80), r.Protocol)
			}
		})
	}
}

// shape is a route written in TestKernelRoutesShapes, with the fields the
// kernel fills in on its own.
type shape struct {
	name string
	r    Route
	// kernel adjusts r to what a dump reports.
	kernel func(r *Route)
}

func shapes(l testLinks) []shape {
	uni := uint8(unix.RTN_UNICAST)
	link := uint8(unix.RT_SCOPE_LINK)
	v6Kernel := func(r *Route) { // IPv6 routes: universe scope, default metric 1024
		r.Scope = ScopeUniverse
		if r.Priority == 0 {
			r.Priority = 1024
		}
	}
	v6Reject := func(r *Route) { v6Kernel(r); r.OIF = 1 } // IPv6 reject routes sit on lo
	onV0 := func(r *Route) { r.OIF = l.v0 }
	out := []shape{
		{name: "v4 device", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.1.0.0/16"), Type: uni, Protocol: 80, Scope: link, OIF: l.v0})},
		{name: "v4 gateway", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.2.0.0/16"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: testGw4})},
		{name: "v4 gateway, interface resolved", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.3.0.0/16"), Type: uni, Protocol: 80, Gateway: testGw4}), kernel: onV0},
		{name: "v4 onlink", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.4.0.0/16"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: netip.MustParseAddr("192.0.2.1"), Flags: unix.RTNH_F_ONLINK})},
		{name: "v4 prefsrc metric MTU", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.5.0.0/16"), Type: uni, Protocol: 80, Scope: link, OIF: l.v0, PrefSrc: testAddr4.Addr(), Priority: 50, MTU: 1400})},
		{name: "v4 same prefix, other metric", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.5.0.0/16"), Type: uni, Protocol: 80, Scope: link, OIF: l.v1, Priority: 60})},
		{name: "v4 multipath", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.6.0.0/16"), Type: uni, Protocol: 80, NextHops: []NextHop{
			{OIF: l.v0, Gateway: testGw4}, {OIF: l.v0, Gateway: testGw4b, Weight: 4}, {OIF: l.v0, Gateway: netip.MustParseAddr("192.0.2.9"), Flags: unix.RTNH_F_ONLINK},
		}})},
		{name: "v4 via IPv6 gateway", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.7.0.0/16"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: testGw6})},
		{name: "v4 default", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: testGw4})},
		{name: "v4 local", r: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.8.0.1/32"), Type: unix.RTN_LOCAL, Protocol: 80, Scope: unix.RT_SCOPE_HOST, OIF: l.v0})},
		{name: "v4 table above 255", r: v4(Route{Table: 100_000, Dst: netip.MustParsePrefix("10.9.0.0/16"), Type: uni, Protocol: 80, Scope: link, OIF: l.v0})},
		{name: "v6 device", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:1::/64"), Type: uni, Protocol: 80, OIF: l.v0}), kernel: v6Kernel},
		{name: "v6 gateway", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:2::/64"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: testGw6}), kernel: v6Kernel},
		{name: "v6 link-local gateway", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:3::/64"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: netip.MustParseAddr("fe80::99")}), kernel: v6Kernel},
		{name: "v6 onlink", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:4::/64"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: netip.MustParseAddr("2001:db8::1"), Flags: unix.RTNH_F_ONLINK}), kernel: v6Kernel},
		{name: "v6 prefsrc metric MTU", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:5::/64"), Type: uni, Protocol: 80, OIF: l.v0, PrefSrc: testAddr6.Addr(), Priority: 50, MTU: 1400}), kernel: v6Kernel},
		{name: "v6 multipath", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:6::/64"), Type: uni, Protocol: 80, NextHops: []NextHop{
			{OIF: l.v0, Gateway: testGw6}, {OIF: l.v0, Gateway: testGw6b},
		}}), kernel: v6Kernel},
		{name: "v6 default", r: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("::/0"), Type: uni, Protocol: 80, OIF: l.v0, Gateway: testGw6}), kernel: v6Kernel},
		{name: "v6 table above 255", r: v6(Route{Table: 100_000, Dst: netip.MustParsePrefix("fd01:9::/64"), Type: uni, Protocol: 80, OIF: l.v0}), kernel: v6Kernel},
	}
	for i, typ := range []uint8{unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT, unix.RTN_THROW} {
		out = append(out,
			shape{name: "v4 " + routeTypeName(typ), r: v4(Route{Table: 1000, Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 100 + byte(i), 0, 0}), 16), Type: typ, Protocol: 80, Priority: 7})},
			shape{name: "v6 " + routeTypeName(typ), r: v6(Route{Table: 1000, Dst: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x02, 0, byte(i)}), 64), Type: typ, Protocol: 80, Priority: 7}), kernel: v6Reject},
		)
	}
	return out
}

func TestKernelRoutesShapes(t *testing.T) {
	e := newKernelEnv(t)
	all := shapes(e.links)
	ops := make([]RouteOp, len(all))
	for i, s := range all {
		ops[i] = RouteOp{Kind: OpAdd, Route: s.r}
	}
	e.apply(t, ops)
	for _, fam := range []Family{IPv4, IPv6} {
		for _, table := range []uint32{1000, 100_000} {
			got := e.checkOracle(t, fam, table)
			for _, s := range all {
				if s.r.Family != fam || s.r.Table != table {
					continue
				}
				want := s.r
				if s.kernel != nil {
					s.kernel(&want)
				}
				i := slices.IndexFunc(got, func(r Route) bool { return keyOf(&r) == keyOf(&want) })
				if assert.GreaterOrEqual(t, i, 0, "%s: not in the dump", s.name) {
					assert.Equal(t, want, got[i], s.name)
				}
			}
		}
	}

	// A dumped route writes back unchanged (OpReplace of what we read).
	dumped := e.ours(t, IPv4, 1000)
	again := make([]RouteOp, len(dumped))
	for i := range dumped {
		again[i] = RouteOp{Kind: OpReplace, Route: dumped[i]}
	}
	e.apply(t, again)
	assert.Equal(t, dumped, e.ours(t, IPv4, 1000))

	// Multipath to single path and back, by replace.
	mp := all[slices.IndexFunc(all, func(s shape) bool { return s.name == "v4 multipath" })].r
	single := mp
	single.NextHops, single.OIF, single.Gateway = nil, e.links.v0, testGw4
	e.apply(t, []RouteOp{{Kind: OpReplace, Route: single}})
	got := e.checkOracle(t, IPv4, 1000)
	i := slices.IndexFunc(got, func(r Route) bool { return r.Dst == mp.Dst })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, single, got[i])
	e.apply(t, []RouteOp{{Kind: OpReplace, Route: mp}})
	got = e.checkOracle(t, IPv4, 1000)
	i = slices.IndexFunc(got, func(r Route) bool { return r.Dst == mp.Dst })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, mp, got[i])
}

// A dump of one interface's routes equals the full dump filtered in
// userspace, with the kernel filtering (strict) and without.
func TestKernelRoutesDumpInterface(t *testing.T) {
	e := newKernelEnv(t)
	all := shapes(e.links)
	ops := make([]RouteOp, 0, len(all)+2)
	for _, s := range all {
		ops = append(ops, RouteOp{Kind: OpAdd, Route: s.r})
	}
	// Multipath over both links (v1 has no address: onlink gateways).
	ops = append(ops,
		RouteOp{Kind: OpAdd, Route: v4(Route{Table: 1000, Dst: netip.MustParsePrefix("10.60.0.0/16"), Type: unix.RTN_UNICAST, Protocol: 80, NextHops: []NextHop{
			{OIF: e.links.v0, Gateway: testGw4}, {OIF: e.links.v1, Gateway: netip.MustParseAddr("192.0.2.7"), Flags: unix.RTNH_F_ONLINK},
		}})},
		RouteOp{Kind: OpAdd, Route: v6(Route{Table: 1000, Dst: netip.MustParsePrefix("fd01:60::/64"), Type: unix.RTN_UNICAST, Protocol: 80, NextHops: []NextHop{
			{OIF: e.links.v0, Gateway: testGw6}, {OIF: e.links.v1, Gateway: netip.MustParseAddr("fe80::7")},
		}})},
	)
	e.apply(t, ops)
	c := e.conn(t)
	counted := &countingTransport{transport: c.t}
	c.t = counted
	for _, strict := range []bool{true, false} {
		c.strict = strict
		for _, fam := range []Family{IPv4, IPv6} {
			counted.received = 0
			full := e.ours(t, fam, 1000)
			fullBytes := counted.received
			for _, oif := range []int{e.links.v0, e.links.v1} {
				counted.received = 0
				var want, got []Route
				for _, r := range full {
					if r.Uses(oif) {
						want = append(want, r)
					}
				}
				err := e.ns.DumpInterfaceRoutes(context.Background(), fam, 1000, oif, func(r *Route) error {
					got = append(got, *r)
					return nil
				}, func() { got = got[:0] })
				require.NoError(t, err)
				sortRoutes(got)
				assert.Equal(t, want, got, "strict %v, family %d, oif %d", strict, fam, oif)
				assert.NotEmpty(t, got)
				assert.Less(t, len(got), len(full))
				mp := slices.IndexFunc(got, func(r Route) bool { return len(r.NextHops) > 1 && r.Uses(e.links.v0) && r.Uses(e.links.v1) })
				assert.GreaterOrEqual(t, mp, 0, "the multipath route over both links is in both dumps")
				if strict && oif == e.links.v1 {
					assert.Less(t, counted.received, fullBytes/2, "the kernel filters: only v1's routes are sent")
				} else if !strict {
					// Every table is sent; routes the kernel adds elsewhere
					// meanwhile (IPv6 addresses finishing DAD) change the
					// total a little.
					assert.InEpsilon(t, fullBytes, counted.received, 0.25, "without strict checking the kernel sends everything")
				}
			}
		}
	}
}

func TestKernelRoutesPerOpErrors(t *testing.T) {
	e := newKernelEnv(t)
	h := e.kns.Handle()
	down := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-down"}}
	require.NoError(t, h.LinkAdd(down))
	downLink, err := h.LinkByName("br-down")
	require.NoError(t, err)
	downIdx := int(downLink.Attrs().Index)

	good := genRoutes(true, 5, 100, e.links.v0)
	good6 := genRoutes(false, 2, 100, e.links.v0)
	e.apply(t, good[4:5]) // exists before
	bad := func(f func(r *Route)) Route {
		r := good[0].Route
		r.Dst = netip.MustParsePrefix("10.250.0.0/16")
		f(&r)
		return r
	}
	type opCase struct {
		op   RouteOp
		want unix.Errno // 0: success
	}
	cases := []opCase{
		{good[0], 0},
		{RouteOp{Kind: OpReplace, Route: bad(func(r *Route) { r.OIF = 9999 })}, unix.ENODEV},
		{good[1], 0},
		{RouteOp{Kind: OpReplace, Route: bad(func(r *Route) { r.Scope, r.Gateway = 0, netip.MustParseAddr("192.0.2.99") })}, unix.ENETUNREACH},
		{good[2], 0},
		{RouteOp{Kind: OpReplace, Route: bad(func(r *Route) { r.OIF = downIdx })}, unix.ENETDOWN},
		{RouteOp{Kind: OpDelete, Route: bad(func(*Route) {})}, unix.ESRCH},
		{RouteOp{Kind: OpAdd, Route: good[4].Route}, unix.EEXIST},
		{good6[0], 0},
		{RouteOp{Kind: OpReplace, Route: v6(Route{Table: 100, Dst: netip.MustParsePrefix("fd09::/64"), Type: unix.RTN_UNICAST, OIF: 9999})}, unix.ENODEV},
		{good[3], 0},
		{good6[1], 0},
	}
	ops := make([]RouteOp, len(cases))
	for i, c := range cases {
		ops[i] = c.op
	}
	errs := e.ns.ApplyRoutes(context.Background(), ops)
	for i, c := range cases {
		if c.want == 0 {
			assert.NoError(t, errs[i], "op %d", i)
			continue
		}
		assert.ErrorIs(t, errs[i], c.want, "op %d", i)
		var oe *OpError
		if assert.ErrorAs(t, errs[i], &oe) {
			assert.Equal(t, routeObject(&c.op.Route), oe.Object)
		}
		t.Logf("op %d: %v", i, errs[i])
	}
	v4s := e.checkOracle(t, IPv4, 100)
	assert.Len(t, v4s, 5, "every good IPv4 route, and none of the bad ones")
	assert.Len(t, e.checkOracle(t, IPv6, 100), 2)
}

func TestKernelRoutesDelete(t *testing.T) {
	e := newKernelEnv(t)
	for _, isV4 := range []bool{true, false} {
		ops := genRoutes(isV4, 100, 100, e.links.v0)
		e.apply(t, ops)
		fam := ops[0].Route.Family
		dels := make([]RouteOp, 0, 50)
		for i := 0; i < 100; i += 2 {
			r := ops[i].Route
			if i%4 == 0 { // the key alone is enough
				r = Route{Family: r.Family, Table: r.Table, Dst: r.Dst}
			}
			dels = append(dels, RouteOp{Kind: OpDelete, Route: r})
		}
		e.apply(t, dels)
		got := e.checkOracle(t, fam, 100)
		require.Len(t, got, 50)
		for _, r := range got {
			i := slices.IndexFunc(ops, func(op RouteOp) bool { return op.Route.Dst == r.Dst })
			assert.Equal(t, 1, i%2, "route %s should have been deleted", r.Dst)
		}
		// Deleting again: every op fails with ESRCH alone.
		for _, err := range e.ns.ApplyRoutes(context.Background(), dels) {
			assert.ErrorIs(t, err, unix.ESRCH)
		}
	}
}

func TestKernelRoutesDumpTables(t *testing.T) {
	e := newKernelEnv(t)
	e.apply(t, genRoutes(true, 10, 300, e.links.v0))
	e.apply(t, genRoutes(false, 10, 300, e.links.v0))
	for _, fam := range []Family{IPv4, IPv6} {
		all := e.checkOracle(t, fam, 0)
		tables := map[uint32]int{}
		for _, r := range all {
			tables[r.Table]++
		}
		assert.Equal(t, 10, tables[300])
		assert.NotZero(t, tables[TableMain], "the connected route of v0")
		assert.NotZero(t, tables[TableLocal], "the local address routes")
		e.checkOracle(t, fam, TableMain)
		e.checkOracle(t, fam, TableLocal)
		assert.Empty(t, e.ours(t, fam, 4242), "a missing table is empty")
	}
}

func TestKernelRoutesAckWindow(t *testing.T) {
	for _, forced := range []bool{false, true} {
		name := map[bool]string{false: "window from buffer", true: "window forced open"}[forced]
		t.Run(name, func(t *testing.T) {
			e := newKernelEnv(t)
			c := e.conn(t)
			s := c.t.(*socket)
			require.NoError(t, unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<10))
			eff, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
			require.NoError(t, err)
			c.ackBudget = max(eff/2, minAckBudget)
			if forced {
				c.ackBudget = 1 << 30
			}
			ops := genRoutes(true, 10_000, 100, e.links.v0)
			errs := e.ns.ApplyRoutes(context.Background(), ops)
			lost := 0
			for i, err := range errs {
				if err != nil {
					require.ErrorIs(t, err, ErrAckLost, "op %d", i)
					require.ErrorIs(t, err, unix.ENOBUFS, "op %d", i)
					lost++
				}
			}
			if forced {
				assert.NotZero(t, lost, "acks overflow a %d-byte buffer", eff)
			} else {
				assert.Zero(t, lost)
			}
			assert.Len(t, e.checkOracle(t, IPv4, 100), 10_000, "every route was applied")
			// The Conn still works.
			for _, err := range e.ns.ApplyRoutes(context.Background(), []RouteOp{{Kind: OpDelete, Route: ops[0].Route}}) {
				assert.NoError(t, err)
			}
		})
	}
}

func TestKernelRoutesDumpDuringWrites(t *testing.T) {
	e := newKernelEnv(t)
	const n = 20_000
	e.apply(t, genRoutes(true, n, 100, e.links.v0))
	writer, err := Open(e.kns.Path())
	require.NoError(t, err)
	defer writer.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		churn := genRoutes(true, 500, 200, e.links.v0)
		dels := make([]RouteOp, len(churn))
		for i := range churn {
			dels[i] = RouteOp{Kind: OpDelete, Route: churn[i].Route}
		}
		for ctx.Err() == nil {
			for _, ops := range [][]RouteOp{churn, dels} {
				for _, err := range writer.ApplyRoutes(ctx, ops) {
					if err != nil && ctx.Err() == nil {
						done <- err
						return
					}
				}
			}
		}
		done <- nil
	}()
	for range 10 {
		count, resets := 0, 0
		err := e.ns.DumpRoutes(context.Background(), IPv4, 100, func(r *Route) error {
			count++
			if r.Table != 100 {
				return errors.New("route of another table")
			}
			return nil
		}, func() { count = 0; resets++ })
		if errors.Is(err, ErrDumpInterrupted) {
			assert.Equal(t, DumpAttempts-1, resets)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, n, count, "after %d resets", resets)
	}
	cancel()
	require.NoError(t, <-done)
}
