package netfilter_test

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/netfilter"
)

func ExampleParseMember() {
	for _, in := range []struct {
		t netfilter.SetType
		s string
	}{
		{netfilter.HashNet, "10.1.0.0/16"},
		{netfilter.HashNet, "10.0.0.1/32"},
		{netfilter.HashIPPort, "fd00::1,80"},
		{netfilter.HashNetNet, "10.0.0.0/8,192.168.0.0/16"},
		{netfilter.BitmapPort, "8080"},
		{netfilter.HashIP, "10.0.0.0/24"},
		{netfilter.HashNet, "10.1.2.3/16"},
	} {
		m, err := netfilter.ParseMember(in.t, in.s)
		fmt.Println(m, err)
	}
	// Output:
	// 10.1.0.0/16 <nil>
	// 10.0.0.1 <nil>
	// fd00::1,tcp:80 <nil>
	// 10.0.0.0/8,192.168.0.0/16 <nil>
	// 8080 <nil>
	// invalid(zero Member) netfilter: invalid member: 10.0.0.0/24 does not fit a hash:ip set
	// invalid(zero Member) netfilter: invalid member: 10.1.2.3/16 has host bits set (the network is 10.1.0.0/16) ("10.1.2.3/16")
}

func ExampleIPMember() {
	fmt.Println(netfilter.IPMember(netip.MustParseAddr("10.0.0.1")))
	fmt.Println(netfilter.IPMember(netip.MustParseAddr("fe80::1%eth0")).Err())
	// Output:
	// 10.0.0.1
	// netfilter: invalid member: address has a zone
}

func ExampleNetMember() {
	a := netfilter.NetMember(netip.MustParsePrefix("10.0.0.1/32"))
	b := netfilter.IPMember(netip.MustParseAddr("10.0.0.1"))
	fmt.Println(a, a == b)
	fmt.Println(netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8")))
	fmt.Println(netfilter.NetMember(netip.MustParsePrefix("10.1.2.3/8")).Err())
	// Output:
	// 10.0.0.1 true
	// 10.0.0.0/8
	// netfilter: invalid member: 10.1.2.3/8 has host bits set (the network is 10.0.0.0/8)
}

func ExampleIPPortMember() {
	m := netfilter.IPPortMember(netip.MustParseAddr("fd00::53"), netfilter.ProtoUDP, 53)
	fmt.Println(m, m.Addr(), m.Protocol(), m.Port())
	// Output: fd00::53,udp:53 fd00::53 udp 53
}

func ExampleNetNetMember() {
	m := netfilter.NetNetMember(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"))
	fmt.Println(m, m.Prefix(), m.Second())
	// Output: 10.0.0.0/8,10.1.0.0/16 10.0.0.0/8 10.1.0.0/16
}

func ExamplePortMember() {
	fmt.Println(netfilter.PortMember(443))
	// Output: 443
}

func ExampleMember_Compare() {
	ms := []netfilter.Member{
		netfilter.IPMember(netip.MustParseAddr("10.0.0.10")),
		netfilter.IPMember(netip.MustParseAddr("10.0.0.9")),
	}
	slices.SortFunc(ms, netfilter.Member.Compare)
	fmt.Println(ms)
	// Output: [10.0.0.9 10.0.0.10]
}

// A hash:net set cannot hold a /0: NetMembers gives its two halves.
func ExampleNetMembers() {
	fmt.Println(netfilter.NetMembers(netip.MustParsePrefix("10.244.0.0/16")))
	fmt.Println(netfilter.NetMembers(netip.MustParsePrefix("0.0.0.0/0")))
	fmt.Println(netfilter.NetMembers(netip.MustParsePrefix("::/0")))
	// Output:
	// [10.244.0.0/16]
	// [0.0.0.0/1 128.0.0.0/1]
	// [::/1 8000::/1]
}
