package routetable

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// Kernel is the part of netlink a Table uses, in one network namespace.
// OpenKernel returns the real one; package routetablefake has an in-memory
// one for tests. A wrapper can count or break calls (failure injection on
// the real kernel).
//
// A Table calls its Kernel from Apply only, never concurrently.
type Kernel interface {
	// DumpRoutes calls fn for every route of family in table (0: every
	// table; cloned cache routes excluded). The route is only valid during the call. If
	// the kernel interrupts the dump (a concurrent change) and the dump
	// starts over, reset is called before fn sees the first route again.
	// An error from fn ends the dump and is returned.
	DumpRoutes(ctx context.Context, family Family, table uint32, fn func(*KernelRoute) error, reset func()) error
	// DumpInterfaceRoutes is DumpRoutes limited to the routes that leave
	// through the interface with index oif (> 0): as their interface or
	// as one of their next hops. A Table calls it for an interface that
	// comes up, instead of reading the whole table.
	DumpInterfaceRoutes(ctx context.Context, family Family, table uint32, oif int, fn func(*KernelRoute) error, reset func()) error
	// ApplyRoutes performs ops in order and returns one error per op (nil
	// for success). Errors wrap the kernel's errno (unix.Errno).
	ApplyRoutes(ctx context.Context, ops []RouteOp) []error
	// Links lists the namespace's interfaces.
	Links(ctx context.Context) ([]Link, error)
	// Neighbors lists the neighbour (ARP or NDP) entries of family.
	Neighbors(ctx context.Context, family Family) ([]Neighbor, error)
	// SetNeighbor creates or replaces a permanent neighbour entry.
	SetNeighbor(ctx context.Context, n Neighbor) error
	// DeleteNeighbor deletes a neighbour entry; a missing one is not an
	// error.
	DeleteNeighbor(ctx context.Context, n Neighbor) error
	ConntrackDeleter
}

// ConntrackDeleter deletes conntrack entries. Options.ConntrackDeleter
// replaces the Kernel's.
type ConntrackDeleter interface {
	// DeleteConntrack deletes every conntrack entry of family in which
	// one of addrs is the source or destination of either direction, and
	// returns how many it deleted.
	DeleteConntrack(ctx context.Context, family Family, addrs []netip.Addr) (int, error)
}

// ConntrackDeleterFunc adapts a function to ConntrackDeleter.
type ConntrackDeleterFunc func(ctx context.Context, family Family, addrs []netip.Addr) (int, error)

// DeleteConntrack calls f.
func (f ConntrackDeleterFunc) DeleteConntrack(ctx context.Context, family Family, addrs []netip.Addr) (int, error) {
	return f(ctx, family, addrs)
}

// Kernel route attribute values the package uses (the kernel's, as in
// golang.org/x/sys/unix), so callers of the Kernel interface need not
// import unix.
const (
	// RTNUnicast and the other RTN constants are route types (rtm_type).
	RTNUnicast     uint8 = 1
	RTNLocal       uint8 = 2
	RTNBlackhole   uint8 = 6
	RTNUnreachable uint8 = 7
	RTNProhibit    uint8 = 8
	RTNThrow       uint8 = 9

	// ScopeUniverse and the other Scope constants are route scopes
	// (rtm_scope). ScopeNowhere in a delete matches any scope.
	ScopeUniverse uint8 = 0
	ScopeLink     uint8 = 253
	ScopeHost     uint8 = 254
	ScopeNowhere  uint8 = 255

	// FlagOnlink is RTNH_F_ONLINK, in KernelRoute.Flags and
	// KernelNextHop.Flags.
	FlagOnlink uint32 = 4
	// FlagDead (RTNH_F_DEAD) and FlagLinkdown (RTNH_F_LINKDOWN) are
	// reported in dumps, never written: a next hop whose interface is
	// down is dead (and linkdown), a route or next hop whose interface
	// has lost its carrier is linkdown.
	FlagDead     uint32 = 1
	FlagLinkdown uint32 = 16

	// ProtoKernel is RTPROT_KERNEL: routes the kernel adds for addresses.
	ProtoKernel uint8 = 2
	// ProtoBoot is RTPROT_BOOT: routes added at boot or by hand (`ip
	// route add` without a protocol).
	ProtoBoot uint8 = 3

	// TableDefault (RT_TABLE_DEFAULT), TableMain (RT_TABLE_MAIN) and
	// TableLocal (RT_TABLE_LOCAL) are the kernel's reserved tables.
	TableDefault uint32 = 253
	TableMain    uint32 = 254
	TableLocal   uint32 = 255
)

