//go:build linux

package kernel

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

var (
	v4Gw   = netip.MustParseAddr("192.0.2.1")
	v4Gw2  = netip.MustParseAddr("192.0.2.2")
	v4Src  = netip.MustParseAddr("192.0.2.10")
	v6Gw   = netip.MustParseAddr("fe80::1")
	v6Gw2  = netip.MustParseAddr("2001:db8::2")
	v6Src  = netip.MustParseAddr("2001:db8::10")
	v4Dst  = netip.MustParsePrefix("10.1.0.0/16")
	v6Dst  = netip.MustParsePrefix("2001:db8:1::/48")
	v4Host = netip.MustParsePrefix("10.9.8.7/32")
	v6Host = netip.MustParsePrefix("2001:db8:ffff::1/128")
)

// codecCase is one route shape. want is what a decode of its encoding
// yields: the route itself unless the encoding normalises it.
type codecCase struct {
	name string
	r    Route
	want *Route
}

func v4(r Route) Route { r.Family = IPv4; return r }
func v6(r Route) Route { r.Family = IPv6; return r }

func codecCases() []codecCase {
	cases := []codecCase{
		{name: "v4 device route", r: v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, Protocol: 80, Scope: unix.RT_SCOPE_LINK, OIF: 7})},
		{name: "v4 host route", r: v4(Route{Table: 100, Dst: v4Host, Type: unix.RTN_UNICAST, Protocol: 80, Scope: unix.RT_SCOPE_LINK, OIF: 7})},
		{name: "v4 via gateway", r: v4(Route{Table: 254, Dst: v4Dst, Type: unix.RTN_UNICAST, Protocol: unix.RTPROT_STATIC, OIF: 3, Gateway: v4Gw})},
		{name: "v4 gateway without interface", r: v4(Route{Table: 10, Dst: v4Dst, Type: unix.RTN_UNICAST, Gateway: v4Gw})},
		{name: "v4 onlink", r: v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3, Gateway: v4Gw, Flags: unix.RTNH_F_ONLINK})},
		{name: "v4 via IPv6 gateway", r: v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3, Gateway: v6Gw})},
		{name: "v4 default route", r: v4(Route{Table: 100, Dst: netip.MustParsePrefix("0.0.0.0/0"), Type: unix.RTN_UNICAST, OIF: 3, Gateway: v4Gw})},
		{name: "v4 metric MTU prefsrc TOS", r: v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, Scope: unix.RT_SCOPE_LINK, OIF: 3, PrefSrc: v4Src, Priority: 1234, MTU: 1400, TOS: 0x10})},
		{name: "v4 table above 255", r: v4(Route{Table: 100_000, Dst: v4Dst, Type: unix.RTN_UNICAST, Scope: unix.RT_SCOPE_LINK, OIF: 3})},
		{name: "v4 multipath", r: v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, NextHops: []NextHop{
			{OIF: 3, Gateway: v4Gw, Weight: 0},
			{OIF: 4, Gateway: v4Gw2, Weight: 9, Flags: unix.RTNH_F_ONLINK},
			{OIF: 5, Gateway: v6Gw, Weight: 255},
			{OIF: 6},
		}})},
		{name: "v4 local", r: v4(Route{Table: 255, Dst: v4Host, Type: unix.RTN_LOCAL, Protocol: unix.RTPROT_KERNEL, Scope: unix.RT_SCOPE_HOST, OIF: 1, PrefSrc: netip.MustParseAddr("10.9.8.7")})},
		{name: "v6 device route", r: v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, Protocol: 80, OIF: 7, Priority: 1024})},
		{name: "v6 host route", r: v6(Route{Table: 100, Dst: v6Host, Type: unix.RTN_UNICAST, OIF: 7, Priority: 1024})},
		{name: "v6 via gateway", r: v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, OIF: 7, Gateway: v6Gw, Priority: 10})},
		{name: "v6 onlink", r: v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, OIF: 7, Gateway: v6Gw2, Flags: unix.RTNH_F_ONLINK})},
		{name: "v6 default", r: v6(Route{Table: 100, Dst: netip.MustParsePrefix("::/0"), Type: unix.RTN_UNICAST, OIF: 7, Gateway: v6Gw})},
		{name: "v6 metric MTU prefsrc", r: v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, OIF: 7, PrefSrc: v6Src, Priority: 77, MTU: 1280})},
		{name: "v6 table above 255", r: v6(Route{Table: 4_000_000_000, Dst: v6Dst, Type: unix.RTN_UNICAST, OIF: 7})},
		{name: "v6 multipath", r: v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, Priority: 1024, NextHops: []NextHop{
			{OIF: 7, Gateway: v6Gw, Weight: 1},
			{OIF: 8, Gateway: v6Gw2, Weight: 3, Flags: unix.RTNH_F_ONLINK},
		}})},
		{name: "v6 local", r: v6(Route{Table: 255, Dst: v6Host, Type: unix.RTN_LOCAL, Protocol: unix.RTPROT_KERNEL, OIF: 1, Priority: 0})},
	}
	for _, typ := range []uint8{unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT, unix.RTN_THROW} {
		cases = append(cases,
			codecCase{name: "v4 " + routeTypeName(typ), r: v4(Route{Table: 100, Dst: v4Dst, Type: typ, Protocol: 80, Priority: 5})},
			codecCase{name: "v6 " + routeTypeName(typ), r: v6(Route{Table: 100, Dst: v6Dst, Type: typ, Protocol: 80, Priority: 5})},
		)
	}
	// Normalising encodings.
	main := v4(Route{Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3})
	mainWant := main
	mainWant.Table = unix.RT_TABLE_MAIN
	state := v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3, Gateway: v4Gw,
		Flags: unix.RTNH_F_ONLINK | unix.RTNH_F_LINKDOWN | unix.RTNH_F_DEAD | unix.RTM_F_OFFLOAD})
	stateWant := state
	stateWant.Flags = unix.RTNH_F_ONLINK
	one := v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, NextHops: []NextHop{{OIF: 9, Gateway: v6Gw, Weight: 4, Flags: unix.RTNH_F_ONLINK | unix.RTNH_F_DEAD}}})
	oneWant := one
	oneWant.NextHops, oneWant.OIF, oneWant.Gateway, oneWant.Flags = nil, 9, v6Gw, unix.RTNH_F_ONLINK
	mpState := v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, NextHops: []NextHop{{OIF: 3, Flags: unix.RTNH_F_LINKDOWN}, {OIF: 4}}})
	mpStateWant := mpState
	mpStateWant.NextHops = []NextHop{{OIF: 3}, {OIF: 4}}
	cases = append(cases,
		codecCase{name: "table 0 is main", r: main, want: &mainWant},
		codecCase{name: "state flags dropped", r: state, want: &stateWant},
		codecCase{name: "one next hop is a single path", r: one, want: &oneWant},
		codecCase{name: "next-hop state flags dropped", r: mpState, want: &mpStateWant},
	)
	return cases
}

