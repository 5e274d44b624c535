package ifacemonitor

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// LinkUpdate reports a new interface, a change of its state, MTU or kind,
// or its disappearance (State == kernel.LinkGone).
type LinkUpdate struct {
	// Name is the interface name. Names are unique at any moment: an
	// interface that takes over a name is reported only after the update
	// that reports the name's previous holder gone.
	Name string
	// Index is the kernel's interface index. A name deleted and created
	// again is reported gone with the old index, then present with the
	// new one.
	Index int
	// State is kernel.LinkUp, kernel.LinkDown or kernel.LinkGone, as
	// kernel.Link.State defines them; routetable.Table's
	// OnIfaceStateChanged takes it as it is.
	State kernel.LinkState
	// MTU is the interface's MTU (the last known one when gone).
	MTU int
	// Kind is the kernel's link kind: kernel.KindDevice (physical NICs and
	// lo), kernel.KindVeth, kernel.KindBridge…
	Kind string
	// Encap is the link-layer type the kernel reports
	// (kernel.Link.Encap): kernel.EncapEthernet, "none", "loopback"….
	Encap string
	// OldName is set when this update reports a renamed interface: the
	// consumer knew it as OldName, and a LinkGone update for OldName (same
	// Index) came just before. Empty otherwise.
	OldName string
}

// Link returns the update as a kernel.Link, the form dataplane.Loop's
// OnLink takes (LinkUpdate.Link and State are its two arguments): Name,
// Index, MTU, Kind and Encap, with AdminUp and Running both set when State is
// kernel.LinkUp, so that its State method agrees with u.State for an
// interface that exists.
func (u LinkUpdate) Link() kernel.Link {
	up := u.State == kernel.LinkUp
	return kernel.Link{Name: u.Name, Index: u.Index, MTU: u.MTU, Kind: u.Kind, Encap: u.Encap, AdminUp: up, Running: up}
}

// Interface is one interface of a View.
type Interface struct {
	// Name, Index, State, MTU, Kind and Encap are as in LinkUpdate; State
	// is never kernel.LinkGone.
	Name  string
	Index int
	State kernel.LinkState
	MTU   int
	Kind  string
	Encap string
	// Addrs are the interface's addresses with their prefix lengths,
	// sorted by address (IPv4 before IPv6), then by prefix length.
	Addrs []netip.Prefix
}

// RouteUpdate reports a new or changed route, or its removal (Gone), with
// Options.WatchRoutes.
type RouteUpdate struct {
	// Route is the route as a dump reports it, with Flags limited to
	// kernel.WritableFlags (see the package documentation); for a removal,
	// as it was last reported. The consumer may keep it.
	Route kernel.Route
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
	// sorted by family, table, destination, metric, TOS, type, output
	// interface and gateway.
	Routes []kernel.Route
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

// comparePrefixes orders prefixes by address (IPv4 before IPv6), then by
// prefix length: the order of every address list the monitor reports.
func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// Stats are counters about a monitor's work, for tests, metrics and
// debugging.
type Stats struct {
	// Events counts the link, address and route events applied.
	Events uint64
	// StaleEvents counts the events dropped because they came before the
	// barrier placed for a later listing of their kind, which showed their
	// change (or a later one) already.
	StaleEvents uint64
	// Batches counts the rounds (a batch of events, a re-list or a
	// damping timer) that changed the monitor's model and were compared
	// with the reported view.
	Batches uint64
	// Resyncs counts the Resync notices of the subscription, the first
	// one included: each asks for a re-list.
	Resyncs uint64
	// SubscriptionLosses counts Resync notices after a lost subscription
	// (any cause, overflows included).
	SubscriptionLosses uint64
	// Overflows counts Resync notices after the kernel dropped events
	// because a receive buffer was full (a Reason wrapping
	// kernel.ErrOverflow).
	Overflows uint64
	// SubscribeErrors counts failed attempts to subscribe (Err events);
	// the Kernel retries them.
	SubscribeErrors uint64
	// Relists counts completed re-lists of every kind asked for, each
	// diffed against the view: the first one, after Resync notices, and
	// periodic ones.
	Relists uint64
	// PeriodicRelists counts the re-lists started by
	// Options.ResyncInterval.
	PeriodicRelists uint64
	// RelistErrors counts failed listings; they are retried with backoff.
	RelistErrors uint64
	// CallbackPanics counts panics recovered from the callbacks.
	CallbackPanics uint64
	// InSync is set just before OnInSync is called.
	InSync bool
}
