package ipsets_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/ipsetsfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// lastScript returns the input of the last restore the fake ran, with the
// member lines of each set sorted (the driver writes them in map order).
func lastScript(k *ipsetsfake.Kernel) string {
	calls := k.Calls()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Args[0] == "restore" {
			return sortAdds(calls[i].Stdin)
		}
	}
	return ""
}

// A driver keeps the kernel's sets equal to what was declared. Here its
// Kernel is an in-memory namespace (kernelfake), whose Runner serves ipset
// from a fake; in an agent it is the namespace kernel.Open returned (or
// nil: the agent's own namespace), and a dataplane.Loop calls Apply.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	sets, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	if err != nil {
		panic(err)
	}
	err = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "allow", Type: netfilter.HashNet}, []netfilter.Member{
		netfilter.NetMember(netip.MustParsePrefix("10.0.0.1/32")),
		netfilter.NetMember(netip.MustParsePrefix("192.168.0.0/16")),
	})
	if err != nil {
		panic(err)
	}
	if _, err := sets.Apply(context.Background()); err != nil {
		panic(err)
	}
	name, _ := sets.KernelName("allow")
	fmt.Println("rule: -m set --match-set", name, "src -j ACCEPT")
	fmt.Print(lastScript(k))
	// Output:
	// rule: -m set --match-set np4-allow src -j ACCEPT
	// create np4-allow hash:net family inet maxelem 1048576 -exist
	// add np4-allow 10.0.0.1
	// add np4-allow 192.168.0.0/16
}

// A driver manages the sets of the namespace it is given: open the
// namespace once with package kernel and hand the *kernel.Namespace to
// every driver as its Kernel (nil manages the process's own namespace).
func ExampleNew_namespace() {
	ns, err := kernel.Open("/run/netns/pod1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	sets, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "allow", Type: netfilter.HashNet},
		[]netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))})
	if _, err := sets.Apply(context.Background()); err != nil {
		fmt.Println(err)
	}
}

func ExampleNew() {
	sets, err := ipsets.New(ipsets.Options{Family: ipsets.IPv6, Prefix: "np6-"})
	fmt.Println(sets.Name(), sets.Prefix(), sets.Family(), sets.Phase(), err)

	_, err = ipsets.New(ipsets.Options{Family: ipsets.IPv6, Prefix: "a prefix"})
	fmt.Println(errors.Is(err, ipsets.ErrInvalidOptions))
	// Output:
	// ipsets-np6- np6- IPv6 ipsets-update <nil>
	// true
}

// Apply writes only the difference, in one ipset restore: additions before
// deletions, so that a member that stays is never missing. (When most of a
// large set changes, it fills a new set and swaps it in instead.)
func ExampleIPSets_Apply() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	web := func(last byte) netfilter.Member {
		return netfilter.IPPortMember(netip.AddrFrom4([4]byte{10, 0, 0, last}), netfilter.ProtoTCP, 443)
	}
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "web", Type: netfilter.HashIPPort}, []netfilter.Member{web(1), web(2)})
	_, _ = sets.Apply(context.Background())

	_ = sets.AddMembers("web", []netfilter.Member{web(3)})
	_ = sets.RemoveMembers("web", []netfilter.Member{web(1)})
	_, _ = sets.Apply(context.Background())
	fmt.Print(lastScript(k))

	before := k.CountCalls("restore")
	_, _ = sets.Apply(context.Background())
	fmt.Println("restores when nothing changed:", k.CountCalls("restore")-before)
	// Output:
	// add np4-web 10.0.0.3,tcp:443 -exist
	// del np4-web 10.0.0.1,tcp:443 -exist
	// restores when nothing changed: 0
}

// A change of size is written into a temporary set that is swapped in, so
// rules matching the set never see it missing or half filled.
func ExampleIPSets_AddOrReplaceSet() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	a := netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 1000}, []netfilter.Member{a})
	_, _ = sets.Apply(context.Background())

	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP, MaxSize: 5000}, []netfilter.Member{a})
	_, _ = sets.Apply(context.Background())
	fmt.Print(lastScript(k))
	// Output:
	// create np4-~0 hash:ip family inet maxelem 5000
	// add np4-~0 10.0.0.1
	// swap np4-s np4-~0
	// destroy np4-~0
}

// A set that a rule still references is destroyed only once the
// reference is gone. Meanwhile it fails on its own: the error wraps
// dataplane.ErrPartial (the loop carries on) and ErrSetInUse, and
// RetryAfter says when it is tried again.
func ExampleIPSets_ApplyDeletions() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	clk := clock.NewFake(time.Unix(0, 0))
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns, Clock: clk})
	ctx := context.Background()
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "old", Type: netfilter.HashIP}, nil)
	_, _ = sets.Apply(ctx)
	_ = k.SetReferences("np4-old", 1) // an iptables rule matches the set

	_ = sets.RemoveSet("old")
	res, err := sets.ApplyDeletions(ctx)
	fmt.Println(k.Names(), res.RetryAfter, errors.Is(err, dataplane.ErrPartial), errors.Is(err, netfilter.ErrSetInUse))

	_ = k.SetReferences("np4-old", 0) // the rule writer dropped the rule
	clk.Advance(res.RetryAfter)
	res, err = sets.ApplyDeletions(ctx)
	fmt.Println(k.Names(), res.RetryAfter, err)
	// Output:
	// [np4-old] 100ms true true
	// [] 0s <nil>
}

