//go:build linux

package ifacemonitorfake_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ifacemonitor/ifacemonitorfake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// state is everything a Kernel shows, to check that a failed call changed
// nothing.
type state struct {
	links  []ifacemonitorfake.Link
	addrs  map[string][]netip.Prefix
	routes []ifacemonitor.Route
}

func snapshot(t *testing.T, k *ifacemonitorfake.Kernel) state {
	t.Helper()
	s := state{links: k.Links(), addrs: map[string][]netip.Prefix{}, routes: k.Routes()}
	for _, l := range s.links {
		a, err := k.Addrs(l.Name)
		require.NoError(t, err)
		s.addrs[l.Name] = a
	}
	return s
}

// populated returns a Kernel with eth0 (#1, up, 10.0.0.5/24 and
// fd00::5/64, a route of each family) and eth1 (#2, down).
func populated(t *testing.T) *ifacemonitorfake.Kernel {
	t.Helper()
	k := ifacemonitorfake.New()
	_, err := k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	_, err = k.AddLink("eth1", "veth", 1500)
	require.NoError(t, err)
	require.NoError(t, k.SetUp("eth0"))
	require.NoError(t, k.AddAddr("eth0", pfx("10.0.0.5/24")))
	require.NoError(t, k.AddAddr("eth0", pfx("fd00::5/64")))
	require.NoError(t, k.AddRoute(ifacemonitor.Route{Dst: pfx("10.2.0.0/16"), LinkIndex: 1}))
	require.NoError(t, k.AddRoute(ifacemonitor.Route{Dst: pfx("fd02::/64"), LinkIndex: 1}))
	return k
}

func TestErrorsChangeNothing(t *testing.T) {
	tests := []struct {
		name  string
		call  func(k *ifacemonitorfake.Kernel) error
		errno unix.Errno
	}{
		{"add link empty name", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("", "veth", 1500); return err }, unix.EINVAL},
		{"add link long name", func(k *ifacemonitorfake.Kernel) error {
			_, err := k.AddLink(strings.Repeat("x", 16), "veth", 1500)
			return err
		}, unix.EINVAL},
		{"add link slash", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("a/b", "veth", 1500); return err }, unix.EINVAL},
		{"add link space", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("a b", "veth", 1500); return err }, unix.EINVAL},
		{"add link no type", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("eth9", "", 1500); return err }, unix.EINVAL},
		{"add link small mtu", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("eth9", "veth", 67); return err }, unix.EINVAL},
		{"add link big mtu", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("eth9", "veth", 65537); return err }, unix.EINVAL},
		{"add link taken", func(k *ifacemonitorfake.Kernel) error { _, err := k.AddLink("eth0", "veth", 1500); return err }, unix.EEXIST},
		{"set up unknown", func(k *ifacemonitorfake.Kernel) error { return k.SetUp("nope") }, unix.ENODEV},
		{"set down unknown", func(k *ifacemonitorfake.Kernel) error { return k.SetDown("nope") }, unix.ENODEV},
		{"set mtu bad", func(k *ifacemonitorfake.Kernel) error { return k.SetMTU("eth0", 0) }, unix.EINVAL},
		{"set mtu unknown", func(k *ifacemonitorfake.Kernel) error { return k.SetMTU("nope", 1400) }, unix.ENODEV},
		{"rename up", func(k *ifacemonitorfake.Kernel) error { return k.Rename("eth0", "uplink") }, unix.EBUSY},
		{"rename taken", func(k *ifacemonitorfake.Kernel) error { return k.Rename("eth1", "eth0") }, unix.EEXIST},
		{"rename bad name", func(k *ifacemonitorfake.Kernel) error { return k.Rename("eth1", "") }, unix.EINVAL},
		{"rename unknown", func(k *ifacemonitorfake.Kernel) error { return k.Rename("nope", "x") }, unix.ENODEV},
		{"delete unknown", func(k *ifacemonitorfake.Kernel) error { return k.DeleteLink("nope") }, unix.ENODEV},
		{"add addr invalid", func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", netip.Prefix{}) }, unix.EINVAL},
		{"add addr dup", func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("10.0.0.5/24")) }, unix.EEXIST},
		{"add addr unknown", func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("nope", pfx("10.0.0.5/24")) }, unix.ENODEV},
		{"del addr missing", func(k *ifacemonitorfake.Kernel) error { return k.DelAddr("eth0", pfx("10.0.0.6/24")) }, unix.EADDRNOTAVAIL},
		{"del addr unknown", func(k *ifacemonitorfake.Kernel) error { return k.DelAddr("nope", pfx("10.0.0.5/24")) }, unix.ENODEV},
		{"add route invalid dst", func(k *ifacemonitorfake.Kernel) error { return k.AddRoute(ifacemonitor.Route{LinkIndex: 1}) }, unix.EINVAL},
		{"add route unmasked", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.3.0.1/16"), LinkIndex: 1})
		}, unix.EINVAL},
		{"add route mixed family", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.3.0.0/16"), LinkIndex: 1, Gw: netip.MustParseAddr("fd00::1")})
		}, unix.EINVAL},
		{"add route taken", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.2.0.0/16"), LinkIndex: 1, Gw: netip.MustParseAddr("10.0.0.1")})
		}, unix.EEXIST},
		{"add route no link", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.3.0.0/16"), LinkIndex: 9})
		}, unix.ENODEV},
		{"add route link down", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("fd03::/64"), LinkIndex: 2})
		}, unix.ENETDOWN},
		{"add route nexthop down", func(k *ifacemonitorfake.Kernel) error {
			return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.3.0.0/16"), Nexthops: []ifacemonitor.Nexthop{{LinkIndex: 1}, {LinkIndex: 2}}})
		}, unix.ENETDOWN},
		{"del route missing", func(k *ifacemonitorfake.Kernel) error {
			return k.DelRoute(ifacemonitor.RouteKey{Dst: pfx("10.3.0.0/16"), LinkIndex: 1})
		}, unix.ESRCH},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := populated(t)
			before := snapshot(t, k)
			err := tc.call(k)
			require.ErrorIs(t, err, tc.errno)
			assertFakeError(t, err)
			assert.Equal(t, before, snapshot(t, k), "a failed call changes nothing")
		})
	}
}

