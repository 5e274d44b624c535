package policy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Action is what a rule does with a packet it matches.
type Action uint8

const (
	// Allow accepts the packet for this direction: no later rule, policy
	// or tier of the endpoint is consulted.
	Allow Action = iota + 1
	// Deny refuses the packet (Options.Deny: dropped or rejected).
	Deny
	// Pass skips the rest of the tier: the packet goes on to the next
	// tier, or to the endpoint's profiles after the last one.
	Pass
	// Log logs the packet and goes on with the next rule (non-terminal).
	// Each Log rule logs at most Options.LogLimit packets; the prefix
	// names the policy and rule.
	Log
)

// ICMP matches an ICMP (IPv4) or ICMPv6 (IPv6) type, and a code when
// WithCode is set.
type ICMP struct {
	// Type is the ICMP type.
	Type uint8
	// Code is the ICMP code, matched only when WithCode is true.
	Code uint8
	// WithCode says whether Code is matched.
	WithCode bool
}

// Peer is one side of a packet (its source or its destination) as a rule
// matches it. Every non-empty field must hold (AND); inside a list any
// element may match (OR), and for a Not… list none may. An empty Peer
// matches every packet.
type Peer struct {
	// Nets are networks the address is in (any of them). A rule rendered
	// for one IP family uses the networks of that family; one whose Nets
	// are all of the other family matches nothing there and is left out.
	Nets []netip.Prefix
	// NotNets are networks the address is not in (none of them).
	NotNets []netip.Prefix
	// Sets are address sets (SetUpdate IDs of kind SetNets) the address is
	// a member of (any of them).
	Sets []string
	// NotSets are address sets the address is not a member of.
	NotSets []string
	// Ports are ports and port ranges (any of them); they need Protocol
	// TCP, UDP or SCTP on the rule. Any number of ranges is allowed.
	Ports []netfilter.PortRange
	// NotPorts are ports the packet's port is not in.
	NotPorts []netfilter.PortRange
	// NamedPorts are address·protocol·port sets (SetUpdate IDs of kind
	// SetAddrPorts), such as the endpoints that define a named port: the
	// packet's address, protocol and port together are a member of one of
	// them. They OR with Ports: a packet matches the peer's ports when it
	// matches Ports or NamedPorts.
	NamedPorts []string
	// NotNamedPorts are address·protocol·port sets the packet is not in.
	NotNamedPorts []string
}

// Rule is one rule of a policy or profile: packets that match every field
// get Action.
type Rule struct {
	// Action is what happens to a matching packet. Required.
	Action Action
	// Family limits the rule to one IP family; zero means both.
	Family ipfamily.Family
	// Protocol is the IP protocol the packet must have; zero means any.
	Protocol netfilter.Proto
	// NotProtocol is a protocol the packet must not have; zero means none.
	NotProtocol netfilter.Proto
	// ICMP matches an ICMP type (and code); it needs Protocol ICMP (IPv4)
	// or ICMPv6 (IPv6), and makes the rule of that family.
	ICMP *ICMP
	// NotICMP is an ICMP type (and code) the packet must not have; it
	// needs Protocol ICMP or ICMPv6.
	NotICMP *ICMP
	// Src and Dst match the packet's source and destination.
	Src, Dst Peer
	// Name names the rule in logs, counters and explanations; empty means
	// its index in the policy.
	Name string
}

// Policy is a named, ordered list of ingress and egress rules that
// endpoints refer to by ID through their tiers.
type Policy struct {
	// ID names the policy; unique among policies.
	ID string
	// Ingress are the rules for packets to the endpoint, in order.
	Ingress []Rule
	// Egress are the rules for packets from the endpoint, in order.
	Egress []Rule
}

// Profile is the fallback rules of an endpoint, consulted after its tiers
// (or when a tier passes); an endpoint whose profiles allow nothing is
// denied.
type Profile struct {
	// ID names the profile; unique among profiles.
	ID string
	// Ingress are the rules for packets to the endpoint, in order.
	Ingress []Rule
	// Egress are the rules for packets from the endpoint, in order.
	Egress []Rule
}

// TierPolicies is one tier of an endpoint: the policies, in order, that
// apply to the endpoint in each direction, and what happens to a packet
// that no policy of the tier decides.
type TierPolicies struct {
	// Name names the tier (in logs and explanations).
	Name string
	// Ingress are the IDs of the policies for packets to the endpoint.
	Ingress []string
	// Egress are the IDs of the policies for packets from the endpoint.
	Egress []string
	// EndOfTier is what happens to a packet that no policy of the tier
	// allowed, denied or passed: Deny (the zero value means Deny) or Pass.
	EndOfTier Action
}

