//go:build linux

package kernel

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

// subscriptionMarkers name the goroutines a subscription runs.
var subscriptionMarkers = []string{"kernel.(*Namespace).Subscribe", "nlutil.(*run)", "nlutil.netlinkSubscribe"}

// waitFor reads events until match returns true, failing after within.
func waitFor(t *testing.T, ch <-chan Event, within time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream closed while waiting for %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s within %v", what, within)
		}
	}
}

// waitClosed drains ch until it is closed.
func waitClosed(t *testing.T, ch <-chan Event, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatalf("stream not closed within %v", within)
		}
	}
}

func TestKernelSubscribe(t *testing.T) {
	e := newKernelEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.ns.Subscribe(ctx, EventLinks|EventAddrs|EventRoutes)
	require.NoError(t, err)
	first := waitFor(t, ch, 10*time.Second, "first event", func(Event) bool { return true })
	require.NotNil(t, first.Resync, "the first event is a Resync: %+v", first)
	assert.Equal(t, EventLinks|EventAddrs|EventRoutes, first.Resync.Kinds)
	assert.NoError(t, first.Resync.Reason)

	const within = 10 * time.Second
	wctx := context.Background()
	br, err := e.ns.AddLink(wctx, Link{Name: "np-ev", Kind: KindBridge})
	require.NoError(t, err)
	ev := waitFor(t, ch, within, "link event", func(ev Event) bool { return ev.Link != nil && ev.Link.Link.Name == "np-ev" })
	assert.False(t, ev.Link.Deleted)
	assert.Equal(t, br.Index, ev.Link.Link.Index)
	assert.Equal(t, KindBridge, ev.Link.Link.Kind)

	a := Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix("10.77.0.1/24")}
	require.NoError(t, e.ns.AddAddr(wctx, a))
	ev = waitFor(t, ch, within, "address event", func(ev Event) bool { return ev.Addr != nil && ev.Addr.Addr == a })
	assert.False(t, ev.Addr.Deleted)

	routes := []Route{
		{Family: IPv4, Table: 100, Dst: netip.MustParsePrefix("10.78.0.0/16"), Type: RTNUnicast, Protocol: 80, Scope: ScopeLink, OIF: e.links.v0},
		{Family: IPv6, Table: 100, Dst: netip.MustParsePrefix("fd78::/64"), Type: RTNUnicast, Protocol: 80, OIF: e.links.v0, Priority: 1024},
		{Family: IPv4, Table: 100, Dst: netip.MustParsePrefix("10.79.0.0/16"), Type: RTNUnicast, Protocol: 80, NextHops: []NextHop{
			{OIF: e.links.v0, Gateway: testGw4}, {OIF: e.links.v0, Gateway: testGw4b, Weight: 3}}},
	}
	for _, r := range routes {
		for _, err := range e.ns.ApplyRoutes(wctx, []RouteOp{{Kind: OpReplace, Route: r}}) {
			require.NoError(t, err)
		}
		ev = waitFor(t, ch, within, "route event", func(ev Event) bool { return ev.Route != nil && ev.Route.Route.Dst == r.Dst })
		assert.False(t, ev.Route.Deleted)
		assert.Equal(t, r, ev.Route.Route, "the event carries the route as written")
		for _, err := range e.ns.ApplyRoutes(wctx, []RouteOp{{Kind: OpDelete, Route: r}}) {
			require.NoError(t, err)
		}
		ev = waitFor(t, ch, within, "route deletion", func(ev Event) bool { return ev.Route != nil && ev.Route.Route.Dst == r.Dst })
		assert.True(t, ev.Route.Deleted)
	}

	require.NoError(t, e.ns.DeleteAddr(wctx, a))
	ev = waitFor(t, ch, within, "address deletion", func(ev Event) bool { return ev.Addr != nil && ev.Addr.Addr == a })
	assert.True(t, ev.Addr.Deleted)
	require.NoError(t, e.ns.DeleteLink(wctx, br.Index))
	waitFor(t, ch, within, "link deletion", func(ev Event) bool { return ev.Link != nil && ev.Link.Link.Name == "np-ev" && ev.Link.Deleted })

	cancel()
	waitClosed(t, ch, within)
	leakcheck.NoGoroutines(t, within, subscriptionMarkers...)
}

// Only the kinds asked for are streamed, and Close ends the stream.
func TestKernelSubscribeKindsAndClose(t *testing.T) {
	e := newKernelEnv(t)
	ch, err := e.ns.Subscribe(context.Background(), EventAddrs)
	require.NoError(t, err)
	first := waitFor(t, ch, 10*time.Second, "first event", func(Event) bool { return true })
	require.NotNil(t, first.Resync)
	assert.Equal(t, EventAddrs, first.Resync.Kinds)

	_, err = e.ns.AddLink(context.Background(), Link{Name: "np-quiet", Kind: KindBridge})
	require.NoError(t, err)
	for _, err := range e.ns.ApplyRoutes(context.Background(), genRoutes(true, 3, 100, e.links.v0)) {
		require.NoError(t, err)
	}
	require.NoError(t, e.ns.AddAddr(context.Background(), Addr{LinkIndex: e.links.v1, Prefix: netip.MustParsePrefix("10.80.0.1/32")}))
	ev := waitFor(t, ch, 10*time.Second, "address event", func(ev Event) bool { return true })
	require.NotNil(t, ev.Addr, "no link or route event before the address: %+v", ev)

	require.NoError(t, e.ns.Close())
	waitClosed(t, ch, 10*time.Second)
	leakcheck.NoGoroutines(t, 10*time.Second, subscriptionMarkers...)

	_, err = e.ns.Subscribe(context.Background(), 0)
	assert.ErrorIs(t, err, ErrInvalid)
}

