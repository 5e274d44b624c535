package netfilter

import (
	"net/netip"
	"strconv"
)

// Action is what a Rule does with a matching packet. As with Match, the
// set is closed: the package's Action* types (ActionAccept, ActionDrop,
// ActionReturn, ActionReject, ActionJump, ActionGoto, ActionSetMark,
// ActionMasquerade, ActionSNAT, ActionDNAT, ActionLog, ActionNoTrack,
// ActionNFLOG, ActionVerdictMap) are its only implementations, built by
// constructors such as Accept and Jump or as literals. Pass the values:
// Validate refuses a pointer to one.
type Action interface {
	// action marks the package's actions.
	action()
}

// ActionAccept lets the packet through.
type ActionAccept struct{}

// Accept returns the action that lets the packet through.
func Accept() Action { return ActionAccept{} }

// ActionDrop drops the packet silently. Backends may refuse it where the
// kernel does (iptables: in the nat table).
type ActionDrop struct{}

// Drop returns the action that drops the packet.
func Drop() Action { return ActionDrop{} }

// ActionReturn returns from the current chain to the one that jumped to
// it; in a built-in chain it applies the chain's policy.
type ActionReturn struct{}

// Return returns the action that leaves the current chain.
func Return() Action { return ActionReturn{} }

// RejectWith is the reply an ActionReject sends. The zero value is
// RejectPortUnreachable.
type RejectWith uint8

// Replies of an ActionReject. Some exist in one IP family only; using one
// in a rule of the other family is ErrWrongFamily.
const (
	// RejectPortUnreachable: ICMP (or ICMPv6) port unreachable.
	RejectPortUnreachable RejectWith = iota
	// RejectTCPReset: a TCP RST; the rule must have Protocol(ProtoTCP).
	RejectTCPReset
	// RejectAdminProhibited: administratively prohibited (ICMP and
	// ICMPv6).
	RejectAdminProhibited
	// RejectNetUnreachable: network unreachable (IPv4 only).
	RejectNetUnreachable
	// RejectHostUnreachable: host unreachable (IPv4 only).
	RejectHostUnreachable
	// RejectProtoUnreachable: protocol unreachable (IPv4 only).
	RejectProtoUnreachable
	// RejectNetProhibited: network prohibited (IPv4 only).
	RejectNetProhibited
	// RejectHostProhibited: host prohibited (IPv4 only).
	RejectHostProhibited
	// RejectNoRoute: no route to destination (IPv6 only).
	RejectNoRoute
	// RejectAddrUnreachable: address unreachable (IPv6 only).
	RejectAddrUnreachable
	// RejectPolicyFail: source address failed policy (IPv6 only).
	RejectPolicyFail
	// RejectRejectRoute: reject route to destination (IPv6 only).
	RejectRejectRoute

	rejectWithCount
)

// rejectReplies holds each reply's name and the families it exists in.
var rejectReplies = [rejectWithCount]struct {
	name   string
	v4, v6 bool
}{
	RejectPortUnreachable:  {"port-unreachable", true, true},
	RejectTCPReset:         {"tcp-reset", true, true},
	RejectAdminProhibited:  {"admin-prohibited", true, true},
	RejectNetUnreachable:   {"net-unreachable", true, false},
	RejectHostUnreachable:  {"host-unreachable", true, false},
	RejectProtoUnreachable: {"proto-unreachable", true, false},
	RejectNetProhibited:    {"net-prohibited", true, false},
	RejectHostProhibited:   {"host-prohibited", true, false},
	RejectNoRoute:          {"no-route", false, true},
	RejectAddrUnreachable:  {"addr-unreachable", false, true},
	RejectPolicyFail:       {"policy-fail", false, true},
	RejectRejectRoute:      {"reject-route", false, true},
}

// String names the reply without a family prefix, such as
// "port-unreachable" or "tcp-reset".
func (w RejectWith) String() string {
	if w < rejectWithCount {
		return rejectReplies[w].name
	}
	return "RejectWith(" + strconv.Itoa(int(w)) + ")"
}

