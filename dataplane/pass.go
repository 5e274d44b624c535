package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// runner is the state of one Run. Everything in it belongs to the loop's
// goroutine, except task results, which the phase goroutines write before
// the loop reads them after the phase's WaitGroup.
type runner struct {
	l        *Loop
	o        Options
	log      *slog.Logger
	clk      clock.Clock
	managers []*managerEntry
	drivers  []*driverEntry
	stages   [numStages][]*task
	bucket   *tokenBucket
	batch    []any

	datastoreInSync, interfacesInSync bool
	active                            bool // writes to the kernel (see Loop.SetActive)
	dirty                             bool // intent changed since the last pass, or a timer wants one
	eligible                          bool // the coalescing window is over, or a timer wants a pass
	failures                          int  // consecutive passes with a failed driver or manager
	inSync                            bool // OnInSync has been called

	// Deadlines; zero means unset.
	windowAt, retryAt, reschedAt, throttleAt, healthAt time.Time
	resyncAt                                           []time.Time // per driver

	wake      clock.Timer
	wakeArmed bool
	wakeAt    time.Time
	lastPoke  uint64 // last value taken from Loop.testPoke
}

// task is one driver's work in one step of a pass.
type task struct {
	e         *driverEntry
	apply     bool // call Apply
	deletions bool // call ApplyDeletions (after Apply when both)
	res       ApplyResult
	err       error
	partial   bool // err reports only objects that failed (ErrPartial)
	skipped   bool // the driver waits out its backoff
	steps     []DriverApply
}

func newRunner(l *Loop, managers []*managerEntry, drivers []*driverEntry) *runner {
	r := &runner{
		l: l, o: l.opts, log: l.log, clk: l.clk,
		managers: managers, drivers: drivers,
		batch: make([]any, 0, min(l.opts.MaxBatch, 4096)),
	}
	const last = numStages - 1
	for _, e := range drivers {
		own := &task{e: e, apply: true}
		if e.deleter != nil && e.phase == PhaseIPSetsDelete {
			own.deletions = true
		}
		r.stages[e.phase.stage()] = append(r.stages[e.phase.stage()], own)
		if e.deleter != nil && e.phase != PhaseIPSetsDelete {
			r.stages[last] = append(r.stages[last], &task{e: e, deletions: true})
		}
	}
	return r
}

func (r *runner) run(ctx context.Context) error {
	now := r.clk.Now()
	r.bucket = newTokenBucket(r.o.Throttle.Burst, r.o.Throttle.Refill, now)
	r.resyncAt = make([]time.Time, len(r.drivers))
	for i, e := range r.drivers {
		if e.resync > 0 {
			r.resyncAt[i] = now.Add(jittered(e.resync, r.o.ResyncJitter, r.o.Rand))
		}
	}
	if r.o.OnHealth != nil && r.o.HealthInterval > 0 {
		r.healthAt = now.Add(r.o.HealthInterval)
	}
	r.active = r.l.active.Load()
	r.log.Debug("dataplane loop starting", "managers", len(r.managers), "drivers", len(r.drivers), "active", r.active)
	r.report(r.l.updateHealth(func(h *Health) { h.Live, h.Active = true, r.active }))
	defer func() {
		r.l.q.stop()
		if r.wake != nil {
			r.wake.Stop()
		}
		r.report(r.l.updateHealth(func(h *Health) { h.Live = false }))
		r.log.Debug("dataplane loop stopped")
	}()

	for {
		if ctx.Err() != nil {
			return nil
		}
		r.syncActive()
		now := r.clk.Now()
		r.runDue(now)
		if r.wantApply() {
			if r.bucket.admit(now) {
				r.pass(ctx)
				continue
			}
			r.throttleAt = r.bucket.next(now)
			r.log.Debug("dataplane apply throttled", "until", r.throttleAt)
		}
		next, ok := r.nextDeadline()
		if ok && !next.After(now) {
			continue // something fell due meanwhile
		}
		r.arm(next, ok, now)
		if hook := r.l.testHookIdle; hook != nil {
			hook(r.quiet(), r.lastPoke)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.l.q.ready:
			r.receive()
		case <-r.l.wakeC:
			r.markDirty()
		case <-r.l.activeC:
		case <-r.wakeC():
			r.wakeArmed = false
		case r.lastPoke = <-r.l.testPoke:
		}
	}
}

