package dataplane

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// Loop batches messages for its managers and applies its drivers in phase
// order. Build it with New (the zero Loop is not usable), register managers
// and drivers, then call Run.
//
// Send, TrySend, DatastoreInSync, InterfacesInSync and Health are safe to
// call from any goroutine, before, during and after Run.
type Loop struct {
	opts Options
	log  *slog.Logger
	clk  clock.Clock
	q    *queue

	regMu    sync.Mutex
	started  bool
	managers []*managerEntry
	drivers  []*driverEntry

	datastoreMarked  atomic.Bool
	interfacesMarked atomic.Bool

	healthMu sync.Mutex
	health   Health

	wakeC chan struct{} // holds a token while a Wake is pending

	// observers are the managers and drivers that are InterfaceObservers,
	// once each; set under regMu, read-only once Run has started.
	observers []InterfaceObserver

	active  atomic.Bool   // what SetActive asked for last
	activeC chan struct{} // holds a token while a SetActive is pending

	// Set by tests only. testHookIdle is called from the loop's goroutine
	// each time it is about to wait for an event, with whether no event is
	// waiting and the last value taken from testPoke, a channel that wakes
	// the loop.
	testHookIdle func(quiet bool, poke uint64)
	testPoke     chan uint64
}

type managerEntry struct {
	m        Manager
	name     string
	resyncer Resyncer // nil unless m implements Resyncer
	failed   bool     // in the current pass
	failures int      // consecutive passes in which it failed
}

type driverEntry struct {
	d        Driver
	name     string
	phase    Phase
	deleter  DeletionApplier // nil unless d implements DeletionApplier
	resync   time.Duration   // <= 0: no periodic resync
	failed   bool            // failed as a whole in the current pass
	skipped  bool            // skipped in the current pass: backing off
	failures int             // consecutive applies in which it failed
	retryAt  time.Time       // end of its backoff; zero when not failing
	objects  int             // objects its latest applies reported as failed
	stats    StatsReporter   // nil unless d implements StatsReporter
}

// New returns a Loop configured by opts. It validates opts (zero fields take
// their defaults) and does no I/O and starts no goroutines.
func New(opts Options) (*Loop, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Loop{opts: o, log: o.Logger, clk: o.Clock, q: newQueue(o.QueueSize),
		wakeC: make(chan struct{}, 1), activeC: make(chan struct{}, 1)}
	l.active.Store(!o.Inactive)
	return l, nil
}

// AddManager registers m. Managers see every message in registration order,
// and their CompleteDeferredWork runs in that order too, so register a
// manager after those whose results it depends on. It fails after Run was
// called.
func (l *Loop) AddManager(m Manager) error {
	if m == nil {
		return ErrNilManager
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if l.started {
		return ErrAlreadyStarted
	}
	name := nameOf(m)
	for _, e := range l.managers {
		if sameObject(e.m, m) {
			return fmt.Errorf("%w: manager %s", ErrDuplicate, name)
		}
	}
	r, _ := m.(Resyncer)
	l.managers = append(l.managers, &managerEntry{m: m, name: name, resyncer: r})
	l.addObserver(m)
	return nil
}

// AddDriver registers d in the phase its Phase method returns (read once,
// now). A driver that also implements DeletionApplier is applied in two
// phases; register it once. It fails after Run was called, for a nil
// driver, an invalid phase or option, or a driver registered twice.
func (l *Loop) AddDriver(d Driver, opts ...DriverOption) error {
	if d == nil {
		return ErrNilDriver
	}
	var cfg driverConfig
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil DriverOption", ErrInvalidOptions)
		}
		if err := opt(&cfg); err != nil {
			return err
		}
	}
	if cfg.name == "" {
		cfg.name = nameOf(d)
	}
	phase, err := safePhase(d)
	if err != nil {
		return fmt.Errorf("dataplane: driver %s: Phase: %w", cfg.name, err)
	}
	if !phase.Valid() {
		return fmt.Errorf("%w: driver %s returned %v", ErrInvalidPhase, cfg.name, phase)
	}
	switch {
	case cfg.resync == 0:
		cfg.resync = l.opts.ResyncInterval
	case cfg.resync < 0:
		cfg.resync = -1
	}
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if l.started {
		return ErrAlreadyStarted
	}
	for _, e := range l.drivers {
		if sameObject(e.d, d) {
			return fmt.Errorf("%w: driver %s", ErrDuplicate, cfg.name)
		}
	}
	del, _ := d.(DeletionApplier)
	stats, _ := d.(StatsReporter)
	if w, ok := d.(Wakeable); ok {
		if err := safeDo(func() { w.SetWake(l.Wake) }); err != nil {
			return fmt.Errorf("dataplane: driver %s: SetWake: %w", cfg.name, err)
		}
	}
	l.drivers = append(l.drivers, &driverEntry{
		d: d, name: cfg.name, phase: phase, deleter: del, resync: cfg.resync, stats: stats,
	})
	l.addObserver(d)
	return nil
}

