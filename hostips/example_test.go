package hostips_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// The interface monitor's reports, sent as messages, become the set's
// members. Here the messages are sent by hand; an agent sends them from
// ifacemonitor's OnAddrs (see the package documentation). The namespace is
// kernelfake's.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
	m, err := hostips.New(hostips.Options{Family: ipfamily.IPv4, Sets: sets, Exclude: []string{`^kube-ipvs0$`}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(sets)
	for _, msg := range []hostips.InterfaceAddrs{
		{Name: "lo", Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
		{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("fe80::1/64")}},
		{Name: "kube-ipvs0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")}},
	} {
		_ = loop.Send(ctx, msg)
	}
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	members, _ := ns.IPSets().Members(m.SetName())
	fmt.Println(m.SetName(), members)
	// Output:
	// np4-host-ips [127.0.0.1 198.18.0.1]
}

// New refuses a set name that would not fit the kernel once prefixed.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv6, Prefix: "np6-", Kernel: ns})
	_, err := hostips.New(hostips.Options{Family: ipfamily.IPv6, Sets: sets, SetName: "the-addresses-of-this-very-host"})
	fmt.Println(err)
	// Output:
	// hostips: invalid options: SetName: set name too long: "np6-the-addresses-of-this-very-host" is 35 bytes with prefix "np6-", the kernel allows 31
}

// Validate checks a message before it is sent.
func ExampleInterfaceAddrs_Validate() {
	fmt.Println(hostips.InterfaceAddrs{Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")}}.Validate())
	// Output:
	// hostips: invalid message: no interface name
}

// Addrs shows what the set holds once applied.
func ExampleManager_Addrs() {
	ns := kernelfake.New(kernelfake.Options{})
	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv6, Prefix: "np6-", Kernel: ns})
	m, _ := hostips.New(hostips.Options{Family: ipfamily.IPv6, Sets: sets})
	m.OnUpdate(hostips.InterfaceAddrs{Name: "eth0", Addrs: []netip.Prefix{
		netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("fd00::1/64"), netip.MustParsePrefix("fe80::1/64")}})
	fmt.Println(m.Name(), m.Addrs())
	// Output:
	// hostips-v6 [fd00::1]
}
