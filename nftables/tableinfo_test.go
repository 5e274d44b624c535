package nftables_test

import (
	"errors"
	"testing"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// The nftables Table says what netfilter.CheckTable asks, as package
// iptables' does (ExampleCheckTable): its family, and whether it owns a
// chain — one with its prefix that is not one of its base chains.
func TestTableInfo(t *testing.T) {
	tbl, err := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv6, Role: nftables.NAT, ChainPrefix: "np-",
		Kernel: kernelfake.New(kernelfake.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if err := netfilter.CheckTable(tbl, ipfamily.IPv6, "np-dnat", "np-snat"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"other-dnat", nftables.BaseChain(netfilter.HookPostrouting)} {
		if err := netfilter.CheckTable(tbl, ipfamily.IPv6, bad); !errors.Is(err, nftables.ErrNotOwned) {
			t.Errorf("%s: %v, want ErrNotOwned", bad, err)
		}
	}
	if err := netfilter.CheckTable(tbl, ipfamily.IPv4, "np-dnat"); !errors.Is(err, netfilter.ErrWrongFamily) {
		t.Errorf("IPv4 on an IPv6 table: %v", err)
	}
}
