package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// A node and one of its blocks, as an agent builds them once and sends
// them to every manager (overlay, WireGuard …); each validates and takes
// the fields of its family.
func Example() {
	mac, _ := cluster.ParseMAC("02:00:0a:f4:02:00")
	n := cluster.Node{
		Name:       "n2",
		UnderlayV4: netip.MustParseAddr("198.18.0.2"),
		TunnelV4:   netip.MustParseAddr("10.244.2.0"),
		VXLANMACV4: mac,
	}
	b := cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "n2"}
	fmt.Println(n.Validate(), b.Validate())
	fmt.Println(n.Underlay(ipfamily.IPv4), n.Tunnel(ipfamily.IPv4), n.VXLANMAC(ipfamily.IPv4), n.Underlay(ipfamily.IPv6).IsValid())

	text, _ := json.Marshal(n)
	fmt.Println(string(text))

	bad := cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.1/24"), Node: "n2"}
	fmt.Println(bad.Validate())
	// Output:
	// <nil> <nil>
	// 198.18.0.2 10.244.2.0 02:00:0a:f4:02:00 false
	// {"name":"n2","underlayV4":"198.18.0.2","tunnelV4":"10.244.2.0","vxlanMACV4":"02:00:0a:f4:02:00"}
	// cluster: invalid block 10.244.2.1/24: host bits set (the network is 10.244.2.0/24)
}