func TestCodecRoundTrip(t *testing.T) {
	for _, kind := range []OpKind{OpReplace, OpAdd, OpDelete} {
		for _, tc := range codecCases() {
			t.Run(kind.String()+"/"+tc.name, func(t *testing.T) {
				require.NoError(t, tc.r.check(kind))
				msg := appendRouteMsg(nil, kind, 4242, &tc.r)
				h, payload, rest, ok := nextMessage(msg)
				require.True(t, ok)
				assert.Nil(t, rest)
				assert.Equal(t, uint32(len(msg)), h.len)
				assert.Equal(t, uint32(4242), h.seq)
				wantType, wantFlags := uint16(unix.RTM_NEWROUTE), uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE)
				switch kind {
				case OpReplace:
					wantFlags |= unix.NLM_F_REPLACE
				case OpAdd:
					wantFlags |= unix.NLM_F_EXCL
				case OpDelete:
					wantType, wantFlags = unix.RTM_DELROUTE, unix.NLM_F_REQUEST|unix.NLM_F_ACK
				}
				assert.Equal(t, wantType, h.typ)
				assert.Equal(t, wantFlags, h.flags)

				var got Route
				ok, err := decodeRoute(payload, &got)
				require.NoError(t, err)
				require.True(t, ok)
				want := tc.r
				if tc.want != nil {
					want = *tc.want
				}
				if kind == OpDelete && want.Scope == unix.RT_SCOPE_UNIVERSE {
					want.Scope = unix.RT_SCOPE_NOWHERE
				}
				assert.Equal(t, want, got)
				checkWithNL(t, payload, &want)
			})
		}
	}
}

