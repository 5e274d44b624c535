package netfilter_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// allowWeb is a manager's work written against the interface: it runs on
// every backend that implements netfilter.Table.
func allowWeb(tbl netfilter.Table, from netip.Prefix) error {
	err := tbl.SetChains(netfilter.Chain{Name: "np-web", Rules: []netfilter.Rule{{
		Matches: []netfilter.Match{
			netfilter.SourceNet(from),
			netfilter.Protocol(netfilter.ProtoTCP),
			netfilter.DestPorts(netfilter.Port(80), netfilter.Port(443)),
		},
		Action: netfilter.Accept(),
	}}})
	if err != nil {
		return err
	}
	return tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("np-web")}})
}

// A manager takes a netfilter.Table; here the backend is an iptables
// Table on the fake kernel of a unit test.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	tbl, err := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns,
	})
	if err != nil {
		panic(err)
	}
	if err := allowWeb(tbl, netip.MustParsePrefix("10.0.0.0/8")); err != nil {
		panic(err)
	}
	if _, err := tbl.Apply(context.Background()); err != nil {
		panic(err)
	}
	for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-web") {
		fmt.Println(r)
	}

	// A bad declaration is refused before anything is written.
	err = allowWeb(tbl, netip.MustParsePrefix("10.0.0.1/8"))
	fmt.Println(errors.Is(err, netfilter.ErrInvalidRule))
	// Output:
	// -s 10.0.0.0/8 -p tcp -m comment --comment "np:B01cokiWW8AkvUEi" -m multiport --dports 80,443 -j ACCEPT
	// true
}