// wantApply reports whether a pass should run now, throttle permitting.
// A driver's backoff does not hold the loop: the pass skips that driver.
func (r *runner) wantApply() bool {
	return r.datastoreInSync && r.interfacesInSync && r.dirty && r.eligible
}

// syncActive takes a change SetActive asked for. Becoming active, it
// queues a resync on every driver and Resyncer manager and asks for a pass
// at once.
func (r *runner) syncActive() {
	want := r.l.active.Load()
	if want == r.active {
		return
	}
	r.active = want
	if want {
		r.log.Info("dataplane: active: applying drivers")
		for _, e := range r.drivers {
			r.queueResync(e.name, false, ResyncActivated, e.d.QueueResync)
		}
		for _, me := range r.managers {
			if me.resyncer != nil {
				r.queueResync(me.name, true, ResyncActivated, me.resyncer.QueueResync)
			}
		}
		r.dirty, r.eligible = true, true
	} else {
		r.log.Info("dataplane: inactive: nothing is written until active again")
	}
	r.report(r.l.updateHealth(func(h *Health) { h.Active = want }))
}

// queueResync calls a driver's or manager's QueueResync and reports it.
func (r *runner) queueResync(name string, manager bool, why ResyncReason, f func()) {
	if err := safeDo(f); err != nil {
		kind := "driver"
		if manager {
			kind = "manager"
		}
		r.recordError(fmt.Errorf("dataplane: %s %s QueueResync: %w", kind, name, err))
	}
	r.metric(func(m Metrics) { m.Resynced(ResyncEvent{Name: name, Manager: manager, Reason: why}) })
}

// metric hands one measurement to Options.Metrics, if set.
func (r *runner) metric(f func(Metrics)) {
	m := r.o.Metrics
	if m == nil {
		return
	}
	if err := safeDo(func() { f(m) }); err != nil {
		r.log.Error("dataplane: Metrics panicked", "error", err)
	}
}

// receive takes a batch from the queue and gives it to every manager.
func (r *runner) receive() {
	if r.o.Metrics != nil {
		n := r.l.q.len()
		r.metric(func(m Metrics) { m.QueueDepth(n) })
	}
	r.batch = r.l.q.drain(r.batch, r.o.MaxBatch)
	if len(r.batch) == 0 {
		return
	}
	var errs []error
	markers := false
	for _, msg := range r.batch {
		if ok, err := r.observe(msg); ok {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		switch msg.(type) {
		case DatastoreInSync:
			if !r.datastoreInSync {
				r.datastoreInSync, markers = true, true
				r.log.Info("dataplane: datastore in sync")
			}
		case InterfacesInSync:
			if !r.interfacesInSync {
				r.interfacesInSync, markers = true, true
				r.log.Info("dataplane: interfaces in sync")
			}
		}
		for _, me := range r.managers {
			if err := safeOnUpdate(me.m, msg); err != nil {
				err = fmt.Errorf("dataplane: manager %s OnUpdate(%T): %w", me.name, msg, err)
				r.log.Error("dataplane: manager panicked", "manager", me.name, "error", err,
					"stack", string(stackOf(err)))
				errs = append(errs, err)
			}
		}
	}
	clear(r.batch) // drop references to the messages
	r.markDirty()
	if err := errors.Join(errs...); err != nil || markers {
		now := r.clk.Now()
		r.report(r.l.updateHealth(func(h *Health) {
			h.DatastoreInSync, h.InterfacesInSync = r.datastoreInSync, r.interfacesInSync
			if err != nil {
				h.LastError, h.LastErrorAt = err, now
			}
		}))
	}
}

// markDirty records new intent: a pass follows once the coalescing window
// is over.
func (r *runner) markDirty() {
	r.dirty = true
	if r.o.Coalesce < 0 {
		r.eligible = true
	} else if !r.eligible && r.windowAt.IsZero() {
		r.windowAt = r.clk.Now().Add(r.o.Coalesce)
	}
}

// runDue acts on every deadline that has passed.
func (r *runner) runDue(now time.Time) {
	due := func(t time.Time) bool { return !t.IsZero() && !now.Before(t) }
	if due(r.windowAt) {
		r.windowAt, r.eligible = time.Time{}, true
	}
	if due(r.retryAt) {
		r.retryAt, r.dirty, r.eligible = time.Time{}, true, true
	}
	if due(r.reschedAt) {
		r.reschedAt, r.dirty, r.eligible = time.Time{}, true, true
	}
	if due(r.throttleAt) {
		r.throttleAt = time.Time{}
	}
	for i, e := range r.drivers {
		if !due(r.resyncAt[i]) {
			continue
		}
		r.resyncAt[i] = now.Add(jittered(e.resync, r.o.ResyncJitter, r.o.Rand))
		if !r.active {
			continue // activation resyncs every driver anyway
		}
		r.dirty, r.eligible = true, true
		r.log.Debug("dataplane: periodic resync", "driver", e.name)
		r.queueResync(e.name, false, ResyncPeriodic, e.d.QueueResync)
	}
	if due(r.healthAt) {
		r.healthAt = now.Add(r.o.HealthInterval)
		r.report(r.l.Health())
	}
}

// nextDeadline returns the earliest deadline that is set.
func (r *runner) nextDeadline() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	consider(r.windowAt)
	consider(r.retryAt)
	consider(r.reschedAt)
	consider(r.throttleAt)
	consider(r.healthAt)
	for _, t := range r.resyncAt {
		consider(t)
	}
	return next, !next.IsZero()
}

