//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"os"

	"github.com/vishvananda/netns"

	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/iptables/iptablesfake"
)

// With Options.Namespace, Apply reads the table in process instead of
// running iptables-save. The handle must name the namespace the Runner
// runs the binaries in: here the process's own, with command.Local.
func ExampleOptions_namespace() {
	ns, err := netns.Get()
	if err != nil {
		panic(err)
	}
	defer ns.Close()
	tbl, err := iptables.New(iptables.Options{
		Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Runner: command.Local{}, Namespace: ns,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(tbl.Name(), tbl.Options().Namespace == ns)

	// When the in-process read fails (here the handle is no namespace at
	// all), Apply reads with iptables-save, through the Runner.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		panic(err)
	}
	defer devNull.Close()
	fallback, _ := iptables.New(iptables.Options{
		Table: "filter", IPVersion: iptables.IPv4, Backend: iptables.BackendLegacy,
		ChainPrefix: "np-", Runner: iptablesfake.New(), Namespace: netns.NsHandle(devNull.Fd()),
	})
	if _, err := fallback.Apply(context.Background()); err != nil {
		panic(err)
	}
	st := fallback.Stats()
	fmt.Println("fast reads", st.FastReads, "fallbacks", st.FastReadFallbacks, "saves", st.Saves)
	// Output:
	// iptables-nft-filter-v4 true
	// fast reads 0 fallbacks 1 saves 1
}
