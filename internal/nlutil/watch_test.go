//go:build linux

package nlutil

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/leakcheck"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// fakeKernel is an injectable subscribeFunc: the test pushes events into a
// subscription, kills it with an error, or makes subscribing fail.
type fakeKernel struct {
	mu          sync.Mutex
	subs        map[Kinds][]*fakeSub
	failures    map[Kinds][]error // returned by the next attempts, in order
	rejectForce bool              // fail with EPERM when asked to force the buffer
	calls       []subCall
	changed     chan struct{} // closed and replaced on every subscribe call
	running     atomic.Int32  // goroutines of live fake subscriptions
}

type subCall struct {
	kind Kinds
	cfg  subConfig
	err  error
}

type fakeSub struct {
	kind  Kinds
	in    chan Event
	kill  chan error
	done  <-chan struct{}
	out   chan Event
	onErr func(error)
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{subs: map[Kinds][]*fakeSub{}, failures: map[Kinds][]error{}, changed: make(chan struct{})}
}

func (k *fakeKernel) failNext(kind Kinds, errs ...error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.failures[kind] = append(k.failures[kind], errs...)
}

func (k *fakeKernel) subscribe(kind Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (<-chan Event, error) {
	k.mu.Lock()
	defer func() {
		close(k.changed)
		k.changed = make(chan struct{})
		k.mu.Unlock()
	}()
	var err error
	if q := k.failures[kind]; len(q) > 0 {
		err, k.failures[kind] = q[0], q[1:]
	} else if k.rejectForce && cfg.force {
		err = unix.EPERM
	}
	k.calls = append(k.calls, subCall{kind, cfg, err})
	if err != nil {
		return nil, err
	}
	s := &fakeSub{kind: kind, in: make(chan Event), kill: make(chan error), done: done, out: make(chan Event), onErr: onErr}
	k.subs[kind] = append(k.subs[kind], s)
	k.running.Add(1)
	go func() {
		defer close(s.out)      // runs last: the watcher sees the end
		defer k.running.Add(-1) // only after this goroutine is done
		for {
			select {
			case <-done:
				return
			case err := <-s.kill:
				if err != nil {
					onErr(err)
				}
				return
			case ev := <-s.in:
				select {
				case s.out <- ev:
				case <-done:
					return
				}
			}
		}
	}()
	return s.out, nil
}

// waitSub returns the n-th (from 0) successful subscription of kind.
func (k *fakeKernel) waitSub(t *testing.T, kind Kinds, n int) *fakeSub {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		k.mu.Lock()
		subs, changed := k.subs[kind], k.changed
		k.mu.Unlock()
		if len(subs) > n {
			return subs[n]
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no subscription #%d for %s", n, kind)
		}
	}
}

func (k *fakeKernel) callsFor(kind Kinds) []subCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []subCall
	for _, c := range k.calls {
		if c.kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func (s *fakeSub) push(t *testing.T, ev Event) {
	t.Helper()
	select {
	case s.in <- ev:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s subscription did not take an event", s.kind)
	}
}

func (s *fakeSub) die(t *testing.T, err error) {
	t.Helper()
	select {
	case s.kill <- err:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s subscription could not be killed", s.kind)
	}
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	kernel *fakeKernel
	clock  *clock.Fake
	events <-chan Event
	cancel context.CancelFunc
	ctx    context.Context
}

func startWatcher(t *testing.T, opts WatchOptions) *harness {
	t.Helper()
	h := &harness{kernel: newFakeKernel(), clock: clock.NewFake(t0)}
	opts.Clock = h.clock
	if opts.ResubscribeBackoff == 0 {
		opts.ResubscribeBackoff = 100 * time.Millisecond
	}
	if opts.MaxResubscribeBackoff == 0 {
		opts.MaxResubscribeBackoff = time.Second
	}
	w, err := NewWatcher(opts)
	require.NoError(t, err)
	w.subscribe = h.kernel.subscribe
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.events, err = w.Start(h.ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, int32(0), h.kernel.running.Load(), "fake subscriptions still running after the stream closed")
	})
	return h
}

