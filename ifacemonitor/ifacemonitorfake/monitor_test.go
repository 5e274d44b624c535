//go:build linux

package ifacemonitorfake_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ifacemonitor/ifacemonitorfake"
	"github.com/nodeplane/nodeplane/internal/leakcheck"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// consumer is an agent's side of the callbacks: its own view of the
// interfaces (by name) and routes. While hold is set, OnLinkState blocks
// until it is closed, as a slow agent would.
type consumer struct {
	mu      sync.Mutex
	ifaces  map[string]ifacemonitor.Interface
	routes  map[ifacemonitor.RouteKey]ifacemonitor.Route
	gone    []string // "name#index" of every gone report
	errs    []string
	synced  bool
	hold    chan struct{}
	blocked chan struct{} // receives once OnLinkState blocks on hold
}

func newConsumer() *consumer {
	return &consumer{
		ifaces:  map[string]ifacemonitor.Interface{},
		routes:  map[ifacemonitor.RouteKey]ifacemonitor.Route{},
		blocked: make(chan struct{}, 1),
	}
}

func (c *consumer) hook(o *ifacemonitor.Options) {
	o.OnLinkState = c.onLink
	o.OnAddrs = c.onAddrs
	o.OnRoute = c.onRoute
	o.OnInSync = func() {
		c.mu.Lock()
		c.synced = true
		c.mu.Unlock()
	}
}

func (c *consumer) onLink(u ifacemonitor.LinkUpdate) {
	c.mu.Lock()
	hold := c.hold
	if u.State == ifacemonitor.StateGone {
		if cur, ok := c.ifaces[u.Name]; !ok || cur.Index != u.Index {
			c.errs = append(c.errs, fmt.Sprintf("gone for unknown %s#%d", u.Name, u.Index))
		}
		delete(c.ifaces, u.Name)
		c.gone = append(c.gone, fmt.Sprintf("%s#%d", u.Name, u.Index))
	} else {
		cur, had := c.ifaces[u.Name]
		if had && cur.Index != u.Index {
			c.errs = append(c.errs, fmt.Sprintf("%s#%d reported while #%d holds the name", u.Name, u.Index, cur.Index))
		}
		cur.Name, cur.Index, cur.State, cur.MTU, cur.Type = u.Name, u.Index, u.State, u.MTU, u.Type
		c.ifaces[u.Name] = cur
	}
	c.mu.Unlock()
	if hold != nil {
		c.blocked <- struct{}{}
		<-hold
	}
}

func (c *consumer) onAddrs(name string, addrs []netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.ifaces[name]
	if !ok {
		if addrs != nil {
			c.errs = append(c.errs, "addresses for unknown "+name)
		}
		return
	}
	cur.Addrs = addrs
	c.ifaces[name] = cur
}

func (c *consumer) onRoute(u ifacemonitor.RouteUpdate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u.Gone {
		delete(c.routes, u.Route.Key())
		return
	}
	c.routes[u.Route.Key()] = u.Route
}

func (c *consumer) view() (map[string]ifacemonitor.Interface, map[ifacemonitor.RouteKey]ifacemonitor.Route) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.ifaces), maps.Clone(c.routes)
}

func (c *consumer) inSync() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.synced
}

// kernelView is the fake kernel's state as a consumer should see it.
func kernelView(t *testing.T, k *ifacemonitorfake.Kernel) (map[string]ifacemonitor.Interface, map[ifacemonitor.RouteKey]ifacemonitor.Route) {
	t.Helper()
	ifaces := map[string]ifacemonitor.Interface{}
	for _, l := range k.Links() {
		addrs, err := k.Addrs(l.Name)
		require.NoError(t, err)
		st := ifacemonitor.StateDown
		if l.Up {
			st = ifacemonitor.StateUp
		}
		ifaces[l.Name] = ifacemonitor.Interface{Name: l.Name, Index: l.Index, State: st, MTU: l.MTU, Type: l.Type, Addrs: addrs}
	}
	routes := map[ifacemonitor.RouteKey]ifacemonitor.Route{}
	for _, r := range k.Routes() {
		routes[r.Key()] = r
	}
	return ifaces, routes
}

type harness struct {
	t   *testing.T
	k   *ifacemonitorfake.Kernel
	clk *clock.Fake
	mon *ifacemonitor.Monitor
	c   *consumer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, k: ifacemonitorfake.New(), clk: clock.NewFake(epoch), c: newConsumer()}
	opts := ifacemonitor.Options{Source: h.k, Clock: h.clk, WatchRoutes: true, ResyncInterval: -1}
	h.c.hook(&opts)
	mon, err := ifacemonitor.New(opts)
	require.NoError(t, err)
	h.mon = mon
	return h
}

