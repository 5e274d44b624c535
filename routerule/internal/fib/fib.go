package fib

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Address families, as in AF_INET and AF_INET6.
const (
	// FamilyV4 is AF_INET.
	FamilyV4 = 2
	// FamilyV6 is AF_INET6.
	FamilyV6 = 10
)

// Rule actions (FR_ACT_*), as the kernel stores them. ActionUnknown is not a
// kernel value: it is what FromDump reports for a rule that is neither a
// lookup nor a goto, because the dump does not say which drop action it is.
const (
	// ActionUnspec (0) in a delete request matches any action.
	ActionUnspec uint8 = 0
	// ActionToTable looks up a table.
	ActionToTable uint8 = 1
	// ActionGoto jumps to a later priority.
	ActionGoto uint8 = 2
	// ActionNop does nothing.
	ActionNop uint8 = 3
	// ActionBlackhole drops silently.
	ActionBlackhole uint8 = 6
	// ActionUnreachable drops with ENETUNREACH.
	ActionUnreachable uint8 = 7
	// ActionProhibit drops with EACCES.
	ActionProhibit uint8 = 8
	// ActionUnknown stands for any of the drop actions (a dumped rule).
	ActionUnknown uint8 = 0xff
)

// DropActions are the actions FromDump reports as ActionUnknown, in the
// order a deleter should try them.
var DropActions = []uint8{ActionBlackhole, ActionUnreachable, ActionProhibit, ActionNop}

// IsDrop reports whether a is an action a dump cannot tell apart from the
// others of its kind (ActionUnknown included).
func IsDrop(a uint8) bool {
	switch a {
	case ActionNop, ActionBlackhole, ActionUnreachable, ActionProhibit, ActionUnknown:
		return true
	}
	return false
}

// PortRange is a port range match; the zero value is unset.
type PortRange struct {
	// Start is the first port of the range.
	Start uint16
	// End is the last port of the range.
	End uint16
}

// UIDRange is a UID range match.
type UIDRange struct {
	// Start is the first UID of the range.
	Start uint32
	// End is the last UID of the range.
	End uint32
	// Set reports whether the rule matches on UIDs at all.
	Set bool
}

// Rule is one rule as the kernel holds it, or one request (template) as the
// netlink library sends it.
type Rule struct {
	// Family is FamilyV4 or FamilyV6.
	Family int
	// Priority is the rule's priority; in a request it is only meaningful
	// when HasPriority is set.
	Priority uint32
	// HasPriority reports whether a request carries a priority (dumped and
	// stored rules always have one).
	HasPriority bool
	// Action is one of the Action constants.
	Action uint8
	// Table is the lookup table, 0 for rules that look nothing up.
	Table uint32
	// Target is the goto target priority.
	Target uint32
	// Invert negates the match.
	Invert bool
	// Src is the source match, unset (the zero Prefix) when not matched.
	// The address is kept as sent, host bits included, as the kernel does.
	Src netip.Prefix
	// Dst is the destination match, like Src.
	Dst netip.Prefix
	// Mark is the firewall mark to match.
	Mark uint32
	// Mask is the mask applied to the packet's mark (0 with no mark match).
	Mask uint32
	// IIF is the input interface name, empty for any.
	IIF string
	// OIF is the output interface name, empty for any.
	OIF string
	// Tos is the TOS (DSCP) match, 0 for any.
	Tos uint8
	// Flow is the IPv4 realm (flow class), meaningful with HasFlow.
	Flow uint32
	// HasFlow reports whether Flow is set.
	HasFlow bool
	// TunID is the tunnel ID match, 0 for any.
	TunID uint64
	// IPProto is the IP protocol match, 0 for any.
	IPProto uint8
	// Sport is the source port range match.
	Sport PortRange
	// Dport is the destination port range match.
	Dport PortRange
	// UID is the UID range match.
	UID UIDRange
	// Protocol is the rule's origin (RTPROT_*), 0 for unspecified.
	Protocol uint8
	// SuppressPrefixlen is -1 when unset.
	SuppressPrefixlen int
	// SuppressIfgroup is -1 when unset.
	SuppressIfgroup int
}

// ipFamily is the family the netlink library derives from an address: four
// bytes, or an IPv4-mapped IPv6 address, is IPv4.
func ipFamily(ip net.IP) int {
	if len(ip) <= net.IPv4len || ip.To4() != nil {
		return FamilyV4
	}
	return FamilyV6
}

// prefixOf converts a netlink address match to a Prefix of family fam, unset
// for a zero length (which the kernel does not store). It reports false
// when the length does not fit the family.
func prefixOf(n *net.IPNet, fam int) (netip.Prefix, bool) {
	if n == nil || n.IP == nil {
		return netip.Prefix{}, true
	}
	bits, _ := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, true
	}
	ip := n.IP.To16()
	if fam == FamilyV4 {
		ip = n.IP.To4()
	}
	addr, ok := netip.AddrFromSlice(ip)
	if !ok || bits > addr.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, bits), true
}

