package datastore

import (
	"fmt"
	"net/netip"
	"strconv"
)

// Namespace is a Kubernetes-style namespace: its name and labels. A
// namespace's labels always hold NamespaceNameLabel with its name, as
// Kubernetes sets it; Normalize adds it when missing.
type Namespace struct {
	// Name is the namespace's name. Required, unique.
	Name string `json:"name"`
	// Labels are the namespace's labels.
	Labels map[string]string `json:"labels,omitempty"`
}

// NamespaceNameLabel is the label every namespace carries with its own name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// ContainerPort is a port a pod declares, by which policies may name it.
type ContainerPort struct {
	// Name names the port (empty: it cannot be named).
	Name string `json:"name,omitempty"`
	// Protocol is TCP (the default), UDP or SCTP.
	Protocol string `json:"protocol,omitempty"`
	// Port is the port number.
	Port uint16 `json:"port"`
}

// NetworkPolicy is a Kubernetes NetworkPolicy (networking.k8s.io/v1): the
// pods of its namespace it selects are isolated in the directions of its
// PolicyTypes, and then allowed only what some policy's rules allow.
type NetworkPolicy struct {
	// Namespace and Name identify the policy.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PodSelector selects the pods of Namespace it applies to; empty
	// selects every pod of the namespace.
	PodSelector LabelSelector `json:"podSelector"`
	// PolicyTypes are "Ingress", "Egress" or both. Empty means Ingress,
	// and Egress too when the policy has egress rules (Kubernetes'
	// default).
	PolicyTypes []string `json:"policyTypes,omitempty"`
	// Ingress are the rules for traffic to the selected pods.
	Ingress []NetworkPolicyRule `json:"ingress,omitempty"`
	// Egress are the rules for traffic from the selected pods.
	Egress []NetworkPolicyRule `json:"egress,omitempty"`
}

// Key returns "namespace/name".
func (p NetworkPolicy) Key() string { return p.Namespace + "/" + p.Name }

// Types returns whether the policy isolates ingress and egress, with
// Kubernetes' defaults for empty PolicyTypes.
func (p NetworkPolicy) Types() (ingress, egress bool) {
	if len(p.PolicyTypes) == 0 {
		return true, len(p.Egress) > 0
	}
	for _, t := range p.PolicyTypes {
		switch t {
		case "Ingress":
			ingress = true
		case "Egress":
			egress = true
		}
	}
	return ingress, egress
}

// NetworkPolicyRule is one ingress rule (Peers are sources) or egress rule
// (Peers are destinations). Empty Peers match every address; empty Ports
// match every port and protocol.
type NetworkPolicyRule struct {
	// Peers are the other ends the rule allows (any of them).
	Peers []NetworkPolicyPeer `json:"peers,omitempty"`
	// Ports are the ports the rule allows (any of them), on the selected
	// pod for ingress, on the peer for egress.
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
}

// NetworkPolicyPeer is one peer of a rule: pods chosen by selectors, or an
// address block. PodSelector alone means pods of the policy's namespace;
// NamespaceSelector alone means every pod of the namespaces it selects;
// both mean the pods PodSelector selects in those namespaces.
type NetworkPolicyPeer struct {
	// PodSelector selects pods; nil means every pod (with a
	// NamespaceSelector) or is unused (with an IPBlock).
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
	// NamespaceSelector selects namespaces; nil means the policy's own.
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// IPBlock is an address block; it excludes the selectors.
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}

// IPBlock is a network less some of its subnets.
type IPBlock struct {
	// CIDR is the network.
	CIDR netip.Prefix `json:"cidr"`
	// Except are subnets of CIDR the block leaves out.
	Except []netip.Prefix `json:"except,omitempty"`
}

// NetworkPolicyPort is a port of a rule: a number, a range (Port to
// EndPort) or a container port's name, of one protocol.
type NetworkPolicyPort struct {
	// Protocol is TCP (the default), UDP or SCTP.
	Protocol string `json:"protocol,omitempty"`
	// Port is a number ("80") or a name ("http"); empty means every port
	// of Protocol.
	Port string `json:"port,omitempty"`
	// EndPort, when set, makes Port (a number) the start of a range.
	EndPort uint16 `json:"endPort,omitempty"`
}

