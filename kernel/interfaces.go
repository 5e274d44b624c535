package kernel

import (
	"context"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/command"
)

// The narrow interfaces below are what drivers and monitors take: each
// names only what it uses, so that a test can hand it a
// kernelfake.Namespace and a wrapper can count or break calls. A
// *Namespace implements all of them for one network namespace. Every
// method honours ctx; a nil ctx is context.Background().

// Links reads and changes network interfaces.
type Links interface {
	// Links lists every interface.
	Links(ctx context.Context) ([]Link, error)
	// LinkByName returns the interface called name, or an error wrapping
	// ErrNotFound.
	LinkByName(ctx context.Context, name string) (Link, error)
	// AddLink creates an interface of l.Kind (KindBridge, KindVeth,
	// KindVXLAN, KindIPIP, KindWireGuard) with l's name, MTU, MAC and kind
	// attributes, administratively down, and returns it as the kernel
	// reports it. A taken name fails with an error wrapping ErrExists.
	AddLink(ctx context.Context, l Link) (Link, error)
	// DeleteLink deletes the interface with index (a veth takes its peer
	// with it). A missing interface wraps ErrNotFound.
	DeleteLink(ctx context.Context, index int) error
	// SetLinkUp sets the interface administratively up or down.
	SetLinkUp(ctx context.Context, index int, up bool) error
	// SetLinkMTU sets the interface's MTU.
	SetLinkMTU(ctx context.Context, index, mtu int) error
	// SetLinkMAC sets the interface's link-layer address.
	SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error
}

// Addrs reads and changes interface addresses.
type Addrs interface {
	// Addrs lists the addresses of family on every interface.
	Addrs(ctx context.Context, family Family) ([]Addr, error)
	// AddAddr assigns an address (with its prefix length) to an
	// interface; one already assigned wraps ErrExists.
	AddAddr(ctx context.Context, a Addr) error
	// DeleteAddr removes an address from an interface; a missing one
	// wraps ErrNotFound.
	DeleteAddr(ctx context.Context, a Addr) error
}

// Routes reads and writes routes, batched: many writes per system call,
// dumps decoded without an allocation per route.
type Routes interface {
	// DumpRoutes calls fn for every route of family in table (0: every
	// table; cloned cache routes excluded). The *Route is only valid
	// during the call. When the kernel interrupts the dump (a concurrent
	// change) and the dump starts over, reset is called before fn sees the
	// first route again. An error from fn ends the dump and is returned.
	DumpRoutes(ctx context.Context, family Family, table uint32, fn func(*Route) error, reset func()) error
	// DumpInterfaceRoutes is DumpRoutes limited to the routes that leave
	// through the interface with index oif (> 0), as their interface or
	// as one of their next hops; the kernel filters where it can.
	DumpInterfaceRoutes(ctx context.Context, family Family, table uint32, oif int, fn func(*Route) error, reset func()) error
	// ApplyRoutes performs ops in order and returns one error per op (nil
	// for success). An invalid op fails alone, wrapping ErrInvalid, and is
	// never sent; a refused one wraps the kernel's errno.
	ApplyRoutes(ctx context.Context, ops []RouteOp) []error
}

// Rules reads and changes routing policy rules.
type Rules interface {
	// Rules lists the rules of family.
	Rules(ctx context.Context, family Family) ([]Rule, error)
	// AddRule adds a rule; an identical one fails with ErrExists.
	AddRule(ctx context.Context, r Rule) error
	// DeleteRule deletes the first rule that matches r's set fields, as
	// the kernel does; none wraps ErrNotFound.
	DeleteRule(ctx context.Context, r Rule) error
}

// Neighbors reads and writes neighbour (ARP and NDP) entries, batched.
type Neighbors interface {
	// Neighbors lists the entries of family on the interface with index
	// linkIndex (0: every interface).
	Neighbors(ctx context.Context, family Family, linkIndex int) ([]Neighbor, error)
	// ApplyNeighbors performs ops in order and returns one error per op.
	ApplyNeighbors(ctx context.Context, ops []NeighborOp) []error
}

