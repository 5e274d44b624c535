package kubernetes

import (
	"cmp"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// containerPorts lists the ports a pod's containers declare.
func containerPorts(p *corev1.Pod) []datastore.ContainerPort {
	var out []datastore.ContainerPort
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.ContainerPort <= 0 || port.ContainerPort > 65535 {
				continue
			}
			out = append(out, datastore.ContainerPort{Name: port.Name, Protocol: string(port.Protocol), Port: uint16(port.ContainerPort)})
		}
	}
	return out
}

// addPolicies adds the namespaces and network policies to c, each kept only
// when it validates on its own (one bad policy never holds back the rest),
// and normalizes c again.
func (d *Datastore) addPolicies(c *datastore.Cluster, namespaces []*corev1.Namespace, policies []*networkingv1.NetworkPolicy) {
	for _, n := range namespaces {
		c.Namespaces = append(c.Namespaces, datastore.Namespace{Name: n.Name, Labels: n.Labels})
	}
	valid := func(np datastore.NetworkPolicy) error {
		return (&datastore.Cluster{NetworkPolicies: []datastore.NetworkPolicy{np}}).Validate()
	}
	for _, p := range policies {
		np := policyOf(p)
		if err := valid(np); err != nil {
			// A policy the agent cannot translate isolates the pods it
			// selects, in the directions it names, and allows them
			// nothing (fail closed): ignoring it would leave them open.
			closed := isolationOf(np)
			if valid(closed) != nil {
				d.log.Warn("kubernetes datastore: network policy ignored: neither it nor the isolation it asks for translates",
					"policy", np.Key(), "err", err)
				continue
			}
			d.log.Warn("kubernetes datastore: network policy not translated: the pods it selects are isolated and allowed nothing it names",
				"policy", np.Key(), "err", err)
			np = closed
		}
		c.NetworkPolicies = append(c.NetworkPolicies, np)
	}
	c.Normalize()
}

// isolationOf returns np without its rules: the pods it selects isolated in
// the directions it names, nothing allowed.
func isolationOf(np datastore.NetworkPolicy) datastore.NetworkPolicy {
	out := datastore.NetworkPolicy{Namespace: np.Namespace, Name: np.Name, PodSelector: np.PodSelector}
	ingress, egress := np.Types()
	if ingress {
		out.PolicyTypes = append(out.PolicyTypes, "Ingress")
	}
	if egress {
		out.PolicyTypes = append(out.PolicyTypes, "Egress")
	}
	return out
}

// policyOf converts a NetworkPolicy; what cannot be converted (an address
// block that does not parse) is kept in a form Validate refuses.
func policyOf(p *networkingv1.NetworkPolicy) datastore.NetworkPolicy {
	out := datastore.NetworkPolicy{Namespace: p.Namespace, Name: p.Name, PodSelector: selectorOf(&p.Spec.PodSelector)}
	for _, t := range p.Spec.PolicyTypes {
		out.PolicyTypes = append(out.PolicyTypes, string(t))
	}
	for _, r := range p.Spec.Ingress {
		out.Ingress = append(out.Ingress, ruleOf(r.From, r.Ports))
	}
	for _, r := range p.Spec.Egress {
		out.Egress = append(out.Egress, ruleOf(r.To, r.Ports))
	}
	// Kubernetes' defaulting gives PolicyTypes on the server; a client
	// that skipped it gets the documented default from Types.
	return out
}

func ruleOf(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) datastore.NetworkPolicyRule {
	var out datastore.NetworkPolicyRule
	for _, peer := range peers {
		var dp datastore.NetworkPolicyPeer
		if peer.PodSelector != nil {
			s := selectorOf(peer.PodSelector)
			dp.PodSelector = &s
		}
		if peer.NamespaceSelector != nil {
			s := selectorOf(peer.NamespaceSelector)
			dp.NamespaceSelector = &s
		}
		if b := peer.IPBlock; b != nil {
			dp.IPBlock = &datastore.IPBlock{CIDR: parsePrefix(b.CIDR)}
			for _, e := range b.Except {
				dp.IPBlock.Except = append(dp.IPBlock.Except, parsePrefix(e))
			}
		}
		out.Peers = append(out.Peers, dp)
	}
	for _, port := range ports {
		var dp datastore.NetworkPolicyPort
		if port.Protocol != nil {
			dp.Protocol = string(*port.Protocol)
		}
		if port.Port != nil {
			dp.Port = port.Port.String()
		}
		if port.EndPort != nil {
			dp.EndPort = clampPort(*port.EndPort)
		}
		out.Ports = append(out.Ports, dp)
	}
	return out
}

// clampPort bounds an endPort to the port range: one past 65535 means
// every port up to the last.
func clampPort(n int32) uint16 {
	switch {
	case n <= 0:
		return 0
	case n > 65535:
		return 65535
	}
	return uint16(n)
}

// parsePrefix parses an ipBlock CIDR as Kubernetes reads it: the network
// of the address and length given (10.244.2.77/24 is 10.244.2.0/24), IPv4
// octets with leading zeros taken as decimal (010.244.002.000/24), as
// the API server stored them before its validation became strict. One
// that does not parse is the zero Prefix, which Validate refuses.
func parsePrefix(s string) netip.Prefix {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		addr, bits, ok := strings.Cut(s, "/")
		octets := strings.Split(addr, ".")
		if !ok || len(octets) != 4 {
			return netip.Prefix{}
		}
		for i, o := range octets {
			if t := strings.TrimLeft(o, "0"); t != o {
				octets[i] = cmp.Or(t, "0")
			}
		}
		if p, err = netip.ParsePrefix(strings.Join(octets, ".") + "/" + bits); err != nil {
			return netip.Prefix{}
		}
	}
	return p.Masked()
}

func selectorOf(s *metav1.LabelSelector) datastore.LabelSelector {
	out := datastore.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, datastore.LabelRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
	}
	return out
}
