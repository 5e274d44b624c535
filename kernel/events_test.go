//go:build linux

package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

// attr encodes one netlink attribute.
func attr(typ uint16, payload ...[]byte) []byte {
	v := slices.Concat(payload...)
	b := ne.AppendUint16(nil, uint16(4+len(v)))
	b = ne.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(v uint32) []byte { return ne.AppendUint32(nil, v) }

// message wraps a payload as the watcher delivers it.
func message(typ uint16, payload ...[]byte) *nlutil.Event {
	return &nlutil.Event{Msg: &nlutil.Message{Header: unix.NlMsghdr{Type: typ}, Data: slices.Concat(payload...)}}
}

// ifaddrmsg encodes an address message's header.
func ifaddrmsg(af uint8, bits uint8, index uint32) []byte {
	return append([]byte{af, bits, 0, 0}, u32(index)...)
}

// Events are decoded as the listings decode what they dump: links as the
// netlink library parses them, addresses as Addrs reports them, routes
// with the route codec of DumpRoutes.
func TestEventConversion(t *testing.T) {
	ifinfo := append([]byte{unix.AF_UNSPEC, 0, 1, 0}, u32(7)...)
	ifinfo = append(ifinfo, u32(unix.IFF_UP|unix.IFF_RUNNING)...)
	ifinfo = append(ifinfo, u32(0)...)
	port := binary.BigEndian.AppendUint16(nil, 4789)
	vxlan := slices.Concat(ifinfo, attr(unix.IFLA_IFNAME, []byte("vx\x00")), attr(unix.IFLA_MTU, u32(1450)),
		attr(unix.IFLA_LINKINFO, attr(unix.IFLA_INFO_KIND, []byte("vxlan\x00")), attr(unix.IFLA_INFO_DATA,
			attr(unix.IFLA_VXLAN_ID, u32(9)), attr(unix.IFLA_VXLAN_LOCAL, []byte{10, 0, 0, 1}), attr(unix.IFLA_VXLAN_PORT, port))))
	ev, ok := eventOf(message(unix.RTM_DELLINK, vxlan))
	require.True(t, ok)
	assert.Equal(t, &LinkEvent{Deleted: true, Link: Link{Index: 7, Name: "vx", Kind: KindVXLAN, Encap: EncapEthernet, MTU: 1450, AdminUp: true, Running: true,
		VXLAN: &VXLAN{VNI: 9, Port: 4789, Local: netip.MustParseAddr("10.0.0.1")}}}, ev.Link)
	ev, ok = eventOf(message(unix.RTM_NEWLINK, vxlan))
	require.True(t, ok)
	assert.False(t, ev.Link.Deleted)
	_, ok = eventOf(message(unix.RTM_NEWLINK, []byte{1, 2}))
	assert.False(t, ok, "a truncated link message")

	for _, tc := range []struct {
		name string
		msg  *nlutil.Event
		want *AddrEvent
	}{
		{"IPv6: IFA_ADDRESS", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET6, 64, 3),
			attr(unix.IFA_ADDRESS, netip.MustParseAddr("fd00::5").AsSlice())),
			&AddrEvent{Addr: Addr{LinkIndex: 3, Prefix: netip.MustParsePrefix("fd00::5/64")}}},
		{"IPv4: IFA_LOCAL equal to IFA_ADDRESS", message(unix.RTM_DELADDR, ifaddrmsg(unix.AF_INET, 24, 4),
			attr(unix.IFA_ADDRESS, []byte{10, 1, 2, 3}), attr(unix.IFA_LOCAL, []byte{10, 1, 2, 3})),
			&AddrEvent{Deleted: true, Addr: Addr{LinkIndex: 4, Prefix: netip.MustParsePrefix("10.1.2.3/24")}}},
		{"IPv4 point-to-point: the local address alone", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET, 32, 4),
			attr(unix.IFA_ADDRESS, []byte{10, 9, 9, 9}), attr(unix.IFA_LOCAL, []byte{10, 1, 2, 3})),
			&AddrEvent{Addr: Addr{LinkIndex: 4, Prefix: netip.MustParsePrefix("10.1.2.3/32")}}},
		{"IPv6 with a peer", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET6, 128, 5),
			attr(unix.IFA_LOCAL, netip.MustParseAddr("fd00::1").AsSlice()), attr(unix.IFA_ADDRESS, netip.MustParseAddr("fd00::2").AsSlice())),
			&AddrEvent{Addr: Addr{LinkIndex: 5, Prefix: netip.MustParsePrefix("fd00::1/128")}}},
		{"no address", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET, 24, 4)), nil},
		{"no interface", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET, 24, 0), attr(unix.IFA_ADDRESS, []byte{10, 1, 2, 3})), nil},
		{"another family", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_BRIDGE, 24, 4), attr(unix.IFA_ADDRESS, []byte{10, 1, 2, 3})), nil},
		{"truncated", message(unix.RTM_NEWADDR, []byte{unix.AF_INET, 24}), nil},
		{"truncated attribute", message(unix.RTM_NEWADDR, ifaddrmsg(unix.AF_INET, 24, 4), []byte{8, 0, 1, 0}), nil},
	} {
		ev, ok := eventOf(tc.msg)
		assert.Equal(t, tc.want != nil, ok, tc.name)
		if tc.want != nil {
			assert.Equal(t, tc.want, ev.Addr, tc.name)
		}
	}

	routes := []Route{
		{Family: IPv4, Table: 100, Type: RTNUnicast, Protocol: 80, Scope: ScopeLink, OIF: 4,
			Dst: netip.MustParsePrefix("10.1.0.0/16"), MTU: 1400},
		{Family: IPv6, Table: TableMain, Type: RTNUnicast, Protocol: 80, Dst: netip.MustParsePrefix("::/0"), NextHops: []NextHop{
			{OIF: 2, Gateway: netip.MustParseAddr("fd00::1"), Weight: 3, Flags: FlagOnlink}, {OIF: 3, Gateway: netip.MustParseAddr("fd00::2")}}},
	}
	for _, r := range routes {
		for _, kind := range []OpKind{OpReplace, OpDelete} {
			b := appendRouteMsg(nil, kind, 1, &r)
			h := (*unix.NlMsghdr)(unsafe.Pointer(&b[0]))
			ev, ok := eventOf(message(h.Type, b[unix.NLMSG_HDRLEN:]))
			require.True(t, ok)
			if kind == OpDelete { // a request, not what the kernel announces: compare the key
				assert.True(t, ev.Route.Deleted)
				assert.Equal(t, r.Dst, ev.Route.Route.Dst)
				continue
			}
			assert.Equal(t, &RouteEvent{Route: r}, ev.Route)
		}
	}
	cloned := appendRouteMsg(nil, OpReplace, 1, &routes[0])
	ne.PutUint32(cloned[unix.NLMSG_HDRLEN+8:], unix.RTM_F_CLONED)
	_, ok = eventOf(message(unix.RTM_NEWROUTE, cloned[unix.NLMSG_HDRLEN:]))
	assert.False(t, ok, "cloned routes are not reported")
	_, ok = eventOf(message(unix.RTM_NEWROUTE, []byte{unix.AF_MPLS, 20, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0}))
	assert.False(t, ok, "nor MPLS routes")
	_, ok = eventOf(message(unix.RTM_NEWNEIGH, make([]byte, 16)))
	assert.False(t, ok, "nor other messages")

	ev, ok = eventOf(&nlutil.Event{Barrier: &nlutil.Barrier{ID: 1 << 40}})
	require.True(t, ok)
	assert.Equal(t, &Barrier{ID: 1 << 40}, ev.Barrier)

	overflow := fmt.Errorf("lost: %w", nlutil.ErrOverflow)
	ev, ok = eventOf(&nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Links | nlutil.Routes, Reason: overflow}})
	require.True(t, ok)
	assert.Equal(t, EventLinks|EventRoutes, ev.Resync.Kinds)
	assert.ErrorIs(t, ev.Resync.Reason, ErrOverflow)
	assert.ErrorIs(t, ev.Resync.Reason, nlutil.ErrOverflow)
	ev, _ = eventOf(&nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Addrs}})
	assert.NoError(t, ev.Resync.Reason)
	ev, ok = eventOf(&nlutil.Event{Err: errors.New("subscribe failed")})
	require.True(t, ok)
	assert.EqualError(t, ev.Err, "kernel: subscribe failed")
	_, ok = eventOf(&nlutil.Event{})
	assert.False(t, ok)
	assert.Equal(t, EventLinks|EventAddrs|EventRoutes, eventKinds(watchKinds(EventLinks|EventAddrs|EventRoutes)))
}

func TestCheckSubscribeOptions(t *testing.T) {
	o, err := CheckSubscribeOptions()
	require.NoError(t, err)
	assert.Equal(t, DefaultReceiveBufferSize, o.ReceiveBufferSize)
	o, err = CheckSubscribeOptions(SubscribeOptions{ReceiveBufferSize: 4096})
	require.NoError(t, err)
	assert.Equal(t, 4096, o.ReceiveBufferSize)
	o, err = CheckSubscribeOptions(SubscribeOptions{ReceiveBufferSize: MaxReceiveBufferSize})
	require.NoError(t, err)
	assert.Equal(t, MaxReceiveBufferSize, o.ReceiveBufferSize)
	for _, bad := range [][]SubscribeOptions{
		{{ReceiveBufferSize: -1}},
		{{ReceiveBufferSize: MaxReceiveBufferSize + 1}},
		{{}, {}},
	} {
		_, err := CheckSubscribeOptions(bad...)
		assert.ErrorIs(t, err, ErrInvalid, "%+v", bad)
	}
}
