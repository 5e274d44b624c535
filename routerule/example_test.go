//go:build linux

package routerule_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

// printKernel prints the fake kernel's IPv4 rules the way `ip rule` would.
func printKernel(k *routerulefake.Kernel) {
	for _, r := range k.Rules(netlink.FAMILY_V4) {
		from := "all"
		if r.Src != nil {
			from = r.Src.String()
		}
		switch {
		case r.Goto > 0:
			fmt.Printf("%d: from %s goto %d\n", r.Priority, from, r.Goto)
		case r.Table > 0:
			fmt.Printf("%d: from %s lookup %d\n", r.Priority, from, r.Table)
		default:
			fmt.Printf("%d: from %s type %d\n", r.Priority, from, r.Type)
		}
	}
}

// The whole cycle against the fake kernel: declare, apply, and apply again
// with nothing to do. In an agent, Handle is a *netlink.Handle bound to the
// node's namespace and a dataplane.Loop calls Apply.
func Example() {
	kernel := routerulefake.New()
	rules, err := routerule.New(routerule.Options{
		Family:     routerule.IPv4,
		Handle:     kernel,
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
	printKernel(kernel)

	kernel.ResetCalls()
	if _, err := rules.Apply(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("netlink calls of a no-op apply:", kernel.Calls(routerulefake.OpList)+kernel.Writes())
	// Output:
	// 0: from all lookup 255
	// 100: from 10.244.1.0/24 lookup 200
	// 32766: from all lookup 254
	// 32767: from all lookup 253
	// netlink calls of a no-op apply: 0
}

// New validates the options and does no I/O; a nil handle is refused.
func ExampleNew() {
	_, err := routerule.New(routerule.Options{Family: routerule.IPv6, Priorities: []uint32{100}})
	fmt.Println(errors.Is(err, routerule.ErrInvalidOptions))

	rules, err := routerule.New(routerule.Options{
		Family: routerule.IPv6, Handle: routerulefake.New(), Priorities: []uint32{100},
	})
	fmt.Println(rules.Name(), rules.Family(), rules.Phase(), err)
	// Output:
	// true
	// routerule-v6 IPv6 routes <nil>
}

func newExampleRules(k *routerulefake.Kernel) *routerule.Rules {
	rules, err := routerule.New(routerule.Options{
		Family: routerule.IPv4, Handle: k,
		Priorities: []uint32{100, 101}, Tables: []uint32{200, routerule.TableMain},
	})
	if err != nil {
		panic(err)
	}
	return rules
}

// SetRules replaces the whole desired set; rules outside the owned
// priorities and tables are refused and nothing changes.
func ExampleRules_SetRules() {
	rules := newExampleRules(routerulefake.New())
	err := rules.SetRules([]routerule.Rule{
		{Priority: 100, Mark: 0x10, Mask: 0x10, Action: routerule.ActionLookup{Table: 200}},
		{Priority: 101, Action: routerule.ActionLookup{Table: routerule.TableMain}},
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
	rules := newExampleRules(routerulefake.New())
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
	kernel := routerulefake.NewEmpty()
	rules := newExampleRules(kernel)
	r := routerule.Rule{Priority: 100, Dst: netip.MustParsePrefix("192.0.2.0/24"), Action: routerule.ActionBlackhole{}}
	_ = rules.SetRule(r)
	_, _ = rules.Apply(context.Background())
	fmt.Println(len(kernel.Rules(netlink.FAMILY_V4)))
	_ = rules.RemoveRule(r)
	_, _ = rules.Apply(context.Background())
	fmt.Println(len(kernel.Rules(netlink.FAMILY_V4)))
	// Output:
	// 1
	// 0
}

// Apply writes only the difference; foreign rules (here a lookup of table
// 300 at an owned priority) are never touched.
func ExampleRules_Apply() {
	kernel := routerulefake.NewEmpty()
	foreign := netlink.NewRule()
	foreign.Priority, foreign.Table = 100, 300
	_ = kernel.RuleAdd(foreign)

	rules := newExampleRules(kernel)
	_ = rules.SetRule(routerule.Rule{Priority: 100, Action: routerule.ActionGoto{Priority: 101}})
	res, err := rules.Apply(context.Background())
	fmt.Println(res.RetryAfter, err)
	printKernel(kernel)
	// Output:
	// 1m30s <nil>
	// 100: from all lookup 300
	// 100: from all goto 101
}

// QueueResync makes the next Apply re-read the kernel, so a rule deleted
// behind its back (by systemd-networkd, say) is added again.
func ExampleRules_QueueResync() {
	kernel := routerulefake.NewEmpty()
	rules := newExampleRules(kernel)
	_ = rules.SetRule(routerule.Rule{Priority: 101, Action: routerule.ActionLookup{Table: 200}})
	_, _ = rules.Apply(context.Background())

	gone := netlink.NewRule()
	gone.Priority, gone.Table = 101, 200
	_ = kernel.RuleDel(gone)
	_, _ = rules.Apply(context.Background()) // trusts its model: nothing to do
	fmt.Println(len(kernel.Rules(netlink.FAMILY_V4)))

	rules.QueueResync()
	_, _ = rules.Apply(context.Background())
	printKernel(kernel)
	// Output:
	// 0
	// 101: from all lookup 200
}

// Desired returns the canonical form of the desired rules.
func ExampleRules_Desired() {
	rules := newExampleRules(routerulefake.New())
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
		Action:   routerule.ActionLookup{Table: routerule.TableMain},
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
