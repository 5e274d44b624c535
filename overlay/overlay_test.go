package overlay

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/routetable"
)

// sink records the declarations.
type sink struct{ log []string }

func (s *sink) RouteUpdate(c routetable.RouteClass, iface string, t routetable.Target) error {
	s.log = append(s.log, fmt.Sprintf("update %d %s %s %v %s %d", c, iface, t.CIDR, t.Type, t.Gateway, t.MTU))
	return nil
}

func (s *sink) RouteRemove(c routetable.RouteClass, iface string, k routetable.RouteKey) error {
	s.log = append(s.log, fmt.Sprintf("remove %d %s %s", c, iface, k.CIDR))
	return nil
}

var classes = Classes{Tunnel: 1, Direct: 2, Blackhole: 3}

func host() *hostView {
	links := []kernel.Link{{Index: 1, Name: "lo"}, {Index: 2, Name: "eth0", MTU: 1500}, {Index: 3, Name: "dev0"}, {Index: 4, Name: "eth1"}}
	addrs := []kernel.Addr{
		{LinkIndex: 1, Prefix: netip.MustParsePrefix("127.0.0.1/8")},
		{LinkIndex: 2, Prefix: netip.MustParsePrefix("192.0.2.1/24")},
		{LinkIndex: 4, Prefix: netip.MustParsePrefix("192.0.2.129/25")},
		{LinkIndex: 3, Prefix: netip.MustParsePrefix("10.0.0.0/8")}, // the device: skipped
		{LinkIndex: 2, Prefix: netip.MustParsePrefix("10.9.9.9/32")},
	}
	return newHost(ipfamily.IPv4, links, addrs, func(n string) bool { return n == "dev0" })
}

func TestHost(t *testing.T) {
	h := host()
	s, ok := h.SubnetOf(netip.MustParseAddr("192.0.2.200"))
	require.True(t, ok)
	require.Equal(t, "eth1", s.Iface, "longest prefix")
	s, ok = h.SubnetOf(netip.MustParseAddr("192.0.2.7"))
	require.True(t, ok)
	require.Equal(t, "eth0", s.Iface)
	_, ok = h.SubnetOf(netip.MustParseAddr("10.1.1.1"))
	require.False(t, ok, "the device's prefix is no subnet")
	_, ok = h.SubnetOf(netip.MustParseAddr("10.9.9.9"))
	require.False(t, ok, "a full-length prefix is no subnet")
	l, ok := h.Holder(netip.MustParseAddr("192.0.2.1"))
	require.True(t, ok)
	require.Equal(t, "eth0", l.Name)
	require.True(t, h.SameSubnets(host()))
	require.Equal(t, h.SubnetsOf("eth0"), ifaceSubnets(ipfamily.IPv4, []netip.Prefix{netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("10.9.9.9/32"), netip.MustParsePrefix("fe80::1/64")}))
}

func TestRoutesIncremental(t *testing.T) {
	s := &sink{}
	r := newRouteCalc(s, classes, modeCrossSubnet, "me", "dev0", false)
	r.SetHost(host())
	r.SetTunnel(true, 1450)
	near, far := nodeInfo{Underlay: netip.MustParseAddr("192.0.2.7"), Gateway: netip.MustParseAddr("10.1.0.1")}, nodeInfo{Underlay: netip.MustParseAddr("198.51.100.7"), Gateway: netip.MustParseAddr("10.1.0.1")}
	r.SetNode("n1", near)
	r.SetBlock(netip.MustParsePrefix("10.1.0.0/24"), "n1")
	r.SetBlock(netip.MustParsePrefix("10.2.0.0/24"), "me")
	r.SetBlock(netip.MustParsePrefix("10.3.0.0/24"), "unknown")
	require.NoError(t, r.Flush())
	require.ElementsMatch(t, []string{
		"update 2 eth0 10.1.0.0/24 unicast 192.0.2.7 0",
		"update 3 :none 10.2.0.0/24 blackhole invalid IP 0",
	}, s.log)
	require.Equal(t, 1, r.Count(kindNone))

	// Nothing dirty: nothing declared.
	s.log = nil
	require.NoError(t, r.Flush())
	require.Empty(t, s.log)

	// The node moves off the subnet: withdrawn from the direct pair,
	// declared on the tunnel's, under the same key.
	r.SetNode("n1", far)
	require.NoError(t, r.Flush())
	require.Equal(t, []string{"remove 2 eth0 10.1.0.0/24", "update 1 dev0 10.1.0.0/24 onlink 10.1.0.1 1450"}, s.log)
	require.Equal(t, kindTunnel, r.Kind(netip.MustParsePrefix("10.1.0.0/24")))

	// The tunnel goes (no local VTEP): the block has no route.
	s.log = nil
	r.SetTunnel(false, 0)
	require.NoError(t, r.Flush())
	require.Equal(t, []string{"remove 1 dev0 10.1.0.0/24"}, s.log)

	// modeDirect mode never uses the tunnel.
	d := newRouteCalc(&sink{}, classes, modeDirect, "me", "dev0", false)
	d.SetHost(host())
	d.SetTunnel(true, 1450)
	d.SetNode("n1", far)
	d.SetBlock(netip.MustParsePrefix("10.1.0.0/24"), "n1")
	require.NoError(t, d.Flush())
	require.Equal(t, kindNone, d.Kind(netip.MustParsePrefix("10.1.0.0/24")))
}