// Kernel side effects: what goes away with a link going down or away, and
// how the fake fills in route defaults.
func TestKernelSemantics(t *testing.T) {
	main := func(dst string, prio int) ifacemonitor.Route {
		return ifacemonitor.Route{Table: unix.RT_TABLE_MAIN, Dst: pfx(dst), Priority: prio, LinkIndex: 1, Type: unix.RTN_UNICAST}
	}
	tests := []struct {
		name       string
		do         func(k *ifacemonitorfake.Kernel) error
		wantAddrs  []netip.Prefix // of eth0, if it still exists
		wantRoutes []ifacemonitor.Route
		wantLinks  int
	}{
		{name: "nothing", do: func(*ifacemonitorfake.Kernel) error { return nil },
			wantAddrs:  []netip.Prefix{pfx("10.0.0.5/24"), pfx("fd00::5/64")},
			wantRoutes: []ifacemonitor.Route{main("10.2.0.0/16", 0), main("fd02::/64", 1024)}, wantLinks: 2},
		{name: "down drops v6 addresses and all routes", do: func(k *ifacemonitorfake.Kernel) error { return k.SetDown("eth0") },
			wantAddrs: []netip.Prefix{pfx("10.0.0.5/24")}, wantLinks: 2},
		{name: "delete drops everything", do: func(k *ifacemonitorfake.Kernel) error { return k.DeleteLink("eth0") }, wantLinks: 1},
		{name: "live rename when allowed", do: func(k *ifacemonitorfake.Kernel) error {
			k.AllowLiveRename(true)
			if err := k.Rename("eth0", "uplink"); err != nil {
				return err
			}
			return k.Rename("uplink", "eth0")
		}, wantAddrs: []netip.Prefix{pfx("10.0.0.5/24"), pfx("fd00::5/64")},
			wantRoutes: []ifacemonitor.Route{main("10.2.0.0/16", 0), main("fd02::/64", 1024)}, wantLinks: 2},
		{name: "v6 route deleted by metric 0", do: func(k *ifacemonitorfake.Kernel) error {
			return k.DelRoute(ifacemonitor.RouteKey{Dst: pfx("fd02::/64"), LinkIndex: 1})
		}, wantAddrs: []netip.Prefix{pfx("10.0.0.5/24"), pfx("fd00::5/64")},
			wantRoutes: []ifacemonitor.Route{main("10.2.0.0/16", 0)}, wantLinks: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := populated(t)
			require.NoError(t, tc.do(k))
			assert.Len(t, k.Links(), tc.wantLinks)
			if _, ok := k.Link("eth0"); ok {
				addrs, err := k.Addrs("eth0")
				require.NoError(t, err)
				assert.Equal(t, tc.wantAddrs, addrs)
			}
			assert.Equal(t, tc.wantRoutes, k.Routes())
		})
	}
}