func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(h.t, h.mon.Start(ctx))
	h.t.Cleanup(func() {
		cancel()
		<-h.mon.Done()
		requireNoLeaks(h.t)
	})
}

// converge waits until the consumer's view and the monitor's Snapshot
// equal the fake kernel's state.
func (h *harness) converge(after string) {
	h.t.Helper()
	var wantIf, gotIf map[string]ifacemonitor.Interface
	var wantRt, gotRt map[ifacemonitor.RouteKey]ifacemonitor.Route
	ok := assert.Eventually(h.t, func() bool {
		wantIf, wantRt = kernelView(h.t, h.k)
		gotIf, gotRt = h.c.view()
		return assert.ObjectsAreEqual(wantIf, gotIf) && assert.ObjectsAreEqual(wantRt, gotRt)
	}, 10*time.Second, time.Millisecond)
	if !ok {
		assert.Equal(h.t, wantIf, gotIf, "interfaces after %s", after)
		assert.Equal(h.t, wantRt, gotRt, "routes after %s", after)
		h.t.FailNow()
	}
	snap := h.mon.Snapshot()
	snapIf := map[string]ifacemonitor.Interface{}
	for _, i := range snap.Interfaces {
		snapIf[i.Name] = i
	}
	assert.Equal(h.t, wantIf, snapIf, "Snapshot interfaces after %s", after)
	assert.Len(h.t, snap.Routes, len(wantRt), "Snapshot routes after %s", after)
	h.c.mu.Lock()
	assert.Empty(h.t, h.c.errs, "consumer contract after %s", after)
	h.c.mu.Unlock()
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestMonitorConvergesOnFake(t *testing.T) {
	type step struct {
		name string
		do   func(*testing.T, *ifacemonitorfake.Kernel)
	}
	ok := func(f func(k *ifacemonitorfake.Kernel) error) func(*testing.T, *ifacemonitorfake.Kernel) {
		return func(t *testing.T, k *ifacemonitorfake.Kernel) { require.NoError(t, f(k)) }
	}
	addLink := func(name, typ string, mtu int) func(*testing.T, *ifacemonitorfake.Kernel) {
		return func(t *testing.T, k *ifacemonitorfake.Kernel) {
			_, err := k.AddLink(name, typ, mtu)
			require.NoError(t, err)
		}
	}
	tests := []struct {
		name  string
		steps []step
		check func(*testing.T, *harness)
	}{
		{name: "link add, up, mtu, down, delete", steps: []step{
			{"add", addLink("eth0", "veth", 1500)},
			{"up", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetUp("eth0") })},
			{"mtu", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetMTU("eth0", 9000) })},
			{"down", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetDown("eth0") })},
			{"delete", ok(func(k *ifacemonitorfake.Kernel) error { return k.DeleteLink("eth0") })},
		}},
		{name: "addresses v4 and v6", steps: []step{
			{"add link", addLink("eth0", "device", 1500)},
			{"up", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetUp("eth0") })},
			{"add v4", ok(func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("10.0.0.5/24")) })},
			{"add v6", ok(func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("fd00::5/64")) })},
			{"add second v4", ok(func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("10.0.1.5/32")) })},
			{"del v4", ok(func(k *ifacemonitorfake.Kernel) error { return k.DelAddr("eth0", pfx("10.0.0.5/24")) })},
			{"down drops v6", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetDown("eth0") })},
			{"del last v4", ok(func(k *ifacemonitorfake.Kernel) error { return k.DelAddr("eth0", pfx("10.0.1.5/32")) })},
		}},
		{name: "rename", steps: []step{
			{"add", addLink("eth0", "veth", 1500)},
			{"addr", ok(func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("10.0.0.5/24")) })},
			{"rename", ok(func(k *ifacemonitorfake.Kernel) error { return k.Rename("eth0", "uplink0") })},
			{"up", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetUp("uplink0") })},
		}, check: func(t *testing.T, h *harness) {
			assert.Equal(t, []string{"eth0#1"}, h.c.gone, "the old name is reported gone, with the same index")
		}},
		{name: "delete and recreate", steps: []step{
			{"add", addLink("eth0", "veth", 1500)},
			{"addr", ok(func(k *ifacemonitorfake.Kernel) error { return k.AddAddr("eth0", pfx("fd00::1/64")) })},
			{"delete", ok(func(k *ifacemonitorfake.Kernel) error { return k.DeleteLink("eth0") })},
			{"recreate", addLink("eth0", "veth", 1400)},
		}, check: func(t *testing.T, h *harness) {
			l, ok := h.k.Link("eth0")
			require.True(t, ok)
			assert.Equal(t, 2, l.Index, "a new index")
			assert.Equal(t, []string{"eth0#1"}, h.c.gone)
		}},
		{name: "routes", steps: []step{
			{"add link", addLink("eth0", "veth", 1500)},
			{"up", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetUp("eth0") })},
			{"v4 route", ok(func(k *ifacemonitorfake.Kernel) error {
				return k.AddRoute(ifacemonitor.Route{Dst: pfx("10.2.0.0/16"), LinkIndex: 1, Gw: netip.MustParseAddr("10.0.0.1")})
			})},
			{"v6 route", ok(func(k *ifacemonitorfake.Kernel) error {
				return k.AddRoute(ifacemonitor.Route{Dst: pfx("fd02::/64"), LinkIndex: 1})
			})},
			{"del v6 route", ok(func(k *ifacemonitorfake.Kernel) error {
				return k.DelRoute(ifacemonitor.RouteKey{Dst: pfx("fd02::/64"), LinkIndex: 1})
			})},
			{"v6 route again", ok(func(k *ifacemonitorfake.Kernel) error {
				return k.AddRoute(ifacemonitor.Route{Dst: pfx("fd03::/64"), LinkIndex: 1})
			})},
			{"down flushes v4 silently", ok(func(k *ifacemonitorfake.Kernel) error { return k.SetDown("eth0") })},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			require.Eventually(t, h.c.inSync, 10*time.Second, time.Millisecond)
			for _, s := range tc.steps {
				s.do(t, h.k)
				h.converge(s.name)
			}
			if tc.check != nil {
				tc.check(t, h)
			}
		})
	}
}