// Number returns the port as a number, and false when it is a name or
// empty.
func (p NetworkPolicyPort) Number() (uint16, bool) {
	n, err := strconv.ParseUint(p.Port, 10, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint16(n), true
}

// LabelSelector selects objects by their labels, as Kubernetes'
// metav1.LabelSelector: every MatchLabels pair and every expression must
// hold. An empty selector selects everything.
type LabelSelector struct {
	// MatchLabels are key = value requirements.
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// MatchExpressions are further requirements.
	MatchExpressions []LabelRequirement `json:"matchExpressions,omitempty"`
}

// LabelRequirement is one expression of a LabelSelector.
type LabelRequirement struct {
	// Key is the label's key.
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	Operator string `json:"operator"`
	// Values are the values of In and NotIn (at least one), empty for
	// Exists and DoesNotExist.
	Values []string `json:"values,omitempty"`
}

// protocolValid reports whether p is a protocol a policy or a port may
// name: empty (TCP), TCP, UDP or SCTP.
func protocolValid(p string) bool {
	switch p {
	case "", "TCP", "UDP", "SCTP":
		return true
	}
	return false
}

// validate reports what is wrong with the selector, or "".
func (s LabelSelector) validate() string {
	for _, r := range s.MatchExpressions {
		switch r.Operator {
		case "In", "NotIn":
			if len(r.Values) == 0 {
				return fmt.Sprintf("expression on %q: %s needs values", r.Key, r.Operator)
			}
		case "Exists", "DoesNotExist":
			if len(r.Values) > 0 {
				return fmt.Sprintf("expression on %q: %s takes no values", r.Key, r.Operator)
			}
		default:
			return fmt.Sprintf("expression on %q: unknown operator %q", r.Key, r.Operator)
		}
		if r.Key == "" {
			return "expression without a key"
		}
	}
	return ""
}

// validate reports what is wrong with the policy, or "".
func (p NetworkPolicy) validate() string {
	if p.Name == "" || p.Namespace == "" {
		return "needs a namespace and a name"
	}
	if s := p.PodSelector.validate(); s != "" {
		return "podSelector: " + s
	}
	for _, t := range p.PolicyTypes {
		if t != "Ingress" && t != "Egress" {
			return fmt.Sprintf("policy type %q is not Ingress or Egress", t)
		}
	}
	for dir, rules := range map[string][]NetworkPolicyRule{"ingress": p.Ingress, "egress": p.Egress} {
		for i, r := range rules {
			if s := r.validate(); s != "" {
				return fmt.Sprintf("%s rule %d: %s", dir, i, s)
			}
		}
	}
	return ""
}

func (r NetworkPolicyRule) validate() string {
	for i, peer := range r.Peers {
		if s := peer.validate(); s != "" {
			return fmt.Sprintf("peer %d: %s", i, s)
		}
	}
	for i, port := range r.Ports {
		if !protocolValid(port.Protocol) {
			return fmt.Sprintf("port %d: protocol %q is not TCP, UDP or SCTP", i, port.Protocol)
		}
		n, numeric := port.Number()
		switch {
		case port.EndPort != 0 && !numeric:
			return fmt.Sprintf("port %d: endPort %d needs a numeric port", i, port.EndPort)
		case port.EndPort != 0 && port.EndPort < n:
			return fmt.Sprintf("port %d: endPort %d is below port %d", i, port.EndPort, n)
		case !numeric && port.Port != "" && !validPortName(port.Port):
			return fmt.Sprintf("port %d: %q is neither a port number nor a port name", i, port.Port)
		}
	}
	return ""
}

func (peer NetworkPolicyPeer) validate() string {
	if peer.IPBlock != nil {
		if peer.PodSelector != nil || peer.NamespaceSelector != nil {
			return "ipBlock excludes the selectors"
		}
		b := peer.IPBlock
		if !b.CIDR.IsValid() || b.CIDR.Masked() != b.CIDR {
			return fmt.Sprintf("ipBlock cidr %s is not a network", b.CIDR)
		}
		for _, e := range b.Except {
			if !e.IsValid() || e.Masked() != e || e.Bits() < b.CIDR.Bits() || !b.CIDR.Contains(e.Addr()) {
				return fmt.Sprintf("ipBlock except %s is not a subnet of %s", e, b.CIDR)
			}
		}
		return ""
	}
	if peer.PodSelector == nil && peer.NamespaceSelector == nil {
		return "needs a podSelector, a namespaceSelector or an ipBlock"
	}
	for _, s := range []*LabelSelector{peer.PodSelector, peer.NamespaceSelector} {
		if s != nil {
			if p := s.validate(); p != "" {
				return p
			}
		}
	}
	return ""
}

// validPortName reports whether s is a valid port name (Kubernetes'
// IANA_SVC_NAME: 1 to 15 lower-case letters, digits and inner hyphens,
// with at least one letter).
func validPortName(s string) bool {
	if s == "" || len(s) > 15 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			letter = true
		case c >= '0' && c <= '9':
		case c == '-' && s[i-1] != '-':
		default:
			return false
		}
	}
	return letter
}

