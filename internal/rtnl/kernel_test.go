//go:build linux

package rtnl

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
)

// kernelEnv is a fresh namespace with the test links and a Conn in it.
type kernelEnv struct {
	ns    *kerneltest.NS
	links testLinks
	c     *Conn
}

func newKernelEnv(t *testing.T) *kernelEnv {
	t.Helper()
	ns := kerneltest.NewNS(t)
	links, err := setupLinks(ns)
	require.NoError(t, err)
	c, err := Open(ns.NsHandle())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return &kernelEnv{ns: ns, links: links, c: c}
}

// apply applies ops and requires every one to succeed.
func (e *kernelEnv) apply(t *testing.T, ops []RouteOp) {
	t.Helper()
	for i, err := range e.c.ApplyRoutes(context.Background(), ops) {
		require.NoError(t, err, "op %d: %+v", i, ops[i].Route)
	}
}

// ours dumps with DumpRoutes, sorted.
func (e *kernelEnv) ours(t *testing.T, family uint8, table uint32) []Route {
	t.Helper()
	var out []Route
	err := e.c.DumpRoutes(context.Background(), family, table, func(r *Route) error {
		out = append(out, *r)
		return nil
	}, func() { out = out[:0] })
	require.NoError(t, err)
	sortRoutes(out)
	return out
}

// oracle lists with the netlink library, sorted.
func (e *kernelEnv) oracle(t *testing.T, family uint8, table uint32) []Route {
	t.Helper()
	nrs, err := e.ns.Handle().RouteListFiltered(int(family), &netlink.Route{Table: int(table)}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	out := make([]Route, 0, len(nrs))
	for _, nr := range nrs {
		out = append(out, fromNetlink(&nr))
	}
	sortRoutes(out)
	return out
}

// checkOracle requires our dump to equal the library's, field by field,
// and returns it.
func (e *kernelEnv) checkOracle(t *testing.T, family uint8, table uint32) []Route {
	t.Helper()
	ours, oracle := e.ours(t, family, table), e.oracle(t, family, table)
	require.Equal(t, len(oracle), len(ours))
	for i := range ours {
		require.Equal(t, oracle[i], ours[i], "route %d", i)
	}
	return ours
}

func sortRoutes(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Table, b.Table), a.Dst.Addr().Compare(b.Dst.Addr()), cmp.Compare(a.Dst.Bits(), b.Dst.Bits()),
			cmp.Compare(a.TOS, b.TOS), cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.OIF, b.OIF), a.Gateway.Compare(b.Gateway))
	})
}

func addrOfIP(ip net.IP) netip.Addr {
	if ip == nil {
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func fromNetlink(nr *netlink.Route) Route {
	r := Route{
		Family: uint8(nr.Family), Table: uint32(nr.Table), Type: uint8(nr.Type), Protocol: uint8(nr.Protocol),
		Scope: uint8(nr.Scope), TOS: uint8(nr.Tos), Priority: uint32(nr.Priority), OIF: int32(nr.LinkIndex),
		Gateway: addrOfIP(nr.Gw), PrefSrc: addrOfIP(nr.Src), Flags: uint32(nr.Flags), MTU: uint32(nr.MTU),
	}
	if nr.Dst != nil {
		ones, _ := nr.Dst.Mask.Size()
		r.Dst = netip.PrefixFrom(addrOfIP(nr.Dst.IP), ones)
	} else {
		r.Dst = netip.PrefixFrom(zeroAddr(r.Family == unix.AF_INET), 0)
	}
	if nr.Via != nil {
		if v, ok := nr.Via.(*netlink.Via); ok {
			r.Gateway = addrOfIP(v.Addr)
		}
	}
	for _, h := range nr.MultiPath {
		nh := NextHop{OIF: int32(h.LinkIndex), Gateway: addrOfIP(h.Gw), Weight: uint8(h.Hops), Flags: uint8(h.Flags)}
		if h.Via != nil {
			if v, ok := h.Via.(*netlink.Via); ok {
				nh.Gateway = addrOfIP(v.Addr)
			}
		}
		r.NextHops = append(r.NextHops, nh)
	}
	return r
}

func TestKernelApplyRoutes10k(t *testing.T) {
	for _, isV4 := range []bool{true, false} {
		name := map[bool]string{true: "ipv4", false: "ipv6"}[isV4]
		t.Run(name, func(t *testing.T) {
			e := newKernelEnv(t)
			const n, table = 10_000, 100
			ops := genRoutes(isV4, n, table, e.links.v0)
			if !isV4 {
				for i := range ops { // what the kernel stores for IPv6
					ops[i].Route.Scope, ops[i].Route.Priority = unix.RT_SCOPE_UNIVERSE, 1024
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
			for _, r := range e.ours(t, ops[0].Route.Family, unix.RT_TABLE_MAIN) {
				assert.NotEqual(t, uint8(80), r.Protocol)
			}
		})
	}
}

// shape is a route written in TestKernelRouteShapes, with the fields the
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
		r.Scope = unix.RT_SCOPE_UNIVERSE
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
			shape{name: "v4 " + typeName(typ), r: v4(Route{Table: 1000, Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 100 + byte(i), 0, 0}), 16), Type: typ, Protocol: 80, Priority: 7})},
			shape{name: "v6 " + typeName(typ), r: v6(Route{Table: 1000, Dst: netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x02, 0, byte(i)}), 64), Type: typ, Protocol: 80, Priority: 7}), kernel: v6Reject},
		)
	}
	return out
}

