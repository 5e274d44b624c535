package routetable

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// Family is IPv4 or IPv6: ipfamily.Family (kernel.Family), shared by every
// nodeplane package.
type Family = ipfamily.Family

// The address families.
const (
	// IPv4 is AF_INET.
	IPv4 = ipfamily.IPv4
	// IPv6 is AF_INET6.
	IPv6 = ipfamily.IPv6
)

// familyMatches reports whether a is an address of family f. An
// IPv4-mapped IPv6 address is of neither family here: a route target must
// be written in its family's own form.
func familyMatches(f Family, a netip.Addr) bool {
	return (f == IPv4 && a.Is4()) || (f == IPv6 && a.Is6() && !a.Is4In6())
}

// InterfaceNone is the interface name under which routes without an output
// interface are declared: blackhole, unreachable, prohibit and throw
// routes, and multipath routes (whose next hops name their interfaces). It
// contains a ':' so no real interface can have it.
const InterfaceNone = ":none"

// RouteClass says which producer wants a route. When several producers
// want the same RouteKey, the lowest class wins; within a class, the
// candidate on the interface with the highest index wins (routes without an
// interface count as index 0). Only candidates whose interfaces are up take
// part, so when the winner's interface goes away the next candidate takes
// over in the same Apply.
//
// SetRoutes replaces everything one (class, interface) pair wants, so each
// independent producer needs its own class. The consumer defines the
// classes it needs, for example:
//
//	const (
//		ClassLocalWorkload routetable.RouteClass = 10
//		ClassTunnel        routetable.RouteClass = 20
//		ClassBlackhole     routetable.RouteClass = 90
//	)
type RouteClass uint8

// TargetType is the kind of route a Target asks for.
type TargetType uint8

const (
	// TargetUnicast is a unicast route: through the interface directly
	// (scope link) when Gateway is not set, via Gateway (scope universe)
	// when it is, or over NextHops (multipath). It is the zero value.
	TargetUnicast TargetType = iota
	// TargetOnlink is a unicast route via Gateway that the kernel takes as
	// directly reachable on the interface (RTNH_F_ONLINK), as overlay
	// tunnels need: no route to the gateway is required.
	TargetOnlink
	// TargetLocal is a local route (RTN_LOCAL, scope host): the
	// destination is delivered to this host.
	TargetLocal
	// TargetBlackhole silently drops traffic (RTN_BLACKHOLE). No
	// interface.
	TargetBlackhole
	// TargetUnreachable drops traffic with ICMP host unreachable
	// (RTN_UNREACHABLE). No interface.
	TargetUnreachable
	// TargetProhibit drops traffic with ICMP administratively prohibited
	// (RTN_PROHIBIT). No interface.
	TargetProhibit
	// TargetThrow ends the lookup in this table, so policy routing goes
	// on with the next rule (RTN_THROW). No interface.
	TargetThrow
)

var targetTypeNames = [...]string{"unicast", "onlink", "local", "blackhole", "unreachable", "prohibit", "throw"}

// String returns the type's name, such as "unicast" or "blackhole".
func (t TargetType) String() string {
	if int(t) < len(targetTypeNames) {
		return targetTypeNames[t]
	}
	return fmt.Sprintf("TargetType(%d)", uint8(t))
}

// noIface reports whether routes of type t have no output interface.
func (t TargetType) noIface() bool { return t >= TargetBlackhole && t <= TargetThrow }

// RouteKey identifies a route in a table the way the kernel does: its
// destination and its metric (the kernel's priority). The kernel holds at
// most one route per key in a table, beside those with a TOS or (IPv6) a
// source prefix, which are apart from it and never the Table's.
type RouteKey struct {
	// CIDR is the destination.
	CIDR netip.Prefix
	// Metric is the route's metric. For IPv6, 0 means 1024, the kernel's
	// default, and the Table stores it as 1024.
	Metric uint32
}

// String returns "CIDR" or "CIDR metric N".
func (k RouteKey) String() string {
	if k.Metric == 0 {
		return k.CIDR.String()
	}
	return fmt.Sprintf("%v metric %d", k.CIDR, k.Metric)
}