// SetKind is what a set holds.
type SetKind uint8

const (
	// SetNets holds addresses and networks (a rule's Sets, NotSets).
	SetNets SetKind = iota + 1
	// SetAddrPorts holds address·protocol·port triples (a rule's
	// NamedPorts, NotNamedPorts).
	SetAddrPorts
)

// Message types the Manager takes through OnUpdate.
type (
	// PolicyUpdate adds or replaces a policy.
	PolicyUpdate struct {
		// Policy is the policy, whole.
		Policy Policy
	}
	// PolicyRemove removes a policy; endpoints that still refer to it
	// deny what it would have decided (fail closed).
	PolicyRemove struct {
		// ID is the policy's ID.
		ID string
	}
	// ProfileUpdate adds or replaces a profile.
	ProfileUpdate struct {
		// Profile is the profile, whole.
		Profile Profile
	}
	// ProfileRemove removes a profile.
	ProfileRemove struct {
		// ID is the profile's ID.
		ID string
	}
	// SetUpdate adds or replaces a set with exactly Members: addresses
	// and networks (netfilter.IPMember, NetMember) for SetNets, triples
	// (netfilter.IPPortMember) for SetAddrPorts. A manager takes the
	// members of its family.
	SetUpdate struct {
		// ID names the set in rules (Peer.Sets, Peer.NamedPorts).
		ID string
		// Kind is what the set holds.
		Kind SetKind
		// Members are the set's members, of either family.
		Members []netfilter.Member
	}
	// SetDelta adds and removes members of a set already given.
	SetDelta struct {
		// ID is the set's ID.
		ID string
		// Add are members added.
		Add []netfilter.Member
		// Remove are members removed; those not in the set are ignored.
		Remove []netfilter.Member
	}
	// SetRemove removes a set; rules that name it treat it as empty.
	SetRemove struct {
		// ID is the set's ID.
		ID string
	}
	// WorkloadUpdate adds or replaces a workload endpoint: a pod's
	// interface on this node.
	WorkloadUpdate struct {
		// Endpoint is the workload, whole.
		Endpoint Workload
	}
	// WorkloadRemove removes a workload endpoint: its interface is
	// unknown again, and denied.
	WorkloadRemove struct {
		// ID is the workload's ID.
		ID string
	}
	// HostEndpointUpdate adds or replaces a host endpoint (Explain
	// answers for workloads only).
	HostEndpointUpdate struct {
		// Endpoint is the host endpoint, whole.
		Endpoint HostEndpoint
	}
	// HostEndpointRemove removes a host endpoint.
	HostEndpointRemove struct {
		// ID is the host endpoint's ID.
		ID string
	}
)

// Workload is a workload endpoint: the host side of a pod's interface.
type Workload struct {
	// ID names the endpoint; unique among workloads.
	ID string
	// Iface is the host-side interface name; it must start with one of
	// Options.WorkloadPrefixes. Unique among workloads.
	Iface string
	// Tiers are the endpoint's tiers, in order. A tier with no policy for
	// a direction is skipped in that direction.
	Tiers []TierPolicies
	// Profiles are the IDs of the endpoint's profiles, in order.
	Profiles []string
	// AdminDown denies every packet to and from the endpoint.
	AdminDown bool
}

// HostEndpoint is one of the host's own interfaces under policy, or, with
// Iface "*", every interface that no other host endpoint names.
type HostEndpoint struct {
	// ID names the endpoint; unique among host endpoints.
	ID string
	// Iface is the interface name, or "*" for every other interface; not
	// a workload's (Options.WorkloadPrefixes).
	Iface string
	// Tiers apply to traffic to and from the host through Iface.
	Tiers []TierPolicies
	// ForwardTiers apply to traffic forwarded through Iface
	// (apply-on-forward policies).
	ForwardTiers []TierPolicies
	// PreDNATTiers apply to traffic arriving on Iface before destination
	// NAT (ingress policies only; needs Options.Mangle). A packet they
	// do not allow or deny goes on; their tiers have no end-of-tier deny.
	PreDNATTiers []TierPolicies
	// UntrackedTiers apply to traffic to and from the host through Iface
	// (not to forwarded traffic) before connection tracking; an allowed
	// packet is left untracked (needs Options.Raw).
	UntrackedTiers []TierPolicies
	// Profiles are the IDs of the endpoint's profiles, in order, for
	// traffic to and from the host.
	Profiles []string
}