// ActionReject drops the packet and answers with an error. The kernel
// allows it only where packets are filtered: backends refuse it elsewhere
// (iptables: outside the filter table's INPUT, FORWARD and OUTPUT chains
// and the chains they call).
type ActionReject struct {
	// With is the reply; the zero value is port unreachable.
	With RejectWith
}

// Reject returns the action that rejects the packet with reply with.
func Reject(with RejectWith) Action { return ActionReject{With: with} }

// ActionJump continues in another chain and comes back after it. The
// chain must be a valid chain name (ValidateChainName), not a built-in
// chain or a target name.
type ActionJump struct {
	// Chain is the chain to jump to.
	Chain string
}

// Jump returns the action that jumps to chain.
func Jump(chain string) Action { return ActionJump{Chain: chain} }

// ActionGoto continues in another chain without coming back: a return
// there returns to the chain that jumped to this one. The chain is checked
// as for ActionJump.
type ActionGoto struct {
	// Chain is the chain to go to.
	Chain string
}

// Goto returns the action that goes to chain.
func Goto(chain string) Action { return ActionGoto{Chain: chain} }

// ActionSetMark sets the packet's mark bits under Mask to Mark, keeping
// the others. Mark must lie within Mask and Mask must not be zero.
type ActionSetMark struct {
	// Mark is the new value of the bits under Mask.
	Mark uint32
	// Mask selects the bits that change.
	Mask uint32
}

// SetMark sets the whole packet mark to mark.
func SetMark(mark uint32) Action { return ActionSetMark{Mark: mark, Mask: ^uint32(0)} }

// SetMaskedMark sets the mark bits under mask to mark, keeping the others.
func SetMaskedMark(mark, mask uint32) Action { return ActionSetMark{Mark: mark, Mask: mask} }

// ClearMark clears the mark bits under mask, keeping the others.
func ClearMark(mask uint32) Action { return ActionSetMark{Mask: mask} }

// ActionMasquerade translates the source address to the address of the
// output interface. Only in source NAT at POSTROUTING (iptables: the nat
// table's POSTROUTING chain and the chains it calls).
type ActionMasquerade struct {
	// ToPorts, when not zero, limits source ports to this range; it needs
	// a tcp, udp or sctp protocol criterion and must not start at 0.
	ToPorts PortRange
	// RandomFully randomises source ports fully.
	RandomFully bool
}

// Masquerade returns the masquerade action without options (set ToPorts
// or RandomFully in an ActionMasquerade literal).
func Masquerade() Action { return ActionMasquerade{} }

// ActionSNAT translates the source address to To. Only in source NAT
// (iptables: the nat table's POSTROUTING and INPUT chains and the chains
// they call).
type ActionSNAT struct {
	// To is the new source address, of the rule's IP family.
	To netip.Addr
	// Ports, when not zero, limits source ports to this range; it needs a
	// tcp, udp or sctp protocol criterion and must not start at 0.
	Ports PortRange
	// RandomFully randomises source ports fully.
	RandomFully bool
}

// SNAT returns the action that translates the source address to to.
func SNAT(to netip.Addr) Action { return ActionSNAT{To: to} }

// ActionDNAT translates the destination address, and optionally port, to
// To and Ports. Only in destination NAT (iptables: the nat table's
// PREROUTING and OUTPUT chains and the chains they call).
type ActionDNAT struct {
	// To is the new destination address, of the rule's IP family.
	To netip.Addr
	// Ports, when not zero, is the new destination port (or range); it
	// needs a tcp, udp or sctp protocol criterion and must not start at 0.
	Ports PortRange
}

// DNAT returns the action that translates the destination to to; a zero
// port keeps the packet's port (netip.AddrPortFrom(addr, 0)).
func DNAT(to netip.AddrPort) Action {
	a := ActionDNAT{To: to.Addr()}
	if to.Port() != 0 {
		a.Ports = Port(to.Port())
	}
	return a
}

