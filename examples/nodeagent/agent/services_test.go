package agent

import (
	"net/netip"
	"testing"

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
