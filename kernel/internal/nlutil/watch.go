//go:build linux

package nlutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kinds is a set of rtnetlink event kinds to watch. A Watcher streams all
// of them through one socket, so their events arrive in the order the
// kernel sent them.
type Kinds uint8

// The kinds of events a Watcher can subscribe to.
const (
	// Links are link (interface) changes: RTM_NEWLINK / RTM_DELLINK.
	Links Kinds = 1 << iota
	// Addrs are IPv4 and IPv6 address changes.
	Addrs
	// Routes are IPv4 and IPv6 route changes, in every table.
	Routes

	allKinds = Links | Addrs | Routes
)

var kindNames = [...]string{"links", "addrs", "routes"}

// String returns the kinds' names joined by "|", e.g. "links|addrs".
func (k Kinds) String() string {
	if k == 0 {
		return "none"
	}
	var parts []string
	for i, name := range kindNames {
		if k&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := k &^ allKinds; rest != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// Defaults for WatchOptions.
const (
	// DefaultReceiveBufferSize is the socket receive buffer requested for
	// each subscription: large enough to absorb the burst of events when
	// thousands of routes or addresses change at once.
	DefaultReceiveBufferSize = 8 << 20
	// DefaultResubscribeBackoff is the first wait before retrying a failed
	// subscription.
	DefaultResubscribeBackoff = 100 * time.Millisecond
	// DefaultMaxResubscribeBackoff caps the wait between retries.
	DefaultMaxResubscribeBackoff = 10 * time.Second
	// DefaultEventBuffer is the capacity of the Events channel.
	DefaultEventBuffer = 64
)

var (
	// ErrInvalidOptions is wrapped by NewWatcher's errors about bad
	// options.
	ErrInvalidOptions = errors.New("nlutil: invalid watch options")
	// ErrAlreadyStarted is returned by a second call to Watcher.Start.
	ErrAlreadyStarted = errors.New("nlutil: watcher already started")
	// ErrSubscribe is wrapped by the Err of an Event that reports a failed
	// attempt to subscribe. The Watcher keeps retrying.
	ErrSubscribe = errors.New("nlutil: subscribe failed")
	// ErrSubscriptionLost is wrapped by Resync.Reason when a subscription
	// ended on its own (socket error, closed channel). Events may have been
	// missed: re-list.
	ErrSubscriptionLost = errors.New("nlutil: subscription lost")
	// ErrOverflow is wrapped, with ErrSubscriptionLost and unix.ENOBUFS, by
	// Resync.Reason when the kernel dropped events because the socket's
	// receive buffer was full.
	ErrOverflow = errors.New("nlutil: netlink receive buffer overflow (ENOBUFS)")
	// ErrNoSubscription is wrapped by Barrier's error when no subscription
	// is live (the Watcher is renewing one, or has stopped): a Resync
	// follows on the stream unless it has ended.
	ErrNoSubscription = errors.New("nlutil: no live subscription")
)

// WatchOptions configures a Watcher. The zero value of every field but
// Kinds picks a default.
type WatchOptions struct {
	// Kinds selects what to subscribe to; it must not be empty.
	Kinds Kinds
	// Namespace is the network namespace to watch. NewWatcher copies the
	// handle, so a later Close of the caller's variable (which sets it to
	// netns.None()) never redirects the Watcher to another namespace; the
	// caller keeps the file descriptor open while the Watcher runs. Nil
	// means the namespace of the thread that subscribes, which is the
	// process's unless the program moves threads between namespaces.
	Namespace *netns.NsHandle
	// ReceiveBufferSize is the socket receive buffer in bytes; 0 means
	// DefaultReceiveBufferSize. The kernel doubles it for its own
	// accounting and raises a tiny one to its minimum (a few KiB).
	ReceiveBufferSize int
	// ReceiveBufferNoForce asks for the buffer with SO_RCVBUF, which the
	// kernel caps at net.core.rmem_max, instead of SO_RCVBUFFORCE, which
	// needs CAP_NET_ADMIN. Without CAP_NET_ADMIN the Watcher falls back to
	// SO_RCVBUF by itself, with a warning.
	ReceiveBufferNoForce bool
	// EventBuffer is the capacity of the Events channel; 0 means
	// DefaultEventBuffer.
	EventBuffer int
	// ResubscribeBackoff is the first wait before retrying a failed or
	// quickly lost subscription; each further failure doubles it up to
	// MaxResubscribeBackoff. 0 means the defaults.
	ResubscribeBackoff time.Duration
	// MaxResubscribeBackoff caps the retry wait. A subscription that lived
	// at least this long counts as healthy: when it is lost it is renewed
	// at once and the backoff starts again from ResubscribeBackoff.
	MaxResubscribeBackoff time.Duration
	// Logger receives warnings about lost subscriptions and netlink errors;
	// nil discards them.
	Logger *slog.Logger
	// Clock times the retries; nil means clock.Real().
	Clock clock.Clock
}

// Event is one item of a Watcher's stream. Exactly one field is set.
type Event struct {
	// Msg is a link, address or route message (RTM_NEWLINK, RTM_DELLINK,
	// RTM_NEWADDR, RTM_DELADDR, RTM_NEWROUTE, RTM_DELROUTE) of a kind
	// watched, as the kernel sent it; link messages of the AF_BRIDGE
	// family are left out.
	Msg *Message
	// Barrier is the mark of a Watcher.Barrier call.
	Barrier *Barrier
	// Resync says that the subscription was (re)established: list the
	// kernel state of Resync.Kinds now.
	Resync *Resync
	// Err reports a failed attempt to subscribe (wrapping ErrSubscribe);
	// the Watcher retries with backoff and sends a Resync once it
	// succeeds.
	Err error
}

// Message is one rtnetlink message.
type Message struct {
	// Header is the message's netlink header.
	Header unix.NlMsghdr
	// Data is the payload after the header (ifinfomsg, ifaddrmsg or rtmsg
	// and attributes); it belongs to the receiver.
	Data []byte
}

// Barrier marks a point of the stream: every message before it was sent
// by the kernel before the Barrier call that placed it returned, every
// message after it once that call had begun.
type Barrier struct {
	// ID is what Watcher.Barrier returned.
	ID uint64
}

// Resync tells the consumer that the subscription for Kinds is live and
// that it must now list those kinds (with LinkList, AddrList, …) and diff
// the result against what it knows. The subscription is made before the
// Resync is sent, so nothing that happens after the listing is missed;
// events that follow may repeat changes the listing already shows (place
// a Barrier before listing to tell them apart).
type Resync struct {
	// Kinds are the kinds whose subscription was (re)established: all of
	// the Watcher's.
	Kinds Kinds
	// Reason is nil for the first subscription. After a loss it says why
	// the previous subscription ended: it wraps ErrSubscriptionLost, and
	// also ErrOverflow and unix.ENOBUFS when the kernel dropped events.
	Reason error
}

// Watcher delivers rtnetlink events for one network namespace as a single
// stream, in the kernel's order, and never goes silently dead: a
// subscription that ends (ENOBUFS after a burst, a socket error) is renewed
// and announced with a Resync so the consumer re-lists; a subscription that
// cannot be made is retried with backoff and each failure is reported on
// the stream.
type Watcher struct {
	opts      WatchOptions
	log       *slog.Logger
	clk       clock.Clock
	subscribe subscribeFunc // the kernel; tests replace it
	started   atomic.Bool

	mu     sync.Mutex // guards live, lastID and live.pending
	live   *liveSub   // the subscription Barrier writes to; nil while renewing
	lastID uint64     // the last barrier ID handed out
}

// subConfig is what a subscription needs from the options.
type subConfig struct {
	namespace *netns.NsHandle
	rcvbuf    int
	force     bool
}

// subscription is one live socket: its stream of messages and barrier
// acknowledgements, and the way to place a barrier on it.
type subscription struct {
	// events carries Msg events and Barrier events whose ID is the
	// sequence number of the acknowledged request. It is closed when the
	// subscription has ended and released everything it started.
	events <-chan Event
	// barrier asks the kernel to acknowledge a request with sequence
	// number seq, behind every message already queued; safe from any
	// goroutine, and an error once the socket is closed.
	barrier func(seq uint32) error
}

// subscribeFunc starts one subscription of kinds. It ends on its own after
// a failure (having called onErr with the cause first), or after done is
// closed. onErr may also be called for errors that do not end it.
type subscribeFunc func(kinds Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (subscription, error)

// NewWatcher validates opts and returns a Watcher. It does no I/O and starts
// no goroutines; call Start.
func NewWatcher(opts WatchOptions) (*Watcher, error) {
	switch {
	case opts.Kinds == 0:
		return nil, fmt.Errorf("%w: no kinds to watch", ErrInvalidOptions)
	case opts.Kinds&^allKinds != 0:
		return nil, fmt.Errorf("%w: unknown kinds %s", ErrInvalidOptions, opts.Kinds&^allKinds)
	case opts.ReceiveBufferSize < 0:
		return nil, fmt.Errorf("%w: negative receive buffer size %d", ErrInvalidOptions, opts.ReceiveBufferSize)
	case opts.EventBuffer < 0:
		return nil, fmt.Errorf("%w: negative event buffer %d", ErrInvalidOptions, opts.EventBuffer)
	case opts.ResubscribeBackoff < 0 || opts.MaxResubscribeBackoff < 0:
		return nil, fmt.Errorf("%w: negative resubscribe backoff", ErrInvalidOptions)
	case opts.Namespace != nil && (!opts.Namespace.IsOpen() || *opts.Namespace <= 0):
		return nil, fmt.Errorf("%w: namespace handle is not an open file descriptor above 0 (a zero NsHandle is standard input)", ErrInvalidOptions)
	}
	if opts.ReceiveBufferSize == 0 {
		opts.ReceiveBufferSize = DefaultReceiveBufferSize
	}
	if opts.EventBuffer == 0 {
		opts.EventBuffer = DefaultEventBuffer
	}
	if opts.ResubscribeBackoff == 0 {
		opts.ResubscribeBackoff = DefaultResubscribeBackoff
	}
	if opts.MaxResubscribeBackoff == 0 {
		opts.MaxResubscribeBackoff = max(DefaultMaxResubscribeBackoff, opts.ResubscribeBackoff)
	}
	if opts.MaxResubscribeBackoff < opts.ResubscribeBackoff {
		return nil, fmt.Errorf("%w: MaxResubscribeBackoff %v is below ResubscribeBackoff %v",
			ErrInvalidOptions, opts.MaxResubscribeBackoff, opts.ResubscribeBackoff)
	}
	if opts.Namespace != nil {
		ns := *opts.Namespace
		opts.Namespace = &ns
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		opts:      opts,
		log:       log,
		clk:       clock.OrReal(opts.Clock),
		subscribe: netlinkSubscribe,
	}, nil
}

// Start subscribes in the background and returns the event stream. The
// first event is a Resync (or an Err if subscribing failed).
// The stream must be read: while it is not, the kernel buffers events and,
// once its buffer is full, drops them, which the Watcher reports with a
// Resync whose Reason wraps ErrOverflow.
//
// When ctx ends, the subscription is closed and the channel is closed
// once all goroutines the Watcher started have finished. A Watcher can be
// started once.
func (w *Watcher) Start(ctx context.Context) (<-chan Event, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if !w.started.CompareAndSwap(false, true) {
		return nil, ErrAlreadyStarted
	}
	out := make(chan Event, w.opts.EventBuffer)
	r := &run{w: w, ctx: ctx, out: out, backoff: w.opts.ResubscribeBackoff, force: !w.opts.ReceiveBufferNoForce}
	go r.loop()
	return out, nil
}

// Barrier places a barrier in the stream and returns its ID: the stream
// carries an Event whose Barrier has that ID after every message the
// kernel sent before Barrier returned, and before every message it sent
// after Barrier began. A consumer that lists the kernel after Barrier
// returns knows that the messages before the barrier are older than its
// listing. It asks the kernel for an acknowledgement on the subscription's
// socket (an NLMSG_NOOP request, which changes nothing), which the kernel
// queues behind the messages already waiting. Barrier is safe to call from
// any goroutine and does not wait for the stream to be read.
//
// Every barrier placed is delivered, in order, unless the stream ends
// first: if the subscription is lost before the kernel's acknowledgement
// is read, the barrier comes right after the last message read from it,
// before the Resync. With no live subscription (before the first Resync,
// while one is renewed, after the stream ended) Barrier fails with an
// error wrapping ErrNoSubscription.
func (w *Watcher) Barrier() (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.live
	if s == nil {
		return 0, ErrNoSubscription
	}
	id := w.lastID + 1
	if err := s.barrier(uint32(id)); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoSubscription, err)
	}
	w.lastID = id
	s.pending = append(s.pending, id)
	return id, nil
}

// run is the state of a started Watcher, owned by its loop goroutine.
type run struct {
	w   *Watcher
	ctx context.Context
	out chan Event

	sub     *liveSub    // nil while waiting to (re)subscribe
	reason  error       // why the last subscription was lost; nil at start
	retry   clock.Timer // armed while a subscription waits for a retry
	backoff time.Duration
	force   bool // use SO_RCVBUFFORCE
}

// liveSub is one established subscription.
type liveSub struct {
	subscription
	done    chan struct{}
	since   time.Time
	pending []uint64 // barriers placed and not delivered, oldest first (Watcher.mu)
	lastMu  sync.Mutex
	last    error // last error reported by the socket's reader
}

func (s *liveSub) onErr(log *slog.Logger) func(error) {
	return func(err error) {
		select {
		case <-s.done:
			return // our own Close makes Receive fail; not news
		default:
		}
		s.lastMu.Lock()
		s.last = err
		s.lastMu.Unlock()
		log.Warn("nlutil: netlink subscription error", "err", err)
	}
}

func (s *liveSub) lastErr() error {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	return s.last
}

func (r *run) loop() {
	defer close(r.out)
	defer r.shutdown()
	r.subscribe()
	for {
		var retryC <-chan time.Time
		if r.retry != nil {
			retryC = r.retry.C()
		}
		var events <-chan Event
		if r.sub != nil {
			events = r.sub.events
		}
		select {
		case <-r.ctx.Done():
			return
		case <-retryC:
			r.retry = nil
			r.subscribe()
		case ev, ok := <-events:
			if !ok {
				if !r.lost() {
					return
				}
				continue
			}
			if ev.Barrier != nil {
				ev.Barrier = r.barrierDone(uint32(ev.Barrier.ID))
				if ev.Barrier == nil {
					continue
				}
			}
			if !r.send(ev) {
				return
			}
		}
	}
}

// barrierDone takes the barrier acknowledged with sequence number seq off
// the pending list and returns it with its full ID; nil for an
// acknowledgement that matches none.
func (r *run) barrierDone(seq uint32) *Barrier {
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	s := r.sub
	for i, id := range s.pending {
		if uint32(id) == seq {
			// Acknowledgements come in order: none before this one is
			// still coming.
			s.pending = s.pending[i+1:]
			return &Barrier{ID: id}
		}
	}
	return nil
}

// send delivers ev unless ctx ends first.
func (r *run) send(ev Event) bool {
	select {
	case r.out <- ev:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// lost handles the end of the subscription: its channel is closed, so its
// goroutines are gone. It delivers the barriers still pending, then
// renews the subscription; false if ctx ended meanwhile.
func (r *run) lost() bool {
	s := r.sub
	r.sub = nil
	r.w.mu.Lock()
	r.w.live = nil
	pending := s.pending
	s.pending = nil
	r.w.mu.Unlock()
	close(s.done)
	for _, id := range pending {
		if !r.send(Event{Barrier: &Barrier{ID: id}}) {
			return false
		}
	}
	r.reason = lostReason(r.w.opts.Kinds, s.lastErr())
	lived := r.w.clk.Since(s.since)
	r.w.log.Warn("nlutil: netlink subscription lost; renewing it", "kinds", r.w.opts.Kinds.String(), "reason", r.reason, "lived", lived)
	if errors.Is(r.reason, ErrOverflow) || lived >= r.w.opts.MaxResubscribeBackoff {
		// A healthy subscription, or one that overflowed: an overflow
		// signals load, not a broken socket, so renew it at once; backing
		// off would leave the consumer deaf through the storm. (Consumers
		// space out their re-lists themselves.)
		r.backoff = r.w.opts.ResubscribeBackoff
		r.subscribe()
		return true
	}
	// It died young: something is wrong, don't spin.
	r.scheduleRetry()
	return true
}

func lostReason(kinds Kinds, err error) error {
	return &lostError{kinds: kinds, overflow: err != nil && isENOBUFS(err), cause: err}
}

// lostError is a Resync.Reason: it matches ErrSubscriptionLost, and also
// ErrOverflow and unix.ENOBUFS after an overflow, and unwraps to the
// socket's error.
type lostError struct {
	kinds    Kinds
	overflow bool
	cause    error
}

func (e *lostError) Error() string {
	msg := "nlutil: " + e.kinds.String() + " subscription lost"
	if e.overflow {
		msg += ": kernel dropped events, receive buffer full (ENOBUFS)"
	}
	if e.cause == nil {
		return msg + ": event channel closed"
	}
	return msg + ": " + e.cause.Error()
}

func (e *lostError) Is(target error) bool {
	return target == ErrSubscriptionLost || e.overflow && (target == ErrOverflow || target == unix.ENOBUFS)
}

func (e *lostError) Unwrap() error { return e.cause }

// isENOBUFS recognises ENOBUFS also in errors that format the errno into
// their message instead of wrapping it.
func isENOBUFS(err error) bool {
	return errors.Is(err, unix.ENOBUFS) || strings.Contains(err.Error(), unix.ENOBUFS.Error())
}

// subscribe tries to subscribe once, and sends a Resync if it succeeded,
// an Err otherwise, and then schedules a retry.
func (r *run) subscribe() {
	s, err := r.start()
	if err != nil {
		r.w.log.Warn("nlutil: netlink subscribe failed; will retry", "kinds", r.w.opts.Kinds.String(), "err", err)
		if r.send(Event{Err: fmt.Errorf("%w: %s: %w", ErrSubscribe, r.w.opts.Kinds, err)}) {
			r.scheduleRetry()
		}
		return
	}
	r.sub = s
	r.w.mu.Lock()
	r.w.live = s
	r.w.mu.Unlock()
	reason := r.reason
	r.reason = nil
	r.send(Event{Resync: &Resync{Kinds: r.w.opts.Kinds, Reason: reason}})
}

// start makes one subscription, falling back from SO_RCVBUFFORCE to
// SO_RCVBUF when the process lacks CAP_NET_ADMIN.
func (r *run) start() (*liveSub, error) {
	s, err := r.try()
	if err != nil && r.force && errors.Is(err, unix.EPERM) {
		r.w.log.Warn("nlutil: no permission to force the netlink receive buffer size; using SO_RCVBUF, capped by net.core.rmem_max",
			"size", r.w.opts.ReceiveBufferSize)
		r.force = false
		s, err = r.try()
	}
	return s, err
}

func (r *run) try() (*liveSub, error) {
	s := &liveSub{done: make(chan struct{}), since: r.w.clk.Now()}
	cfg := subConfig{namespace: r.w.opts.Namespace, rcvbuf: r.w.opts.ReceiveBufferSize, force: r.force}
	sub, err := r.w.subscribe(r.w.opts.Kinds, s.done, cfg, s.onErr(r.w.log))
	if err != nil {
		close(s.done) // releases whatever the attempt left behind
		return nil, err
	}
	s.subscription = sub
	return s, nil
}

func (r *run) scheduleRetry() {
	if r.retry != nil {
		return
	}
	r.retry = r.w.clk.NewTimer(r.backoff)
	r.backoff = min(2*r.backoff, r.w.opts.MaxResubscribeBackoff)
}

// shutdown closes the subscription and waits until its goroutines have
// finished, discarding what they still deliver.
func (r *run) shutdown() {
	if r.retry != nil {
		r.retry.Stop()
		r.retry = nil
	}
	r.w.mu.Lock()
	r.w.live = nil
	r.w.mu.Unlock()
	if s := r.sub; s != nil {
		close(s.done)
		for range s.events {
		}
		r.sub = nil
	}
}
