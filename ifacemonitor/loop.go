package ifacemonitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
)

// run is the state of a running Monitor, owned by Run's goroutine: the
// model of the kernel (every link, hidden ones included, with its
// addresses, and the routes) and the timers. The reported view lives in the
// Monitor, guarded by its mutex for Snapshot; only this goroutine writes
// it.
type run struct {
	m      *Monitor
	ctx    context.Context
	events <-chan kernel.Event
	model

	subscribed kernel.EventKinds // kinds whose subscription is live
	want       kernel.EventKinds // kinds to re-list
	listed     kernel.EventKinds // kinds listed at least once since subscribing

	// barrier places a barrier in the stream (nil if the Kernel has
	// none). Each re-list places one before it lists; the events of a
	// kind that come before the barrier of its last listing are older
	// than the listing, which already shows them, and are dropped.
	barrier  kernel.BarrierFunc
	staleTil map[kernel.EventKinds]uint64 // kind → barrier ID its events are stale until

	resyncT clock.Timer // periodic re-list; nil when off
	retryT  clock.Timer // armed after a failed re-list
	backoff time.Duration
	// relistAt is the earliest start of the next re-list: the last one's
	// end plus relistSpacing times its duration, at most maxRelistSpacing.
	relistAt time.Time
	dampT    clock.Timer // armed while a down report is held back
	dampAt   time.Time

	stats  Stats // published to the Monitor after every round
	inSync bool
}

func newRun(m *Monitor, ctx context.Context, events <-chan kernel.Event) *run {
	return &run{m: m, ctx: ctx, events: events, model: newModel(), backoff: relistBackoffMin, staleTil: map[kernel.EventKinds]uint64{}}
}

// loop runs until ctx ends (nil) or the stream does (an error): it takes an
// event or a timer, applies whatever else is already queued (up to
// maxBatch events), re-lists what needs it, then reports the differences.
func (r *run) loop() error {
	defer r.stopTimers()
	if r.m.resync > 0 {
		r.resyncT = r.m.clk.NewTimer(r.m.resync)
	}
	for {
		select {
		case <-r.ctx.Done():
			return nil
		case ev, ok := <-r.events:
			if !ok {
				return r.ended()
			}
			r.handle(&ev)
			if !r.drain() {
				return r.ended()
			}
		case <-timerC(r.retryT):
			r.retryT = nil
		case <-timerC(r.resyncT):
			r.stats.PeriodicRelists++
			r.want |= r.subscribed
			r.resyncT.Reset(r.m.resync) // a full re-list postpones it again
			r.m.log.Debug("ifacemonitor: periodic re-list")
		case <-timerC(r.dampT):
			r.dampT = nil
			r.dampDue(r.m.clk.Now())
		}
		r.relist()
		r.flush()
		r.publishStats()
	}
}

// ended is loop's result when the stream is closed: nil if ctx ended
// meanwhile, an error otherwise.
func (r *run) ended() error {
	if r.ctx.Err() != nil {
		return nil
	}
	r.m.log.Error("ifacemonitor: the event stream ended; stopping")
	return fmt.Errorf("%w: %w", ErrSubscribe, errStreamEnded)
}

func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func (r *run) stopTimers() {
	for _, t := range []clock.Timer{r.resyncT, r.retryT, r.dampT} {
		if t != nil {
			t.Stop()
		}
	}
}

// drain applies the events already queued, up to a batch; false if the
// stream ended.
func (r *run) drain() bool {
	for range maxBatch - 1 {
		select {
		case ev, ok := <-r.events:
			if !ok {
				return false
			}
			r.handle(&ev)
		default:
			return true
		}
	}
	return true
}

