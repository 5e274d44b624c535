package routerule_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// printKernel prints the fake namespace's IPv4 rules the way `ip rule`
// would (roughly).
func printKernel(ns *kernelfake.Namespace) {
	rules, _ := ns.Admin().Rules(context.Background(), kernel.IPv4)
	for _, r := range rules {
		from := "all"
		if r.Src.IsValid() {
			from = r.Src.String()
		}
		switch r.Action {
		case kernel.RuleGoto:
			fmt.Printf("%d: from %s goto %d\n", r.Priority, from, r.Goto)
		case kernel.RuleLookup:
			fmt.Printf("%d: from %s lookup %d\n", r.Priority, from, r.Table)
		default:
			fmt.Printf("%d: from %s action %d\n", r.Priority, from, r.Action)
		}
	}
}

// The one way to reach a namespace: open it with package kernel and give
// the instance its rules. This example only compiles: it needs root and an
// existing namespace.
func Example_namespace() {
	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	rules, err := routerule.New(routerule.Options{Family: routerule.IPv4, Kernel: ns, Priorities: []uint32{100}, Tables: []uint32{200}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = rules.SetRule(routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 200}})
	if _, err := rules.Apply(context.Background()); err != nil {
		fmt.Println(err)
	}
}

// The whole cycle against a fake namespace: declare, apply, and apply
// again with nothing to do. In an agent, Kernel is a *kernel.Namespace
// opened on the node's namespace and a dataplane.Loop calls Apply.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	rules, err := routerule.New(routerule.Options{
		Family:     routerule.IPv4,
		Kernel:     ns,
		Priorities: []uint32{100},
		Tables:     []uint32{200},
	})
	if err != nil {
		panic(err)
	}
	err = rules.SetRule(routerule.Rule{
		Priority: 100,
		Src:      netip.MustParsePrefix("10.244.1.0/24"),
		Action:   routerule.ActionLookup{Table: 200},
	})
	if err != nil {
		panic(err)
	}
	if _, err := rules.Apply(context.Background()); err != nil {
		panic(err)
	}
	printKernel(ns)

	ns.ResetCounts()
	if _, err := rules.Apply(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("kernel calls of a no-op apply:", ns.Calls(kernelfake.OpRules)+ns.Writes())
	// Output:
	// 0: from all lookup 255
	// 100: from 10.244.1.0/24 lookup 200
	// 32766: from all lookup 254
	// 32767: from all lookup 253
	// kernel calls of a no-op apply: 0
}

// New validates the options and does no I/O; a missing Kernel is refused.
func ExampleNew() {
	_, err := routerule.New(routerule.Options{Family: routerule.IPv6, Priorities: []uint32{100}})
	fmt.Println(errors.Is(err, routerule.ErrInvalidOptions))

	rules, err := routerule.New(routerule.Options{
		Family: routerule.IPv6, Kernel: kernelfake.New(kernelfake.Options{}), Priorities: []uint32{100},
	})
	fmt.Println(rules.Name(), rules.Family(), rules.Phase(), err)
	// Output:
	// true
	// routerule-v6 IPv6 routes <nil>
}

func newExampleRules(k kernel.Rules) *routerule.Rules {
	rules, err := routerule.New(routerule.Options{
		Family: routerule.IPv4, Kernel: k,
		Priorities: []uint32{100, 101}, Tables: []uint32{200, kernel.TableMain},
	})
	if err != nil {
		panic(err)
	}
	return rules
}

// SetRules replaces the whole desired set; rules outside the owned
// priorities and tables are refused and nothing changes.
func ExampleRules_SetRules() {
	rules := newExampleRules(kernelfake.New(kernelfake.Options{}))
	err := rules.SetRules([]routerule.Rule{
		{Priority: 100, Mark: 0x10, Mask: 0x10, Action: routerule.ActionLookup{Table: 200}},
		{Priority: 101, Action: routerule.ActionLookup{Table: kernel.TableMain}},
	})
	fmt.Println(err)
	err = rules.SetRules([]routerule.Rule{{Priority: 7, Action: routerule.ActionBlackhole{}}})
	fmt.Println(errors.Is(err, routerule.ErrNotOwned))
	for _, r := range rules.Desired() {
		fmt.Println(r)
	}
	// Output:
	// <nil>
	// true
	// 100: from all fwmark 0x10/0x10 lookup 200
	// 101: from all lookup main
}

// SetRule adds a rule, or replaces the one the kernel would consider the
// same (equal but for Invert or the goto target).
func ExampleRules_SetRule() {
	rules := newExampleRules(kernelfake.New(kernelfake.Options{}))
	r := routerule.Rule{Priority: 100, Mark: 0x1, Mask: 0x1, Action: routerule.ActionLookup{Table: 200}}
	_ = rules.SetRule(r)
	r.Invert = true
	_ = rules.SetRule(r)
	fmt.Println(rules.Desired())
	// Output:
	// [100: not from all fwmark 0x1/0x1 lookup 200]
}

