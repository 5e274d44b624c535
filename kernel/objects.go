package kernel

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Family is the IP family of an object: ipfamily.IPv4 or ipfamily.IPv6.
type Family = ipfamily.Family

// The two families, for brevity.
const (
	IPv4 = ipfamily.IPv4
	IPv6 = ipfamily.IPv6
)

// LinkState is what a consumer of interface state needs to know about a
// link: gone, down or up. Every package that passes interface state on
// (ifacemonitor to routetable, say) uses this one type.
type LinkState uint8

const (
	// LinkGone means no link of that name exists (deleted, renamed away,
	// moved to another namespace). It is the zero LinkState.
	LinkGone LinkState = iota
	// LinkDown means the link exists but is not up: administratively down,
	// or without carrier (a veth whose peer is down).
	LinkDown
	// LinkUp means administratively up (IFF_UP) and operational
	// (IFF_RUNNING).
	LinkUp
)

// String returns "gone", "down" or "up".
func (s LinkState) String() string {
	switch s {
	case LinkGone:
		return "gone"
	case LinkDown:
		return "down"
	case LinkUp:
		return "up"
	}
	return fmt.Sprintf("LinkState(%d)", uint8(s))
}

// Link kinds that the package creates and reports by name. A physical
// device and lo report KindDevice.
const (
	KindDevice    = "device"
	KindBridge    = "bridge"
	KindVeth      = "veth"
	KindVXLAN     = "vxlan"
	KindTUN       = "tun"
	KindWireGuard = "wireguard"
	KindIPIP      = "ipip"
)

// EncapEthernet is Link.Encap of an interface with Ethernet headers
// (physical NICs, veth, bridge, VXLAN, tap). Others the kernel reports are
// "none" (tun, WireGuard), "ipip", "loopback"….
const EncapEthernet = "ether"

// Link is a network interface.
type Link struct {
	// Index is the kernel's interface index; 0 in a Link given to AddLink.
	Index int
	// Name is the interface name.
	Name string
	// Kind is the link type: KindDevice, KindBridge, KindVeth, KindVXLAN…
	Kind string
	// MTU is the interface MTU; 0 in AddLink takes the kernel's default.
	MTU int
	// MAC is the link-layer address; nil in AddLink lets the kernel choose.
	MAC net.HardwareAddr
	// AdminUp is IFF_UP: the interface is administratively up.
	AdminUp bool
	// Running is IFF_RUNNING: the interface is operational (has carrier).
	Running bool
	// Encap is the link-layer type the kernel reports for the interface
	// (its hardware type): EncapEthernet, "none", "ipip", "loopback"…; empty
	// when unknown (a Link made by hand). AddLink ignores it.
	Encap string
	// MasterIndex is the bridge (or other master) the link is enslaved
	// to; 0 for none.
	MasterIndex int
	// VXLAN holds the VXLAN attributes of a KindVXLAN link.
	VXLAN *VXLAN
	// Veth holds the peer of a KindVeth link in AddLink.
	Veth *Veth
	// IPTunnel holds the attributes of a KindIPIP link.
	IPTunnel *IPTunnel
}

// State is the link's LinkState: LinkUp when AdminUp and Running, else
// LinkDown.
func (l *Link) State() LinkState {
	if l.AdminUp && l.Running {
		return LinkUp
	}
	return LinkDown
}

// VXLAN is the configuration of a VXLAN device.
type VXLAN struct {
	// VNI is the VXLAN network identifier.
	VNI uint32
	// Port is the UDP destination port (4789 is IANA's).
	Port uint16
	// ParentIndex is the underlay interface (the device's lower link);
	// 0 for none.
	ParentIndex int
	// Local is the source address of encapsulated packets; unset lets the
	// kernel choose.
	Local netip.Addr
	// Learning turns source-address learning on. Overlays driven by an
	// agent program their FDB and keep it off.
	Learning bool
}

// Veth is the peer of a veth pair, for AddLink.
type Veth struct {
	// PeerName is the peer interface's name.
	PeerName string
	// PeerNamespaceFD, when above 0, creates the peer directly inside
	// that network namespace (an open descriptor of it).
	PeerNamespaceFD int
}

