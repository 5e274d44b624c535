package routetable

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is. An error's text names the package once:
// an error that wraps two sentinels (ErrInvalidInterface inside
// ErrInvalidTarget, say) prints "routetable: " once and matches both.
//
// Apply's per-object failures are *dataplane.ObjectError in a
// *dataplane.PartialError: Kind "route" (Op "replace" or "delete", Name
// the RouteKey and its device), "neighbour" or "conntrack", Reason one of
// ErrIfaceDown, ErrIfaceGone, ErrRouteFailed, ErrForeignRoute,
// ErrConntrack or ErrNeighbor, and Err the kernel's error. A route's
// ObjectError.Object is its RouteObject.
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

// RouteObject names a route in a *dataplane.ObjectError (its Object): the
// key and, when the route has one, its interface.
type RouteObject struct {
	// Key is the route.
	Key RouteKey
	// Iface names the route's interface, or is empty.
	Iface string
}

// String returns the key and its device, as in "10.0.0.0/24 dev eth0".
func (o RouteObject) String() string {
	if o.Iface == "" {
		return o.Key.String()
	}
	return o.Key.String() + " dev " + o.Iface
}
