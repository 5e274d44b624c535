// Package datastore is the reference node agent's view of the cluster: the
// nodes with their underlay addresses, pod CIDRs and published tunnel details,
// the pods, the IP pools and the services, and the interface through which
// the agent learns them.
//
// Two implementations exist: File, a YAML file watched for changes (no server
// needed; the demo uses it), and package kubernetes, which reads Nodes, Pods,
// Services and EndpointSlices through client-go. Both deliver the whole
// Cluster on every change; the agent works out the difference.
package datastore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/wireguard"
)

// ErrInvalid is wrapped by every error about a Cluster that does not hold
// together: a missing name, a CIDR with host bits set, a pod on no known node.
var ErrInvalid = errors.New("datastore: invalid cluster")

// Datastore is where an agent learns the cluster and tells it about itself.
type Datastore interface {
	// Watch calls update with the complete Cluster, first once it has read
	// everything (the agent's in-sync point) and then whenever something
	// changes, until ctx ends; then it returns nil. update is called from
	// one goroutine, one call at a time, and may keep the Cluster. An error
	// before the first update (the source cannot be read) is returned.
	Watch(ctx context.Context, update func(Cluster)) error
	// Publish records what this node tells the others: its VTEP MACs and
	// WireGuard public keys. Fields left zero are not changed.
	Publish(ctx context.Context, info NodeInfo) error
}

// ConnectionReporter is implemented, besides Datastore, by a datastore that
// reads a server it can lose (package kubernetes: the API server). The
// agent shows it in its status and metrics; a datastore that has no such
// server (File) does not implement it.
type ConnectionReporter interface {
	// Connected reports whether the datastore reaches its server now, and
	// since when that has been so (zero: not known). While it does not,
	// the last Cluster delivered stands: nothing is withdrawn.
	Connected() (connected bool, since time.Time)
}

// StaleReporter is implemented by a datastore that may follow some of its
// resources while others stand at their last state (package kubernetes,
// after an outage, for a resource it may no longer read). The agent shows
// them in its status.
type StaleReporter interface {
	// Stale returns the resources whose last state stands; none when the
	// datastore follows them all.
	Stale() []string
}

// NodeInfo is what a node publishes about itself.
type NodeInfo struct {
	// Name is the node's name.
	Name string
	// VTEPMAC and VTEPMACV6 are the MACs of the node's VXLAN devices.
	VTEPMAC, VTEPMACV6 net.HardwareAddr
	// WireGuardKey and WireGuardKeyV6 are the public keys of the node's
	// IPv4 and IPv6 WireGuard devices (zero: unchanged).
	WireGuardKey, WireGuardKeyV6 wireguard.PublicKey
}

// Cluster is everything the agent needs to know about the cluster.
type Cluster struct {
	// Nodes are the cluster's nodes, this one included.
	Nodes []Node `json:"nodes"`
	// Pods are the cluster's pods; the agent routes those of its own node.
	Pods []Pod `json:"pods,omitempty"`
	// Pools are the ranges pods take their addresses from.
	Pools []Pool `json:"pools,omitempty"`
	// Services are the cluster's services with their endpoints.
	Services []Service `json:"services,omitempty"`
	// ServiceCIDRs are the service ranges (the cluster IP range, say):
	// forwarded traffic to them that no service proxy translated is
	// dropped instead of looping.
	ServiceCIDRs []netip.Prefix `json:"serviceCIDRs,omitempty"`
	// Namespaces are the cluster's namespaces with their labels, for the
	// namespace selectors of network policies.
	Namespaces []Namespace `json:"namespaces,omitempty"`
	// NetworkPolicies are the cluster's network policies.
	NetworkPolicies []NetworkPolicy `json:"networkPolicies,omitempty"`
	// AdminNetworkPolicies are the administrators' policies, applied
	// before every NetworkPolicy by Priority.
	AdminNetworkPolicies []AdminNetworkPolicy `json:"adminNetworkPolicies,omitempty"`
	// BaselineAdminNetworkPolicy, when set, decides for the pods and
	// directions no NetworkPolicy isolates.
	BaselineAdminNetworkPolicy *AdminNetworkPolicy `json:"baselineAdminNetworkPolicy,omitempty"`
}

