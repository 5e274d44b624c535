package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

func TestServiceValidate(t *testing.T) {
	good := cluster.Service{
		Name: "default/web:80", Port: 80, NodePort: 30080,
		ClusterIPs:  []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00:96::10")},
		ExternalIPs: []netip.Addr{netip.MustParseAddr("198.51.100.1")},
		Backends: []cluster.Backend{
			{Addr: netip.MustParseAddrPort("10.244.1.5:8080"), Local: true},
			{Addr: netip.MustParseAddrPort("[fd00:10:244:1::5]:8080")},
		},
	}
	require.NoError(t, good.Validate())
	require.NoError(t, cluster.Service{Name: "dns", Protocol: cluster.UDP, Port: 53}.Validate())
	require.NoError(t, cluster.Service{Name: "sticky", Port: 80, InternalTrafficLocal: true, AffinityTimeout: cluster.MaxAffinityTimeout,
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("203.0.113.7")}, SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}.Validate())

	with := func(f func(*cluster.Service)) cluster.Service {
		s := good
		f(&s)
		return s
	}
	for _, tc := range []struct {
		s    cluster.Service
		want string
	}{
		{with(func(s *cluster.Service) { s.Name = "" }), "cluster: invalid service: empty name"},
		{with(func(s *cluster.Service) { s.Protocol = 132 }), `cluster: invalid service "default/web:80": protocol 132 is neither TCP nor UDP`},
		{with(func(s *cluster.Service) { s.Port = 0 }), `cluster: invalid service "default/web:80": port 0`},
		{with(func(s *cluster.Service) { s.ClusterIPs = []netip.Addr{{}} }),
			`cluster: invalid service "default/web:80": frontend address invalid IP: not a unicast address without zone`},
		{with(func(s *cluster.Service) { s.ExternalIPs = []netip.Addr{netip.MustParseAddr("fe80::1%eth0")} }),
			`cluster: invalid service "default/web:80": frontend address fe80::1%eth0: not a unicast address without zone`},
		{with(func(s *cluster.Service) { s.ClusterIPs = []netip.Addr{netip.MustParseAddr("255.255.255.255")} }),
			`cluster: invalid service "default/web:80": frontend address 255.255.255.255: not a unicast address without zone`},
		{with(func(s *cluster.Service) { s.ClusterIPs = []netip.Addr{netip.MustParseAddr("::ffff:10.96.0.1")} }),
			`cluster: invalid service "default/web:80": frontend address ::ffff:10.96.0.1: not a unicast address without zone`},
		{with(func(s *cluster.Service) {
			s.Backends = []cluster.Backend{{Addr: netip.MustParseAddrPort("10.244.1.5:0")}}
		}),
			`cluster: invalid service "default/web:80": backend 10.244.1.5:0: no address or port 0`},
		{with(func(s *cluster.Service) {
			s.Backends = []cluster.Backend{{Addr: netip.MustParseAddrPort("0.0.0.0:80")}}
		}),
			`cluster: invalid service "default/web:80": backend 0.0.0.0:80: not a unicast address without zone`},
		{with(func(s *cluster.Service) {
			s.Backends = []cluster.Backend{{Addr: netip.MustParseAddrPort("10.244.1.5:80"), LocalOnly: true}}
		}),
			`cluster: invalid service "default/web:80": backend 10.244.1.5:80: local only but not local`},
		{with(func(s *cluster.Service) { s.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24")} }),
			`cluster: invalid service "default/web:80": source range 192.0.2.1/24: not a network without host bits`},
		{with(func(s *cluster.Service) { s.LoadBalancerIPs = []netip.Addr{{}} }),
			`cluster: invalid service "default/web:80": frontend address invalid IP: not a unicast address without zone`},
		{with(func(s *cluster.Service) { s.AffinityTimeout = -time.Second }),
			`cluster: invalid service "default/web:80": affinity timeout -1s is not between 0 and 24h0m0s`},
		{with(func(s *cluster.Service) { s.AffinityTimeout = 25 * time.Hour }),
			`cluster: invalid service "default/web:80": affinity timeout 25h0m0s is not between 0 and 24h0m0s`},
		{with(func(s *cluster.Service) { s.AffinityTimeout = 1500 * time.Millisecond }),
			`cluster: invalid service "default/web:80": affinity timeout 1.5s is not whole seconds`},
	} {
		err := tc.s.Validate()
		require.ErrorIs(t, err, cluster.ErrInvalid)
		require.EqualError(t, err, tc.want)
	}

	require.NoError(t, cluster.ServiceRemove{Name: "x"}.Validate())
	err := cluster.ServiceRemove{}.Validate()
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.EqualError(t, err, "cluster: invalid service remove: empty name")
}

func TestNodeAddrsValidate(t *testing.T) {
	require.NoError(t, cluster.NodeAddrs{}.Validate())
	require.NoError(t, cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}}.Validate())
	err := cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("239.0.0.1")}}.Validate()
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.EqualError(t, err, "cluster: invalid node address 239.0.0.1: not a unicast address without zone")
}

func TestProtocolText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]cluster.Protocol{"TCP": cluster.TCP, "UDP": cluster.UDP})
	b, err := cluster.Protocol(0).MarshalText()
	require.NoError(t, err)
	require.Equal(t, "TCP", string(b), "the zero Protocol is TCP")
	require.Equal(t, "protocol(132)", cluster.Protocol(132).String())
	var s cluster.Service
	require.NoError(t, json.Unmarshal([]byte(`{"Name":"dns","Protocol":"UDP","Port":53}`), &s))
	require.Equal(t, cluster.UDP, s.Protocol)
}

// Validate checks a Service before it is sent; the service proxy
// (package bpf/proxy) refuses the same services, and changes nothing for
// them.
func ExampleService_Validate() {
	web := cluster.Service{
		Name:       "default/web:http",
		Port:       80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Backends:   []cluster.Backend{{Addr: netip.MustParseAddrPort("10.244.1.7:8080")}},
	}
	fmt.Println(web.Validate())

	noPort := web
	noPort.Port = 0
	fmt.Println(noPort.Validate())

	sctp := web
	sctp.Protocol = 132
	fmt.Println(sctp.Validate())

	linkLocal := web
	linkLocal.ExternalIPs = []netip.Addr{netip.MustParseAddr("fe80::1%eth0")}
	fmt.Println(linkLocal.Validate())

	noTargetPort := web
	noTargetPort.Backends = []cluster.Backend{{Addr: netip.AddrPortFrom(netip.MustParseAddr("10.244.1.7"), 0)}}
	fmt.Println(noTargetPort.Validate())
	// Output:
	// <nil>
	// cluster: invalid service "default/web:http": port 0
	// cluster: invalid service "default/web:http": protocol 132 is neither TCP nor UDP
	// cluster: invalid service "default/web:http": frontend address fe80::1%eth0: not a unicast address without zone
	// cluster: invalid service "default/web:http": backend 10.244.1.7:0: no address or port 0
}