// handle applies one event to the model, unless a listing made after it
// already shows its change.
func (r *run) handle(ev *kernel.Event) {
	switch {
	case ev.Link != nil:
		if r.stale(kernel.EventLinks) {
			return
		}
		r.stats.Events++
		r.applyLinkEvent(ev.Link, r.m.clk.Now())
	case ev.Addr != nil:
		if r.stale(kernel.EventAddrs) {
			return
		}
		r.stats.Events++
		r.applyAddrEvent(ev.Addr)
	case ev.Route != nil:
		if r.m.kinds&kernel.EventRoutes != 0 && !r.stale(kernel.EventRoutes) {
			r.stats.Events++
			r.applyRouteEvent(ev.Route)
		}
	case ev.Barrier != nil:
		// Barriers come in order: every listing placed at or before this
		// one is now older than the events that follow.
		for k, id := range r.staleTil {
			if id <= ev.Barrier.ID {
				delete(r.staleTil, k)
			}
		}
	case ev.Resync != nil:
		r.stats.Resyncs++
		kinds := ev.Resync.Kinds & r.m.kinds
		if reason := ev.Resync.Reason; reason != nil {
			r.stats.SubscriptionLosses++
			if errors.Is(reason, kernel.ErrOverflow) {
				r.stats.Overflows++
			}
			r.m.log.Warn("ifacemonitor: subscription renewed after a loss; re-listing", "kinds", kindNames(kinds), "reason", reason)
		}
		r.subscribed |= kinds
		r.want |= kinds
	case ev.Err != nil:
		r.stats.SubscribeErrors++
		r.m.log.Warn("ifacemonitor: subscribing failed; retrying", "err", ev.Err)
	}
}

// stale reports (and counts) an event of kind that came before the
// barrier of the kind's last listing: the listing shows its change, or a
// later one, already.
func (r *run) stale(kind kernel.EventKinds) bool {
	if _, ok := r.staleTil[kind]; !ok {
		return false
	}
	r.stats.StaleEvents++
	return true
}

// kindNames names kinds for the log.
func kindNames(k kernel.EventKinds) string {
	s := ""
	for _, n := range []struct {
		k    kernel.EventKinds
		name string
	}{{kernel.EventLinks, "links"}, {kernel.EventAddrs, "addrs"}, {kernel.EventRoutes, "routes"}} {
		if k&n.k != 0 {
			if s != "" {
				s += "|"
			}
			s += n.name
		}
	}
	if s == "" {
		return "none"
	}
	return s
}

// relist lists every kind that needs it and folds the result into the
// model. A failure leaves the kind wanted and arms the retry timer.
func (r *run) relist() {
	if r.want == 0 || r.retryT != nil || r.ctx.Err() != nil {
		return
	}
	now := r.m.clk.Now()
	if wait := r.relistAt.Sub(now); wait > 0 {
		// Overflow storms ask for a re-list after every renewal; spacing
		// them keeps the monitor's share of the CPU bounded, and the view
		// still converges one short wait after the storm.
		r.retryT = r.m.clk.NewTimer(wait)
		return
	}
	all := r.want == r.m.kinds
	// The barrier goes before the listings: the events before it are
	// older than every listing below.
	var barrier uint64
	if r.barrier != nil {
		id, err := r.barrier()
		if err != nil {
			// No live subscription: a Resync, and another re-list,
			// follow.
			r.m.log.Debug("ifacemonitor: no barrier before the re-list", "err", err)
		}
		barrier = id
	}
	listed := func(kind kernel.EventKinds) {
		r.want &^= kind
		r.listed |= kind
		if barrier != 0 {
			r.staleTil[kind] = barrier
		}
	}
	defer func() {
		end := r.m.clk.Now()
		r.relistAt = end.Add(min(relistSpacing*end.Sub(now), maxRelistSpacing))
		r.m.log.Debug("ifacemonitor: re-listed", "took", end.Sub(now), "still_wanted", kindNames(r.want))
	}()
	var errs []error
	// Links first: addresses of links the link listing has not seen wait
	// as orphans for their link's event. Reading r.want at each step picks
	// up a route re-list that the link listing asks for.
	if r.want&kernel.EventLinks != 0 {
		if ls, err := r.m.k.Links(r.ctx); err != nil {
			errs = append(errs, err)
		} else {
			r.applyLinkList(ls, r.m.clk.Now())
			listed(kernel.EventLinks)
		}
	}
	if r.want&kernel.EventAddrs != 0 {
		if as, err := r.listAddrs(); err != nil {
			errs = append(errs, err)
		} else {
			r.applyAddrList(as)
			listed(kernel.EventAddrs)
		}
	}
	if r.want&kernel.EventRoutes != 0 {
		if rs, err := r.listRoutes(); err != nil {
			errs = append(errs, err)
		} else {
			r.applyRouteList(rs)
			listed(kernel.EventRoutes)
		}
	}
	if len(errs) > 0 {
		if r.ctx.Err() != nil {
			return // stopping
		}
		err := errors.Join(errs...)
		r.stats.RelistErrors++
		wait := r.backoff
		if errors.Is(err, kernel.ErrDumpInterrupted) {
			// The kernel is busy changing what we list, not broken: try
			// again soon, so the view converges soon after a burst ends.
			wait = relistBackoffMin
		} else {
			r.backoff = min(2*r.backoff, relistBackoffMax)
		}
		r.m.log.Warn("ifacemonitor: re-list failed; retrying", "kinds", kindNames(r.want), "retry_in", wait, "err", err)
		r.retryT = r.m.clk.NewTimer(wait)
		return
	}
	r.backoff = relistBackoffMin
	r.stats.Relists++
	if all && r.resyncT != nil {
		r.resyncT.Reset(r.m.resync)
	}
}

