//go:build linux

package nftablesfake_test

import (
	"context"
	"fmt"
	"syscall"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

func ExampleNew() {
	ns := nftablesfake.New()
	// Another agent's table, made behind the Table's back.
	_ = ns.Admin().AddTable(nftablesfake.IPv4, "kube-proxy")

	tbl, _ := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept(), Comments: []string{"lo"}}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		panic(err)
	}
	fmt.Print(ns.Dump())
	// Output:
	// table ip kube-proxy
	// table ip np
	//   chain INPUT { type filter hook 1 priority -10 policy accept }
	//     [2] "np:Q32olT9iM9QmiUaX lo"
}

func ExampleNamespace_Refuse() {
	ns := nftablesfake.New()
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newsetelem" && len(r.Key) == 2 && r.Key[1] == 23 {
			return syscall.EEXIST // one element the kernel would refuse
		}
		return 0
	})
	tbl, _ := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	_ = tbl.SetSets(nftables.Set{Name: "ports", Key: []nftables.KeyType{nftables.TypePort},
		Elements: []nftables.Element{nftables.Elem(nftables.Port(22)), nftables.Elem(nftables.Port(23)), nftables.Elem(nftables.Port(443))}})
	_, err := tbl.Apply(context.Background())
	fmt.Println(err)
	fmt.Println(ns.Elements(nftablesfake.IPv4, "np", "ports"))
	// Output:
	// nftables: 1 object(s) failed; element ports 23: change refused by the kernel: its change was refused: file exists
	// [22 443]
}

func ExampleAdmin() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}})
	_, _ = tbl.Apply(context.Background())

	_ = ns.Admin().AddRule(nftablesfake.IPv4, "np", "INPUT", "someone else's")
	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	for _, r := range ns.Chains(nftablesfake.IPv4, "np")[0].Rules {
		fmt.Println(r.Comment)
	}
	// Output:
	// np:ON_HOFNlpSWhr-9e
}
