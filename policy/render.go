package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// allPorts is the range of every port.
var allPorts = netfilter.Ports(0, 65535)

// maxPortsPerRule bounds the port ranges one rendered rule matches: a range
// takes two of the 15 entries of iptables' multiport match.
const maxPortsPerRule = 7

// Chain kinds, each followed by "-" and an ID (or "_" and a hash of one).
const (
	kindPolicyIn          = "pi"   // a policy's ingress rules
	kindPolicyOut         = "po"   // a policy's egress rules
	kindProfileIn         = "pri"  // a profile's ingress rules
	kindProfileOut        = "pro"  // a profile's egress rules
	kindToWl              = "tw"   // a workload's ingress (packets to it)
	kindFromWl            = "fw"   // a workload's egress (packets from it)
	kindToHost            = "th"   // a host endpoint's ingress (packets to the host)
	kindFromHost          = "fh"   // a host endpoint's egress (packets from the host)
	kindToHostFwd         = "thfw" // forwarded packets in through a host endpoint
	kindFromHostFwd       = "fhfw" // forwarded packets out through a host endpoint
	kindToHostUntracked   = "thu"  // untracked packets to the host (raw)
	kindFromHostUntracked = "fhu"  // untracked packets from the host (raw)
	kindToHostPreDNAT     = "thp"  // packets in, before destination NAT (mangle)
)

// renderer turns a Model into chains for one family. It is pure: the same
// Model gives the same chains, rule for rule, so that a backend's per-rule
// hashes make an update cost what changed.
type renderer struct {
	family ipfamily.Family
	prefix string
	marks  marks
	deny   netfilter.Action
	// setName returns the kernel name of a set's rules and whether the set
	// can be matched (it is known, of this family's manager).
	setName func(id string) (string, bool)
	// setBad reports whether a set the model holds cannot serve as kind:
	// the set driver refused it, or it is of another kind. A rule that
	// names it then matches no packet, whether as an alternative or as an
	// exception (which then holds every packet), so that a bad exception
	// never widens an allow.
	setBad  func(id string, kind SetKind) bool
	invalid bool // drop conntrack-invalid packets
	// logLimit bounds each Log rule; Rate 0 is no limit.
	logLimit netfilter.MatchLimit
}

// marks are the bits the chains speak with.
type marks struct {
	accept, pass, scratch0 uint32
}

// chainName returns the name of the chain of kind for id: prefix, kind, "-"
// and id when that fits a chain name, else prefix, kind, "_" and a hash of
// id, so that two IDs never share a chain.
func (r *renderer) chainName(kind, id string) string {
	if id == WildcardIface {
		return r.prefix + kind + "_any" // "_": never a literal ID's name
	}
	name := r.prefix + kind + "-" + id
	if len(name) <= netfilter.MaxChainNameLength && netfilter.ValidateChainName(name) == nil {
		return name
	}
	sum := sha256.Sum256([]byte(id))
	room := netfilter.MaxChainNameLength - len(r.prefix) - len(kind) - 1
	return r.prefix + kind + "_" + hex.EncodeToString(sum[:])[:room]
}

// policyChains returns the ingress and egress chains of a policy or a
// profile (profile true), and for each the index of the rule that acts
// for each of its rules (where that rule's counter counts), -1 for a rule
// left out.
func (r *renderer) policyChains(id string, in, out []Rule, profile bool) ([]netfilter.Chain, [2][]int) {
	kin, kout := kindPolicyIn, kindPolicyOut
	if profile {
		kin, kout = kindProfileIn, kindProfileOut
	}
	inRules, inIdx := r.rules(id, in)
	outRules, outIdx := r.rules(id, out)
	return []netfilter.Chain{
		{Name: r.chainName(kin, id), Rules: inRules},
		{Name: r.chainName(kout, id), Rules: outRules},
	}, [2][]int{inIdx, outIdx}
}