// checkWithNL parses our encoding with the netlink library's parser (an
// independent implementation) and checks every attribute against want.
func checkWithNL(t *testing.T, payload []byte, want *Route) {
	t.Helper()
	msg := nl.DeserializeRtMsg(payload)
	assert.Equal(t, uint8(want.Family.AF()), msg.Family)
	assert.Equal(t, uint8(want.Dst.Bits()), msg.Dst_len)
	assert.Equal(t, want.Type, msg.Type)
	assert.Equal(t, want.Protocol, msg.Protocol)
	assert.Equal(t, want.Scope, msg.Scope)
	assert.Equal(t, want.TOS, msg.Tos)
	assert.Equal(t, want.Flags, msg.Flags)
	if want.Table < 256 {
		assert.Equal(t, uint8(want.Table), msg.Table)
	} else {
		assert.Equal(t, uint8(unix.RT_TABLE_UNSPEC), msg.Table)
	}
	attrs, err := nl.ParseRouteAttrAsMap(payload[rtmsgLen:])
	require.NoError(t, err)
	native := nl.NativeEndian()
	assert.Equal(t, want.Table, native.Uint32(attrs[unix.RTA_TABLE].Value))
	addr := func(b []byte) netip.Addr { a, _ := netip.AddrFromSlice(b); return a }
	if want.Dst.Bits() > 0 {
		assert.Equal(t, want.Dst.Addr(), addr(attrs[unix.RTA_DST].Value))
	} else {
		assert.NotContains(t, attrs, uint16(unix.RTA_DST))
	}
	if want.OIF != 0 {
		assert.Equal(t, uint32(want.OIF), native.Uint32(attrs[unix.RTA_OIF].Value))
	} else {
		assert.NotContains(t, attrs, uint16(unix.RTA_OIF))
	}
	checkGw(t, want.Family, want.Gateway, attrs[unix.RTA_GATEWAY].Value, attrs[unix.RTA_VIA].Value)
	if want.PrefSrc.IsValid() {
		assert.Equal(t, want.PrefSrc, addr(attrs[unix.RTA_PREFSRC].Value))
	}
	if want.Priority != 0 {
		assert.Equal(t, want.Priority, native.Uint32(attrs[unix.RTA_PRIORITY].Value))
	} else {
		assert.NotContains(t, attrs, uint16(unix.RTA_PRIORITY))
	}
	if want.MTU != 0 {
		metrics, err := nl.ParseRouteAttrAsMap(attrs[unix.RTA_METRICS].Value)
		require.NoError(t, err)
		assert.Equal(t, want.MTU, native.Uint32(metrics[unix.RTAX_MTU].Value))
	} else {
		assert.NotContains(t, attrs, uint16(unix.RTA_METRICS))
	}
	if len(want.NextHops) == 0 {
		assert.NotContains(t, attrs, uint16(unix.RTA_MULTIPATH))
		return
	}
	mp := attrs[unix.RTA_MULTIPATH].Value
	for i, h := range want.NextHops {
		require.GreaterOrEqual(t, len(mp), rtnhLen, "next hop %d", i)
		nh := nl.DeserializeRtNexthop(mp)
		assert.Equal(t, h.OIF, int(nh.Ifindex), "next hop %d", i)
		assert.Equal(t, h.Weight, nh.Hops, "next hop %d", i)
		assert.Equal(t, h.Flags, uint32(nh.Flags), "next hop %d", i)
		sub, err := nl.ParseRouteAttrAsMap(mp[rtnhLen:nh.RtNexthop.Len])
		require.NoError(t, err)
		checkGw(t, want.Family, h.Gateway, sub[unix.RTA_GATEWAY].Value, sub[unix.RTA_VIA].Value)
		mp = mp[align4(int(nh.RtNexthop.Len)):]
	}
	assert.Empty(t, mp)
}