// FDB reads and writes bridge forwarding-database entries (the remote
// VTEPs of a VXLAN device), batched.
type FDB interface {
	// FDB lists the device's own entries (NTF_SELF: a VXLAN device's MACs,
	// one entry per remote) of the interface with index linkIndex (0:
	// every interface).
	FDB(ctx context.Context, linkIndex int) ([]FDBEntry, error)
	// ApplyFDB performs ops in order and returns one error per op.
	ApplyFDB(ctx context.Context, ops []FDBOp) []error
}

// Sysctls reads and writes the namespace's sysctls (net.* keys, which are
// per namespace). Keys are written with dots or slashes:
// "net.ipv4.ip_forward" or "net/ipv4/ip_forward". A key with a slash is
// split at slashes only, so an interface name keeps its dots there
// ("net/ipv4/conf/eth0.100/rp_filter"); a key without one is split at
// every dot ("net.ipv4.conf.eth0.100.rp_filter" names eth0/100, which does
// not exist). Keys outside net, absolute paths and "." or ".." components
// wrap ErrInvalid.
type Sysctls interface {
	// Sysctl returns the value, without its trailing newline. A missing
	// key wraps ErrNotFound.
	Sysctl(ctx context.Context, key string) (string, error)
	// SetSysctl writes the value.
	SetSysctl(ctx context.Context, key, value string) error
}

// Conntrack deletes connection-tracking entries.
type Conntrack interface {
	// DeleteConntrack deletes every entry of family in which one of addrs
	// is the source or destination of either direction, and returns how
	// many it deleted.
	DeleteConntrack(ctx context.Context, family Family, addrs []netip.Addr) (int, error)
}

// Events streams link, address and route changes.
type Events interface {
	// Subscribe starts a stream of the kinds asked for, every kind in the
	// order the kernel announced the changes. Its first event is a
	// Resync; whenever events are lost (the receive buffer overflowed) it
	// subscribes again and sends another Resync, whose Reason wraps
	// ErrOverflow, so a consumer that lists again on every Resync never
	// misses a change. opts holds at most one SubscribeOptions; none means
	// the defaults, and bad options are an error wrapping ErrInvalid
	// (CheckSubscribeOptions). The channel is closed once ctx has ended
	// and everything Subscribe started has stopped.
	Subscribe(ctx context.Context, kinds EventKinds, opts ...SubscribeOptions) (<-chan Event, error)
}

// Receive buffer sizes of a subscription (SubscribeOptions).
const (
	// DefaultReceiveBufferSize is the socket receive buffer of a
	// subscription when SubscribeOptions.ReceiveBufferSize is 0: large
	// enough for the burst of events when thousands of routes or
	// addresses change at once.
	DefaultReceiveBufferSize = 8 << 20
	// MaxReceiveBufferSize is the largest receive buffer a subscription
	// may ask for.
	MaxReceiveBufferSize = 1 << 30
)

// SubscribeOptions tune a subscription. The zero value picks the
// defaults.
type SubscribeOptions struct {
	// ReceiveBufferSize is the socket receive buffer in bytes: how many
	// events the kernel holds for a consumer that is busy before it drops
	// them (an overflow, then a Resync and a re-list). Busy nodes raise
	// it; tests lower it to make overflows. The kernel doubles it for its
	// accounting and raises a tiny one to its minimum (a few KiB); it is
	// forced past net.core.rmem_max when the process has CAP_NET_ADMIN.
	// 0 means DefaultReceiveBufferSize; negative or above
	// MaxReceiveBufferSize is an error.
	ReceiveBufferSize int
	// Barriers, when not nil, is called by Subscribe before it returns,
	// with the function that places a barrier in the stream (see
	// BarrierFunc). An implementation without barriers does not call it.
	Barriers func(BarrierFunc)
}

// BarrierFunc places a barrier in a subscription's stream and returns its
// ID: the stream then carries an Event whose Barrier has that ID, after
// every event of a change the kernel announced before the call returned
// and before every event of a change announced after it began. A consumer
// that places a barrier and then lists the kernel knows that the events
// before the barrier are older than its listing, so they must not be
// applied on top of it. Barriers are delivered in order, each before the
// Resync of a renewed subscription; one that cannot be placed (no live
// subscription: a Resync follows) is an error. Safe from any goroutine; it
// never waits for the stream to be read.
type BarrierFunc func() (uint64, error)