// rules renders the rules of one direction of a policy or profile, and
// returns the index of each rule's acting rule (-1 when it is left out).
func (r *renderer) rules(owner string, rules []Rule) ([]netfilter.Rule, []int) {
	var out []netfilter.Rule
	acts := make([]int, len(rules))
	for i, rule := range rules {
		rs := r.rule(owner, i, rule)
		acts[i] = -1
		if len(rs) > 0 {
			tail := 1 // the action, last; Allow and Pass return after it
			if rule.Action == Allow || rule.Action == Pass {
				tail = 2
			}
			acts[i] = len(out) + len(rs) - tail
		}
		out = append(out, rs...)
	}
	return out, acts
}

// rule renders one rule: nothing when it cannot match in this family.
//
// A rule whose peers need no OR and no negation beyond what one netfilter
// rule holds is one rule (two for Allow and Pass: set the mark, then
// return). Any other is a block on the scratch mark: clear it; set it for
// each combination of the alternatives (networks or sets of each side,
// groups of ports or named-port sets of each side); clear it again for
// each negated item the packet matches; then act on packets that still
// carry it.
func (r *renderer) rule(owner string, index int, rule Rule) []netfilter.Rule {
	if rule.Family != 0 && rule.Family != r.family {
		return nil
	}
	common, ok := r.common(rule)
	if !ok {
		return nil
	}
	src, ok := r.addrAlternatives(rule.Src, netfilter.Src)
	if !ok {
		return nil
	}
	dst, ok := r.addrAlternatives(rule.Dst, netfilter.Dst)
	if !ok {
		return nil
	}
	sport, ok := r.portAlternatives(rule.Src, netfilter.Src)
	if !ok {
		return nil
	}
	dport, ok := r.portAlternatives(rule.Dst, netfilter.Dst)
	if !ok {
		return nil
	}
	negs := slices.Concat(r.negations(rule.Src, netfilter.Src), r.negations(rule.Dst, netfilter.Dst))
	comment := commentOf(fmt.Sprintf("%s rule %s", shorten(owner, 44), shorten(ruleName(index, rule), 28)))
	act := r.action(owner, index, rule)

	if len(negs) == 0 && len(src) <= 1 && len(dst) <= 1 && len(sport) <= 1 && len(dport) <= 1 {
		m := slices.Clone(common)
		for _, alt := range [][][]netfilter.Match{src, dst, sport, dport} {
			if len(alt) == 1 {
				m = append(m, alt[0]...)
			}
		}
		return r.act(m, act, rule.Action, comment)
	}
	scratch := r.marks.scratch0
	out := []netfilter.Rule{{Action: netfilter.ClearMark(scratch), Comments: comment}}
	for _, s := range orEmpty(src) {
		for _, d := range orEmpty(dst) {
			for _, sp := range orEmpty(sport) {
				for _, dp := range orEmpty(dport) {
					out = append(out, netfilter.Rule{
						Matches:  slices.Concat(common, s, d, sp, dp),
						Action:   netfilter.SetMaskedMark(scratch, scratch),
						Comments: comment,
					})
				}
			}
		}
	}
	for _, n := range negs {
		out = append(out, netfilter.Rule{
			Matches:  slices.Concat(common, n, []netfilter.Match{netfilter.Mark(scratch, scratch)}),
			Action:   netfilter.ClearMark(scratch),
			Comments: comment,
		})
	}
	return append(out, r.act([]netfilter.Match{netfilter.Mark(scratch, scratch)}, act, rule.Action, comment)...)
}

// orEmpty returns alts, or one empty alternative when there are none.
func orEmpty(alts [][]netfilter.Match) [][]netfilter.Match {
	if len(alts) == 0 {
		return [][]netfilter.Match{nil}
	}
	return alts
}

// ruleName names a rule in comments and logs: its Name, or its index.
// maxComment bounds the comments the Manager writes, so that a rule fits
// every backend with its hash (nftables keeps 128 bytes in all).
const maxComment = 80

