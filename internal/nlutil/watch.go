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
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kinds is a set of rtnetlink event kinds to watch.
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
	// DefaultReceiveBufferSize.
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
	// Link is a link change.
	Link *netlink.LinkUpdate
	// Addr is an address change.
	Addr *netlink.AddrUpdate
	// Route is a route change.
	Route *netlink.RouteUpdate
	// Resync says that subscriptions were (re)established: list the kernel
	// state of Resync.Kinds now.
	Resync *Resync
	// Err reports a failed attempt to subscribe (wrapping ErrSubscribe);
	// the Watcher retries with backoff and sends a Resync once it
	// succeeds.
	Err error
}

// Resync tells the consumer that the subscriptions for Kinds are live and
// that it must now list those kinds (with LinkList, AddrList, …) and diff
// the result against what it knows. The subscription is made before the
// Resync is sent, so nothing that happens after the listing is missed;
// events that follow may repeat changes the listing already shows, so apply
// them idempotently.
type Resync struct {
	// Kinds are the subscriptions that were (re)established.
	Kinds Kinds
	// Reason is nil for the first subscription. After a loss it says why
	// the previous subscription ended: it wraps ErrSubscriptionLost, and
	// also ErrOverflow and unix.ENOBUFS when the kernel dropped events.
	Reason error
}

// Watcher delivers rtnetlink events for one network namespace as a single
// stream, and never goes silently dead: a subscription that ends (ENOBUFS
// after a burst, a socket error, a closed channel) is renewed and announced
// with a Resync so the consumer re-lists; a subscription that cannot be
// made is retried with backoff and each failure is reported on the stream.
type Watcher struct {
	opts      WatchOptions
	log       *slog.Logger
	clk       clock.Clock
	subscribe subscribeFunc // the kernel; tests replace it
	started   atomic.Bool
}

// subConfig is what a subscription needs from the options.
type subConfig struct {
	namespace *netns.NsHandle
	rcvbuf    int
	force     bool
}