// QueueResync makes the next Apply compare the kernel with the desired
// state and repair what was changed behind the driver's back.
func ExampleIPSets_QueueResync() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	ctx := context.Background()
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP},
		[]netfilter.Member{netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))})
	_, _ = sets.Apply(ctx)

	_ = k.Exec("add", "np4-s", "10.6.6.6") // an administrator's edit
	_ = k.Exec("create", "np4-stray", "hash:ip")
	sets.QueueResync()
	_, _ = sets.Apply(ctx)
	_, _ = sets.ApplyDeletions(ctx)
	fmt.Print(k.Save())
	// Output:
	// create np4-s hash:ip family inet hashsize 1024 maxelem 1048576 bucketsize 12 initval 0x5eed0001
	// add np4-s 10.0.0.1
}

func ExampleIPSets_KernelName() {
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-"})
	name, err := sets.KernelName("allow-ingress")
	fmt.Println(name, err)
	_, err = sets.KernelName("a-name-that-is-far-too-long-for-ipset")
	fmt.Println(errors.Is(err, netfilter.ErrSetNameTooLong))
	// Output:
	// np4-allow-ingress <nil>
	// true
}

func ExampleIPSets_Members() {
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv6, Prefix: "np6-"})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashNet}, []netfilter.Member{
		netfilter.NetMember(netip.MustParsePrefix("fd00:1::/64")),
		netfilter.IPMember(netip.MustParseAddr("fd00::1")),
	})
	members, ok := sets.Members("s")
	fmt.Println(members, ok)
	meta, _ := sets.Metadata("s")
	fmt.Printf("%+v\n", meta)
	fmt.Println(sets.Names())
	// Output:
	// [fd00::1 fd00:1::/64] true
	// {Name:s Type:hash:net Family:IPv6 MaxSize:1048576 Range:0}
	// [s]
}

// Bad input is rejected before anything changes.
func ExampleIPSets_AddMembers() {
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-"})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, nil)
	err := sets.AddMembers("s", []netfilter.Member{netfilter.IPMember(netip.MustParseAddr("fd00::1"))})
	fmt.Println(err)
	err = sets.AddMembers("s", []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))})
	fmt.Println(err)
	// Output:
	// ipsets: wrong IP family: fd00::1 is IPv6, the set is IPv4 (set "s", member 0)
	// ipsets: invalid member: 10.0.0.0/8 does not fit a hash:ip set (set "s", member 0)
}

func ExampleIPSets_RemoveSet() {
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-"})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP}, nil)
	fmt.Println(sets.RemoveSet("s"), sets.Names())
	// Output: <nil> []
}

// OnMemberChange reports what was written, for mirrors such as BPF maps.
func ExampleOptions_onMemberChange() {
	var log []string
	sets, _ := ipsets.New(ipsets.Options{
		Family: ipsets.IPv4, Prefix: "np4-", Kernel: kernelfake.New(kernelfake.Options{}),
		OnMemberChange: func(c netfilter.MemberChange) {
			log = append(log, fmt.Sprintf("%s %v added=%v", c.Set, c.Member, c.Added))
		},
	})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "p", Type: netfilter.BitmapPort, Range: netfilter.PortRange{First: 1, Last: 1024}},
		[]netfilter.Member{netfilter.PortMember(22), netfilter.PortMember(80)})
	_, _ = sets.Apply(context.Background())
	_ = sets.RemoveMembers("p", []netfilter.Member{netfilter.PortMember(22)})
	_, _ = sets.Apply(context.Background())
	slices.Sort(log[:2])
	fmt.Println(strings.Join(log, "\n"))
	// Output:
	// p 22 added=true
	// p 80 added=true
	// p 22 added=false
}

// A failed restore that belongs to no set is ErrRestore wrapping a
// command.RestoreError, which keeps the input, the failing line and
// ipset's message; the next Apply re-reads the kernel and converges.
func ExampleIPSets_Apply_restoreError() {
	ns := kernelfake.New(kernelfake.Options{})
	k := ns.IPSets()
	sets, _ := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: ns})
	_ = sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "s", Type: netfilter.HashIP},
		[]netfilter.Member{netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))})
	k.FailNext(1, "restore", "Kernel error received: Cannot allocate memory")
	_, err := sets.Apply(context.Background())
	var rerr *command.RestoreError
	if errors.As(err, &rerr) {
		fmt.Println(errors.Is(err, ipsets.ErrRestore), rerr.Line)
	}
	fmt.Println(err)
	_, err = sets.Apply(context.Background())
	fmt.Println(err, k.Names())
	// Output:
	// true 0
	// ipsets: ipset restore failed: ipset restore: ipset v7.17: Kernel error received: Cannot allocate memory
	// input:
	//       1  create np4-s hash:ip family inet maxelem 1048576 -exist
	//       2  add np4-s 10.0.0.1
	// <nil> [np4-s]
}

func ExampleFamilyName() {
	fmt.Println(ipsets.FamilyName(ipsets.IPv4), ipsets.FamilyName(ipsets.IPv6))
	// Output: inet inet6
}
