package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// The datastore's services become one proxy service per port, ready
// endpoints only, this node's marked local; only changes are sent again.
func TestServiceMessages(t *testing.T) {
	c := testCluster(2)
	web := datastore.Service{Namespace: "demo", Name: "web", Type: "NodePort", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports: []datastore.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080, TargetPort: 8080},
			{Name: "dns", Protocol: "UDP", Port: 53},
			{Name: "sctp", Protocol: "SCTP", Port: 99},
		},
		Endpoints: []datastore.Endpoint{
			{IP: netip.MustParseAddr("10.244.1.10"), Node: "node1"},
			{IP: netip.MustParseAddr("10.244.2.10"), Node: "node2"},
			{IP: netip.MustParseAddr("10.244.2.11"), Node: "node2", NotReady: true},
		}}
	c.Services = []datastore.Service{web}
	tr := newTranslator("node1")
	msgs := tr.serviceMessages(c)
	updates := map[string]cluster.Service{}
	var addrs []netip.Addr
	for _, m := range msgs {
		switch m := m.(type) {
		case cluster.Service:
			updates[m.Name] = m
		case cluster.NodeAddrs:
			addrs = m.Addrs
		}
	}
	require.Len(t, updates, 2, "SCTP is not translated")
	http := updates["demo/web:http"]
	assert.Equal(t, uint16(30080), http.NodePort)
	assert.Equal(t, cluster.TCP, http.Protocol)
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.1.10:8080"), Local: true},
		{Addr: netip.MustParseAddrPort("10.244.2.10:8080")},
	}, http.Backends, "ready endpoints only, at the target port")
	dns := updates["demo/web:dns"]
	assert.Equal(t, cluster.UDP, dns.Protocol)
	assert.Equal(t, netip.MustParseAddrPort("10.244.2.10:53"), dns.Backends[1].Addr, "no target port: the service port")
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("198.18.0.1")}, addrs)
	for _, s := range updates {
		require.NoError(t, s.Validate())
	}

	assert.False(t, http.ExternalTrafficLocal)

	// Nothing changed: nothing sent. A ClusterIP service has no NodePort.
	assert.Empty(t, tr.serviceMessages(c))
	c.Services[0].Type = "ClusterIP"
	msgs = tr.serviceMessages(c)
	require.Len(t, msgs, 1)
	assert.Zero(t, msgs[0].(cluster.Service).NodePort)

	// External IPs and externalTrafficPolicy Local reach the proxy.
	c.Services[0].ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.7")}
	c.Services[0].ExternalTrafficPolicy = "Local"
	msgs = tr.serviceMessages(c)
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		u := m.(cluster.Service)
		assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.7")}, u.ExternalIPs)
		assert.True(t, u.ExternalTrafficLocal)
	}

	// The service goes: both ports are removed.
	c.Services = nil
	msgs = tr.serviceMessages(c)
	assert.ElementsMatch(t, []any{cluster.ServiceRemove{Name: "demo/web:http"}, cluster.ServiceRemove{Name: "demo/web:dns"}}, msgs)
}

// ep is an endpoint at 10.244.<node>.<host> on node<node>, changed by the
// flags: "notready", "terminating" (not ready, not serving), "draining"
// (terminating, serving), and "zone:<name>" hints.
func ep(node, host byte, flags ...string) datastore.Endpoint {
	e := datastore.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, node, host}), Node: fmt.Sprintf("node%d", node)}
	for _, f := range flags {
		switch {
		case f == "notready":
			e.NotReady = true
		case f == "terminating":
			e.NotReady, e.Terminating = true, true
		case f == "draining":
			e.NotReady, e.Terminating, e.Serving = true, true, true
		case strings.HasPrefix(f, "zone:"):
			e.ForZones = append(e.ForZones, strings.TrimPrefix(f, "zone:"))
		default:
			panic("unknown endpoint flag " + f)
		}
	}
	return e
}

// ips lists the endpoints' addresses, nil for none.
func ips(eps []datastore.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.IP.String())
	}
	return out
}