func TestKernelRouteShapes(t *testing.T) {
	e := newKernelEnv(t)
	all := shapes(e.links)
	ops := make([]RouteOp, len(all))
	for i, s := range all {
		ops[i] = RouteOp{Kind: OpAdd, Route: s.r}
	}
	e.apply(t, ops)
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
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
	dumped := e.ours(t, unix.AF_INET, 1000)
	again := make([]RouteOp, len(dumped))
	for i := range dumped {
		again[i] = RouteOp{Kind: OpReplace, Route: dumped[i]}
	}
	e.apply(t, again)
	assert.Equal(t, dumped, e.ours(t, unix.AF_INET, 1000))

	// Multipath to single path and back, by replace.
	mp := all[slices.IndexFunc(all, func(s shape) bool { return s.name == "v4 multipath" })].r
	single := mp
	single.NextHops, single.OIF, single.Gateway = nil, e.links.v0, testGw4
	e.apply(t, []RouteOp{{Kind: OpReplace, Route: single}})
	got := e.checkOracle(t, unix.AF_INET, 1000)
	i := slices.IndexFunc(got, func(r Route) bool { return r.Dst == mp.Dst })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, single, got[i])
	e.apply(t, []RouteOp{{Kind: OpReplace, Route: mp}})
	got = e.checkOracle(t, unix.AF_INET, 1000)
	i = slices.IndexFunc(got, func(r Route) bool { return r.Dst == mp.Dst })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, mp, got[i])
}

// A dump of one interface's routes equals the full dump filtered in
// userspace, with the kernel filtering (strict) and without.
func TestKernelDumpInterfaceRoutes(t *testing.T) {
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
	counted := &countingTransport{transport: e.c.t}
	e.c.t = counted
	for _, strict := range []bool{true, false} {
		e.c.strict = strict
		for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
			counted.received = 0
			full := e.ours(t, fam, 1000)
			fullBytes := counted.received
			for _, oif := range []int32{e.links.v0, e.links.v1} {
				counted.received = 0
				var want, got []Route
				for _, r := range full {
					if r.Uses(oif) {
						want = append(want, r)
					}
				}
				err := e.c.DumpInterfaceRoutes(context.Background(), fam, 1000, oif, func(r *Route) error {
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
					assert.Equal(t, fullBytes, counted.received, "without strict checking the kernel sends everything")
				}
			}
		}
	}
}

// countingTransport counts the bytes a Conn receives.
type countingTransport struct {
	transport
	received int
}

func (c *countingTransport) recv(b []byte) (int, error) {
	n, err := c.transport.recv(b)
	if err == nil {
		c.received += n
	}
	return n, err
}

func TestKernelPerOpErrors(t *testing.T) {
	e := newKernelEnv(t)
	h := e.ns.Handle()
	down := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-down"}}
	require.NoError(t, h.LinkAdd(down))
	downLink, err := h.LinkByName("br-down")
	require.NoError(t, err)
	downIdx := int32(downLink.Attrs().Index)

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
	errs := e.c.ApplyRoutes(context.Background(), ops)
	for i, c := range cases {
		if c.want == 0 {
			assert.NoError(t, errs[i], "op %d", i)
			continue
		}
		assert.ErrorIs(t, errs[i], c.want, "op %d", i)
		var oe *OpError
		if assert.ErrorAs(t, errs[i], &oe) {
			assert.Equal(t, c.op.Route.Dst, oe.Dst)
		}
		t.Logf("op %d: %v", i, errs[i])
	}
	v4s := e.checkOracle(t, unix.AF_INET, 100)
	assert.Len(t, v4s, 5, "every good IPv4 route, and none of the bad ones")
	assert.Len(t, e.checkOracle(t, unix.AF_INET6, 100), 2)
}

func TestKernelDelete(t *testing.T) {
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
		for _, err := range e.c.ApplyRoutes(context.Background(), dels) {
			assert.ErrorIs(t, err, unix.ESRCH)
		}
	}
}

