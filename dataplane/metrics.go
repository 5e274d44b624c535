package dataplane

import "time"

// Metrics receives the loop's measurements: how long each driver's Apply
// took and how it ended, each manager's CompleteDeferredWork, each pass, the
// depth of the input queue and every resync the loop asks for. An agent backs
// it with its metrics library (Prometheus histograms, counters and gauges,
// say); the package imports none.
//
// The loop calls it from its own goroutine only, one call at a time, after
// the work it measures (the drivers of a step are measured in parallel and
// reported when the step ends), so an implementation needs no locking for
// what only the loop calls. A call must be quick: the loop waits for it.
// A panic in it is recovered and logged, and the loop carries on.
//
// Embed NopMetrics in an implementation to keep compiling when a method is
// added here.
type Metrics interface {
	// DriverApplied reports one Apply or ApplyDeletions of a driver. A
	// driver skipped while it waits out its backoff is not reported.
	DriverApplied(DriverApply)
	// ManagerCompleted reports one CompleteDeferredWork of a manager.
	ManagerCompleted(ManagerWork)
	// PassCompleted reports one pass: an apply pass, or, while the loop is
	// inactive, a standby pass of the managers alone.
	PassCompleted(PassStats)
	// QueueDepth reports how many messages wait in the input queue: each
	// time the loop takes a batch (the batch included), and after each
	// pass (what arrived meanwhile).
	QueueDepth(waiting int)
	// Resynced reports a QueueResync the loop made on a driver or manager.
	Resynced(ResyncEvent)
}

// NopMetrics is a Metrics that records nothing. Embed it in an
// implementation that measures only some of what the loop reports.
type NopMetrics struct{}

// DriverApplied implements Metrics and does nothing.
func (NopMetrics) DriverApplied(DriverApply) {}

// ManagerCompleted implements Metrics and does nothing.
func (NopMetrics) ManagerCompleted(ManagerWork) {}

// PassCompleted implements Metrics and does nothing.
func (NopMetrics) PassCompleted(PassStats) {}

// QueueDepth implements Metrics and does nothing.
func (NopMetrics) QueueDepth(int) {}

// Resynced implements Metrics and does nothing.
func (NopMetrics) Resynced(ResyncEvent) {}

// Outcome is how an Apply, a CompleteDeferredWork or a pass ended.
type Outcome uint8

const (
	// OutcomeSucceeded: no error.
	OutcomeSucceeded Outcome = iota + 1
	// OutcomePartial: some objects failed on their own (an error wrapping
	// ErrPartial); everything else was written.
	OutcomePartial
	// OutcomeFailed: the driver or manager failed as a whole, or panicked.
	OutcomeFailed
)

// String returns "succeeded", "partial" or "failed", a label value.
func (o Outcome) String() string {
	switch o {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomePartial:
		return "partial"
	case OutcomeFailed:
		return "failed"
	}
	return "unknown"
}

// outcomeOf classifies err.
func outcomeOf(err error, partial bool) Outcome {
	switch {
	case err == nil:
		return OutcomeSucceeded
	case partial:
		return OutcomePartial
	}
	return OutcomeFailed
}

// DriverApply is one Apply or ApplyDeletions of a driver.
type DriverApply struct {
	// Driver is the driver's name (see Named and WithName).
	Driver string
	// Phase is the step the call ran in: the driver's phase for Apply,
	// PhaseIPSetsDelete for ApplyDeletions.
	Phase Phase
	// Deletions is true for ApplyDeletions.
	Deletions bool
	// Duration is how long the call took, on the loop's clock.
	Duration time.Duration
	// Outcome is how it ended.
	Outcome Outcome
	// FailedObjects counts the objects tried in this call that failed
	// (PartialError.Failed), for an OutcomePartial outcome.
	FailedObjects int
	// Err is the call's error, nil on success.
	Err error
	// Stats are the driver's counts after the call, when it is a
	// StatsReporter; nil otherwise.
	Stats *DriverStats
}

// ManagerWork is one CompleteDeferredWork of a manager.
type ManagerWork struct {
	// Manager is the manager's name (see Named).
	Manager string
	// Duration is how long the call took, on the loop's clock.
	Duration time.Duration
	// Outcome is OutcomeSucceeded or OutcomeFailed.
	Outcome Outcome
	// Err is the call's error, nil on success.
	Err error
}

// PassStats is one pass of the loop.
type PassStats struct {
	// Duration is how long the pass took, managers and drivers, on the
	// loop's clock.
	Duration time.Duration
	// Active is false for a standby pass (see Loop.SetActive): managers
	// ran, no driver was applied.
	Active bool
	// Outcome is OutcomeFailed when a manager or driver failed as a whole
	// (or a driver waited out its backoff), OutcomePartial when only
	// objects failed, else OutcomeSucceeded.
	Outcome Outcome
}

// ResyncReason says why the loop asked for a resync.
type ResyncReason uint8

const (
	// ResyncPeriodic: Options.ResyncInterval (or WithResyncInterval) came
	// round.
	ResyncPeriodic ResyncReason = iota + 1
	// ResyncAfterFailure: the driver or manager failed as a whole.
	ResyncAfterFailure
	// ResyncActivated: the loop became active (Loop.SetActive), and what
	// another instance wrote meanwhile must be read.
	ResyncActivated
)

// String returns "periodic", "failure" or "activated", a label value.
func (r ResyncReason) String() string {
	switch r {
	case ResyncPeriodic:
		return "periodic"
	case ResyncAfterFailure:
		return "failure"
	case ResyncActivated:
		return "activated"
	}
	return "unknown"
}

// ResyncEvent is one QueueResync the loop made.
type ResyncEvent struct {
	// Name is the driver's or manager's name.
	Name string
	// Manager is true for a manager (a Resyncer), false for a driver.
	Manager bool
	// Reason says why.
	Reason ResyncReason
}
