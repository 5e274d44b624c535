//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

func ExampleNewIPSets() {
	ns := nftablesfake.New() // a *kernel.Namespace in an agent
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	// The netfilter.Sets a manager takes, its sets in the Table's own table.
	var sets netfilter.Sets
	sets, err := nftables.NewIPSets(tbl, nftables.IPSetsOptions{Prefix: "np4-"})
	if err != nil {
		panic(err)
	}
	err = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "allowed", Type: netfilter.HashNet},
		[]netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))})
	if err != nil {
		panic(err)
	}
	name, _ := sets.KernelName("allowed")
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet(name)}, Action: netfilter.Accept()}})
	// In a dataplane.Loop, register both: the loop applies them in order.
	_, _ = sets.Apply(context.Background())
	_, _ = tbl.Apply(context.Background())
	fmt.Println(ns.Sets(nftablesfake.IPv4, "np-filter"), ns.Elements(nftablesfake.IPv4, "np-filter", name))

	// One member more: one element written.
	ns.ResetCounts()
	_ = sets.AddMembers("allowed", []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("192.168.0.0/16"))})
	_, _ = tbl.Apply(context.Background())
	_, _, requests, _ := ns.Counts()
	fmt.Println(requests)

	// Validated as package ipsets validates.
	err = sets.AddMembers("allowed", []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("fd00::/8"))})
	fmt.Println(errors.Is(err, netfilter.ErrWrongFamily))
	fmt.Println(err)
	// Output:
	// [np4-allowed] [10.0.0.0 11.0.0.0 [end]]
	// 1
	// true
	// nftables: invalid element allowed: member 0: wrong IP family: fd00::/8 is IPv6, the set is IPv4
}

func ExampleIPSets_RemoveSet() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	sets, _ := nftables.NewIPSets(tbl, nftables.IPSetsOptions{})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "hosts", Type: netfilter.HashIP}, []netfilter.Member{netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))})
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("hosts")}, Action: netfilter.Accept()}})
	pass := func() error {
		// A pass of a dataplane.Loop, managers done: sets, table, deletions.
		_, err1 := sets.Apply(context.Background())
		_, err2 := tbl.Apply(context.Background())
		_, err3 := sets.ApplyDeletions(context.Background())
		return errors.Join(err1, err2, err3)
	}
	_ = pass()

	// The set is no longer desired, but a rule still uses it: it waits.
	_ = sets.RemoveSet("hosts")
	err := pass()
	fmt.Println(sets.Names(), ns.Sets(nftablesfake.IPv4, "np-filter"), errors.Is(err, dataplane.ErrPartial), errors.Is(err, netfilter.ErrSetInUse))

	// The rule goes: so does the set, in the same transaction.
	_ = tbl.InsertRules("test", netfilter.HookInput, nil)
	err = pass()
	fmt.Println(ns.Sets(nftablesfake.IPv4, "np-filter"), err)
	// Output:
	// [] [hosts] true true
	// [] <nil>
}
