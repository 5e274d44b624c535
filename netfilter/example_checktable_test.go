package netfilter_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A manager's constructor checks its chain and family against the Table
// it is given, with no I/O: a chain without the Table's prefix, or a Table
// of the other family, is refused before any pass.
func ExampleCheckTable() {
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: kernelfake.New(kernelfake.Options{})})
	fmt.Println(netfilter.CheckTable(filter, ipfamily.IPv4, "np-loop"))
	err := netfilter.CheckTable(filter, ipfamily.IPv4, "other-loop")
	fmt.Println(errors.Is(err, iptables.ErrNotOwned))
	err = netfilter.CheckTable(filter, ipfamily.IPv6, "np-loop")
	fmt.Println(errors.Is(err, netfilter.ErrWrongFamily))
	// Output:
	// <nil>
	// true
	// true
}