// IPTunnel is the configuration of an IP-in-IP device.
type IPTunnel struct {
	// Local and Remote are the tunnel endpoints; unset for a device that
	// takes every peer (tunl0-style, with routes via each remote onlink).
	Local, Remote netip.Addr
	// ParentIndex binds the tunnel to an underlay interface; 0 for none.
	ParentIndex int
}

// Addr is an address assigned to an interface.
type Addr struct {
	// LinkIndex is the interface.
	LinkIndex int
	// Prefix is the address with its prefix length (10.0.0.5/24).
	Prefix netip.Prefix
}

// Family returns the address's family.
func (a Addr) Family() Family { return ipfamily.Of(a.Prefix.Addr()) }

// Route types (rtm_type) and scopes (rtm_scope), and the flags a route or
// next hop carries, as the kernel numbers them.
const (
	RTNUnicast     uint8 = 1
	RTNLocal       uint8 = 2
	RTNBroadcast   uint8 = 3
	RTNAnycast     uint8 = 4
	RTNMulticast   uint8 = 5
	RTNBlackhole   uint8 = 6
	RTNUnreachable uint8 = 7
	RTNProhibit    uint8 = 8
	RTNThrow       uint8 = 9

	ScopeUniverse uint8 = 0
	ScopeLink     uint8 = 253
	ScopeHost     uint8 = 254
	ScopeNowhere  uint8 = 255

	// FlagOnlink (RTNH_F_ONLINK) is the one flag a write sends: the
	// gateway is on the link even though no address says so.
	FlagOnlink uint32 = 4
	// FlagDead (RTNH_F_DEAD) and FlagLinkdown (RTNH_F_LINKDOWN) are state
	// the kernel reports in dumps, never configuration.
	FlagDead     uint32 = 1
	FlagLinkdown uint32 = 16
	// WritableFlags are the flags a write sends; compare routes on
	// Flags&WritableFlags.
	WritableFlags = FlagOnlink

	// ProtoKernel is RTPROT_KERNEL: routes the kernel adds for addresses.
	ProtoKernel uint8 = 2
	// ProtoBoot is RTPROT_BOOT, what `ip route add` uses by default.
	ProtoBoot uint8 = 3

	// TableDefault, TableMain and TableLocal are the kernel's reserved
	// routing tables.
	TableDefault uint32 = 253
	TableMain    uint32 = 254
	TableLocal   uint32 = 255

	// MaxRouteMTU is the largest route MTU the kernel stores; it caps
	// larger values silently.
	MaxRouteMTU = 65520
	// MaxNextHops is the largest number of next hops a route may have.
	MaxNextHops = 1024
)

// Route is one kernel route, as RTM_NEWROUTE and RTM_DELROUTE carry it and
// as a dump reports it. It is a plain value: NextHops is its only
// reference.
//
// The kernel keys a route by Family, Table, Dst, TOS and Priority (and, in
// IPv6, by next hop for routes that are not multipath). Source-specific
// IPv6 routes, next-hop objects, lightweight-tunnel encapsulation and
// metrics other than MTU are not represented: a dump reports such routes
// without them.
type Route struct {
	// Family is IPv4 or IPv6.
	Family Family
	// SrcLen is the length of the source prefix of a source-specific
	// route (IPv6 `ip route add D from S`), 0 for none; read from dumps,
	// never written. The kernel keeps such a route apart from the route
	// of the same destination and metric without one.
	SrcLen uint8
	// Table is the routing table. In a write, 0 means TableMain, as in
	// the kernel.
	Table uint32
	// Dst is the destination prefix, with no host bits set; /0 is the
	// default route.
	Dst netip.Prefix
	// Type is the route type: RTNUnicast, RTNLocal, RTNBlackhole,
	// RTNUnreachable, RTNProhibit or RTNThrow (dumps also report
	// RTNBroadcast and others). A delete with 0 matches any type.
	Type uint8
	// Protocol says who installed the route (ProtoBoot, ProtoKernel or an
	// agent's own number); drivers use it as an ownership mark.
	Protocol uint8
	// Scope is ScopeUniverse (via a gateway), ScopeLink (directly
	// connected) or ScopeHost (local). A delete with 0 matches any scope.
	Scope uint8
	// TOS is the IPv4 type-of-service selector; almost always 0.
	TOS uint8
	// Priority is the metric. The kernel turns 0 into 1024 for IPv6.
	Priority uint32
	// OIF is the output interface index; 0 for none and for multipath.
	OIF int
	// Gateway is the next hop; unset for direct routes. An IPv6 gateway
	// on an IPv4 route is sent as RTA_VIA.
	Gateway netip.Addr
	// PrefSrc is the preferred source address; unset when none.
	PrefSrc netip.Addr
	// Flags are the route's flags; only WritableFlags are sent, dumps
	// report state flags (FlagLinkdown…) too.
	Flags uint32
	// MTU is the path-MTU metric, 0 for none, at most MaxRouteMTU.
	MTU uint32
	// NextHops are the paths of a multipath route; nil for a single path,
	// which uses OIF and Gateway instead.
	NextHops []NextHop
	// NexthopID is the nexthop object a route uses (`ip route … nhid N`),
	// 0 for none; read from dumps, never written. The kernel dumps such a
	// route's OIF and Gateway too, but matches a delete that names an
	// interface against none of them: delete it by its key.
	NexthopID uint32
}

