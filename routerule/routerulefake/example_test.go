package routerulefake_test

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

func rule(prio, table int, src string) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = netlink.FAMILY_V4
	r.Priority, r.Table = prio, table
	if src != "" {
		_, r.Src, _ = net.ParseCIDR(src)
	}
	return r
}

// New starts with a fresh namespace's rules; adds and deletes follow the
// kernel's matching rules.
func ExampleNew() {
	k := routerulefake.New()
	fmt.Println(k.RuleAdd(rule(100, 10, "10.0.0.0/8")))
	// A catch-all cannot follow a narrower rule of the same priority and table.
	err := k.RuleAdd(rule(100, 10, ""))
	fmt.Println(errors.Is(err, syscall.EEXIST))
	rules, _ := k.RuleList(netlink.FAMILY_V4)
	for _, r := range rules {
		fmt.Printf("%d: from %v lookup %d\n", r.Priority, r.Src, r.Table)
	}
	// Output:
	// <nil>
	// true
	// 0: from <nil> lookup 255
	// 100: from 10.0.0.0/8 lookup 10
	// 32766: from <nil> lookup 254
	// 32767: from <nil> lookup 253
}

// NewEmpty, FailNext and Calls: inject a failure and count calls.
func ExampleKernel_FailNext() {
	k := routerulefake.NewEmpty()
	k.FailNext(routerulefake.OpAdd, 1, syscall.ENOBUFS)
	fmt.Println(k.RuleAdd(rule(100, 10, "")))
	fmt.Println(k.RuleAdd(rule(100, 10, "")))
	fmt.Println(k.Calls(routerulefake.OpAdd), len(k.Rules(netlink.FAMILY_ALL)))
	// Output:
	// no buffer space available
	// <nil>
	// 2 1
}

// SetHook decides per call; Rules shows each rule's action, which RuleList
// (like the real dump) leaves out.
func ExampleKernel_SetHook() {
	k := routerulefake.NewEmpty()
	k.SetHook(func(op routerulefake.Op, family int, r *netlink.Rule) error {
		if op == routerulefake.OpAdd && r.Priority == 13 {
			return syscall.EPERM
		}
		return nil
	})
	for _, prio := range []int{12, 13} {
		r := netlink.NewRule()
		r.Priority, r.Type = prio, 8 // prohibit
		fmt.Println(prio, k.RuleAdd(r))
	}
	listed, _ := k.RuleList(netlink.FAMILY_V4)
	fmt.Println("listed type:", listed[0].Type, "inspected type:", k.Rules(netlink.FAMILY_V4)[0].Type)
	// Output:
	// 12 <nil>
	// 13 operation not permitted
	// listed type: 0 inspected type: 8
}