// TestSelectEndpoints: kube-proxy's choice of endpoints per traffic scope:
// ready ones, else serving terminating ones; this node's alone for a Local
// policy, with the same fallback; zone hints for the cluster scope when the
// service asks for them, every ready endpoint has some and one names this
// zone.
func TestSelectEndpoints(t *testing.T) {
	nodePort := func(s *datastore.Service) { s.Type = "NodePort" }
	extLocal := func(s *datastore.Service) { s.Type, s.ExternalTrafficPolicy = "NodePort", "Local" }
	intLocal := func(s *datastore.Service) { s.InternalTrafficPolicy = "Local" }
	zoned := func(s *datastore.Service) { s.TrafficDistribution = datastore.TrafficDistributionPreferClose }
	for _, tc := range []struct {
		name      string
		svc       func(*datastore.Service)
		endpoints []datastore.Endpoint
		zone      string
		// cluster and local are the scopes' addresses; backends those
		// the proxy gets.
		cluster, local, backends []string
	}{{
		name:      "ready endpoints only",
		endpoints: []datastore.Endpoint{ep(1, 10), ep(2, 10, "notready"), ep(2, 11, "draining"), ep(2, 12)},
		cluster:   []string{"10.244.1.10", "10.244.2.12"},
	}, {
		name:      "none ready: the serving terminating ones",
		endpoints: []datastore.Endpoint{ep(1, 10, "notready"), ep(2, 10, "draining"), ep(2, 11, "terminating"), ep(1, 11, "draining")},
		cluster:   []string{"10.244.2.10", "10.244.1.11"},
	}, {
		name:      "none serving: none",
		endpoints: []datastore.Endpoint{ep(1, 10, "notready"), ep(2, 11, "terminating")},
	}, {
		name:      "external Local: this node's ready ones beside the cluster's",
		svc:       extLocal,
		endpoints: []datastore.Endpoint{ep(1, 10), ep(1, 11, "draining"), ep(2, 10)},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
		local:     []string{"10.244.1.10"},
	}, {
		name:      "external Local, no local ready: this node's serving terminating ones, also as backends",
		svc:       extLocal,
		endpoints: []datastore.Endpoint{ep(1, 10, "draining"), ep(1, 11, "terminating"), ep(2, 10), ep(1, 12, "notready")},
		cluster:   []string{"10.244.2.10"},
		local:     []string{"10.244.1.10"},
		backends:  []string{"10.244.2.10", "10.244.1.10"},
	}, {
		name:      "external Local, nothing ready anywhere: serving terminating ones in both scopes",
		svc:       extLocal,
		endpoints: []datastore.Endpoint{ep(1, 10, "draining"), ep(2, 10, "draining")},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
		local:     []string{"10.244.1.10"},
	}, {
		name: "external Local without external frontends: the cluster scope alone",
		svc: func(s *datastore.Service) {
			s.ExternalTrafficPolicy = "Local"
		},
		endpoints: []datastore.Endpoint{ep(1, 10, "draining"), ep(2, 10)},
		cluster:   []string{"10.244.2.10"},
	}, {
		name:      "internal Local: this node's alone",
		svc:       intLocal,
		endpoints: []datastore.Endpoint{ep(1, 10), ep(2, 10)},
		local:     []string{"10.244.1.10"},
	}, {
		name:      "internal Local, none here: none",
		svc:       intLocal,
		endpoints: []datastore.Endpoint{ep(2, 10), ep(2, 11)},
	}, {
		name: "internal Local with external frontends: both scopes",
		svc: func(s *datastore.Service) {
			intLocal(s)
			s.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.7")}
		},
		endpoints: []datastore.Endpoint{ep(1, 10), ep(2, 10)},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
		local:     []string{"10.244.1.10"},
	}, {
		name:      "zones: the endpoints hinted for this zone",
		svc:       zoned,
		zone:      "a",
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:a"), ep(2, 10, "zone:b"), ep(2, 11, "zone:b", "zone:a"), ep(2, 12, "notready")},
		cluster:   []string{"10.244.1.10", "10.244.2.11"},
	}, {
		name:      "zones: a ready endpoint without hints turns them off",
		svc:       zoned,
		zone:      "a",
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:a"), ep(2, 10)},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}, {
		name:      "zones: none hinted for this zone, every ready one",
		svc:       zoned,
		zone:      "c",
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:a"), ep(2, 10, "zone:b")},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}, {
		name:      "zones: the service does not ask for them",
		zone:      "a",
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:a"), ep(2, 10, "zone:b")},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}, {
		name:      "zones: this node has none",
		svc:       zoned,
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:a"), ep(2, 10, "zone:b")},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}, {
		name:      "zones: the fallback to serving terminating ones ignores them",
		svc:       zoned,
		zone:      "a",
		endpoints: []datastore.Endpoint{ep(1, 10, "draining", "zone:b"), ep(2, 10, "draining")},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}, {
		name: "zones: not for the local scope",
		svc: func(s *datastore.Service) {
			zoned(s)
			extLocal(s)
		},
		zone:      "a",
		endpoints: []datastore.Endpoint{ep(1, 10, "zone:b"), ep(2, 10, "zone:a")},
		cluster:   []string{"10.244.2.10"},
		local:     []string{"10.244.1.10"},
		backends:  []string{"10.244.2.10", "10.244.1.10"},
	}, {
		name:      "a NodePort with the Cluster policy: the cluster scope alone",
		svc:       nodePort,
		endpoints: []datastore.Endpoint{ep(1, 10), ep(2, 10)},
		cluster:   []string{"10.244.1.10", "10.244.2.10"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := datastore.Service{Name: "s", Endpoints: tc.endpoints}
			if tc.svc != nil {
				tc.svc(&s)
			}
			require.NoError(t, (&datastore.Cluster{Services: []datastore.Service{s}}).Validate())
			got := selectEndpoints(s, "node1", tc.zone)
			assert.Equal(t, tc.cluster, ips(got.Cluster), "cluster scope")
			assert.Equal(t, tc.local, ips(got.Local), "local scope")
			backends := tc.backends
			if backends == nil {
				backends = tc.cluster
				for _, l := range tc.local {
					if !slices.Contains(backends, l) {
						backends = append(backends, l)
					}
				}
			}
			assert.Equal(t, backends, ips(got.backends()), "backends")
		})
	}
}

