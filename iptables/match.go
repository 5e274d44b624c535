package iptables

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
)

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

// String returns "src" or "dst", the words ipset matches use.
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

// Limits that iptables and the kernel put on criteria.
const (
	// MaxInterfaceNameLength is the longest interface name (IFNAMSIZ-1),
	// counting a trailing "+" wildcard.
	MaxInterfaceNameLength = 15
	// MaxIPSetNameLength is the longest IP set name (IPSET_MAXNAMELEN-1).
	MaxIPSetNameLength = 31
	// MaxIPSetDimensions is the most dimensions an IP set match can name.
	MaxIPSetDimensions = 6
	// MaxMultiPorts is the most ports one port criterion can hold when it
	// has several ranges (the multiport match); a range of more than one
	// port counts as two.
	MaxMultiPorts = 15
)

// NetMatch matches the packet's source or destination address against a
// prefix (-s / -d). The prefix must be of the rule's IP version and a
// network: one with host bits set after its length (10.0.0.1/24) is an
// error that names it (iptables would silently mask it to 10.0.0.0/24),
// matching ErrInvalidRule and ipfamily.ErrHostBits. A non-negated /0
// prefix matches every packet; iptables-save does not print it back. A
// negated /0 matches no packet and is an error.
type NetMatch struct {
	// Prefix is the network to match. The zero Prefix is invalid.
	Prefix netip.Prefix
	// Dir selects the source (-s) or destination (-d) address.
	Dir Direction
	// Negate matches packets outside Prefix.
	Negate bool
}

// SourceNet matches packets from prefix p.
func SourceNet(p netip.Prefix) Criterion { return NetMatch{Prefix: p, Dir: Src} }

// NotSourceNet matches packets not from prefix p.
func NotSourceNet(p netip.Prefix) Criterion { return NetMatch{Prefix: p, Dir: Src, Negate: true} }

// DestNet matches packets to prefix p.
func DestNet(p netip.Prefix) Criterion { return NetMatch{Prefix: p, Dir: Dst} }

// NotDestNet matches packets not to prefix p.
func NotDestNet(p netip.Prefix) Criterion { return NetMatch{Prefix: p, Dir: Dst, Negate: true} }

func (m NetMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m NetMatch) render(st *ruleRender) error {
	if !m.Dir.valid() {
		return errRulef("address match with %v", m.Dir)
	}
	if !m.Prefix.IsValid() {
		return errRulef("%s address match: invalid or zero prefix", m.Dir)
	}
	if wrongVersion(st.v, m.Prefix.Addr()) {
		return errVersionf("%s prefix %s in an %v rule", m.Dir, m.Prefix, st.v)
	}
	if err := st.v.CheckNet(m.Prefix); err != nil {
		return fmt.Errorf("%w: %s prefix: %w", ErrInvalidRule, m.Dir, err)
	}
	if m.Negate && m.Prefix.Bits() == 0 {
		return errRulef("negated %s prefix %v matches no packet", m.Dir, m.Prefix)
	}
	slot := &st.src
	if m.Dir == Dst {
		slot = &st.dst
	}
	if slot.set {
		return errRulef("more than one %s address criterion (match several prefixes with an IP set)", m.Dir)
	}
	*slot = netArg{set: true, neg: m.Negate, p: m.Prefix}
	return nil
}

// Proto is an IP protocol number (the IPv4 protocol field, or the IPv6
// upper-layer header after extension headers).
type Proto uint8

// Common protocols. Any other number is a valid Proto too; it is rendered
// as a number.
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
	if n := p.name(); n != "" {
		return n
	}
	return strconv.Itoa(int(p))
}

// name returns the protocol's name as String gives it, or "" when String
// gives the number.
func (p Proto) name() string {
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
	return ""
}

// hasPorts reports whether port criteria and NAT port ranges work with p.
func (p Proto) hasPorts() bool { return p == ProtoTCP || p == ProtoUDP || p == ProtoSCTP }

