package masquerade_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/masquerade"
)

// One family's Manager with its two drivers on a loop. The namespace here
// is kernelfake's; an agent opens the real one with kernel.Open.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4,
		Backend: iptables.BackendNFT, ChainPrefix: "npm-", Kernel: ns})
	m, err := masquerade.New(masquerade.Options{Family: ipfamily.IPv4, Sets: sets, Table: nat, Chain: "npm-masq"})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(sets)
	_ = loop.AddDriver(nat)
	_ = loop.Send(ctx, cluster.Pool{ID: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true})
	_ = loop.Send(ctx, cluster.Pool{ID: "no-nat", CIDR: netip.MustParsePrefix("10.250.0.0/16")})
	_ = loop.Send(ctx, cluster.Pool{ID: "pods-v6", CIDR: netip.MustParsePrefix("fd00:10:244::/48"), Masquerade: true}) // the IPv6 manager's
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	all, _ := ns.IPSets().Members(m.AllPoolsSet())
	masq, _ := ns.IPSets().Members(m.MasqPoolsSet())
	fmt.Println(m.AllPoolsSet(), all)
	fmt.Println(m.MasqPoolsSet(), masq)
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "nat", "npm-masq") {
		fmt.Println(r)
	}
	// Output:
	// np4-all-pools [10.244.0.0/16 10.250.0.0/16]
	// np4-masq-pools [10.244.0.0/16]
	// -m comment --comment "npm:TOm2HcmFbXSOPwKo" -m set --match-set np4-masq-pools src -m set ! --match-set np4-all-pools dst -m comment --comment "masquerade from pools to outside the pools" -j MASQUERADE --random-fully
}

// New refuses incomplete options.
func ExampleNew() {
	_, err := masquerade.New(masquerade.Options{Family: ipfamily.IPv4})
	fmt.Println(err)
	// Output:
	// masquerade: invalid options: Sets is required
}

// Rule is the one rule of the Manager's chain, for agents that render it
// themselves or check it.
func ExampleManager_Rule() {
	ns := kernelfake.New(kernelfake.Options{})
	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv6, Prefix: "np6-", Kernel: ns})
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv6, Backend: iptables.BackendNFT, ChainPrefix: "npm-", Kernel: ns})
	m, _ := masquerade.New(masquerade.Options{Family: ipfamily.IPv6, Sets: sets, Table: nat, Chain: "npm-masq", NoRandomFully: true})
	args, _ := iptables.RuleArgs(m.Rule(), ipfamily.IPv6)
	fmt.Println(m.Name(), args)
	// Output:
	// masquerade-v6 [-m set --match-set np6-masq-pools src -m set ! --match-set np6-all-pools dst -m comment --comment masquerade from pools to outside the pools -j MASQUERADE]
}
