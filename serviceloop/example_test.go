package serviceloop_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/serviceloop"
)

// One family's Manager and its filter Table on a loop; both families'
// ranges are sent, the IPv4 Manager takes its own. The namespace here is
// kernelfake's; an agent opens the real one with kernel.Open.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4,
		Backend: iptables.BackendNFT, ChainPrefix: "nps-", Kernel: ns})
	m, err := serviceloop.New(serviceloop.Options{Family: ipfamily.IPv4, Table: filter, Chain: "nps-svc-loop"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(filter)
	_ = loop.Send(ctx, serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/112")}})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	fmt.Println(m.CIDRs())
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "FORWARD") {
		fmt.Println("FORWARD", unhashed(r))
	}
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "nps-svc-loop") {
		fmt.Println("nps-svc-loop", unhashed(r))
	}
	// Output:
	// [10.96.0.0/12]
	// FORWARD -j nps-svc-loop
	// nps-svc-loop -d 10.96.0.0/12 -m comment --comment "service range reached the forward path unhandled" -j DROP
}

// Validate checks a message before it is sent.
func ExampleServiceCIDRs_Validate() {
	err := serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/12")}}.Validate()
	fmt.Println(err)
	// Output:
	// serviceloop: invalid service CIDR: 10.96.0.1/12 has host bits set (the network is 10.96.0.0/12)
}

// New refuses a chain name the rule writers would not take.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv6, Backend: iptables.BackendNFT, ChainPrefix: "nps-", Kernel: ns})
	_, err := serviceloop.New(serviceloop.Options{Family: ipfamily.IPv6, Table: filter, Chain: "nps svc"})
	fmt.Println(err)
	// Output:
	// serviceloop: invalid options: Chain: invalid chain name: "nps svc" contains ' '
}

// Rules shows what the chain holds; Reject answers the sender at once.
func ExampleManager_Rules() {
	ns := kernelfake.New(kernelfake.Options{})
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv6, Backend: iptables.BackendNFT, ChainPrefix: "nps-", Kernel: ns})
	m, _ := serviceloop.New(serviceloop.Options{Family: ipfamily.IPv6, Table: filter, Chain: "nps-svc-loop", Verdict: serviceloop.Reject})
	m.OnUpdate(serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:96::/112")}})
	for _, r := range m.Rules() {
		args, _ := iptables.RuleArgs(r, ipfamily.IPv6)
		fmt.Println(m.Name(), args)
	}
	// Output:
	// serviceloop-v6 [-d fd00:96::/112 -m comment --comment service range reached the forward path unhandled -j REJECT --reject-with icmp6-adm-prohibited]
}