// ProtoMatch matches the packet's protocol (-p). A Match holds at most one.
// Protocol 0 (any) is an error: leave the criterion out instead. ICMP in an
// IPv6 rule and ICMPv6 in an IPv4 rule are ErrWrongIPVersion. iptables-save
// prints protocols other than those Proto.String names by their
// /etc/protocols name where it has one.
type ProtoMatch struct {
	// Proto is the protocol number; 0 is invalid.
	Proto Proto
	// Negate matches every other protocol.
	Negate bool
}

// Protocol matches packets of protocol p.
func Protocol(p Proto) Criterion { return ProtoMatch{Proto: p} }

// NotProtocol matches packets of any protocol but p.
func NotProtocol(p Proto) Criterion { return ProtoMatch{Proto: p, Negate: true} }

func (m ProtoMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m ProtoMatch) render(st *ruleRender) error {
	switch {
	case m.Proto == 0:
		return errRulef("protocol 0 means any protocol: leave the protocol criterion out")
	case m.Proto == ProtoICMP && st.v == IPv6:
		return errVersionf("protocol icmp in an IPv6 rule (use ProtoICMPv6)")
	case m.Proto == ProtoICMPv6 && st.v == IPv4:
		return errVersionf("protocol ipv6-icmp in an IPv4 rule (use ProtoICMP)")
	}
	st.proto = protoArg{set: true, neg: m.Negate, p: m.Proto}
	return nil
}

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

// String returns "80" for a single port and "1000:2000" for a range, as
// port criteria render them.
func (r PortRange) String() string { return string(r.appendTo(nil, ':')) }

// appendTo appends r to b with sep between the two ends of a range.
func (r PortRange) appendTo(b []byte, sep byte) []byte {
	b = strconv.AppendUint(b, uint64(r.First), 10)
	if r.First == r.Last {
		return b
	}
	b = append(b, sep)
	return strconv.AppendUint(b, uint64(r.Last), 10)
}

// slots is how many multiport entries r takes.
func (r PortRange) slots() int {
	if r.First == r.Last {
		return 1
	}
	return 2
}

// PortMatch matches the packet's source or destination port. It needs a
// ProtoMatch for tcp, udp or sctp (not negated) in the same Match, and a
// Match holds at most one PortMatch per direction.
//
// One range renders with the protocol's own match (-m tcp --dport N or
// N:M); the source and destination ranges of one Match share a single
// `-m tcp --sport A --dport B`, placed where the first of them is, which is
// how iptables-save prints them. A negated range from 0 to below 65535
// renders as the rest of the ports, not negated (! 0:1023 is 1024:65535),
// as iptables-nft prints it; the whole range 0:65535 matches every port (or,
// negated, none) and is an error. Several ranges render as
// `-m multiport --dports a,b:c`, at most MaxMultiPorts entries where a range
// of more than one port counts as two.
type PortMatch struct {
	// Dir selects source (--sport) or destination (--dport) ports.
	Dir Direction
	// Ranges are the ports to match, rendered in this order; at least one.
	Ranges []PortRange
	// Negate matches packets whose port is in none of Ranges.
	Negate bool
}

// SourcePorts matches packets whose source port is in one of the ranges.
func SourcePorts(r ...PortRange) Criterion {
	return PortMatch{Dir: Src, Ranges: append([]PortRange(nil), r...)}
}

// NotSourcePorts matches packets whose source port is in none of the
// ranges.
func NotSourcePorts(r ...PortRange) Criterion {
	return PortMatch{Dir: Src, Ranges: append([]PortRange(nil), r...), Negate: true}
}

// DestPorts matches packets whose destination port is in one of the
// ranges.
func DestPorts(r ...PortRange) Criterion {
	return PortMatch{Dir: Dst, Ranges: append([]PortRange(nil), r...)}
}

// NotDestPorts matches packets whose destination port is in none of the
// ranges.
func NotDestPorts(r ...PortRange) Criterion {
	return PortMatch{Dir: Dst, Ranges: append([]PortRange(nil), r...), Negate: true}
}

