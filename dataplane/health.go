package dataplane

import "time"

// Health is a snapshot of the loop's state, given to Options.OnHealth and
// returned by Loop.Health.
type Health struct {
	// Live is true while Run is running.
	Live bool
	// Ready is true once both in-sync markers have arrived and an apply
	// pass has fully succeeded. It stays true across later failures, which
	// ConsecutiveFailures and LastError report.
	Ready bool
	// DatastoreInSync and InterfacesInSync report which in-sync markers the
	// loop has taken from its queue. Nothing is applied before both.
	DatastoreInSync, InterfacesInSync bool
	// LastApply is when the last fully successful apply pass finished; zero
	// before the first.
	LastApply time.Time
	// LastError is the most recent failure: the joined errors of a failed
	// pass, or a manager's panic in OnUpdate. It is kept after later
	// successes; compare LastErrorAt with LastApply.
	LastError error
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
	// ConsecutiveFailures counts failed passes since the last success.
	ConsecutiveFailures int
	// Applies counts apply passes, successful or not.
	Applies uint64
}
