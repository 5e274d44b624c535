package nodeplane_test

import (
	"context"
	"net/netip"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/idalloc"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nfmigrate"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/wireguard"
)

// The README's snippets are the bodies of the Examples in this file (and of
// Example_assembleAgent): internal/tools/readmecheck fails when one drifts
// from its Example, and go test compiles them.

// Declare an owned iptables chain and a jump to it from a kernel hook, and
// write the difference.
func Example_declareChain() {
	ctx := context.Background()
	ns, err := kernel.Open("/run/netns/node1") // or kernel.OpenCurrent(); in unit tests kernelfake.New(kernelfake.Options{})
	check(err)
	defer ns.Close()
	tbl, err := iptables.New(iptables.Options{
		Table:       "filter",
		Family:      ipfamily.IPv4,
		Backend:     iptables.BackendNFT, // or iptables.DetectBackend(ctx, ns)
		ChainPrefix: "np-",               // we own np-* chains and rules with our hash comment, nothing else
		Kernel:      ns,                  // binaries run inside that namespace
	})
	check(err)
	// The full content of an owned chain; a bad rule is an error and nothing changes.
	check(tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{
		Matches: []netfilter.Match{
			netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8")),
			netfilter.Protocol(netfilter.ProtoTCP),
			netfilter.DestPorts(netfilter.Port(443)),
		},
		Action: netfilter.Accept(),
	}}}))
	// Our jump at the top of the kernel's FORWARD chain, under our owner name: foreign rules there,
	// and other owners' jumps into the same hook, are never touched.
	check(tbl.InsertRules("firewall", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}}))
	// One read of the table, the difference, one iptables-restore --noflush (none when nothing differs).
	// A rule the kernel refuses is left out alone: err wraps dataplane.ErrPartial, the rest is written.
	res, err := tbl.Apply(ctx) // res.RetryAfter: when to come back (a retry, a post-write recheck)
	_, _ = res, err
}

// Build the native nftables writer where the iptables one would go, and
// remove what the iptables writer left when a node moves.
func Example_switchBackend() {
	ctx := context.Background()
	ns, err := kernel.OpenCurrent()
	check(err)
	defer ns.Close()
	nat, err := nftables.New(nftables.Options{Name: "np-nat", Family: ipfamily.IPv4, Role: nftables.NAT,
		ChainPrefix: "np-", Kernel: ns}) // one table of ours; kube-proxy's and iptables-nft's are never touched
	check(err)
	// Sets that its rules match live in the same table: hand these to the managers that take an netfilter.Sets.
	sets, err := nftables.NewIPSets(nat, nftables.IPSetsOptions{})
	check(err)
	_ = sets
	// Once, when the node moves to nftables: remove our chains and hash-commented rules from both
	// iptables backends (moving back, keep an iptables backend: our nftables tables go).
	check(nfmigrate.RemoveLeftovers(ctx, ns, nfmigrate.NFTables, nfmigrate.Owned{ChainPrefix: "np-",
		NFTablesTables: []string{"np-nat"}}))
}

// Encrypt the traffic to the other nodes with WireGuard.
func Example_encryption() {
	ctx := context.Background()
	ns, err := kernel.OpenCurrent()
	check(err)
	loop, err := dataplane.New(dataplane.Options{})
	check(err)
	tables, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	check(err)
	publish := func(k wireguard.PublicKey) {} // publish the key where the other nodes read it
	hostMTU, node2IP, key2 := 1500, netip.MustParseAddr("192.0.2.2"), cluster.WireGuardKey{}

	layout, err := markbits.NewLayout(markbits.LayoutOptions{WireGuard: true}) // once at start
	check(err)
	table, err := tables.Grab()
	check(err)
	wg, err := wireguard.New(wireguard.Options{Family: ipfamily.IPv4, Kernel: ns, NodeName: "node1",
		FirewallMark: layout.WireGuard, Table: table, HostMTU: hostMTU, KeyFile: "/var/lib/agent/wg.key",
		OnPublicKey: publish})
	check(err)
	go func() { check(wg.Run(ctx)) }() // the userspace device, when the kernel has no module, lives as long as ctx
	check(loop.AddManager(wg))
	check(loop.AddDriver(wg))
	check(loop.Send(ctx, cluster.Node{Name: "node2", UnderlayV4: node2IP, WireGuardKeyV4: key2})) // the overlay's messages
	check(loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node2"}))
}

// Load-balance services with the BPF proxy.
func Example_bpfProxy() {
	ctx := context.Background()
	ns, err := kernel.OpenCurrent()
	check(err)
	loop, err := dataplane.New(dataplane.Options{})
	check(err)
	layout, err := markbits.NewLayout(markbits.LayoutOptions{Extra: []string{"service-masq"}})
	check(err)
	nodeIP, clusterIP := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("10.96.0.10")

	p, err := proxy.New(proxy.Options{Kernel: ns, PinDir: "/sys/fs/bpf/nodeplane", // a bpffs
		HostInterfaces: []string{"eth0"}, PodInterfacePrefixes: []string{"cali"},
		MasqueradeMark: layout.Extra["service-masq"], MasqueradeMask: layout.Extra["service-masq"]})
	check(err)
	check(loop.AddManager(p))
	check(loop.AddDriver(p))
	// the loop hands p its link updates (monitor wired to loop.OnLink); the masquerade manager: Marks: {p's mark}
	check(loop.Send(ctx, cluster.NodeAddrs{Addrs: []netip.Addr{nodeIP}}))
	check(loop.Send(ctx, cluster.Service{Name: "default/web:http", Port: 80,
		ClusterIPs: []netip.Addr{clusterIP}, NodePort: 30080,
		Backends: []cluster.Backend{{Addr: netip.MustParseAddrPort("10.244.1.5:8080"), Local: true}}}))
}
