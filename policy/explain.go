package policy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Packet is the first packet of a flow as Explain sees it.
type Packet struct {
	// Src and Dst are the addresses, of one family.
	Src, Dst netip.Addr
	// Protocol is the IP protocol.
	Protocol netfilter.Proto
	// SrcPort and DstPort are the ports of TCP, UDP and SCTP.
	SrcPort, DstPort uint16
	// ICMPType and ICMPCode are those of an ICMP or ICMPv6 packet.
	ICMPType, ICMPCode uint8
}

// Verdict is what Explain decided.
type Verdict uint8

const (
	// Denied packets are dropped or rejected.
	Denied Verdict = iota
	// Allowed packets pass this endpoint in this direction.
	Allowed
)

// Explanation says what decided a packet at one endpoint in one
// direction, from the model alone (not from the kernel's chains).
type Explanation struct {
	// Verdict is the outcome.
	Verdict Verdict
	// Tier is the tier that decided, empty when a profile or the
	// endpoint's default did.
	Tier string
	// Policy is the ID of the policy or, with Profile set, the profile
	// whose rule decided; empty when a default decided.
	Policy string
	// Profile says Policy names a profile.
	Profile bool
	// Rule is the index of the deciding rule in its direction's list, -1
	// when a default decided.
	Rule int
	// Reason says in words what decided: "rule", "end of tier", "no
	// profile allowed it", "admin down", "policy missing (fail closed)",
	// "unknown endpoint".
	Reason string
	// Logged lists the Log rules the packet met, as "policy/rule".
	Logged []string
}

// String returns the explanation in one line.
func (e Explanation) String() string {
	s := e.Verdict.String() + ": " + e.Reason
	switch {
	case e.Rule >= 0 && e.Profile:
		s += fmt.Sprintf(" (profile %s rule %d)", e.Policy, e.Rule)
	case e.Rule >= 0:
		s += fmt.Sprintf(" (tier %s policy %s rule %d)", e.Tier, e.Policy, e.Rule)
	case e.Policy != "":
		s += fmt.Sprintf(" (tier %s policy %s)", e.Tier, e.Policy)
	case e.Tier != "":
		s += fmt.Sprintf(" (tier %s)", e.Tier)
	}
	return s
}

// Explain decides pkt at workload id in one direction (ingress: to the
// workload; else from it) from the model, and says what decided. It is
// written apart from the renderer and follows the model's semantics:
// tiers in order, skipping a tier with no policy for the direction;
// policies and rules in order, where Allow and Deny decide, Pass goes to
// the next tier and Log goes on; a tier where no rule decided ends with
// its EndOfTier; then the profiles in order (Pass in a profile goes to the
// next profile); and deny when nothing allowed. A policy the model lacks
// denies (fail closed), a profile it lacks allows nothing. Conntrack is
// not modelled: Explain answers for a flow's first packet.
func (m *Model) Explain(pkt Packet, id string, ingress bool) Explanation {
	w, ok := m.Workload(id)
	if !ok {
		return Explanation{Rule: -1, Reason: "unknown endpoint"}
	}
	if w.AdminDown {
		return Explanation{Rule: -1, Reason: "admin down"}
	}
	var logged []string
	for _, tier := range w.Tiers {
		ids := tier.Egress
		if ingress {
			ids = tier.Ingress
		}
		if len(ids) == 0 {
			continue
		}
		passed := false
		for _, pid := range ids {
			p, ok := m.Policy(pid)
			if !ok {
				return Explanation{Tier: tier.Name, Policy: pid, Rule: -1, Reason: "policy missing (fail closed)", Logged: logged}
			}
			rules := p.Egress
			if ingress {
				rules = p.Ingress
			}
			a, i := m.decide(pkt, pid, rules, &logged)
			switch a {
			case Allow, Deny:
				return Explanation{Verdict: verdictOf(a), Tier: tier.Name, Policy: pid, Rule: i, Reason: "rule", Logged: logged}
			case Pass:
				passed = true
			}
			if passed {
				break
			}
		}
		if !passed && tier.EndOfTier != Pass {
			return Explanation{Tier: tier.Name, Rule: -1, Reason: "end of tier", Logged: logged}
		}
	}
	for _, pid := range w.Profiles {
		p, ok := m.Profile(pid)
		if !ok {
			continue
		}
		rules := p.Egress
		if ingress {
			rules = p.Ingress
		}
		if a, i := m.decide(pkt, pid, rules, &logged); a == Allow || a == Deny {
			return Explanation{Verdict: verdictOf(a), Policy: pid, Profile: true, Rule: i, Reason: "rule", Logged: logged}
		}
	}
	return Explanation{Rule: -1, Reason: "no profile allowed it", Logged: logged}
}

