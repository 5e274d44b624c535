package ipip_test

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
)

// exampleHost returns a fake namespace with eth0 up, holding
// 198.18.0.1/24, where the ipip module is present or not.
func exampleHost(withIPIP bool) *kernelfake.Namespace {
	ctx := context.Background()
	o := kernelfake.Options{}
	if withIPIP {
		o.Kinds = append(kernelfake.DefaultKinds(), kernel.KindIPIP)
	}
	ns := kernelfake.New(o)
	admin := ns.Admin()
	eth0, _ := admin.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "uplink"}})
	peer, _ := admin.LinkByName(ctx, "uplink")
	_ = admin.SetLinkUp(ctx, peer.Index, true)
	_ = admin.SetLinkUp(ctx, eth0.Index, true)
	_ = admin.AddAddr(ctx, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("198.18.0.1/24")})
	return ns
}

// An IPIP overlay (package overlay, with its ipip.Driver) on a fake namespace that models the ipip module as
// present (kernelfake.Options.Kinds): tunl0 gets the tunnel address and the
// host MTU less 20, and remote blocks go via their node's underlay address
// through it.
func Example() {
	ctx := context.Background()
	ns := exampleHost(true)
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv4, Table: kernel.TableMain})
	m, err := overlay.New(overlay.Options{Family: routetable.IPv4, NodeName: "node1", Kernel: ns, Routes: tbl, Encap: overlay.IPIP{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	m.OnUpdate(cluster.Node{Name: "node1", UnderlayV4: netip.MustParseAddr("198.18.0.1"), TunnelV4: netip.MustParseAddr("10.244.1.250")})
	m.OnUpdate(cluster.Node{Name: "node2", UnderlayV4: netip.MustParseAddr("198.18.0.2")})
	m.OnUpdate(cluster.Block{CIDR: netip.MustParsePrefix("10.244.1.0/24"), Node: "node1"})
	m.OnUpdate(cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node2"})
	_ = m.CompleteDeferredWork(ctx)
	_, _ = m.Driver().Apply(ctx)
	_, _ = tbl.Apply(ctx)
	dev, _ := ns.Link("tunl0")
	fmt.Println(dev.Name, "mtu", dev.MTU, ns.LinkAddrs("tunl0"))
	for _, r := range ns.Routes(kernel.IPv4, kernel.TableMain) {
		switch {
		case r.Protocol != routetable.DefaultProtocol:
		case r.Type == kernel.RTNBlackhole:
			fmt.Println("blackhole", r.Dst)
		default:
			fmt.Println(r.Dst, "via", r.Gateway, "onlink:", r.Flags&kernel.FlagOnlink != 0, "mtu", r.MTU)
		}
	}
	// Output:
	// tunl0 mtu 1480 [10.244.1.250/32]
	// blackhole 10.244.1.0/24
	// 10.244.2.0/24 via 198.18.0.2 onlink: true mtu 1480
}

// The Driver on a kernel without the ipip module: the device fails alone,
// as a partial failure the loop retries on its backoff.
func ExampleNewDriver() {
	ns := exampleHost(false)
	d, _ := ipip.NewDriver(ipip.DriverOptions{Kernel: ns})
	_ = d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1")})
	res, err := d.Apply(context.Background())
	fmt.Println(err != nil, res.RetryAfter > 0)
	// Output:
	// true true
}