// Node is one node of the cluster.
type Node struct {
	// Name is the node's name. Required, unique.
	Name string `json:"name"`
	// UnderlayIPv4 and UnderlayIPv6 are the node's addresses on the
	// network between nodes: where its tunnels end.
	UnderlayIPv4 netip.Addr `json:"underlayIPv4,omitzero"`
	UnderlayIPv6 netip.Addr `json:"underlayIPv6,omitzero"`
	// PodCIDRs are the blocks the node's pods take their addresses from.
	PodCIDRs []netip.Prefix `json:"podCIDRs,omitempty"`
	// VTEPMAC and VTEPMACV6 are the MACs of the node's VXLAN devices, as
	// it published them; empty means DefaultVTEPMAC of the node's name.
	VTEPMAC   MAC `json:"vtepMAC,omitempty"`
	VTEPMACV6 MAC `json:"vtepMACv6,omitempty"`
	// WireGuardPublicKey and WireGuardPublicKeyV6 are the public keys
	// (base64) of the node's IPv4 and IPv6 WireGuard devices, as it
	// published them; empty for none yet.
	WireGuardPublicKey   string `json:"wireguardPublicKey,omitempty"`
	WireGuardPublicKeyV6 string `json:"wireguardPublicKeyV6,omitempty"`
	// Zone is the node's zone (Kubernetes: its label
	// topology.kubernetes.io/zone), which topology aware routing matches
	// against the endpoints' ForZones; empty for none.
	Zone string `json:"zone,omitempty"`
}

// Pod is one pod: where it runs, its host-side interface and its addresses.
type Pod struct {
	// Namespace and Name identify the pod.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Node is where the pod runs.
	Node string `json:"node"`
	// Interface is the host side of the pod's veth; empty means
	// PodInterface(Namespace, Name), the name the CNI plugin gives it.
	Interface string `json:"interface,omitempty"`
	// IPs are the pod's addresses.
	IPs []netip.Addr `json:"ips"`
	// MAC is the pod's MAC, when known: the node then gives each of its
	// addresses a permanent neighbour entry on the host-side interface.
	MAC MAC `json:"mac,omitempty"`
	// FloatingIPs are addresses the world uses for the pod, each
	// translated one to one to one of its IPs.
	FloatingIPs []FloatingIP `json:"floatingIPs,omitempty"`
	// Labels are the pod's labels, for the selectors of network policies.
	Labels map[string]string `json:"labels,omitempty"`
	// Ports are the ports the pod's containers declare, by which network
	// policies may name them.
	Ports []ContainerPort `json:"ports,omitempty"`
}

// FloatingIP is one floating IP of a pod.
type FloatingIP struct {
	// Floating is the address the world uses.
	Floating netip.Addr `json:"floating"`
	// Internal is the pod's own address it stands for, of the same
	// family: one of the pod's IPs.
	Internal netip.Addr `json:"internal"`
}

// Key returns "namespace/name" (or "name" in no namespace).
func (p Pod) Key() string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// Pool is an IP pool: a range pods take addresses from.
type Pool struct {
	// Name identifies the pool.
	Name string `json:"name"`
	// CIDR is the range.
	CIDR netip.Prefix `json:"cidr"`
	// Masquerade makes pod traffic to destinations outside every pool leave
	// with the node's address.
	Masquerade bool `json:"masquerade,omitempty"`
}

