package cluster_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
)

func validNode() cluster.Node {
	return cluster.Node{
		Name:       "n1",
		UnderlayV4: netip.MustParseAddr("198.18.0.1"), UnderlayV6: netip.MustParseAddr("fd00:198:18::1"),
		TunnelV4: netip.MustParseAddr("10.244.1.0"), TunnelV6: netip.MustParseAddr("fd00:10:244:1::"),
		VXLANMACV4: cluster.MAC{0x02, 0, 0, 0, 0, 1}, VXLANMACV6: cluster.MAC{0x02, 0, 0, 0, 0, 2},
		WireGuardKeyV4: cluster.WireGuardKey{1, 2, 3}, WireGuardKeyV6: cluster.WireGuardKey{4, 5, 6},
	}
}

func TestNodeValidate(t *testing.T) {
	n := validNode()
	require.NoError(t, n.Validate())
	require.NoError(t, (&cluster.Node{Name: "bare"}).Validate())

	for name, c := range map[string]struct {
		mutate func(*cluster.Node)
		text   string
	}{
		"no name":         {func(n *cluster.Node) { n.Name = "" }, "cluster: invalid node: no name"},
		"v6 in v4":        {func(n *cluster.Node) { n.UnderlayV4 = netip.MustParseAddr("fd00::1") }, `cluster: invalid node "n1": IPv4 underlay: fd00::1 is not an IPv4 address`},
		"loopback tunnel": {func(n *cluster.Node) { n.TunnelV4 = netip.MustParseAddr("127.0.0.1") }, `cluster: invalid node "n1": IPv4 tunnel address: 127.0.0.1 is not a unicast host address`},
		"link-local v6":   {func(n *cluster.Node) { n.UnderlayV6 = netip.MustParseAddr("fe80::1") }, `cluster: invalid node "n1": IPv6 underlay: fe80::1 is not a unicast host address`},
		"broadcast":       {func(n *cluster.Node) { n.UnderlayV4 = netip.MustParseAddr("255.255.255.255") }, `cluster: invalid node "n1": IPv4 underlay: 255.255.255.255 is the broadcast address`},
		"multicast MAC":   {func(n *cluster.Node) { n.VXLANMACV6 = cluster.MAC{0x01, 0, 0x5e, 0, 0, 1} }, `cluster: invalid node "n1": IPv6 VXLAN MAC 01:00:5e:00:00:01 is a multicast address`},
	} {
		t.Run(name, func(t *testing.T) {
			n := validNode()
			c.mutate(&n)
			err := n.Validate()
			require.ErrorIs(t, err, cluster.ErrInvalid)
			require.EqualError(t, err, c.text)
		})
	}
	var nilNode *cluster.Node
	require.ErrorIs(t, nilNode.Validate(), cluster.ErrInvalid)
	require.ErrorIs(t, (&cluster.NodeRemove{}).Validate(), cluster.ErrInvalid)
	require.NoError(t, (&cluster.NodeRemove{Name: "n1"}).Validate())
}

func TestNodePerFamily(t *testing.T) {
	n := validNode()
	require.Equal(t, n.UnderlayV4, n.Underlay(ipfamily.IPv4))
	require.Equal(t, n.UnderlayV6, n.Underlay(ipfamily.IPv6))
	require.Equal(t, n.TunnelV4, n.Tunnel(ipfamily.IPv4))
	require.Equal(t, n.TunnelV6, n.Tunnel(ipfamily.IPv6))
	require.Equal(t, n.VXLANMACV4, n.VXLANMAC(ipfamily.IPv4))
	require.Equal(t, n.VXLANMACV6, n.VXLANMAC(ipfamily.IPv6))
	require.Equal(t, n.WireGuardKeyV4, n.WireGuardKey(ipfamily.IPv4))
	require.Equal(t, n.WireGuardKeyV6, n.WireGuardKey(ipfamily.IPv6))
	require.False(t, n.Underlay(ipfamily.Family(9)).IsValid())
	require.True(t, n.VXLANMAC(ipfamily.Family(9)).IsZero())
}

func TestNodeJSONRoundTrip(t *testing.T) {
	n := validNode()
	b, err := json.Marshal(n)
	require.NoError(t, err)
	require.Contains(t, string(b), `"vxlanMACV4":"02:00:00:00:00:01"`)
	require.Contains(t, string(b), `"wireguardKeyV4":"`+n.WireGuardKeyV4.String()+`"`)
	var back cluster.Node
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, n, back)

	b, err = json.Marshal(cluster.Node{Name: "bare"})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"bare"}`, string(b))

	require.ErrorIs(t, json.Unmarshal([]byte(`{"name":"x","vxlanMACV4":"02:00:00:00:00"}`), &back), cluster.ErrInvalid)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"name":"x","wireguardKeyV6":"AAAA"}`), &back), cluster.ErrInvalid)
}

func TestMACText(t *testing.T) {
	m, err := cluster.ParseMAC("02:aa:bb:cc:dd:ee")
	require.NoError(t, err)
	require.Equal(t, cluster.MAC{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}, m)
	require.Equal(t, "02:aa:bb:cc:dd:ee", m.String())
	require.Equal(t, "02:aa:bb:cc:dd:ee", m.HardwareAddr().String())
	require.Nil(t, cluster.MAC{}.HardwareAddr())
	require.Empty(t, cluster.MAC{}.String())
	for _, bad := range []string{"", "02:aa", "00:00:5e:00:53:01:02:03", "zz:aa:bb:cc:dd:ee"} {
		_, err := cluster.ParseMAC(bad)
		require.ErrorIs(t, err, cluster.ErrInvalid, bad)
	}
	var back cluster.MAC
	require.NoError(t, back.UnmarshalText(nil))
	require.True(t, back.IsZero())
}

func TestWireGuardKeyText(t *testing.T) {
	k := cluster.WireGuardKey{0xff, 1}
	back, err := cluster.ParseWireGuardKey(k.String())
	require.NoError(t, err)
	require.Equal(t, k, back)
	require.Len(t, k.String(), 44)
	require.Empty(t, cluster.WireGuardKey{}.String())
	_, err = cluster.ParseWireGuardKey("not base64!")
	require.True(t, errors.Is(err, cluster.ErrInvalid))
	require.NotContains(t, err.Error(), "not base64!")
}
