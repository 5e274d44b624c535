//go:build linux

package nlutil

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// fakeKernel is an injectable subscribeFunc: the test pushes events into a
// subscription, kills it with an error, or makes subscribing fail; a
// barrier request is acknowledged behind the events pushed so far.
type fakeKernel struct {
	mu          sync.Mutex
	subs        []*fakeSub
	failures    []error // returned by the next attempts, in order
	rejectForce bool    // fail with EPERM when asked to force the buffer
	calls       []subCall
	changed     chan struct{} // closed and replaced on every subscribe call
	running     atomic.Int32  // goroutines of live fake subscriptions
}

type subCall struct {
	kinds Kinds
	cfg   subConfig
	err   error
}

type fakeSub struct {
	in    chan Event
	kill  chan error
	done  <-chan struct{}
	out   chan Event
	onErr func(error)

	mu     sync.Mutex
	closed bool     // the subscription ended: barrier fails
	acks   []uint32 // barrier requests, acknowledged in order by the goroutine
}

func newFakeKernel() *fakeKernel {
	return &fakeKernel{changed: make(chan struct{})}
}

func (k *fakeKernel) failNext(errs ...error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.failures = append(k.failures, errs...)
}

func (k *fakeKernel) subscribe(kinds Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (subscription, error) {
	k.mu.Lock()
	defer func() {
		close(k.changed)
		k.changed = make(chan struct{})
		k.mu.Unlock()
	}()
	var err error
	if len(k.failures) > 0 {
		err, k.failures = k.failures[0], k.failures[1:]
	} else if k.rejectForce && cfg.force {
		err = unix.EPERM
	}
	k.calls = append(k.calls, subCall{kinds, cfg, err})
	if err != nil {
		return subscription{}, err
	}
	s := &fakeSub{in: make(chan Event), kill: make(chan error), done: done, out: make(chan Event), onErr: onErr}
	k.subs = append(k.subs, s)
	k.running.Add(1)
	go func() {
		defer close(s.out)      // runs last: the watcher sees the end
		defer k.running.Add(-1) // only after this goroutine is done
		defer func() {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
		}()
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
	return subscription{events: s.out, barrier: s.barrier}, nil
}

// barrier queues the acknowledgement of seq: the test delivers it with ack.
func (s *fakeSub) barrier(seq uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return net.ErrClosed
	}
	s.acks = append(s.acks, seq)
	return nil
}

// ack delivers the oldest barrier acknowledgement not yet delivered.
func (s *fakeSub) ack(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	require.NotEmpty(t, s.acks, "no barrier to acknowledge")
	seq := s.acks[0]
	s.acks = s.acks[1:]
	s.mu.Unlock()
	s.push(t, Event{Barrier: &Barrier{ID: uint64(seq)}})
}

// waitSub returns the n-th (from 0) successful subscription.
func (k *fakeKernel) waitSub(t *testing.T, n int) *fakeSub {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		k.mu.Lock()
		subs, changed := k.subs, k.changed
		k.mu.Unlock()
		if len(subs) > n {
			return subs[n]
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no subscription #%d", n)
		}
	}
}

func (k *fakeKernel) allCalls() []subCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls)
}

func (s *fakeSub) push(t *testing.T, ev Event) {
	t.Helper()
	select {
	case s.in <- ev:
	case <-time.After(5 * time.Second):
		t.Fatalf("subscription did not take an event")
	}
}

