package cluster_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func TestEndpointValidate(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:05")
	good := cluster.Endpoint{
		ID: "default/web-0", Iface: "cali1234",
		Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32"), netip.MustParsePrefix("fd00:10:244:1::5/128")},
		MAC:   mac,
		FloatingIPs: []cluster.NAT{
			{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("10.244.1.5")},
			{Floating: netip.MustParseAddr("2001:db8::10"), Internal: netip.MustParseAddr("fd00:10:244:1::5")},
		},
	}
	require.NoError(t, good.Validate())
	require.NoError(t, cluster.Endpoint{ID: "bare", Iface: "veth0"}.Validate(), "addresses, MAC and floating IPs are optional")

	with := func(f func(*cluster.Endpoint)) cluster.Endpoint {
		e := good
		f(&e)
		return e
	}
	for _, tc := range []struct {
		e    cluster.Endpoint
		want string
		also error
	}{
		{with(func(e *cluster.Endpoint) { e.ID = "" }), "cluster: invalid endpoint: empty ID", nil},
		{with(func(e *cluster.Endpoint) { e.Iface = "" }), `cluster: invalid endpoint "default/web-0": `, nil},
		{with(func(e *cluster.Endpoint) { e.Iface = strings.Repeat("x", 16) }), `cluster: invalid endpoint "default/web-0": `, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{{}} }), `cluster: invalid endpoint "default/web-0": invalid address invalid Prefix`, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")} }),
			`cluster: invalid endpoint "default/web-0": 10.244.1.5/24 has host bits set (the network is 10.244.1.0/24)`, ipfamily.ErrHostBits},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{netip.MustParsePrefix("::ffff:10.244.1.7/128")} }),
			`cluster: invalid endpoint "default/web-0": address ::ffff:10.244.1.7/128: an IPv4 address mapped into IPv6`, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{netip.MustParsePrefix("fe80::dead/128")} }),
			`cluster: invalid endpoint "default/web-0": address fe80::dead/128: fe80::dead is not a unicast host address`, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")} }),
			`cluster: invalid endpoint "default/web-0": address 127.0.0.2/32: 127.0.0.2 is not a unicast host address`, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = []netip.Prefix{netip.MustParsePrefix("ff02::1/128")} }),
			`cluster: invalid endpoint "default/web-0": address ff02::1/128: ff02::1 is not a unicast host address`, nil},
		{with(func(e *cluster.Endpoint) { e.MAC = net.HardwareAddr{1, 0, 0, 0, 0, 1} }),
			`cluster: invalid endpoint "default/web-0": MAC 01:00:00:00:00:01 is not a 6-byte unicast address`, nil},
		{with(func(e *cluster.Endpoint) { e.MAC = net.HardwareAddr{2, 0, 0, 0, 0} }),
			`cluster: invalid endpoint "default/web-0": MAC 02:00:00:00:00 is not a 6-byte unicast address`, nil},
		{with(func(e *cluster.Endpoint) { e.MAC = make(net.HardwareAddr, 6) }),
			`cluster: invalid endpoint "default/web-0": MAC 00:00:00:00:00:00 is not a 6-byte unicast address`, nil},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10")}}
		}), `cluster: invalid endpoint "default/web-0": invalid address in floating IP 198.51.100.10 -> invalid IP`, nil},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("fd00::5")}}
		}), `cluster: invalid endpoint "default/web-0": floating IP 198.51.100.10 and fd00::5 are of different families`, ipfamily.ErrWrongFamily},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("10.244.1.5"), Internal: netip.MustParseAddr("10.244.1.5")}}
		}), `cluster: invalid endpoint "default/web-0": floating IP 10.244.1.5 is the internal address`, nil},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("255.255.255.255"), Internal: netip.MustParseAddr("10.244.1.5")}}
		}), `cluster: invalid endpoint "default/web-0": floating IP 255.255.255.255 -> 10.244.1.5: not a unicast address`, nil},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("224.0.0.1"), Internal: netip.MustParseAddr("10.244.1.5")}}
		}), `cluster: invalid endpoint "default/web-0": floating IP 224.0.0.1 -> 10.244.1.5: not a unicast address`, nil},
		{with(func(e *cluster.Endpoint) {
			e.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("10.244.1.6")}}
		}), `cluster: invalid endpoint "default/web-0": floating IP 198.51.100.10 -> 10.244.1.6: 10.244.1.6 is none of the endpoint's addresses`, nil},
		{with(func(e *cluster.Endpoint) { e.Addrs = e.Addrs[1:] }),
			`cluster: invalid endpoint "default/web-0": floating IP 198.51.100.10 -> 10.244.1.5: 10.244.1.5 is none of the endpoint's addresses`, nil},
	} {
		err := tc.e.Validate()
		require.ErrorIs(t, err, cluster.ErrInvalid, tc.want)
		require.True(t, strings.HasPrefix(err.Error(), tc.want), "%q does not start with %q", err, tc.want)
		if tc.also != nil {
			require.ErrorIs(t, err, tc.also)
		}
	}

	require.NoError(t, cluster.EndpointRemove{ID: "x"}.Validate())
	err := cluster.EndpointRemove{}.Validate()
	require.ErrorIs(t, err, cluster.ErrInvalid)
	require.EqualError(t, err, "cluster: invalid endpoint remove: empty ID")
}

// Validate checks a message before it is sent; the endpoint and floating IP
// managers refuse the same endpoints, and change nothing for them.
func ExampleEndpoint_Validate() {
	web := cluster.Endpoint{ID: "default/web-0", Iface: "cali1234",
		Addrs:       []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")},
		FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("10.244.1.5")}}}
	fmt.Println(web.Validate())

	wide := web
	wide.Addrs = []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")}
	fmt.Println(wide.Validate())

	mixed := web
	mixed.FloatingIPs = []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("fd00::5")}}
	fmt.Println(mixed.Validate())
	// Output:
	// <nil>
	// cluster: invalid endpoint "default/web-0": 10.244.1.5/24 has host bits set (the network is 10.244.1.0/24)
	// cluster: invalid endpoint "default/web-0": floating IP 198.51.100.10 and fd00::5 are of different families
}
