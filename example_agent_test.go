package nodeplane_test

import (
	"context"
	"github.com/nodeplane/nodeplane/cluster"
	"log"
	"net/netip"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
)

// check stops the example at the first error.
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// Assemble a node agent: a VXLAN overlay to the other nodes on one loop, fed
// by an interface monitor and your control plane. The README shows this
// snippet; examples/nodeagent is the complete agent (pod routes, WireGuard,
// MTU monitor, health, metrics, datastores).
func Example_assembleAgent() {
	ctx := context.Background()
	ns, err := kernel.OpenCurrent() // or kernel.Open("/run/netns/node1")
	check(err)
	defer ns.Close()
	loop, err := dataplane.New(dataplane.Options{}) // defaults: batching, throttling, resync every 90 s
	check(err)
	routes, err := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	check(err)
	sets, err := ipsets.New(ipsets.Options{Kernel: ns, Family: ipfamily.IPv4, Prefix: "np4-"})
	check(err)
	vx, err := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node1", Kernel: ns, Routes: routes, Sets: sets,
		Encap: overlay.VXLAN{VNI: 4096, Port: 4789}})
	check(err)
	check(loop.AddManager(vx))
	for _, d := range []dataplane.Driver{vx.Driver(), routes, sets} { // the loop applies them in phase order
		check(loop.AddDriver(d))
	}
	// The loop hands the monitor's link and address updates to the managers and drivers that observe interfaces.
	mon, err := ifacemonitor.New(ifacemonitor.Options{Kernel: ns, OnAddrs: loop.OnAddrs, OnInSync: loop.InterfacesInSync,
		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
		WatchRoutes: true, OnRoute: func(u ifacemonitor.RouteUpdate) { routes.OnRouteUpdate(u.Route, u.Gone) }})
	check(err)
	go func() { check(mon.Run(ctx)) }()
	// Your control plane: every node's tunnel endpoint and pod CIDR (this node's too), then "in sync".
	check(loop.Send(ctx, cluster.Node{Name: "node2", UnderlayV4: netip.MustParseAddr("192.0.2.2"),
		TunnelV4: netip.MustParseAddr("10.244.2.0"), VXLANMACV4: cluster.MAC{0x02, 0x4e, 0, 0, 0, 2}}))
	check(loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node2"}))
	loop.DatastoreInSync()
	check(loop.Run(ctx)) // writes once both in-sync markers are in; only the difference, until ctx ends
}
