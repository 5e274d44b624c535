package kubernetes

import (
	"net/netip"

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
	for _, p := range policies {
		np := policyOf(p)
		if err := (&datastore.Cluster{NetworkPolicies: []datastore.NetworkPolicy{np}}).Validate(); err != nil {
			d.log.Warn("kubernetes datastore: network policy ignored", "policy", np.Key(), "err", err)
			continue
		}
		c.NetworkPolicies = append(c.NetworkPolicies, np)
	}
	c.Normalize()
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

// parsePrefix parses a CIDR; one that does not parse is the zero Prefix,
// which Validate refuses.
func parsePrefix(s string) netip.Prefix {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

func selectorOf(s *metav1.LabelSelector) datastore.LabelSelector {
	out := datastore.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, datastore.LabelRequirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values})
	}
	return out
}