// Service is a Kubernetes-style service and its endpoints.
type Service struct {
	// Namespace and Name identify the service.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Type is ClusterIP (the default), NodePort or LoadBalancer.
	Type string `json:"type,omitempty"`
	// ClusterIPs are the service's virtual addresses.
	ClusterIPs []netip.Addr `json:"clusterIPs,omitempty"`
	// ExternalIPs are further addresses the service answers on at its
	// ports, for traffic from other hosts (Kubernetes: spec.externalIPs).
	ExternalIPs []netip.Addr `json:"externalIPs,omitempty"`
	// LoadBalancerIPs are the load balancer's addresses (Kubernetes: the
	// IPs of status.loadBalancer.ingress). The service answers on them as
	// on its ExternalIPs; LoadBalancerSourceRanges guard them alone.
	LoadBalancerIPs []netip.Addr `json:"loadBalancerIPs,omitempty"`
	// ExternalTrafficPolicy is Cluster (the default) or Local: traffic from
	// other hosts to a NodePort, an external or a load balancer IP goes to
	// this node's endpoints only.
	ExternalTrafficPolicy string `json:"externalTrafficPolicy,omitempty"`
	// InternalTrafficPolicy is Cluster (the default) or Local: traffic
	// from this node (its pods, the host) to the cluster IPs goes to this
	// node's endpoints only, and none when it has none.
	InternalTrafficPolicy string `json:"internalTrafficPolicy,omitempty"`
	// HealthCheckNodePort, for a LoadBalancer service with
	// externalTrafficPolicy Local, is the TCP port on every node's
	// addresses where the load balancer asks over HTTP whether the node has
	// a ready endpoint of the service (Kubernetes:
	// spec.healthCheckNodePort); 0 for none. Unique in the cluster.
	HealthCheckNodePort uint16 `json:"healthCheckNodePort,omitempty"`
	// SessionAffinity is None (the default) or ClientIP: the connections
	// of one client address go to the same endpoint while they come less
	// than SessionAffinityTimeoutSeconds apart.
	SessionAffinity string `json:"sessionAffinity,omitempty"`
	// SessionAffinityTimeoutSeconds is the ClientIP affinity's timeout
	// (Kubernetes: spec.sessionAffinityConfig.clientIP.timeoutSeconds), at
	// most MaxSessionAffinityTimeoutSeconds; 0 means
	// DefaultSessionAffinityTimeoutSeconds. Only with ClientIP.
	SessionAffinityTimeoutSeconds uint32 `json:"sessionAffinityTimeoutSeconds,omitempty"`
	// LoadBalancerSourceRanges, for a LoadBalancer service, are the client
	// networks allowed to reach its LoadBalancerIPs; empty allows every
	// client.
	LoadBalancerSourceRanges []netip.Prefix `json:"loadBalancerSourceRanges,omitempty"`
	// TrafficDistribution turns topology aware routing on:
	// TrafficDistributionPreferSameZone, or its older name
	// TrafficDistributionPreferClose, makes a node send the service's
	// traffic to the endpoints hinted for its zone (Endpoint.ForZones)
	// when every ready endpoint has hints and some name its zone; empty
	// uses every endpoint and ignores the hints.
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
	// Ports are the service's ports.
	Ports []ServicePort `json:"ports,omitempty"`
	// Endpoints are the backends, each once (an address twice only at
	// different own ports: see Endpoint.BackendKey).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// The values of Service.TrafficDistribution that turn topology aware
// routing on; both mean the same.
const (
	TrafficDistributionPreferSameZone = "PreferSameZone"
	TrafficDistributionPreferClose    = "PreferClose"
)

// The bounds of Service.SessionAffinityTimeoutSeconds, Kubernetes' own.
const (
	// DefaultSessionAffinityTimeoutSeconds is the ClientIP affinity's
	// timeout when none is given: three hours.
	DefaultSessionAffinityTimeoutSeconds = 10800
	// MaxSessionAffinityTimeoutSeconds is the longest timeout: one day.
	MaxSessionAffinityTimeoutSeconds = 86400
)

// Key returns "namespace/name" (or "name" in no namespace).
func (s Service) Key() string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

// ServicePort is one port of a service.
type ServicePort struct {
	// Name names the port (may be empty for a single port).
	Name string `json:"name,omitempty"`
	// Protocol is TCP (the default), UDP or SCTP.
	Protocol string `json:"protocol,omitempty"`
	// Port is the service port on the cluster IPs.
	Port uint16 `json:"port"`
	// NodePort is the port on every node's addresses (0: none).
	NodePort uint16 `json:"nodePort,omitempty"`
	// TargetPort is the backends' port; 0 means Port.
	TargetPort uint16 `json:"targetPort,omitempty"`
}

// Endpoint is one backend of a service. A service's connections go to its
// ready endpoints; only when none is ready (in the scope of the traffic:
// the cluster, or this node for a Local traffic policy) do they go to the
// terminating endpoints that still serve, as kube-proxy sends them.
type Endpoint struct {
	// IP is the backend's address. A service may list one address twice
	// with different Ports (see BackendKey).
	IP netip.Addr `json:"ip"`
	// Node is where the backend runs, when known.
	Node string `json:"node,omitempty"`
	// NotReady marks a backend that must not get new connections while
	// a ready one is left (Kubernetes: the ready condition is false).
	NotReady bool `json:"notReady,omitempty"`
	// Terminating marks a backend that is going away (Kubernetes: the
	// terminating condition; its pod is being deleted). Such a backend is
	// normally NotReady too.
	Terminating bool `json:"terminating,omitempty"`
	// Serving, for a Terminating backend, says it still passes its
	// readiness checks (Kubernetes: the serving condition): it takes new
	// connections when no ready backend is left. Only with Terminating:
	// a backend that is not terminating serves when it is ready.
	Serving bool `json:"serving,omitempty"`
	// ForZones are the zones whose nodes should send the backend their
	// traffic when the service's TrafficDistribution asks for topology
	// aware routing (Kubernetes: hints.forZones); empty for no hint.
	ForZones []string `json:"forZones,omitempty"`
	// Ports, when not empty, are the backend's own ports, by the name of
	// the service port they serve (Kubernetes: the ports of its
	// EndpointSlice, where one target port name may resolve to different
	// container ports on different pods): the backend takes a service
	// port's traffic at the port of that name, and none of a service port
	// it does not name. Empty: every service port's traffic, at the
	// port's TargetPort.
	Ports []EndpointPort `json:"ports,omitempty"`
}

// EndpointPort is one of an endpoint's own ports.
type EndpointPort struct {
	// Name is the name of the service port it serves (empty for the
	// service's unnamed port).
	Name string `json:"name,omitempty"`
	// Port is the backend's port for that service port. Required.
	Port uint16 `json:"port"`
}

// Port returns the port at which the backend takes the traffic of service
// port p: its own port of p's name when it has Ports (false when it names
// none), else p's TargetPort (or Port when that is 0).
func (e Endpoint) Port(p ServicePort) (uint16, bool) {
	if len(e.Ports) > 0 {
		for _, ep := range e.Ports {
			if ep.Name == p.Name {
				return ep.Port, true
			}
		}
		return 0, false
	}
	if p.TargetPort != 0 {
		return p.TargetPort, true
	}
	return p.Port, true
}

// BackendKey names the backend e is: its address and its own ports (in
// any order). One address may be several backends at different ports
// (Kubernetes: host-network pods of one node, each in its own
// EndpointSlice); endpoints with equal keys are the same backend.
func (e Endpoint) BackendKey() string {
	ports := slices.SortedFunc(slices.Values(e.Ports), func(a, b EndpointPort) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Port, b.Port))
	})
	return fmt.Sprint(e.IP, ports)
}