func TestKernelDumpTables(t *testing.T) {
	e := newKernelEnv(t)
	e.apply(t, genRoutes(true, 10, 300, e.links.v0))
	e.apply(t, genRoutes(false, 10, 300, e.links.v0))
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		all := e.checkOracle(t, fam, 0)
		tables := map[uint32]int{}
		for _, r := range all {
			tables[r.Table]++
		}
		assert.Equal(t, 10, tables[300])
		assert.NotZero(t, tables[unix.RT_TABLE_MAIN], "the connected route of v0")
		assert.NotZero(t, tables[unix.RT_TABLE_LOCAL], "the local address routes")
		e.checkOracle(t, fam, unix.RT_TABLE_MAIN)
		e.checkOracle(t, fam, unix.RT_TABLE_LOCAL)
		assert.Empty(t, e.ours(t, fam, 4242), "a missing table is empty")
	}
}

func TestKernelOpen(t *testing.T) {
	_, err := Open(netns.None())
	assert.ErrorIs(t, err, ErrInvalidArgument)

	uts, err := netns.GetFromPath("/proc/self/ns/uts") // open, but not a network namespace
	require.NoError(t, err)
	_, err = Open(uts)
	assert.ErrorIs(t, err, unix.EINVAL)
	uts.Close()

	e := newKernelEnv(t)
	sock := e.c.t.(*socket)
	assert.True(t, sock.strict, "kernel-side dump filtering (Linux ≥ 4.20)")
	assert.True(t, sock.capAck, "NETLINK_CAP_ACK (Linux ≥ 4.3)")
	assert.GreaterOrEqual(t, sock.rcvbuf, rcvBufSize, "SO_RCVBUFFORCE as root")
	connected := func(rs []Route) bool {
		return slices.ContainsFunc(rs, func(r Route) bool { return r.Dst == testAddr4.Masked() && r.OIF == e.links.v0 })
	}
	assert.True(t, connected(e.ours(t, unix.AF_INET, unix.RT_TABLE_MAIN)), "Open's socket lives in the namespace")

	var cur *Conn
	require.NoError(t, e.ns.Do(func() error {
		var err error
		cur, err = OpenCurrent()
		return err
	}))
	defer cur.Close()
	var rs []Route
	require.NoError(t, cur.DumpRoutes(context.Background(), unix.AF_INET, unix.RT_TABLE_MAIN, func(r *Route) error {
		rs = append(rs, *r)
		return nil
	}, nil))
	assert.True(t, connected(rs), "OpenCurrent's socket stays in the namespace it was created in")

	// The caller's thread never changed namespace.
	self, err := netns.Get()
	require.NoError(t, err)
	defer self.Close()
	assert.False(t, self.Equal(e.ns.NsHandle()))
}

// TestKernelAckWindow shrinks the socket receive buffer: with the window
// sized from it, 10k routes go through without a lost ack; with the window
// forced open, the kernel drops acks and the ops report ErrAckLost (their
// routes were applied all the same).
func TestKernelAckWindow(t *testing.T) {
	for _, forced := range []bool{false, true} {
		name := map[bool]string{false: "window from buffer", true: "window forced open"}[forced]
		t.Run(name, func(t *testing.T) {
			e := newKernelEnv(t)
			s := e.c.t.(*socket)
			require.NoError(t, unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 32<<10))
			eff, err := unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
			require.NoError(t, err)
			e.c.ackBudget = max(eff/2, minAckBudget)
			if forced {
				e.c.ackBudget = 1 << 30
			}
			ops := genRoutes(true, 10_000, 100, e.links.v0)
			errs := e.c.ApplyRoutes(context.Background(), ops)
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
			assert.Len(t, e.checkOracle(t, unix.AF_INET, 100), 10_000, "every route was applied")
			// The Conn still works.
			for _, err := range e.c.ApplyRoutes(context.Background(), []RouteOp{{Kind: OpDelete, Route: ops[0].Route}}) {
				assert.NoError(t, err)
			}
		})
	}
}

func TestKernelClosedConn(t *testing.T) {
	e := newKernelEnv(t)
	require.NoError(t, e.c.Close())
	err := e.c.DumpRoutes(context.Background(), unix.AF_INET, 0, func(*Route) error { return nil }, nil)
	assert.ErrorIs(t, err, ErrClosed)
	errs := e.c.ApplyRoutes(context.Background(), genRoutes(true, 2, 100, e.links.v0))
	assert.True(t, errors.Is(errs[0], ErrClosed) && errors.Is(errs[1], ErrClosed))
}

// TestKernelDumpDuringWrites dumps a table while another Conn keeps
// writing another table of the namespace: every dump is complete (or, if
// the kernel flags it, restarted after reset), never mixed.
func TestKernelDumpDuringWrites(t *testing.T) {
	e := newKernelEnv(t)
	const n = 20_000
	e.apply(t, genRoutes(true, n, 100, e.links.v0))
	writer, err := Open(e.ns.NsHandle())
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
		err := e.c.DumpRoutes(context.Background(), unix.AF_INET, 100, func(r *Route) error {
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
