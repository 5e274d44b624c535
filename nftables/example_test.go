//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

func ExampleNew() {
	ns := nftablesfake.New() // a *kernel.Namespace in an agent; nil: this namespace
	tbl, err := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, ChainPrefix: "np-", Kernel: ns})
	if err != nil {
		panic(err)
	}
	defer tbl.Close()
	fmt.Println(tbl.Name(), tbl.Options().HashPrefix)

	_, err = nftables.New(nftables.Options{Name: "np filter", Family: ipfamily.IPv4, Role: nftables.Filter})
	fmt.Println(errors.Is(err, nftables.ErrInvalidOptions))
	// Output:
	// nftables-ip-np-filter np:
	// true
}

func ExampleTable_Apply() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))},
		Action:  netfilter.Accept(),
	}}})
	_ = tbl.InsertRules("test", netfilter.HookForward, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		panic(err)
	}
	fmt.Print(ns.Dump())
	tx, _, _, _ := ns.Counts()
	fmt.Println("transactions:", tx)

	// Nothing changed: the next Apply makes no system call.
	_, _ = tbl.Apply(context.Background())
	tx, _, _, _ = ns.Counts()
	fmt.Println("transactions:", tx)
	// Output:
	// table ip np-filter
	//   chain FORWARD { type filter hook 2 priority -10 policy accept }
	//     [3] jump np-fw "np:qR0SGEHTzRq0tKVj"
	//   chain np-fw
	//     [4] "np:vtoMD2INo_SVrVvt"
	// transactions: 1
	// transactions: 1
}

func ExampleTable_SetSets() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-nat", Family: ipfamily.IPv4, Role: nftables.NAT, Kernel: ns})
	defer tbl.Close()
	// VIP . protocol . port → goto the service's chain, in one lookup.
	vip := netip.MustParseAddr("10.96.0.10")
	err := tbl.SetSets(nftables.Set{
		Name:    "services",
		Key:     []nftables.KeyType{nftables.TypeAddr, nftables.TypeProto, nftables.TypePort},
		Verdict: true,
		Elements: []nftables.Element{{
			Key:     []nftables.Value{nftables.Addr(vip), nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)},
			Verdict: netfilter.Goto("svc-web"),
		}},
	})
	if err != nil {
		panic(err)
	}
	_ = tbl.SetChains(netfilter.Chain{Name: "svc-web", Rules: []netfilter.Rule{{
		Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP)},
		Action:  netfilter.DNAT(netip.MustParseAddrPort("10.244.1.5:8080")),
	}}})
	_ = tbl.InsertRules("test", netfilter.HookPrerouting, []netfilter.Rule{{Action: netfilter.VerdictMap("services", netfilter.Dst, netfilter.Dst)}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(ns.Elements(nftablesfake.IPv4, "np-nat", "services"))
	// Output:
	// [10.96.0.10 . tcp . 80 : goto svc-web]
}

func ExampleTable_AddElements() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	defer tbl.Close()
	_ = tbl.SetSets(nftables.Set{Name: "allowed", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true,
		Elements: []nftables.Element{nftables.Elem(nftables.Prefix(netip.MustParsePrefix("10.0.0.0/8")))}})
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("allowed")}, Action: netfilter.Accept()}})
	_, _ = tbl.Apply(context.Background())

	// One more range: one request.
	ns.ResetCounts()
	_ = tbl.AddElements("allowed", nftables.Elem(nftables.Prefix(netip.MustParsePrefix("192.168.0.0/16"))))
	_, _ = tbl.Apply(context.Background())
	_, _, requests, _ := ns.Counts()
	fmt.Println(requests, ns.Elements(nftablesfake.IPv4, "np-filter", "allowed"))
	// Output:
	// 1 [10.0.0.0 11.0.0.0 [end] 192.168.0.0 192.169.0.0 [end]]
}

func ExampleTable_Apply_partial() {
	ns := nftablesfake.New()
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newrule" && r.Chain == "np-bad" {
			return syscall.EOPNOTSUPP // as the kernel refuses what it does not take
		}
		return 0
	})
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns,
		PostWriteRecheck: []time.Duration{}, Clock: clock.NewFake(time.Unix(0, 0))})
	defer tbl.Close()
	_ = tbl.SetChains(
		netfilter.Chain{Name: "np-bad", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}},
		netfilter.Chain{Name: "np-good", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}},
	)
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("np-bad")}, {Action: netfilter.Jump("np-good")}})
	res, err := tbl.Apply(context.Background())
	var pe *dataplane.PartialError
	if errors.As(err, &pe) {
		fmt.Println(errors.Is(err, dataplane.ErrPartial), pe.Objects()[0].Kind, pe.Objects()[0].Name, errors.Is(err, syscall.EOPNOTSUPP))
	}
	fmt.Println("retry in", res.RetryAfter)
	// The others are written; the chain refused stands empty.
	for _, c := range ns.Chains(nftablesfake.IPv4, "np-filter") {
		fmt.Println(c.Name, len(c.Rules))
	}
	// Output:
	// true chain np-bad true
	// retry in 1s
	// INPUT 2
	// np-bad 0
	// np-good 1
}

func ExampleTable_QueueResync() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns, PostWriteRecheck: []time.Duration{}})
	defer tbl.Close()
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}})
	_, _ = tbl.Apply(context.Background())

	// Someone deletes our rule; a resync reads the table and repairs it.
	_ = ns.Admin().DeleteRule(nftablesfake.IPv4, "np-filter", "INPUT", 0)
	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	fmt.Println(len(ns.Chains(nftablesfake.IPv4, "np-filter")[0].Rules))

	// Nothing changed since: a resync asks the ruleset generation, reads
	// nothing and writes nothing.
	before := tbl.WorkStats()
	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	after := tbl.WorkStats()
	fmt.Println(after.Reads-before.Reads, after.Transactions-before.Transactions)
	// Output:
	// 1
	// 0 0
}

func ExampleTable_Counters() {
	ns := nftablesfake.New() // the fake counts no packets
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns, Counters: true})
	defer tbl.Close()
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}})
	_, _ = tbl.Apply(context.Background())
	counters, err := tbl.Counters(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(counters[nftables.BaseChain(netfilter.HookInput)])
	// Output:
	// [{0 0}]
}

func ExampleRemoveTable() {
	ns := nftablesfake.New()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns})
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Accept()}})
	_, _ = tbl.Apply(context.Background())
	_ = tbl.Close()

	// The agent moves to package iptables: our table goes.
	err := nftables.RemoveTable(context.Background(), ns, ipfamily.IPv4, "np-filter")
	fmt.Println(err, ns.Tables(0))
	// Output:
	// <nil> []
}

func ExampleBaseChain() {
	for _, h := range nftables.NAT.Hooks() {
		fmt.Println(nftables.BaseChain(h), nftables.NAT.Priority(h))
	}
	// Output:
	// PREROUTING -110
	// INPUT 90
	// OUTPUT -110
	// POSTROUTING 90
}