// checkGw checks a gateway attribute: RTA_GATEWAY of the route's family,
// or RTA_VIA (family, address) for an IPv6 next hop of an IPv4 route.
func checkGw(t *testing.T, family Family, want netip.Addr, gw, via []byte) {
	t.Helper()
	switch {
	case !want.IsValid():
		assert.Nil(t, gw)
		assert.Nil(t, via)
	case family == IPv4 && want.Is6():
		assert.Nil(t, gw)
		require.Len(t, via, 18)
		assert.Equal(t, uint16(unix.AF_INET6), nl.NativeEndian().Uint16(via))
		assert.Equal(t, want.As16(), [16]byte(via[2:]))
	default:
		assert.Nil(t, via)
		a, ok := netip.AddrFromSlice(gw)
		require.True(t, ok)
		assert.Equal(t, want, a)
	}
}

// nlEncode builds a route message payload with the netlink library's
// encoder, attribute order and all, independently of appendRouteMsg.
func nlEncode(r *Route) []byte {
	native := nl.NativeEndian()
	u32 := func(v uint32) []byte { b := make([]byte, 4); native.PutUint32(b, v); return b }
	msg := nl.NewRtMsg()
	msg.Family, msg.Dst_len, msg.Tos = uint8(r.Family.AF()), uint8(r.Dst.Bits()), r.TOS
	msg.Table, msg.Protocol, msg.Scope, msg.Type, msg.Flags = unix.RT_TABLE_COMPAT, r.Protocol, r.Scope, r.Type, r.Flags
	out := append([]byte(nil), msg.Serialize()...)
	gw := func(a netip.Addr) []byte {
		switch {
		case !a.IsValid():
			return nil
		case r.Family == IPv4 && a.Is6():
			v := append([]byte{0, 0}, a.AsSlice()...)
			native.PutUint16(v, unix.AF_INET6)
			return nl.NewRtAttr(unix.RTA_VIA, v).Serialize()
		}
		return nl.NewRtAttr(unix.RTA_GATEWAY, a.AsSlice()).Serialize()
	}
	// Attributes in a different order from ours, as a kernel may send them.
	if r.Priority != 0 {
		out = append(out, nl.NewRtAttr(unix.RTA_PRIORITY, u32(r.Priority)).Serialize()...)
	}
	out = append(out, gw(r.Gateway)...)
	if r.OIF != 0 {
		out = append(out, nl.NewRtAttr(unix.RTA_OIF, u32(uint32(r.OIF))).Serialize()...)
	}
	if r.PrefSrc.IsValid() {
		out = append(out, nl.NewRtAttr(unix.RTA_PREFSRC, r.PrefSrc.AsSlice()).Serialize()...)
	}
	if r.Dst.Bits() > 0 {
		out = append(out, nl.NewRtAttr(unix.RTA_DST, r.Dst.Addr().AsSlice()).Serialize()...)
	}
	if r.MTU != 0 {
		m := nl.NewRtAttr(unix.RTA_METRICS, nil)
		m.AddRtAttr(unix.RTAX_ADVMSS, u32(1))
		m.AddRtAttr(unix.RTAX_MTU, u32(r.MTU))
		out = append(out, m.Serialize()...)
	}
	if len(r.NextHops) > 0 {
		var hops []byte
		for _, h := range r.NextHops {
			nh := &nl.RtNexthop{}
			nh.Ifindex, nh.Hops, nh.Flags = int32(h.OIF), h.Weight, uint8(h.Flags)
			if b := gw(h.Gateway); b != nil {
				nh.Children = append(nh.Children, rawAttr(b))
			}
			hops = append(hops, nh.Serialize()...)
		}
		out = append(out, nl.NewRtAttr(unix.RTA_MULTIPATH, hops).Serialize()...)
	}
	out = append(out, nl.NewRtAttr(unix.RTA_CACHEINFO, make([]byte, 32)).Serialize()...) // ignored
	out = append(out, nl.NewRtAttr(unix.RTA_TABLE, u32(r.Table)).Serialize()...)
	return out
}