// commentOf returns s as a rule's comments: what no backend can write in
// one (a double quote, a backslash, a control character) becomes "_", and
// the text is cut to maxComment (shorten). Comments name policies and
// rules for people; the IDs, of any length, are the model's.
func commentOf(s string) []string {
	clean := strings.Map(func(r rune) rune {
		if r == '"' || r == '\\' || r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, s)
	return []string{shorten(clean, maxComment)}
}

// shorten cuts s to at most n bytes, at a character's start, ending in
// "..." when it cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func ruleName(index int, rule Rule) string {
	if rule.Name != "" {
		return rule.Name
	}
	return fmt.Sprint(index)
}

// act returns the rules that give packets matching m the rule's action.
func (r *renderer) act(m []netfilter.Match, act netfilter.Action, a Action, comment []string) []netfilter.Rule {
	if a == Log && r.logLimit.Rate != 0 {
		// Last, so that only the packets the rule picks take tokens.
		m = append(slices.Clip(m), r.logLimit)
	}
	out := []netfilter.Rule{{Matches: m, Action: act, Comments: comment}}
	switch a {
	case Allow:
		out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.Mark(r.marks.accept, r.marks.accept)}, Action: netfilter.Return(), Comments: comment})
	case Pass:
		out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.Mark(r.marks.pass, r.marks.pass)}, Action: netfilter.Return(), Comments: comment})
	}
	return out
}

// action is the netfilter action of the rule's first step.
func (r *renderer) action(owner string, index int, rule Rule) netfilter.Action {
	switch rule.Action {
	case Allow:
		return netfilter.SetMaskedMark(r.marks.accept, r.marks.accept)
	case Pass:
		return netfilter.SetMaskedMark(r.marks.pass, r.marks.pass)
	case Log:
		return netfilter.Log(logPrefix(owner, index, rule))
	}
	return r.deny
}

// maxLogPrefix is the longest log prefix every backend takes.
const maxLogPrefix = 29

// logPrefix names the policy and rule in at most maxLogPrefix bytes.
func logPrefix(owner string, index int, rule Rule) string {
	tail := " " + ruleName(index, rule) + " "
	room := maxLogPrefix - len(tail)
	if room < 1 {
		tail = fmt.Sprintf(" %d ", index)
		room = maxLogPrefix - len(tail)
	}
	if len(owner) > room {
		owner = owner[:room]
	}
	return owner + tail
}

// common returns the matches every rendered rule of rule carries
// (protocol, ICMP type), and false when the rule cannot match in this
// family.
func (r *renderer) common(rule Rule) ([]netfilter.Match, bool) {
	var m []netfilter.Match
	icmpFamily := ipfamily.Family(0)
	switch rule.Protocol {
	case netfilter.ProtoICMP:
		icmpFamily = ipfamily.IPv4
	case netfilter.ProtoICMPv6:
		icmpFamily = ipfamily.IPv6
	}
	if icmpFamily != 0 && icmpFamily != r.family {
		return nil, false
	}
	if rule.Protocol != 0 {
		m = append(m, netfilter.Protocol(rule.Protocol))
	}
	if rule.NotProtocol != 0 {
		m = append(m, netfilter.Not(netfilter.Protocol(rule.NotProtocol)))
	}
	for _, ic := range []struct {
		icmp *ICMP
		neg  bool
	}{{rule.ICMP, false}, {rule.NotICMP, true}} {
		if ic.icmp == nil {
			continue
		}
		mm := netfilter.MatchICMP{Family: r.family, Type: ic.icmp.Type, Code: ic.icmp.Code, HasCode: ic.icmp.WithCode, Negate: ic.neg}
		m = append(m, mm)
	}
	return m, true
}

