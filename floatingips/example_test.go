package floatingips_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// One family's Manager and its nat Table on a loop. The namespace here is
// kernelfake's; an agent opens the real one with kernel.Open.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4,
		Backend: iptables.BackendNFT, ChainPrefix: "npf-", Kernel: ns})
	m, err := floatingips.New(floatingips.Options{Family: ipfamily.IPv4, Table: nat,
		DNATChain: "npf-dnat", SNATChain: "npf-snat"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(nat)
	_ = loop.Send(ctx, cluster.Endpoint{ID: "default/web-0", Iface: "veth0",
		Addrs:       []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")},
		FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("10.244.1.5")}}})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	for _, chain := range []string{"PREROUTING", "OUTPUT", "POSTROUTING", "npf-dnat", "npf-snat"} {
		for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "nat", chain) {
			fmt.Println(chain, hashComment.ReplaceAllString(r, ""))
		}
	}
	// Output:
	// PREROUTING -j npf-dnat
	// OUTPUT -j npf-dnat
	// POSTROUTING -j npf-snat
	// npf-dnat -d 198.51.100.10/32 -m comment --comment "floating IP of default/web-0" -j DNAT --to-destination 10.244.1.5
	// npf-snat -s 10.244.1.5/32 -d 10.244.1.5/32 -m comment --comment "floating IP of default/web-0" -j SNAT --to-source 198.51.100.10
}

// NATs says which floating IPs are in force and which claims conflict.
func ExampleManager_NATs() {
	ns := kernelfake.New(kernelfake.Options{})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv6, Backend: iptables.BackendNFT, ChainPrefix: "npf-", Kernel: ns})
	m, _ := floatingips.New(floatingips.Options{Family: ipfamily.IPv6, Table: nat, DNATChain: "npf-dnat", SNATChain: "npf-snat"})
	f := netip.MustParseAddr("2001:db8:f::10")
	m.OnUpdate(cluster.Endpoint{ID: "a", Iface: "veth0", Addrs: []netip.Prefix{netip.MustParsePrefix("fd00::5/128")},
		FloatingIPs: []cluster.NAT{{Floating: f, Internal: netip.MustParseAddr("fd00::5")}}})
	m.OnUpdate(cluster.Endpoint{ID: "b", Iface: "veth1", Addrs: []netip.Prefix{netip.MustParsePrefix("fd00::6/128")},
		FloatingIPs: []cluster.NAT{{Floating: f, Internal: netip.MustParseAddr("fd00::6")}}})
	nats, conflicts := m.NATs()
	fmt.Println(nats)
	fmt.Println(conflicts)
	// Output:
	// [{a {2001:db8:f::10 fd00::5}}]
	// [floatingips: address claimed twice: floating IP 2001:db8:f::10 of endpoint "b" is endpoint "a"'s]
}

// Chains shows what the Manager declares, with OutboundSNAT: the pod's
// own connections leave from its floating IP, except towards the pools.
func ExampleManager_Chains() {
	ns := kernelfake.New(kernelfake.Options{})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "npf-", Kernel: ns})
	m, _ := floatingips.New(floatingips.Options{Family: ipfamily.IPv4, Table: nat, DNATChain: "npf-dnat", SNATChain: "npf-snat",
		OutboundSNAT: true, NoSNATSet: "np4-all-pools"})
	m.OnUpdate(cluster.Endpoint{ID: "web", Iface: "veth0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")},
		FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("10.244.1.5")}}})
	_, snat := m.Chains()
	for _, r := range snat.Rules {
		args, _ := iptables.RuleArgs(r, ipfamily.IPv4)
		fmt.Println(args)
	}
	// Output:
	// [-s 10.244.1.5/32 -d 10.244.1.5/32 -m comment --comment floating IP of web -j SNAT --to-source 198.51.100.10]
	// [-s 10.244.1.5/32 -m set ! --match-set np4-all-pools dst -m comment --comment floating IP of web -j SNAT --to-source 198.51.100.10]
}

// New refuses a set of exceptions without the outbound translation they
// would be exceptions to.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "npf-", Kernel: ns})
	_, err := floatingips.New(floatingips.Options{Family: ipfamily.IPv4, Table: nat, DNATChain: "npf-dnat", SNATChain: "npf-snat", NoSNATSet: "np4-all-pools"})
	fmt.Println(err)
	// Output:
	// floatingips: invalid options: NoSNATSet without OutboundSNAT
}
