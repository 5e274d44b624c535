package overlay_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
)

// exampleHost returns a fake namespace with eth0 up, holding 192.0.2.1/24.
func exampleHost() *kernelfake.Namespace {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	admin := ns.Admin()
	eth0, _ := admin.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "uplink"}})
	peer, _ := admin.LinkByName(ctx, "uplink")
	_ = admin.SetLinkUp(ctx, peer.Index, true)
	_ = admin.SetLinkUp(ctx, eth0.Index, true)
	_ = admin.AddAddr(ctx, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("192.0.2.1/24")})
	return ns
}

// sendNodes gives m three nodes with a block each: node-a (this one) and
// node-b on 192.0.2.0/24, node-c elsewhere.
func sendNodes(m *overlay.Manager) {
	for i, n := range []struct{ name, underlay string }{{"node-a", "192.0.2.1"}, {"node-b", "192.0.2.2"}, {"node-c", "198.51.100.3"}} {
		m.OnUpdate(cluster.Node{Name: n.name, UnderlayV4: netip.MustParseAddr(n.underlay),
			TunnelV4: netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), VXLANMACV4: cluster.MAC(net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)})})
		m.OnUpdate(cluster.Block{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24), Node: n.name})
	}
}

// apply applies m's stack once, as a dataplane.Loop pass does, and prints
// the routes of the table.
func apply(ctx context.Context, ns *kernelfake.Namespace, m *overlay.Manager, tbl *routetable.Table) {
	if err := m.CompleteDeferredWork(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if d := m.Driver(); d != nil {
		if _, err := d.Apply(ctx); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := tbl.Apply(ctx); err != nil {
		fmt.Println(err)
		return
	}
	names := map[int]string{}
	links, _ := ns.Links(ctx)
	for _, l := range links {
		names[l.Index] = l.Name
	}
	for _, r := range ns.Routes(kernel.IPv4, kernel.TableMain) {
		switch {
		case r.Protocol != routetable.DefaultProtocol:
		case r.Type == kernel.RTNBlackhole:
			fmt.Println("blackhole", r.Dst)
		case r.MTU > 0:
			fmt.Println(r.Dst, "via", r.Gateway, "dev", names[r.OIF], "mtu", r.MTU)
		default:
			fmt.Println(r.Dst, "via", r.Gateway, "dev", names[r.OIF])
		}
	}
}

// A VXLAN overlay across subnets, on a fake namespace: node-b shares this
// node's subnet and is routed directly; node-c is reached through the
// VXLAN device, via its tunnel address.
func Example() {
	ctx := context.Background()
	ns := exampleHost()
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	m, err := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
		Encap: overlay.VXLAN{VNI: 4096, Port: 4789}, CrossSubnet: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	sendNodes(m)
	apply(ctx, ns, m, tbl)
	// Output:
	// blackhole 10.244.1.0/24
	// 10.244.2.0/24 via 192.0.2.2 dev eth0
	// 10.244.3.0/24 via 10.244.3.0 dev np-vxlan mtu 1450
}

// Without encapsulation (None) a node on this host's subnet is routed
// directly and one elsewhere not at all; there is no device and no Driver.
func ExampleNone() {
	ctx := context.Background()
	ns := exampleHost()
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	m, _ := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl, Encap: overlay.None{}})
	sendNodes(m)
	apply(ctx, ns, m, tbl)
	fmt.Printf("driver %v, device %q\n", m.Driver(), m.Device())
	// Output:
	// blackhole 10.244.1.0/24
	// 10.244.2.0/24 via 192.0.2.2 dev eth0
	// driver <nil>, device ""
}

// New validates its options and does no I/O: IPIP is IPv4 only.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv6, Table: kernel.TableMain})
	_, err := overlay.New(overlay.Options{Family: ipfamily.IPv6, NodeName: "node-a", Kernel: ns, Routes: tbl, Encap: overlay.IPIP{}})
	fmt.Println(err)
	// Output:
	// overlay: invalid options: IPIP for an IPv6 manager (IPIP is IPv4 only)
}

// Each encapsulation has its own route classes and set name, so that two
// overlays can share a route table and a set backend.
func ExampleDefaultClasses() {
	for _, e := range []overlay.Encap{overlay.VXLAN{}, overlay.IPIP{}, overlay.None{}} {
		fmt.Printf("%s %+v %s\n", e, overlay.DefaultClasses(e), overlay.DefaultSetName(e))
	}
	// Output:
	// vxlan {Tunnel:40 Direct:41 Blackhole:190} vxlan-nodes
	// ipip {Tunnel:50 Direct:51 Blackhole:191} ipip-nodes
	// none {Tunnel:40 Direct:41 Blackhole:190} overlay-nodes
}

// Stats count the blocks by how they are routed.
func ExampleManager_Stats() {
	ctx := context.Background()
	ns := exampleHost()
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	m, _ := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
		Encap: overlay.VXLAN{}, CrossSubnet: true})
	sendNodes(m)
	m.OnUpdate(cluster.Block{CIDR: netip.MustParsePrefix("10.244.9.1/24"), Node: "node-a"}) // host bits: rejected
	_ = m.CompleteDeferredWork(ctx)
	s := m.Stats()
	fmt.Println(s.Nodes, s.Blocks, s.TunnelRoutes, s.DirectRoutes, s.Blackholes, s.Rejected)
	// Output:
	// 3 3 1 1 1 1
}
