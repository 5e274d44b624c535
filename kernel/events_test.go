//go:build linux

package kernel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/nlutil"
)

func TestEventConversion(t *testing.T) {
	lu := &netlink.LinkUpdate{Link: &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Index: 7, Name: "vx", MTU: 1450,
		Flags: net.FlagUp, RawFlags: unix.IFF_UP | unix.IFF_RUNNING}, VxlanId: 9, Port: 4789, SrcAddr: net.ParseIP("10.0.0.1")}}
	lu.Header.Type = unix.RTM_DELLINK
	ev, ok := eventOf(&nlutil.Event{Link: lu})
	require.True(t, ok)
	assert.Equal(t, &LinkEvent{Deleted: true, Link: Link{Index: 7, Name: "vx", Kind: KindVXLAN, MTU: 1450, AdminUp: true, Running: true,
		VXLAN: &VXLAN{VNI: 9, Port: 4789, Local: netip.MustParseAddr("10.0.0.1")}}}, ev.Link)
	_, ok = eventOf(&nlutil.Event{Link: &netlink.LinkUpdate{}})
	assert.False(t, ok, "an update without a link")

	ev, ok = eventOf(&nlutil.Event{Addr: &netlink.AddrUpdate{LinkIndex: 3, NewAddr: true,
		LinkAddress: net.IPNet{IP: net.ParseIP("fd00::5"), Mask: net.CIDRMask(64, 128)}}})
	require.True(t, ok)
	assert.Equal(t, &AddrEvent{Addr: Addr{LinkIndex: 3, Prefix: netip.MustParsePrefix("fd00::5/64")}}, ev.Addr)

	nr := netlink.Route{Family: unix.AF_INET, Table: 100, Type: unix.RTN_UNICAST, Protocol: 80, LinkIndex: 4,
		Dst: &net.IPNet{IP: net.IPv4(10, 1, 0, 0), Mask: net.CIDRMask(16, 32)},
		Via: &netlink.Via{AddrFamily: unix.AF_INET6, Addr: net.ParseIP("fe80::1")}, MTU: 1400,
		MultiPath: nil}
	ev, ok = eventOf(&nlutil.Event{Route: &netlink.RouteUpdate{Type: unix.RTM_NEWROUTE, Route: nr}})
	require.True(t, ok)
	assert.Equal(t, &RouteEvent{Route: Route{Family: IPv4, Table: 100, Type: RTNUnicast, Protocol: 80, OIF: 4,
		Dst: netip.MustParsePrefix("10.1.0.0/16"), Gateway: netip.MustParseAddr("fe80::1"), MTU: 1400}}, ev.Route)
	nr.Flags = unix.RTM_F_CLONED
	_, ok = eventOf(&nlutil.Event{Route: &netlink.RouteUpdate{Route: nr}})
	assert.False(t, ok, "cloned routes are not reported")
	_, ok = eventOf(&nlutil.Event{Route: &netlink.RouteUpdate{Route: netlink.Route{Family: unix.AF_MPLS}}})
	assert.False(t, ok, "nor MPLS routes")
	mp := netlink.Route{Family: unix.AF_INET6, Table: 254, MultiPath: []*netlink.NexthopInfo{
		{LinkIndex: 2, Gw: net.ParseIP("fd00::1"), Hops: 3, Flags: unix.RTNH_F_ONLINK}, {LinkIndex: 3}}}
	ev, ok = eventOf(&nlutil.Event{Route: &netlink.RouteUpdate{Type: unix.RTM_DELROUTE, Route: mp}})
	require.True(t, ok)
	assert.True(t, ev.Route.Deleted)
	assert.Equal(t, netip.MustParsePrefix("::/0"), ev.Route.Route.Dst, "no destination is the default route")
	assert.Equal(t, []NextHop{{OIF: 2, Gateway: netip.MustParseAddr("fd00::1"), Weight: 3, Flags: FlagOnlink}, {OIF: 3}}, ev.Route.Route.NextHops)

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