// arm points the wake timer at next, or stops it when there is none.
func (r *runner) arm(next time.Time, ok bool, now time.Time) {
	if !ok {
		if r.wakeArmed {
			r.wake.Stop()
			r.wakeArmed = false
		}
		return
	}
	if r.wakeArmed && r.wakeAt.Equal(next) {
		return
	}
	d := next.Sub(now)
	if r.wake == nil {
		r.wake = r.clk.NewTimer(d)
	} else {
		r.wake.Reset(d)
	}
	r.wakeArmed, r.wakeAt = true, next
}

// quiet reports whether no event is waiting for the loop: the queue is empty,
// no Wake is pending and the wake timer has not fired. Tests use it to know the loop is settled.
func (r *runner) quiet() bool {
	return r.l.q.len() == 0 && len(r.l.testPoke) == 0 && len(r.l.wakeC) == 0 && len(r.l.activeC) == 0 &&
		(!r.wakeArmed || len(r.wake.C()) == 0)
}

func (r *runner) wakeC() <-chan time.Time {
	if !r.wakeArmed {
		return nil
	}
	return r.wake.C()
}

// pass runs one apply pass: every manager's CompleteDeferredWork, then the
// drivers step by step. A driver waiting out its backoff is skipped; the
// others are applied as usual.
func (r *runner) pass(ctx context.Context) {
	if !r.active {
		r.standbyPass(ctx)
		return
	}
	start := r.clk.Now()
	r.dirty, r.eligible = false, false
	r.windowAt, r.reschedAt, r.throttleAt, r.retryAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}

	errs := r.completeManagers(ctx, false)
	for _, e := range r.drivers {
		e.failed = false
		e.skipped = !e.retryAt.IsZero() && start.Before(e.retryAt)
		if !e.skipped {
			e.objects = 0
		}
	}
	var retry time.Duration
	var objectFailures uint64
	stats := map[string]DriverStats{}
	for _, tasks := range r.stages {
		runStage(ctx, tasks, r.clk)
		for _, t := range tasks {
			if t.skipped {
				continue
			}
			for _, st := range t.steps {
				r.metric(func(m Metrics) { m.DriverApplied(st) })
				if st.Stats != nil {
					stats[st.Driver] = *st.Stats
				}
			}
			switch {
			case t.err == nil:
				// Each call of a driver reports every object it has
				// failing (its Ledger's), so the latest call of the pass
				// says how many fail: none after a success.
				t.e.objects = 0
			case t.partial:
				errs = append(errs, t.err)
				tried, waiting := failedObjects(t.err)
				t.e.objects = tried + waiting
				objectFailures += uint64(tried)
			default:
				errs = append(errs, t.err)
				t.e.failed = true
			}
			if t.res.RetryAfter > 0 && (retry == 0 || t.res.RetryAfter < retry) {
				retry = t.res.RetryAfter
			}
		}
	}
	end := r.clk.Now()
	if ctx.Err() != nil {
		return // stopping: the outcome no longer matters
	}
	if retry > 0 {
		r.reschedAt = end.Add(retry)
	}

	// Each failed driver and manager backs off on its own; the loop comes
	// back for the earliest of them, and new messages are served meanwhile.
	failing, objects := r.settleFailures(end)
	err := errors.Join(errs...)
	if err != nil {
		r.log.Warn("dataplane apply failed", "error", err, "failingDrivers", failing,
			"failingObjects", objects, "retryIn", r.retryIn(end))
		for _, e := range errs {
			if st := stackOf(e); st != nil {
				r.log.Error("dataplane: panic during apply", "error", e, "stack", string(st))
			}
		}
	}
	ok := len(failing) == 0 && !r.anyManagerFailed()
	if ok {
		r.failures = 0
	} else {
		r.failures++
	}
	r.passMetrics(end.Sub(start), true, ok, err)
	r.report(r.l.updateHealth(func(h *Health) {
		h.Applies++
		h.FailingDrivers = failing
		h.FailingObjects = objects
		h.ObjectFailures += objectFailures
		if len(stats) > 0 {
			h.Drivers = maps.Clone(h.Drivers)
			if h.Drivers == nil {
				h.Drivers = map[string]DriverStats{}
			}
			maps.Copy(h.Drivers, stats)
		}
		h.ConsecutiveFailures = r.failures
		if err != nil {
			h.LastError, h.LastErrorAt = err, end
		}
		if ok {
			h.Ready = true
			h.LastApply = end
		}
	}))
	if !ok {
		return
	}
	r.log.Debug("dataplane apply done", "took", end.Sub(start), "retryAfter", retry)
	if !r.inSync {
		r.inSync = true
		r.log.Info("dataplane in sync", "took", end.Sub(start))
		if cb := r.o.OnInSync; cb != nil {
			if err := safeDo(cb); err != nil {
				r.recordError(fmt.Errorf("dataplane: OnInSync: %w", err))
			}
		}
	}
}