// NextHop is one path of a multipath route.
type NextHop struct {
	// OIF is the output interface index; 0 for none.
	OIF int
	// Gateway is the path's gateway; unset for a direct path.
	Gateway netip.Addr
	// Weight is the relative weight minus one, as the kernel stores it: 0
	// is weight 1 (the default), 255 is weight 256.
	Weight uint8
	// Flags are the path's flags (FlagOnlink; dumps also report FlagDead
	// and FlagLinkdown).
	Flags uint32
}

// Uses reports whether r leaves through the interface with index oif: as
// its output interface or as one of its next hops.
func (r *Route) Uses(oif int) bool {
	if r.OIF == oif {
		return true
	}
	for i := range r.NextHops {
		if r.NextHops[i].OIF == oif {
			return true
		}
	}
	return false
}

// OpKind is what a write does: OpReplace, OpAdd or OpDelete.
type OpKind uint8

const (
	// OpReplace creates the object or replaces the one with its key
	// (NLM_F_CREATE|NLM_F_REPLACE).
	OpReplace OpKind = iota + 1
	// OpAdd creates the object and fails with EEXIST when its key is
	// taken (NLM_F_CREATE|NLM_F_EXCL).
	OpAdd
	// OpDelete deletes the object with the key; fields left zero match
	// anything, as in the kernel. A missing object fails with ESRCH or
	// ENOENT.
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
	// Route is the route to write, or the key of the one to delete.
	Route Route
}

// Rule actions (FR_ACT_*), as the kernel numbers them.
const (
	RuleLookup      uint8 = 1
	RuleGoto        uint8 = 2
	RuleNop         uint8 = 3
	RuleBlackhole   uint8 = 6
	RuleUnreachable uint8 = 7
	RuleProhibit    uint8 = 8
)

// PortRange is a rule's port-range selector; the zero value is unset.
type PortRange struct {
	// Start and End are the first and last port of the range.
	Start, End uint16
}

// UIDRange is a rule's UID-range selector.
type UIDRange struct {
	// Start and End are the first and last UID of the range.
	Start, End uint32
	// Set reports whether the rule matches on UIDs at all.
	Set bool
}

// Suppressor is a rule's optional suppress_prefixlength or
// suppress_ifgroup. The zero value is unset, so a Rule literal that does
// not mention it has none (a value of 0 is a real selector).
type Suppressor struct {
	// Value is the prefix length or interface group.
	Value int
	// Set reports whether the rule has this suppressor at all.
	Set bool
}