type fakeSets struct{ log []string }

func (s *fakeSets) AddOrReplaceSet(meta netfilter.SetMetadata, members []netfilter.Member) error {
	s.log = append(s.log, fmt.Sprintf("set %s %d", meta.Name, len(members)))
	return nil
}

func (s *fakeSets) AddMembers(name string, members []netfilter.Member) error {
	for _, m := range members {
		s.log = append(s.log, "add "+m.String())
	}
	return nil
}

func (s *fakeSets) RemoveMembers(name string, members []netfilter.Member) error {
	for _, m := range members {
		s.log = append(s.log, "del "+m.String())
	}
	return nil
}

func TestMembers(t *testing.T) {
	s := &fakeSets{}
	m := newMemberSet(s, "nodes", []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")})
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	m.Add(a)
	require.NoError(t, m.Flush())
	require.Equal(t, []string{"set nodes 2"}, s.log)
	s.log = nil
	m.Add(a) // a second node with the same address
	m.Add(b)
	m.Remove(a)
	require.NoError(t, m.Flush())
	require.Equal(t, []string{"add 192.0.2.2"}, s.log)
	s.log = nil
	m.Remove(a)
	m.Add(a)
	m.Remove(a)
	require.NoError(t, m.Flush())
	require.Equal(t, []string{"del 192.0.2.1"}, s.log)
	require.Equal(t, 2, m.Len())
	var none *memberSet
	none.Add(a)
	require.NoError(t, none.Flush())
}

// A block that holds a node's underlay address, or overlaps a connected
// subnet of the host that holds one, gets no route: routed into the tunnel
// (or to its node, or blackholed), it would take the tunnel's own packets
// with it. It is reported once, and routed once the conflict ends.
func TestRemoteBlockOnTheUnderlay(t *testing.T) {
	s := &sink{}
	r := newRouteCalc(s, classes, modeTunnel, "me", "dev0", false)
	r.SetHost(host())
	r.SetTunnel(true, 1450)
	gw := netip.MustParseAddr("10.1.0.1")
	r.SetNode("n1", nodeInfo{Underlay: netip.MustParseAddr("192.0.2.7"), Gateway: gw})
	r.SetNode("n2", nodeInfo{Underlay: netip.MustParseAddr("198.51.100.7"), Gateway: netip.MustParseAddr("10.2.0.1")})
	good := netip.MustParsePrefix("10.1.0.0/24")
	onSubnet := netip.MustParsePrefix("192.0.2.0/25")   // the subnet of eth0, which holds n1's address
	onAddr := netip.MustParsePrefix("192.0.2.200/32")   // no node's address, but in eth0's subnet
	onOther := netip.MustParsePrefix("198.51.100.0/24") // n2's address, on no subnet of the host
	apart := netip.MustParsePrefix("192.0.2.128/26")    // eth1's subnet holds no node's address, but eth0's overlaps it
	for _, b := range []netip.Prefix{good, onSubnet, onAddr, onOther, apart} {
		r.SetBlock(b, "n1")
	}
	require.NoError(t, r.Flush())
	require.Equal(t, []string{"update 1 dev0 10.1.0.0/24 onlink 10.1.0.1 1450"}, s.log)
	require.Equal(t, 4, r.UnderlayConflicts())
	var reported []string
	for _, c := range r.NewConflicts() {
		require.True(t, c.Underlay)
		reported = append(reported, c.Block.String()+" "+c.Subnet.String())
	}
	require.ElementsMatch(t, []string{"192.0.2.0/25 192.0.2.7/32", "192.0.2.200/32 192.0.2.0/24",
		"198.51.100.0/24 198.51.100.7/32", "192.0.2.128/26 192.0.2.0/24"}, reported)
	require.NoError(t, r.Flush())
	require.Empty(t, r.NewConflicts(), "reported once")

	// n2 moves: the block that held its old address is routed.
	s.log = nil
	r.SetNode("n2", nodeInfo{Underlay: netip.MustParseAddr("203.0.113.7"), Gateway: netip.MustParseAddr("10.2.0.1")})
	require.NoError(t, r.Flush())
	require.Equal(t, []string{"update 1 dev0 198.51.100.0/24 onlink 10.1.0.1 1450"}, s.log)
	require.Equal(t, 3, r.UnderlayConflicts())

	// A node that goes takes its address with it.
	s.log = nil
	r.RemoveBlock(onSubnet)
	r.RemoveBlock(onAddr)
	r.RemoveBlock(apart)
	r.SetBlock(netip.MustParsePrefix("203.0.113.0/24"), "n1")
	require.NoError(t, r.Flush())
	require.Equal(t, 1, r.UnderlayConflicts(), "203.0.113.0/24 holds n2's address")
	r.RemoveNode("n2")
	require.NoError(t, r.Flush())
	require.Zero(t, r.UnderlayConflicts())
	require.Contains(t, s.log, "update 1 dev0 203.0.113.0/24 onlink 10.1.0.1 1450")

	// Every address, this node's or another's: no blackhole for the
	// default route, no route into the tunnel.
	s.log = nil
	r.SetBlock(netip.MustParsePrefix("0.0.0.0/0"), "me")
	r.SetBlock(netip.MustParsePrefix("128.0.0.0/1"), "n1")
	require.NoError(t, r.Flush())
	require.Empty(t, s.log)
	require.Equal(t, 2, r.UnderlayConflicts())
}
