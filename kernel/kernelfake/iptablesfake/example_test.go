package iptablesfake_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

func ExampleNew() {
	k := iptablesfake.New()
	// The Kernel is a command.Runner: give it to the code under test in
	// place of command.Local.
	_, err := k.Run(context.Background(), strings.NewReader("*filter\n:np-a - [0:0]\n-A np-a -p tcp --dport 80 -j ACCEPT\nCOMMIT\n"),
		"iptables-nft-restore", "-w", "5", "--noflush")
	fmt.Println(err)
	out, _ := k.Run(context.Background(), nil, "iptables-nft-save", "-t", "filter")
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A") {
			fmt.Println(line)
		}
	}
	fmt.Println(k.Count(iptablesfake.OpRestore), k.Count(iptablesfake.OpSave))
	// Output:
	// <nil>
	// -A np-a -p tcp -m tcp --dport 80 -j ACCEPT
	// 1 1
}

func ExampleKernel_AddFault() {
	k := iptablesfake.New()
	k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "np-bad", Times: 1})
	_, err := k.Run(context.Background(), strings.NewReader("*filter\n:np-ok - [0:0]\n:np-bad - [0:0]\nCOMMIT\n"),
		"iptables-legacy-restore", "--noflush")
	fmt.Println(err)
	// The failing transaction left nothing behind.
	fmt.Println(k.Chains(iptablesfake.BackendLegacy, ipfamily.IPv4, "filter"))
	// Output:
	// iptables-legacy-restore --noflush: exit status 1: iptables-restore: line 3 failed
	// [INPUT FORWARD OUTPUT]
}

func ExampleKernel_Exec() {
	k := iptablesfake.New()
	// Play another agent: insert a rule at the top of FORWARD.
	_ = k.Exec(iptablesfake.BackendNFT, ipfamily.IPv6, "-I", "FORWARD", "1", "-s", "2001:db8::1", "-j", "DROP")
	fmt.Println(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv6, "filter", "FORWARD"))
	fmt.Println(len(k.Calls()), "calls recorded")
	// Output:
	// [-s 2001:db8::1/128 -j DROP]
	// 0 calls recorded
}

func ExampleKernel_ListRules() {
	k := iptablesfake.New()
	_ = k.Restore(iptablesfake.BackendNFT, ipfamily.IPv4, "*filter\n-A INPUT -j ACCEPT\n-A INPUT -j DROP\nCOMMIT\n", true)
	before := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT")
	_ = k.Restore(iptablesfake.BackendNFT, ipfamily.IPv4, "*filter\n-R INPUT 2 -j RETURN\nCOMMIT\n", true)
	after := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT")
	fmt.Println(before[0] == after[0], before[1] == after[1], after[1].Spec)
	// Output: true false -j RETURN
}