// block waits until the watcher has armed n timers (its retry wait),
// failing instead of hanging if it never does.
func (h *harness) block(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, h.clock.BlockUntil(ctx, n), "the watcher never armed a retry timer")
}

func (h *harness) next(t *testing.T) Event {
	t.Helper()
	select {
	case ev, ok := <-h.events:
		require.True(t, ok, "event stream closed")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return Event{}
	}
}

func (h *harness) nextResync(t *testing.T) *Resync {
	t.Helper()
	ev := h.next(t)
	require.NotNil(t, ev.Resync, "want a Resync, got %+v", ev)
	return ev.Resync
}

func linkEvent(name string) Event {
	return Event{Link: &netlink.LinkUpdate{Link: &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}}}
}

func TestWatcherFirstResyncThenEvents(t *testing.T) {
	ns, err := netns.Get() // any open handle; the fake kernel only passes it on
	require.NoError(t, err)
	t.Cleanup(func() { ns.Close() })
	h := startWatcher(t, WatchOptions{Kinds: Links | Addrs | Routes, Namespace: &ns})
	rs := h.nextResync(t)
	assert.Equal(t, Links|Addrs|Routes, rs.Kinds)
	assert.NoError(t, rs.Reason)

	h.kernel.waitSub(t, Links, 0).push(t, linkEvent("br0"))
	ev := h.next(t)
	require.NotNil(t, ev.Link)
	assert.Equal(t, "br0", ev.Link.Attrs().Name)

	h.kernel.waitSub(t, Addrs, 0).push(t, Event{Addr: &netlink.AddrUpdate{LinkIndex: 7, NewAddr: true}})
	ev = h.next(t)
	require.NotNil(t, ev.Addr)
	assert.Equal(t, 7, ev.Addr.LinkIndex)

	h.kernel.waitSub(t, Routes, 0).push(t, Event{Route: &netlink.RouteUpdate{Type: unix.RTM_NEWROUTE}})
	assert.NotNil(t, h.next(t).Route)

	// Options reach the subscription.
	for _, kind := range []Kinds{Links, Addrs, Routes} {
		calls := h.kernel.callsFor(kind)
		require.Len(t, calls, 1)
		require.NotNil(t, calls[0].cfg.namespace)
		assert.NotSame(t, &ns, calls[0].cfg.namespace, "the handle is copied")
		assert.Equal(t, ns, *calls[0].cfg.namespace)
		assert.Equal(t, DefaultReceiveBufferSize, calls[0].cfg.rcvbuf)
		assert.True(t, calls[0].cfg.force)
	}
}

func TestWatcherRenewsLostSubscriptions(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantIs    []error
		wantNotIs []error
	}{
		{
			name:   "ENOBUFS as netlink formats it",
			err:    errors.New("Receive failed: no buffer space available"),
			wantIs: []error{ErrSubscriptionLost, ErrOverflow, unix.ENOBUFS},
		},
		{
			name:   "ENOBUFS as an errno",
			err:    unix.ENOBUFS,
			wantIs: []error{ErrSubscriptionLost, ErrOverflow, unix.ENOBUFS},
		},
		{
			name:      "other socket error",
			err:       unix.EBADF,
			wantIs:    []error{ErrSubscriptionLost, unix.EBADF},
			wantNotIs: []error{ErrOverflow},
		},
		{
			name:      "channel closed without an error",
			wantIs:    []error{ErrSubscriptionLost},
			wantNotIs: []error{ErrOverflow},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startWatcher(t, WatchOptions{Kinds: Links | Addrs})
			h.nextResync(t)
			// A subscription that has lived past the max backoff is
			// healthy: its loss is renewed at once.
			h.clock.Advance(time.Second)
			h.kernel.waitSub(t, Addrs, 0).die(t, tc.err)

			rs := h.nextResync(t)
			assert.Equal(t, Addrs, rs.Kinds, "only the lost kind is renewed")
			for _, want := range tc.wantIs {
				assert.ErrorIs(t, rs.Reason, want)
			}
			for _, notWant := range tc.wantNotIs {
				assert.NotErrorIs(t, rs.Reason, notWant)
			}
			assert.Equal(t, 0, h.clock.Waiters(), "no retry timer for a healthy loss")

			// Events flow on the new subscription and the old one.
			h.kernel.waitSub(t, Addrs, 1).push(t, Event{Addr: &netlink.AddrUpdate{LinkIndex: 3}})
			assert.Equal(t, 3, h.next(t).Addr.LinkIndex)
			h.kernel.waitSub(t, Links, 0).push(t, linkEvent("still-here"))
			assert.Equal(t, "still-here", h.next(t).Link.Attrs().Name)
		})
	}
}

