package cluster

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/internal/textform"
)

// Protocol is a service's transport protocol.
type Protocol uint8

// The protocols a service can have.
const (
	// TCP is the default: the zero Protocol means TCP.
	TCP Protocol = 6
	// UDP services are translated per datagram flow.
	UDP Protocol = 17
)

// OrTCP returns p, or TCP for the zero Protocol.
func (p Protocol) OrTCP() Protocol {
	if p == 0 {
		return TCP
	}
	return p
}

// String returns "TCP" or "UDP" (or the number of an unknown protocol).
func (p Protocol) String() string {
	switch p.OrTCP() {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// MarshalText returns String's text, "TCP" or "UDP" (the zero Protocol is
// TCP) (encoding.TextMarshaler); another protocol gives "protocol(n)",
// which does not unmarshal.
func (p Protocol) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText sets p to the protocol whose String is text, TCP for "TCP"
// and UDP for "UDP" (encoding.TextUnmarshaler). Any other text is an error,
// and p is left as it was.
func (p *Protocol) UnmarshalText(text []byte) error {
	v, err := textform.Parse(text, TCP, UDP)
	if err == nil {
		*p = v
	}
	return err
}

// Service is one port of a Kubernetes-style service, declared or changed:
// the frontends it is reached at and the backends it spreads new
// connections over. A Kubernetes Service with several ports is several
// Services here, one per port (name them "namespace/name:port"). A later
// Service with the same Name replaces it. The service proxy (bpf/proxy)
// consumes it.
type Service struct {
	// Name identifies the service; required, unique.
	Name string
	// Protocol is TCP (the zero value) or UDP.
	Protocol Protocol
	// Port is the service port on ClusterIPs and ExternalIPs; required.
	Port uint16
	// ClusterIPs are the service's virtual addresses (IPv4, IPv6 or both).
	ClusterIPs []netip.Addr
	// ExternalIPs are further addresses the service answers on, at Port,
	// for traffic from other hosts.
	ExternalIPs []netip.Addr
	// LoadBalancerIPs are the addresses of the service's load balancer
	// (status.loadBalancer.ingress): frontends like ExternalIPs, which
	// SourceRanges guard.
	LoadBalancerIPs []netip.Addr
	// SourceRanges, when not empty, let connections to the
	// LoadBalancerIPs through only from these networks
	// (loadBalancerSourceRanges); others are dropped, and so are clients
	// of a family no range is of. Networks, without host bits.
	SourceRanges []netip.Prefix
	// NodePort, when not zero, makes the service reachable at this port on
	// every node address (see NodeAddrs) of the service's families: those
	// of its cluster IPs, or without any, of its external IPs and
	// backends.
	NodePort uint16
	// ExternalTrafficLocal sends traffic that arrives from other hosts (at
	// a NodePort or an external IP) to this node's backends only, keeping
	// the client's address; without it such traffic goes to any backend
	// and, when that backend is elsewhere, is masqueraded.
	ExternalTrafficLocal bool
	// InternalTrafficLocal sends the connections to the ClusterIPs to
	// this node's backends only (Kubernetes' internalTrafficPolicy Local);
	// without one, they are dropped.
	InternalTrafficLocal bool
	// AffinityTimeout, when not zero, sends a client's new connections
	// (by its address) to the backend its last one went to, while that
	// backend serves and the last one was less than this long ago
	// (sessionAffinity ClientIP; Kubernetes' default is 3h, its maximum
	// 24h). Whole seconds, at most MaxAffinityTimeout.
	AffinityTimeout time.Duration
	// Backends are the ready endpoints. A frontend reaches the backends of
	// its own family; a service without any backend of a frontend's family
	// drops that frontend's new connections.
	Backends []Backend
}

// Backend is one endpoint of a service.
type Backend struct {
	// Addr is the endpoint's address and target port.
	Addr netip.AddrPort
	// Local says the endpoint runs on this node.
	Local bool
	// LocalOnly, with Local, says the endpoint serves only the traffic the
	// service keeps on this node (ExternalTrafficLocal from other hosts,
	// InternalTrafficLocal), not the traffic spread over the cluster:
	// Kubernetes' local terminating endpoint under externalTrafficPolicy
	// Local, used there while no local one is ready, but not by clients
	// anywhere while other nodes have ready ones. A backend listed twice
	// serves all traffic when one listing says so.
	LocalOnly bool
}

// Validate reports whether s is well formed: a name, TCP or UDP, a port,
// unicast frontend addresses without zone, and backends with a unicast
// address and a port, local when local only. The error names the service
// and wraps ErrInvalid.
func (s Service) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("%w service: empty name", ErrInvalid)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w service %q: %s", ErrInvalid, s.Name, fmt.Sprintf(format, args...))
	}
	if p := s.Protocol.OrTCP(); p != TCP && p != UDP {
		return bad("protocol %d is neither TCP nor UDP", uint8(s.Protocol))
	}
	if s.Port == 0 {
		return bad("port 0")
	}
	for _, a := range slices.Concat(s.ClusterIPs, s.ExternalIPs, s.LoadBalancerIPs) {
		if !serviceUnicast(a) {
			return bad("frontend address %v: not a unicast address without zone", a)
		}
	}
	for _, p := range s.SourceRanges {
		if !p.IsValid() || p.Addr().Zone() != "" || p.Addr().Is4In6() || p.Masked() != p {
			return bad("source range %v: not a network without host bits", p)
		}
	}
	switch {
	case s.AffinityTimeout < 0 || s.AffinityTimeout > MaxAffinityTimeout:
		return bad("affinity timeout %v is not between 0 and %v", s.AffinityTimeout, MaxAffinityTimeout)
	case s.AffinityTimeout%time.Second != 0:
		return bad("affinity timeout %v is not whole seconds", s.AffinityTimeout)
	}
	for _, b := range s.Backends {
		if !b.Addr.IsValid() || b.Addr.Port() == 0 {
			return bad("backend %v: no address or port 0", b.Addr)
		}
		if !serviceUnicast(b.Addr.Addr()) {
			return bad("backend %v: not a unicast address without zone", b.Addr)
		}
		if b.LocalOnly && !b.Local {
			return bad("backend %v: local only but not local", b.Addr)
		}
	}
	return nil
}

