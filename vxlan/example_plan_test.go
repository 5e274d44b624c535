package vxlan_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/vxlan"
)

// Plan says what the next Apply would write, and writes nothing: here the
// device (created, given its tunnel address, set up) and the FDB and
// neighbour entries of a remote VTEP. The Apply after it makes exactly
// these writes; then the Plan is empty.
func ExampleDriver_Plan() {
	ctx := context.Background()
	ns := exampleHost()
	d, _ := vxlan.NewDriver(vxlan.DriverOptions{Kernel: ns, Family: vxlan.IPv4})
	_ = d.SetDevice(&vxlan.Device{Local: netip.MustParseAddr("192.0.2.1"), Address: netip.MustParseAddr("10.244.1.0"), MTU: 1400})
	_ = d.SetRemote("node-2", vxlan.Remote{TunnelIP: netip.MustParseAddr("10.244.2.0"),
		MAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, Underlay: netip.MustParseAddr("192.0.2.2")})

	plan, _ := d.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = d.Apply(ctx)
	fmt.Println("writes of the Apply:", ns.Writes())
	plan, _ = d.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// vxlan-np-vxlan: 5 writes
	// + link np-vxlan vxlan vni 4096 port 4789 local 192.0.2.1 parent 3 mtu 1400
	// ~ link np-vxlan addr add 10.244.1.0/32
	// ~ link np-vxlan up (was down)
	// + fdb 02:00:00:00:00:02 dev np-vxlan dst 192.0.2.2 self permanent
	// + neighbour 10.244.2.0 dev np-vxlan lladdr 02:00:00:00:00:02 PERMANENT
	// writes while planning: 0
	// writes of the Apply: 5
	// vxlan-np-vxlan: no writes
}

// State says what the Driver holds in the kernel and how that differs from
// what it wants: here, after a resync, a neighbour entry someone pointed
// at another MAC and an FDB entry someone deleted.
func ExampleDriver_State() {
	ctx := context.Background()
	ns := exampleHost()
	d, _ := vxlan.NewDriver(vxlan.DriverOptions{Kernel: ns, Family: vxlan.IPv4})
	_ = d.SetDevice(&vxlan.Device{Local: netip.MustParseAddr("192.0.2.1")})
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	_ = d.SetRemote("node-2", vxlan.Remote{TunnelIP: netip.MustParseAddr("10.244.2.0"), MAC: mac, Underlay: netip.MustParseAddr("192.0.2.2")})
	_, _ = d.Apply(ctx)

	dev, _ := ns.Link(vxlan.DefaultDeviceV4)
	_ = ns.Admin().ApplyNeighbors(ctx, []kernel.NeighborOp{{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: dev.Index,
		IP: netip.MustParseAddr("10.244.2.0"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}, State: kernel.NUDPermanent}}})
	_ = ns.Admin().ApplyFDB(ctx, []kernel.FDBOp{{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: dev.Index, MAC: mac,
		Dst: netip.MustParseAddr("192.0.2.2")}}})
	d.QueueResync()
	st, _ := d.State(ctx)
	fmt.Println(st)
	// Output:
	// vxlan-np-vxlan: 2 owned, 2 drifted, 0 failing
	//   fdb 02:00:00:00:00:02: missing (want 02:00:00:00:00:02 dev np-vxlan dst 192.0.2.2 self permanent)
	//   neighbour 10.244.2.0: want 10.244.2.0 dev np-vxlan lladdr 02:00:00:00:00:02 PERMANENT, have 10.244.2.0 dev np-vxlan lladdr 02:00:00:00:00:09 PERMANENT
}