func (s *fakeSub) die(t *testing.T, err error) {
	t.Helper()
	select {
	case s.kill <- err:
	case <-time.After(5 * time.Second):
		t.Fatalf("subscription could not be killed")
	}
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	watcher *Watcher
	kernel  *fakeKernel
	clock   *clock.Fake
	events  <-chan Event
	cancel  context.CancelFunc
	ctx     context.Context
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
	h.watcher = w
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

func msgEvent(typ uint16, index byte) Event {
	return Event{Msg: &Message{Header: unix.NlMsghdr{Type: typ}, Data: []byte{unix.AF_UNSPEC, 0, 0, 0, index, 0, 0, 0}}}
}

func TestWatcherFirstResyncThenEvents(t *testing.T) {
	ns, err := netns.Get() // any open handle; the fake kernel only passes it on
	require.NoError(t, err)
	t.Cleanup(func() { ns.Close() })
	h := startWatcher(t, WatchOptions{Kinds: Links | Addrs | Routes, Namespace: &ns})
	rs := h.nextResync(t)
	assert.Equal(t, Links|Addrs|Routes, rs.Kinds)
	assert.NoError(t, rs.Reason)

	sub := h.kernel.waitSub(t, 0)
	for _, typ := range []uint16{unix.RTM_NEWLINK, unix.RTM_NEWADDR, unix.RTM_DELROUTE} {
		sub.push(t, msgEvent(typ, 7))
		ev := h.next(t)
		require.NotNil(t, ev.Msg)
		assert.Equal(t, typ, ev.Msg.Header.Type, "in order, through one subscription")
	}

	// Options reach the subscription, one for every kind.
	calls := h.kernel.allCalls()
	require.Len(t, calls, 1)
	assert.Equal(t, Links|Addrs|Routes, calls[0].kinds)
	require.NotNil(t, calls[0].cfg.namespace)
	assert.NotSame(t, &ns, calls[0].cfg.namespace, "the handle is copied")
	assert.Equal(t, ns, *calls[0].cfg.namespace)
	assert.Equal(t, DefaultReceiveBufferSize, calls[0].cfg.rcvbuf)
	assert.True(t, calls[0].cfg.force)
}

// A barrier comes after the events queued before it, with the ID Barrier
// returned (the socket's sequence number is its low 32 bits), and a
// barrier still pending when its subscription is lost comes before the
// Resync.
func TestWatcherBarriers(t *testing.T) {
	h := startWatcher(t, WatchOptions{Kinds: Links | Routes})
	w := h.watcher
	h.nextResync(t)
	sub := h.kernel.waitSub(t, 0)

	w.mu.Lock()
	w.lastID = 1<<32 - 1 // the next ID's sequence number wraps to 0
	w.mu.Unlock()
	sub.push(t, msgEvent(unix.RTM_NEWLINK, 1))
	id1, err := w.Barrier()
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<32), id1)
	assert.Equal(t, []uint32{0}, sub.acks, "the sequence number is the ID's low 32 bits")
	sub.push(t, msgEvent(unix.RTM_NEWROUTE, 2))
	id2, err := w.Barrier()
	require.NoError(t, err)
	sub.ack(t)
	sub.push(t, msgEvent(unix.RTM_NEWROUTE, 3))
	sub.push(t, Event{Barrier: &Barrier{ID: 12345}}) // an acknowledgement nobody asked for
	sub.ack(t)

	var got []string
	for range 5 {
		ev := h.next(t)
		switch {
		case ev.Msg != nil:
			got = append(got, fmt.Sprintf("msg %d", ev.Msg.Data[4]))
		case ev.Barrier != nil:
			got = append(got, fmt.Sprintf("barrier %d", ev.Barrier.ID))
		}
	}
	assert.Equal(t, []string{"msg 1", "msg 2", fmt.Sprintf("barrier %d", id1), "msg 3", fmt.Sprintf("barrier %d", id2)}, got)

	id3, err := w.Barrier()
	require.NoError(t, err)
	sub.push(t, msgEvent(unix.RTM_NEWLINK, 4))
	h.clock.Advance(time.Second) // healthy: renewed at once
	sub.die(t, unix.ENOBUFS)
	assert.NotNil(t, h.next(t).Msg)
	ev := h.next(t)
	require.NotNil(t, ev.Barrier, "the lost subscription's barrier comes before the Resync")
	assert.Equal(t, id3, ev.Barrier.ID)
	assert.ErrorIs(t, h.nextResync(t).Reason, ErrOverflow)

	id4, err := w.Barrier()
	require.NoError(t, err)
	assert.Equal(t, id3+1, id4)
	h.kernel.waitSub(t, 1).ack(t)
	assert.Equal(t, id4, h.next(t).Barrier.ID)

	h.cancel()
	for range h.events {
	}
	_, err = w.Barrier()
	assert.ErrorIs(t, err, ErrNoSubscription, "after the stream ended")
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
			h.kernel.waitSub(t, 0).die(t, tc.err)

			rs := h.nextResync(t)
			assert.Equal(t, Links|Addrs, rs.Kinds, "every kind is renewed")
			for _, want := range tc.wantIs {
				assert.ErrorIs(t, rs.Reason, want)
			}
			for _, notWant := range tc.wantNotIs {
				assert.NotErrorIs(t, rs.Reason, notWant)
			}
			assert.Equal(t, 0, h.clock.Waiters(), "no retry timer for a healthy loss")

			// Events flow on the new subscription.
			h.kernel.waitSub(t, 1).push(t, msgEvent(unix.RTM_NEWADDR, 3))
			assert.Equal(t, byte(3), h.next(t).Msg.Data[4])
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
		h.kernel.waitSub(t, i).die(t, unix.EBADF)
		h.block(t, 1)
		next, ok := h.clock.NextDeadline()
		require.True(t, ok)
		assert.Equal(t, wait, next.Sub(h.clock.Now()), "wait before renewal %d", i+1)
		assert.Len(t, h.kernel.allCalls(), i+1, "no renewal before the wait")
		h.clock.Advance(wait)
		rs := h.nextResync(t)
		assert.ErrorIs(t, rs.Reason, ErrSubscriptionLost)
		assert.NotErrorIs(t, rs.Reason, ErrOverflow)
	}

	// A subscription that lives long enough resets the backoff and is
	// renewed at once.
	h.clock.Advance(400 * time.Millisecond)
	h.kernel.waitSub(t, 4).die(t, nil)
	rs := h.nextResync(t)
	assert.ErrorIs(t, rs.Reason, ErrSubscriptionLost)
	h.kernel.waitSub(t, 5).die(t, nil)
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
		h.kernel.waitSub(t, i).die(t, unix.ENOBUFS)
		rs := h.nextResync(t)
		assert.ErrorIs(t, rs.Reason, ErrOverflow)
		assert.Equal(t, 0, h.clock.Waiters(), "no retry timer after overflow %d", i+1)
		assert.Len(t, h.kernel.allCalls(), i+2, "renewed at once after overflow %d", i+1)
	}
}

