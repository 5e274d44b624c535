package agent

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

// NetworkPolicyTier is the tier of the Kubernetes NetworkPolicies: a pod
// that one of them selects is denied, per direction, what none allows.
const NetworkPolicyTier = "k8s"

// netpolTranslator turns the cluster's namespaces, pods and
// NetworkPolicies into the policy package's messages through a
// selector.Index: namespaces are allow-all profiles until a policy
// selects a pod, as in Calico. It remembers what it gave the index and
// gives only what changed.
type netpolTranslator struct {
	self       string
	index      *selector.Index
	namespaces map[string]map[string]string
	pods       map[string]selector.Endpoint
	policies   map[string]selector.Policy // by ID, as given to the index
}

func newNetpolTranslator(self string) *netpolTranslator {
	x := selector.New(selector.Options{})
	// The tier exists from the start; SetTier fails only on bad input.
	_ = x.SetTier(AdminTier, -1, policy.Pass)
	_ = x.SetTier(NetworkPolicyTier, 0, policy.Deny)
	_ = x.SetTier(BaselineTier, 1, policy.Pass)
	return &netpolTranslator{self: self, index: x, namespaces: map[string]map[string]string{},
		pods: map[string]selector.Endpoint{}, policies: map[string]selector.Policy{}}
}

// messages returns the policy messages that bring the managers to c. A
// policy or pod the index refuses is left out alone (and logged by the
// caller through errs).
func (t *netpolTranslator) messages(c datastore.Cluster) (msgs []any, errs []error) {
	// Namespaces: the listed ones, and those pods name without a listing,
	// which carry only their name label.
	namespaces := map[string]map[string]string{}
	for _, p := range c.Pods {
		if p.Namespace != "" {
			namespaces[p.Namespace] = map[string]string{datastore.NamespaceNameLabel: p.Namespace}
		}
	}
	for _, n := range c.Namespaces {
		labels := maps.Clone(n.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[datastore.NamespaceNameLabel] = n.Name
		namespaces[n.Name] = labels
	}
	for name, labels := range namespaces {
		if old, ok := t.namespaces[name]; !ok || !maps.Equal(old, labels) {
			if err := t.index.SetNamespace(name, labels); err != nil {
				errs = append(errs, err)
				continue
			}
			t.namespaces[name] = labels
		}
	}
	// Pods, every node's: policies select peers anywhere.
	pods := map[string]selector.Endpoint{}
	for _, p := range c.Pods {
		e := selector.Endpoint{ID: p.Key(), Namespace: p.Namespace, Labels: p.Labels, Addrs: p.IPs,
			Local: p.Node == t.self}
		if e.Local {
			e.Iface = p.HostInterface()
		}
		for _, port := range p.Ports {
			if port.Name != "" {
				e.NamedPorts = append(e.NamedPorts, selector.NamedPort{Name: port.Name, Protocol: protoOf(port.Protocol), Port: port.Port})
			}
		}
		pods[e.ID] = e
	}
	for id := range t.pods {
		if _, ok := pods[id]; !ok {
			t.index.RemoveEndpoint(id)
			delete(t.pods, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(pods)) {
		e := pods[id]
		if old, ok := t.pods[id]; ok && endpointEqual(old, e) {
			continue
		}
		if err := t.index.SetEndpoint(e); err != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", id, err))
			t.index.RemoveEndpoint(id)
			delete(t.pods, id)
			continue
		}
		t.pods[id] = e
	}
	// Policies: the NetworkPolicies and the administrators'.
	want := map[string]selector.Policy{}
	for _, np := range c.NetworkPolicies {
		want[np.Key()] = policyOf(np)
	}
	for _, ap := range c.AdminNetworkPolicies {
		p := adminPolicyOf(ap, false)
		want[p.ID] = p
	}
	if b := c.BaselineAdminNetworkPolicy; b != nil {
		p := adminPolicyOf(*b, true)
		want[p.ID] = p
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		p := want[id]
		if old, ok := t.policies[id]; ok && reflect.DeepEqual(old, p) {
			continue
		}
		if err := t.index.SetPolicy(p); err != nil {
			errs = append(errs, fmt.Errorf("policy %s: %w", id, err))
			t.index.RemovePolicy(id)
			delete(t.policies, id)
			continue
		}
		t.policies[id] = p
	}
	for id := range t.policies {
		if _, ok := want[id]; !ok {
			t.index.RemovePolicy(id)
			delete(t.policies, id)
		}
	}
	for name := range t.namespaces {
		if _, ok := namespaces[name]; !ok {
			t.index.RemoveNamespace(name)
			delete(t.namespaces, name)
		}
	}
	return t.index.Flush(), errs
}

func endpointEqual(a, b selector.Endpoint) bool {
	return a.ID == b.ID && a.Namespace == b.Namespace && maps.Equal(a.Labels, b.Labels) && slices.Equal(a.Addrs, b.Addrs) &&
		slices.Equal(a.NamedPorts, b.NamedPorts) && a.Local == b.Local && a.Iface == b.Iface
}

// protoOf returns a Kubernetes protocol name as a protocol: TCP when
// empty.
func protoOf(p string) netfilter.Proto {
	switch p {
	case "UDP":
		return netfilter.ProtoUDP
	case "SCTP":
		return netfilter.ProtoSCTP
	}
	return netfilter.ProtoTCP
}

// policyOf translates a NetworkPolicy: it applies to the pods of its
// namespace its podSelector selects, in the directions of its policy
// types; each rule allows what any of its peers (or every address)
// sends or receives on any of its ports (or every port): one Allow rule
// per peer and port.
func policyOf(np datastore.NetworkPolicy) selector.Policy {
	own := []selector.Requirement{{Key: datastore.NamespaceNameLabel, Op: selector.Equals, Values: []string{np.Namespace}}}
	in, out := np.Types()
	p := selector.Policy{ID: np.Key(), Tier: NetworkPolicyTier,
		AppliesTo: selector.Selector{Endpoint: requirementsOf(np.PodSelector), Namespace: own},
		NoIngress: !in, NoEgress: !out}
	if in {
		for _, r := range np.Ingress {
			p.Ingress = append(p.Ingress, rulesOf(r, own, true)...)
		}
	}
	if out {
		for _, r := range np.Egress {
			p.Egress = append(p.Egress, rulesOf(r, own, false)...)
		}
	}
	return p
}

// rulesOf translates one rule: the peers' side is the source for ingress
// and the destination for egress; ports are always the destination's.
func rulesOf(r datastore.NetworkPolicyRule, own []selector.Requirement, ingress bool) []selector.Rule {
	var peers []selector.Peer
	for _, peer := range r.Peers {
		peers = append(peers, peerOf(peer, own))
	}
	return expand(peers, r.Ports, ingress, policy.Allow)
}

// expand returns one rule of action per peer (every address when there is
// none) and port (every port when there is none).
func expand(peers []selector.Peer, ports []datastore.NetworkPolicyPort, ingress bool, action policy.Action) []selector.Rule {
	if len(peers) == 0 {
		peers = []selector.Peer{{}}
	}
	type portMatch struct {
		proto netfilter.Proto
		peer  selector.Peer
	}
	pms := []portMatch{{}}
	if len(ports) > 0 {
		pms = nil
		for _, port := range ports {
			pm := portMatch{proto: protoOf(port.Protocol)}
			if n, ok := port.Number(); ok {
				last := n
				if port.EndPort != 0 {
					last = port.EndPort
				}
				pm.peer.Ports = []netfilter.PortRange{netfilter.Ports(n, last)}
			} else if port.Port != "" {
				pm.peer.NamedPorts = []selector.PortName{{Protocol: pm.proto, Name: port.Port}}
			}
			pms = append(pms, pm)
		}
	}
	var out []selector.Rule
	for _, peer := range peers {
		for _, pm := range pms {
			rule := selector.Rule{Action: action, Protocol: pm.proto}
			dst := pm.peer
			if ingress {
				rule.Src = peer
			} else {
				dst.Nets, dst.NotNets, dst.Selector = peer.Nets, peer.NotNets, peer.Selector
			}
			rule.Dst = dst
			out = append(out, rule)
		}
	}
	return out
}

// The tiers of the administrators' policies, around NetworkPolicyTier.
const (
	AdminTier    = "admin"
	BaselineTier = "baseline"
)

// adminPolicyOf translates an AdminNetworkPolicy (baseline: the
// BaselineAdminNetworkPolicy) into a policy of its tier.
func adminPolicyOf(p datastore.AdminNetworkPolicy, baseline bool) selector.Policy {
	tier, id := AdminTier, "anp/"+p.Name
	if baseline {
		tier, id = BaselineTier, "banp/"+p.Name
	}
	out := selector.Policy{ID: id, Tier: tier, Order: float64(p.Priority), AppliesTo: adminSelector(p.Subject),
		NoIngress: len(p.Ingress) == 0, NoEgress: len(p.Egress) == 0}
	for dir, rules := range map[bool][]datastore.AdminRule{true: p.Ingress, false: p.Egress} {
		var sel []selector.Rule
		for _, r := range rules {
			var peers []selector.Peer
			for _, peer := range r.Peers {
				s := adminSelector(peer)
				peers = append(peers, selector.Peer{Selector: &s})
			}
			action := map[string]policy.Action{"Allow": policy.Allow, "Deny": policy.Deny, "Pass": policy.Pass}[r.Action]
			sel = append(sel, expand(peers, r.Ports, dir, action)...)
		}
		if dir {
			out.Ingress = sel
		} else {
			out.Egress = sel
		}
	}
	return out
}

// adminSelector translates an AdminPeer: nil selectors select all.
func adminSelector(p datastore.AdminPeer) selector.Selector {
	var s selector.Selector
	if p.NamespaceSelector != nil {
		s.Namespace = requirementsOf(*p.NamespaceSelector)
	}
	if p.PodSelector != nil {
		s.Endpoint = requirementsOf(*p.PodSelector)
	}
	return s
}

// peerOf translates a peer: an address block, or pods by selectors (the
// policy's own namespace when the namespace selector is missing).
func peerOf(peer datastore.NetworkPolicyPeer, own []selector.Requirement) selector.Peer {
	if b := peer.IPBlock; b != nil {
		return selector.Peer{Nets: []netip.Prefix{b.CIDR}, NotNets: slices.Clone(b.Except)}
	}
	s := selector.Selector{Namespace: own}
	if peer.PodSelector != nil {
		s.Endpoint = requirementsOf(*peer.PodSelector)
	}
	if peer.NamespaceSelector != nil {
		s.Namespace = requirementsOf(*peer.NamespaceSelector)
		if s.Namespace == nil {
			s.Namespace = []selector.Requirement{} // an empty selector: every namespace
		}
	}
	return selector.Peer{Selector: &s}
}

// requirementsOf translates a label selector.
func requirementsOf(s datastore.LabelSelector) []selector.Requirement {
	var out []selector.Requirement
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		out = append(out, selector.Requirement{Key: k, Op: selector.Equals, Values: []string{s.MatchLabels[k]}})
	}
	for _, e := range s.MatchExpressions {
		op := map[string]selector.Op{"In": selector.In, "NotIn": selector.NotIn, "Exists": selector.Exists, "DoesNotExist": selector.DoesNotExist}[e.Operator]
		out = append(out, selector.Requirement{Key: e.Key, Op: op, Values: slices.Clone(e.Values)})
	}
	return out
}

// FlowExplanation says what the cluster's NetworkPolicies decide for one
// flow: the source pod's egress (on its node) and the destination pod's
// ingress (on its node), each as package policy's Explain says.
type FlowExplanation struct {
	// Src and Dst are the addresses the flow was judged between: the
	// pods' first addresses of one family.
	Src, Dst netip.Addr
	// Allowed is the outcome: both directions allow the flow.
	Allowed bool
	// Egress is the decision at the source pod.
	Egress policy.Explanation
	// Ingress is the decision at the destination pod.
	Ingress policy.Explanation
}

// String returns the outcome and both decisions, one per line.
func (e FlowExplanation) String() string {
	verdict := "denied"
	if e.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("%s (%s → %s)\n  egress at the source:       %s\n  ingress at the destination: %s", verdict, e.Src, e.Dst, e.Egress, e.Ingress)
}

// ExplainFlow says, from the cluster alone (the agent's own translation of
// its NetworkPolicies, run as the source's node and as the destination's),
// whether a flow from pod from to pod to ("namespace/name") on protocol
// ("TCP", "UDP", "SCTP") and destination port is allowed and which policy
// and rule decide it. The pods' first addresses of the family of the
// source's first address are used (ExplainFlowOf picks the family).
func ExplainFlow(c datastore.Cluster, from, to, protocol string, port uint16) (FlowExplanation, error) {
	src := findPod(c, from)
	if src == nil || len(src.IPs) == 0 {
		return FlowExplanation{}, fmt.Errorf("explain: pod %q must be in the cluster, with addresses", from)
	}
	return ExplainFlowOf(c, from, to, protocol, port, ipfamily.Of(src.IPs[0]))
}

// ExplainFlowOf is ExplainFlow for the flow between the pods' first
// addresses of family fam: a dual-stack pair's two flows may meet
// different rules (ipBlocks are of one family).
func ExplainFlowOf(c datastore.Cluster, from, to, protocol string, port uint16, fam ipfamily.Family) (FlowExplanation, error) {
	src, dst := findPod(c, from), findPod(c, to)
	if src == nil || dst == nil {
		return FlowExplanation{}, fmt.Errorf("explain: pods %q and %q must both be in the cluster", from, to)
	}
	of := func(a netip.Addr) bool { return ipfamily.Of(a) == fam }
	i, j := slices.IndexFunc(src.IPs, of), slices.IndexFunc(dst.IPs, of)
	if i < 0 || j < 0 {
		return FlowExplanation{}, fmt.Errorf("explain: %s and %s need %v addresses", from, to, fam)
	}
	srcIP := src.IPs[i]
	switch protocol {
	case "TCP", "UDP", "SCTP":
	default:
		return FlowExplanation{}, fmt.Errorf("explain: protocol %q is not TCP, UDP or SCTP", protocol)
	}
	pkt := policy.Packet{Src: srcIP, Dst: dst.IPs[j], Protocol: protoOf(protocol), SrcPort: 40000, DstPort: port}
	modelOf := func(node string) (*policy.Model, error) {
		msgs, errs := newNetpolTranslator(node).messages(c)
		if len(errs) > 0 {
			return nil, fmt.Errorf("explain: %w", errors.Join(errs...))
		}
		m := policy.NewModel()
		for _, msg := range msgs {
			if _, err := m.Update(msg); err != nil {
				return nil, fmt.Errorf("explain: %w", err)
			}
		}
		return m, nil
	}
	sm, err := modelOf(src.Node)
	if err != nil {
		return FlowExplanation{}, err
	}
	dm, err := modelOf(dst.Node)
	if err != nil {
		return FlowExplanation{}, err
	}
	e := FlowExplanation{Src: pkt.Src, Dst: pkt.Dst, Egress: sm.Explain(pkt, src.Key(), false), Ingress: dm.Explain(pkt, dst.Key(), true)}
	e.Allowed = e.Egress.Verdict == policy.Allowed && e.Ingress.Verdict == policy.Allowed
	return e, nil
}