func verdictOf(a Action) Verdict {
	if a == Allow {
		return Allowed
	}
	return Denied
}

// decide runs rules on pkt: the action and index of the first rule that
// matches with Allow, Deny or Pass, or 0 and -1 when none does. Log rules
// that match are added to logged.
func (m *Model) decide(pkt Packet, owner string, rules []Rule, logged *[]string) (Action, int) {
	for i, r := range rules {
		if !m.matches(pkt, r) {
			continue
		}
		if r.Action == Log {
			*logged = append(*logged, fmt.Sprintf("%s/%s", owner, ruleName(i, r)))
			continue
		}
		return r.Action, i
	}
	return 0, -1
}

// matches reports whether rule r matches pkt.
func (m *Model) matches(pkt Packet, r Rule) bool {
	f := ipfamily.Of(pkt.Src)
	if r.Family != 0 && r.Family != f {
		return false
	}
	if r.Protocol != 0 && r.Protocol != pkt.Protocol {
		return false
	}
	if r.NotProtocol != 0 && r.NotProtocol == pkt.Protocol {
		return false
	}
	if r.Protocol == netfilter.ProtoICMP && f != ipfamily.IPv4 || r.Protocol == netfilter.ProtoICMPv6 && f != ipfamily.IPv6 {
		return false
	}
	if r.ICMP != nil && !icmpMatches(*r.ICMP, pkt) {
		return false
	}
	if r.NotICMP != nil && icmpMatches(*r.NotICMP, pkt) {
		return false
	}
	return m.peerMatches(r.Src, pkt.Src, pkt.Protocol, pkt.SrcPort) &&
		m.peerMatches(r.Dst, pkt.Dst, pkt.Protocol, pkt.DstPort)
}

func icmpMatches(ic ICMP, pkt Packet) bool {
	return ic.Type == pkt.ICMPType && (!ic.WithCode || ic.Code == pkt.ICMPCode)
}

// peerMatches reports whether one side of a packet (address, protocol,
// port) satisfies a peer.
func (m *Model) peerMatches(p Peer, addr netip.Addr, proto netfilter.Proto, port uint16) bool {
	if len(p.Nets) > 0 || len(p.Sets) > 0 {
		in := slices.ContainsFunc(p.Nets, func(n netip.Prefix) bool { return n.Contains(addr) }) ||
			slices.ContainsFunc(p.Sets, func(id string) bool { return !m.setBad(id, SetNets) && m.setHolds(id, addr) })
		if !in {
			return false
		}
	}
	if slices.ContainsFunc(p.NotNets, func(n netip.Prefix) bool { return n.Contains(addr) }) ||
		slices.ContainsFunc(p.NotSets, func(id string) bool { return m.setBad(id, SetNets) || m.setHolds(id, addr) }) {
		return false
	}
	triple := netfilter.IPPortMember(addr, proto, port)
	if len(p.Ports) > 0 || len(p.NamedPorts) > 0 {
		in := slices.ContainsFunc(p.Ports, func(r netfilter.PortRange) bool { return r.Contains(port) }) ||
			slices.ContainsFunc(p.NamedPorts, func(id string) bool { return !m.setBad(id, SetAddrPorts) && m.HasMember(id, triple) })
		if !in {
			return false
		}
	}
	return !slices.ContainsFunc(p.NotPorts, func(r netfilter.PortRange) bool { return r.Contains(port) }) &&
		!slices.ContainsFunc(p.NotNamedPorts, func(id string) bool { return m.setBad(id, SetAddrPorts) || m.HasMember(id, triple) })
}

// setHolds reports whether an address set holds addr: a member network
// contains it.
func (m *Model) setHolds(id string, addr netip.Addr) bool {
	s, ok := m.sets[id]
	if !ok {
		return false
	}
	for mem := range s.members {
		if mem.Prefix().Contains(addr) {
			return true
		}
	}
	return false
}