// FromRequest returns what the netlink library sends for r: as an add
// (RuleAdd, create set) or as a delete template (RuleDel).
func FromRequest(r *netlink.Rule, create bool) (Rule, error) {
	k := Rule{Family: FamilyV4, SuppressPrefixlen: -1, SuppressIfgroup: -1}
	if r.Family != 0 {
		k.Family = r.Family
	}
	dstFam := 0
	if r.Dst != nil && r.Dst.IP != nil {
		k.Family = ipFamily(r.Dst.IP)
		dstFam = k.Family
	}
	if r.Src != nil && r.Src.IP != nil {
		k.Family = ipFamily(r.Src.IP)
		if dstFam != 0 && dstFam != k.Family {
			return Rule{}, ErrFamilyMismatch
		}
	}
	var srcOK, dstOK bool
	k.Src, srcOK = prefixOf(r.Src, k.Family)
	k.Dst, dstOK = prefixOf(r.Dst, k.Family)
	if !srcOK || !dstOK {
		return Rule{}, ErrPrefixLength
	}
	k.Action = r.Type
	if k.Action == ActionUnspec && create {
		k.Action = ActionToTable
	}
	if r.Goto >= 0 {
		k.Action = ActionGoto
		k.Target = uint32(r.Goto)
	}
	if r.Priority >= 0 {
		k.Priority, k.HasPriority = uint32(r.Priority), true
	}
	if r.Table > 0 {
		k.Table = uint32(r.Table)
	}
	k.Invert = r.Invert
	k.Tos = uint8(r.Tos)
	if r.Mark != 0 || r.Mask != nil {
		k.Mark = r.Mark
		if r.Mark != 0 {
			k.Mask = 0xffffffff // the kernel's default mask for a mark
		}
		if r.Mask != nil {
			k.Mask = *r.Mask
		}
	}
	k.IIF, k.OIF = r.IifName, r.OifName
	k.TunID = uint64(r.TunID)
	// The netlink library sends the suppressors only with a table in the
	// header (1..255).
	if r.Table > 0 && r.Table < 256 {
		if r.SuppressPrefixlen >= 0 {
			k.SuppressPrefixlen = r.SuppressPrefixlen
		}
		if r.SuppressIfgroup >= 0 {
			k.SuppressIfgroup = r.SuppressIfgroup
		}
	}
	k.setSelectors(r)
	k.Protocol = r.Protocol
	return k, nil
}

// setSelectors copies the realm, protocol, port and UID selectors of r,
// which the kernel stores as given.
func (k *Rule) setSelectors(r *netlink.Rule) {
	if r.Flow >= 0 {
		k.Flow, k.HasFlow = uint32(r.Flow), true
	}
	if r.IPProto > 0 {
		k.IPProto = uint8(r.IPProto)
	}
	if r.Sport != nil {
		k.Sport = PortRange{r.Sport.Start, r.Sport.End}
	}
	if r.Dport != nil {
		k.Dport = PortRange{r.Dport.Start, r.Dport.End}
	}
	if r.UIDRange != nil {
		k.UID = UIDRange{r.UIDRange.Start, r.UIDRange.End, true}
	}
}

// FromDump returns the kernel rule behind r, a rule as netlink's RuleList
// reports it. A rule with neither a table nor a goto target gets
// ActionUnknown.
func FromDump(r netlink.Rule) Rule {
	k := Rule{
		Family:            r.Family,
		Priority:          uint32(max(r.Priority, 0)),
		HasPriority:       true,
		Invert:            r.Invert,
		Tos:               uint8(r.Tos),
		Mark:              r.Mark,
		IIF:               r.IifName,
		OIF:               r.OifName,
		TunID:             uint64(r.TunID),
		Protocol:          r.Protocol,
		SuppressPrefixlen: -1,
		SuppressIfgroup:   -1,
	}
	k.Src, _ = prefixOf(r.Src, r.Family)
	k.Dst, _ = prefixOf(r.Dst, r.Family)
	if r.Table > 0 {
		k.Table = uint32(r.Table)
	}
	switch {
	case r.Goto > 0:
		k.Action, k.Target = ActionGoto, uint32(r.Goto)
	case k.Table != 0:
		k.Action = ActionToTable
	default:
		k.Action = ActionUnknown
	}
	if r.Mask != nil {
		k.Mask = *r.Mask
	} else if r.Mark != 0 {
		k.Mask = 0xffffffff
	}
	if r.SuppressPrefixlen >= 0 {
		k.SuppressPrefixlen = r.SuppressPrefixlen
	}
	if r.SuppressIfgroup >= 0 {
		k.SuppressIfgroup = r.SuppressIfgroup
	}
	k.setSelectors(&r)
	return k
}