// addrAlternatives returns the peer's address alternatives (each a list of
// matches, any of which may match), and false when the peer names
// addresses but none can match in this family.
func (r *renderer) addrAlternatives(p Peer, dir netfilter.Direction) ([][]netfilter.Match, bool) {
	var alts [][]netfilter.Match
	for _, n := range p.Nets {
		if ipfamily.Of(n.Addr()) == r.family {
			alts = append(alts, []netfilter.Match{netfilter.MatchNet{Prefix: n, Dir: dir}})
		}
	}
	for _, id := range p.Sets {
		if name, ok := r.setFor(id, SetNets); ok {
			alts = append(alts, []netfilter.Match{netfilter.IPSet(name, dir)})
		}
	}
	if len(alts) == 0 && (len(p.Nets) > 0 || len(p.Sets) > 0) {
		return nil, false
	}
	return alts, true
}

// portAlternatives returns the peer's port alternatives: groups of its
// ranges, and its named-port sets.
func (r *renderer) portAlternatives(p Peer, dir netfilter.Direction) ([][]netfilter.Match, bool) {
	if slices.Contains(p.Ports, allPorts) {
		return nil, true // any port
	}
	var alts [][]netfilter.Match
	for g := range slices.Chunk(p.Ports, maxPortsPerRule) {
		alts = append(alts, []netfilter.Match{netfilter.MatchPorts{Dir: dir, Ranges: slices.Clone(g)}})
	}
	for _, id := range p.NamedPorts {
		if name, ok := r.setFor(id, SetAddrPorts); ok {
			alts = append(alts, []netfilter.Match{netfilter.IPSet(name, dir, dir)})
		}
	}
	if len(alts) == 0 && (len(p.Ports) > 0 || len(p.NamedPorts) > 0) {
		return nil, false
	}
	return alts, true
}

// negations returns, for each negated item of the peer, the matches of
// packets that have it (and so fail the rule).
func (r *renderer) negations(p Peer, dir netfilter.Direction) [][]netfilter.Match {
	var out [][]netfilter.Match
	for _, n := range p.NotNets {
		if ipfamily.Of(n.Addr()) == r.family {
			if n.Bits() == 0 {
				// Every address of the family: the rule never matches.
				out = append(out, nil)
				continue
			}
			out = append(out, []netfilter.Match{netfilter.MatchNet{Prefix: n, Dir: dir}})
		}
	}
	for _, id := range p.NotSets {
		out = r.negateSet(out, id, SetNets, dir)
	}
	if slices.Contains(p.NotPorts, allPorts) {
		out = append(out, nil) // no port is outside every port
	} else {
		for g := range slices.Chunk(p.NotPorts, maxPortsPerRule) {
			out = append(out, []netfilter.Match{netfilter.MatchPorts{Dir: dir, Ranges: slices.Clone(g)}})
		}
	}
	for _, id := range p.NotNamedPorts {
		out = r.negateSet(out, id, SetAddrPorts, dir, dir)
	}
	return out
}

// setFor returns the kernel name of set id for a reference that wants a
// set of kind, and whether the set can serve it: in the kernel, and of
// that kind.
func (r *renderer) setFor(id string, kind SetKind) (string, bool) {
	if r.setBad != nil && r.setBad(id, kind) {
		return "", false
	}
	return r.setName(id)
}

// negateSet adds to out the matches of packets that set id, which the
// reference wants of kind, holds (dims: the set's dimensions): a match of
// the set when it is in the kernel; no match at all (every packet has it:
// the rule matches none) when the set is bad for it (setBad); nothing when
// the set is unknown, as the model has it (an empty exception, as
// Model.Explain sees it).
func (r *renderer) negateSet(out [][]netfilter.Match, id string, kind SetKind, dims ...netfilter.Direction) [][]netfilter.Match {
	if r.setBad != nil && r.setBad(id, kind) {
		return append(out, nil)
	}
	if name, ok := r.setName(id); ok {
		return append(out, []netfilter.Match{netfilter.IPSet(name, dims...)})
	}
	return out
}

