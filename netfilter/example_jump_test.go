package netfilter_test

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A manager declares its chains and the jumps to them from the hooks, at
// the placement its Options name: here read from an agent's configuration
// text, "append", which puts them after the rules already in the hooks.
func ExampleDeclareJumps() {
	ns := kernelfake.New(kernelfake.Options{})
	_ = ns.IPTables().Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-t", "nat", "-A", "POSTROUTING", "-o", "eth9", "-j", "ACCEPT")
	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4,
		Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})

	var placement netfilter.JumpPlacement
	if err := placement.UnmarshalText([]byte("append")); err != nil {
		panic(err)
	}
	_ = nat.SetChains(netfilter.Chain{Name: "np-dnat"}, netfilter.Chain{Name: "np-snat"})
	err := netfilter.DeclareJumps(nat, placement, "np-dnat",
		netfilter.HookJump{Hook: netfilter.HookPrerouting, Chain: "np-dnat"},
		netfilter.HookJump{Hook: netfilter.HookOutput, Chain: "np-dnat"},
		netfilter.HookJump{Hook: netfilter.HookPostrouting, Chain: "np-snat"})
	if err != nil {
		panic(err)
	}
	if _, err := nat.Apply(context.Background()); err != nil {
		panic(err)
	}
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "nat", "POSTROUTING") {
		fmt.Println(r)
	}

	// A placement that is not one of the constants is refused.
	fmt.Println(netfilter.DeclareJumps(nat, netfilter.JumpNone+1, "np-dnat"))
	// Output:
	// -o eth9 -j ACCEPT
	// -m comment --comment "np:0_DURZn6VWAxCASE" -j np-snat
	// netfilter: unknown jump placement 3
}
