package kernel

import (
	"github.com/nodeplane/nodeplane/internal/ifname"

	"fmt"
	"net/netip"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// This file holds the checks every writer of kernel objects applies before
// anything is sent: a *Namespace and kernelfake's Namespace use the same
// ones, so bad input fails the same way against both. They are pure logic
// and build on every OS.

// invalid returns an error wrapping ErrInvalid. It does not name the
// object: the caller (or OpError) does.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate reports whether r can be written with OpReplace or OpAdd, with
// an error wrapping ErrInvalid that says why not: an invalid family or
// destination, host bits set in Dst (the error names the prefix and its
// network), a type this package does not write, a path that contradicts
// the type, a gateway or preferred source of the wrong family, too many
// next hops, or an MTU above MaxRouteMTU. ApplyRoutes validates every
// operation this way (a delete only needs the key: see RouteOp) and never
// sends an invalid one.
func (r *Route) Validate() error { return r.check(OpReplace) }

// check validates r for an operation of kind.
func (r *Route) check(kind OpKind) error {
	if r == nil {
		return invalid("nil route")
	}
	if err := r.checkDst(); err != nil {
		return err
	}
	if r.MTU > MaxRouteMTU {
		return invalid("MTU %d above %d, the largest the kernel stores", r.MTU, MaxRouteMTU)
	}
	if r.OIF < 0 {
		return invalid("negative interface index %d", r.OIF)
	}
	if err := checkGateway(r.Family, r.Gateway); err != nil {
		return invalid("gateway: %v", err)
	}
	if r.PrefSrc.IsValid() && (r.PrefSrc.Zone() != "" || ipfamily.Of(r.PrefSrc) != r.Family) {
		return invalid("preferred source %s is not a plain %s address", r.PrefSrc, r.Family)
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
		if err := checkGateway(r.Family, h.Gateway); err != nil {
			return invalid("next hop %d gateway: %v", i, err)
		}
	}
	if kind == OpDelete {
		if r.Type != 0 && !knownRouteType(r.Type) {
			return invalid("unsupported route type %d", r.Type)
		}
		return nil
	}
	if !knownRouteType(r.Type) {
		return invalid("unsupported route type %d (want RTNUnicast, RTNLocal, RTNBlackhole, RTNUnreachable, RTNProhibit or RTNThrow)", r.Type)
	}
	hasPath := r.OIF != 0 || r.Gateway.IsValid() || len(r.NextHops) > 0
	switch r.Type {
	case RTNBlackhole, RTNUnreachable, RTNProhibit, RTNThrow:
		if hasPath {
			return invalid("a %s route takes no interface, gateway or next hops", routeTypeName(r.Type))
		}
	case RTNUnicast:
		if !hasPath {
			return invalid("a unicast route needs an interface, a gateway or next hops")
		}
	}
	return nil
}

// checkDst validates the family and the destination.
func (r *Route) checkDst() error {
	if !r.Family.Valid() {
		return invalid("%v is neither IPv4 nor IPv6", r.Family)
	}
	if !r.Dst.IsValid() {
		return invalid("invalid destination prefix")
	}
	if a := r.Dst.Addr(); a.Zone() != "" || a.Is4In6() {
		return invalid("destination %s must be a plain IPv4 or IPv6 prefix", r.Dst)
	}
	if !r.Family.ContainsPrefix(r.Dst) {
		return errs.Also(invalid("destination %s is not an %s prefix", r.Dst, r.Family), ipfamily.ErrWrongFamily)
	}
	if m := r.Dst.Masked(); m != r.Dst {
		return errs.Also(invalid("destination %s has host bits set (the network is %s)", r.Dst, m), ipfamily.ErrHostBits)
	}
	return nil
}

// checkGateway validates a gateway of a route of family f: IPv4 routes
// take IPv4 or IPv6 gateways (the latter sent as RTA_VIA), IPv6 routes
// only IPv6 ones.
func checkGateway(f Family, gw netip.Addr) error {
	switch {
	case !gw.IsValid():
		return nil
	case gw.Zone() != "" || gw.Is4In6():
		return fmt.Errorf("%s must be a plain address (no zone, not IPv4-mapped)", gw)
	case f == IPv6 && gw.Is4():
		return fmt.Errorf("IPv4 gateway %s on an IPv6 route", gw)
	case gw.IsUnspecified():
		return fmt.Errorf("unspecified address %s", gw)
	}
	return nil
}

func knownRouteType(t uint8) bool {
	switch t {
	case RTNUnicast, RTNLocal, RTNBlackhole, RTNUnreachable, RTNProhibit, RTNThrow:
		return true
	}
	return false
}

func routeTypeName(t uint8) string {
	switch t {
	case RTNUnicast:
		return "unicast"
	case RTNLocal:
		return "local"
	case RTNBroadcast:
		return "broadcast"
	case RTNBlackhole:
		return "blackhole"
	case RTNUnreachable:
		return "unreachable"
	case RTNProhibit:
		return "prohibit"
	case RTNThrow:
		return "throw"
	}
	return fmt.Sprintf("type %d", t)
}

// checkKind refuses an operation kind other than OpReplace, OpAdd and
// OpDelete.
func checkKind(k OpKind) error {
	switch k {
	case OpReplace, OpAdd, OpDelete:
		return nil
	}
	return invalid("unknown operation kind %d", uint8(k))
}

// checkHostAddr validates the address of a neighbour or a VTEP: a plain,
// specified IPv4 or IPv6 address.
func checkHostAddr(what string, a netip.Addr) error {
	switch {
	case !a.IsValid():
		return invalid("no %s address", what)
	case a.Zone() != "" || a.Is4In6():
		return invalid("%s address %s must be a plain IPv4 or IPv6 address (no zone, not IPv4-mapped)", what, a)
	case a.IsUnspecified():
		return invalid("unspecified %s address %s", what, a)
	}
	return nil
}

// maxLinkAddrLen is the longest link-layer address the kernel stores
// (MAX_ADDR_LEN).
const maxLinkAddrLen = 32

// ethAddrLen is the length of an Ethernet MAC address.
const ethAddrLen = 6

// Validate reports whether n can be written with OpReplace or OpAdd, with
// an error wrapping ErrInvalid: it needs an interface, a plain specified
// address, a link-layer address, and a State made of NUD_* bits (0 means
// NUDPermanent). A delete needs only LinkIndex and IP.
func (n *Neighbor) Validate() error { return n.check(OpReplace) }

func (n *Neighbor) check(kind OpKind) error {
	if n == nil {
		return invalid("nil neighbour")
	}
	if n.LinkIndex <= 0 {
		return invalid("interface index %d", n.LinkIndex)
	}
	if err := checkHostAddr("neighbour", n.IP); err != nil {
		return err
	}
	if kind == OpDelete {
		return nil
	}
	if len(n.MAC) == 0 || len(n.MAC) > maxLinkAddrLen {
		return invalid("link-layer address of %d bytes (want 1 to %d)", len(n.MAC), maxLinkAddrLen)
	}
	if n.State&^0xff != 0 {
		return invalid("state 0x%x is not made of NUD_* bits", n.State)
	}
	return nil
}

// state returns the NUD state a write sends.
func (n *Neighbor) state() uint16 {
	if n.State == 0 {
		return NUDPermanent
	}
	return n.State
}

// Validate reports whether e can be written or deleted, with an error
// wrapping ErrInvalid: it needs an interface and a 6-byte MAC; Dst, when
// set, must be a plain specified address.
func (e *FDBEntry) Validate() error {
	if e == nil {
		return invalid("nil FDB entry")
	}
	if e.LinkIndex <= 0 {
		return invalid("interface index %d", e.LinkIndex)
	}
	if len(e.MAC) != ethAddrLen {
		return invalid("MAC of %d bytes (want %d)", len(e.MAC), ethAddrLen)
	}
	if e.Dst.IsValid() {
		return checkHostAddr("VTEP", e.Dst)
	}
	return nil
}

// floods reports whether e's MAC is all zeros or multicast: such an entry
// lists every remote that gets the frames (the default entry of a VXLAN
// device floods unknown destinations to each of them), so a write adds one
// remote to the list instead of replacing the list.
func (e *FDBEntry) floods() bool {
	if len(e.MAC) != ethAddrLen {
		return false
	}
	if e.MAC[0]&1 != 0 {
		return true // multicast (and broadcast)
	}
	for _, b := range e.MAC {
		if b != 0 {
			return false
		}
	}
	return true
}

// checkIfName validates an interface name as the kernel's dev_valid_name
// does.
func checkIfName(what, name string) error {
	if err := ifname.Valid(name); err != nil {
		return invalid("%s: %v", what, err)
	}
	return nil
}

// Validate reports whether r can be added, with an error wrapping
// ErrInvalid: a valid family, a known action (a lookup needs a table, a
// goto a target after its own priority), source and destination of the
// rule's family, valid interface names, and ranges whose start is not
// after their end. DeleteRule only checks the family and the addresses.
func (r *Rule) Validate() error { return r.check(OpAdd) }

func (r *Rule) check(kind OpKind) error {
	if r == nil {
		return invalid("nil rule")
	}
	if !r.Family.Valid() {
		return invalid("%v is neither IPv4 nor IPv6", r.Family)
	}
	for _, m := range []struct {
		what string
		p    netip.Prefix
	}{{"source", r.Src}, {"destination", r.Dst}} {
		if m.p == (netip.Prefix{}) {
			continue
		}
		if err := r.Family.CheckPrefix(m.p); err != nil || m.p.Addr().Zone() != "" {
			return invalid("%s %s is not a plain %s prefix", m.what, m.p, r.Family)
		}
	}
	for _, n := range []struct{ what, name string }{{"input interface", r.IIF}, {"output interface", r.OIF}} {
		if n.name != "" {
			if err := checkIfName(n.what, n.name); err != nil {
				return err
			}
		}
	}
	if kind == OpDelete {
		return nil
	}
	switch r.Action {
	case RuleLookup:
		if r.Table == 0 {
			return invalid("a lookup rule needs a table")
		}
	case RuleGoto:
		if r.Goto <= r.Priority {
			return invalid("goto %d does not jump forward from priority %d", r.Goto, r.Priority)
		}
	case RuleNop, RuleBlackhole, RuleUnreachable, RuleProhibit:
	default:
		return invalid("unknown rule action %d", r.Action)
	}
	for _, p := range []struct {
		what string
		r    PortRange
	}{{"source ports", r.SrcPorts}, {"destination ports", r.DstPorts}} {
		if p.r != (PortRange{}) && (p.r.Start == 0 || p.r.Start > p.r.End) {
			return invalid("%s %d-%d", p.what, p.r.Start, p.r.End)
		}
	}
	if r.UID.Set && r.UID.Start > r.UID.End {
		return invalid("UID range %d-%d", r.UID.Start, r.UID.End)
	}
	if p := r.SuppressPrefixLen; p.Set && (p.Value < 0 || p.Value > r.Family.Bits()) {
		return invalid("suppress prefix length %d (want 0 to %d)", p.Value, r.Family.Bits())
	}
	if g := r.SuppressIfGroup; g.Set && g.Value < 0 {
		return invalid("suppress interface group %d (want 0 or more)", g.Value)
	}
	if r.Realm != 0 && r.Family != IPv4 {
		return invalid("a realm is an IPv4 selector")
	}
	return nil
}

// The link kinds AddLink creates.
var addableKinds = []string{KindBridge, KindVeth, KindVXLAN, KindIPIP, KindWireGuard}

// Validate reports whether l can be created by AddLink, with an error
// wrapping ErrInvalid: no index, a valid name, a kind AddLink creates, a
// non-negative MTU, a 6-byte MAC (or none) for Ethernet kinds and none for
// IP tunnels, and the kind's own attributes (Veth for a veth, VXLAN for a
// vxlan, IPTunnel only for an ipip) and no other kind's.
func (l *Link) Validate() error {
	if l == nil {
		return invalid("nil link")
	}
	if l.Index != 0 {
		return invalid("link %q: a new link has no index (got %d)", l.Name, l.Index)
	}
	if err := checkIfName("link", l.Name); err != nil {
		return err
	}
	known := false
	for _, k := range addableKinds {
		known = known || l.Kind == k
	}
	if !known {
		return invalid("link %q: kind %q (want one of %s)", l.Name, l.Kind, strings.Join(addableKinds, ", "))
	}
	if l.MTU < 0 {
		return invalid("link %q: negative MTU %d", l.Name, l.MTU)
	}
	ether := l.Kind == KindBridge || l.Kind == KindVeth || l.Kind == KindVXLAN
	switch {
	case ether && l.MAC != nil && len(l.MAC) != ethAddrLen:
		return invalid("link %q: MAC of %d bytes (want %d)", l.Name, len(l.MAC), ethAddrLen)
	case !ether && l.MAC != nil:
		return invalid("link %q: a %s link has no MAC", l.Name, l.Kind)
	case l.MasterIndex < 0:
		return invalid("link %q: negative master index %d", l.Name, l.MasterIndex)
	case (l.Veth != nil) != (l.Kind == KindVeth):
		return invalid("link %q: Veth is set for, and only for, a veth", l.Name)
	case (l.VXLAN != nil) != (l.Kind == KindVXLAN):
		return invalid("link %q: VXLAN is set for, and only for, a vxlan", l.Name)
	case l.IPTunnel != nil && l.Kind != KindIPIP:
		return invalid("link %q: IPTunnel is set only for an ipip link", l.Name)
	}
	if v := l.Veth; v != nil {
		if err := checkIfName("veth peer", v.PeerName); err != nil {
			return err
		}
		if v.PeerNamespaceFD < 0 {
			return invalid("link %q: negative peer namespace descriptor %d", l.Name, v.PeerNamespaceFD)
		}
	}
	if v := l.VXLAN; v != nil {
		if v.VNI >= 1<<24 {
			return invalid("link %q: VNI %d does not fit 24 bits", l.Name, v.VNI)
		}
		if v.ParentIndex < 0 {
			return invalid("link %q: negative parent index %d", l.Name, v.ParentIndex)
		}
		if v.Local.IsValid() {
			if err := checkHostAddr("VXLAN local", v.Local); err != nil {
				return err
			}
		}
	}
	if t := l.IPTunnel; t != nil {
		for _, a := range []netip.Addr{t.Local, t.Remote} {
			if a.IsValid() && !a.Is4() {
				return invalid("link %q: IP-in-IP endpoint %s is not an IPv4 address", l.Name, a)
			}
		}
		if t.ParentIndex < 0 {
			return invalid("link %q: negative parent index %d", l.Name, t.ParentIndex)
		}
	}
	return nil
}

// Validate reports whether a can be assigned or removed, with an error
// wrapping ErrInvalid: it needs an interface and a plain address with a
// prefix length (host bits are the point: 10.0.0.5/24).
func (a *Addr) Validate() error {
	if a == nil {
		return invalid("nil address")
	}
	if a.LinkIndex <= 0 {
		return invalid("interface index %d", a.LinkIndex)
	}
	if !a.Prefix.IsValid() {
		return invalid("invalid address prefix")
	}
	if ip := a.Prefix.Addr(); ip.Zone() != "" || ip.Is4In6() || ip.IsUnspecified() {
		return invalid("address %s must be a plain, specified IPv4 or IPv6 address", a.Prefix)
	}
	return nil
}

// SysctlPath maps a sysctl key to its path under /proc/sys, such as
// "net/ipv4/ip_forward", or an error wrapping ErrInvalid.
//
// The rule: a key that contains a slash is written with slashes, and its
// components are taken literally, dots included
// ("net/ipv4/conf/eth0.100/rp_filter"); a key without a slash is written
// with dots, each of which separates two components
// ("net.ipv4.conf.eth0.rp_filter"). An interface name with a dot can
// therefore only be named in the slash form: "net.ipv4.conf.eth0.100.rp_filter"
// means net/ipv4/conf/eth0/100/rp_filter, which does not exist. The key
// must be under net (whose entries are per namespace), must not start with
// a slash, and no component may be empty, "." or "..".
func SysctlPath(key string) (string, error) {
	if strings.HasPrefix(key, "/") {
		return "", invalid("sysctl %q: an absolute path (want a key such as net.ipv4.ip_forward)", key)
	}
	if strings.ContainsRune(key, 0) {
		return "", invalid("sysctl %q contains a NUL byte", key)
	}
	sep := "."
	if strings.Contains(key, "/") {
		sep = "/"
	}
	parts := strings.Split(key, sep)
	if len(parts) < 2 || parts[0] != "net" {
		return "", invalid("sysctl %q is not a per-namespace net.* key", key)
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return "", invalid("sysctl %q has an empty or relative component", key)
		}
	}
	return strings.Join(parts, "/"), nil
}

// checkEventKinds refuses an empty or unknown set of event kinds.
func checkEventKinds(k EventKinds) error {
	if k == 0 || k&^(EventLinks|EventAddrs|EventRoutes) != 0 {
		return invalid("event kinds 0x%x (want a combination of EventLinks, EventAddrs and EventRoutes)", uint8(k))
	}
	return nil
}