// Rule is one routing policy rule as the kernel holds it. Zero selector
// fields match everything.
type Rule struct {
	// Family is IPv4 or IPv6.
	Family Family
	// Priority orders the rules: the kernel tries them from the lowest up.
	// 0 is not sent: an add lets the kernel choose, a delete matches any.
	Priority uint32
	// Action is RuleLookup, RuleGoto, RuleNop, RuleBlackhole,
	// RuleUnreachable or RuleProhibit.
	Action uint8
	// Table is the table a RuleLookup rule looks up.
	Table uint32
	// Goto is the priority a RuleGoto rule jumps to.
	Goto uint32
	// Invert negates the match (`ip rule add not …`).
	Invert bool
	// Src and Dst match the source and destination addresses; the zero
	// Prefix matches any.
	Src, Dst netip.Prefix
	// Mark and Mask match the firewall mark: (mark & Mask) == Mark. Mask
	// is 0 when the rule has no mark selector; a Mark written without a
	// Mask gets the kernel's full mask (0xffffffff), which dumps report.
	Mark, Mask uint32
	// IIF and OIF match the input and output interface names.
	IIF, OIF string
	// TOS matches the type of service, 0 for any.
	TOS uint8
	// IPProto matches the IP protocol, 0 for any.
	IPProto uint8
	// SrcPorts and DstPorts match port ranges.
	SrcPorts, DstPorts PortRange
	// UID matches the socket's UID range.
	UID UIDRange
	// Protocol says who installed the rule (RTPROT_*), 0 for unspecified.
	Protocol uint8
	// SuppressPrefixLen, when set, suppresses lookup results with a prefix
	// this long or shorter (suppress_prefixlength 0 hides the default
	// route).
	SuppressPrefixLen Suppressor
	// SuppressIfGroup, when set, suppresses results through interfaces of
	// this group.
	SuppressIfGroup Suppressor
	// Realm is the IPv4 realm (flow class); 0 when unset.
	Realm uint32
	// TunID matches the tunnel ID, 0 for any.
	TunID uint64
}

// Neighbour states (NUD_*), as the kernel numbers them.
const (
	NUDIncomplete uint16 = 0x01
	NUDReachable  uint16 = 0x02
	NUDStale      uint16 = 0x04
	NUDDelay      uint16 = 0x08
	NUDProbe      uint16 = 0x10
	NUDFailed     uint16 = 0x20
	NUDNoARP      uint16 = 0x40
	NUDPermanent  uint16 = 0x80
)

// Neighbor is a neighbour (ARP or NDP) entry.
type Neighbor struct {
	// LinkIndex is the interface.
	LinkIndex int
	// IP is the neighbour's address; its family is the entry's.
	IP netip.Addr
	// MAC is its link-layer address.
	MAC net.HardwareAddr
	// State is the NUD state; writes use NUDPermanent when it is 0.
	State uint16
	// Protocol says who installed the entry (NDA_PROTOCOL, Linux 5.0 and
	// later), 0 for unset; drivers use it as an ownership mark. A write
	// with 0 leaves the protocol of an existing entry as it is.
	Protocol uint8
}

// NeighborOp is one neighbour write: OpReplace, OpAdd (fails with
// ErrExists when the entry exists) or OpDelete.
type NeighborOp struct {
	// Kind is the operation.
	Kind OpKind
	// Neighbor is the entry to write, or the key (LinkIndex, IP) of the
	// one to delete.
	Neighbor Neighbor
}

// FDBEntry is a bridge forwarding-database entry of a VXLAN (or bridge)
// device: frames for MAC leave towards Dst.
type FDBEntry struct {
	// LinkIndex is the VXLAN (or bridge port) interface.
	LinkIndex int
	// MAC is the destination link-layer address (all zeros for the
	// default entry that floods unknown destinations).
	MAC net.HardwareAddr
	// Dst is the remote VTEP's underlay address; unset for a bridge port.
	Dst netip.Addr
	// Permanent is true for NUD_PERMANENT entries, the kind an agent
	// writes; an entry written with false is NUD_REACHABLE and ages out.
	Permanent bool
}

// FDBOp is one FDB write: OpReplace, OpAdd (fails with ErrExists when the
// MAC has an entry) or OpDelete. OpReplace of a unicast MAC replaces its
// remote; OpReplace of the all-zeros or a multicast MAC adds Dst to the
// remotes the flooded frames go to (the kernel keeps a list for those).
type FDBOp struct {
	// Kind is the operation.
	Kind OpKind
	// Entry is the entry to write, or the key (LinkIndex, MAC, Dst) of
	// the one to delete.
	Entry FDBEntry
}