// Wake asks the loop for an apply pass, as a new message would (after the
// coalescing window, within the throttle, and only once both in-sync
// markers have arrived). Drivers that learn of work outside the loop call
// it, usually through Wakeable. It never blocks and may be called from any
// goroutine, before, during and after Run; wakes that arrive while one is
// pending merge into it.
func (l *Loop) Wake() {
	select {
	case l.wakeC <- struct{}{}:
	default:
	}
}

// SetActive makes the loop active (it applies its drivers and writes to the
// kernel) or inactive (a standby instance: managers get every message and
// run, but nothing is written). An agent that elects a leader calls it when
// it gains or loses leadership; no restart is needed either way.
//
// Becoming active, the loop queues a resync on every driver and on every
// manager that implements Resyncer, since another instance may have changed
// the kernel meanwhile, and runs an apply pass at once (once both in-sync
// markers have arrived). Becoming inactive takes effect after the pass in
// progress, if any: from then on no Apply, ApplyDeletions or
// CompleteDeferredWork of a Resyncer is called. Health.Active says when the
// loop has taken the change.
//
// It never blocks and may be called from any goroutine, before, during and
// after Run; calls that arrive while the loop is busy merge, and the last one
// wins.
func (l *Loop) SetActive(active bool) {
	l.active.Store(active)
	select {
	case l.activeC <- struct{}{}:
	default:
	}
}

// Active reports what SetActive (or Options.Inactive) asked for last.
// Health.Active reports what the loop is doing.
func (l *Loop) Active() bool { return l.active.Load() }

// Send queues msg for the managers, waiting while the queue is full. It
// returns ctx's error if ctx ends first, ErrStopped once Run has returned,
// and ErrNilMessage for a nil msg. Messages sent before Run are kept (up to
// Options.QueueSize) and delivered when it starts. Do not call Send from a
// manager, a driver or a callback: the loop would wait on itself.
func (l *Loop) Send(ctx context.Context, msg any) error {
	if msg == nil {
		return ErrNilMessage
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return l.q.push(ctx, msg)
}

// TrySend queues msg if there is room. It returns ErrQueueFull when the
// queue is full, ErrStopped once Run has returned, and ErrNilMessage for a
// nil msg. It never blocks.
func (l *Loop) TrySend(msg any) error {
	if msg == nil {
		return ErrNilMessage
	}
	_, err := l.q.tryPush(msg, false)
	return err
}

// DatastoreInSync tells the loop that the consumer has sent its complete
// first snapshot. The loop delivers a DatastoreInSync message to every
// manager after everything sent before this call, and applies nothing until
// both this and InterfacesInSync have been delivered. It never blocks; only
// the first call has an effect.
func (l *Loop) DatastoreInSync() {
	if l.datastoreMarked.CompareAndSwap(false, true) {
		_, _ = l.q.tryPush(DatastoreInSync{}, true)
	}
}

// InterfacesInSync tells the loop that the interface monitor has listed the
// kernel's interfaces. It works like DatastoreInSync, with the
// InterfacesInSync message.
func (l *Loop) InterfacesInSync() {
	if l.interfacesMarked.CompareAndSwap(false, true) {
		_, _ = l.q.tryPush(InterfacesInSync{}, true)
	}
}

// Health returns a snapshot of the loop's health.
func (l *Loop) Health() Health {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	return l.health
}

// Run runs the loop until ctx is done, then returns nil. It blocks; the only
// goroutines it starts are those that run a phase's drivers in parallel, and
// it waits for them, so nothing is left running when it returns. A pass in
// progress when ctx ends is waited for: drivers get ctx and should return
// promptly. A Loop runs once: calling Run again returns ErrAlreadyStarted.
func (l *Loop) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	l.regMu.Lock()
	if l.started {
		l.regMu.Unlock()
		return ErrAlreadyStarted
	}
	l.started = true
	r := newRunner(l, l.managers, l.drivers)
	l.regMu.Unlock()
	return r.run(ctx)
}

// updateHealth applies f to the health under its lock and returns a copy.
func (l *Loop) updateHealth(f func(*Health)) Health {
	l.healthMu.Lock()
	defer l.healthMu.Unlock()
	f(&l.health)
	return l.health
}

// nameOf returns x's Name, or its type when it has none.
func nameOf(x any) string {
	if n, ok := x.(Named); ok {
		if name, err := safeName(n); err == nil && name != "" {
			return name
		}
	}
	return fmt.Sprintf("%T", x)
}

// sameObject reports whether a and b are the same pointer. Values that are
// not pointers are never compared: comparing them could panic.
func sameObject(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Kind() != reflect.Pointer || va.Type() != vb.Type() {
		return false
	}
	return va.Pointer() == vb.Pointer()
}