// subscribeFunc starts one subscription of a single kind. It returns a
// channel of events that it closes when the subscription has ended and
// released everything it started: on its own after a failure (having called
// onErr with the cause first), or after done is closed. onErr may also be
// called for errors that do not end the subscription.
type subscribeFunc func(kind Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (<-chan Event, error)

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
// first event for each kind is a Resync (or an Err if subscribing failed).
// The stream must be read: while it is not, the kernel buffers events and,
// once its buffer is full, drops them, which the Watcher reports with a
// Resync whose Reason wraps ErrOverflow.
//
// When ctx ends, every subscription is closed and the channel is closed
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

// run is the state of a started Watcher, owned by its loop goroutine.
type run struct {
	w   *Watcher
	ctx context.Context
	out chan Event

	subs    [len(kindNames)]*liveSub
	pending Kinds           // kinds to (re)subscribe
	reasons map[Kinds]error // why each pending kind was lost; nil at start

	retry   clock.Timer // armed while pending kinds wait for a retry
	backoff time.Duration
	force   bool // use SO_RCVBUFFORCE
}

// liveSub is one established subscription.
type liveSub struct {
	kind   Kinds
	events <-chan Event
	done   chan struct{}
	since  time.Time
	lastMu sync.Mutex
	last   error // last error reported by netlink's callback
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
		log.Warn("nlutil: netlink subscription error", "kind", s.kind.String(), "err", err)
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
	r.pending = r.w.opts.Kinds
	r.reasons = map[Kinds]error{}
	r.subscribePending()
	for {
		var retryC <-chan time.Time
		if r.retry != nil {
			retryC = r.retry.C()
		}
		var ev Event
		var ok bool
		var from int
		select {
		case <-r.ctx.Done():
			return
		case <-retryC:
			r.retry = nil
			r.subscribePending()
			continue
		case ev, ok = <-r.recv(0):
			from = 0
		case ev, ok = <-r.recv(1):
			from = 1
		case ev, ok = <-r.recv(2):
			from = 2
		}
		if ok {
			if !r.send(ev) {
				return
			}
			continue
		}
		r.lost(from)
	}
}

// recv returns the events channel of kind index i, or nil.
func (r *run) recv(i int) <-chan Event {
	if s := r.subs[i]; s != nil {
		return s.events
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

// lost handles the end of subscription i: its channel is closed, so its
// goroutines are gone; close done to release the socket, then renew it.
func (r *run) lost(i int) {
	s := r.subs[i]
	r.subs[i] = nil
	close(s.done)
	reason := lostReason(s.kind, s.lastErr())
	lived := r.w.clk.Since(s.since)
	r.w.log.Warn("nlutil: netlink subscription lost; renewing it", "kind", s.kind.String(), "reason", reason, "lived", lived)
	r.pending |= s.kind
	r.reasons[s.kind] = reason
	overflow := errors.Is(reason, ErrOverflow)
	if (overflow || lived >= r.w.opts.MaxResubscribeBackoff) && r.retry == nil {
		// A healthy subscription, or one that overflowed: an overflow
		// signals load, not a broken socket, so renew it at once; backing
		// off would leave the consumer deaf through the storm. (Consumers
		// space out their re-lists themselves.)
		r.backoff = r.w.opts.ResubscribeBackoff
		r.subscribePending()
		return
	}
	// It died young: something is wrong, don't spin.
	r.scheduleRetry()
}

func lostReason(kind Kinds, err error) error {
	return &lostError{kind: kind, overflow: err != nil && isENOBUFS(err), cause: err}
}

// lostError is a Resync.Reason: it matches ErrSubscriptionLost, and also
// ErrOverflow and unix.ENOBUFS after an overflow, and unwraps to netlink's
// error.
type lostError struct {
	kind     Kinds
	overflow bool
	cause    error
}

func (e *lostError) Error() string {
	msg := "nlutil: " + e.kind.String() + " subscription lost"
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

// isENOBUFS recognises ENOBUFS also in netlink's callback errors, which
// format the errno into their message instead of wrapping it.
func isENOBUFS(err error) bool {
	return errors.Is(err, unix.ENOBUFS) || strings.Contains(err.Error(), unix.ENOBUFS.Error())
}

// subscribePending tries every pending kind once, sends a Resync for those
// that succeeded and an Err for each failure, and schedules a retry if any
// is left.
func (r *run) subscribePending() {
	var ok Kinds
	var reasons []error
	for i := range kindNames {
		kind := Kinds(1) << i
		if r.pending&kind == 0 {
			continue
		}
		s, err := r.start(kind)
		if err != nil {
			r.w.log.Warn("nlutil: netlink subscribe failed; will retry", "kind", kind.String(), "err", err)
			if !r.send(Event{Err: fmt.Errorf("%w: %s: %w", ErrSubscribe, kind, err)}) {
				// ctx ended; the loop shuts down.
				return
			}
			continue
		}
		r.subs[i] = s
		r.pending &^= kind
		ok |= kind
		if reason := r.reasons[kind]; reason != nil {
			reasons = append(reasons, reason)
		}
		delete(r.reasons, kind)
	}
	if ok != 0 {
		if !r.send(Event{Resync: &Resync{Kinds: ok, Reason: errors.Join(reasons...)}}) {
			return
		}
	}
	if r.pending != 0 {
		r.scheduleRetry()
	}
}

// start makes one subscription, falling back from SO_RCVBUFFORCE to
// SO_RCVBUF when the process lacks CAP_NET_ADMIN.
func (r *run) start(kind Kinds) (*liveSub, error) {
	s, err := r.try(kind)
	if err != nil && r.force && errors.Is(err, unix.EPERM) {
		r.w.log.Warn("nlutil: no permission to force the netlink receive buffer size; using SO_RCVBUF, capped by net.core.rmem_max",
			"kind", kind.String(), "size", r.w.opts.ReceiveBufferSize)
		r.force = false
		s, err = r.try(kind)
	}
	return s, err
}

func (r *run) try(kind Kinds) (*liveSub, error) {
	s := &liveSub{kind: kind, done: make(chan struct{}), since: r.w.clk.Now()}
	cfg := subConfig{namespace: r.w.opts.Namespace, rcvbuf: r.w.opts.ReceiveBufferSize, force: r.force}
	events, err := r.w.subscribe(kind, s.done, cfg, s.onErr(r.w.log))
	if err != nil {
		close(s.done) // releases whatever the attempt left behind
		return nil, err
	}
	s.events = events
	return s, nil
}

func (r *run) scheduleRetry() {
	if r.retry != nil {
		return
	}
	r.retry = r.w.clk.NewTimer(r.backoff)
	r.backoff = min(2*r.backoff, r.w.opts.MaxResubscribeBackoff)
}

// shutdown closes every subscription and waits until their goroutines have
// finished, discarding what they still deliver.
func (r *run) shutdown() {
	if r.retry != nil {
		r.retry.Stop()
		r.retry = nil
	}
	for _, s := range r.subs {
		if s != nil {
			close(s.done)
		}
	}
	for i, s := range r.subs {
		if s != nil {
			for range s.events {
			}
			r.subs[i] = nil
		}
	}
}

// netlinkSubscribe is the real subscribeFunc.
func netlinkSubscribe(kind Kinds, done <-chan struct{}, cfg subConfig, onErr func(error)) (<-chan Event, error) {
	switch kind {
	case Links:
		ch := make(chan netlink.LinkUpdate, subChanSize)
		err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
			Namespace: cfg.namespace, ErrorCallback: onErr,
			ReceiveBufferSize: cfg.rcvbuf, ReceiveBufferForceSize: cfg.force,
		})
		return forward(ch, done, err, wrapLink)
	case Addrs:
		ch := make(chan netlink.AddrUpdate, subChanSize)
		err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{
			Namespace: cfg.namespace, ErrorCallback: onErr,
			ReceiveBufferSize: cfg.rcvbuf, ReceiveBufferForceSize: cfg.force,
		})
		return forward(ch, done, err, func(u *netlink.AddrUpdate) (Event, bool) { return Event{Addr: u}, true })
	case Routes:
		ch := make(chan netlink.RouteUpdate, subChanSize)
		err := netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{
			Namespace: cfg.namespace, ErrorCallback: onErr,
			ReceiveBufferSize: cfg.rcvbuf, ReceiveBufferForceSize: cfg.force,
		})
		return forward(ch, done, err, func(u *netlink.RouteUpdate) (Event, bool) { return Event{Route: u}, true })
	}
	return nil, fmt.Errorf("%w: unknown kind %s", ErrInvalidArgument, kind)
}

