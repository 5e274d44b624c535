package dataplane

import (
	"errors"
	"fmt"
	"strings"
)

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
	// ErrAlreadyStarted reports a registration after Run was called, or a second
	// call to Run.
	ErrAlreadyStarted = errors.New("dataplane: loop already started")
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