// KernelRoute is a route as the kernel holds it: what a dump reports and
// what ApplyRoutes writes.
type KernelRoute struct {
	// Family is IPv4 or IPv6.
	Family Family
	// Table is the routing table.
	Table uint32
	// Dst is the destination.
	Dst netip.Prefix
	// Type is the route type (RTNUnicast, RTNLocal, RTNBlackhole…); 0
	// in a delete matches any type.
	Type uint8
	// Protocol says who installed the route; 0 in a delete matches any.
	Protocol uint8
	// Scope is the route's scope; ScopeNowhere in a delete matches any.
	Scope uint8
	// TOS is the IPv4 type-of-service selector. A Table writes 0 and
	// never touches routes with another TOS.
	TOS uint8
	// Priority is the metric.
	Priority uint32
	// OIF is the output interface's index; 0 for none or multipath.
	OIF int
	// Gateway is the next hop's address; unset for direct routes.
	Gateway netip.Addr
	// PrefSrc is the preferred source address; unset when none.
	PrefSrc netip.Addr
	// Flags are next-hop flags (FlagOnlink; the kernel reports others,
	// such as linkdown, in dumps).
	Flags uint32
	// MTU is the route's MTU metric; 0 when unset.
	MTU uint32
	// NextHops are the paths of a multipath route; nil otherwise.
	NextHops []KernelNextHop
}

// KernelNextHop is one path of a multipath KernelRoute.
type KernelNextHop struct {
	// OIF is the path's output interface index.
	OIF int
	// Gateway is the path's gateway; unset for a direct path.
	Gateway netip.Addr
	// Weight is the path's relative weight minus one, as the kernel
	// stores it (rtnh_hops): 0 is weight 1, the default.
	Weight uint8
	// Flags are next-hop flags (FlagOnlink; dumps also report FlagDead
	// and FlagLinkdown).
	Flags uint8
}

// OpKind is what a RouteOp does.
type OpKind uint8

const (
	// OpReplace creates the route or replaces the one with its key
	// (NLM_F_CREATE|NLM_F_REPLACE).
	OpReplace OpKind = iota + 1
	// OpAdd creates the route and fails with EEXIST if its key is taken
	// (NLM_F_CREATE|NLM_F_EXCL).
	OpAdd
	// OpDelete deletes the route with the key; the kernel answers ESRCH
	// when there is none.
	OpDelete
)

// String returns "replace", "add" or "delete".
func (k OpKind) String() string {
	switch k {
	case OpReplace:
		return "replace"
	case OpAdd:
		return "add"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// RouteOp is one route write.
type RouteOp struct {
	// Kind is the operation.
	Kind OpKind
	// Route is the route to write; for a delete, its key fields (family,
	// table, destination, priority) and whatever else must match.
	Route KernelRoute
}

// Link is an interface as Kernel.Links reports it.
type Link struct {
	// Name is the interface's name.
	Name string
	// Index is the interface's index.
	Index int
	// Up is true when the interface is administratively up and running
	// (has carrier), as ifacemonitor's StateUp.
	Up bool
}

// Neighbor is a neighbour (ARP or NDP) entry.
type Neighbor struct {
	// LinkIndex is the interface's index.
	LinkIndex int
	// IP is the neighbour's address.
	IP netip.Addr
	// MAC is its link-layer address.
	MAC net.HardwareAddr
	// Permanent is true for a NUD_PERMANENT entry (all entries a Table
	// writes are permanent).
	Permanent bool
}
