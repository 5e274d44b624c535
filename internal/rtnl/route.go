//go:build linux

package rtnl

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// WritableFlags are the route and next-hop flags a write sends
// (RTNH_F_ONLINK). Every other flag the kernel reports in a dump
// (RTNH_F_DEAD, RTNH_F_LINKDOWN, RTNH_F_OFFLOAD, RTNH_F_TRAP,
// RTNH_F_UNRESOLVED, RTM_F_…) is state, not configuration: it is dropped on
// write, so a dumped route can be written back as it is. Compare routes on
// Flags&WritableFlags.
const WritableFlags = unix.RTNH_F_ONLINK

// MaxNextHops is the largest number of next hops a route may have.
const MaxNextHops = 1024

// Route is one kernel route, as RTM_NEWROUTE / RTM_DELROUTE carry it. It is
// a plain value (136 bytes; NextHops is its only reference), decoded
// straight from dumps and encoded straight into write buffers.
//
// The kernel keys a route by Family, Table, Dst, TOS and Priority (and, in
// IPv6, by next hop for routes that are not multipath). Source-specific
// IPv6 routes (RTA_SRC), next-hop objects (RTA_NH_ID), lightweight tunnel
// encapsulation and metrics other than MTU are not represented: a dump
// reports such routes without them.
type Route struct {
	// Family is unix.AF_INET or unix.AF_INET6.
	Family uint8
	// Table is the routing table (RTA_TABLE, so tables above 255 work). In
	// a write, 0 means the main table (254), as in the kernel.
	Table uint32
	// Dst is the destination prefix, masked (10.0.0.0/8, not 10.1.2.3/8);
	// /0 is the default route.
	Dst netip.Prefix
	// Type is the route type: unix.RTN_UNICAST, RTN_LOCAL, RTN_BLACKHOLE,
	// RTN_UNREACHABLE, RTN_PROHIBIT or RTN_THROW. A write of a route needs
	// one; a delete with 0 matches any type.
	Type uint8
	// Protocol is who installed the route (unix.RTPROT_BOOT, RTPROT_STATIC
	// or an agent's own number); drivers use it as an ownership mark.
	Protocol uint8
	// Scope is unix.RT_SCOPE_UNIVERSE (0, routes via a gateway),
	// RT_SCOPE_LINK (directly connected) or RT_SCOPE_HOST (local). A write
	// sends it as given: the caller chooses it (OpDelete: see there).
	Scope uint8
	// TOS is the IPv4 type-of-service selector (rtm_tos); almost always 0.
	TOS uint8
	// Priority is the route metric (RTA_PRIORITY). The kernel turns 0 into
	// 1024 for IPv6.
	Priority uint32
	// OIF is the output interface index (RTA_OIF); 0 for none.
	OIF int32
	// Gateway is the next hop (RTA_GATEWAY). An IPv6 gateway on an IPv4
	// route is sent as RTA_VIA (IPv4 over an IPv6 next hop).
	Gateway netip.Addr
	// PrefSrc is the preferred source address (RTA_PREFSRC).
	PrefSrc netip.Addr
	// Flags are the route flags (rtm_flags), e.g. unix.RTNH_F_ONLINK. Only
	// WritableFlags are sent.
	Flags uint32
	// MTU is the path MTU metric (RTA_METRICS/RTAX_MTU); 0 for none.
	MTU uint32
	// NextHops are the paths of a multipath route (RTA_MULTIPATH); nil for
	// a single path, which uses OIF and Gateway instead. A write with one
	// next hop sends it as a single path (the kernel reports it so).
	NextHops []NextHop
}

// NextHop is one path of a multipath route (a struct rtnexthop).
type NextHop struct {
	// OIF is the output interface index; 0 for none.
	OIF int32
	// Gateway is the next hop address; an IPv6 gateway in an IPv4 route is
	// sent as RTA_VIA.
	Gateway netip.Addr
	// Weight is the relative weight minus one, exactly as the kernel
	// stores it (rtnh_hops): 0 is weight 1 (the default), 255 is weight 256.
	// `ip route … nexthop … weight W` sets Weight = W-1.
	Weight uint8
	// Flags are the next hop's flags (rtnh_flags), e.g. unix.RTNH_F_ONLINK;
	// only WritableFlags are sent.
	Flags uint8
}

// OpKind is what an ApplyRoutes operation does.
type OpKind uint8

const (
	// OpReplace creates the route or replaces the one with the same key
	// (RTM_NEWROUTE with NLM_F_CREATE|NLM_F_REPLACE).
	OpReplace OpKind = iota + 1
	// OpAdd creates the route and fails with EEXIST if one with the same
	// key exists (RTM_NEWROUTE with NLM_F_CREATE|NLM_F_EXCL).
	OpAdd
	// OpDelete deletes the route (RTM_DELROUTE). Fields left zero match
	// anything, as in the kernel (Scope 0 is sent as RT_SCOPE_NOWHERE,
	// "any scope", as `ip route del` does), so the route's key (Family,
	// Table, Dst, TOS, Priority) is enough. A missing route fails with ESRCH.
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
	return fmt.Sprintf("op(%d)", uint8(k))
}

// RouteOp is one write of ApplyRoutes.
type RouteOp struct {
	// Kind is OpReplace, OpAdd or OpDelete.
	Kind OpKind
	// Route is the route to write or delete.
	Route Route
}