// Ready reports whether the backend takes new connections (it is not
// NotReady).
func (e Endpoint) Ready() bool { return !e.NotReady }

// ServingTerminating reports whether the backend is terminating but still
// serving: a fallback when no ready backend is left.
func (e Endpoint) ServingTerminating() bool { return e.Serving && e.Terminating }

// MAC is a hardware address with a text form ("02:4e:50:00:00:01").
type MAC net.HardwareAddr

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return []byte(net.HardwareAddr(m).String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler: a 6-byte unicast MAC,
// or empty for none.
func (m *MAC) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*m = nil
		return nil
	}
	hw, err := net.ParseMAC(string(b))
	if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
		return fmt.Errorf("%w: %q is not a 6-byte unicast MAC", ErrInvalid, b)
	}
	*m = MAC(hw)
	return nil
}

// String returns the MAC's text form, or "" for none.
func (m MAC) String() string {
	if len(m) == 0 {
		return ""
	}
	return net.HardwareAddr(m).String()
}

// PodInterfacePrefix starts the name of every pod's host-side interface made
// by the CNI convention of PodInterface.
const PodInterfacePrefix = "npv"

// PodInterface returns the host-side interface name the CNI plugin gives the
// pod namespace/name: "npv" and 11 hex digits of the SHA-256 of
// "namespace/name" (14 characters, under the kernel's 15). Agents and plugins
// compute it alike, so neither has to tell the other.
func PodInterface(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return PodInterfacePrefix + hex.EncodeToString(sum[:])[:11]
}

