package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// lastInput prints the input of the last restore the fake served.
func lastInput(k *iptablesfake.Kernel) {
	fmt.Print(lastRestore(k))
}

func ExampleNew() {
	tbl, err := iptables.New(iptables.Options{
		Table:       "filter",
		Family:      ipfamily.IPv4,
		Backend:     iptables.BackendNFT,
		ChainPrefix: "np-",
		Kernel:      kernelfake.New(kernelfake.Options{}), // nil: the binaries of this namespace
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(tbl.Name(), tbl.Options().HashPrefix)

	_, err = iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT})
	fmt.Println(errors.Is(err, iptables.ErrInvalidOptions))
	// Output:
	// iptables-nft-filter-v4 np:
	// true
}

func ExampleTable_Apply() {
	ns, k := newFake()
	tbl, _ := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns,
	})
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))},
		Action:  netfilter.Accept(),
	}}})
	_ = tbl.InsertRules("test", "FORWARD", []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		panic(err)
	}
	lastInput(k)

	// Nothing changed: the next Apply runs no binary at all.
	_, _ = tbl.Apply(context.Background())
	st := tbl.WorkStats()
	fmt.Println("saves", st.Saves, "restores", st.Restores, "chains", st.Chains, "rules", st.Rules)
	// Output:
	// *filter
	// :np-fw - [0:0]
	// -A np-fw -s 10.0.0.0/8 -m comment --comment "np:tYRLxoizN57qdzkW" -j ACCEPT
	// -I FORWARD 1 -m comment --comment "np:oFkfqAwBJY1A778R" -j np-fw
	// COMMIT
	// saves 1 restores 1 chains 1 rules 2
}

func ExampleTable_SetChains() {
	ns, k := newFake()
	tbl, _ := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendLegacy,
		ChainPrefix: "np-", Kernel: ns,
	})
	from := func(cidr string) netfilter.Rule {
		return netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix(cidr))}, Action: netfilter.Accept()}
	}
	_ = tbl.SetChains(netfilter.Chain{Name: "np-a", ForceProgramming: true, Rules: []netfilter.Rule{
		from("10.0.0.0/24"), from("10.0.1.0/24"), from("10.0.2.0/24"),
	}})
	_, _ = tbl.Apply(context.Background())

	// Changing one rule replaces just that rule: the others keep their
	// packet counters.
	_ = tbl.SetChains(netfilter.Chain{Name: "np-a", ForceProgramming: true, Rules: []netfilter.Rule{
		from("10.0.0.0/24"), from("10.9.9.0/24"), from("10.0.2.0/24"),
	}})
	_, _ = tbl.Apply(context.Background())
	lastInput(k)
	// Output:
	// *filter
	// -R np-a 2 -s 10.9.9.0/24 -m comment --comment "np:6TwsouOC42zRjtQg" -j ACCEPT
	// COMMIT
}

func ExampleTable_InsertRules() {
	ns, k := newFake()
	// Another agent's rule is already in INPUT.
	_ = k.Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-A", "INPUT", "-s", "192.0.2.1", "-j", "DROP")

	tbl, _ := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", HashPrefix: "np_", Kernel: ns,
	})
	_ = tbl.InsertRules("test", "INPUT", []netfilter.Rule{{
		Matches: []netfilter.Match{netfilter.InInterface("lo")},
		Action:  netfilter.Accept(),
	}})
	_ = tbl.AppendRules("test", "INPUT", []netfilter.Rule{{Action: netfilter.Drop()}})
	_, _ = tbl.Apply(context.Background())
	for _, r := range k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT") {
		fmt.Println(r)
	}
	// Output:
	// -i lo -m comment --comment np_YZrhXT0hRtfvKk6I -j ACCEPT
	// -s 192.0.2.1/32 -j DROP
	// -m comment --comment np_SJvk3QDEH-DB9o96 -j DROP
}

func ExampleDetectBackend() {
	ns, k := newFake()
	// kubelet left its hint chain in the legacy mangle table.
	_ = k.Exec(iptablesfake.BackendLegacy, ipfamily.IPv4, "-t", "mangle", "-N", "KUBE-IPTABLES-HINT")

	b, d, err := iptables.DetectBackend(context.Background(), ns)
	fmt.Println(b, d.Reason, err)
	// Output: legacy hint chain KUBE-IPTABLES-HINT in legacy <nil>
}

// When the kernel refuses one object, Apply writes the others and reports
// the refused one; it retries it on its own backoff.
func ExampleTable_Apply_partial() {
	ns, k := newFake()
	// The kernel will refuse our jump from OUTPUT, whatever we try.
	k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "-I OUTPUT"})
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl, _ := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns, Clock: clk, PostWriteRecheck: []time.Duration{},
	})
	_ = tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}})
	_ = tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{Action: netfilter.Jump("np-a")}})
	_ = tbl.InsertRules("test", "INPUT", []netfilter.Rule{{Action: netfilter.Jump("np-a")}})
	res, err := tbl.Apply(context.Background())

	var pe *dataplane.PartialError
	if errors.As(err, &pe) {
		for _, o := range pe.Objects() {
			fmt.Println(o.Kind, o.Name, errors.Is(o, iptables.ErrRefused), o.RetryAt.Sub(clk.Now()))
		}
	}
	fmt.Println(errors.Is(err, dataplane.ErrPartial), res.RetryAfter)
	var re *command.RestoreError
	if errors.As(err, &re) {
		fmt.Printf("line %d: %s", re.Line, re.Stderr)
	}
	fmt.Println(len(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT")), len(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "OUTPUT")))
	// Output:
	// chain OUTPUT true 1s
	// true 1s
	// line 5: iptables-nft-restore: line 5 failed
	// 1 0
}

func ExampleTable_QueueResync() {
	ns, k := newFake()
	tbl, _ := iptables.New(iptables.Options{
		Table: "nat", Family: ipfamily.IPv4, Backend: iptables.BackendNFT,
		ChainPrefix: "np-", Kernel: ns,
	})
	_ = tbl.AppendRules("test", "POSTROUTING", []netfilter.Rule{{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("10.244.0.0/16"))},
		Action:  netfilter.ActionMasquerade{RandomFully: true},
	}})
	_, _ = tbl.Apply(context.Background())

	// Someone flushes POSTROUTING behind our back.
	_ = k.Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-t", "nat", "-F", "POSTROUTING")

	// A resync (a dataplane.Loop queues one every ResyncInterval) re-reads
	// and repairs it.
	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	fmt.Println(len(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "nat", "POSTROUTING")), tbl.WorkStats().Restores)
	// Output: 1 2
}

func ExampleParseBackend() {
	b, err := iptables.ParseBackend("legacy")
	fmt.Println(b, b.RestoreCommand(ipfamily.IPv6), err)
	// Output: legacy ip6tables-legacy-restore <nil>
}
