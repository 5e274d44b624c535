package nfmigrate_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nfmigrate"
)

// An agent that ran on iptables-nft starts on nftables: once, before its
// loop starts, it removes what its iptables Tables left. In an agent the
// Kernel is the *kernel.Namespace of the node; here it is a fake that
// serves the iptables binaries and nf_tables from memory.
func Example() {
	ns := newFake()
	ipt, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
	_ = ipt.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}})
	_ = ipt.InsertRules("test", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})
	_, _ = ipt.Apply(context.Background())

	err := nfmigrate.RemoveLeftovers(context.Background(), ns, nfmigrate.NFTables, nfmigrate.Owned{ChainPrefix: "np-", NFTablesTables: []string{"np"}})
	out, _ := ns.Runner().Run(context.Background(), nil, "iptables-nft-save", "-t", "filter")
	fmt.Println(err, strings.Contains(string(out), "np-"))
	// Output:
	// <nil> false
}