// Changes made while the agent is busy are queued; an overflow drops them
// all, and the monitor still converges by re-listing.
func TestOverflowLosesPendingEventsAndConverges(t *testing.T) {
	h := newHarness(t)
	_, err := h.k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	h.start()
	require.Eventually(t, h.c.inSync, 10*time.Second, time.Millisecond)
	h.converge("start")
	before := h.mon.Stats()

	hold := make(chan struct{})
	h.c.mu.Lock()
	h.c.hold = hold
	h.c.mu.Unlock()
	require.NoError(t, h.k.SetUp("eth0")) // delivered: the agent blocks on it
	select {
	case <-h.c.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("OnLinkState not called")
	}
	h.c.mu.Lock()
	h.c.hold = nil
	h.c.mu.Unlock()

	// Pending while the agent is busy, then lost.
	pending := []func() error{
		func() error { return h.k.SetMTU("eth0", 1450) },
		func() error { return h.k.AddAddr("eth0", pfx("10.0.0.5/24")) },
		func() error { return h.k.AddAddr("eth0", pfx("fd00::5/64")) },
		func() error { _, err := h.k.AddLink("eth1", "bridge", 1500); return err },
		func() error { return h.k.AddRoute(ifacemonitor.Route{Dst: pfx("10.9.0.0/16"), LinkIndex: 1}) },
	}
	for _, f := range pending {
		require.NoError(t, f())
	}
	h.k.Overflow()
	close(hold)

	h.converge("overflow")
	after := h.mon.Stats()
	assert.Equal(t, before.Events+1, after.Events, "only the change delivered before the overflow was applied as an event")
	assert.Equal(t, before.Overflows+1, after.Overflows)
	assert.Greater(t, after.Relists, before.Relists)
}

// A failed listing is retried after a backoff on the monitor's clock, and
// the monitor is in sync only once a listing succeeded.
func TestFailedListThenSuccess(t *testing.T) {
	for _, failures := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d failures", failures), func(t *testing.T) {
			h := newHarness(t)
			_, err := h.k.AddLink("eth0", "veth", 1500)
			require.NoError(t, err)
			require.NoError(t, h.k.AddAddr("eth0", pfx("10.0.0.5/24")))
			injected := errors.New("injected dump failure")
			h.k.FailNextList(injected)
			h.start()
			for i := 1; i <= failures; i++ {
				require.Eventually(t, func() bool { return h.mon.Stats().RelistErrors == uint64(i) }, 10*time.Second, time.Millisecond)
				assert.False(t, h.c.inSync(), "not in sync before a listing succeeded")
				ifaces, _ := h.c.view()
				assert.Empty(t, ifaces)
				if i < failures {
					h.k.FailNextList(injected) // the retry fails too
				}
				require.NoError(t, h.clk.BlockUntil(context.Background(), 1)) // the retry timer
				next, ok := h.clk.NextDeadline()
				require.True(t, ok)
				h.clk.Set(next)
			}
			require.Eventually(t, h.c.inSync, 10*time.Second, time.Millisecond)
			h.converge("retry")
			assert.Equal(t, uint64(failures), h.mon.Stats().RelistErrors)
		})
	}
}