// listAddrs lists the addresses of both families.
func (r *run) listAddrs() ([]kernel.Addr, error) {
	v4, err := r.m.k.Addrs(r.ctx, kernel.IPv4)
	if err != nil {
		return nil, err
	}
	v6, err := r.m.k.Addrs(r.ctx, kernel.IPv6)
	if err != nil {
		return nil, err
	}
	return append(v4, v6...), nil
}

// listRoutes lists the routes of every table of both families.
func (r *run) listRoutes() ([]kernel.Route, error) {
	var out []kernel.Route
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		start := len(out)
		err := r.m.k.DumpRoutes(r.ctx, fam, 0,
			func(rt *kernel.Route) error { out = append(out, *rt); return nil },
			func() { out = out[:start] })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// flush reports what changed, arms the damping timer and reports in-sync
// once everything has been listed.
func (r *run) flush() {
	if r.ctx.Err() != nil {
		return
	}
	if len(r.dirty) > 0 || len(r.dirtyRoutes) > 0 {
		r.stats.Batches++
	}
	r.reconcileLinks(r.m.clk.Now())
	r.reconcileRoutes()
	r.armDamping()
	if !r.inSync && r.listed == r.m.kinds {
		r.inSync = true
		r.stats.InSync = true
		r.publishStats() // InSync is visible from inside OnInSync
		r.m.log.Info("ifacemonitor: in sync", "interfaces", len(r.m.rep))
		if f := r.m.opts.OnInSync; f != nil {
			r.call("OnInSync", f)
		}
	}
}

// armDamping keeps one timer for the earliest held-back down report.
func (r *run) armDamping() {
	if len(r.damped) == 0 {
		if r.dampT != nil {
			r.dampT.Stop()
			r.dampT = nil
		}
		return
	}
	var first time.Time
	for _, due := range r.damped {
		if first.IsZero() || due.Before(first) {
			first = due
		}
	}
	if r.dampT != nil && r.dampAt.Equal(first) {
		return
	}
	if r.dampT != nil {
		r.dampT.Stop()
	}
	r.dampAt = first
	r.dampT = r.m.clk.NewTimer(first.Sub(r.m.clk.Now()))
}

func (r *run) publishStats() {
	s := r.stats
	r.m.updateStats(func(dst *Stats) { *dst = s })
}

// call runs a callback, turning a panic into a logged, counted error so
// that a faulty consumer cannot stop the monitor.
func (r *run) call(name string, f func()) {
	defer func() {
		if p := recover(); p != nil {
			r.stats.CallbackPanics++
			r.m.log.Error("ifacemonitor: callback panicked", "callback", name, "panic", fmt.Sprint(p))
		}
	}()
	f()
}
