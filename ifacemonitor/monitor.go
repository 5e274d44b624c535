//go:build linux

package ifacemonitor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// DefaultResyncInterval is the period of the full re-list that backs up
// the subscriptions when Options.ResyncInterval is zero.
const DefaultResyncInterval = 90 * time.Second

// Re-list retry backoff: after a failed dump the monitor waits
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

// Options configure a Monitor.
type Options struct {
	// Handle is the netlink handle the monitor lists links, addresses and
	// routes with, bound to the namespace to watch (netlink.NewHandleAt).
	// Required unless Source is set: there is no fallback to the process's
	// namespace. The monitor never closes it; the caller keeps it open
	// while the monitor runs.
	Handle *netlink.Handle
	// Namespace is the same network namespace as an open file descriptor
	// (netns.GetFromName, netns.Get for the caller's own); the
	// subscriptions are made in it. Required unless Source is set; the
	// caller keeps it open while the monitor runs.
	Namespace netns.NsHandle

	// Source, when set, replaces the kernel: the monitor takes its events
	// and listings from it (ifacemonitorfake.Kernel in tests), and Handle,
	// Namespace and ReceiveBufferSize must be left unset. Nil means the
	// kernel, through Handle and Namespace.
	Source Source

	// Include, if not empty, limits the reported interfaces to those whose
	// name matches at least one of these regular expressions.
	Include []string
	// Exclude drops interfaces whose name matches any of these regular
	// expressions (for example `^kube-ipvs0$`). An invalid expression in
	// either list is an error in New.
	Exclude []string

	// WatchRoutes also mirrors the namespace's routes (all tables, IPv4 and
	// IPv6) through OnRoute. Routes are not filtered by Include/Exclude.
	WatchRoutes bool

	// ResyncInterval is the period of a full re-list that repairs anything
	// the subscriptions missed without noticing. Zero means
	// DefaultResyncInterval; negative disables it.
	ResyncInterval time.Duration
	// FlapDampingWindow, when positive, holds back the report of an
	// interface going down (up to down) for this long: if it comes back up
	// within the window, neither change is reported. Zero disables
	// damping; negative is an error.
	FlapDampingWindow time.Duration
	// ReceiveBufferSize is the receive buffer of each subscription socket,
	// in bytes, forced past net.core.rmem_max when the process has
	// CAP_NET_ADMIN. Zero means nlutil.DefaultReceiveBufferSize (8 MiB);
	// negative is an error.
	ReceiveBufferSize int

	// Logger receives warnings (lost subscriptions, failed dumps, callback
	// panics) and debug messages; nil discards them.
	Logger *slog.Logger
	// Clock drives the periodic re-list, the re-list retries, the flap
	// damping window and the subscription retries; nil means clock.Real().
	Clock clock.Clock

	// OnLinkState is called for every new interface, every change of an
	// interface's state, MTU, type or name, and every interface that is
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
// Create it with New, run it with Start.
type Monitor struct {
	opts    Options
	filter  ifname.Filter
	resync  time.Duration // <= 0: off
	damping time.Duration
	kinds   nlutil.Kinds
	clk     clock.Clock
	log     *slog.Logger
	src     source // the kernel, when pub is nil
	pub     Source // Options.Source

	started atomic.Bool
	done    chan struct{}

	mu        sync.Mutex // guards the reported view and the stats
	rep       map[string]*Interface
	repByIdx  map[int]string
	repRoutes map[RouteKey]Route
	stats     Stats
}

// New validates opts and returns a Monitor. It does no I/O and starts no
// goroutines. Bad options return an error wrapping ErrInvalidOptions.
func New(opts Options) (*Monitor, error) {
	kinds := nlutil.Links | nlutil.Addrs
	if opts.WatchRoutes {
		kinds |= nlutil.Routes
	}
	if opts.Source != nil {
		if opts.Handle != nil || opts.Namespace > 0 || opts.ReceiveBufferSize != 0 {
			return nil, fmt.Errorf("%w: Source replaces the kernel: Handle, Namespace and ReceiveBufferSize must be unset", ErrInvalidOptions)
		}
		m, err := newMonitor(opts, kinds)
		if err != nil {
			return nil, err
		}
		m.pub = opts.Source
		return m, nil
	}
	if opts.Handle == nil {
		return nil, fmt.Errorf("%w: Handle is required (a netlink handle bound to the namespace to watch)", ErrInvalidOptions)
	}
	// The zero NsHandle is file descriptor 0 (stdin), never a namespace
	// the caller meant.
	if opts.Namespace <= 0 {
		return nil, fmt.Errorf("%w: Namespace is required (an open namespace handle, e.g. netns.Get() for the current one), got %d",
			ErrInvalidOptions, int(opts.Namespace))
	}
	m, err := newMonitor(opts, kinds)
	if err != nil {
		return nil, err
	}
	ns := opts.Namespace
	w, err := nlutil.NewWatcher(nlutil.WatchOptions{
		Kinds:             kinds,
		Namespace:         &ns,
		ReceiveBufferSize: opts.ReceiveBufferSize,
		// nlutil renews an overflowed subscription at once (an overflow is
		// load, not a broken socket); re-lists are spaced by the monitor.
		Logger: m.log,
		Clock:  m.clk,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m.src = &netlinkSource{h: opts.Handle, w: w}
	return m, nil
}

// newMonitor validates everything but the kernel-facing options and builds
// a Monitor without a source.
func newMonitor(opts Options, kinds nlutil.Kinds) (*Monitor, error) {
	if opts.FlapDampingWindow < 0 {
		return nil, fmt.Errorf("%w: negative FlapDampingWindow %v", ErrInvalidOptions, opts.FlapDampingWindow)
	}
	if opts.ReceiveBufferSize < 0 {
		return nil, fmt.Errorf("%w: negative ReceiveBufferSize %d", ErrInvalidOptions, opts.ReceiveBufferSize)
	}
	filter, err := ifname.NewFilter(opts.Include, opts.Exclude)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
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
		filter:    filter,
		resync:    resync,
		damping:   opts.FlapDampingWindow,
		kinds:     kinds,
		clk:       clock.OrReal(opts.Clock),
		log:       log,
		done:      make(chan struct{}),
		rep:       map[string]*Interface{},
		repByIdx:  map[int]string{},
		repRoutes: map[RouteKey]Route{},
	}, nil
}

// Matches reports whether an interface called name is reported (it matches
// Include, if any, and not Exclude).
func (m *Monitor) Matches(name string) bool { return m.filter.Matches(name) }

// Start subscribes to the namespace's events and starts the goroutine that
// lists the kernel, reports what exists, calls OnInSync, and from then on
// reports every change. It returns at once; failures after that (a dump
// that fails, a subscription that cannot be renewed) are logged, counted
// in Stats and retried for as long as ctx lives. All callbacks are called
// from that one goroutine, one at a time, in order. A nil ctx is taken as
// context.Background(). A failed subscription returns an error wrapping
// ErrSubscribe and the cause.
//
// When ctx ends the monitor stops: no callback is called after the one in
// progress returns, every socket is closed, and Done is closed once every
// goroutine the monitor started has ended. A Monitor can be started once;
// a second Start returns ErrAlreadyStarted.
func (m *Monitor) Start(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !m.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	var (
		events <-chan nlutil.Event
		pub    <-chan Event
		err    error
	)
	if m.pub != nil {
		pub, err = m.pub.Subscribe(ctx)
		if err == nil && pub == nil {
			err = errors.New("the Source returned no channel")
		}
	} else {
		events, err = m.src.subscribe(ctx)
	}
	if err != nil {
		close(m.done)
		return fmt.Errorf("%w: %w", ErrSubscribe, err)
	}
	r := newRun(m, ctx, events, pub)
	go r.loop()
	return nil
}

// Done returns a channel that is closed when a started monitor has stopped
// and all its goroutines have ended. It is never closed for a monitor that
// was not started.
func (m *Monitor) Done() <-chan struct{} { return m.done }

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
		keys := slices.SortedFunc(maps.Keys(m.repRoutes), CompareRouteKeys)
		v.Routes = make([]Route, 0, len(keys))
		for _, k := range keys {
			r := m.repRoutes[k]
			r.Nexthops = slices.Clone(r.Nexthops)
			v.Routes = append(v.Routes, r)
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