// eventLine renders an event as the kernel's message type and subject.
func eventLine(ev ifacemonitor.Event) string {
	switch {
	case ev.Link != nil:
		typ := "NEWLINK"
		if ev.Link.Header.Type == unix.RTM_DELLINK {
			typ = "DELLINK"
		}
		a := ev.Link.Link.Attrs()
		return fmt.Sprintf("%s %s#%d mtu=%d flags=%v", typ, a.Name, a.Index, a.MTU, a.Flags)
	case ev.Addr != nil:
		typ := "DELADDR"
		if ev.Addr.NewAddr {
			typ = "NEWADDR"
		}
		return fmt.Sprintf("%s #%d %v", typ, ev.Addr.LinkIndex, ev.Addr.LinkAddress.String())
	case ev.Route != nil:
		typ := "DELROUTE"
		if ev.Route.Type == unix.RTM_NEWROUTE {
			typ = "NEWROUTE"
		}
		return fmt.Sprintf("%s %v", typ, ev.Route.Route.Dst)
	case ev.Resync != nil:
		return fmt.Sprintf("RESYNC overflow=%v", errors.Is(ev.Resync.Reason, ifacemonitor.ErrOverflow))
	}
	return "empty"
}

func next(t *testing.T, ch <-chan ifacemonitor.Event) string {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "stream closed")
		return eventLine(ev)
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return ""
	}
}

func TestSubscribeStream(t *testing.T) {
	k := populated(t) // changes before Subscribe are not sent
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := k.Subscribe(ctx)
	require.NoError(t, err)
	require.NoError(t, k.SetMTU("eth0", 1400))
	require.NoError(t, k.SetMTU("eth0", 1400)) // no change, no message
	require.NoError(t, k.DeleteLink("eth0"))
	want := []string{
		"RESYNC overflow=false",
		"NEWLINK eth0#1 mtu=1400 flags=up|running",
		"NEWLINK eth0#1 mtu=1400 flags=0", // an up link goes down first
		"DELADDR #1 fd00::5/64",
		"DELROUTE fd02::/64", // the IPv4 route vanishes silently
		"DELADDR #1 10.0.0.5/24",
		"DELLINK eth0#1 mtu=1400 flags=0",
	}
	for _, w := range want {
		assert.Equal(t, w, next(t, ch))
	}

	_, err = k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	k.Overflow()
	assert.Equal(t, "RESYNC overflow=true", next(t, ch), "the NEWLINK was dropped")
	require.NoError(t, k.SetUp("eth0"))
	assert.Equal(t, "NEWLINK eth0#3 mtu=1500 flags=up|running", next(t, ch), "a new index")

	cancel()
	select {
	case _, ok := <-ch:
		assert.False(t, ok, "closed after ctx ends")
	case <-time.After(10 * time.Second):
		t.Fatal("stream not closed")
	}
}

func TestListings(t *testing.T) {
	k := populated(t)
	injected := errors.New("injected")
	k.FailNextList(nil) // ignored
	k.FailNextList(injected)
	ctx := context.Background()
	_, err := k.ListLinks(ctx)
	require.ErrorIs(t, err, injected)
	links, err := k.ListLinks(ctx)
	require.NoError(t, err)
	require.Len(t, links, 2)
	assert.Equal(t, "eth0", links[0].Attrs().Name)
	assert.Equal(t, "veth", links[0].Type())
	addrs, err := k.ListAddrs(ctx)
	require.NoError(t, err)
	assert.Len(t, addrs, 2)
	routes, err := k.ListRoutes(ctx)
	require.NoError(t, err)
	assert.Len(t, routes, 2)
	assert.Equal(t, 4, k.Lists())

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = k.ListLinks(cctx)
	require.ErrorIs(t, err, context.Canceled)
	//lint:ignore SA1012 a nil context is documented to mean Background
	links, err = k.ListLinks(nil)
	require.NoError(t, err)
	assert.Len(t, links, 2)
	//lint:ignore SA1012 a nil context is documented to mean Background
	addrs, err = k.ListAddrs(nil)
	require.NoError(t, err)
	assert.Len(t, addrs, 2)
	//lint:ignore SA1012 a nil context is documented to mean Background
	routes, err = k.ListRoutes(nil)
	require.NoError(t, err)
	assert.Len(t, routes, 2)
	_, err = k.Addrs("nope")
	require.ErrorIs(t, err, unix.ENODEV)
}