// Validate reports what is wrong with r, or nil; the error matches
// ErrInvalidRule.
func (r Rule) Validate() error {
	if p := r.problem(); p != "" {
		return fmt.Errorf("%w: %s", ErrInvalidRule, p)
	}
	return nil
}

func (r Rule) problem() string {
	if r.Action < Allow || r.Action > Log {
		return fmt.Sprintf("unknown action %d", r.Action)
	}
	if r.Family != 0 && !r.Family.Valid() {
		return fmt.Sprintf("unknown family %d", r.Family)
	}
	if r.Protocol != 0 && r.Protocol == r.NotProtocol {
		return fmt.Sprintf("protocol %s is both required and excluded", r.Protocol)
	}
	for _, ic := range []*ICMP{r.ICMP, r.NotICMP} {
		if ic == nil {
			continue
		}
		switch r.Protocol {
		case netfilter.ProtoICMP:
			if r.Family == ipfamily.IPv6 {
				return "ICMP match on an IPv6 rule (use ICMPv6)"
			}
		case netfilter.ProtoICMPv6:
			if r.Family == ipfamily.IPv4 {
				return "ICMPv6 match on an IPv4 rule (use ICMP)"
			}
		default:
			return "an ICMP type match needs Protocol ICMP or ICMPv6"
		}
	}
	for _, side := range []struct {
		name string
		p    Peer
	}{{"source", r.Src}, {"destination", r.Dst}} {
		if pr := side.p.problem(r); pr != "" {
			return side.name + " " + pr
		}
	}
	return ""
}

func (p Peer) problem(r Rule) string {
	for _, list := range [][]netip.Prefix{p.Nets, p.NotNets} {
		for _, n := range list {
			f := ipfamily.Of(n.Addr())
			if !n.IsValid() || !f.Valid() {
				return fmt.Sprintf("net %v is not a valid prefix", n)
			}
			if n != n.Masked() {
				return fmt.Sprintf("net %s has host bits set (the network is %s)", n, n.Masked())
			}
		}
	}
	for _, list := range [][]string{p.Sets, p.NotSets, p.NamedPorts, p.NotNamedPorts} {
		for _, id := range list {
			if err := validID("set", id); err != nil {
				return err.Error()
			}
		}
	}
	for _, list := range [][]netfilter.PortRange{p.Ports, p.NotPorts} {
		for _, pr := range list {
			if pr.First > pr.Last {
				return fmt.Sprintf("port range %d-%d is empty", pr.First, pr.Last)
			}
		}
	}
	if len(p.Ports) > 0 || len(p.NotPorts) > 0 {
		switch r.Protocol {
		case netfilter.ProtoTCP, netfilter.ProtoUDP, netfilter.ProtoSCTP:
		default:
			return "ports need Protocol TCP, UDP or SCTP"
		}
	}
	return ""
}

// maxIDLength bounds the IDs of policies, profiles, sets and endpoints:
// room for a Kubernetes "namespace/name" (63 + 1 + 253 bytes) behind a
// prefix of the agent's. Names in the kernel are hashes of long IDs, and
// comments are cut (commentOf).
const maxIDLength = 512

// validID checks an ID: 1 to maxIDLength bytes of printable ASCII without
// spaces or quotes.
func validID(what, id string) error {
	if id == "" || len(id) > maxIDLength {
		return fmt.Errorf("%s ID %q must be 1 to %d bytes", what, id, maxIDLength)
	}
	for _, c := range []byte(id) {
		if c <= ' ' || c > '~' || c == '"' || c == '\'' || c == '\\' {
			return fmt.Errorf("%s ID %q holds %q", what, id, c)
		}
	}
	return nil
}

func validRules(what string, rules []Rule) error {
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%s rule %d: %w", what, i, err)
		}
	}
	return nil
}

// Validate reports what is wrong with p; the error matches ErrInvalidPolicy
// and, for a bad rule, ErrInvalidRule.
func (p Policy) Validate() error {
	return validRuleSet(ErrInvalidPolicy, "policy", p.ID, p.Ingress, p.Egress)
}

// Validate reports what is wrong with p; the error matches
// ErrInvalidProfile and, for a bad rule, ErrInvalidRule.
func (p Profile) Validate() error {
	return validRuleSet(ErrInvalidProfile, "profile", p.ID, p.Ingress, p.Egress)
}

