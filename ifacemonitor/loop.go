//go:build linux

package ifacemonitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
)

// run is the state of a started Monitor, owned by its loop goroutine: the
// model of the kernel (every link, hidden ones included, with its
// addresses, and the routes) and the timers. The reported view lives in the
// Monitor, guarded by its mutex for Snapshot; only this goroutine writes
// it.
type run struct {
	m      *Monitor
	ctx    context.Context
	events <-chan nlutil.Event // from the internal source; nil with Options.Source
	pub    <-chan Event        // from Options.Source; nil without it
	model

	subscribed nlutil.Kinds // kinds whose subscription is live
	want       nlutil.Kinds // kinds to re-list
	listed     nlutil.Kinds // kinds listed at least once since subscribing

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

func newRun(m *Monitor, ctx context.Context, events <-chan nlutil.Event, pub <-chan Event) *run {
	return &run{m: m, ctx: ctx, events: events, pub: pub, model: newModel(), backoff: relistBackoffMin}
}

// loop runs until ctx ends: it takes an event or a timer, applies whatever
// else is already queued (up to maxBatch events), re-lists what needs it,
// then reports the differences.
func (r *run) loop() {
	defer close(r.m.done)
	defer func() {
		// The source closes its stream once it has stopped.
		if r.events != nil {
			for range r.events {
			}
		}
		if r.pub != nil {
			for range r.pub {
			}
		}
	}()
	defer r.stopTimers()
	if r.m.resync > 0 {
		r.resyncT = r.m.clk.NewTimer(r.m.resync)
	}
	for {
		select {
		case <-r.ctx.Done():
			return
		case ev, ok := <-r.events:
			if !ok {
				return
			}
			r.handle(ev)
			if !r.drain() {
				return
			}
		case ev, ok := <-r.pub:
			if !ok {
				return
			}
			r.handlePub(ev)
			if !r.drain() {
				return
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
			r.handle(ev)
		case ev, ok := <-r.pub:
			if !ok {
				return false
			}
			r.handlePub(ev)
		default:
			return true
		}
	}
	return true
}

// handlePub applies one event of Options.Source: its Resync covers every
// kind the monitor watches.
func (r *run) handlePub(ev Event) {
	e := nlutil.Event{Link: ev.Link, Addr: ev.Addr, Route: ev.Route, Err: ev.Err}
	if ev.Resync != nil {
		e.Resync = &nlutil.Resync{Kinds: r.m.kinds, Reason: ev.Resync.Reason}
	}
	r.handle(e)
}

// handle applies one event to the model.
func (r *run) handle(ev nlutil.Event) {
	switch {
	case ev.Link != nil:
		r.stats.Events++
		r.applyLinkUpdate(ev.Link, r.m.clk.Now())
	case ev.Addr != nil:
		r.stats.Events++
		r.applyAddrUpdate(ev.Addr)
	case ev.Route != nil:
		if r.m.kinds&nlutil.Routes != 0 {
			r.stats.Events++
			r.applyRouteUpdate(ev.Route)
		}
	case ev.Resync != nil:
		r.stats.Resyncs++
		kinds := ev.Resync.Kinds & r.m.kinds
		if reason := ev.Resync.Reason; reason != nil {
			r.stats.SubscriptionLosses++
			if errors.Is(reason, nlutil.ErrOverflow) || errors.Is(reason, ErrOverflow) {
				r.stats.Overflows++
			}
			r.m.log.Warn("ifacemonitor: subscription renewed after a loss; re-listing", "kinds", kinds.String(), "reason", reason)
		}
		r.subscribed |= kinds
		r.want |= kinds
	case ev.Err != nil:
		r.stats.SubscribeErrors++
		r.m.log.Warn("ifacemonitor: subscribing failed; retrying", "err", ev.Err)
	}
}

// relist dumps every kind that needs it and folds the result into the
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
	defer func() {
		end := r.m.clk.Now()
		r.relistAt = end.Add(min(relistSpacing*end.Sub(now), maxRelistSpacing))
		r.m.log.Debug("ifacemonitor: re-listed", "took", end.Sub(now), "still_wanted", r.want.String())
	}()
	var errs []error
	// Links first: addresses of links the link dump has not seen wait as
	// orphans for their link's event. Reading r.want at each step picks up
	// a route re-list that the link dump asks for.
	if r.want&nlutil.Links != 0 {
		if ls, err := r.m.listLinks(r.ctx); err != nil {
			errs = append(errs, err)
		} else {
			r.applyLinkList(ls, r.m.clk.Now())
			r.want &^= nlutil.Links
			r.listed |= nlutil.Links
		}
	}
	if r.want&nlutil.Addrs != 0 {
		if as, err := r.m.listAddrs(r.ctx); err != nil {
			errs = append(errs, err)
		} else {
			r.applyAddrList(as)
			r.want &^= nlutil.Addrs
			r.listed |= nlutil.Addrs
		}
	}
	if r.want&nlutil.Routes != 0 {
		if rs, err := r.m.listRoutes(r.ctx); err != nil {
			errs = append(errs, err)
		} else {
			r.applyRouteList(rs)
			r.want &^= nlutil.Routes
			r.listed |= nlutil.Routes
		}
	}
	if len(errs) > 0 {
		if r.ctx.Err() != nil {
			return // stopping
		}
		err := errors.Join(errs...)
		r.stats.RelistErrors++
		wait := r.backoff
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			// The kernel is busy changing what we dump, not broken: try
			// again soon, so the view converges soon after a burst ends.
			wait = relistBackoffMin
		} else {
			r.backoff = min(2*r.backoff, relistBackoffMax)
		}
		r.m.log.Warn("ifacemonitor: re-list failed; retrying", "kinds", r.want.String(), "retry_in", wait, "err", err)
		r.retryT = r.m.clk.NewTimer(wait)
		return
	}
	r.backoff = relistBackoffMin
	r.stats.Relists++
	if all && r.resyncT != nil {
		r.resyncT.Reset(r.m.resync)
	}
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

// applyLinkUpdate applies a link event. Messages of the AF_BRIDGE family
// describe bridge-port state, not the link: an RTM_DELLINK of that family
// means a port left its bridge, not that the link was deleted.
func (r *run) applyLinkUpdate(u *netlink.LinkUpdate, now time.Time) {
	if u.IfInfomsg.Family == afBridge {
		return
	}
	switch u.Header.Type {
	case rtmDelLink:
		idx := int(u.IfInfomsg.Index)
		if u.Link != nil && u.Link.Attrs() != nil && u.Link.Attrs().Index > 0 {
			idx = u.Link.Attrs().Index
		}
		r.removeLink(idx)
	case rtmNewLink:
		if li, ok := linkInfoFrom(u.Link); ok {
			r.upsertLink(li, now)
		}
	}
}
