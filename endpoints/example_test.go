package endpoints_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/sysctls"
)

// One family's Manager, its route table and the sysctls driver on a loop,
// for a pod whose veth the CNI plugin made. The namespace here is
// kernelfake's; an agent opens the real one with kernel.Open and wires an
// interface monitor to the loop, which hands its link updates to the
// Manager (see the package documentation).
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	veth, _ := ns.AddLink(context.Background(), kernel.Link{Name: "cali1", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "pod-eth0"}})
	peer, _ := ns.LinkByName(context.Background(), "pod-eth0")
	_ = ns.SetLinkUp(context.Background(), peer.Index, true)
	_ = ns.SetLinkUp(context.Background(), veth.Index, true)

	routes, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain,
		InterfacePatterns: []string{`^cali`}})
	// The node's sysctls driver (here with none of its own) keeps the
	// interfaces' sysctls too: the Manager hands them to it.
	sys, _ := sysctls.New(sysctls.Options{Kernel: ns, Settings: []sysctls.Setting{}})
	m, err := endpoints.New(endpoints.Options{Family: ipfamily.IPv4, Kernel: ns, Routes: routes, SysctlDriver: sys,
		StaticNeighbors: true, OnStatus: func(s endpoints.Status) { fmt.Println("status:", s) }})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(m.RouteDriver()) // not routes: the Manager learns what was written
	_ = loop.AddDriver(sys)             // writes the sysctls; the loop resyncs and retries it
	_ = loop.Send(ctx, cluster.Endpoint{ID: "default/web-0", Iface: "cali1",
		Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32"), netip.MustParsePrefix("fd00:10:244:1::5/128")},
		MAC:   net.HardwareAddr{0x02, 0, 0, 0, 0, 5}})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	for _, r := range ns.Routes(ipfamily.IPv4, kernel.TableMain) {
		if r.Protocol == routetable.DefaultProtocol {
			fmt.Println("route:", r.Dst, "dev index", r.OIF == veth.Index)
		}
	}
	neigh, _ := ns.Neighbors(context.Background(), ipfamily.IPv4, veth.Index)
	fmt.Println("neighbour:", neigh[0].IP, neigh[0].MAC)
	v, _ := ns.Sysctl(context.Background(), "net/ipv4/conf/cali1/proxy_arp")
	fmt.Println("proxy_arp:", v)
	// Output:
	// status: default/web-0 (cali1, IPv4): programmed
	// route: 10.244.1.5/32 dev index true
	// neighbour: 10.244.1.5 02:00:00:00:00:05
	// proxy_arp: 1
}

// DefaultSysctls lists what every workload interface is given.
func ExampleDefaultSysctls() {
	for _, f := range ipfamily.All {
		for _, s := range endpoints.DefaultSysctls(f) {
			dir := s.Dir
			if dir == "" {
				dir = "conf"
			}
			fmt.Printf("%v %s/<iface>/%s = %s\n", f, dir, s.Name, s.Value)
		}
	}
	// Output:
	// IPv4 conf/<iface>/forwarding = 1
	// IPv4 conf/<iface>/rp_filter = 1
	// IPv4 conf/<iface>/proxy_arp = 1
	// IPv4 neigh/<iface>/proxy_delay = 0
	// IPv6 conf/<iface>/forwarding = 1
	// IPv6 conf/<iface>/proxy_ndp = 1
	// IPv6 conf/<iface>/accept_ra = 0
}

// New needs the route table of its own family.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	routes, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv6, Table: kernel.TableMain})
	_, err := endpoints.New(endpoints.Options{Family: ipfamily.IPv4, Kernel: ns, Routes: routes})
	fmt.Println(err)
	// Output:
	// endpoints: invalid options: Routes is of family IPv6, not IPv4
}

// Statuses returns the last status of every endpoint; before the routes
// were applied an endpoint whose interface exists has none yet.
func ExampleManager_Statuses() {
	ns := kernelfake.New(kernelfake.Options{})
	routes, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv6, Table: kernel.TableMain})
	sys, _ := sysctls.New(sysctls.Options{Kernel: ns})
	m, _ := endpoints.New(endpoints.Options{Family: ipfamily.IPv6, Kernel: ns, Routes: routes, SysctlDriver: sys})
	m.OnUpdate(cluster.Endpoint{ID: "a", Iface: "cali9", Addrs: []netip.Prefix{netip.MustParsePrefix("fd00::9/128")}})
	_ = m.CompleteDeferredWork(context.Background())
	fmt.Println(m.Statuses())
	// Output:
	// [a (cali9, IPv6): interface-missing]
}