// rawAttr is an already serialized attribute.
type rawAttr []byte

func (a rawAttr) Len() int          { return len(a) }
func (a rawAttr) Serialize() []byte { return a }

func TestDecodeNetlinkLibraryEncoding(t *testing.T) {
	for _, tc := range codecCases() {
		if tc.want != nil {
			continue // normalising cases: the library would send them as given
		}
		t.Run(tc.name, func(t *testing.T) {
			var got Route
			ok, err := decodeRoute(nlEncode(&tc.r), &got)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, tc.r, got)
		})
	}
}

func TestDecodeRouteRejectsMalformed(t *testing.T) {
	good := appendRouteMsg(nil, OpReplace, 1, &Route{Family: IPv4, Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3, Gateway: v4Gw})[hdrLen:]
	attrAt := func(typ uint16) int { // offset of the first attribute of typ
		for off := rtmsgLen; off+4 <= len(good); off += align4(int(ne.Uint16(good[off:]))) {
			if ne.Uint16(good[off+2:]) == typ {
				return off
			}
		}
		t.Fatalf("no attribute %d", typ)
		return 0
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name    string
		payload []byte
	}{
		{"short header", good[:rtmsgLen-1]},
		{"prefix length 33", mutate(func(b []byte) []byte { b[1] = 33; return b })},
		{"attribute longer than message", mutate(func(b []byte) []byte { ne.PutUint16(b[rtmsgLen:], 200); return b })},
		{"attribute shorter than its header", mutate(func(b []byte) []byte { ne.PutUint16(b[rtmsgLen:], 2); return b })},
		{"3-byte gateway", mutate(func(b []byte) []byte {
			off := attrAt(unix.RTA_GATEWAY)
			ne.PutUint16(b[off:], 7)
			return b
		})},
		{"2-byte table", mutate(func(b []byte) []byte {
			off := attrAt(unix.RTA_TABLE)
			ne.PutUint16(b[off:], 6)
			return b
		})},
		{"IPv6 gateway in RTA_GATEWAY of an IPv4 route", append(append([]byte(nil), good...), nl.NewRtAttr(unix.RTA_GATEWAY, v6Gw.AsSlice()).Serialize()...)},
		{"RTA_VIA of unknown family", append(append([]byte(nil), good...), nl.NewRtAttr(unix.RTA_VIA, []byte{7, 0, 1, 2, 3, 4}).Serialize()...)},
		{"rtnexthop longer than RTA_MULTIPATH", append(append([]byte(nil), good...), nl.NewRtAttr(unix.RTA_MULTIPATH, []byte{40, 0, 0, 0, 1, 0, 0, 0}).Serialize()...)},
		{"3-byte next-hop gateway", append(append([]byte(nil), good...), nl.NewRtAttr(unix.RTA_MULTIPATH, []byte{16, 0, 0, 0, 1, 0, 0, 0, 7, 0, unix.RTA_GATEWAY, 0, 10, 0, 0, 0}).Serialize()...)},
		{"truncated attribute at the end", append(append([]byte(nil), good...), 8, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Route
			ok, err := decodeRoute(tc.payload, &r)
			assert.False(t, ok)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

func TestDecodeRouteSkipsOtherFamilies(t *testing.T) {
	payload := appendRouteMsg(nil, OpReplace, 1, &Route{Family: IPv4, Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3})[hdrLen:]
	for _, fam := range []uint8{unix.AF_UNSPEC, unix.AF_MPLS, unix.AF_BRIDGE} {
		payload[0] = fam
		var r Route
		ok, err := decodeRoute(payload, &r)
		assert.NoError(t, err, "family %d", fam)
		assert.False(t, ok, "family %d", fam)
	}
}

func TestRouteIsCompact(t *testing.T) {
	// The routetable keeps one Route-sized record per route, within a
	// 512-byte budget that also pays for its maps.
	assert.LessOrEqual(t, unsafe.Sizeof(Route{}), uintptr(144))
	assert.LessOrEqual(t, unsafe.Sizeof(NextHop{}), uintptr(40))
}

func TestDecodeRouteDoesNotAllocate(t *testing.T) {
	r := v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, OIF: 7, Gateway: v6Gw, PrefSrc: v6Src, Priority: 9, MTU: 1400})
	payload := appendRouteMsg(nil, OpReplace, 1, &r)[hdrLen:]
	var got Route
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodeRoute(payload, &got); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, r, got)
}

func TestEncodeRouteDoesNotAllocate(t *testing.T) {
	r := v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 7, Gateway: v4Gw, PrefSrc: v4Src, Priority: 9, MTU: 1400})
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() { buf = appendRouteMsg(buf[:0], OpReplace, 1, &r) })
	assert.Zero(t, allocs)
	assert.NotEmpty(t, buf)
}

