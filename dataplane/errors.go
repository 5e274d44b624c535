package dataplane

import (
	"errors"
	"fmt"
	"strings"
	"time"
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

// ObjectError is one object that a driver's Apply did not write: a
// route, a rule, a sysctl, a map entry, a chain. It is the one shape of a
// per-object failure; a driver's Ledger fills Attempts and RetryAt.
//
// errors.Is matches Reason (the driver's sentinel) and Err (the kernel's
// error, a *kernel.OpError with its errno, say); errors.As finds both
// the *ObjectError in a *PartialError and what Err wraps.
type ObjectError struct {
	// Driver is the package (or driver) prefix the text starts with once,
	// such as "routetable".
	Driver string
	// Op is the write that failed ("add", "replace", "delete", "write"),
	// or empty.
	Op string
	// Kind is what the object is ("route", "rule", "chain", "entry"), or
	// empty.
	Kind ObjectKind
	// Name names the object within its kind (a route's key and device, a
	// chain's name, a sysctl's path).
	Name string
	// Object is the object in the driver's own terms, for a program that
	// matches failures to what it declared (routetable puts a
	// routetable.RouteObject here), or nil.
	Object any
	// Reason is the driver's sentinel that classifies the failure.
	Reason error
	// Detail says what happened, without the prefix; when empty the text
	// quotes Err.
	Detail string
	// Err is the underlying error (the kernel's), or nil.
	Err error
	// Attempts counts the failed attempts in a row.
	Attempts int
	// RetryAt is when the driver tries the object again (it asks the loop
	// for a pass then through ApplyResult.RetryAfter); zero when only a
	// new declaration can change the outcome.
	RetryAt time.Time
}

// ObjectKind says what an ObjectError is about; each driver names its own
// kinds ("route", "rule", "sysctl", "entry", "chain", "set", "element").
type ObjectKind string

// String returns the kind as it is.
func (k ObjectKind) String() string { return string(k) }

// Error says which object failed and why, with the driver's prefix once:
// "<driver>: [<op> ][<kind> ]<name>: <reason>: <detail or err>".
func (e *ObjectError) Error() string {
	var b strings.Builder
	pre := ""
	if e.Driver != "" {
		pre = e.Driver + ": "
		b.WriteString(pre)
	}
	for _, s := range []string{e.Op, string(e.Kind)} {
		if s != "" {
			b.WriteString(s)
			b.WriteByte(' ')
		}
	}
	b.WriteString(e.Name)
	if e.Reason != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Reason.Error(), pre))
	}
	switch {
	case e.Detail != "":
		b.WriteString(": ")
		b.WriteString(e.Detail)
	case e.Err != nil:
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Err.Error(), pre))
	}
	return b.String()
}

// Unwrap returns Reason and Err, those that are set.
func (e *ObjectError) Unwrap() []error {
	out := make([]error, 0, 2)
	for _, err := range []error{e.Reason, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// PartialError is the error of an Apply that wrote everything it could
// while some objects failed: a route the kernel refused, a rule it
// rejected, a set it could not create. It wraps ErrPartial and every
// object's error, so errors.Is finds their sentinels too, and errors.As
// finds a *ObjectError among them (Objects lists them all). A driver
// builds it with its Ledger's Err.
//
// A driver that returns it keeps the failed objects pending and retries
// them on its own backoff, asking for the next attempt through
// ApplyResult.RetryAfter. The loop reports the failure (Health.LastError,
// Health.FailingObjects, Health.ObjectFailures and OnHealth) but does not
// treat the driver as failed: it neither backs off nor forces a resync, so
// one bad object never holds back the rest.
type PartialError struct {
	// Driver, when set, is the prefix the text starts with, once: it is
	// taken off the front of the errors quoted.
	Driver string
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

// Error counts the failed objects and quotes the first few errors, with
// the Driver's prefix once.
func (e *PartialError) Error() string {
	var b strings.Builder
	pre := ""
	if e.Driver != "" {
		pre = e.Driver + ": "
	}
	fmt.Fprintf(&b, "%s%d object(s) failed", pre, e.Failed+e.Waiting)
	for i, err := range e.Errs {
		if i == partialShown {
			b.WriteString("; …")
			break
		}
		b.WriteString("; ")
		b.WriteString(strings.TrimPrefix(err.Error(), pre))
	}
	return b.String()
}

// Objects returns the *ObjectError among Errs (an error that wraps one
// counts), in order.
func (e *PartialError) Objects() []*ObjectError {
	var out []*ObjectError
	for _, err := range e.Errs {
		var oe *ObjectError
		if errors.As(err, &oe) {
			out = append(out, oe)
		}
	}
	return out
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
