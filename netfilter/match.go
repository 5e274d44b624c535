package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Match is one match criterion of a Rule. The set is closed: the package's
// Match* types (MatchNet, MatchProto, MatchPorts, MatchIface, MatchMark,
// MatchSet, MatchConntrack, MatchAddrType, MatchICMP, MatchLimit) are its only
// implementations, built by constructors such as SourceNet and Protocol
// or as literals, so that every backend can render each of them. A backend
// type-switches over them and reports ErrUnsupported for one it cannot
// render. Pass the values: Validate refuses a pointer to one.
type Match interface {
	// match marks the package's criteria.
	match()
}

// Direction says which side of a packet a criterion looks at: its source
// or its destination. The zero value is no direction and is invalid.
type Direction uint8

// The two directions.
const (
	// Src is the packet's source (address, port, address type).
	Src Direction = iota + 1
	// Dst is the packet's destination.
	Dst
)

// String returns "src" or "dst".
func (d Direction) String() string {
	switch d {
	case Src:
		return "src"
	case Dst:
		return "dst"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// valid reports whether d is Src or Dst.
func (d Direction) valid() bool { return d == Src || d == Dst }

// Limits that the kernel puts on criteria, whatever the backend.
const (
	// MaxInterfaceNameLength is the longest interface name (IFNAMSIZ-1),
	// counting a trailing "+" wildcard.
	MaxInterfaceNameLength = 15
	// MaxIPSetNameLength is the longest IP set name (IPSET_MAXNAMELEN-1).
	MaxIPSetNameLength = 31
	// MaxIPSetDimensions is the most dimensions an IP set match can name.
	MaxIPSetDimensions = 6
)

// MatchNet matches the packet's source or destination address against a
// prefix. The prefix must be of the rule's IP family and a network: one
// with host bits set after its length (10.0.0.1/24) is an error that names
// it, matching ErrInvalidRule and ipfamily.ErrHostBits. A non-negated /0
// prefix matches every packet. A negated /0 matches no packet and is an
// error. A rule holds at most one per direction (match several prefixes
// with an IP set).
type MatchNet struct {
	// Prefix is the network to match. The zero Prefix is invalid.
	Prefix netip.Prefix
	// Dir selects the source or destination address.
	Dir Direction
	// Negate matches packets outside Prefix.
	Negate bool
}

// SourceNet matches packets from prefix p.
func SourceNet(p netip.Prefix) Match { return MatchNet{Prefix: p, Dir: Src} }

// DestNet matches packets to prefix p.
func DestNet(p netip.Prefix) Match { return MatchNet{Prefix: p, Dir: Dst} }

// Proto is an IP protocol number (the IPv4 protocol field, or the IPv6
// upper-layer header after extension headers).
type Proto uint8

// Common protocols. Any other number is a valid Proto too.
const (
	ProtoICMP    Proto = 1
	ProtoTCP     Proto = 6
	ProtoUDP     Proto = 17
	ProtoGRE     Proto = 47
	ProtoESP     Proto = 50
	ProtoAH      Proto = 51
	ProtoICMPv6  Proto = 58
	ProtoSCTP    Proto = 132
	ProtoUDPLite Proto = 136
)

// String returns the name iptables knows without /etc/protocols (tcp,
// udp, icmp, ipv6-icmp, sctp, udplite, esp, ah), or the number for every
// other protocol.
func (p Proto) String() string {
	switch p {
	case ProtoICMP:
		return "icmp"
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoESP:
		return "esp"
	case ProtoAH:
		return "ah"
	case ProtoICMPv6:
		return "ipv6-icmp"
	case ProtoSCTP:
		return "sctp"
	case ProtoUDPLite:
		return "udplite"
	}
	return strconv.Itoa(int(p))
}

// hasPorts reports whether port criteria and NAT port ranges work with p.
func (p Proto) hasPorts() bool { return p == ProtoTCP || p == ProtoUDP || p == ProtoSCTP }

// MatchProto matches the packet's protocol. A rule holds at most one.
// Protocol 0 (any) is an error: leave the criterion out instead. ICMP in an
// IPv6 rule and ICMPv6 in an IPv4 rule are ErrWrongFamily.
type MatchProto struct {
	// Proto is the protocol number; 0 is invalid.
	Proto Proto
	// Negate matches every other protocol.
	Negate bool
}

// Protocol matches packets of protocol p.
func Protocol(p Proto) Match { return MatchProto{Proto: p} }

// PortRange is the ports First to Last, both included. A single port has
// First == Last.
type PortRange struct {
	// First is the lowest port of the range.
	First uint16
	// Last is the highest port of the range; it must not be below First.
	Last uint16
}

// Port returns the range of the single port n.
func Port(n uint16) PortRange { return PortRange{First: n, Last: n} }

// Ports returns the range first to last, both included.
func Ports(first, last uint16) PortRange { return PortRange{First: first, Last: last} }

// Contains reports whether port lies in the range.
func (r PortRange) Contains(port uint16) bool { return port >= r.First && port <= r.Last }

// String returns "80" for a single port and "1000:2000" for a range.
func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return strconv.Itoa(int(r.First)) + ":" + strconv.Itoa(int(r.Last))
}

// MatchPorts matches the packet's source or destination port against one
// or more ranges. It needs a MatchProto for tcp, udp or sctp (not negated)
// in the same rule, and a rule holds at most one per direction. One range
// from 0 to 65535 matches every port (or, negated, none) and is an error.
// A backend may bound the number of ranges (iptables' multiport match
// takes 15 entries).
type MatchPorts struct {
	// Dir selects source or destination ports.
	Dir Direction
	// Ranges are the ports to match, rendered in this order; at least one.
	Ranges []PortRange
	// Negate matches packets whose port is in none of Ranges.
	Negate bool
}

// SourcePorts matches packets whose source port is in one of the ranges.
func SourcePorts(r ...PortRange) Match {
	return MatchPorts{Dir: Src, Ranges: append([]PortRange(nil), r...)}
}

// DestPorts matches packets whose destination port is in one of the
// ranges.
func DestPorts(r ...PortRange) Match {
	return MatchPorts{Dir: Dst, Ranges: append([]PortRange(nil), r...)}
}

// MatchIface matches the interface a packet came in on or goes out of.
// Name is 1 to MaxInterfaceNameLength bytes of a valid interface name; a
// trailing "+" matches every interface whose name starts with the rest
// ("+" alone matches any interface), and a "+" elsewhere is an error. A
// rule holds at most one per side. The kernel knows no input interface in
// OUTPUT and POSTROUTING and no output interface in INPUT and PREROUTING:
// a backend refuses such a rule where it can tell.
type MatchIface struct {
	// Name is the interface name, optionally ending in "+".
	Name string
	// Out selects the output interface instead of the input one.
	Out bool
	// Negate matches every other interface.
	Negate bool
}

// InInterface matches packets that came in on interface name.
func InInterface(name string) Match { return MatchIface{Name: name} }

// OutInterface matches packets that go out of interface name.
func OutInterface(name string) Match { return MatchIface{Name: name, Out: true} }

// MatchMark matches packets whose mark, masked with Mask, equals Mark.
// Mark must lie within Mask and Mask must not be zero.
type MatchMark struct {
	// Mark is the value the masked mark must have.
	Mark uint32
	// Mask selects the bits compared.
	Mask uint32
	// Negate matches packets whose masked mark differs.
	Negate bool
}

// Mark matches packets with mark&mask == mark.
func Mark(mark, mask uint32) Match { return MatchMark{Mark: mark, Mask: mask} }

// MatchSet matches packets whose addresses (and ports, for sets such as
// hash:ip,port) are in the IP set Name. Dims gives, for each dimension of
// the set, which side of the packet it is taken from. The set must exist,
// with the rule's IP family, when the rule is written.
type MatchSet struct {
	// Name is the set's name, 1 to MaxIPSetNameLength printable ASCII
	// characters, without quotes or backslashes and not starting with "-"
	// or "!".
	Name string
	// Dims has one direction per set dimension used, 1 to
	// MaxIPSetDimensions of them.
	Dims []Direction
	// Negate matches packets that are not in the set.
	Negate bool
}

// SourceIPSet matches packets whose source address is in set name.
func SourceIPSet(name string) Match { return MatchSet{Name: name, Dims: []Direction{Src}} }

// DestIPSet matches packets whose destination address is in set name.
func DestIPSet(name string) Match { return MatchSet{Name: name, Dims: []Direction{Dst}} }

// IPSet matches packets that are in set name, taking each of the set's
// dimensions from the side dims gives: a hash:ip,port set of destination
// address and port is IPSet(name, Dst, Dst), a hash:net,net set of
// (source, destination) is IPSet(name, Src, Dst).
func IPSet(name string, dims ...Direction) Match {
	return MatchSet{Name: name, Dims: append([]Direction(nil), dims...)}
}

// CTState is a set of conntrack states, as flags.
type CTState uint16

// Conntrack states, in the canonical order iptables prints them.
const (
	// CTStateInvalid: the packet belongs to no known connection.
	CTStateInvalid CTState = 1 << iota
	// CTStateNew: the packet starts a new connection.
	CTStateNew
	// CTStateRelated: the packet starts a connection related to an existing
	// one (an FTP data connection, an ICMP error).
	CTStateRelated
	// CTStateEstablished: the packet belongs to a connection that has seen
	// packets both ways.
	CTStateEstablished
	// CTStateUntracked: the packet is not tracked (see NoTrack).
	CTStateUntracked
	// CTStateSNAT: the connection's source was translated.
	CTStateSNAT
	// CTStateDNAT: the connection's destination was translated.
	CTStateDNAT

	ctStateAll = CTStateDNAT<<1 - 1
)

var ctStateNames = [...]string{"INVALID", "NEW", "RELATED", "ESTABLISHED", "UNTRACKED", "SNAT", "DNAT"}

// String returns the states comma-separated in canonical order, such as
// "NEW,ESTABLISHED"; unknown bits are shown in hex.
func (s CTState) String() string { b, _ := s.AppendText(nil); return string(b) }

// AppendText appends String's text to b (encoding.TextAppender), so that a
// backend renders the states without allocating.
func (s CTState) AppendText(b []byte) ([]byte, error) {
	return appendFlagNames(b, uint64(s), uint64(ctStateAll), ctStateNames[:], "CTState"), nil
}

// MatchConntrack matches packets whose connection is in one of States.
type MatchConntrack struct {
	// States is the set of states; at least one.
	States CTState
	// Negate matches packets in none of States.
	Negate bool
}

// ConntrackState matches packets in any of the given conntrack states.
func ConntrackState(states ...CTState) Match {
	var all CTState
	for _, s := range states {
		all |= s
	}
	return MatchConntrack{States: all}
}

// AddrType is a set of address types (the kernel's route types), as flags.
type AddrType uint16

// Address types, in the canonical order iptables prints them.
const (
	AddrTypeUnspec AddrType = 1 << iota
	AddrTypeUnicast
	AddrTypeLocal
	AddrTypeBroadcast
	AddrTypeAnycast
	AddrTypeMulticast
	AddrTypeBlackhole
	AddrTypeUnreachable
	AddrTypeProhibit
	AddrTypeThrow
	AddrTypeNAT
	AddrTypeXResolve

	addrTypeAll = AddrTypeXResolve<<1 - 1
	// addrTypeIPv4Only are the types the kernel refuses in IPv6 rules.
	addrTypeIPv4Only = AddrTypeBroadcast | AddrTypeBlackhole | AddrTypeProhibit | AddrTypeThrow | AddrTypeNAT | AddrTypeXResolve
	// addrTypeIPv6Class are the IPv6 types ip6tables takes from the
	// address's class rather than its route, unlike nftables: refused.
	addrTypeIPv6Class = AddrTypeUnspec | AddrTypeUnicast | AddrTypeMulticast
)

var addrTypeNames = [...]string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

// String returns the types comma-separated in canonical order, such as
// "UNICAST,LOCAL"; unknown bits are shown in hex.
func (t AddrType) String() string { b, _ := t.AppendText(nil); return string(b) }

// AppendText appends String's text to b (encoding.TextAppender), so that a
// backend renders the types without allocating.
func (t AddrType) AppendText(b []byte) ([]byte, error) {
	return appendFlagNames(b, uint64(t), uint64(addrTypeAll), addrTypeNames[:], "AddrType"), nil
}

// MatchAddrType matches the type of the packet's source or destination
// address. In IPv6 rules BROADCAST, BLACKHOLE, PROHIBIT, THROW, NAT and
// XRESOLVE are ErrWrongFamily (the kernel refuses them), and UNSPEC,
// UNICAST and MULTICAST ErrUnsupported (ip6tables tests the address's
// class for them, nftables its route: a local address is unicast to one
// and local to the other). LimitIfaceIn
// needs an input interface (PREROUTING, INPUT, FORWARD) and LimitIfaceOut
// an output one (FORWARD, OUTPUT, POSTROUTING): a backend refuses them
// elsewhere where it can tell.
type MatchAddrType struct {
	// Types is the set of address types; at least one.
	Types AddrType
	// Dir selects the source or destination address.
	Dir Direction
	// Negate matches addresses of none of Types.
	Negate bool
	// LimitIfaceIn looks the address up only on the input interface.
	LimitIfaceIn bool
	// LimitIfaceOut looks the address up only on the output interface.
	LimitIfaceOut bool
}

// SourceAddrType matches packets whose source address is of type t (or of
// one of the types t holds).
func SourceAddrType(t AddrType) Match { return MatchAddrType{Types: t, Dir: Src} }

// DestAddrType matches packets whose destination address is of type t.
func DestAddrType(t AddrType) Match { return MatchAddrType{Types: t, Dir: Dst} }

// MatchICMP matches the ICMP (IPv4) or ICMPv6 (IPv6) type, and optionally
// code, of a packet. Family must be the rule's: ICMP in an IPv6 rule is
// ErrWrongFamily and the other way round. The criterion brings its
// protocol with it: a rule needs no MatchProto for it, and when it has
// one, that must be the same protocol, not negated. In IPv4, type 255
// means any type and takes no code.
type MatchICMP struct {
	// Family is IPv4 for ICMP and IPv6 for ICMPv6.
	Family ipfamily.Family
	// Type is the ICMP type.
	Type uint8
	// Code is the ICMP code, used when HasCode is set.
	Code uint8
	// HasCode restricts the match to Code; without it any code matches.
	HasCode bool
	// Negate matches ICMP packets of every other type (or code).
	Negate bool
}

// ICMPType matches IPv4 ICMP packets of type t, any code.
func ICMPType(t uint8) Match { return MatchICMP{Family: ipfamily.IPv4, Type: t} }

// ICMPTypeCode matches IPv4 ICMP packets of type t and code c.
func ICMPTypeCode(t, c uint8) Match {
	return MatchICMP{Family: ipfamily.IPv4, Type: t, Code: c, HasCode: true}
}

// ICMPv6Type matches ICMPv6 packets of type t, any code.
func ICMPv6Type(t uint8) Match { return MatchICMP{Family: ipfamily.IPv6, Type: t} }

// ICMPv6TypeCode matches ICMPv6 packets of type t and code c.
func ICMPv6TypeCode(t, c uint8) Match {
	return MatchICMP{Family: ipfamily.IPv6, Type: t, Code: c, HasCode: true}
}

// Not returns m negated: every Match* type has a Negate field, and Not
// flips it (Not(SourceNet(p)) matches packets not from p). Anything else
// (a pointer, nil) is returned as it is, for Validate to refuse.
func Not(m Match) Match {
	switch c := m.(type) {
	case MatchNet:
		c.Negate = !c.Negate
		return c
	case MatchProto:
		c.Negate = !c.Negate
		return c
	case MatchPorts:
		c.Negate = !c.Negate
		return c
	case MatchIface:
		c.Negate = !c.Negate
		return c
	case MatchMark:
		c.Negate = !c.Negate
		return c
	case MatchSet:
		c.Negate = !c.Negate
		return c
	case MatchConntrack:
		c.Negate = !c.Negate
		return c
	case MatchAddrType:
		c.Negate = !c.Negate
		return c
	case MatchICMP:
		c.Negate = !c.Negate
		return c
	case MatchLimit:
		c.Negate = !c.Negate
		return c
	}
	return m
}

func (MatchNet) match()       {}
func (MatchProto) match()     {}
func (MatchPorts) match()     {}
func (MatchIface) match()     {}
func (MatchMark) match()      {}
func (MatchSet) match()       {}
func (MatchConntrack) match() {}
func (MatchAddrType) match()  {}
func (MatchICMP) match()      {}

// appendFlagNames appends the names of the bits set in f, comma-separated
// in bit order (names[i] names bit i), and the bits outside known in hex as
// typ(0x…).
func appendFlagNames(b []byte, f, known uint64, names []string, typ string) []byte {
	n := len(b)
	for i, name := range names {
		if f&(1<<i) != 0 {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, name...)
		}
	}
	if rest := f &^ known; rest != 0 {
		if len(b) > n {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%s(%#x)", typ, rest)
	}
	return b
}