func TestNewWithSourceValidates(t *testing.T) {
	k := ifacemonitorfake.New()
	tests := []struct {
		name string
		opts ifacemonitor.Options
		want string // substring of the error; empty means valid
	}{
		{name: "source alone", opts: ifacemonitor.Options{Source: k}},
		{name: "source with routes", opts: ifacemonitor.Options{Source: k, WatchRoutes: true}},
		{name: "source and handle", opts: ifacemonitor.Options{Source: k, Handle: &netlink.Handle{}}, want: "must be unset"},
		{name: "source and namespace", opts: ifacemonitor.Options{Source: k, Namespace: 3}, want: "must be unset"},
		{name: "source and buffer", opts: ifacemonitor.Options{Source: k, ReceiveBufferSize: 1 << 20}, want: "must be unset"},
		{name: "source and bad pattern", opts: ifacemonitor.Options{Source: k, Include: []string{"("}}, want: "Include pattern"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ifacemonitor.New(tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				assert.NotNil(t, m)
				return
			}
			require.ErrorIs(t, err, ifacemonitor.ErrInvalidOptions)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// errSource is a Source whose Subscribe fails.
type errSource struct{ *ifacemonitorfake.Kernel }

func (errSource) Subscribe(context.Context) (<-chan ifacemonitor.Event, error) {
	return nil, unix.EPERM
}

func TestStartSubscribeFailure(t *testing.T) {
	m, err := ifacemonitor.New(ifacemonitor.Options{Source: errSource{ifacemonitorfake.New()}})
	require.NoError(t, err)
	err = m.Start(context.Background())
	require.ErrorIs(t, err, unix.EPERM)
	select {
	case <-m.Done():
	default:
		t.Fatal("Done not closed after a failed Start")
	}
}

func requireNoLeaks(t *testing.T) {
	t.Helper()
	leakcheck.NoGoroutines(t, 10*time.Second, "ifacemonitor.(*run)", "ifacemonitorfake.(*Kernel).forward")
}

// chanSource lists the fake kernel but takes its stream from the test.
type chanSource struct {
	*ifacemonitorfake.Kernel
	ch chan ifacemonitor.Event
}

func (s chanSource) Subscribe(ctx context.Context) (<-chan ifacemonitor.Event, error) {
	out := make(chan ifacemonitor.Event)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-s.ch:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Malformed events from a Source are ignored or counted, never a panic.
func TestMalformedSourceEvents(t *testing.T) {
	k := ifacemonitorfake.New()
	_, err := k.AddLink("eth0", "veth", 1500)
	require.NoError(t, err)
	src := chanSource{Kernel: k, ch: make(chan ifacemonitor.Event)}
	c := newConsumer()
	opts := ifacemonitor.Options{Source: src, Clock: clock.NewFake(epoch), WatchRoutes: true, ResyncInterval: -1}
	c.hook(&opts)
	m, err := ifacemonitor.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, m.Start(ctx))
	t.Cleanup(func() {
		cancel()
		<-m.Done()
		requireNoLeaks(t)
	})
	bad := []ifacemonitor.Event{
		{},
		{Link: &netlink.LinkUpdate{}},
		{Link: &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_NEWLINK}, Link: &netlink.GenericLink{}}},
		{Link: &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_DELLINK}}},
		{Addr: &netlink.AddrUpdate{LinkIndex: 1, NewAddr: true}},
		{Addr: &netlink.AddrUpdate{LinkIndex: -1, NewAddr: true}},
		{Route: &netlink.RouteUpdate{Type: unix.RTM_NEWROUTE}},
		{Route: &netlink.RouteUpdate{Type: unix.RTM_NEWROUTE, Route: netlink.Route{Family: unix.AF_INET, Dst: &net.IPNet{IP: net.IP{1, 2}, Mask: net.CIDRMask(8, 32)}}}},
		{Err: errors.New("subscribe failed")},
		{Resync: &ifacemonitor.Resync{}},
	}
	for _, ev := range bad {
		select {
		case src.ch <- ev:
		case <-time.After(10 * time.Second):
			t.Fatal("event not taken")
		}
	}
	require.Eventually(t, c.inSync, 10*time.Second, time.Millisecond)
	want, _ := kernelView(t, k)
	require.Eventually(t, func() bool {
		got, _ := c.view()
		return assert.ObjectsAreEqual(want, got)
	}, 10*time.Second, time.Millisecond)
	s := m.Stats()
	assert.Equal(t, uint64(1), s.SubscribeErrors)
	assert.Zero(t, s.CallbackPanics)
}
