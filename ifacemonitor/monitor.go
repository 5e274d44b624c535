package ifacemonitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultResyncInterval is the period of the full re-list that backs up
// the subscription when Options.ResyncInterval is zero.
const DefaultResyncInterval = 90 * time.Second

// Re-list retry backoff: after a failed listing the monitor waits
// relistBackoffMin, doubling up to relistBackoffMax, and starts again from
// relistBackoffMin after a success.
const (
	relistBackoffMin = 100 * time.Millisecond
	relistBackoffMax = 5 * time.Second
)

// relistSpacing bounds the time spent re-listing: the next re-list starts
// no earlier than relistSpacing times the last one's duration after its
// end, so back-to-back re-lists (an overflow storm) take at most a third of
// the monitor's time. The wait is capped at maxRelistSpacing, so that one
// slow dump (a starved CPU) cannot keep the view stale for long.
const (
	relistSpacing    = 2
	maxRelistSpacing = time.Second
)

// maxBatch caps how many queued events the monitor applies before it
// reports what changed.
const maxBatch = 1024

// Kernel is what a Monitor needs of one network namespace: its event
// stream, and listings of its links, addresses and (with
// Options.WatchRoutes) routes. *kernel.Namespace implements it for a real
// namespace, *kernelfake.Namespace for tests. The monitor only reads: it
// calls Subscribe, Links, Addrs and DumpRoutes, never a method that
// changes the kernel.
type Kernel interface {
	kernel.Events
	kernel.Links
	kernel.Addrs
	kernel.Routes
}

// Options configure a Monitor.
type Options struct {
	// Kernel is the network namespace to watch: a *kernel.Namespace
	// (kernel.Open, kernel.OpenCurrent) or, in tests, a
	// *kernelfake.Namespace. Required: there is no fallback to the
	// process's namespace. The monitor never closes it; the caller keeps it
	// open while the monitor runs.
	Kernel Kernel

	// Include, if not empty, limits the reported interfaces to those whose
	// name matches at least one of these regular expressions; empty
	// includes every name.
	Include []string
	// Exclude drops interfaces whose name matches any of these regular
	// expressions (for example `^kube-ipvs0$`); empty excludes nothing.
	// An invalid expression in either list is an error in New. The mtu
	// package's Detector reads the two lists the same way.
	Exclude []string

	// WatchRoutes also mirrors the namespace's routes (all tables, IPv4 and
	// IPv6) through OnRoute. Routes are not filtered by Include/Exclude.
	WatchRoutes bool

	// ReceiveBufferSize is the receive buffer of the subscription's socket
	// in bytes (kernel.SubscribeOptions): how many events the kernel holds
	// while the monitor is busy before it drops them, which costs a
	// re-list. Busy nodes raise it. 0 means kernel.DefaultReceiveBufferSize
	// (8 MiB); negative or above kernel.MaxReceiveBufferSize is an error.
	ReceiveBufferSize int

	// ResyncInterval is the period of a full re-list that repairs anything
	// the subscription missed without noticing. Zero means
	// DefaultResyncInterval; negative disables it.
	ResyncInterval time.Duration
	// FlapDampingWindow, when positive, holds back the report of an
	// interface going down (up to down) for this long: if it comes back up
	// within the window, neither change is reported. Zero disables
	// damping; negative is an error.
	FlapDampingWindow time.Duration

	// Logger receives warnings (lost subscriptions, failed listings,
	// callback panics) and debug messages; nil discards them.
	Logger *slog.Logger
	// Clock drives the periodic re-list, the re-list retries and the flap
	// damping window; nil means clock.Real().
	Clock clock.Clock

	// OnLinkState is called for every new interface, every change of an
	// interface's state, MTU, kind or name, and every interface that is
	// gone. May be nil.
	OnLinkState func(LinkUpdate)
	// OnAddrs is called with the full, sorted set of an interface's
	// addresses whenever it changes, and with nil when the interface is
	// gone (or renamed: the set then moves to the new name). The slice
	// belongs to the callee. May be nil.
	OnAddrs func(name string, addrs []netip.Prefix)
	// OnRoute is called for every new, changed or removed route when
	// WatchRoutes is set. May be nil.
	OnRoute func(RouteUpdate)
	// OnInSync is called once, after the first complete listing of the
	// kernel has been reported through the other callbacks. May be nil.
	OnInSync func()
}

// Monitor watches the links and addresses (and optionally routes) of one
// network namespace and reports them through the callbacks of its Options.
// Create it with New, run it with Run.
type Monitor struct {
	opts    Options
	k       Kernel
	filter  ifname.Filter
	resync  time.Duration // <= 0: off
	damping time.Duration
	kinds   kernel.EventKinds
	clk     clock.Clock
	log     *slog.Logger

	started atomic.Bool

	mu        sync.Mutex // guards the reported view and the stats
	rep       map[string]*Interface
	repByIdx  map[int]string
	repRoutes map[routeKey]kernel.Route
	stats     Stats
}

