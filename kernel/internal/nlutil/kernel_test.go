//go:build linux

package nlutil

import (
	"context"
	"fmt"
	"maps"
	"net"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Kernel tests: each runs in a fresh network namespace from kerneltest and
// touches nothing outside it.

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	ip, n, err := net.ParseCIDR(s)
	require.NoError(t, err)
	n.IP = ip
	return n
}

// addBridge creates an up bridge with no ports (this kernel has no dummy
// links) and returns it.
func addBridge(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}))
	link, err := h.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(link))
	return link
}

func TestKernelListHelpers(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	ctx := context.Background()

	br := addBridge(t, h, "np-br0")
	require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: mustCIDR(t, "10.99.0.1/24")}))
	require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: mustCIDR(t, "fd00:99::1/64"), Flags: unix.IFA_F_NODAD}))

	links, err := LinkList(ctx, h)
	require.NoError(t, err)
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	assert.ElementsMatch(t, []string{"lo", "np-br0"}, names)

	addrs, err := AddrList(ctx, h, br, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var addrStrs []string
	for _, a := range addrs {
		addrStrs = append(addrStrs, a.IPNet.String())
	}
	assert.Contains(t, addrStrs, "10.99.0.1/24")
	assert.Contains(t, addrStrs, "fd00:99::1/64")
}

// An address dump that spans several reads, with an address added after
// the first read: the kernel marks the rest of the dump interrupted, and
// RetryDump runs it again and returns the clean second result.
func TestKernelRetryDumpRecoversFromInterruptedDump(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	ctx := context.Background()
	br := addBridge(t, h, "np-intr")
	const n = 2000 // ~150 KB of messages: several reads
	for i := range n {
		ip := net.IPv4(10, 56, byte(i/250), byte(1+i%250))
		require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}))
	}
	extra := &netlink.Addr{IPNet: mustCIDR(t, "10.57.0.1/32")}

	calls := 0
	var results []error
	var addErr error
	dump := func() ([]struct{}, error) {
		calls++
		var msgs []struct{}
		err := ns.Do(func() error {
			// The raw dump, so that a change can be made between its reads.
			req := nl.NewNetlinkRequest(unix.RTM_GETADDR, unix.NLM_F_DUMP)
			req.AddData(nl.NewIfAddrmsg(unix.AF_INET))
			return req.ExecuteIter(unix.NETLINK_ROUTE, unix.RTM_NEWADDR, func([]byte) bool {
				if calls == 1 && len(msgs) == 0 {
					addErr = h.AddrAdd(br, extra)
				}
				msgs = append(msgs, struct{}{})
				return true
			})
		})
		results = append(results, err)
		return msgs, err
	}
	res, err := retryDump(ctx, clock.Real(), 3, dump)
	require.NoError(t, addErr)
	require.NoError(t, err)
	require.Equal(t, 2, calls, "one interrupted dump, one clean one")
	assert.ErrorIs(t, results[0], netlink.ErrDumpInterrupted)
	// lo's 127.0.0.1, ours, and the one added during the first dump.
	assert.Equal(t, n+2, len(res), "the clean dump has every address, the new one included")

	// The typed helper gives the same on a quiet namespace.
	addrs, err := AddrList(ctx, h, br, netlink.FAMILY_V4)
	require.NoError(t, err)
	assert.Equal(t, n+1, len(addrs))
}

// waitFor reads events until match returns true, failing after timeout.
// Err events are logged; other events are skipped.
func waitFor(t *testing.T, events <-chan Event, timeout time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "stream closed while waiting for %s", what)
			if ev.Err != nil {
				t.Logf("watcher error: %v", ev.Err)
			}
			if match(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
			return Event{}
		}
	}
}

// waitForAll reads events until each condition has matched one, in any
// order.
func waitForAll(t *testing.T, events <-chan Event, timeout time.Duration, conds map[string]func(Event) bool) {
	t.Helper()
	left := maps.Clone(conds)
	waitFor(t, events, timeout, fmt.Sprint(slices.Sorted(maps.Keys(left))), func(ev Event) bool {
		for name, match := range left {
			if match(ev) {
				delete(left, name)
			}
		}
		return len(left) == 0
	})
}