// Dump returns k as netlink's RuleList reports it: without its action.
func (k Rule) Dump() netlink.Rule {
	r := netlink.NewRule()
	r.Family = k.Family
	r.Priority = int(k.Priority)
	r.Table = int(k.Table)
	if k.Action == ActionGoto {
		r.Goto = int(k.Target)
	}
	r.Invert = k.Invert
	r.Tos = uint(k.Tos)
	r.Src = ipNet(k.Src)
	r.Dst = ipNet(k.Dst)
	r.Mark = k.Mark
	if k.Mark != 0 || k.Mask != 0 {
		m := k.Mask
		r.Mask = &m
	}
	r.IifName, r.OifName = k.IIF, k.OIF
	if k.HasFlow {
		r.Flow = int(k.Flow)
	}
	r.TunID = uint(k.TunID)
	r.SuppressPrefixlen, r.SuppressIfgroup = k.SuppressPrefixlen, k.SuppressIfgroup
	r.IPProto = int(k.IPProto)
	if k.Sport != (PortRange{}) {
		r.Sport = netlink.NewRulePortRange(k.Sport.Start, k.Sport.End)
	}
	if k.Dport != (PortRange{}) {
		r.Dport = netlink.NewRulePortRange(k.Dport.Start, k.Dport.End)
	}
	if k.UID.Set {
		r.UIDRange = netlink.NewRuleUIDRange(k.UID.Start, k.UID.End)
	}
	r.Protocol = k.Protocol
	return *r
}

func ipNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// actionMatches reports whether a request's action matches a rule's,
// counting a dumped rule of unknown drop action as any drop action.
func actionMatches(req, r uint8) bool {
	return req == r || (r == ActionUnknown && IsDrop(req)) || (req == ActionUnknown && IsDrop(r))
}

// addrMatches is the kernel's family compare: the request's source,
// destination and TOS match anything when unset.
func addrMatches(req, r Rule) bool {
	if req.Src.IsValid() && req.Src != r.Src {
		return false
	}
	if req.Dst.IsValid() && req.Dst != r.Dst {
		return false
	}
	if req.Tos != 0 && req.Tos != r.Tos {
		return false
	}
	if req.HasFlow && req.Family == FamilyV4 && (!r.HasFlow || req.Flow != r.Flow) {
		return false
	}
	return true
}

// Exists reports whether the kernel refuses to add req (with NLM_F_EXCL)
// because of r: every attribute equal except the invert flag and the goto
// target, with the request's unset source, destination and TOS matching
// anything.
func Exists(req, r Rule) bool {
	return req.Family == r.Family &&
		actionMatches(req.Action, r.Action) &&
		req.Table == r.Table &&
		req.Priority == r.Priority &&
		req.IIF == r.IIF && req.OIF == r.OIF &&
		req.Mark == r.Mark && req.Mask == r.Mask &&
		req.SuppressIfgroup == r.SuppressIfgroup &&
		req.SuppressPrefixlen == r.SuppressPrefixlen &&
		req.TunID == r.TunID &&
		req.UID == r.UID &&
		req.IPProto == r.IPProto &&
		req.Protocol == r.Protocol &&
		req.Sport == r.Sport && req.Dport == r.Dport &&
		addrMatches(req, r)
}

// DeleteMatches reports whether a delete request req matches r: every
// attribute req sets equals r's; the invert flag and the goto target are
// not compared.
func DeleteMatches(req, r Rule) bool {
	switch {
	case req.Family != r.Family:
		return false
	case req.Action != ActionUnspec && !actionMatches(req.Action, r.Action):
		return false
	case req.Table != 0 && req.Table != r.Table:
		return false
	case req.HasPriority && req.Priority != r.Priority:
		return false
	case req.IIF != "" && req.IIF != r.IIF:
		return false
	case req.OIF != "" && req.OIF != r.OIF:
		return false
	case req.Mark != 0 && req.Mark != r.Mark:
		return false
	case req.SuppressIfgroup != -1 && req.SuppressIfgroup != r.SuppressIfgroup:
		return false
	case req.SuppressPrefixlen != -1 && req.SuppressPrefixlen != r.SuppressPrefixlen:
		return false
	case req.Mask != 0 && req.Mask != r.Mask:
		return false
	case req.TunID != 0 && req.TunID != r.TunID:
		return false
	case req.UID.Set && req.UID != r.UID:
		return false
	case req.IPProto != 0 && req.IPProto != r.IPProto:
		return false
	case req.Protocol != 0 && req.Protocol != r.Protocol:
		return false
	case req.Sport != (PortRange{}) && req.Sport != r.Sport:
		return false
	case req.Dport != (PortRange{}) && req.Dport != r.Dport:
		return false
	}
	return addrMatches(req, r)
}
