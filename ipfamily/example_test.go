package ipfamily_test

import (
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
)

func ExampleOf() {
	for _, s := range []string{"10.0.0.1", "fd00::1", "::ffff:10.0.0.1"} {
		fmt.Println(s, ipfamily.Of(netip.MustParseAddr(s)))
	}
	// Output:
	// 10.0.0.1 IPv4
	// fd00::1 IPv6
	// ::ffff:10.0.0.1 IPv6
}

func ExampleFamily_Check() {
	err := ipfamily.IPv6.Check(netip.MustParseAddr("10.0.0.1"))
	fmt.Println(err)
	// Output: ipfamily: address of the wrong family: 10.0.0.1 is not an IPv6 address
}

func ExampleFamily_CheckPrefix() {
	fmt.Println(ipfamily.IPv4.CheckPrefix(netip.MustParsePrefix("10.0.0.0/8")))
	// Output: <nil>
}

func ExampleFamily_CheckNet() {
	fmt.Println(ipfamily.IPv4.CheckNet(netip.MustParsePrefix("10.0.0.0/24")))
	fmt.Println(ipfamily.IPv4.CheckNet(netip.MustParsePrefix("10.0.0.1/24")))
	fmt.Println(ipfamily.IPv6.CheckNet(netip.MustParsePrefix("fd00::1/64")))
	// Output:
	// <nil>
	// ipfamily: prefix has host bits set: 10.0.0.1/24 (the network is 10.0.0.0/24)
	// ipfamily: prefix has host bits set: fd00::1/64 (the network is fd00::/64)
}

func ExampleFamily_AF() {
	for _, f := range ipfamily.All {
		fmt.Println(f, f.AF(), f.Bits())
	}
	// Output:
	// IPv4 2 32
	// IPv6 10 128
}

func ExampleFromAF() {
	f, ok := ipfamily.FromAF(10)
	fmt.Println(f, ok)
	// Output: IPv6 true
}

func ExampleFamily_Contains() {
	fmt.Println(ipfamily.IPv4.Contains(netip.MustParseAddr("192.0.2.7")))
	// Output: true
}

func ExampleFamily_ContainsPrefix() {
	fmt.Println(ipfamily.IPv4.ContainsPrefix(netip.MustParsePrefix("2001:db8::/32")))
	// Output: false
}

func ExampleFamily_Valid() {
	var unset ipfamily.Family
	fmt.Println(unset.Valid(), unset)
	// Output: false Family(0)
}