func TestWatcherBacksOffWhenSubscriptionsDieYoung(t *testing.T) {
	h := startWatcher(t, WatchOptions{Kinds: Links, ResubscribeBackoff: 100 * time.Millisecond, MaxResubscribeBackoff: 400 * time.Millisecond})
	h.nextResync(t)

	// Each subscription dies at once of a socket error; the waits double
	// up to the max.
	for i, wait := range []time.Duration{100, 200, 400, 400} {
		wait *= time.Millisecond
		h.kernel.waitSub(t, Links, i).die(t, unix.EBADF)
		h.block(t, 1)
		next, ok := h.clock.NextDeadline()
		require.True(t, ok)
		assert.Equal(t, wait, next.Sub(h.clock.Now()), "wait before renewal %d", i+1)
		assert.Len(t, h.kernel.callsFor(Links), i+1, "no renewal before the wait")
		h.clock.Advance(wait)
		rs := h.nextResync(t)
		assert.ErrorIs(t, rs.Reason, ErrSubscriptionLost)
		assert.NotErrorIs(t, rs.Reason, ErrOverflow)
	}

	// A subscription that lives long enough resets the backoff and is
	// renewed at once.
	h.clock.Advance(400 * time.Millisecond)
	h.kernel.waitSub(t, Links, 4).die(t, nil)
	rs := h.nextResync(t)
	assert.ErrorIs(t, rs.Reason, ErrSubscriptionLost)
	h.kernel.waitSub(t, Links, 5).die(t, nil)
	h.block(t, 1)
	next, _ := h.clock.NextDeadline()
	assert.Equal(t, 100*time.Millisecond, next.Sub(h.clock.Now()))
}

// An overflow is load, not a broken socket: even a young subscription that
// overflows is renewed at once, so the consumer is never deaf through a
// storm of overflows.
func TestWatcherRenewsAtOnceAfterOverflow(t *testing.T) {
	h := startWatcher(t, WatchOptions{Kinds: Links, ResubscribeBackoff: 100 * time.Millisecond, MaxResubscribeBackoff: 400 * time.Millisecond})
	h.nextResync(t)
	for i := range 5 {
		h.kernel.waitSub(t, Links, i).die(t, unix.ENOBUFS)
		rs := h.nextResync(t)
		assert.ErrorIs(t, rs.Reason, ErrOverflow)
		assert.Equal(t, 0, h.clock.Waiters(), "no retry timer after overflow %d", i+1)
		assert.Len(t, h.kernel.callsFor(Links), i+2, "renewed at once after overflow %d", i+1)
	}
}

func TestWatcherRetriesFailedSubscribes(t *testing.T) {
	h := newHarnessWithFailures(t, Addrs, 3)
	// Links subscribe fine; addrs fail three times first.
	first := h.next(t)
	require.ErrorIs(t, first.Err, ErrSubscribe)
	require.ErrorIs(t, first.Err, unix.EMFILE)
	rs := h.nextResync(t)
	assert.Equal(t, Links, rs.Kinds)
	assert.NoError(t, rs.Reason)

	for i, wait := range []time.Duration{100, 200} {
		wait *= time.Millisecond
		h.block(t, 1)
		next, _ := h.clock.NextDeadline()
		assert.Equal(t, wait, next.Sub(h.clock.Now()), "retry %d", i+1)
		h.clock.Advance(wait)
		ev := h.next(t)
		require.ErrorIs(t, ev.Err, ErrSubscribe, "retry %d fails again and says so", i+1)
	}
	h.block(t, 1)
	h.clock.Advance(400 * time.Millisecond)
	rs = h.nextResync(t)
	assert.Equal(t, Addrs, rs.Kinds)
	assert.Len(t, h.kernel.callsFor(Addrs), 4)
	assert.Len(t, h.kernel.callsFor(Links), 1)
	assert.Equal(t, 0, h.clock.Waiters())
}