// MaxAffinityTimeout is the longest Service.AffinityTimeout, Kubernetes'
// maximum.
const MaxAffinityTimeout = 24 * time.Hour

// serviceUnicast reports whether a can be a service's frontend or backend
// address, or a node address: valid, unicast, without zone, not an IPv4
// address mapped into IPv6.
func serviceUnicast(a netip.Addr) bool {
	return a.IsValid() && a.Zone() == "" && !a.IsUnspecified() && !a.IsMulticast() && !a.Is4In6() && a != broadcast4
}

// broadcast4 is IPv4's limited broadcast address, no unicast address.
var broadcast4 = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// ServiceRemove withdraws the service with Name. Removing a service that
// is not declared does nothing.
type ServiceRemove struct {
	// Name names the service; required.
	Name string
}

// Validate reports whether r names a service; the error wraps ErrInvalid.
func (r ServiceRemove) Validate() error {
	if r.Name == "" {
		return fmt.Errorf("%w service remove: empty name", ErrInvalid)
	}
	return nil
}

// NodeAddrs are this node's own addresses, those its services' NodePorts
// answer on (Kubernetes' node addresses). Each NodeAddrs replaces the
// previous list.
type NodeAddrs struct {
	// Addrs are the node's addresses, IPv4, IPv6 or both.
	Addrs []netip.Addr
}

// Validate reports whether every address of n is unicast and without
// zone; the error wraps ErrInvalid.
func (n NodeAddrs) Validate() error {
	for _, a := range n.Addrs {
		if !serviceUnicast(a) {
			return fmt.Errorf("%w node address %v: not a unicast address without zone", ErrInvalid, a)
		}
	}
	return nil
}