// subChanSize is the buffer between netlink's receive goroutine and ours.
const subChanSize = 16

// wrapLink wraps a link update, except one of the AF_BRIDGE family: the
// kernel sends those to the link group about a bridge port's state, and
// its RTM_DELLINK when a port leaves its bridge means nothing about the
// link itself, which a consumer would take for a deletion.
func wrapLink(u *netlink.LinkUpdate) (Event, bool) {
	if u.Family == unix.AF_BRIDGE {
		return Event{}, false
	}
	return Event{Link: u}, true
}

// forward turns netlink's typed channel into an Event channel, leaving out
// the updates wrap refuses. netlink's goroutine closes ch once its socket
// fails or is closed (done), and blocks on every send, so ch is drained to
// the end; after done, updates are dropped.
//
// netlink v1.3.1 starts a goroutine that closes the socket when done is
// closed before it can fail on a later step; on error the caller closes
// done to end it.
func forward[T any](ch <-chan T, done <-chan struct{}, err error, wrap func(*T) (Event, bool)) (<-chan Event, error) {
	if err != nil {
		return nil, err
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		for u := range ch {
			ev, ok := wrap(&u)
			if !ok {
				continue
			}
			select {
			case out <- ev:
			case <-done:
			}
		}
	}()
	return out, nil
}