// LogLevel is the syslog level of an ActionLog. The zero value is
// LogLevelDefault, which is warning.
type LogLevel uint8

// Log levels, from most to least severe.
const (
	// LogLevelDefault is warning, the level used when none is given.
	LogLevelDefault LogLevel = iota
	LogLevelEmerg
	LogLevelAlert
	LogLevelCrit
	LogLevelErr
	LogLevelWarning
	LogLevelNotice
	LogLevelInfo
	LogLevelDebug
)

// Syslog returns the syslog severity of l, 0 (emerg) to 7 (debug);
// LogLevelDefault is 4 (warning). It is meaningless for a level above
// LogLevelDebug, which Validate refuses.
func (l LogLevel) Syslog() int {
	if l == LogLevelDefault {
		return int(LogLevelWarning) - 1
	}
	return int(l) - 1
}

// ActionLog logs the packet to the kernel log and goes on with the next
// rule. In a network namespace other than the initial one the kernel logs
// only when the net.netfilter.nf_log_all_netns sysctl is set. A backend
// bounds the prefix's length (iptables: 29 bytes).
type ActionLog struct {
	// Prefix starts every log line; empty means none. Printable text
	// without double quotes or backslashes.
	Prefix string
	// Level is the syslog level; zero is warning.
	Level LogLevel
}

// Log returns the action that logs the packet with prefix (empty for
// none) at level warning.
func Log(prefix string) Action { return ActionLog{Prefix: prefix} }

// ActionNoTrack exempts the packet from connection tracking. Only before
// connection tracking (iptables: the raw table).
type ActionNoTrack struct{}

// NoTrack returns the action that exempts the packet from connection
// tracking.
func NoTrack() Action { return ActionNoTrack{} }

// ActionNFLOG sends the packet to a netlink log group and goes on with the
// next rule. A backend bounds the prefix's length (iptables: 63 bytes).
type ActionNFLOG struct {
	// Group is the netlink log group.
	Group uint16
	// Prefix is passed with every packet; empty means none. Printable text
	// without double quotes or backslashes.
	Prefix string
	// Size is how many bytes of each packet to copy; 0 copies all.
	Size uint32
}

// NFLOG returns the action that sends the packet to netlink log group
// group.
func NFLOG(group uint16) Action { return ActionNFLOG{Group: group} }

// ActionVerdictMap looks the packet up in a verdict map, a construct of
// nftables alone, and applies the verdict it finds there (accept, drop,
// return, or a jump or goto to a chain); a packet whose key is not in the
// map goes on with the next rule. The key is built as for MatchSet: Dims
// gives, for each dimension of the map's key that has a side (an address,
// a port, an interface), which side of the packet it is taken from. It
// dispatches in one lookup however many entries the map holds (as
// kube-proxy's nftables mode does with VIP . protocol . port → goto a
// service chain). The map must exist, with the rule's IP family, when the
// rule is written. Backends without verdict maps refuse it with
// ErrUnsupported (iptables does).
type ActionVerdictMap struct {
	// Map is the verdict map's name, with the rules of MatchSet's Name.
	Map string
	// Dims has one direction per key dimension used, 1 to
	// MaxIPSetDimensions of them.
	Dims []Direction
}

// VerdictMap returns the action that dispatches the packet through the
// verdict map name, taking each dimension of its key from the side dims
// gives.
func VerdictMap(name string, dims ...Direction) Action {
	return ActionVerdictMap{Map: name, Dims: dims}
}

func (ActionAccept) action()     {}
func (ActionDrop) action()       {}
func (ActionReturn) action()     {}
func (ActionReject) action()     {}
func (ActionJump) action()       {}
func (ActionGoto) action()       {}
func (ActionSetMark) action()    {}
func (ActionMasquerade) action() {}
func (ActionSNAT) action()       {}
func (ActionDNAT) action()       {}
func (ActionLog) action()        {}
func (ActionNoTrack) action()    {}
func (ActionNFLOG) action()      {}
func (ActionVerdictMap) action() {}