// linkOf decodes a link message; nil for another event.
func linkOf(ev Event) netlink.Link {
	if ev.Msg == nil || (ev.Msg.Header.Type != unix.RTM_NEWLINK && ev.Msg.Header.Type != unix.RTM_DELLINK) {
		return nil
	}
	l, err := netlink.LinkDeserialize(&ev.Msg.Header, ev.Msg.Data)
	if err != nil {
		return nil
	}
	return l
}

// addrOf decodes an address message as "prefix" (IFA_ADDRESS with the
// prefix length), whether it is an addition, and its interface; ok is
// false for another event.
func addrOf(ev Event) (prefix string, added bool, index int, ok bool) {
	if ev.Msg == nil || (ev.Msg.Header.Type != unix.RTM_NEWADDR && ev.Msg.Header.Type != unix.RTM_DELADDR) {
		return "", false, 0, false
	}
	msg := nl.DeserializeIfAddrmsg(ev.Msg.Data)
	attrs, err := nl.ParseRouteAttr(ev.Msg.Data[unix.SizeofIfAddrmsg:])
	if err != nil {
		return "", false, 0, false
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.IFA_ADDRESS {
			n := net.IPNet{IP: a.Value, Mask: net.CIDRMask(int(msg.Prefixlen), 8*len(a.Value))}
			return n.String(), ev.Msg.Header.Type == unix.RTM_NEWADDR, int(msg.Index), true
		}
	}
	return "", false, 0, false
}

// routeDstOf returns a route message's type and RTA_DST as "addr/len";
// ok is false for another event.
func routeDstOf(ev Event) (typ uint16, dst string, ok bool) {
	if ev.Msg == nil || (ev.Msg.Header.Type != unix.RTM_NEWROUTE && ev.Msg.Header.Type != unix.RTM_DELROUTE) {
		return 0, "", false
	}
	msg := nl.DeserializeRtMsg(ev.Msg.Data)
	attrs, err := nl.ParseRouteAttr(ev.Msg.Data[unix.SizeofRtMsg:])
	if err != nil {
		return 0, "", false
	}
	for _, a := range attrs {
		if a.Attr.Type == unix.RTA_DST {
			n := net.IPNet{IP: a.Value, Mask: net.CIDRMask(int(msg.Dst_len), 8*len(a.Value))}
			return ev.Msg.Header.Type, n.String(), true
		}
	}
	return ev.Msg.Header.Type, "", true
}

func isLink(name string, typ uint16) func(Event) bool {
	return func(ev Event) bool {
		l := linkOf(ev)
		return l != nil && l.Attrs().Name == name && ev.Msg.Header.Type == typ
	}
}

func TestKernelWatchEvents(t *testing.T) {
	base := runtime.NumGoroutine()
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	nsh := ns.NsHandle()

	w, err := NewWatcher(WatchOptions{Kinds: Links | Addrs | Routes, Namespace: &nsh})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := w.Start(ctx)
	require.NoError(t, err)

	first := waitFor(t, events, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil || ev.Err != nil })
	require.NoError(t, first.Err)
	assert.Equal(t, Links|Addrs|Routes, first.Resync.Kinds)
	assert.NoError(t, first.Resync.Reason)

	br := addBridge(t, h, "np-ev0")
	waitFor(t, events, 10*time.Second, "RTM_NEWLINK np-ev0", isLink("np-ev0", unix.RTM_NEWLINK))

	// One change, two kinds of events on one socket: in the kernel's
	// order, the local route first (the kernel adds it before announcing
	// the address).
	require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: mustCIDR(t, "10.77.0.1/24")}))
	var order []string
	addrIndex := 0
	waitForAll(t, events, 10*time.Second, map[string]func(Event) bool{
		"new address": func(ev Event) bool {
			if p, added, idx, ok := addrOf(ev); ok && added && p == "10.77.0.1/24" {
				addrIndex = idx
				order = append(order, "address")
				return true
			}
			return false
		},
		"local route for 10.77.0.1": func(ev Event) bool {
			if typ, dst, ok := routeDstOf(ev); ok && typ == unix.RTM_NEWROUTE && dst == "10.77.0.1/32" {
				order = append(order, "route")
				return true
			}
			return false
		},
	})
	assert.Equal(t, br.Attrs().Index, addrIndex)
	t.Logf("order: %v", order)

	require.NoError(t, h.AddrDel(br, &netlink.Addr{IPNet: mustCIDR(t, "10.77.0.1/24")}))
	waitFor(t, events, 10*time.Second, "deleted address", func(ev Event) bool {
		p, added, _, ok := addrOf(ev)
		return ok && !added && p == "10.77.0.1/24"
	})

	require.NoError(t, h.LinkDel(br))
	waitFor(t, events, 10*time.Second, "RTM_DELLINK np-ev0", isLink("np-ev0", unix.RTM_DELLINK))

	cancel()
	for range events {
	}
	waitGoroutines(t, base)
}