// A tiny receive buffer and a consumer that does not read while thousands
// of addresses come and go: the kernel drops events, and the stream says
// so with a Resync whose Reason wraps ErrOverflow, then keeps going.
func TestKernelSubscribeOverflow(t *testing.T) {
	e := newKernelEnv(t)
	e.ns.watch = nlutil.WatchOptions{EventBuffer: 1,
		ResubscribeBackoff: 10 * time.Millisecond, MaxResubscribeBackoff: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := e.ns.Subscribe(ctx, EventAddrs, SubscribeOptions{ReceiveBufferSize: 1024}) // the kernel's minimum, a few KiB
	require.NoError(t, err)
	first := waitFor(t, ch, 10*time.Second, "first event", func(Event) bool { return true })
	require.NotNil(t, first.Resync)

	h := e.kns.Handle()
	br := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: e.links.v1}}
	const burst = 3000
	for i := range burst {
		a := netip.AddrFrom4([4]byte{10, 66, byte(i / 250), byte(1 + i%250)})
		require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: ipNetOf(netip.PrefixFrom(a, 32))}))
	}
	seen := 0
	rs := waitFor(t, ch, 30*time.Second, "resync after the overflow", func(ev Event) bool {
		if ev.Addr != nil {
			seen++
		}
		return ev.Resync != nil
	})
	t.Logf("address events before the overflow was noticed: %d of %d; reason: %v", seen, burst, rs.Resync.Reason)
	assert.ErrorIs(t, rs.Resync.Reason, ErrOverflow)
	assert.ErrorIs(t, rs.Resync.Reason, unix.ENOBUFS)
	assert.Equal(t, EventAddrs, rs.Resync.Kinds)

	// The stream keeps going: a new address arrives as an event, or (if
	// the tiny buffer overflows again on a busy machine) as another Resync.
	a := Addr{LinkIndex: e.links.v1, Prefix: netip.MustParsePrefix("10.67.0.1/32")}
	require.NoError(t, e.ns.AddAddr(context.Background(), a))
	waitFor(t, ch, 30*time.Second, "event or resync after the renewal", func(ev Event) bool {
		return ev.Resync != nil || (ev.Addr != nil && ev.Addr.Addr == a)
	})
	cancel()
	waitClosed(t, ch, 10*time.Second)
	leakcheck.NoGoroutines(t, 10*time.Second, subscriptionMarkers...)
}

// Events of every kind come in the kernel's order, and a barrier comes
// after the events of the changes made before it was placed: a route added
// before its link went down is never seen after the link's event.
func TestKernelSubscribeOrderAndBarrier(t *testing.T) {
	e := newKernelEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var barrier BarrierFunc
	ch, err := e.ns.Subscribe(ctx, EventLinks|EventAddrs|EventRoutes, SubscribeOptions{Barriers: func(f BarrierFunc) { barrier = f }})
	require.NoError(t, err)
	require.NotNil(t, barrier, "Subscribe hands out its barrier function")
	waitFor(t, ch, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil })

	wctx := context.Background()
	br, err := e.ns.AddLink(wctx, Link{Name: "np-order", Kind: KindBridge})
	require.NoError(t, err)
	require.NoError(t, e.ns.SetLinkUp(wctx, br.Index, true))
	require.NoError(t, e.ns.AddAddr(wctx, Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix("10.81.0.1/24")}))
	const n = 20
	ops := make([]RouteOp, n)
	for i := range ops {
		ops[i] = RouteOp{Kind: OpReplace, Route: Route{Family: IPv4, Table: 100, Type: RTNUnicast, Protocol: 80, Scope: ScopeLink,
			OIF: br.Index, Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 82, byte(i), 0}), 24)}}
	}
	for _, err := range e.ns.ApplyRoutes(wctx, ops) {
		require.NoError(t, err)
	}
	require.NoError(t, e.ns.SetLinkUp(wctx, br.Index, false)) // the routes go silently
	id, err := barrier()
	require.NoError(t, err)
	require.NoError(t, e.ns.SetLinkMTU(wctx, br.Index, 1400))

	routes, up, down, mtu := 0, false, false, false
	bev := waitFor(t, ch, 10*time.Second, "the barrier", func(ev Event) bool {
		switch {
		case ev.Route != nil && ev.Route.Route.Table == 100 && !ev.Route.Deleted:
			assert.False(t, down, "route event after the link went down")
			routes++
		case ev.Link != nil && ev.Link.Link.Index == br.Index && ev.Link.Link.AdminUp:
			up = true
		case ev.Link != nil && ev.Link.Link.Index == br.Index && up:
			assert.Equal(t, n, routes, "the link went down after its routes were added")
			down = down || ev.Link.Link.MTU != 1400
			mtu = mtu || ev.Link.Link.MTU == 1400
		case ev.Resync != nil:
			t.Fatalf("events were lost: %v", ev.Resync.Reason)
		}
		return ev.Barrier != nil
	})
	assert.Equal(t, id, bev.Barrier.ID)
	assert.True(t, down, "the link's going down came before the barrier")
	assert.False(t, mtu, "the MTU change made after the barrier comes after it")
	waitFor(t, ch, 10*time.Second, "the MTU change", func(ev Event) bool {
		return ev.Link != nil && ev.Link.Link.Index == br.Index && ev.Link.Link.MTU == 1400
	})
	cancel()
	waitClosed(t, ch, 10*time.Second)
	leakcheck.NoGoroutines(t, 10*time.Second, subscriptionMarkers...)
}