// completeManagers calls CompleteDeferredWork on every manager, except, in
// a standby pass, those that write to the kernel themselves (Resyncers),
// and returns their errors.
func (r *runner) completeManagers(ctx context.Context, standby bool) []error {
	var errs []error
	for _, me := range r.managers {
		me.failed = false
		if standby && me.resyncer != nil {
			continue
		}
		start := r.clk.Now()
		err := safeCall(func() error { return me.m.CompleteDeferredWork(ctx) })
		took := r.clk.Now().Sub(start)
		if err != nil {
			me.failed = true
			me.failures++
			err = fmt.Errorf("dataplane: manager %s: %w", me.name, err)
			errs = append(errs, err)
		} else {
			me.failures = 0
		}
		r.metric(func(m Metrics) {
			m.ManagerCompleted(ManagerWork{Manager: me.name, Duration: took, Outcome: outcomeOf(err, false), Err: err})
		})
	}
	return errs
}

// standbyPass is the pass of an inactive loop: the managers turn their
// intent into desired state on their drivers, which are not applied, and
// managers that write to the kernel themselves are not called. Failed
// managers are retried after their backoff, as in an apply pass.
func (r *runner) standbyPass(ctx context.Context) {
	start := r.clk.Now()
	r.dirty, r.eligible = false, false
	r.windowAt, r.reschedAt, r.throttleAt, r.retryAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	errs := r.completeManagers(ctx, true)
	end := r.clk.Now()
	if ctx.Err() != nil {
		return
	}
	err := errors.Join(errs...)
	for _, me := range r.managers {
		if me.failed {
			r.considerRetry(end.Add(backoffDelay(r.o.Backoff.Initial, r.o.Backoff.Max, me.failures)))
		}
	}
	if err != nil {
		r.log.Warn("dataplane standby pass failed", "error", err, "retryIn", r.retryIn(end))
		r.report(r.l.updateHealth(func(h *Health) { h.LastError, h.LastErrorAt = err, end }))
	}
	r.passMetrics(end.Sub(start), false, err == nil, err)
}

// passMetrics reports a pass and the queue depth after it.
func (r *runner) passMetrics(took time.Duration, active, ok bool, err error) {
	if r.o.Metrics == nil {
		return
	}
	out := OutcomeSucceeded
	switch {
	case !ok:
		out = OutcomeFailed
	case err != nil:
		out = OutcomePartial
	}
	r.metric(func(m Metrics) { m.PassCompleted(PassStats{Duration: took, Active: active, Outcome: out}) })
	n := r.l.q.len()
	r.metric(func(m Metrics) { m.QueueDepth(n) })
}