// The proxy gets the selected endpoints, the load balancer IPs among the
// external IPs, and the zone of --node-zone, else the node's own.
func TestProxyServicesSelectAndZone(t *testing.T) {
	c := testCluster(2)
	c.Nodes[0].Zone = "a"
	c.Services = []datastore.Service{{Namespace: "demo", Name: "lb", Type: "LoadBalancer", ExternalTrafficPolicy: "Local",
		TrafficDistribution: datastore.TrafficDistributionPreferSameZone,
		ClusterIPs:          []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		ExternalIPs:         []netip.Addr{netip.MustParseAddr("192.0.2.7")},
		LoadBalancerIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.8"), netip.MustParseAddr("192.0.2.7")},
		Ports:               []datastore.ServicePort{{Port: 80, NodePort: 30080, TargetPort: 8080}},
		Endpoints:           []datastore.Endpoint{ep(1, 10, "draining", "zone:a"), ep(2, 10, "zone:a"), ep(2, 11, "zone:b")}}}
	tr := newTranslator("node1")
	var lb cluster.Service
	for _, m := range tr.serviceMessages(c) {
		if s, ok := m.(cluster.Service); ok {
			lb = s
		}
	}
	require.Equal(t, "demo/lb:80", lb.Name)
	require.NoError(t, lb.Validate())
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.7")}, lb.ExternalIPs)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("192.0.2.8"), netip.MustParseAddr("192.0.2.7")}, lb.LoadBalancerIPs,
		"its own frontends, which source ranges guard (an address of both is one frontend with both flags)")
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.2.10:8080")},
		{Addr: netip.MustParseAddrPort("10.244.1.10:8080"), Local: true, LocalOnly: true},
	}, lb.Backends, "zone a's ready endpoint, and this node's draining one for the Local policy alone")

	// A configured zone wins over the node's.
	tr.zone = "b"
	msgs := tr.serviceMessages(c)
	require.Len(t, msgs, 1)
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.2.11:8080")},
		{Addr: netip.MustParseAddrPort("10.244.1.10:8080"), Local: true, LocalOnly: true},
	}, msgs[0].(cluster.Service).Backends)
}

// An endpoint that names no node (the field is optional) is placed on the
// node whose pod CIDRs hold its address: this node's backend is local (the
// proxy does not masquerade traffic from outside to it), also for the
// Local traffic policy and its health check; one no node holds stays
// remote; the datastore's service is not changed.
func TestEndpointWithoutNode(t *testing.T) {
	c := testCluster(2)
	noNode := func(e datastore.Endpoint) datastore.Endpoint { e.Node = ""; return e }
	c.Services = []datastore.Service{{Namespace: "demo", Name: "lb", Type: "LoadBalancer", ExternalTrafficPolicy: "Local",
		HealthCheckNodePort: 32001, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports:     []datastore.ServicePort{{Port: 80, NodePort: 30080, TargetPort: 8080}},
		Endpoints: []datastore.Endpoint{noNode(ep(1, 10)), noNode(ep(2, 10)), {IP: netip.MustParseAddr("10.250.0.1")}}}}
	svc := proxyServices(c, "node1", "")["demo/lb:80"]
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.1.10:8080"), Local: true},
		{Addr: netip.MustParseAddrPort("10.244.2.10:8080")},
		{Addr: netip.MustParseAddrPort("10.250.0.1:8080")},
	}, svc.Backends)
	assert.Equal(t, []HealthCheckService{{Namespace: "demo", Name: "lb", Port: 32001, LocalEndpoints: 1}}, healthCheckServices(c, "node1"))
	assert.Empty(t, c.Services[0].Endpoints[0].Node, "the datastore's service is not changed")
}