func TestWatcherRetriesFailedSubscribes(t *testing.T) {
	h := newHarnessWithFailures(t, 3)
	for i, wait := range []time.Duration{0, 100, 200} {
		wait *= time.Millisecond
		if i > 0 {
			h.block(t, 1)
			next, _ := h.clock.NextDeadline()
			assert.Equal(t, wait, next.Sub(h.clock.Now()), "retry %d", i)
			h.clock.Advance(wait)
		}
		ev := h.next(t)
		require.ErrorIs(t, ev.Err, ErrSubscribe, "attempt %d fails and says so", i+1)
		require.ErrorIs(t, ev.Err, unix.EMFILE)
	}
	h.block(t, 1)
	h.clock.Advance(400 * time.Millisecond)
	rs := h.nextResync(t)
	assert.Equal(t, Links|Addrs, rs.Kinds)
	assert.NoError(t, rs.Reason)
	assert.Len(t, h.kernel.allCalls(), 4)
	assert.Equal(t, 0, h.clock.Waiters())
}

func newHarnessWithFailures(t *testing.T, n int) *harness {
	t.Helper()
	h := &harness{kernel: newFakeKernel(), clock: clock.NewFake(t0)}
	for range n {
		h.kernel.failNext(unix.EMFILE)
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
	calls := h.kernel.allCalls()
	require.Len(t, calls, 2)
	assert.True(t, calls[0].cfg.force)
	assert.ErrorIs(t, calls[0].err, unix.EPERM)
	assert.False(t, calls[1].cfg.force)
	assert.Equal(t, 1<<20, calls[1].cfg.rcvbuf)

	// A renewal does not try to force again.
	h.clock.Advance(time.Second)
	h.kernel.waitSub(t, 0).die(t, unix.ENOBUFS)
	h.nextResync(t)
	calls = h.kernel.allCalls()
	require.Len(t, calls, 3)
	assert.False(t, calls[2].cfg.force)
}

func TestWatcherIgnoresNonFatalCallbackErrors(t *testing.T) {
	h := startWatcher(t, WatchOptions{Kinds: Links})
	h.nextResync(t)
	sub := h.kernel.waitSub(t, 0)
	sub.onErr(errors.New("could not parse link"))
	sub.push(t, msgEvent(unix.RTM_NEWLINK, 1))
	ev := h.next(t)
	require.NotNil(t, ev.Msg, "a non-fatal error neither ends nor renews the subscription")
	assert.Len(t, h.kernel.allCalls(), 1)
}

func TestWatcherStopsCleanly(t *testing.T) {
	t.Run("while idle", func(t *testing.T) {
		base := runtime.NumGoroutine()
		h := startWatcher(t, WatchOptions{Kinds: Links | Addrs | Routes})
		h.nextResync(t)
		assert.Equal(t, int32(1), h.kernel.running.Load())
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, int32(0), h.kernel.running.Load())
		waitGoroutines(t, base)
	})

	t.Run("while the consumer is not reading", func(t *testing.T) {
		h := startWatcher(t, WatchOptions{Kinds: Links, EventBuffer: 1})
		h.nextResync(t)
		sub := h.kernel.waitSub(t, 0)
		sub.push(t, msgEvent(unix.RTM_NEWLINK, 1)) // fills the stream's buffer
		sub.push(t, msgEvent(unix.RTM_NEWLINK, 2)) // the loop blocks sending it
		h.cancel()
		n := 0
		for range h.events {
			n++
		}
		assert.LessOrEqual(t, n, 2)
		assert.Equal(t, int32(0), h.kernel.running.Load())
	})

	t.Run("while waiting to retry", func(t *testing.T) {
		h := newHarnessWithFailures(t, 100)
		require.ErrorIs(t, h.next(t).Err, ErrSubscribe)
		h.block(t, 1)
		h.cancel()
		for range h.events {
		}
		assert.Equal(t, 0, h.clock.Waiters(), "retry timer stopped")
		assert.Equal(t, int32(0), h.kernel.running.Load())
	})

	t.Run("while the stream is blocked on an Err event", func(t *testing.T) {
		h := newHarnessWithFailures(t, 100)
		// Nobody reads: the loop blocks sending the first Err, or is
		// about to; either way cancelling must end it.
		for len(h.kernel.allCalls()) == 0 {
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
	r := lostReason(Links|Routes, cause)
	assert.ErrorIs(t, r, ErrOverflow)
	assert.Contains(t, r.Error(), "links|routes")
	assert.Contains(t, r.Error(), cause.Error())
}

// negErrno is an errno as an NLMSG_ERROR carries it.
func negErrno(e unix.Errno) uint32 { return uint32(-int32(e)) }

// Link messages of the AF_BRIDGE family are about bridge ports: the
// stream leaves them out, so a port leaving its bridge (an AF_BRIDGE
// RTM_DELLINK) never reads as the link's deletion. Messages of other
// types are left out too, and error acknowledgements go to onErr.
func TestEventOfFiltersMessages(t *testing.T) {
	var errs []error
	onErr := func(err error) { errs = append(errs, err) }
	port := &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_DELLINK}, Data: []byte{unix.AF_BRIDGE, 0, 0, 0}}
	_, ok := eventOf(port, onErr)
	assert.False(t, ok)
	link := &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_DELLINK, Seq: 9}, Data: []byte{unix.AF_UNSPEC, 0, 0, 0}}
	ev, ok := eventOf(link, onErr)
	require.True(t, ok)
	assert.Equal(t, &Message{Header: unix.NlMsghdr{Type: unix.RTM_DELLINK, Seq: 9}, Data: link.Data}, ev.Msg)
	_, ok = eventOf(&syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWNEIGH}, Data: make([]byte, 12)}, onErr)
	assert.False(t, ok)

	ack := &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.NLMSG_ERROR, Seq: 77}, Data: make([]byte, 20)}
	ev, ok = eventOf(ack, onErr)
	require.True(t, ok)
	assert.Equal(t, &Barrier{ID: 77}, ev.Barrier)
	nack := &syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.NLMSG_ERROR, Seq: 78}, Data: binary.NativeEndian.AppendUint32(nil, negErrno(unix.EINVAL))}
	_, ok = eventOf(nack, onErr)
	assert.False(t, ok)
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], unix.EINVAL)
}
