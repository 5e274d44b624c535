package iptables_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Plan says what the next Apply would write, without writing; State says
// what the Table holds in the kernel and how it differs from what it
// wants.
func ExampleTable_Plan() {
	ns := kernelfake.New(kernelfake.Options{})
	tbl, _ := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns,
	})
	ctx := context.Background()
	accept := func(cidr string) netfilter.Rule {
		return netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix(cidr))}, Action: netfilter.Accept()}
	}
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{accept("10.0.0.0/8"), accept("10.1.0.0/16")}})
	_ = tbl.InsertRules("policy", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})

	plan, _ := tbl.Plan(ctx)
	fmt.Println(plan)
	st, _ := tbl.State(ctx)
	fmt.Println(st)

	_, _ = tbl.Apply(ctx)
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{accept("10.0.0.0/8")}})
	plan, _ = tbl.Plan(ctx)
	fmt.Println(plan)
	_, _ = tbl.Apply(ctx)
	plan, _ = tbl.Plan(ctx)
	st, _ = tbl.State(ctx)
	fmt.Println(plan)
	fmt.Println(st, st.Owned)
	// Output:
	// iptables-nft-filter-v4: 2 writes
	// + chain np-fw (2 rules)
	// + rule FORWARD top (1 rule)
	// iptables-nft-filter-v4: 0 owned, 2 drifted, 0 failing
	//   chain np-fw: missing (want 2 rules)
	//   rule FORWARD top: missing (want 1 rule)
	// iptables-nft-filter-v4: 1 write
	// ~ chain np-fw (1 rule, was 2 rules)
	// iptables-nft-filter-v4: no writes
	// iptables-nft-filter-v4: 2 owned, 0 drifted, 0 failing [chain np-fw rule FORWARD top]
}