// workloadChains returns a workload's ingress (to) and egress (from)
// chains.
func (r *renderer) workloadChains(m *Model, w Workload) []netfilter.Chain {
	ep := endpointSpec{tiers: w.Tiers, profiles: w.Profiles, adminDown: w.AdminDown}
	return []netfilter.Chain{
		{Name: r.chainName(kindToWl, w.Iface), Rules: r.endpointRules(m, ep, true)},
		{Name: r.chainName(kindFromWl, w.Iface), Rules: r.endpointRules(m, ep, false)},
	}
}

// hostChains returns a host endpoint's chains: ingress and egress of
// traffic to and from the host, and of forwarded traffic.
func (r *renderer) hostChains(m *Model, h HostEndpoint) []netfilter.Chain {
	host := endpointSpec{tiers: h.Tiers, profiles: h.Profiles}
	fwd := endpointSpec{tiers: h.ForwardTiers, forward: true}
	in, out := host, host
	in.failsafe, out.failsafe = r.prefix+chainFailsafeIn, r.prefix+chainFailsafeOut
	return []netfilter.Chain{
		{Name: r.chainName(kindToHost, h.Iface), Rules: r.endpointRules(m, in, true)},
		{Name: r.chainName(kindFromHost, h.Iface), Rules: r.endpointRules(m, out, false)},
		{Name: r.chainName(kindToHostFwd, h.Iface), Rules: r.endpointRules(m, fwd, true)},
		{Name: r.chainName(kindFromHostFwd, h.Iface), Rules: r.endpointRules(m, fwd, false)},
	}
}

// untrackedChains returns a host endpoint's chains of the raw table: its
// untracked tiers, before connection tracking, to and from the host.
func (r *renderer) untrackedChains(m *Model, h HostEndpoint) []netfilter.Chain {
	in := endpointSpec{tiers: h.UntrackedTiers, early: true, notrack: true, failsafe: r.prefix + chainRawFailsafeIn}
	out := endpointSpec{tiers: h.UntrackedTiers, early: true, notrack: true, failsafe: r.prefix + chainRawFailsafeOut}
	return []netfilter.Chain{
		{Name: r.chainName(kindToHostUntracked, h.Iface), Rules: r.endpointRules(m, in, true)},
		{Name: r.chainName(kindFromHostUntracked, h.Iface), Rules: r.endpointRules(m, out, false)},
	}
}

// preDNATChains returns a host endpoint's chain of the mangle table: its
// pre-DNAT tiers' ingress, before destination NAT.
func (r *renderer) preDNATChains(m *Model, h HostEndpoint) []netfilter.Chain {
	in := endpointSpec{tiers: h.PreDNATTiers, early: true, failsafe: r.prefix + chainMangleFailsafeIn}
	return []netfilter.Chain{{Name: r.chainName(kindToHostPreDNAT, h.Iface), Rules: r.endpointRules(m, in, true)}}
}

// endpointSpec is what one endpoint's chains are rendered from.
type endpointSpec struct {
	tiers     []TierPolicies
	profiles  []string
	adminDown bool
	// failsafe is the chain of failsafe ports jumped to before policy
	// (host endpoints), or "".
	failsafe string
	// forward renders forwarded traffic: no profiles, and a packet no
	// tier denied is allowed.
	forward bool
	// early renders the chains of a table before filter (raw, mangle):
	// no conntrack rules, no end-of-tier deny and no profiles, so that a
	// packet no policy decided goes on to the filter table.
	early bool
	// notrack leaves an allowed packet untracked (raw).
	notrack bool
}