func newHarnessWithFailures(t *testing.T, kind Kinds, n int) *harness {
	t.Helper()
	h := &harness{kernel: newFakeKernel(), clock: clock.NewFake(t0)}
	for range n {
		h.kernel.failNext(kind, unix.EMFILE)
	}
	w, err := NewWatcher(WatchOptions{Kinds: Links | Addrs, Clock: h.clock, MaxResubscribeBackoff: time.Second})
	require.NoError(t, err)
	w.subscribe = h.kernel.subscribe
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.events, err = w.Start(h.ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		h.cancel()
		for range h.events {
		}
	})
	return h
}

func TestWatcherFallsBackWithoutCapNetAdmin(t *testing.T) {
	h := &harness{kernel: newFakeKernel(), clock: clock.NewFake(t0)}
	h.kernel.rejectForce = true
	w, err := NewWatcher(WatchOptions{Kinds: Links | Routes, Clock: h.clock, ReceiveBufferSize: 1 << 20})
	require.NoError(t, err)
	w.subscribe = h.kernel.subscribe
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.events, err = w.Start(ctx)
	require.NoError(t, err)

	rs := h.nextResync(t)
	assert.Equal(t, Links|Routes, rs.Kinds, "no Err event: the fallback is silent but for a log line")
	links := h.kernel.callsFor(Links)
	require.Len(t, links, 2)
	assert.True(t, links[0].cfg.force)
	assert.ErrorIs(t, links[0].err, unix.EPERM)
	assert.False(t, links[1].cfg.force)
	routes := h.kernel.callsFor(Routes)
	require.Len(t, routes, 1, "later subscriptions do not try to force again")
	assert.False(t, routes[0].cfg.force)
	assert.Equal(t, 1<<20, routes[0].cfg.rcvbuf)
}

func TestWatcherIgnoresNonFatalCallbackErrors(t *testing.T) {
	h := startWatcher(t, WatchOptions{Kinds: Links})
	h.nextResync(t)
	sub := h.kernel.waitSub(t, Links, 0)
	sub.onErr(errors.New("could not parse link"))
	sub.push(t, linkEvent("after"))
	ev := h.next(t)
	require.NotNil(t, ev.Link, "a non-fatal error neither ends nor renews the subscription")
	assert.Len(t, h.kernel.callsFor(Links), 1)
}

func TestWatcherStopsCleanly(t *testing.T) {
	t.Run("while idle", func(t *testing.T) {
		base := runtime.NumGoroutine()
		h := startWatcher(t, WatchOptions{Kinds: Links | Addrs | Routes})
		h.nextResync(t)
		assert.Equal(t, int32(3), h.kernel.running.Load())
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, int32(0), h.kernel.running.Load())
		waitGoroutines(t, base)
	})

	t.Run("while the consumer is not reading", func(t *testing.T) {
		h := startWatcher(t, WatchOptions{Kinds: Links, EventBuffer: 1})
		h.nextResync(t)
		sub := h.kernel.waitSub(t, Links, 0)
		sub.push(t, linkEvent("a")) // fills the stream's buffer
		sub.push(t, linkEvent("b")) // the loop blocks sending it
		h.cancel()
		n := 0
		for range h.events {
			n++
		}
		assert.LessOrEqual(t, n, 2)
		assert.Equal(t, int32(0), h.kernel.running.Load())
	})

	t.Run("while waiting to retry", func(t *testing.T) {
		h := newHarnessWithFailures(t, Addrs, 100)
		require.ErrorIs(t, h.next(t).Err, ErrSubscribe)
		h.nextResync(t)
		h.block(t, 1)
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, 0, h.clock.Waiters(), "retry timer stopped")
		assert.Equal(t, int32(0), h.kernel.running.Load())
	})

	t.Run("while the stream is blocked on an Err event", func(t *testing.T) {
		h := newHarnessWithFailures(t, Addrs, 100)
		// Nobody reads: the loop blocks sending the first Err, or is
		// about to; either way cancelling must end it.
		for len(h.kernel.callsFor(Addrs)) == 0 {
			runtime.Gosched()
		}
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, int32(0), h.kernel.running.Load())
	})
}

