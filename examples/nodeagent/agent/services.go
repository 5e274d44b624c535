package agent

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// serviceMasqMark names the mark bit the BPF proxy sets on connections
// from other hosts that it sends to a backend on another node; the
// masquerade chain masquerades what carries it.
const serviceMasqMark = "service-masq"

// serviceRejectMark names the mark bit the BPF proxy sets on connections
// to a service without a ready backend; the service loop chain rejects
// them.
const serviceRejectMark = "service-reject"

// proxyServices turns the datastore's services into the proxy's: one per
// service port, named "namespace/name:port", answering on the cluster IPs
// and, as external IPs, on the external and load balancer IPs, with the
// backends selectEndpoints chooses for node self in zone (local when they
// run on self), each at its port for the service port (datastore
// Endpoint.Port: its own, or the port's target port).
func proxyServices(c datastore.Cluster, self, zone string) map[string]cluster.Service {
	out := map[string]cluster.Service{}
	place := endpointPlacer(c)
	for _, s := range c.Services {
		s = place(s)
		scopes := selectEndpoints(s, self, zone)
		endpoints := scopes.backends()
		traffic := serviceTrafficOf(s)
		for _, p := range s.Ports {
			port := p.Name
			if port == "" {
				port = fmt.Sprint(p.Port)
			}
			ps := cluster.Service{
				Name:                 fmt.Sprintf("%s/%s:%s", orDefault(s.Namespace, "default"), s.Name, port),
				Port:                 p.Port,
				ClusterIPs:           s.ClusterIPs,
				ExternalIPs:          s.ExternalIPs,
				LoadBalancerIPs:      s.LoadBalancerIPs,
				SourceRanges:         traffic.SourceRanges,
				ExternalTrafficLocal: s.ExternalTrafficPolicy == "Local",
				InternalTrafficLocal: traffic.InternalTrafficLocal,
				AffinityTimeout:      min(traffic.AffinityTimeout, cluster.MaxAffinityTimeout),
			}
			switch strings.ToUpper(p.Protocol) {
			case "", "TCP":
				ps.Protocol = cluster.TCP
			case "UDP":
				ps.Protocol = cluster.UDP
			default:
				continue // SCTP: not translated
			}
			if s.Type == "NodePort" || s.Type == "LoadBalancer" {
				ps.NodePort = p.NodePort
			}
			// Each backend at its own port for this service port (an
			// endpoint with ports that name none of it serves none).
			for i, e := range endpoints {
				if target, ok := e.Port(p); ok {
					ps.Backends = append(ps.Backends, cluster.Backend{Addr: netip.AddrPortFrom(e.IP, target), Local: e.Node == self,
						LocalOnly: i >= len(scopes.Cluster)})
				}
			}
			out[ps.Name] = ps
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// endpointScopes are a service's endpoints by the scope of the traffic
// that may use them, chosen as kube-proxy's CategorizeEndpoints chooses
// them.
type endpointScopes struct {
	// Cluster are the endpoints of traffic that may go to any node: the
	// ready endpoints (only those hinted for this node's zone when
	// topology aware routing applies, see zoneHinted), or when no endpoint
	// is ready, the terminating ones that still serve, whatever their
	// hints. Nil when no traffic takes this scope: internalTrafficPolicy
	// Local on a service without external frontends.
	Cluster []datastore.Endpoint
	// Local are the endpoints of traffic that stays on this node
	// (externalTrafficPolicy Local for traffic from other hosts,
	// internalTrafficPolicy Local for traffic from this node): this node's
	// ready endpoints, or when none is ready, its terminating ones that
	// still serve; zone hints play no part. Nil when no traffic takes this
	// scope.
	Local []datastore.Endpoint
}

// endpointPlacer returns a function that gives a service's endpoints that
// name no node (the field is optional: hand-made EndpointSlices often
// leave it out) the node whose pod CIDRs hold their address, so that a
// backend running here counts as local (the BPF proxy masquerades traffic
// from outside only to remote backends, and a local one's replies would
// not come back through it). The service given is not changed.
func endpointPlacer(c datastore.Cluster) func(datastore.Service) datastore.Service {
	type block struct {
		cidr netip.Prefix
		node string
	}
	var blocks []block
	for _, n := range c.Nodes {
		for _, p := range n.PodCIDRs {
			blocks = append(blocks, block{p, n.Name})
		}
	}
	return func(s datastore.Service) datastore.Service {
		if !slices.ContainsFunc(s.Endpoints, func(e datastore.Endpoint) bool { return e.Node == "" }) {
			return s
		}
		s.Endpoints = slices.Clone(s.Endpoints)
		for i, e := range s.Endpoints {
			if e.Node != "" {
				continue
			}
			if j := slices.IndexFunc(blocks, func(b block) bool { return b.cidr.Contains(e.IP) }); j >= 0 {
				s.Endpoints[i].Node = blocks[j].node
			}
		}
		return s
	}
}

// selectEndpoints chooses the endpoints of s for node self in zone.
func selectEndpoints(s datastore.Service, self, zone string) endpointScopes {
	external := s.Type == "NodePort" || s.Type == "LoadBalancer" || len(s.ExternalIPs) > 0 || len(s.LoadBalancerIPs) > 0
	internalLocal := s.InternalTrafficPolicy == "Local"
	// Traffic from other hosts with a Local policy stays here; so does
	// traffic from this node with a Local policy. The cluster scope serves
	// the rest, and this node's own connections to external frontends
	// whatever the external policy (kube-proxy's short circuit).
	usesLocal := internalLocal || (external && s.ExternalTrafficPolicy == "Local")
	usesCluster := !internalLocal || external
	var out endpointScopes
	if usesCluster {
		zoned := zoneHinted(s, zone)
		out.Cluster = pick(s.Endpoints, func(e datastore.Endpoint) bool {
			return e.Ready() && (!zoned || slices.Contains(e.ForZones, zone))
		})
		if len(out.Cluster) == 0 {
			out.Cluster = pick(s.Endpoints, datastore.Endpoint.ServingTerminating)
		}
	}
	if usesLocal && self != "" {
		out.Local = pick(s.Endpoints, func(e datastore.Endpoint) bool { return e.Node == self && e.Ready() })
		if len(out.Local) == 0 {
			out.Local = pick(s.Endpoints, func(e datastore.Endpoint) bool { return e.Node == self && e.ServingTerminating() })
		}
	}
	return out
}

// zoneHinted reports whether topology aware routing applies to s in zone,
// by kube-proxy's rule: s asks for it (TrafficDistribution), this node has
// a zone, every ready endpoint has zone hints and at least one is hinted
// for this zone. Otherwise every ready endpoint is used.
func zoneHinted(s datastore.Service, zone string) bool {
	if s.TrafficDistribution == "" || zone == "" {
		return false
	}
	forZone := false
	for _, e := range s.Endpoints {
		if !e.Ready() {
			continue
		}
		if len(e.ForZones) == 0 {
			return false
		}
		forZone = forZone || slices.Contains(e.ForZones, zone)
	}
	return forZone
}

// pick returns the endpoints keep keeps, in their order; nil for none.
func pick(endpoints []datastore.Endpoint, keep func(datastore.Endpoint) bool) []datastore.Endpoint {
	var out []datastore.Endpoint
	for _, e := range endpoints {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// backends returns the endpoints of both scopes, each once, in the order of
// the cluster scope and then the local one's others: the proxy takes one
// list per service and keeps traffic of the local scope to the Local
// backends. A local endpoint that only the local scope chose (terminating
// while other nodes have ready ones, or hinted for another zone) comes
// after the cluster scope's len(e.Cluster): it is LocalOnly, so that it
// takes no cluster traffic.
func (e endpointScopes) backends() []datastore.Endpoint {
	out := slices.Clone(e.Cluster)
	if len(e.Local) == 0 {
		return out
	}
	chosen := make(map[string]bool, len(e.Cluster))
	for _, c := range e.Cluster {
		chosen[c.BackendKey()] = true
	}
	for _, l := range e.Local {
		if !chosen[l.BackendKey()] {
			out = append(out, l)
		}
	}
	return out
}

// nodeZone returns the zone topology aware routing uses for node self:
// configured when set (--node-zone), else the node's zone in the
// datastore.
func nodeZone(c datastore.Cluster, self, configured string) string {
	if configured != "" {
		return configured
	}
	n, _ := c.Node(self)
	return n.Zone
}

// healthCheckServices returns the services whose health check node port
// node self answers: LoadBalancer services with externalTrafficPolicy
// Local and a HealthCheckNodePort, each with its count of ready endpoints
// on self (kube-proxy counts the same).
func healthCheckServices(c datastore.Cluster, self string) []HealthCheckService {
	var out []HealthCheckService
	place := endpointPlacer(c)
	for _, s := range c.Services {
		s = place(s)
		if s.HealthCheckNodePort == 0 || s.Type != "LoadBalancer" || s.ExternalTrafficPolicy != "Local" {
			continue
		}
		hs := HealthCheckService{Namespace: orDefault(s.Namespace, "default"), Name: s.Name, Port: s.HealthCheckNodePort}
		for _, e := range s.Endpoints {
			if self != "" && e.Node == self && e.Ready() {
				hs.LocalEndpoints++
			}
		}
		out = append(out, hs)
	}
	return out
}

// nodeAddrs returns node self's addresses in c: where NodePorts and health
// check ports answer.
func nodeAddrs(c datastore.Cluster, self string) []netip.Addr {
	var addrs []netip.Addr
	if n, ok := c.Node(self); ok {
		for _, a := range []netip.Addr{n.UnderlayIPv4, n.UnderlayIPv6} {
			if a.IsValid() {
				addrs = append(addrs, a)
			}
		}
	}
	return addrs
}

// serviceTraffic are the settings of a service that decide, beyond its
// frontends and backends, which connections the BPF proxy lets through
// and where it sends them; proxyServices gives them to the proxy, one
// value per datastore service, the same for each of its ports.
type serviceTraffic struct {
	// InternalTrafficLocal (internalTrafficPolicy Local): connections
	// from this node (its pods, the host) to the cluster IPs go to the
	// Local backends only, and are refused when there is none. For a
	// service without external frontends proxyServices already sends only
	// this node's endpoints.
	InternalTrafficLocal bool
	// AffinityTimeout, when not zero, is ClientIP session affinity: a
	// client address's new connections go to the backend its previous one
	// went to while they come less than AffinityTimeout apart.
	AffinityTimeout time.Duration
	// SourceRanges, when not empty, are the only client networks whose
	// connections to LoadBalancerIPs are let through (a LoadBalancer
	// service's loadBalancerSourceRanges); NodePorts, cluster and external
	// IPs are not guarded.
	SourceRanges []netip.Prefix
	// LoadBalancerIPs are the frontends SourceRanges guard; proxyServices
	// lists them among the cluster.Service's ExternalIPs.
	LoadBalancerIPs []netip.Addr
}

// serviceTrafficOf returns s's traffic settings: ClientIP affinity with
// its timeout (DefaultSessionAffinityTimeoutSeconds when none is given),
// source ranges only on a LoadBalancer service, as kube-proxy applies them.
func serviceTrafficOf(s datastore.Service) serviceTraffic {
	out := serviceTraffic{InternalTrafficLocal: s.InternalTrafficPolicy == "Local"}
	if s.SessionAffinity == "ClientIP" {
		seconds := s.SessionAffinityTimeoutSeconds
		if seconds == 0 {
			seconds = datastore.DefaultSessionAffinityTimeoutSeconds
		}
		out.AffinityTimeout = time.Duration(seconds) * time.Second
	}
	if s.Type == "LoadBalancer" && len(s.LoadBalancerSourceRanges) > 0 {
		out.SourceRanges = slices.Clone(s.LoadBalancerSourceRanges)
		out.LoadBalancerIPs = slices.Clone(s.LoadBalancerIPs)
	}
	return out
}

// serviceMessages returns the proxy messages that take it from the
// previous cluster to c: removed services, changed ones, and this node's
// addresses (where NodePorts answer).
func (t *translator) serviceMessages(c datastore.Cluster) []any {
	var out []any
	want := proxyServices(c, t.self, nodeZone(c, t.self, t.zone))
	for name := range t.services {
		if _, ok := want[name]; !ok {
			out = append(out, cluster.ServiceRemove{Name: name})
			delete(t.services, name)
		}
	}
	for name, s := range want {
		if old, ok := t.services[name]; !ok || !reflect.DeepEqual(old, s) {
			out = append(out, s)
			t.services[name] = s
		}
	}
	addrs := nodeAddrs(c, t.self)
	if !reflect.DeepEqual(addrs, t.nodeAddrs) {
		out = append(out, cluster.NodeAddrs{Addrs: addrs})
		t.nodeAddrs = addrs
	}
	return out
}
