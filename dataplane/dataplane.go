package dataplane

import (
	"context"
	"fmt"
	"time"
)

// Manager turns intent into desired state on its drivers.
//
// The loop calls both methods from its own goroutine only, never
// concurrently with each other or with any driver's Apply, so a manager needs
// no locking for state the loop alone touches.
type Manager interface {
	// OnUpdate records one message. It must be cheap and must not touch the
	// kernel: record intent, set dirty flags, return. Every message goes to
	// every manager, in the order it was sent; a manager ignores types it
	// does not know. The in-sync markers DatastoreInSync and
	// InterfacesInSync are delivered too, in order with the other messages.
	OnUpdate(msg any)
	// CompleteDeferredWork turns the intent recorded since the last call into
	// desired state on the manager's drivers. It runs at the start of every
	// apply pass, for every manager, in registration order, so it should
	// return at once when nothing is dirty. ctx is the loop's: a manager
	// that does I/O here (see Resyncer) returns promptly when it ends. An
	// error marks the manager failed: it keeps its pending state and is
	// called again at the next pass.
	CompleteDeferredWork(ctx context.Context) error
}

// Driver owns one slice of kernel state and converges it to the desired
// state its managers set.
//
// The loop never calls a driver's methods concurrently with each other, but
// different drivers' Apply calls may run at the same time (drivers of one
// phase run in parallel, and PhaseTables runs alongside PhaseRoutes).
type Driver interface {
	// Apply writes the difference between desired and actual state. It is
	// called on every apply pass and must be cheap when nothing changed. It
	// should return promptly when ctx is done. A non-zero
	// ApplyResult.RetryAfter asks to be applied again after that delay.
	Apply(ctx context.Context) (ApplyResult, error)
	// QueueResync makes the next Apply re-read the kernel instead of
	// trusting its cache. The loop calls it periodically and after the
	// driver fails.
	QueueResync()
	// Phase says when, within an apply pass, the driver runs. The loop reads
	// it once, when the driver is registered.
	Phase() Phase
}

// DeletionApplier is implemented by drivers whose removals must wait until
// nothing refers to them any more, such as ip sets: the driver's Apply
// creates and updates in its own phase, and ApplyDeletions removes what is
// no longer wanted in PhaseIPSetsDelete, after tables and routes have
// dropped their references. A driver whose own phase is PhaseIPSetsDelete
// has Apply and then ApplyDeletions called in that phase. Like Apply,
// ApplyDeletions returns every object the driver has failing (its
// Ledger's Err, the other call's objects waiting): the loop counts a
// driver's failing objects from its latest call.
type DeletionApplier interface {
	// ApplyDeletions removes the objects the driver no longer wants. It
	// follows the same rules as Driver.Apply.
	ApplyDeletions(ctx context.Context) (ApplyResult, error)
}

// Resyncer is an optional interface for managers that write to the kernel
// themselves in CompleteDeferredWork (sysctls, say), and the mark the loop
// knows them by. When such a manager fails, the loop calls QueueResync
// before the retry, as it does for a failed driver. An inactive loop (see
// Loop.SetActive) does not call its CompleteDeferredWork at all, since that
// would write, and calls QueueResync when it becomes active.
type Resyncer interface {
	// QueueResync makes the next CompleteDeferredWork re-read the kernel.
	QueueResync()
}

// Wakeable is an optional interface for drivers that learn of work from
// outside the loop — for example interface state that an interface monitor
// reports from its own goroutine. AddDriver calls SetWake once, before Run,
// with a function that asks the loop for an apply pass (Loop.Wake). The
// driver calls it after recording the new state; it never blocks and is
// safe to call from any goroutine, at any time, any number of times (calls
// that arrive while a pass is already wanted cost nothing).
type Wakeable interface {
	// SetWake gives the driver the function that wakes the loop.
	SetWake(wake func())
}

// Named is an optional interface for managers and drivers: the loop uses
// Name in logs and errors. Without it (and without WithName) the name is the
// Go type, as printed by %T.
type Named interface {
	// Name returns a short, human-readable name such as "ipsets-v4".
	Name() string
}

// ApplyResult is what an Apply reports besides its error. It is read when
// Apply succeeds and when it fails only partly (an error wrapping
// ErrPartial); otherwise it is ignored.
type ApplyResult struct {
	// RetryAfter, when positive, asks the loop to run another apply pass
	// after this delay, for example because a grace period is running or
	// objects that failed are due for their next attempt. Zero or negative
	// means no request.
	RetryAfter time.Duration
}

// Phase orders the drivers within an apply pass. References must exist
// before they are used and be gone before their target is deleted, so a pass
// runs:
//
//  1. PhaseIPSetsUpdate: ip sets are created and filled;
//  2. PhaseTunnelL2: tunnel FDB and neighbour entries;
//  3. PhaseTables and PhaseRoutes, in parallel: iptables/nftables tables,
//     and routes and route rules;
//  4. PhaseIPSetsDelete: ip sets no longer referenced are removed (the
//     ApplyDeletions of every DeletionApplier runs here too).
//
// Each step waits for the previous one. Drivers that share a step run in
// parallel goroutines.
type Phase int

// The apply phases, in order. The zero Phase is not valid.
const (
	// PhaseIPSetsUpdate creates and updates ip sets, before anything uses them.
	PhaseIPSetsUpdate Phase = iota + 1
	// PhaseTunnelL2 programs tunnel layer-2 state (VXLAN FDB, neighbours),
	// before routes that go through the tunnel.
	PhaseTunnelL2
	// PhaseTables writes iptables or nftables tables. It runs in parallel
	// with PhaseRoutes.
	PhaseTables
	// PhaseRoutes writes routes and route rules. It runs in parallel with
	// PhaseTables.
	PhaseRoutes
	// PhaseIPSetsDelete removes ip sets (and whatever else must wait until
	// tables and routes no longer refer to it).
	PhaseIPSetsDelete
)

// String returns the phase's name, such as "ipsets-update".
func (p Phase) String() string {
	switch p {
	case PhaseIPSetsUpdate:
		return "ipsets-update"
	case PhaseTunnelL2:
		return "tunnel-l2"
	case PhaseTables:
		return "tables"
	case PhaseRoutes:
		return "routes"
	case PhaseIPSetsDelete:
		return "ipsets-delete"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Valid reports whether p is one of the defined phases.
func (p Phase) Valid() bool { return p >= PhaseIPSetsUpdate && p <= PhaseIPSetsDelete }

// stage maps a phase to the step of the pass it runs in (0-based).
func (p Phase) stage() int {
	switch p {
	case PhaseIPSetsUpdate:
		return 0
	case PhaseTunnelL2:
		return 1
	case PhaseTables, PhaseRoutes:
		return 2
	default:
		return 3
	}
}

const numStages = 4

// DatastoreInSync is the marker the loop delivers to every manager, in
// order with the other messages, when the consumer's datastore is in sync
// (see Loop.DatastoreInSync). It may also be sent with Loop.Send.
type DatastoreInSync struct{}

// InterfacesInSync is the marker the loop delivers to every manager, in
// order with the other messages, when the interface monitor has listed the
// kernel (see Loop.InterfacesInSync). It may also be sent with Loop.Send.
type InterfacesInSync struct{}
