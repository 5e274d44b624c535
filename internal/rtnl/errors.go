//go:build linux

package rtnl

import (
	"errors"
	"fmt"
	"net/netip"
)

var (
	// ErrInvalidRoute is wrapped by the error of an operation whose route
	// is invalid (see Route.Validate); such an operation is never sent.
	ErrInvalidRoute = errors.New("rtnl: invalid route")
	// ErrInvalidArgument is wrapped by errors about other bad input: a
	// closed namespace handle, an unknown family or operation kind, a nil
	// callback or context.
	ErrInvalidArgument = errors.New("rtnl: invalid argument")
	// ErrClosed is wrapped by the errors of calls on a closed Conn.
	ErrClosed = errors.New("rtnl: connection closed")
	// ErrDumpInterrupted is wrapped by DumpRoutes' error when every attempt
	// was interrupted by a concurrent change (NLM_F_DUMP_INTR).
	ErrDumpInterrupted = errors.New("rtnl: dump interrupted by concurrent changes")
	// ErrAckLost is wrapped by the error of an operation whose
	// acknowledgement never arrived (the socket receive buffer overflowed,
	// or the kernel went silent): it may or may not have been applied, so
	// the caller should re-read the kernel's state.
	ErrAckLost = errors.New("rtnl: acknowledgement lost, outcome unknown")
	// ErrMalformed is wrapped by errors about a kernel message that could
	// not be parsed.
	ErrMalformed = errors.New("rtnl: malformed netlink message")
)

// OpError is the error of one ApplyRoutes operation. Err is a unix.Errno
// when the kernel refused it (so errors.Is(err, unix.ENODEV) works), or
// wraps ErrInvalidRoute, ErrAckLost, ErrClosed or a context error.
type OpError struct {
	// Kind is the operation.
	Kind OpKind
	// Dst and Table identify the route.
	Dst   netip.Prefix
	Table uint32
	// Err is the cause.
	Err error
	// Message is the kernel's extended-ack message, if it sent one (for
	// example "Nexthop device is not up").
	Message string
}

// Error describes the operation, the route and the cause.
func (e *OpError) Error() string {
	s := fmt.Sprintf("rtnl: %s %s table %d: %v", e.Kind, e.Dst, e.Table, e.Err)
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }
