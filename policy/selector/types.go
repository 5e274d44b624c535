package selector

import (
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// NamedPort is a port an endpoint names, such as a container port "http".
type NamedPort struct {
	// Name is the port's name.
	Name string
	// Protocol is TCP, UDP or SCTP.
	Protocol netfilter.Proto
	// Port is the port number.
	Port uint16
}

// Endpoint is one endpoint of the cluster (a pod), local to this node or
// not: its labels and addresses fill the sets of the selectors that select
// it, and a Local one becomes a policy.Workload.
type Endpoint struct {
	// ID names the endpoint; unique among endpoints. The workload of a
	// local endpoint has this ID.
	ID string
	// Namespace is the endpoint's namespace, whose labels Namespace
	// requirements test (none until SetNamespace gives them).
	Namespace string
	// Labels are the endpoint's labels.
	Labels map[string]string
	// Addrs are the endpoint's addresses.
	Addrs []netip.Addr
	// NamedPorts are the ports the endpoint names.
	NamedPorts []NamedPort
	// Local says the endpoint is on this node: it becomes a workload on
	// Iface.
	Local bool
	// Iface is the host side of a local endpoint's interface.
	Iface string
}

// PortName is a named port as a rule refers to it: the endpoints that
// define Name for Protocol, at the port each gives it.
type PortName struct {
	// Protocol is TCP, UDP or SCTP.
	Protocol netfilter.Proto
	// Name is the port's name.
	Name string
}

// Peer is one side of a packet as a Rule matches it: policy.Peer with
// selectors in place of set IDs and named ports by name. Every non-empty
// field must hold (AND).
type Peer struct {
	// Nets are networks the address is in (any of them).
	Nets []netip.Prefix
	// NotNets are networks the address is not in.
	NotNets []netip.Prefix
	// Ports are ports and ranges (any of them); they need the rule's
	// Protocol to be TCP, UDP or SCTP.
	Ports []netfilter.PortRange
	// NotPorts are ports the packet's port is not in.
	NotPorts []netfilter.PortRange
	// Selector, when set, selects the endpoints the address belongs to
	// (one set of their addresses).
	Selector *Selector
	// NotSelector, when set, selects endpoints the address must not
	// belong to.
	NotSelector *Selector
	// NamedPorts match the address, protocol and port of an endpoint
	// that defines the name: an endpoint of Selector, or of any namespace
	// when Selector is nil. They OR with Ports.
	NamedPorts []PortName
	// NotNamedPorts are named ports (resolved as NamedPorts) the packet
	// is not sent to or from.
	NotNamedPorts []PortName
}

// Rule is policy.Rule with Peers that hold selectors and port names.
type Rule struct {
	// Action is what happens to a matching packet.
	Action policy.Action
	// Family limits the rule to one IP family; zero means both.
	Family ipfamily.Family
	// Protocol is the IP protocol the packet must have; zero means any.
	Protocol netfilter.Proto
	// NotProtocol is a protocol the packet must not have.
	NotProtocol netfilter.Proto
	// ICMP matches an ICMP type (and code).
	ICMP *policy.ICMP
	// NotICMP is an ICMP type (and code) the packet must not have.
	NotICMP *policy.ICMP
	// Src and Dst match the packet's source and destination.
	Src, Dst Peer
	// Name names the rule.
	Name string
}

// Policy is a policy of a tier that applies to the endpoints its AppliesTo
// selects.
type Policy struct {
	// ID names the policy; the policy.Policy sent has this ID.
	ID string
	// Tier is the name of the policy's tier (see Index.SetTier).
	Tier string
	// Order sorts the policies of a tier (lower first; ties by ID).
	Order float64
	// AppliesTo selects the endpoints the policy applies to.
	AppliesTo Selector
	// Ingress are the rules for packets to the endpoint.
	Ingress []Rule
	// Egress are the rules for packets from the endpoint.
	Egress []Rule
	// NoIngress leaves the policy out of its endpoints' ingress lists
	// (a Kubernetes policy whose policyTypes lack Ingress); otherwise it
	// is listed, and with no ingress rule it denies what reaches it.
	NoIngress bool
	// NoEgress does the same for egress.
	NoEgress bool
}