// CheckSubscribeOptions returns the options of a Subscribe call with their
// defaults filled in, or an error wrapping ErrInvalid: more than one
// SubscribeOptions, or a ReceiveBufferSize that is negative or above
// MaxReceiveBufferSize. Implementations of Events call it.
func CheckSubscribeOptions(opts ...SubscribeOptions) (SubscribeOptions, error) {
	var o SubscribeOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return o, invalid("%d SubscribeOptions (want at most one)", len(opts))
	}
	switch {
	case o.ReceiveBufferSize < 0:
		return o, invalid("negative receive buffer size %d", o.ReceiveBufferSize)
	case o.ReceiveBufferSize > MaxReceiveBufferSize:
		return o, invalid("receive buffer size %d above %d (MaxReceiveBufferSize)", o.ReceiveBufferSize, MaxReceiveBufferSize)
	case o.ReceiveBufferSize == 0:
		o.ReceiveBufferSize = DefaultReceiveBufferSize
	}
	return o, nil
}

// Commands runs the binaries some drivers still need (iptables-restore,
// ipset) inside the namespace.
type Commands interface {
	// Runner returns a runner whose processes act on the namespace.
	Runner() command.Runner
}

// Doer runs work on an OS thread inside the namespace: the work that opens
// sockets this package has no codec for, which must be made there — a
// WireGuard client (wgctrl's generic netlink socket), a userspace
// WireGuard device's TUN and UDP sockets, TCX attachments, an nftables
// connection. A *Namespace implements it; kernelfake's Namespace, which has
// no thread to run work on, fails every Do with ErrNotSupported. Drivers
// that need it take it by name in their Kernel interface.
type Doer interface {
	// Do runs fn on a thread inside the namespace and returns its error.
	Do(fn func() error) error
}

// Kernel is everything one network namespace offers. *Namespace and
// kernelfake's Namespace implement it; drivers take the narrow
// interfaces it is made of.
type Kernel interface {
	Links
	Addrs
	Routes
	Rules
	Neighbors
	FDB
	Sysctls
	Conntrack
	Events
	Commands
	Doer
	NFTables
	WireGuard
}

// EventKinds selects what a subscription streams; combine with |.
type EventKinds uint8

const (
	// EventLinks streams link changes.
	EventLinks EventKinds = 1 << iota
	// EventAddrs streams address changes.
	EventAddrs
	// EventRoutes streams route changes.
	EventRoutes
)

// Event is one message of a subscription. Exactly one field is set.
type Event struct {
	// Link reports a new, changed or deleted link.
	Link *LinkEvent
	// Addr reports an added or removed address.
	Addr *AddrEvent
	// Route reports an added, replaced or deleted route.
	Route *RouteEvent
	// Resync says that the stream of Kinds (re)started and events may have
	// been lost before it: list those kinds again.
	Resync *Resync
	// Barrier is a barrier placed with a BarrierFunc.
	Barrier *Barrier
	// Err reports a failed attempt to subscribe, which is retried.
	Err error
}

// LinkEvent is a link change.
type LinkEvent struct {
	// Link is the link as the kernel reports it (the last state when
	// Deleted).
	Link Link
	// Deleted is true when the link is gone.
	Deleted bool
}

// AddrEvent is an address change.
type AddrEvent struct {
	// Addr is the address.
	Addr Addr
	// Deleted is true when it was removed.
	Deleted bool
}

// RouteEvent is a route change.
type RouteEvent struct {
	// Route is the route.
	Route Route
	// Deleted is true when it was deleted.
	Deleted bool
}

// Barrier is the mark a BarrierFunc placed in a stream.
type Barrier struct {
	// ID is what the BarrierFunc returned.
	ID uint64
}

// Resync is the notice that a stream (re)started.
type Resync struct {
	// Kinds are the kinds whose stream (re)started.
	Kinds EventKinds
	// Reason is nil for the first Resync and says why events were lost
	// otherwise (wrapping ErrOverflow for a full receive buffer).
	Reason error
}