// A tiny receive buffer and a consumer that does not read while thousands
// of addresses are added: the kernel drops events (ENOBUFS). The watcher
// must say so with a Resync and keep delivering events afterwards.
func TestKernelWatchOverflowResubscribes(t *testing.T) {
	base := runtime.NumGoroutine()
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	nsh := ns.NsHandle()
	br := addBridge(t, h, "np-burst")

	w, err := NewWatcher(WatchOptions{
		Kinds:                 Links | Addrs,
		Namespace:             &nsh,
		ReceiveBufferSize:     1024, // forced: the kernel's minimum, a couple of KiB
		EventBuffer:           1,
		ResubscribeBackoff:    10 * time.Millisecond,
		MaxResubscribeBackoff: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := w.Start(ctx)
	require.NoError(t, err)
	first := waitFor(t, events, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil || ev.Err != nil })
	require.NoError(t, first.Err)

	// The burst, while nobody reads the stream.
	const burst = 3000
	for i := range burst {
		ip := net.IPv4(10, 66, byte(i/250), byte(1+i%250))
		require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}))
	}

	addrEvents := 0
	rs := waitFor(t, events, 20*time.Second, "resync after overflow", func(ev Event) bool {
		if _, _, _, ok := addrOf(ev); ok {
			addrEvents++
		}
		return ev.Resync != nil
	})
	t.Logf("address events delivered before the overflow was noticed: %d of %d; reason: %v", addrEvents, burst, rs.Resync.Reason)
	assert.Less(t, addrEvents, burst, "events were dropped")
	assert.ErrorIs(t, rs.Resync.Reason, ErrOverflow)
	assert.ErrorIs(t, rs.Resync.Reason, unix.ENOBUFS)
	assert.NotZero(t, rs.Resync.Kinds&Addrs)

	// The consumer re-lists: the dump sees every address.
	addrs, err := AddrList(ctx, h, br, netlink.FAMILY_V4)
	require.NoError(t, err)
	assert.Len(t, addrs, burst)

	// And the watcher keeps working after the renewal: the consumer learns
	// of a new address from its event or, should the tiny buffer overflow
	// again on a loaded machine, from a Resync and a re-list. Never from
	// nothing.
	require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: mustCIDR(t, "10.67.0.1/32")}))
	addrHow := ""
	waitFor(t, events, 20*time.Second, "address event or address resync after the overflow", func(ev Event) bool {
		if p, added, _, ok := addrOf(ev); ok && added && p == "10.67.0.1/32" {
			addrHow = "event"
			return true
		}
		if ev.Resync != nil && ev.Resync.Kinds&Addrs != 0 {
			addrs, err := AddrList(ctx, h, br, netlink.FAMILY_V4)
			require.NoError(t, err)
			if slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == "10.67.0.1/32" }) {
				addrHow = "resync and re-list"
				return true
			}
		}
		return false
	})
	t.Logf("new address after the overflow learnt by %s", addrHow)

	// A new link produces several large RTM_NEWLINK messages, which can
	// overflow a buffer this small again. Either way the consumer learns
	// about the link: from its event, or from a Resync telling it to
	// re-list.
	after := fmt.Sprintf("np-after%d", time.Now().UnixNano()%1000)
	addBridge(t, h, after)
	how := ""
	waitFor(t, events, 20*time.Second, "link event or link resync after the overflow", func(ev Event) bool {
		if isLink(after, unix.RTM_NEWLINK)(ev) {
			how = "event"
			return true
		}
		if ev.Resync != nil && ev.Resync.Kinds&Links != 0 {
			links, err := LinkList(ctx, h)
			require.NoError(t, err)
			if slices.ContainsFunc(links, func(l netlink.Link) bool { return l.Attrs().Name == after }) {
				how = "resync and re-list"
				return true
			}
		}
		return false
	})
	t.Logf("new link seen through: %s", how)

	cancel()
	for range events {
	}
	waitGoroutines(t, base)
}

