//go:build linux

package ifacemonitor

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// State is the state of an interface as the monitor reports it.
type State int

const (
	// StateGone means the interface no longer exists under this name: it
	// was deleted, renamed, moved to another namespace, or its new name is
	// filtered out. It is the zero State.
	StateGone State = iota
	// StateDown means the interface exists but is not up: it is
	// administratively down, or it has no carrier (a veth whose peer is
	// down, a NIC without a cable).
	StateDown
	// StateUp means the interface is administratively up (IFF_UP) and
	// operational (IFF_RUNNING: operational state up, or unknown for
	// devices that do not track a carrier, such as lo).
	StateUp
)

// String returns "gone", "down" or "up".
func (s State) String() string {
	switch s {
	case StateGone:
		return "gone"
	case StateDown:
		return "down"
	case StateUp:
		return "up"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// LinkUpdate reports a new interface, a change of its state, MTU or type,
// or its disappearance (State == StateGone).
type LinkUpdate struct {
	// Name is the interface name. Names are unique at any moment: an
	// interface that takes over a name is reported only after the update
	// that reports the name's previous holder gone.
	Name string
	// Index is the kernel's interface index. A name deleted and created
	// again is reported gone with the old index, then present with the
	// new one.
	Index int
	// State is up, down or gone.
	State State
	// MTU is the interface's MTU (the last known one when gone).
	MTU int
	// Type is the kernel's link kind: "device" (physical NICs and lo),
	// "veth", "bridge", "vxlan"…
	Type string
	// OldName is set when this update reports a renamed interface: the
	// consumer knew it as OldName, and a StateGone update for OldName (same
	// Index) came just before. Empty otherwise.
	OldName string
}

// Interface is one interface of a View.
type Interface struct {
	// Name, Index, State, MTU and Type are as in LinkUpdate; State is
	// never StateGone.
	Name  string
	Index int
	State State
	MTU   int
	Type  string
	// Addrs are the interface's addresses with their prefix lengths,
	// sorted (see SortPrefixes).
	Addrs []netip.Prefix
}

// RouteKey identifies a route: the kernel keeps at most one route per key
// (routes appended with NLM_F_APPEND that differ only in their gateway are
// the exception and are collapsed into one).
type RouteKey struct {
	// Table is the routing table (254 main, 255 local…).
	Table int
	// Dst is the destination prefix; 0.0.0.0/0 or ::/0 for a default
	// route.
	Dst netip.Prefix
	// Priority is the route's metric.
	Priority int
	// TOS is the IPv4 type-of-service selector (0 for IPv6).
	TOS int
	// LinkIndex is the output interface, 0 for multipath routes and routes
	// without one.
	LinkIndex int
}

// Nexthop is one path of a multipath route.
type Nexthop struct {
	// LinkIndex is the path's output interface.
	LinkIndex int
	// Gw is the path's gateway; invalid when there is none.
	Gw netip.Addr
}

// Route is a route as the monitor reports it (with Options.WatchRoutes).
// Cloned (cache) routes are never reported.
type Route struct {
	// Table, Dst, Priority, TOS and LinkIndex make the route's Key.
	Table     int
	Dst       netip.Prefix
	Priority  int
	TOS       int
	LinkIndex int
	// Type is the route type (unix.RTN_UNICAST, RTN_LOCAL,
	// RTN_BROADCAST…).
	Type int
	// Protocol says who installed the route (unix.RTPROT_KERNEL,
	// RTPROT_BOOT, RTPROT_STATIC or a routing daemon's number).
	Protocol int
	// Scope is the route's scope (unix.RT_SCOPE_UNIVERSE, RT_SCOPE_LINK,
	// RT_SCOPE_HOST…).
	Scope int
	// Gw is the gateway; invalid for direct routes.
	Gw netip.Addr
	// Src is the preferred source address; invalid when unset.
	Src netip.Addr
	// Nexthops are the paths of a multipath route; nil otherwise.
	Nexthops []Nexthop
}

// Key returns the route's identity.
func (r Route) Key() RouteKey {
	return RouteKey{Table: r.Table, Dst: r.Dst, Priority: r.Priority, TOS: r.TOS, LinkIndex: r.LinkIndex}
}

// Equal reports whether r and o are the same route with the same
// attributes.
func (r Route) Equal(o Route) bool {
	return r.Table == o.Table && r.Dst == o.Dst && r.Priority == o.Priority && r.TOS == o.TOS &&
		r.LinkIndex == o.LinkIndex && r.Type == o.Type && r.Protocol == o.Protocol && r.Scope == o.Scope &&
		r.Gw == o.Gw && r.Src == o.Src && slices.Equal(r.Nexthops, o.Nexthops)
}

// RouteUpdate reports a new or changed route, or its removal (Gone).
type RouteUpdate struct {
	// Route is the route; for a removal, as it was last reported.
	Route Route
	// Gone is set when the route no longer exists.
	Gone bool
}

// View is a copy of what the monitor has reported so far: the consumer's
// view, which equals the kernel's once the monitor has caught up (and, with
// flap damping, once no down report is being held back).
type View struct {
	// Interfaces are the reported interfaces, sorted by name.
	Interfaces []Interface
	// Routes are the reported routes (empty unless Options.WatchRoutes),
	// sorted by CompareRouteKeys of their keys.
	Routes []Route
}

// Interface returns the interface called name, and false if the view has
// none.
func (v View) Interface(name string) (Interface, bool) {
	i, ok := slices.BinarySearchFunc(v.Interfaces, name, func(x Interface, n string) int { return cmp.Compare(x.Name, n) })
	if !ok {
		return Interface{}, false
	}
	return v.Interfaces[i], true
}

// ComparePrefixes orders prefixes by address (IPv4 before IPv6), then by
// prefix length. It is the order of every address list the monitor
// reports.
func ComparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// SortPrefixes sorts ps in place in ComparePrefixes order.
func SortPrefixes(ps []netip.Prefix) { slices.SortFunc(ps, ComparePrefixes) }

// CompareRouteKeys orders route keys by table, destination, priority, TOS
// and output interface.
func CompareRouteKeys(a, b RouteKey) int {
	return cmp.Or(
		cmp.Compare(a.Table, b.Table),
		ComparePrefixes(a.Dst, b.Dst),
		cmp.Compare(a.Priority, b.Priority),
		cmp.Compare(a.TOS, b.TOS),
		cmp.Compare(a.LinkIndex, b.LinkIndex),
	)
}

// Stats are counters about a monitor's work, for tests, metrics and
// debugging.
type Stats struct {
	// Events counts the link, address and route events applied.
	Events uint64
	// Batches counts the rounds (a batch of events, a re-list or a
	// damping timer) that changed the monitor's model and were compared
	// with the reported view.
	Batches uint64
	// Resyncs counts the Resync notices from the subscriptions, the first
	// one included: each asks for a re-list.
	Resyncs uint64
	// SubscriptionLosses counts Resync notices after a lost subscription
	// (any cause, overflows included).
	SubscriptionLosses uint64
	// Overflows counts Resync notices after the kernel dropped events
	// because a receive buffer was full (ENOBUFS).
	Overflows uint64
	// SubscribeErrors counts failed attempts to subscribe; they are
	// retried.
	SubscribeErrors uint64
	// Relists counts completed re-lists of every kind asked for, each
	// diffed against the view: the first one, after Resync notices, and
	// periodic ones.
	Relists uint64
	// PeriodicRelists counts the re-lists started by
	// Options.ResyncInterval.
	PeriodicRelists uint64
	// RelistErrors counts failed dumps; they are retried with backoff.
	RelistErrors uint64
	// CallbackPanics counts panics recovered from the callbacks.
	CallbackPanics uint64
	// InSync is set just before OnInSync is called.
	InSync bool
}