// validServicePortName reports whether s can name a service port
// (Kubernetes' DNS-1123 label: 1 to 63 lower-case letters, digits and
// hyphens, starting and ending with a letter or digit; unlike a container
// port's name it may be longer than 15 and all digits).
func validServicePortName(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// AdminNetworkPolicy is a cluster-wide policy of the cluster's
// administrators, in the spirit of sigs.k8s.io/network-policy-api's
// AdminNetworkPolicy and BaselineAdminNetworkPolicy: its rules apply, in
// order, to the pods its Subject selects, before every NetworkPolicy (an
// admin policy: Allow and Deny are final, Pass leaves the decision to the
// NetworkPolicies) or after them (the baseline: it decides only for pods
// and directions no NetworkPolicy isolates).
type AdminNetworkPolicy struct {
	// Name identifies the policy.
	Name string `json:"name"`
	// Priority orders the admin policies, lowest first; unused for the
	// baseline.
	Priority int `json:"priority,omitempty"`
	// Subject selects the pods the policy applies to.
	Subject AdminPeer `json:"subject"`
	// Ingress are the rules for traffic to the subject's pods, in order.
	Ingress []AdminRule `json:"ingress,omitempty"`
	// Egress are the rules for traffic from them, in order.
	Egress []AdminRule `json:"egress,omitempty"`
}

// AdminRule is one rule of an AdminNetworkPolicy.
type AdminRule struct {
	// Name names the rule in explanations.
	Name string `json:"name,omitempty"`
	// Action is Allow, Deny or Pass (Pass: not in the baseline).
	Action string `json:"action"`
	// Peers are the other ends (any of them); empty means every pod.
	Peers []AdminPeer `json:"peers,omitempty"`
	// Ports are the destination ports (any of them); empty means all.
	Ports []NetworkPolicyPort `json:"ports,omitempty"`
}

// AdminPeer selects pods: those of the namespaces NamespaceSelector
// selects (nil: every namespace) that PodSelector selects (nil: all of
// them).
type AdminPeer struct {
	// NamespaceSelector selects namespaces; nil means all.
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector selects pods in them; nil means all.
	PodSelector *LabelSelector `json:"podSelector,omitempty"`
}

// validate reports what is wrong with the policy, or "".
func (p AdminNetworkPolicy) validate(baseline bool) string {
	if p.Name == "" {
		return "needs a name"
	}
	peerProblem := func(peer AdminPeer) string {
		for _, s := range []*LabelSelector{peer.NamespaceSelector, peer.PodSelector} {
			if s != nil {
				if pr := s.validate(); pr != "" {
					return pr
				}
			}
		}
		return ""
	}
	if pr := peerProblem(p.Subject); pr != "" {
		return "subject: " + pr
	}
	for dir, rules := range map[string][]AdminRule{"ingress": p.Ingress, "egress": p.Egress} {
		for i, r := range rules {
			switch {
			case r.Action == "Allow" || r.Action == "Deny":
			case r.Action == "Pass" && !baseline:
			default:
				return fmt.Sprintf("%s rule %d: action %q is not Allow, Deny or (not in the baseline) Pass", dir, i, r.Action)
			}
			for _, peer := range r.Peers {
				if pr := peerProblem(peer); pr != "" {
					return fmt.Sprintf("%s rule %d: %s", dir, i, pr)
				}
			}
			if pr := (NetworkPolicyRule{Ports: r.Ports}).validate(); pr != "" {
				return fmt.Sprintf("%s rule %d: %s", dir, i, pr)
			}
		}
	}
	return ""
}