func validRuleSet(sentinel error, what, id string, in, out []Rule) error {
	if err := validID(what, id); err != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	if err := validRules("ingress", in); err != nil {
		return fmt.Errorf("%w %s: %w", sentinel, id, err)
	}
	if err := validRules("egress", out); err != nil {
		return fmt.Errorf("%w %s: %w", sentinel, id, err)
	}
	return nil
}

func validTiers(tiers []TierPolicies) error {
	for i, t := range tiers {
		if t.Name == "" {
			return fmt.Errorf("tier %d has no name", i)
		}
		if t.EndOfTier != 0 && t.EndOfTier != Deny && t.EndOfTier != Pass {
			return fmt.Errorf("tier %s: EndOfTier must be Deny or Pass", t.Name)
		}
		for _, id := range slices.Concat(t.Ingress, t.Egress) {
			if err := validID("policy", id); err != nil {
				return fmt.Errorf("tier %s: %w", t.Name, err)
			}
		}
	}
	return nil
}

// Validate reports what is wrong with w; the error matches
// ErrInvalidEndpoint. The interface prefix is checked by the Manager.
func (w Workload) Validate() error {
	if err := validID("workload", w.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEndpoint, err)
	}
	if err := validIface(w.Iface, false); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, w.ID, err)
	}
	if err := validTiers(w.Tiers); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, w.ID, err)
	}
	for _, id := range w.Profiles {
		if err := validID("profile", id); err != nil {
			return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, w.ID, err)
		}
	}
	return nil
}

// Validate reports what is wrong with h; the error matches
// ErrInvalidEndpoint.
func (h HostEndpoint) Validate() error {
	if err := validID("host endpoint", h.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEndpoint, err)
	}
	if err := validIface(h.Iface, true); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, h.ID, err)
	}
	for _, tiers := range [][]TierPolicies{h.Tiers, h.ForwardTiers, h.PreDNATTiers, h.UntrackedTiers} {
		if err := validTiers(tiers); err != nil {
			return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, h.ID, err)
		}
	}
	for _, t := range h.PreDNATTiers {
		if len(t.Egress) > 0 {
			return fmt.Errorf("%w %s: pre-DNAT tier %s lists egress policies: pre-DNAT policy applies to packets in only", ErrInvalidEndpoint, h.ID, t.Name)
		}
	}
	for _, id := range h.Profiles {
		if err := validID("profile", id); err != nil {
			return fmt.Errorf("%w %s: %w", ErrInvalidEndpoint, h.ID, err)
		}
	}
	return nil
}

// WildcardIface is the HostEndpoint.Iface of the endpoint that covers every
// host interface no other host endpoint names.
const WildcardIface = "*"

func validIface(name string, wildcard bool) error {
	if wildcard && name == WildcardIface {
		return nil
	}
	if name == "" || len(name) > netfilter.MaxInterfaceNameLength {
		return fmt.Errorf("interface %q must be 1 to %d bytes", name, netfilter.MaxInterfaceNameLength)
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c > '~' || c == '/' || c == '+' || c == '*' || c == '"' || c == '\'' {
			return fmt.Errorf("interface %q holds %q", name, c)
		}
	}
	return nil
}

// Validate reports what is wrong with s; the error matches ErrInvalidSet.
func (s SetUpdate) Validate() error {
	if err := validID("set", s.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidSet, err)
	}
	if s.Kind != SetNets && s.Kind != SetAddrPorts {
		return fmt.Errorf("%w %s: unknown kind %d", ErrInvalidSet, s.ID, s.Kind)
	}
	return validMembers(s.ID, s.Kind, s.Members)
}

// validMembers checks that every member is valid and of the set's kind.
func validMembers(id string, kind SetKind, members []netfilter.Member) error {
	for _, m := range members {
		if err := m.Err(); err != nil {
			return fmt.Errorf("%w %s: member %v: %w", ErrInvalidSet, id, m, err)
		}
		addrPort := m.Protocol() != 0
		if addrPort != (kind == SetAddrPorts) || m.Second().IsValid() || !m.Addr().IsValid() {
			return fmt.Errorf("%w %s: member %v does not fit the set's kind", ErrInvalidSet, id, m)
		}
		if addrPort && m.Addr().IsUnspecified() {
			// (The kernel keeps no unspecified address in a hash:ip,port
			// set, nor an nftables one.)
			return fmt.Errorf("%w %s: member %v: the unspecified address is no workload's", ErrInvalidSet, id, m)
		}
	}
	return nil
}