// DefaultVTEPMAC returns the MAC a node's VXLAN device takes when the
// datastore has none for it: locally administered, derived from the node's
// name and the family (4 or 6), so every agent computes the same one.
func DefaultVTEPMAC(node string, family int) net.HardwareAddr {
	sum := sha256.Sum256([]byte(fmt.Sprintf("nodeplane-vtep/%d/%s", family, node)))
	return net.HardwareAddr{0x02, 0x4e, sum[0], sum[1], sum[2], sum[3]}
}

// TunnelAddr returns the address of a node's tunnel device in a pod CIDR: the
// CIDR's first address (10.244.1.0 for 10.244.1.0/24), which IPAM never gives
// to a pod.
func TunnelAddr(cidr netip.Prefix) netip.Addr {
	return cidr.Masked().Addr()
}

// HostInterface returns the pod's host-side interface name: Interface, or
// PodInterface of its namespace and name.
func (p Pod) HostInterface() string {
	if p.Interface != "" {
		return p.Interface
	}
	return PodInterface(p.Namespace, p.Name)
}

// Node returns the node called name.
func (c *Cluster) Node(name string) (Node, bool) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Validate reports, with an error wrapping ErrInvalid, what does not hold
// together: a node without a name or listed twice, a CIDR with host bits set,
// a bad WireGuard key, a pod without a name or node or addresses, or with a
// floating IP that stands for none of its addresses, a service without a
// name, with a setting Kubernetes would refuse (a traffic policy, session
// affinity or traffic distribution it does not know, source ranges or a
// health check port on a service that is no LoadBalancer, a health check
// port another service has) or with a bad endpoint (no address, an address
// listed twice at the same ports, Serving without Terminating, an empty or
// repeated zone, a port of no service port's name, a port 0 or a name
// listed twice).
func (c *Cluster) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
	}
	nodes := map[string]bool{}
	for i, n := range c.Nodes {
		switch {
		case n.Name == "":
			bad("node %d has no name", i)
			continue
		case nodes[n.Name]:
			bad("node %q is listed twice", n.Name)
		}
		nodes[n.Name] = true
		if n.UnderlayIPv4.IsValid() && !n.UnderlayIPv4.Is4() {
			bad("node %q: underlayIPv4 %s is not IPv4", n.Name, n.UnderlayIPv4)
		}
		if n.UnderlayIPv6.IsValid() && (!n.UnderlayIPv6.Is6() || n.UnderlayIPv6.Is4In6()) {
			bad("node %q: underlayIPv6 %s is not IPv6", n.Name, n.UnderlayIPv6)
		}
		for _, p := range n.PodCIDRs {
			if !p.IsValid() || p.Masked() != p {
				bad("node %q: pod CIDR %s is not a network (%s?)", n.Name, p, p.Masked())
			}
		}
		if n.WireGuardPublicKey != "" {
			if _, err := wireguard.ParsePublicKey(n.WireGuardPublicKey); err != nil {
				bad("node %q: wireguardPublicKey: %v", n.Name, err)
			}
		}
		if n.WireGuardPublicKeyV6 != "" {
			if _, err := wireguard.ParsePublicKey(n.WireGuardPublicKeyV6); err != nil {
				bad("node %q: wireguardPublicKeyV6: %v", n.Name, err)
			}
		}
	}
	pods := map[string]bool{}
	for i, p := range c.Pods {
		switch {
		case p.Name == "":
			bad("pod %d has no name", i)
			continue
		case pods[p.Key()]:
			bad("pod %q is listed twice", p.Key())
		case p.Node == "":
			bad("pod %q has no node", p.Key())
		case len(p.IPs) == 0:
			bad("pod %q has no IPs", p.Key())
		}
		pods[p.Key()] = true
		for _, ip := range p.IPs {
			if !ip.IsValid() || ip.IsUnspecified() {
				bad("pod %q: IP %s is not an address", p.Key(), ip)
			}
		}
		for _, f := range p.FloatingIPs {
			if !f.Floating.IsValid() || f.Floating.IsUnspecified() || f.Floating.Is4() != f.Internal.Is4() ||
				f.Floating == f.Internal || !slices.Contains(p.IPs, f.Internal) {
				bad("pod %q: floating IP %s must stand for one of its IPs of the same family, not %s", p.Key(), f.Floating, f.Internal)
			}
		}
	}
	for i, p := range c.Pools {
		if p.Name == "" || !p.CIDR.IsValid() || p.CIDR.Masked() != p.CIDR {
			bad("pool %d (%q): needs a name and a network CIDR, got %s", i, p.Name, p.CIDR)
		}
	}
	for _, p := range c.ServiceCIDRs {
		if !p.IsValid() || p.Masked() != p {
			bad("service CIDR %s is not a network (%s?)", p, p.Masked())
		}
	}
	healthPorts := map[uint16]string{}
	services := map[string]bool{}
	for i, s := range c.Services {
		switch {
		case s.Name == "":
			bad("service %d has no name", i)
		case services[s.Key()]:
			bad("service %q is listed twice", s.Key())
		}
		services[s.Key()] = true
		for _, problem := range s.problems() {
			bad("service %q: %s", s.Key(), problem)
		}
		if p := s.HealthCheckNodePort; p != 0 {
			if other, ok := healthPorts[p]; ok {
				bad("service %q: healthCheckNodePort %d is service %q's already", s.Key(), p, other)
			}
			healthPorts[p] = s.Key()
		}
	}
	namespaces := map[string]bool{}
	for i, n := range c.Namespaces {
		switch {
		case n.Name == "":
			bad("namespace %d has no name", i)
		case namespaces[n.Name]:
			bad("namespace %q is listed twice", n.Name)
		}
		namespaces[n.Name] = true
	}
	for _, p := range c.Pods {
		for _, port := range p.Ports {
			if !protocolValid(port.Protocol) || port.Port == 0 || (port.Name != "" && !validPortName(port.Name)) {
				bad("pod %q: port %q %s/%d is not a valid container port", p.Key(), port.Name, port.Protocol, port.Port)
			}
		}
	}
	policies := map[string]bool{}
	for i, p := range c.NetworkPolicies {
		if problem := p.validate(); problem != "" {
			bad("network policy %d (%q): %s", i, p.Key(), problem)
		}
		if policies[p.Key()] {
			bad("network policy %q is listed twice", p.Key())
		}
		policies[p.Key()] = true
	}
	admins := map[string]bool{}
	for i, p := range c.AdminNetworkPolicies {
		if problem := p.validate(false); problem != "" {
			bad("admin network policy %d (%q): %s", i, p.Name, problem)
		}
		if admins[p.Name] {
			bad("admin network policy %q is listed twice", p.Name)
		}
		admins[p.Name] = true
	}
	if b := c.BaselineAdminNetworkPolicy; b != nil {
		if problem := b.validate(true); problem != "" {
			bad("baseline admin network policy %q: %s", b.Name, problem)
		}
	}
	return errors.Join(errs...)
}

// Normalize sorts the Cluster's lists (nodes, pods, pools, services,
// namespaces and network policies by name) so that two equal clusters
// compare equal, and gives every namespace its NamespaceNameLabel.
func (c *Cluster) Normalize() {
	slices.SortFunc(c.Namespaces, func(a, b Namespace) int { return strings.Compare(a.Name, b.Name) })
	for i, n := range c.Namespaces {
		if n.Labels[NamespaceNameLabel] != n.Name {
			labels := maps.Clone(n.Labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[NamespaceNameLabel] = n.Name
			c.Namespaces[i].Labels = labels
		}
	}
	slices.SortFunc(c.NetworkPolicies, func(a, b NetworkPolicy) int { return strings.Compare(a.Key(), b.Key()) })
	slices.SortFunc(c.AdminNetworkPolicies, func(a, b AdminNetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(c.Nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Pods, func(a, b Pod) int { return strings.Compare(a.Key(), b.Key()) })
	slices.SortFunc(c.Pools, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Services, func(a, b Service) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}