// endpointRules renders one direction of an endpoint: the tiers in order,
// then the profiles, then deny.
func (r *renderer) endpointRules(m *Model, ep endpointSpec, ingress bool) []netfilter.Rule {
	acceptOrPass := r.marks.accept | r.marks.pass
	accepted := netfilter.Mark(r.marks.accept, r.marks.accept)
	deny := func(why string) netfilter.Rule {
		return netfilter.Rule{Action: r.deny, Comments: []string{why}}
	}
	if ep.adminDown {
		return []netfilter.Rule{deny("endpoint is admin down")}
	}
	var out []netfilter.Rule
	if !ep.early {
		out = append(out, netfilter.Rule{
			Matches:  []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated)},
			Action:   netfilter.Accept(),
			Comments: []string{"established and related flows"},
		})
	}
	if r.invalid && !ep.early {
		out = append(out, netfilter.Rule{
			Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateInvalid)},
			Action:  r.deny, Comments: []string{"conntrack invalid"},
		})
	}
	if r.family == ipfamily.IPv6 {
		for _, t := range []uint8{133, 134, 135, 136} {
			out = append(out, netfilter.Rule{
				Matches: []netfilter.Match{netfilter.ICMPv6Type(t)},
				Action:  netfilter.Accept(), Comments: []string{"neighbour discovery"},
			})
		}
	}
	if ep.failsafe != "" {
		out = append(out, netfilter.Rule{Action: netfilter.Jump(ep.failsafe), Comments: []string{"failsafe ports"}})
	}
	out = append(out, netfilter.Rule{Action: netfilter.ClearMark(acceptOrPass)})
	for _, tier := range ep.tiers {
		ids := tier.Egress
		kind := kindPolicyOut
		if ingress {
			ids, kind = tier.Ingress, kindPolicyIn
		}
		if len(ids) == 0 {
			continue
		}
		tc := []string{"tier " + tier.Name}
		out = append(out, netfilter.Rule{Action: netfilter.ClearMark(r.marks.pass), Comments: tc})
		for _, id := range ids {
			undecided := []netfilter.Match{netfilter.Mark(0, acceptOrPass)}
			if _, ok := m.Policy(id); !ok {
				out = append(out, netfilter.Rule{Matches: undecided, Action: r.deny,
					Comments: []string{"policy " + id + " is missing: fail closed"}})
				continue
			}
			out = append(out, netfilter.Rule{Matches: undecided, Action: netfilter.Jump(r.chainName(kind, id)), Comments: tc})
			if ep.notrack {
				out = append(out, netfilter.Rule{Matches: []netfilter.Match{accepted}, Action: netfilter.NoTrack(), Comments: tc})
			}
			out = append(out, netfilter.Rule{Matches: []netfilter.Match{accepted}, Action: netfilter.Return(), Comments: tc})
		}
		if tier.EndOfTier != Pass && !ep.early {
			out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.Mark(0, r.marks.pass)}, Action: r.deny,
				Comments: []string{"end of tier " + tier.Name}})
		}
	}
	if ep.early {
		return out // undecided: on to the filter table's policy
	}
	if ep.forward {
		return append(out, netfilter.Rule{Action: netfilter.SetMaskedMark(r.marks.accept, r.marks.accept),
			Comments: []string{"forwarded traffic no tier denied"}})
	}
	kind := kindProfileOut
	if ingress {
		kind = kindProfileIn
	}
	for _, id := range ep.profiles {
		if _, ok := m.Profile(id); !ok {
			continue // a missing profile allows nothing
		}
		pc := []string{"profile " + id}
		out = append(out,
			netfilter.Rule{Action: netfilter.ClearMark(r.marks.pass), Comments: pc},
			netfilter.Rule{Action: netfilter.Jump(r.chainName(kind, id)), Comments: pc},
			netfilter.Rule{Matches: []netfilter.Match{accepted}, Action: netfilter.Return(), Comments: pc})
	}
	return append(out, deny("no profile allowed it"))
}

// failsafeChains returns the chains that accept the failsafe ports: in,
// to the host (by destination port), and out, from it.
func (r *renderer) failsafeChains(in, out []ProtoPort) []netfilter.Chain {
	rules := failsafeRules
	return []netfilter.Chain{
		{Name: r.prefix + chainFailsafeIn, Rules: rules(in, netfilter.Dst)},
		{Name: r.prefix + chainFailsafeOut, Rules: rules(out, netfilter.Dst)},
	}
}