// Uses reports whether r leaves through the interface with index oif: as
// its output interface or as one of its next hops.
func (r *Route) Uses(oif int32) bool {
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

// Validate reports whether r can be written (OpReplace or OpAdd), with an
// error wrapping ErrInvalidRoute that says why not. ApplyRoutes validates
// every operation and never sends an invalid one.
func (r *Route) Validate() error { return r.check(OpReplace) }

// check validates r for an operation of kind.
func (r *Route) check(kind OpKind) error {
	if r == nil {
		return fmt.Errorf("%w: nil route", ErrInvalidRoute)
	}
	if err := r.checkDst(); err != nil {
		return err
	}
	v4 := r.Family == unix.AF_INET
	if r.OIF < 0 {
		return invalid("negative interface index %d", r.OIF)
	}
	if err := checkGateway(v4, r.Gateway); err != nil {
		return invalid("gateway: %v", err)
	}
	if r.PrefSrc.IsValid() && (r.PrefSrc.Zone() != "" || r.PrefSrc.Is4In6() || r.PrefSrc.Is4() != v4) {
		return invalid("preferred source %s is not a plain address of the route's family", r.PrefSrc)
	}
	if len(r.NextHops) > MaxNextHops {
		return invalid("%d next hops, at most %d", len(r.NextHops), MaxNextHops)
	}
	if len(r.NextHops) > 0 && (r.OIF != 0 || r.Gateway.IsValid()) {
		return invalid("a multipath route has its interface and gateway in NextHops, not in OIF and Gateway")
	}
	for i, h := range r.NextHops {
		if h.OIF < 0 {
			return invalid("next hop %d: negative interface index %d", i, h.OIF)
		}
		if h.OIF == 0 && !h.Gateway.IsValid() {
			return invalid("next hop %d has neither interface nor gateway", i)
		}
		if err := checkGateway(v4, h.Gateway); err != nil {
			return invalid("next hop %d gateway: %v", i, err)
		}
	}
	if kind == OpDelete {
		if r.Type != 0 && !knownType(r.Type) {
			return invalid("unsupported route type %d", r.Type)
		}
		return nil
	}
	if !knownType(r.Type) {
		return invalid("unsupported route type %d (want RTN_UNICAST, RTN_LOCAL, RTN_BLACKHOLE, RTN_UNREACHABLE, RTN_PROHIBIT or RTN_THROW)", r.Type)
	}
	hasPath := r.OIF != 0 || r.Gateway.IsValid() || len(r.NextHops) > 0
	switch r.Type {
	case unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT, unix.RTN_THROW:
		if hasPath {
			return invalid("a %s route takes no interface, gateway or next hops", typeName(r.Type))
		}
	case unix.RTN_UNICAST:
		if !hasPath {
			return invalid("a unicast route needs an interface, a gateway or next hops")
		}
	}
	return nil
}

// checkDst validates the family and destination.
func (r *Route) checkDst() error {
	if r.Family != unix.AF_INET && r.Family != unix.AF_INET6 {
		return invalid("family %d is neither AF_INET nor AF_INET6", r.Family)
	}
	if !r.Dst.IsValid() {
		return invalid("invalid destination prefix")
	}
	a := r.Dst.Addr()
	if a.Zone() != "" || a.Is4In6() {
		return invalid("destination %s must be a plain IPv4 or IPv6 prefix", r.Dst)
	}
	if a.Is4() != (r.Family == unix.AF_INET) {
		return invalid("destination %s does not match family %s", r.Dst, familyName(r.Family))
	}
	if r.Dst.Masked() != r.Dst {
		return invalid("destination %s has host bits set (want %s)", r.Dst, r.Dst.Masked())
	}
	return nil
}

// checkGateway validates a gateway of a route of the given family: IPv4
// routes take IPv4 or IPv6 (RTA_VIA) gateways, IPv6 routes IPv6 ones.
func checkGateway(v4 bool, gw netip.Addr) error {
	if !gw.IsValid() {
		return nil
	}
	if gw.Zone() != "" || gw.Is4In6() {
		return fmt.Errorf("%s must be a plain address (no zone, not IPv4-mapped)", gw)
	}
	if !v4 && gw.Is4() {
		return fmt.Errorf("IPv4 gateway %s on an IPv6 route", gw)
	}
	if gw.IsUnspecified() {
		return fmt.Errorf("unspecified address %s", gw)
	}
	return nil
}

func knownType(t uint8) bool {
	switch t {
	case unix.RTN_UNICAST, unix.RTN_LOCAL, unix.RTN_BLACKHOLE, unix.RTN_UNREACHABLE, unix.RTN_PROHIBIT, unix.RTN_THROW:
		return true
	}
	return false
}

func typeName(t uint8) string {
	switch t {
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_THROW:
		return "throw"
	}
	return fmt.Sprintf("type %d", t)
}

func familyName(f uint8) string {
	switch f {
	case unix.AF_INET:
		return "inet"
	case unix.AF_INET6:
		return "inet6"
	}
	return fmt.Sprintf("family %d", f)
}

// invalid returns an error wrapping ErrInvalidRoute. It does not name the
// route: OpError (or Validate's caller) does.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRoute, fmt.Sprintf(format, args...))
}
