package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// has Apply and then ApplyDeletions called in that phase.
type DeletionApplier interface {
	// ApplyDeletions removes the objects the driver no longer wants. It
	// follows the same rules as Driver.Apply.
	ApplyDeletions(ctx context.Context) (ApplyResult, error)
}

// Resyncer is an optional interface for managers that write to the kernel
// themselves in CompleteDeferredWork. When such a manager fails, the loop
// calls QueueResync before the retry, as it does for a failed driver.
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

// PartialError is the error of an Apply that wrote everything it could
// while some objects failed: a route the kernel refused, a rule it
// rejected, a set it could not create. It wraps ErrPartial and every
// object's error, so errors.Is finds their sentinels too.
//
// A driver that returns it keeps the failed objects pending and retries
// them on its own backoff, asking for the next attempt through
// ApplyResult.RetryAfter. The loop reports the failure (Health.LastError,
// Health.FailingObjects, Health.ObjectFailures and OnHealth) but does not
// treat the driver as failed: it neither backs off nor forces a resync, so
// one bad object never holds back the rest.
type PartialError struct {
	// Failed is how many objects were tried in this Apply and failed.
	Failed int
	// Waiting is how many objects that failed before were not tried in
	// this Apply because their retry is not due yet (see Retry).
	Waiting int
	// Errs are the errors of the failing objects, tried or waiting; a
	// driver may keep only the first few.
	Errs []error
}

// partialShown is how many object errors Error quotes.
const partialShown = 3

// Error counts the failed objects and quotes the first few errors.
func (e *PartialError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) failed", e.Failed+e.Waiting)
	for i, err := range e.Errs {
		if i == partialShown {
			b.WriteString("; …")
			break
		}
		fmt.Fprintf(&b, "; %v", err)
	}
	return b.String()
}

// Unwrap returns ErrPartial and the objects' errors.
func (e *PartialError) Unwrap() []error { return append([]error{ErrPartial}, e.Errs...) }

// Partial returns nil when errs is empty and failed is 0, else a
// *PartialError of failed objects tried in this Apply (at least
// len(errs)) and keeping errs. Set Waiting on the result, or build the
// PartialError directly, to report objects waiting for their retry.
func Partial(failed int, errs ...error) error {
	if len(errs) == 0 && failed == 0 {
		return nil
	}
	return &PartialError{Failed: max(failed, len(errs)), Errs: errs}
}

// failedObjects returns how many objects err reports as tried and failed
// and as waiting for their retry: the PartialError's counts, or one tried.
func failedObjects(err error) (tried, waiting int) {
	var pe *PartialError
	if errors.As(err, &pe) {
		return pe.Failed, pe.Waiting
	}
	return 1, 0
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

// Sentinel errors. Errors returned by this package's functions and methods
// wrap one of them, so callers can test with errors.Is. Errors in Health
// wrap the failing component's own error (or ErrPanic) and name the
// component.
var (
	// ErrInvalidOptions reports an Options or DriverOption value out of range.
	ErrInvalidOptions = errors.New("dataplane: invalid options")
	// ErrNilMessage reports a nil message given to Send or TrySend.
	ErrNilMessage = errors.New("dataplane: nil message")
	// ErrNilManager reports a nil Manager given to AddManager.
	ErrNilManager = errors.New("dataplane: nil manager")
	// ErrNilDriver reports a nil Driver given to AddDriver.
	ErrNilDriver = errors.New("dataplane: nil driver")
	// ErrInvalidPhase reports a driver whose Phase is not one of the
	// defined phases.
	ErrInvalidPhase = errors.New("dataplane: invalid phase")
	// ErrDuplicate reports a manager or driver registered twice.
	ErrDuplicate = errors.New("dataplane: registered twice")
	// ErrStarted reports a registration after Run was called, or a second
	// call to Run.
	ErrStarted = errors.New("dataplane: loop already started")
	// ErrStopped reports a Send or TrySend after Run returned.
	ErrStopped = errors.New("dataplane: loop stopped")
	// ErrQueueFull reports a TrySend on a full input queue.
	ErrQueueFull = errors.New("dataplane: input queue full")
	// ErrPanic is wrapped by the error the loop records when a manager,
	// driver or callback panics. The concrete error is a *PanicError.
	ErrPanic = errors.New("dataplane: panic")
	// ErrPartial is wrapped by the error of an Apply that wrote everything
	// it could while some objects failed; see PartialError.
	ErrPartial = errors.New("dataplane: some objects were not written")
)

// PanicError is the error that replaces a panic in a manager or driver. It
// wraps ErrPanic and, when the panic value is an error, that error too.
type PanicError struct {
	// Value is the value passed to panic.
	Value any
	// Stack is the goroutine stack at the point of the panic.
	Stack []byte
}

// Error describes the panic value; the stack is in the Stack field.
func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, e.Value) }

// Unwrap returns ErrPanic and, when the panic value is an error, that error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}