// RemoveRule removes a desired rule; the next Apply deletes it.
func ExampleRules_RemoveRule() {
	ns := kernelfake.New(kernelfake.Options{})
	rules := newExampleRules(ns)
	r := routerule.Rule{Priority: 100, Dst: netip.MustParsePrefix("192.0.2.0/24"), Action: routerule.ActionBlackhole{}}
	_ = rules.SetRule(r)
	_, _ = rules.Apply(context.Background())
	printKernel(ns)
	_ = rules.RemoveRule(r)
	_, _ = rules.Apply(context.Background())
	fmt.Println("removed:")
	printKernel(ns)
	// Output:
	// 0: from all lookup 255
	// 100: from all action 6
	// 32766: from all lookup 254
	// 32767: from all lookup 253
	// removed:
	// 0: from all lookup 255
	// 32766: from all lookup 254
	// 32767: from all lookup 253
}

// Apply writes only the difference; foreign rules (here a lookup of table
// 300 at an owned priority) are never touched.
func ExampleRules_Apply() {
	ns := kernelfake.New(kernelfake.Options{})
	_ = ns.Admin().AddRule(context.Background(), kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 300})

	rules := newExampleRules(ns)
	_ = rules.SetRule(routerule.Rule{Priority: 100, Action: routerule.ActionGoto{Priority: 101}})
	res, err := rules.Apply(context.Background())
	fmt.Println(res.RetryAfter, err)
	printKernel(ns)
	// Output:
	// 0s <nil>
	// 0: from all lookup 255
	// 100: from all lookup 300
	// 100: from all goto 101
	// 32766: from all lookup 254
	// 32767: from all lookup 253
}

// QueueResync makes the next Apply re-read the kernel, so a rule deleted
// behind its back (by systemd-networkd, say) is added again. A
// dataplane.Loop calls it every ResyncInterval; without a loop, call it
// yourself.
func ExampleRules_QueueResync() {
	ns := kernelfake.New(kernelfake.Options{})
	rules := newExampleRules(ns)
	_ = rules.SetRule(routerule.Rule{Priority: 101, Action: routerule.ActionLookup{Table: 200}})
	_, _ = rules.Apply(context.Background())

	_ = ns.Admin().DeleteRule(context.Background(), kernel.Rule{Family: kernel.IPv4, Priority: 101, Table: 200})
	_, _ = rules.Apply(context.Background()) // trusts its model: nothing to do
	fmt.Println("deleted by hand:")
	printKernel(ns)

	rules.QueueResync()
	_, _ = rules.Apply(context.Background())
	fmt.Println("after a resync:")
	printKernel(ns)
	// Output:
	// deleted by hand:
	// 0: from all lookup 255
	// 32766: from all lookup 254
	// 32767: from all lookup 253
	// after a resync:
	// 0: from all lookup 255
	// 101: from all lookup 200
	// 32766: from all lookup 254
	// 32767: from all lookup 253
}

// Desired returns the canonical form of the desired rules.
func ExampleRules_Desired() {
	rules := newExampleRules(kernelfake.New(kernelfake.Options{}))
	_ = rules.SetRule(routerule.Rule{
		Priority: 100,
		Src:      netip.MustParsePrefix("0.0.0.0/0"),
		Mark:     0x4,
		Action:   &routerule.ActionLookup{Table: 200},
	})
	d := rules.Desired()[0]
	fmt.Println(d.Src.IsValid(), fmt.Sprintf("%#x", d.Mask), d.Action == routerule.ActionLookup{Table: 200})
	// Output:
	// false 0xffffffff true
}

// A source or destination with host bits set is refused; the error names
// it, and matches both sentinels it speaks of.
func ExampleRule_hostBits() {
	err := routerule.Rule{Priority: 100, Src: netip.MustParsePrefix("10.1.2.3/16"), Action: routerule.ActionBlackhole{}}.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, routerule.ErrInvalidRule), errors.Is(err, ipfamily.ErrHostBits))
	// Output:
	// routerule: invalid rule: 100: from 10.1.2.3/16 blackhole: source 10.1.2.3/16 has host bits set (the network is 10.1.0.0/16)
	// true true
}

// Validate checks a rule without an instance.
func ExampleRule_Validate() {
	err := routerule.Rule{Priority: 100, Action: routerule.ActionGoto{Priority: 50}}.Validate()
	fmt.Println(err)
	// Output:
	// routerule: invalid rule: 100: from all goto 50: goto target must be greater than the rule's priority (the kernel only jumps forward)
}

// String formats a rule like `ip rule`.
func ExampleRule_String() {
	fmt.Println(routerule.Rule{
		Priority: 100,
		Src:      netip.MustParsePrefix("fd00:1::/64"),
		Mark:     0x10,
		Mask:     0xf0,
		Invert:   true,
		IIF:      "eth0",
		Action:   routerule.ActionLookup{Table: kernel.TableMain},
	})
	// Output:
	// 100: not from fd00:1::/64 fwmark 0x10/0xf0 iif eth0 lookup main
}

// Family names the address family of an instance.
func ExampleFamily() {
	fmt.Println(routerule.IPv4, routerule.IPv6.Valid(), routerule.Family(5).Valid())
	// Output:
	// IPv4 true false
}

// The three actions.
func ExampleAction() {
	for _, a := range []routerule.Action{
		routerule.ActionLookup{Table: 7},
		routerule.ActionGoto{Priority: 200},
		routerule.ActionBlackhole{},
	} {
		fmt.Println(a)
	}
	// Output:
	// lookup 7
	// goto 200
	// blackhole
}
