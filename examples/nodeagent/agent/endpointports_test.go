package agent

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// TestProxyServicesEndpointPorts: a backend with its own ports (one target
// port name that resolves to different container ports on different pods)
// takes each service port's traffic at its own port, and none of a service
// port it does not name; a backend without ports takes the target port.
func TestProxyServicesEndpointPorts(t *testing.T) {
	c := testCluster(2)
	c.Services = []datastore.Service{{Namespace: "demo", Name: "web",
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports:      []datastore.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}, {Name: "metrics", Port: 9090, TargetPort: 9100}},
		Endpoints: []datastore.Endpoint{
			{IP: netip.MustParseAddr("10.244.1.10"), Node: "node1"},
			{IP: netip.MustParseAddr("10.244.2.10"), Node: "node2",
				Ports: []datastore.EndpointPort{{Name: "http", Port: 8081}, {Name: "metrics", Port: 9101}}},
			{IP: netip.MustParseAddr("10.244.2.11"), Node: "node2", Ports: []datastore.EndpointPort{{Name: "http", Port: 8082}}},
		}}}
	require.NoError(t, c.Validate())
	got := proxyServices(c, "node1", "")
	require.Len(t, got, 2)
	for _, s := range got {
		require.NoError(t, s.Validate())
	}
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.1.10:8080"), Local: true},
		{Addr: netip.MustParseAddrPort("10.244.2.10:8081")},
		{Addr: netip.MustParseAddrPort("10.244.2.11:8082")},
	}, got["demo/web:http"].Backends)
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("10.244.1.10:9100"), Local: true},
		{Addr: netip.MustParseAddrPort("10.244.2.10:9101")},
	}, got["demo/web:metrics"].Backends, "10.244.2.11 names no metrics port")
}

// One address at two ports (Kubernetes: two host-network pods of one node,
// each in its own EndpointSlice) is two backends, as kube-proxy keeps
// each address and port; its readiness is each one's own.
func TestProxyServicesOneAddressTwoPorts(t *testing.T) {
	c := testCluster(2)
	node2 := netip.MustParseAddr("192.0.2.2")
	at := func(port uint16) []datastore.EndpointPort {
		return []datastore.EndpointPort{{Name: "http", Port: port}}
	}
	c.Services = []datastore.Service{{Namespace: "demo", Name: "ingress",
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Ports:      []datastore.ServicePort{{Name: "http", Port: 80, TargetPort: 8080}},
		Endpoints: []datastore.Endpoint{
			{IP: node2, Node: "node2", Ports: at(8443)},
			{IP: node2, Node: "node2", Ports: at(9443)},
			{IP: node2, Node: "node2", Ports: at(7443), NotReady: true},
		}}}
	require.NoError(t, c.Validate())
	got := proxyServices(c, "node1", "")["demo/ingress:http"]
	require.NoError(t, got.Validate())
	assert.Equal(t, []cluster.Backend{
		{Addr: netip.MustParseAddrPort("192.0.2.2:8443")},
		{Addr: netip.MustParseAddrPort("192.0.2.2:9443")},
	}, got.Backends)
}
