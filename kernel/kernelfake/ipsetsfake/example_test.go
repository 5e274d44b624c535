package ipsetsfake_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
)

// The fake is a command.Runner: kernelfake.Namespace's Runner serves ipset
// from it, and a test can run ipset commands on it directly.
func ExampleNew() {
	k := ipsetsfake.New()
	script := "create np4-a hash:net family inet\nadd np4-a 10.1.2.3/16\nadd np4-a 10.0.0.1/32\n"
	if _, err := k.Run(context.Background(), strings.NewReader(script), "ipset", "restore"); err != nil {
		panic(err)
	}
	out, _ := k.Run(context.Background(), nil, "ipset", "save", "np4-a")
	fmt.Print(string(out))
	// Output:
	// create np4-a hash:net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5eed0001
	// add np4-a 10.0.0.1
	// add np4-a 10.1.0.0/16
}

func ExampleKernel_Run() {
	k := ipsetsfake.New()
	_, err := k.Run(context.Background(), strings.NewReader("create a hash:ip\nadd a 10.0.0.1\nadd a 10.0.0.1\n"), "ipset", "restore")
	fmt.Println(err)
	// Output: ipset restore: exit status 1: ipset v7.17: Error in line 3: Element cannot be added to the set: it's already added
}

// A referenced set cannot be destroyed, as when an iptables rule matches
// it.
func ExampleKernel_SetReferences() {
	k := ipsetsfake.New()
	_ = k.Exec("create", "a", "hash:ip")
	_ = k.SetReferences("a", 1)
	fmt.Println(k.Exec("destroy", "a"))
	// Output: ipset destroy a: exit status 1: ipset v7.17: Set cannot be destroyed: it is in use by a kernel component
}

func ExampleKernel_FailNext() {
	k := ipsetsfake.New()
	k.FailNext(1, "restore", "Kernel error received: Cannot allocate memory")
	_, err := k.Run(context.Background(), strings.NewReader("create a hash:ip\n"), "ipset", "restore")
	fmt.Println(err != nil, k.Names())
	_, err = k.Run(context.Background(), strings.NewReader("create a hash:ip\n"), "ipset", "restore")
	fmt.Println(err, k.Names())
	// Output:
	// true []
	// <nil> [a]
}

func ExampleKernel_FailLine() {
	k := ipsetsfake.New()
	k.FailLine("10.0.0.2", "")
	_, err := k.Run(context.Background(), strings.NewReader("create a hash:ip\nadd a 10.0.0.1\nadd a 10.0.0.2\n"), "ipset", "restore")
	members, _ := k.Members("a")
	fmt.Println(err != nil, members)
	// Output: true [10.0.0.1]
}

func ExampleKernel_Exec() {
	k := ipsetsfake.New()
	_ = k.Exec("create", "np4-a", "hash:ip", "family", "inet")
	_ = k.Exec("add", "np4-a", "10.0.0.9")
	fmt.Print(k.Save())
	fmt.Println(k.CountCalls("add"))
	// Output:
	// create np4-a hash:ip family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5eed0001
	// add np4-a 10.0.0.9
	// 1
}