func (m PortMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m PortMatch) render(st *ruleRender) error {
	if !m.Dir.valid() {
		return errRulef("port match with %v", m.Dir)
	}
	if len(m.Ranges) == 0 {
		return errRulef("%s port match without ports", m.Dir)
	}
	if _, ok := st.portProto(); !ok {
		return errRulef("port match without tcp/udp/sctp protocol")
	}
	seen := &st.srcPorts
	if m.Dir == Dst {
		seen = &st.dstPorts
	}
	if *seen {
		return errRulef("more than one %s port criterion (put all the ports in one)", m.Dir)
	}
	*seen = true
	n := 0
	for _, r := range m.Ranges {
		if r.First > r.Last {
			return errRulef("port range %d:%d ends below its start", r.First, r.Last)
		}
		n += r.slots()
	}
	if n > MaxMultiPorts {
		return errRulef("%s port match needs %d multiport entries, over the limit of %d (a range counts as 2)", m.Dir, n, MaxMultiPorts)
	}
	if len(m.Ranges) > 1 {
		opt := "--sports"
		if m.Dir == Dst {
			opt = "--dports"
		}
		st.module("multiport", m.Negate, opt)
		w := &st.mods
		n := w.begin()
		for i, r := range m.Ranges {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = r.appendTo(w.b, ':')
		}
		w.end(n)
		return nil
	}
	r, negate := m.Ranges[0], m.Negate
	switch {
	case r.First == 0 && r.Last == 65535:
		return errRulef("%s port range 0:65535 matches every port: leave the criterion out", m.Dir)
	case negate && r.First == 0 && r.Last > 0:
		r, negate = Ports(r.Last+1, 65535), false
	}
	if !st.sport.set && !st.dport.set {
		st.portAt = len(st.mods.b)
	}
	if m.Dir == Src {
		st.sport = portArg{set: true, neg: negate, r: r}
	} else {
		st.dport = portArg{set: true, neg: negate, r: r}
	}
	return nil
}

// IfaceMatch matches the interface a packet came in on (-i) or goes out of
// (-o). Name is 1 to MaxInterfaceNameLength characters; a trailing "+"
// matches every interface whose name starts with the rest ("+" alone
// matches any interface). iptables refuses -i in OUTPUT and POSTROUTING and
// -o in INPUT and PREROUTING: a Table refuses such a rule in those
// built-in chains when it is declared (in an owned chain the criterion is
// accepted and never matches there).
type IfaceMatch struct {
	// Name is the interface name, optionally ending in "+".
	Name string
	// Out selects the output interface (-o) instead of the input one (-i).
	Out bool
	// Negate matches every other interface.
	Negate bool
}

// InInterface matches packets that came in on interface name.
func InInterface(name string) Criterion { return IfaceMatch{Name: name} }

// NotInInterface matches packets that did not come in on interface name.
func NotInInterface(name string) Criterion { return IfaceMatch{Name: name, Negate: true} }

// OutInterface matches packets that go out of interface name.
func OutInterface(name string) Criterion { return IfaceMatch{Name: name, Out: true} }

// NotOutInterface matches packets that do not go out of interface name.
func NotOutInterface(name string) Criterion { return IfaceMatch{Name: name, Out: true, Negate: true} }

func (m IfaceMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m IfaceMatch) render(st *ruleRender) error {
	if err := validateIfaceName(m.Name); err != nil {
		return err
	}
	slot, what := &st.in, "input"
	err := st.allowed("an input interface criterion (-i)", "", "PREROUTING", "INPUT", "FORWARD")
	if m.Out {
		slot, what = &st.out, "output"
		err = st.allowed("an output interface criterion (-o)", "", "FORWARD", "OUTPUT", "POSTROUTING")
	}
	if err != nil {
		return err
	}
	if slot.set {
		return errRulef("more than one %s interface criterion", what)
	}
	*slot = ifaceArg{set: true, neg: m.Negate, name: m.Name}
	return nil
}