func TestParseErrorExtendedAck(t *testing.T) {
	req := appendRouteMsg(nil, OpReplace, 9, &Route{Family: IPv4, Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3})
	tests := []struct {
		name  string
		msg   []byte
		code  int32
		extra string
	}{
		{"ack", ackMsg(9, 0, ""), 0, ""},
		{"capped error with message", ackMsg(9, -int32(unix.ENODEV), "Device not found"), -int32(unix.ENODEV), "Device not found"},
		{"uncapped error echoing the request", uncappedAck(req, -int32(unix.EINVAL), "Invalid prefix"), -int32(unix.EINVAL), "Invalid prefix"},
		{"error without message", ackMsg(9, -int32(unix.EEXIST), ""), -int32(unix.EEXIST), ""},
		{"done with message", doneMsg(9, 0, -int32(unix.ENOENT), "FIB table does not exist"), -int32(unix.ENOENT), "FIB table does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, payload, _, ok := nextMessage(tc.msg)
			require.True(t, ok)
			code, msg, ok := parseError(h, payload)
			assert.True(t, ok)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, tc.extra, msg)
		})
	}
}

func TestNextAttr(t *testing.T) {
	two := append(nl.NewRtAttr(unix.RTA_OIF, []byte{1, 2, 3, 4}).Serialize(), nl.NewRtAttr(unix.RTA_DST|0x8000, []byte{9}).Serialize()...)
	typ, v, rest, ok := nextAttr(two)
	require.True(t, ok)
	assert.Equal(t, uint16(unix.RTA_OIF), typ)
	assert.Equal(t, []byte{1, 2, 3, 4}, v)
	typ, v, rest, ok = nextAttr(rest)
	require.True(t, ok)
	assert.Equal(t, uint16(unix.RTA_DST), typ, "flags masked")
	assert.Equal(t, []byte{9}, v, "the value without its padding")
	assert.Nil(t, rest)
	for _, bad := range [][]byte{nil, two[:3], {3, 0, 1, 0}, {9, 0, 1, 0, 0, 0, 0, 0}} {
		_, _, _, ok := nextAttr(bad)
		assert.False(t, ok, "% x", bad)
	}
}

func TestNextMessage(t *testing.T) {
	a, b := ackMsg(1, 0, ""), ackMsg(2, -1, "x")
	buf := append(append([]byte(nil), a...), b...)
	h, _, rest, ok := nextMessage(buf)
	require.True(t, ok)
	assert.Equal(t, uint32(1), h.seq)
	h, _, rest, ok = nextMessage(rest)
	require.True(t, ok)
	assert.Equal(t, uint32(2), h.seq)
	assert.Nil(t, rest)
	for _, bad := range [][]byte{nil, a[:hdrLen-1], func() []byte { c := append([]byte(nil), a...); ne.PutUint32(c, 8); return c }(),
		func() []byte { c := append([]byte(nil), a...); ne.PutUint32(c, uint32(len(c)+1)); return c }()} {
		_, _, _, ok := nextMessage(bad)
		assert.False(t, ok)
	}
}