// settleFailures updates every driver's and manager's backoff after a pass
// that ended at end, queues a resync on what failed, arms the retry, and
// returns the drivers still failing (failed now, or skipped while backing
// off) and the objects the drivers report as failing.
func (r *runner) settleFailures(end time.Time) (failing []string, objects int) {
	for _, e := range r.drivers {
		switch {
		case e.failed:
			e.failures++
			e.retryAt = end.Add(backoffDelay(r.o.Backoff.Initial, r.o.Backoff.Max, e.failures))
			r.queueResync(e.name, false, ResyncAfterFailure, e.d.QueueResync)
		case !e.skipped:
			e.failures, e.retryAt = 0, time.Time{}
		}
		if e.failures > 0 {
			failing = append(failing, e.name)
			r.considerRetry(e.retryAt)
		}
		objects += e.objects
	}
	for _, me := range r.managers {
		if !me.failed {
			continue
		}
		r.considerRetry(end.Add(backoffDelay(r.o.Backoff.Initial, r.o.Backoff.Max, me.failures)))
		if me.resyncer == nil {
			continue
		}
		r.queueResync(me.name, true, ResyncAfterFailure, me.resyncer.QueueResync)
	}
	return failing, objects
}

// considerRetry moves the retry deadline to at when that is earlier.
func (r *runner) considerRetry(at time.Time) {
	if r.retryAt.IsZero() || at.Before(r.retryAt) {
		r.retryAt = at
	}
}

// retryIn is how long until the retry deadline, for logs.
func (r *runner) retryIn(now time.Time) time.Duration {
	if r.retryAt.IsZero() {
		return 0
	}
	return r.retryAt.Sub(now)
}

func (r *runner) anyManagerFailed() bool {
	for _, me := range r.managers {
		if me.failed {
			return true
		}
	}
	return false
}

// runStage runs the tasks of one step, in parallel when there are several,
// and returns when all are done.
func runStage(ctx context.Context, tasks []*task, clk clock.Clock) {
	switch len(tasks) {
	case 0:
		return
	case 1:
		tasks[0].run(ctx, clk)
		return
	}
	var wg sync.WaitGroup
	for _, t := range tasks[1:] {
		wg.Go(func() { t.run(ctx, clk) })
	}
	tasks[0].run(ctx, clk)
	wg.Wait()
}

func (t *task) run(ctx context.Context, clk clock.Clock) {
	t.res, t.err, t.partial = ApplyResult{}, nil, false
	t.steps = t.steps[:0]
	t.skipped = t.e.skipped
	if t.skipped {
		return
	}
	var errs []error
	partial := true
	step := func(what string, deletions bool, apply func(context.Context) (ApplyResult, error)) {
		start := clk.Now()
		res, err := safeApply(ctx, apply)
		m := DriverApply{Driver: t.e.name, Phase: t.e.phase, Deletions: deletions, Duration: clk.Now().Sub(start), Err: err}
		if deletions {
			m.Phase = PhaseIPSetsDelete
		}
		isPartial := err != nil && errors.Is(err, ErrPartial)
		m.Outcome = outcomeOf(err, isPartial)
		if isPartial {
			m.FailedObjects, _ = failedObjects(err)
		}
		if t.e.stats != nil {
			var st DriverStats
			if safeDo(func() { st = t.e.stats.Stats() }) == nil {
				m.Stats = &st
			}
		}
		t.steps = append(t.steps, m)
		if err != nil {
			errs = append(errs, fmt.Errorf("dataplane: driver %s (%s): %w", t.e.name, what, err))
			if !isPartial {
				partial = false
				return
			}
		}
		if res.RetryAfter > 0 && (t.res.RetryAfter <= 0 || res.RetryAfter < t.res.RetryAfter) {
			t.res.RetryAfter = res.RetryAfter
		}
	}
	if t.apply {
		step(t.e.phase.String(), false, t.e.d.Apply)
	}
	if t.deletions {
		step("deletions", true, t.e.deleter.ApplyDeletions)
	}
	t.err = errors.Join(errs...)
	t.partial = t.err != nil && partial
}

// recordError stores err as the last error without failing a pass.
func (r *runner) recordError(err error) {
	now := r.clk.Now()
	r.log.Error("dataplane: callback failed", "error", err)
	r.report(r.l.updateHealth(func(h *Health) { h.LastError, h.LastErrorAt = err, now }))
}

// report hands h to OnHealth, if set.
func (r *runner) report(h Health) {
	if cb := r.o.OnHealth; cb != nil {
		if err := safeDo(func() { cb(h) }); err != nil {
			r.log.Error("dataplane: OnHealth panicked", "error", err)
		}
	}
}

// stackOf returns the stack of the first PanicError in err's tree.
func stackOf(err error) []byte {
	var pe *PanicError
	if errors.As(err, &pe) {
		return pe.Stack
	}
	return nil
}
