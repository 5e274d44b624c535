package vxlan_test

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net"
	"net/netip"
	"sort"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
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

// printRoutes prints the routes the example's Table wrote.
func printRoutes(ns *kernelfake.Namespace) {
	names := map[int]string{}
	links, _ := ns.Admin().Links(context.Background())
	for _, l := range links {
		names[l.Index] = l.Name
	}
	var out []string
	for _, r := range ns.Routes(kernel.IPv4, kernel.TableMain) {
		switch {
		case r.Protocol != routetable.DefaultProtocol:
		case r.Type == kernel.RTNBlackhole:
			out = append(out, "blackhole "+r.Dst.String())
		default:
			s := fmt.Sprintf("%s via %s dev %s", r.Dst, r.Gateway, names[r.OIF])
			if r.Flags&kernel.FlagOnlink != 0 {
				s += " onlink"
			}
			if r.MTU > 0 {
				s += fmt.Sprintf(" mtu %d", r.MTU)
			}
			out = append(out, s)
		}
	}
	sort.Strings(out)
	for _, s := range out {
		fmt.Println(s)
	}
}

// A VXLAN overlay (package overlay, with its vxlan.Driver) on a fake
// namespace: this node (node-a), a node on its subnet (node-b) and one
// elsewhere (node-c), across subnets. The overlay's Manager is applied as a dataplane.Loop applies it: CompleteDeferredWork,
// then its Driver (PhaseTunnelL2), then the route Table.
func Example() {
	ctx := context.Background()
	ns := exampleHost()
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: vxlan.IPv4, Table: kernel.TableMain})
	m, err := overlay.New(overlay.Options{Family: vxlan.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
		Encap: overlay.VXLAN{}, CrossSubnet: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, n := range []struct{ name, underlay string }{{"node-a", "192.0.2.1"}, {"node-b", "192.0.2.2"}, {"node-c", "198.51.100.3"}} {
		m.OnUpdate(cluster.Node{Name: n.name, UnderlayV4: netip.MustParseAddr(n.underlay),
			TunnelV4: netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), VXLANMACV4: cluster.MAC(net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)})})
		m.OnUpdate(cluster.Block{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24), Node: n.name})
	}
	if err := m.CompleteDeferredWork(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := m.Driver().Apply(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := tbl.Apply(ctx); err != nil {
		fmt.Println(err)
		return
	}
	printRoutes(ns)
	dev, _ := ns.Link(vxlan.DefaultDeviceV4)
	fdb, _ := ns.FDB(ctx, dev.Index)
	sort.Slice(fdb, func(i, j int) bool { return fdb[i].MAC.String() < fdb[j].MAC.String() })
	for _, e := range fdb {
		fmt.Println("fdb", e.MAC, "dst", e.Dst)
	}
	// Output:
	// 10.244.2.0/24 via 192.0.2.2 dev eth0
	// 10.244.3.0/24 via 10.244.3.0 dev np-vxlan onlink mtu 1450
	// blackhole 10.244.1.0/24
	// fdb 02:00:00:00:00:02 dst 192.0.2.2
	// fdb 02:00:00:00:00:03 dst 198.51.100.3
}

// The Driver on its own: a device and two remote VTEPs, written in one
// neighbour batch and one FDB batch.
func ExampleNewDriver() {
	ctx := context.Background()
	ns := exampleHost()
	d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: ns, Family: vxlan.IPv4})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = d.SetDevice(&vxlan.Device{Local: netip.MustParseAddr("192.0.2.1"), Address: netip.MustParseAddr("10.244.1.0")})
	for i := 2; i <= 3; i++ {
		_ = d.SetRemote(fmt.Sprintf("node-%d", i), vxlan.Remote{
			TunnelIP: netip.AddrFrom4([4]byte{10, 244, byte(i), 0}),
			MAC:      net.HardwareAddr{2, 0, 0, 0, 0, byte(i)},
			Underlay: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}),
		})
	}
	if _, err := d.Apply(ctx); err != nil {
		fmt.Println(err)
		return
	}
	dev, _ := ns.Link(vxlan.DefaultDeviceV4)
	fmt.Println(dev.Name, "vni", dev.VXLAN.VNI, "port", dev.VXLAN.Port, "mtu", dev.MTU, "up", dev.AdminUp)
	neighs, _ := ns.Neighbors(ctx, kernel.IPv4, dev.Index)
	sort.Slice(neighs, func(i, j int) bool { return neighs[i].IP.Less(neighs[j].IP) })
	for _, n := range neighs {
		fmt.Println("neigh", n.IP, "lladdr", n.MAC)
	}
	st := d.Stats()
	fmt.Println("desired:", st.Desired, "in kernel:", st.InKernel, "writes:", st.Writes)
	// Output:
	// np-vxlan vni 4096 port 4789 mtu 1450 up true
	// neigh 10.244.2.0 lladdr 02:00:00:00:00:02
	// neigh 10.244.3.0 lladdr 02:00:00:00:00:03
	// desired: 5 in kernel: 5 writes: 7
}
