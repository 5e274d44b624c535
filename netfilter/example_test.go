package netfilter_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func ExampleRule_Validate() {
	r := netfilter.Rule{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("fd00::/8"))},
		Action:  netfilter.Drop(),
	}
	fmt.Println(r.Validate(ipfamily.IPv6))
	err := r.Validate(ipfamily.IPv4)
	fmt.Println(err)
	fmt.Println(errors.Is(err, netfilter.ErrInvalidRule), errors.Is(err, netfilter.ErrWrongFamily))

	r.Matches = []netfilter.Match{netfilter.DestPorts(netfilter.Port(53))}
	fmt.Println(r.Validate(ipfamily.IPv6))
	// Output:
	// <nil>
	// netfilter: invalid rule: src prefix fd00::/8 in an IPv4 rule (criterion 0)
	// true true
	// netfilter: invalid rule: port match without tcp/udp/sctp protocol (criterion 0)
}

func ExampleRule_JumpTarget() {
	fmt.Printf("%q\n", netfilter.Rule{Action: netfilter.Goto("np-svc")}.JumpTarget())
	fmt.Printf("%q\n", netfilter.Rule{Action: netfilter.Accept()}.JumpTarget())
	// Output:
	// "np-svc"
	// ""
}

func ExampleNot() {
	notLocal := netfilter.Not(netfilter.DestAddrType(netfilter.AddrTypeLocal))
	fmt.Printf("%+v\n", notLocal)
	// Output: {Types:LOCAL Dir:dst Negate:true LimitIfaceIn:false LimitIfaceOut:false}
}

func ExampleIPSet() {
	// A hash:ip,port set of destination address and port.
	m := netfilter.IPSet("np-svc-v4", netfilter.Dst, netfilter.Dst)
	r := netfilter.Rule{Matches: []netfilter.Match{m}, Action: netfilter.Accept()}
	fmt.Println(r.Validate(ipfamily.IPv4))
	// Output: <nil>
}

func ExampleDNAT() {
	// DNAT to a port needs a protocol with ports.
	r := netfilter.Rule{
		Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(80))},
		Action:  netfilter.DNAT(netip.MustParseAddrPort("10.96.0.10:8080")),
	}
	fmt.Println(r.Validate(ipfamily.IPv4))
	fmt.Printf("%+v\n", r.Action)
	// Output:
	// <nil>
	// {To:10.96.0.10 Ports:8080}
}

func ExampleValidateChainName() {
	fmt.Println(netfilter.ValidateChainName("np-fw"))
	fmt.Println(netfilter.ValidateChainName("np fw"))
	// Output:
	// <nil>
	// netfilter: invalid chain name: "np fw" contains ' '
}