// The health check ports of LoadBalancer services with the Local policy,
// with their count of ready endpoints on this node.
func TestHealthCheckServices(t *testing.T) {
	c := testCluster(2)
	lb := func(name string, port uint16, eps ...datastore.Endpoint) datastore.Service {
		return datastore.Service{Namespace: "demo", Name: name, Type: "LoadBalancer", ExternalTrafficPolicy: "Local",
			HealthCheckNodePort: port, Endpoints: eps}
	}
	c.Services = []datastore.Service{
		lb("two", 32001, ep(1, 10), ep(1, 11), ep(1, 12, "draining"), ep(2, 10)),
		lb("none-here", 32002, ep(1, 13, "notready"), ep(2, 11)),
		lb("no-port", 0, ep(1, 14)),
		{Name: "cluster-policy", Type: "LoadBalancer", HealthCheckNodePort: 32003},
	}
	assert.Equal(t, []HealthCheckService{
		{Namespace: "demo", Name: "two", Port: 32001, LocalEndpoints: 2},
		{Namespace: "demo", Name: "none-here", Port: 32002},
	}, healthCheckServices(c, "node1"))
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("198.18.0.1")}, nodeAddrs(c, "node1"))
	assert.Empty(t, nodeAddrs(c, "node9"))
}

// serviceTrafficOf: the settings the proxy's other half takes.
func TestServiceTrafficOf(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	lbIPs := []netip.Addr{netip.MustParseAddr("203.0.113.9")}
	for _, tc := range []struct {
		name string
		svc  datastore.Service
		want serviceTraffic
	}{
		{"defaults", datastore.Service{Name: "s"}, serviceTraffic{}},
		{"internal Local", datastore.Service{Name: "s", InternalTrafficPolicy: "Local"}, serviceTraffic{InternalTrafficLocal: true}},
		{"internal Cluster", datastore.Service{Name: "s", InternalTrafficPolicy: "Cluster"}, serviceTraffic{}},
		{"ClientIP with a timeout", datastore.Service{Name: "s", SessionAffinity: "ClientIP", SessionAffinityTimeoutSeconds: 600},
			serviceTraffic{AffinityTimeout: 10 * time.Minute}},
		{"ClientIP: three hours by default", datastore.Service{Name: "s", SessionAffinity: "ClientIP"},
			serviceTraffic{AffinityTimeout: 3 * time.Hour}},
		{"None", datastore.Service{Name: "s", SessionAffinity: "None"}, serviceTraffic{}},
		{"source ranges", datastore.Service{Name: "s", Type: "LoadBalancer", LoadBalancerSourceRanges: ranges, LoadBalancerIPs: lbIPs},
			serviceTraffic{SourceRanges: ranges, LoadBalancerIPs: lbIPs}},
		{"no source ranges", datastore.Service{Name: "s", Type: "LoadBalancer", LoadBalancerIPs: lbIPs}, serviceTraffic{}},
		{"source ranges of no load balancer", datastore.Service{Name: "s", Type: "NodePort", LoadBalancerSourceRanges: ranges}, serviceTraffic{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, serviceTrafficOf(tc.svc))
		})
	}
}

// The proxy's services carry internalTrafficPolicy Local, ClientIP
// affinity and the load balancer's source ranges, on every port of the
// datastore service.
func TestProxyServicesTraffic(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	c := datastore.Cluster{Services: []datastore.Service{{Namespace: "ns", Name: "s", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.9")},
		Type: "LoadBalancer", LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("203.0.113.1")}, LoadBalancerSourceRanges: ranges,
		InternalTrafficPolicy: "Local", SessionAffinity: "ClientIP", SessionAffinityTimeoutSeconds: 60,
		Ports: []datastore.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 81, Protocol: "UDP"}}}}}
	got := proxyServices(c, "node1", "")
	require.Len(t, got, 2)
	for name, s := range got {
		assert.True(t, s.InternalTrafficLocal, name)
		assert.Equal(t, time.Minute, s.AffinityTimeout, name)
		assert.Equal(t, ranges, s.SourceRanges, name)
		assert.Equal(t, []netip.Addr{netip.MustParseAddr("203.0.113.1")}, s.LoadBalancerIPs, name)
		require.NoError(t, s.Validate(), name)
	}
}