// rawFailsafeChains returns the raw table's failsafe chains: before
// conntrack a reply is not yet known as one, so each also accepts the
// replies of the other direction's failsafe flows (by source port).
func (r *renderer) rawFailsafeChains(in, out []ProtoPort) []netfilter.Chain {
	return []netfilter.Chain{
		{Name: r.prefix + chainRawFailsafeIn, Rules: slices.Concat(failsafeRules(in, netfilter.Dst), failsafeRules(out, netfilter.Src))},
		{Name: r.prefix + chainRawFailsafeOut, Rules: slices.Concat(failsafeRules(out, netfilter.Dst), failsafeRules(in, netfilter.Src))},
	}
}

// failsafeRules accepts each port on the packet's dir side.
func failsafeRules(ports []ProtoPort, dir netfilter.Direction) []netfilter.Rule {
	var rs []netfilter.Rule
	for _, p := range ports {
		rs = append(rs, netfilter.Rule{
			Matches:  []netfilter.Match{netfilter.Protocol(p.Protocol), netfilter.MatchPorts{Dir: dir, Ranges: []netfilter.PortRange{netfilter.Port(p.Port)}}},
			Action:   netfilter.Accept(),
			Comments: []string{"failsafe " + p.String()},
		})
	}
	return rs
}

// dispatch returns the chains that send packets by interface to their
// endpoint chains: a tree rooted at root whose leaves go to the chain of
// kind for each interface, ending in fallback for an interface no
// endpoint has (deny for workloads: fail closed). in selects the input
// interface.
func (r *renderer) dispatch(root, kind string, ifaces []string, in bool, fallback netfilter.Rule) []netfilter.Chain {
	var chains []netfilter.Chain
	leaf := func(n string) netfilter.Rule {
		return netfilter.Rule{Matches: []netfilter.Match{ifaceMatch(n, in)}, Action: netfilter.Goto(r.chainName(kind, n))}
	}
	var build func(name string, names []string)
	build = func(name string, names []string) {
		var rules []netfilter.Rule
		if len(names) <= dispatchFanout {
			for _, n := range names {
				rules = append(rules, leaf(n))
			}
		} else {
			// Split by the character after the names' common prefix: a
			// name that is the prefix itself goes to its chain here.
			depth := len(commonPrefix(names))
			groups := map[string][]string{}
			var keys []string
			for _, n := range names {
				if len(n) == depth {
					rules = append(rules, leaf(n))
					continue
				}
				k := n[:depth+1]
				if _, ok := groups[k]; !ok {
					keys = append(keys, k)
				}
				groups[k] = append(groups[k], n)
			}
			for _, k := range keys {
				g := groups[k]
				if len(g) == 1 {
					rules = append(rules, leaf(g[0]))
					continue
				}
				child := r.chainName(root, k)
				rules = append(rules, netfilter.Rule{Matches: []netfilter.Match{ifaceMatch(k+"+", in)}, Action: netfilter.Goto(child)})
				build(child, g)
			}
		}
		rules = append(rules, fallback)
		chains = append(chains, netfilter.Chain{Name: name, Rules: rules})
	}
	build(r.prefix+root, ifaces)
	return chains
}

// commonPrefix returns the longest prefix every name shares.
func commonPrefix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	p := names[0]
	for _, n := range names[1:] {
		i := 0
		for i < len(p) && i < len(n) && p[i] == n[i] {
			i++
		}
		p = p[:i]
	}
	return p
}

// dispatchFanout is the most interfaces a dispatch chain lists before it
// splits them by their next character.
const dispatchFanout = 16

func ifaceMatch(name string, in bool) netfilter.Match {
	if in {
		return netfilter.InInterface(name)
	}
	return netfilter.OutInterface(name)
}