func TestKernelWatchStopsOnCancel(t *testing.T) {
	ns := kerneltest.NewNS(t)
	nsh := ns.NsHandle()
	base := runtime.NumGoroutine()

	for range 3 { // repeated, so a leak per run would add up
		w, err := NewWatcher(WatchOptions{Kinds: Links | Addrs | Routes, Namespace: &nsh})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		events, err := w.Start(ctx)
		require.NoError(t, err)
		waitFor(t, events, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil })
		cancel()
		for range events {
		}
	}
	waitGoroutines(t, base)
}

// A port joining and leaving a bridge makes the kernel send link messages
// of the AF_BRIDGE family, among them an RTM_DELLINK when the port leaves;
// the stream leaves them out, so no consumer takes the port for deleted.
func TestKernelWatchLeavesOutBridgePortMessages(t *testing.T) {
	base := runtime.NumGoroutine()
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	nsh := ns.NsHandle()
	br := addBridge(t, h, "np-br")
	require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "np-port"}, PeerName: "np-peer"}))
	port, err := h.LinkByName("np-port")
	require.NoError(t, err)

	w, err := NewWatcher(WatchOptions{Kinds: Links, Namespace: &nsh})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := w.Start(ctx)
	require.NoError(t, err)
	first := waitFor(t, events, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil || ev.Err != nil })
	require.NoError(t, first.Err)

	require.NoError(t, h.LinkSetMaster(port, br))
	require.NoError(t, h.LinkSetNoMaster(port))
	// Events of one socket arrive in order: the marker comes last.
	addBridge(t, h, "np-marker")
	var seen []string
	waitFor(t, events, 10*time.Second, "the marker", func(ev Event) bool {
		if l := linkOf(ev); l != nil {
			seen = append(seen, fmt.Sprintf("%s type=%d family=%d", l.Attrs().Name, ev.Msg.Header.Type, ev.Msg.Data[0]))
		}
		return isLink("np-marker", unix.RTM_NEWLINK)(ev)
	})
	assert.NotEmpty(t, seen, "the port's own messages are streamed")
	for _, s := range seen {
		assert.NotContains(t, s, fmt.Sprintf("family=%d", unix.AF_BRIDGE))
		assert.NotContains(t, s, fmt.Sprintf("np-port type=%d", unix.RTM_DELLINK))
	}

	cancel()
	for range events {
	}
	waitGoroutines(t, base)
}

// A barrier placed while the consumer is not reading comes after every
// message the kernel queued before it and before every later one: the
// kernel queues its acknowledgement behind what is waiting.
func TestKernelWatchBarrier(t *testing.T) {
	base := runtime.NumGoroutine()
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	nsh := ns.NsHandle()
	br := addBridge(t, h, "np-bar")

	w, err := NewWatcher(WatchOptions{Kinds: Links | Addrs | Routes, Namespace: &nsh})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := w.Start(ctx)
	require.NoError(t, err)
	first := waitFor(t, events, 10*time.Second, "first resync", func(ev Event) bool { return ev.Resync != nil || ev.Err != nil })
	require.NoError(t, first.Err)

	const n = 50
	add := func(i int) {
		ip := net.IPv4(10, 68, byte(i/250), byte(1+i%250))
		require.NoError(t, h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}))
	}
	for i := range n {
		add(i)
	}
	id, err := w.Barrier()
	require.NoError(t, err)
	for i := n; i < 2*n; i++ {
		add(i)
	}
	before, after := 0, 0
	seen := &before
	waitFor(t, events, 20*time.Second, "every address", func(ev Event) bool {
		switch {
		case ev.Barrier != nil:
			require.Equal(t, id, ev.Barrier.ID)
			require.Same(t, &before, seen, "one barrier")
			seen = &after
		case ev.Resync != nil:
			t.Fatalf("the buffer overflowed: %v", ev.Resync.Reason)
		default:
			if _, added, _, ok := addrOf(ev); ok && added {
				*seen++
			}
		}
		return before+after == 2*n
	})
	assert.Equal(t, n, before, "the addresses added before the barrier come before it")
	assert.Equal(t, n, after)

	cancel()
	for range events {
	}
	waitGoroutines(t, base)
}
