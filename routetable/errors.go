package routetable

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is. An error's text names the package once:
// an error that wraps two sentinels (ErrInvalidInterface inside
// ErrInvalidTarget, say) prints "routetable: " once and matches both.
var (
	// ErrInvalidOptions reports an Options value out of range.
	ErrInvalidOptions = errors.New("routetable: invalid options")
	// ErrInvalidTarget reports a Target that is malformed or does not fit
	// its type, family or interface, or that the kernel would store in
	// another form (host bits set, an MTU above MaxMTU).
	ErrInvalidTarget = errors.New("routetable: invalid target")
	// ErrInvalidInterface reports an interface name the kernel would not
	// accept (empty, longer than 15 bytes, ".", "..", or with '/', ':',
	// NUL or white space), as the kernel's dev_valid_name checks it.
	ErrInvalidInterface = errors.New("routetable: invalid interface name")
	// ErrDuplicateRoute reports two targets with the same RouteKey in one
	// SetRoutes call.
	ErrDuplicateRoute = errors.New("routetable: duplicate route")
	// ErrIfaceDown classifies a route the kernel refused because its
	// interface is down (ENETDOWN). The route stays pending and is
	// retried.
	ErrIfaceDown = errors.New("routetable: interface down")
	// ErrIfaceGone classifies a route the kernel refused because its
	// interface does not exist (ENODEV). The route stays pending and is
	// retried.
	ErrIfaceGone = errors.New("routetable: interface gone")
	// ErrRouteFailed classifies any other failure to write one route. The
	// route stays pending and is retried on its own backoff.
	ErrRouteFailed = errors.New("routetable: route write failed")
	// ErrForeignRoute reports a desired route whose RouteKey is held by a
	// route the Table does not own (another protocol on an interface
	// outside its patterns). The Table never overwrites it: the desired
	// route stays pending until the foreign route is gone.
	ErrForeignRoute = errors.New("routetable: route key held by a foreign route")
	// ErrConntrack reports a failed conntrack deletion. Routes whose
	// address moved wait for it: they are written only after their
	// address's conntrack entries are deleted.
	ErrConntrack = errors.New("routetable: conntrack deletion failed")
	// ErrNeighbor reports a failed static neighbour write.
	ErrNeighbor = errors.New("routetable: neighbour write failed")
	// ErrDump reports a failed read of the kernel's routes, links or
	// neighbours.
	ErrDump = errors.New("routetable: kernel dump failed")
)

// prefix starts the text of every error of the package, once.
const prefix = "routetable: "

// bare returns err's text without the package prefix, to quote it inside
// another of the package's errors.
func bare(err error) string { return strings.TrimPrefix(err.Error(), prefix) }

// MaxReportedErrors is how many per-object errors an ApplyError keeps.
const MaxReportedErrors = 16

// RouteError is the failure of one route (or of the conntrack deletion it
// waited for). It wraps a classification sentinel (ErrIfaceDown,
// ErrIfaceGone, ErrRouteFailed, ErrForeignRoute or ErrConntrack) and the
// cause (a *kernel.OpError wrapping the kernel's errno, usually).
type RouteError struct {
	// Key is the route.
	Key RouteKey
	// Op is the operation that failed (kernel.OpReplace or
	// kernel.OpDelete).
	Op kernel.OpKind
	// Iface names the route's interface, when it has one.
	Iface string
	// Class is the classification sentinel.
	Class error
	// Err is the cause.
	Err error
}

// Error describes the route, the operation, the class and the cause, such
// as "routetable: replace 10.0.0.0/24 dev eth0: route write failed:
// invalid argument".
func (e *RouteError) Error() string {
	s := fmt.Sprintf("%s%s %v", prefix, e.Op, e.Key)
	if e.Iface != "" {
		s += " dev " + e.Iface
	}
	return s + ": " + bare(e.Class) + ": " + e.Err.Error()
}

// Unwrap returns the classification and the cause.
func (e *RouteError) Unwrap() []error { return []error{e.Class, e.Err} }

// ApplyError is what Apply returns when it wrote everything it could but
// some objects failed: routes the kernel refused or that wait for their
// next attempt, neighbour entries, conntrack deletions. Each failed object
// is retried on its own backoff (ApplyResult.RetryAfter asks for the
// earliest attempt). It wraps a *dataplane.PartialError, so errors.Is
// matches dataplane.ErrPartial and a dataplane.Loop counts the failed
// objects without backing the Table off.
type ApplyError struct {
	// Failed is the number of objects that were tried in this Apply and
	// failed.
	Failed int
	// Waiting is the number of objects that failed before and wait for
	// their next attempt.
	Waiting int
	// Errors are the first MaxReportedErrors object errors, sorted by
	// their text (*RouteError for routes; errors wrapping ErrNeighbor or
	// ErrConntrack for the rest).
	Errors []error
}

// Error summarises the failures.
func (e *ApplyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%d object(s) failed", prefix, e.Failed+e.Waiting)
	for i, err := range e.Errors {
		if i == 3 {
			fmt.Fprintf(&b, "; …")
			break
		}
		fmt.Fprintf(&b, "; %s", bare(err))
	}
	return b.String()
}

// Unwrap returns the failure as a *dataplane.PartialError, which wraps
// dataplane.ErrPartial and the collected errors, so errors.Is finds their
// sentinels.
func (e *ApplyError) Unwrap() []error {
	return []error{&dataplane.PartialError{Failed: e.Failed, Waiting: e.Waiting, Errs: e.Errors}}
}