func TestWatcherStartTwice(t *testing.T) {
	w, err := NewWatcher(WatchOptions{Kinds: Links})
	require.NoError(t, err)
	w.subscribe = newFakeKernel().subscribe
	ctx, cancel := context.WithCancel(context.Background())
	events, err := w.Start(ctx)
	require.NoError(t, err)
	_, err = w.Start(ctx)
	require.ErrorIs(t, err, ErrAlreadyStarted)
	cancel()
	for range events {
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = w.Start(nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestNewWatcherValidates(t *testing.T) {
	closed := netns.None()
	var zero netns.NsHandle // fd 0 is standard input, never a namespace we opened
	tests := []struct {
		name string
		opts WatchOptions
	}{
		{"no kinds", WatchOptions{}},
		{"unknown kinds", WatchOptions{Kinds: Links | 1<<6}},
		{"negative buffer", WatchOptions{Kinds: Links, ReceiveBufferSize: -1}},
		{"negative event buffer", WatchOptions{Kinds: Links, EventBuffer: -1}},
		{"negative backoff", WatchOptions{Kinds: Links, ResubscribeBackoff: -time.Second}},
		{"negative max backoff", WatchOptions{Kinds: Links, MaxResubscribeBackoff: -time.Second}},
		{"max below initial", WatchOptions{Kinds: Links, ResubscribeBackoff: time.Minute, MaxResubscribeBackoff: time.Second}},
		{"closed namespace", WatchOptions{Kinds: Links, Namespace: &closed}},
		{"zero namespace handle", WatchOptions{Kinds: Links, Namespace: &zero}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWatcher(tc.opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Nil(t, w)
		})
	}

	w, err := NewWatcher(WatchOptions{Kinds: Routes, ResubscribeBackoff: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, DefaultReceiveBufferSize, w.opts.ReceiveBufferSize)
	assert.Equal(t, DefaultEventBuffer, w.opts.EventBuffer)
	assert.Equal(t, time.Minute, w.opts.MaxResubscribeBackoff, "the max is at least the initial backoff")
	w, err = NewWatcher(WatchOptions{Kinds: Routes})
	require.NoError(t, err)
	assert.Equal(t, DefaultResubscribeBackoff, w.opts.ResubscribeBackoff)
	assert.Equal(t, DefaultMaxResubscribeBackoff, w.opts.MaxResubscribeBackoff)
}

// waitGoroutines waits until the goroutine count is back to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	leakcheck.BackTo(t, 5*time.Second, base)
}

func TestKindsString(t *testing.T) {
	tests := map[Kinds]string{
		0:                      "none",
		Links:                  "links",
		Links | Routes:         "links|routes",
		Addrs | Routes | 1<<7:  "addrs|routes|0x80",
		Links | Addrs | Routes: "links|addrs|routes",
	}
	for k, want := range tests {
		assert.Equal(t, want, k.String())
	}
}

func TestLostReasonKeepsTheCause(t *testing.T) {
	cause := errors.New("Receive failed: no buffer space available")
	r := lostReason(Routes, cause)
	assert.ErrorIs(t, r, ErrOverflow)
	assert.Contains(t, r.Error(), "routes")
	assert.Contains(t, r.Error(), cause.Error())
}

// Link messages of the AF_BRIDGE family are about bridge ports: the
// stream leaves them out, so a port leaving its bridge (an AF_BRIDGE
// RTM_DELLINK) never reads as the link's deletion.
func TestWrapLinkLeavesOutBridgePortMessages(t *testing.T) {
	port := &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_DELLINK}}
	port.Family = unix.AF_BRIDGE
	_, ok := wrapLink(port)
	assert.False(t, ok)

	link := &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: unix.RTM_DELLINK}}
	ev, ok := wrapLink(link)
	require.True(t, ok)
	assert.Same(t, link, ev.Link)
}