// New validates opts and returns a Monitor. It does no I/O and starts no
// goroutines. Bad options return an error wrapping ErrInvalidOptions.
func New(opts Options) (*Monitor, error) {
	if isNil(opts.Kernel) {
		return nil, fmt.Errorf("%w: Kernel is required (the namespace to watch: kernel.Open, kernel.OpenCurrent, or a kernelfake.Namespace)", ErrInvalidOptions)
	}
	if opts.FlapDampingWindow < 0 {
		return nil, fmt.Errorf("%w: negative FlapDampingWindow %v", ErrInvalidOptions, opts.FlapDampingWindow)
	}
	filter, err := ifname.NewFilter(opts.Include, opts.Exclude)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if _, err := kernel.CheckSubscribeOptions(kernel.SubscribeOptions{ReceiveBufferSize: opts.ReceiveBufferSize}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	kinds := kernel.EventLinks | kernel.EventAddrs
	if opts.WatchRoutes {
		kinds |= kernel.EventRoutes
	}
	resync := opts.ResyncInterval
	if resync == 0 {
		resync = DefaultResyncInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Include = slices.Clone(opts.Include)
	opts.Exclude = slices.Clone(opts.Exclude)
	return &Monitor{
		opts:      opts,
		k:         opts.Kernel,
		filter:    filter,
		resync:    resync,
		damping:   opts.FlapDampingWindow,
		kinds:     kinds,
		clk:       clock.OrReal(opts.Clock),
		log:       log,
		rep:       map[string]*Interface{},
		repByIdx:  map[int]string{},
		repRoutes: map[routeKey]kernel.Route{},
	}, nil
}

// isNil reports whether k is nil or a nil pointer, which would fail on the
// first call instead of in New.
func isNil(k Kernel) bool {
	if k == nil {
		return true
	}
	v := reflect.ValueOf(k)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Matches reports whether an interface called name is reported (it matches
// Include, if any, and not Exclude).
func (m *Monitor) Matches(name string) bool { return m.filter.Matches(name) }

// Run subscribes to the namespace's events, lists what exists, reports it
// through the callbacks, calls OnInSync, and from then on reports every
// change, until ctx ends. It blocks: start it in a goroutine, and use
// OnInSync (or Stats().InSync) to learn when the first listing has been
// reported:
//
//	inSync := make(chan struct{})
//	opts.OnInSync = func() { close(inSync) }
//	m, err := ifacemonitor.New(opts)
//	…
//	errc := make(chan error, 1)
//	go func() { errc <- m.Run(ctx) }()
//	<-inSync // or give up when errc delivers first
//
// All callbacks are called from Run's goroutine, one at a time, in order.
// Failures after the subscription (a listing that fails, a subscription
// the Kernel has to renew) are logged, counted in Stats and retried for as
// long as ctx lives. A nil ctx is taken as context.Background().
//
// When ctx ends Run returns nil, once no callback is running any more and
// every goroutine it started (the Kernel's subscription included) has
// ended. It returns an error wrapping ErrSubscribe when the subscription
// fails or its stream ends first (the namespace was closed). A Monitor
// runs once: a second Run returns ErrAlreadyStarted.
func (m *Monitor) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !m.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var barrier kernel.BarrierFunc
	events, err := m.k.Subscribe(ctx, m.kinds, kernel.SubscribeOptions{
		ReceiveBufferSize: m.opts.ReceiveBufferSize,
		Barriers:          func(f kernel.BarrierFunc) { barrier = f },
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSubscribe, err)
	}
	if events == nil {
		return fmt.Errorf("%w: the Kernel returned no event stream", ErrSubscribe)
	}
	r := newRun(m, ctx, events)
	r.barrier = barrier
	err = r.loop()
	cancel()
	for range events { // closed once the subscription has stopped
	}
	return err
}

// Snapshot returns a copy of the monitor's reported view: every interface
// and route the callbacks have reported and not reported gone. Safe to
// call from any goroutine, callbacks included.
func (m *Monitor) Snapshot() View {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := View{Interfaces: make([]Interface, 0, len(m.rep))}
	for _, i := range m.rep {
		c := *i
		c.Addrs = slices.Clone(i.Addrs)
		v.Interfaces = append(v.Interfaces, c)
	}
	slices.SortFunc(v.Interfaces, func(a, b Interface) int { return cmp.Compare(a.Name, b.Name) })
	if len(m.repRoutes) > 0 {
		keys := slices.SortedFunc(maps.Keys(m.repRoutes), compareRouteKeys)
		v.Routes = make([]kernel.Route, 0, len(keys))
		for _, k := range keys {
			v.Routes = append(v.Routes, cloneRoute(m.repRoutes[k]))
		}
	}
	return v
}

// Stats returns the monitor's counters. Safe to call from any goroutine.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

func (m *Monitor) updateStats(f func(*Stats)) {
	m.mu.Lock()
	f(&m.stats)
	m.mu.Unlock()
}

// errStreamEnded is Run's error when the Kernel closes the stream before
// ctx ends.
var errStreamEnded = errors.New("the event stream ended before the context")
