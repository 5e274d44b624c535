package kernel

import (
	"errors"
	"fmt"
	"net/netip"
)

// Sentinel errors. Errors of this package and of kernelfake wrap one of
// them (and, for a kernel refusal, the kernel's unix.Errno), so callers
// test with errors.Is.
var (
	// ErrInvalid reports bad input: an invalid route, link, rule,
	// neighbour or key. Such an operation is never sent to the kernel.
	ErrInvalid = errors.New("kernel: invalid input")
	// ErrNotFound reports a missing object: no such link, address, rule,
	// neighbour or sysctl.
	ErrNotFound = errors.New("kernel: not found")
	// ErrExists reports an object that already exists.
	ErrExists = errors.New("kernel: already exists")
	// ErrClosed reports a call on a closed Namespace.
	ErrClosed = errors.New("kernel: namespace closed")
	// ErrNotSupported reports a feature this kernel lacks (a link type
	// such as ipip or wireguard without its module).
	ErrNotSupported = errors.New("kernel: not supported by this kernel")
	// ErrDumpInterrupted reports a dump that concurrent changes
	// interrupted on every attempt.
	ErrDumpInterrupted = errors.New("kernel: dump interrupted by concurrent changes")
	// ErrAckLost reports a write whose acknowledgement never arrived: it
	// may or may not have been applied, so the caller should read the
	// kernel again.
	ErrAckLost = errors.New("kernel: acknowledgement lost, outcome unknown")
	// ErrMalformed reports a kernel message that could not be parsed.
	ErrMalformed = errors.New("kernel: malformed netlink message")
	// ErrOverflow is the Resync.Reason (wrapped) of a subscription that
	// lost events because its receive buffer overflowed (ENOBUFS).
	ErrOverflow = errors.New("kernel: events lost: receive buffer overflow")
)

// OpError is the error of one operation of a batched write (ApplyRoutes,
// ApplyNeighbors, ApplyFDB; AddRule and DeleteRule return one too). Err
// wraps the kernel's unix.Errno when it refused the operation (so
// errors.Is(err, unix.ENODEV) works), with ErrExists, ErrNotFound or
// ErrNotSupported attached where one applies (see the package
// documentation), or wraps ErrInvalid, ErrAckLost, ErrClosed or a context
// error.
type OpError struct {
	// Op is the operation: "replace route", "delete neighbor"…
	Op string
	// Object names what was written: a route's destination and table, a
	// neighbour's address and interface.
	Object string
	// Err is the cause.
	Err error
	// Message is the kernel's extended-ack message, if it sent one (for
	// example "Nexthop device is not up").
	Message string
}

// Error describes the operation, the object and the cause.
func (e *OpError) Error() string {
	s := fmt.Sprintf("kernel: %s %s: %v", e.Op, e.Object, e.Err)
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// routeObject names a route in an OpError.
func routeObject(r *Route) string {
	table := r.Table
	if table == 0 {
		table = TableMain
	}
	return fmt.Sprintf("%s table %d", prefixString(r.Dst), table)
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return "<invalid prefix>"
	}
	return p.String()
}
