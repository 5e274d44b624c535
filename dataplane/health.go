package dataplane

import "time"

// Health is a snapshot of the loop's state, given to Options.OnHealth and
// returned by Loop.Health.
type Health struct {
	// Live is true while Run is running.
	Live bool
	// Active is true while the loop writes to the kernel: it is false
	// while the loop is inactive (Options.Inactive, Loop.SetActive), and
	// changes once the loop has taken the change, after the pass in
	// progress, if any.
	Active bool
	// Ready is true once both in-sync markers have arrived and an apply
	// pass has succeeded: no manager and no driver failed (objects that
	// failed on their own, FailingObjects, do not count). It stays true
	// across later failures, which ConsecutiveFailures and LastError report.
	Ready bool
	// DatastoreInSync and InterfacesInSync report which in-sync markers the
	// loop has taken from its queue. Nothing is applied before both.
	DatastoreInSync, InterfacesInSync bool
	// LastApply is when the last successful apply pass finished; zero
	// before the first.
	LastApply time.Time
	// LastError is the most recent failure: the joined errors of a pass in
	// which a manager or driver failed or some objects failed (a
	// dataplane.PartialError), or a manager's panic in OnUpdate. It is kept
	// after later successes; compare LastErrorAt with LastApply.
	LastError error
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// ConsecutiveFailures counts passes since the last success in which a
	// manager or driver failed (or a driver waited out its backoff).
	ConsecutiveFailures int
	// FailingDrivers names the drivers that failed as a whole and wait out
	// their backoff; the loop keeps applying the others.
	FailingDrivers []string
	// FailingObjects is how many objects the drivers reported as failing
	// in their latest Apply, tried or waiting for their retry (see
	// PartialError); each driver retries them on its own backoff.
	FailingObjects int
	// ObjectFailures counts the failed attempts to write an object since
	// Run started (PartialError.Failed summed): a counter for metrics.
	ObjectFailures uint64
	// Drivers holds each StatsReporter driver's counts after its latest
	// Apply, by driver name. The map is the snapshot's own: the loop never
	// changes it after handing it out.
	Drivers map[string]DriverStats
	// Applies counts apply passes, successful or not.
	Applies uint64
}
