package ipsets_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// Plan says what the next Apply and ApplyDeletions would write, and writes
// nothing: here a set to create with its members, and a leftover of an
// earlier run to destroy. The Apply after it makes exactly these writes
// (Stats counts them); then the Plan is empty.
func ExampleIPSets_Plan() {
	ns := kernelfake.New(kernelfake.Options{})
	ctx := context.Background()
	_, _ = ns.Runner().Run(ctx, nil, "ipset", "create", "np4-old", "hash:ip", "family", "inet") // left by an earlier run
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "pods", Type: netfilter.HashNet, MaxSize: 64}, []netfilter.Member{
		netfilter.NetMember(netip.MustParsePrefix("10.244.1.0/24")), netfilter.NetMember(netip.MustParsePrefix("10.244.2.0/24"))})

	plan, _ := sets.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("sets while planning:", ns.IPSets().Names())
	_, _ = sets.Apply(ctx)
	_, _ = sets.ApplyDeletions(ctx)
	fmt.Printf("after: %v, %+v\n", ns.IPSets().Names(), sets.Stats())
	plan, _ = sets.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// ipsets-np4-: 4 writes
	// + set np4-pods hash:net family inet maxelem 64
	// + element np4-pods 10.244.1.0/24
	// + element np4-pods 10.244.2.0/24
	// - set np4-old hash:ip family inet maxelem 65536
	// sets while planning: [np4-old]
	// after: [np4-pods], {Desired:3 InKernel:3 Failing:0 Writes:4}
	// ipsets-np4-: no writes
}

// State says which sets and members of the driver the kernel holds, how
// they differ from the desired ones, and which sets fail: here a set
// whose type must change while a rule still refers to it.
func ExampleIPSets_State() {
	ns := kernelfake.New(kernelfake.Options{})
	ctx := context.Background()
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP, MaxSize: 8}, nil)
	_, _ = sets.Apply(ctx)
	_ = ns.IPSets().SetReferences("np4-a", 1) // an iptables rule matches the set
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashNet, MaxSize: 8}, nil)
	_, err := sets.Apply(ctx)
	fmt.Println("apply:", err)

	st, _ := sets.State(ctx)
	fmt.Println(st)
	fmt.Println("owned:", st.Owned)
	// Output:
	// apply: ipsets: 1 object(s) failed; write set np4-a: set in use: it is hash:ip IPv4 in the kernel and must become hash:net IPv4, but 1 kernel reference(s) hold it: the kernel swaps only sets of equal type and family; remove the references or use a new set name
	// ipsets-np4-: 1 owned, 1 drifted, 1 failing
	//   set np4-a: want np4-a hash:net family inet maxelem 8, have np4-a hash:ip family inet maxelem 8
	// ! ipsets: write set np4-a: set in use: it is hash:ip IPv4 in the kernel and must become hash:net IPv4, but 1 kernel reference(s) hold it: the kernel swaps only sets of equal type and family; remove the references or use a new set name
	// owned: [set np4-a hash:ip family inet maxelem 8]
}