// NextHop is one path of a multipath route.
type NextHop struct {
	// Iface is the path's output interface. Required.
	Iface string
	// Gateway is the path's gateway; unset for a path straight through
	// the interface (IPv4 only: IPv6 multipath needs gateways).
	Gateway netip.Addr
	// Weight is the path's relative weight, 1 to 255; 0 means 1.
	Weight uint8
	// Onlink takes the gateway as directly reachable on the interface.
	Onlink bool
}

// MaxMTU is the largest route MTU the kernel stores (kernel.MaxRouteMTU):
// it caps a larger one at this value, so a Target asking for more is
// refused rather than rewritten at every resync.
const MaxMTU = kernel.MaxRouteMTU

// Target is one route a producer wants.
type Target struct {
	// CIDR is the destination, a network prefix: a CIDR with host bits
	// set (10.0.0.7/24 for 10.0.0.0/24) is refused, as `ip route` refuses
	// it.
	CIDR netip.Prefix
	// Type is the kind of route; the zero value is TargetUnicast.
	Type TargetType
	// Gateway is the next hop for TargetUnicast (optional) and
	// TargetOnlink (required). Same family as CIDR; not the unspecified
	// address.
	Gateway netip.Addr
	// Src is the preferred source address for traffic to CIDR
	// (optional; not the unspecified address). The kernel requires it to
	// be one of the host's addresses.
	Src netip.Addr
	// MTU is the route's MTU, up to MaxMTU; 0 leaves it unset.
	MTU uint32
	// Metric is the route's metric (its priority in the kernel); part of
	// the RouteKey.
	Metric uint32
	// NextHops makes a multipath route (TargetUnicast only, declared with
	// InterfaceNone). Paths whose interfaces are not up are left out; the
	// route is held while none is up.
	NextHops []NextHop
	// DestMAC, when set on a host route (/32 or /128) with an interface,
	// also programs a permanent neighbour entry (ARP or NDP) for the
	// destination address with this MAC on the interface, with the
	// Table's protocol.
	DestMAC net.HardwareAddr
}

// Key returns the target's RouteKey as the Table stores it: for IPv6,
// metric 0 as 1024.
func (t Target) Key() RouteKey {
	k := RouteKey{CIDR: t.CIDR, Metric: t.Metric}
	if k.CIDR.Addr().Is6() && k.Metric == 0 {
		k.Metric = ipv6DefaultMetric
	}
	return k
}

// ipv6DefaultMetric is the metric the kernel gives an IPv6 route added with
// metric 0.
const ipv6DefaultMetric = 1024

// validIfaceName reports whether the kernel would accept name for an
// interface (dev_valid_name), with an error wrapping ErrInvalidInterface.
func validIfaceName(name string) error {
	if err := ifname.Valid(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidInterface, err)
	}
	return nil
}

// validGroupIface accepts a real interface name or InterfaceNone.
func validGroupIface(name string) error {
	if name == InterfaceNone {
		return nil
	}
	return validIfaceName(name)
}

// invalidTarget returns an error wrapping ErrInvalidTarget (and the also
// errors, whose text it does not repeat) that names the destination dst.
func invalidTarget(dst netip.Prefix, also []error, format string, args ...any) error {
	return errs.Also(fmt.Errorf("%w: %v: %s", ErrInvalidTarget, dst, fmt.Sprintf(format, args...)), also...)
}

// checkDest checks a route destination for a Table of family fam: a valid
// network prefix of the family, without host bits (ipfamily's CheckNet).
func checkDest(fam Family, dst netip.Prefix) error {
	switch {
	case !dst.IsValid():
		return invalidTarget(dst, nil, "invalid CIDR")
	case !familyMatches(fam, dst.Addr()) || dst.Addr().Zone() != "":
		return invalidTarget(dst, nil, "not an %v prefix", fam)
	}
	if err := fam.CheckNet(dst); err != nil {
		return invalidTarget(dst, []error{err}, "host bits set (the network is %v)", dst.Masked())
	}
	return nil
}