// validateIfaceName checks an interface name or "+"-wildcard pattern.
func validateIfaceName(name string) error {
	if name == "" || len(name) > MaxInterfaceNameLength {
		return errRulef("interface name %q must be 1 to %d characters", name, MaxInterfaceNameLength)
	}
	if name == "." || name == ".." || name[0] == '-' || name[0] == '!' {
		return errRulef("invalid interface name %q", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c > '~' || strings.IndexByte(`/:"'\`, c) >= 0 {
			return errRulef("interface name %q contains %q", name, c)
		}
		if c == '+' && i != len(name)-1 {
			return errRulef("interface name %q has a \"+\" before its end (only a trailing \"+\" wildcard is allowed)", name)
		}
	}
	return nil
}

// MarkMatch matches packets whose mark, masked with Mask, equals Mark
// (-m mark --mark 0xMARK/0xMASK; the mask is left out when it is
// 0xffffffff, as iptables-save prints it). Mark must lie within Mask and
// Mask must not be zero.
type MarkMatch struct {
	// Mark is the value the masked mark must have.
	Mark uint32
	// Mask selects the bits compared.
	Mask uint32
	// Negate matches packets whose masked mark differs.
	Negate bool
}

// MarkMatches matches packets with mark&mask == mark.
func MarkMatches(mark, mask uint32) Criterion { return MarkMatch{Mark: mark, Mask: mask} }

// NotMarkMatches matches packets with mark&mask != mark.
func NotMarkMatches(mark, mask uint32) Criterion {
	return MarkMatch{Mark: mark, Mask: mask, Negate: true}
}

func (m MarkMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m MarkMatch) render(st *ruleRender) error {
	if err := checkMark("mark match", m.Mark, m.Mask); err != nil {
		return err
	}
	st.module("mark", m.Negate, "--mark")
	writeMark(&st.mods, m.Mark, m.Mask, m.Mask != ^uint32(0))
	return nil
}

// checkMark checks a mark and its mask.
func checkMark(what string, mark, mask uint32) error {
	if mask == 0 {
		return errRulef("%s with a zero mask", what)
	}
	if mark&^mask != 0 {
		return errRulef("%s: mark %s has bits outside mask %s", what, hex32(mark), hex32(mask))
	}
	return nil
}

// writeMark writes a mark as one token, 0xMARK, or 0xMARK/0xMASK when
// withMask is set.
func writeMark(w *tokWriter, mark, mask uint32, withMask bool) {
	w.sep()
	w.b = appendHex32(w.b, mark)
	if withMask {
		w.b = append(w.b, '/')
		w.b = appendHex32(w.b, mask)
	}
}

// hex32 formats x as 0x%x.
func hex32(x uint32) string { return string(appendHex32(nil, x)) }

// appendHex32 appends x as 0x%x.
func appendHex32(b []byte, x uint32) []byte {
	return strconv.AppendUint(append(b, '0', 'x'), uint64(x), 16)
}

// SetMatch matches packets whose addresses (and ports, for sets such as
// hash:ip,port) are in the IP set Name (-m set --match-set NAME src,dst).
// Dims gives, for each dimension of the set, which side of the packet it is
// taken from. The set must exist, with the rule's IP family, when the rule
// is written.
type SetMatch struct {
	// Name is the set's name, 1 to MaxIPSetNameLength characters.
	Name string
	// Dims has one direction per set dimension used, 1 to
	// MaxIPSetDimensions of them.
	Dims []Direction
	// Negate matches packets that are not in the set.
	Negate bool
}

// SourceIPSet matches packets whose source address is in set name.
func SourceIPSet(name string) Criterion { return SetMatch{Name: name, Dims: []Direction{Src}} }

// NotSourceIPSet matches packets whose source address is not in set name.
func NotSourceIPSet(name string) Criterion {
	return SetMatch{Name: name, Dims: []Direction{Src}, Negate: true}
}

// DestIPSet matches packets whose destination address is in set name.
func DestIPSet(name string) Criterion { return SetMatch{Name: name, Dims: []Direction{Dst}} }

// NotDestIPSet matches packets whose destination address is not in set
// name.
func NotDestIPSet(name string) Criterion {
	return SetMatch{Name: name, Dims: []Direction{Dst}, Negate: true}
}

// IPSetMatch matches packets that are in set name, taking each of the set's
// dimensions from the side dims gives: a hash:ip,port set of destination
// address and port is IPSetMatch(name, Dst, Dst), a hash:net,net set of
// (source, destination) is IPSetMatch(name, Src, Dst).
func IPSetMatch(name string, dims ...Direction) Criterion {
	return SetMatch{Name: name, Dims: append([]Direction(nil), dims...)}
}

func (m SetMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m SetMatch) render(st *ruleRender) error {
	if err := validateSetName(m.Name); err != nil {
		return err
	}
	if len(m.Dims) == 0 || len(m.Dims) > MaxIPSetDimensions {
		return errRulef("IP set match %q has %d dimensions, want 1 to %d", m.Name, len(m.Dims), MaxIPSetDimensions)
	}
	for i, d := range m.Dims {
		if !d.valid() {
			return errRulef("IP set match %q: dimension %d has %v", m.Name, i+1, d)
		}
	}
	st.module("set", m.Negate, "--match-set")
	w := &st.mods
	w.tok(m.Name)
	n := w.begin()
	for i, d := range m.Dims {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, d.String()...)
	}
	w.end(n)
	return nil
}

// validateSetName checks an IP set name.
func validateSetName(name string) error {
	if name == "" || len(name) > MaxIPSetNameLength {
		return errRulef("IP set name %q must be 1 to %d characters", name, MaxIPSetNameLength)
	}
	if name[0] == '-' || name[0] == '!' {
		return errRulef("IP set name %q starts with %q", name, name[0])
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c > '~' || c == '"' || c == '\'' || c == '\\' {
			return errRulef("IP set name %q contains %q", name, c)
		}
	}
	return nil
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
	// CTStateUntracked: the packet is not tracked (raw table NoTrack).
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
func (s CTState) String() string {
	return flagNames(uint64(s), uint64(ctStateAll), ctStateNames[:], "CTState")
}

// ConntrackMatch matches packets whose connection is in one of States
// (-m conntrack --ctstate A,B).
type ConntrackMatch struct {
	// States is the set of states; at least one.
	States CTState
	// Negate matches packets in none of States.
	Negate bool
}

// ConntrackState matches packets in any of the given conntrack states.
func ConntrackState(states ...CTState) Criterion {
	return ConntrackMatch{States: orFlags(states)}
}

// NotConntrackState matches packets in none of the given conntrack states.
func NotConntrackState(states ...CTState) Criterion {
	return ConntrackMatch{States: orFlags(states), Negate: true}
}

func orFlags[T ~uint16](fs []T) T {
	var all T
	for _, f := range fs {
		all |= f
	}
	return all
}

func (m ConntrackMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m ConntrackMatch) render(st *ruleRender) error {
	if m.States == 0 {
		return errRulef("conntrack match without states")
	}
	if m.States&^ctStateAll != 0 {
		return errRulef("conntrack match with unknown states %v", m.States)
	}
	st.module("conntrack", m.Negate, "--ctstate")
	writeFlags(&st.mods, uint64(m.States), uint64(ctStateAll), ctStateNames[:], "CTState")
	return nil
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
)

var addrTypeNames = [...]string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

// String returns the types comma-separated in canonical order, such as
// "UNICAST,LOCAL"; unknown bits are shown in hex.
func (t AddrType) String() string {
	return flagNames(uint64(t), uint64(addrTypeAll), addrTypeNames[:], "AddrType")
}

// AddrTypeMatch matches the type of the packet's source or destination
// address (-m addrtype --src-type LOCAL). In IPv6 rules BROADCAST,
// BLACKHOLE, PROHIBIT, THROW, NAT and XRESOLVE are ErrWrongIPVersion (the
// kernel refuses them). LimitIfaceIn is allowed only in PREROUTING, INPUT
// and FORWARD and LimitIfaceOut only in OUTPUT, POSTROUTING and FORWARD
// (and chains called from them), checked as for RejectAction.
type AddrTypeMatch struct {
	// Types is the set of address types; at least one.
	Types AddrType
	// Dir selects the source (--src-type) or destination (--dst-type)
	// address.
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
func SourceAddrType(t AddrType) Criterion { return AddrTypeMatch{Types: t, Dir: Src} }

// NotSourceAddrType matches packets whose source address is of none of the
// types t holds.
func NotSourceAddrType(t AddrType) Criterion {
	return AddrTypeMatch{Types: t, Dir: Src, Negate: true}
}

// DestAddrType matches packets whose destination address is of type t.
func DestAddrType(t AddrType) Criterion { return AddrTypeMatch{Types: t, Dir: Dst} }

// NotDestAddrType matches packets whose destination address is of none of
// the types t holds.
func NotDestAddrType(t AddrType) Criterion {
	return AddrTypeMatch{Types: t, Dir: Dst, Negate: true}
}

func (m AddrTypeMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m AddrTypeMatch) render(st *ruleRender) error {
	switch {
	case !m.Dir.valid():
		return errRulef("address type match with %v", m.Dir)
	case m.Types == 0:
		return errRulef("%s address type match without types", m.Dir)
	case m.Types&^addrTypeAll != 0:
		return errRulef("%s address type match with unknown types %v", m.Dir, m.Types)
	case m.LimitIfaceIn && m.LimitIfaceOut:
		return errRulef("address type match limited to both the input and the output interface")
	case st.v == IPv6 && m.Types&addrTypeIPv4Only != 0:
		return errVersionf("address types %v do not exist for IPv6", m.Types&addrTypeIPv4Only)
	}
	opt := "--src-type"
	if m.Dir == Dst {
		opt = "--dst-type"
	}
	st.module("addrtype", m.Negate, opt)
	writeFlags(&st.mods, uint64(m.Types), uint64(addrTypeAll), addrTypeNames[:], "AddrType")
	switch {
	case m.LimitIfaceIn:
		st.mods.lit("--limit-iface-in")
		return st.allowed("--limit-iface-in", "", "PREROUTING", "INPUT", "FORWARD")
	case m.LimitIfaceOut:
		st.mods.lit("--limit-iface-out")
		return st.allowed("--limit-iface-out", "", "FORWARD", "OUTPUT", "POSTROUTING")
	}
	return nil
}

// ICMPMatch matches the ICMP (IPv4) or ICMPv6 (IPv6) type, and optionally
// code, of a packet (-m icmp --icmp-type T[/C], -m icmp6 --icmpv6-type
// T[/C]). Version must be the rule's: ICMP in an IPv6 rule is
// ErrWrongIPVersion and the other way round.
//
// The criterion brings its protocol with it: when the Match has no
// ProtoMatch it renders -p icmp (or -p ipv6-icmp) itself; when it has one,
// that must be the same protocol, not negated. Both spellings render the
// same arguments. In IPv4, type 255 means any type (iptables prints it as
// "any") and takes no code.
type ICMPMatch struct {
	// Version is IPv4 for ICMP and IPv6 for ICMPv6.
	Version IPVersion
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
func ICMPType(t uint8) Criterion { return ICMPMatch{Version: IPv4, Type: t} }

// ICMPTypeCode matches IPv4 ICMP packets of type t and code c.
func ICMPTypeCode(t, c uint8) Criterion {
	return ICMPMatch{Version: IPv4, Type: t, Code: c, HasCode: true}
}

// ICMPv6Type matches ICMPv6 packets of type t, any code.
func ICMPv6Type(t uint8) Criterion { return ICMPMatch{Version: IPv6, Type: t} }

// ICMPv6TypeCode matches ICMPv6 packets of type t and code c.
func ICMPv6TypeCode(t, c uint8) Criterion {
	return ICMPMatch{Version: IPv6, Type: t, Code: c, HasCode: true}
}

func (m ICMPMatch) iptablesArgs(v IPVersion) ([]string, error) { return criterionArgs(m, v) }

func (m ICMPMatch) render(st *ruleRender) error {
	if !m.Version.Valid() {
		return errRulef("ICMP type match of unknown IP version %v", m.Version)
	}
	proto, module, opt := ProtoICMP, "icmp", "--icmp-type"
	if m.Version == IPv6 {
		proto, module, opt = ProtoICMPv6, "icmp6", "--icmpv6-type"
	}
	if m.Version != st.v {
		return errVersionf("%s type match in an %v rule", proto, st.v)
	}
	anyType := m.Version == IPv4 && m.Type == 255
	if anyType && m.HasCode {
		return errRulef("ICMP type 255 means any type and takes no code")
	}
	switch {
	case st.protoCriterion && (st.protoNum != proto || st.protoNeg):
		return errRulef("%s type match in a rule whose protocol criterion is %s", proto, st.protoDesc())
	case !st.proto.set:
		st.proto = protoArg{set: true, p: proto}
		st.protoNum = proto
	}
	st.module(module, m.Negate, opt)
	w := &st.mods
	switch {
	case anyType:
		w.lit("any")
	case m.HasCode:
		w.sep()
		w.b = strconv.AppendUint(w.b, uint64(m.Type), 10)
		w.b = append(w.b, '/')
		w.b = strconv.AppendUint(w.b, uint64(m.Code), 10)
	default:
		w.uint(uint64(m.Type))
	}
	return nil
}

// portProto returns the rule's protocol when it has ports: tcp, udp or
// sctp from a non-negated ProtoMatch.
func (st *ruleRender) portProto() (Proto, bool) {
	if !st.protoCriterion || st.protoNeg || !st.protoNum.hasPorts() {
		return 0, false
	}
	return st.protoNum, true
}

// protoDesc describes the rule's protocol criterion, as "! tcp".
func (st *ruleRender) protoDesc() string {
	if st.protoNeg {
		return "! " + st.protoNum.String()
	}
	return st.protoNum.String()
}

// criterionArgs renders one criterion alone, for Criterion.iptablesArgs.
func criterionArgs(c Criterion, v IPVersion) ([]string, error) {
	if !v.Valid() {
		return nil, errRulef("unknown IP version %v", v)
	}
	var st ruleRender
	st.reset(v, placement{})
	if err := st.renderMatch(Match{c}); err != nil {
		return nil, err
	}
	var w tokWriter
	st.appendMatch(&w)
	return splitTokens(string(w.b)), nil
}

// derefValue returns x, or the value x points to when x is a non-nil
// pointer to a type that also implements T. A nil x or nil pointer is an
// error.
func derefValue[T any](x T, what string) (T, error) {
	rv := reflect.ValueOf(x)
	if !rv.IsValid() {
		return x, errRulef("no %s", what)
	}
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return x, errRulef("nil %T %s", x, what)
		}
		if e, ok := rv.Elem().Interface().(T); ok {
			return e, nil
		}
	}
	return x, nil
}

// wrongVersion reports whether a is not an address of version v.
func wrongVersion(v IPVersion, a netip.Addr) bool { return a.Is4() != (v == IPv4) }

// flagNames renders the set bits of f by name, comma-separated in bit
// order; bits outside known are shown in hex after the names.
func flagNames(f, known uint64, names []string, typ string) string {
	return string(appendFlagNames(nil, f, known, names, typ))
}

// appendFlagNames appends flagNames(f, known, names, typ) to b.
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

// writeFlags writes flagNames(f, known, names, typ) as one token.
func writeFlags(w *tokWriter, f, known uint64, names []string, typ string) {
	n := w.begin()
	w.b = appendFlagNames(w.b, f, known, names, typ)
	w.end(n)
}

// errVersionf returns an error matching ErrInvalidRule and
// ErrWrongIPVersion.
func errVersionf(format string, a ...any) error {
	return errs.Also(errRulef(format, a...), ErrWrongIPVersion)
}