// checkAddr checks a gateway or source address of a target of family fam.
func checkAddr(fam Family, what string, a netip.Addr) string {
	switch {
	case !familyMatches(fam, a):
		return fmt.Sprintf("%s %v is not an %v address", what, a, fam)
	case a.Zone() != "":
		return fmt.Sprintf("%s %v has a zone: the route names its interface", what, a)
	case a.IsUnspecified():
		return fmt.Sprintf("%s %v is the unspecified address", what, a)
	}
	return ""
}

// validate checks t for a Table of family fam, declared under iface, and
// returns it normalised (IPv6 metric 0 as 1024).
func (t Target) validate(fam Family, iface string) (Target, error) {
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, invalidTarget(t.CIDR, nil, format, args...)
	}
	if err := checkDest(fam, t.CIDR); err != nil {
		return Target{}, err
	}
	if t.Type > TargetThrow {
		return bad("unknown type %v", t.Type)
	}
	if t.MTU > MaxMTU {
		return bad("MTU %d is above %d, the most the kernel stores", t.MTU, MaxMTU)
	}
	none := iface == InterfaceNone
	for _, a := range [...]struct {
		name string
		addr netip.Addr
	}{{"gateway", t.Gateway}, {"source", t.Src}} {
		if a.addr.IsValid() {
			if problem := checkAddr(fam, a.name, a.addr); problem != "" {
				return bad("%s", problem)
			}
		}
	}
	if len(t.DestMAC) != 0 {
		if len(t.DestMAC) != 6 {
			return bad("DestMAC %v is not a 6-byte MAC address", t.DestMAC)
		}
		if none || t.CIDR.Bits() != fam.Bits() {
			return bad("DestMAC needs a host route (/%d) with an interface", fam.Bits())
		}
	}
	switch {
	case t.Type.noIface():
		if !none {
			return bad("%v routes have no interface: declare them under InterfaceNone", t.Type)
		}
		if t.Gateway.IsValid() || len(t.NextHops) > 0 {
			return bad("%v routes have no gateway or next hops", t.Type)
		}
	case len(t.NextHops) > 0:
		if t.Type != TargetUnicast {
			return bad("next hops need type unicast, not %v", t.Type)
		}
		if !none {
			return bad("multipath routes are declared under InterfaceNone; their next hops name the interfaces")
		}
		if t.Gateway.IsValid() {
			return bad("a multipath route takes its gateways from its next hops")
		}
		seen := make(map[NextHop]bool, len(t.NextHops))
		for i, nh := range t.NextHops {
			if err := validIfaceName(nh.Iface); err != nil {
				return Target{}, invalidTarget(t.CIDR, []error{ErrInvalidInterface}, "next hop %d: %s", i, bare(err))
			}
			if nh.Gateway.IsValid() {
				if problem := checkAddr(fam, "gateway", nh.Gateway); problem != "" {
					return bad("next hop %d: %s", i, problem)
				}
			}
			if fam == IPv6 && !nh.Gateway.IsValid() {
				return bad("next hop %d: IPv6 multipath next hops need a gateway", i)
			}
			if nh.Onlink && !nh.Gateway.IsValid() {
				return bad("next hop %d: onlink needs a gateway", i)
			}
			key := NextHop{Iface: nh.Iface, Gateway: nh.Gateway}
			if seen[key] {
				return bad("next hop %d: duplicate path %s via %v", i, nh.Iface, nh.Gateway)
			}
			seen[key] = true
		}
	default:
		if none {
			return bad("%v routes need an interface", t.Type)
		}
		switch t.Type {
		case TargetOnlink:
			if !t.Gateway.IsValid() {
				return bad("onlink routes need a gateway")
			}
		case TargetLocal:
			if t.Gateway.IsValid() {
				return bad("local routes have no gateway")
			}
		}
	}
	if fam == IPv6 && t.Metric == 0 {
		t.Metric = ipv6DefaultMetric
	}
	return t, nil
}
