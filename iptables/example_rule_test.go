package iptables_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/netfilter"
)

// showRuleArgs renders r for f and prints the arguments, or the error.
func showRuleArgs(r netfilter.Rule, f ipfamily.Family) {
	args, err := iptables.RuleArgs(r, f)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(strings.Join(args, " "))
}

func ExampleRuleArgs() {
	r := netfilter.Rule{
		Matches: []netfilter.Match{
			netfilter.Protocol(netfilter.ProtoTCP),
			netfilter.DestPorts(netfilter.Port(443)),
			netfilter.SourceNet(netip.MustParsePrefix("10.0.0.0/8")),
		},
		Action:   netfilter.Accept(),
		Comments: []string{"web"},
	}
	args, err := iptables.RuleArgs(r, ipfamily.IPv4)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", args)
	// Output:
	// ["-s" "10.0.0.0/8" "-p" "tcp" "-m" "tcp" "--dport" "443" "-m" "comment" "--comment" "web" "-j" "ACCEPT"]
}

// How each criterion and action of the rule model renders.
func ExampleRuleArgs_model() {
	tcp, udp := netfilter.Protocol(netfilter.ProtoTCP), netfilter.Protocol(netfilter.ProtoUDP)
	v6 := []netfilter.Rule{
		{Matches: []netfilter.Match{
			netfilter.SourceNet(netip.MustParsePrefix("fd00::/64")),
			netfilter.Not(netfilter.DestNet(netip.MustParsePrefix("fd00:1::/64"))),
		}, Action: netfilter.Return()},
		{Matches: []netfilter.Match{netfilter.ConntrackState(netfilter.CTStateEstablished, netfilter.CTStateRelated)}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{netfilter.ICMPv6TypeCode(1, 4)}, Action: netfilter.Accept()},
		{Action: netfilter.Reject(netfilter.RejectPortUnreachable)},
		{Matches: []netfilter.Match{udp}, Action: netfilter.ActionSNAT{
			To: netip.MustParseAddr("2001:db8::1"), Ports: netfilter.Ports(20000, 29999), RandomFully: true}},
		{Matches: []netfilter.Match{tcp, netfilter.DestNet(netip.MustParsePrefix("fd00:96::10/128")), netfilter.DestPorts(netfilter.Port(80))},
			Action: netfilter.DNAT(netip.MustParseAddrPort("[fd00:10::7]:8080"))},
		{Action: netfilter.ActionNFLOG{Group: 2, Prefix: "np", Size: 80}},
	}
	for _, r := range v6 {
		showRuleArgs(r, ipfamily.IPv6)
	}
	v4 := []netfilter.Rule{
		{Matches: []netfilter.Match{udp, netfilter.Not(netfilter.SourcePorts(netfilter.Port(53))),
			netfilter.DestPorts(netfilter.Port(53), netfilter.Ports(5353, 5355))}, Action: netfilter.Drop()},
		{Matches: []netfilter.Match{netfilter.InInterface("cali+"), netfilter.Not(netfilter.OutInterface("eth0"))}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{netfilter.Mark(0x10000, 0x10000)}, Action: netfilter.ClearMark(0x10000)},
		{Matches: []netfilter.Match{netfilter.Not(netfilter.SourceIPSet("np-trusted")),
			netfilter.IPSet("np-services", netfilter.Dst, netfilter.Dst)}, Action: netfilter.Jump("NP-SERVICES")},
		{Matches: []netfilter.Match{netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true}},
			Action: netfilter.Goto("NP-FROM-HOST")},
		{Matches: []netfilter.Match{netfilter.ICMPType(8)}, Action: netfilter.Accept()},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectTCPReset)},
		{Action: netfilter.SetMaskedMark(0x4000, 0xc000)},
		{Matches: []netfilter.Match{netfilter.Not(netfilter.OutInterface("cali+"))}, Action: netfilter.ActionMasquerade{RandomFully: true}},
		{Action: netfilter.DNAT(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.7"), 0))},
		{Action: netfilter.ActionLog{Prefix: "np drop: ", Level: netfilter.LogLevelInfo}},
		{Matches: []netfilter.Match{udp, netfilter.DestPorts(netfilter.Port(53))}, Action: netfilter.NoTrack()},
	}
	for _, r := range v4 {
		showRuleArgs(r, ipfamily.IPv4)
	}
	// Output:
	// -s fd00::/64 ! -d fd00:1::/64 -j RETURN
	// -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
	// -p ipv6-icmp -m icmp6 --icmpv6-type 1/4 -j ACCEPT
	// -j REJECT --reject-with icmp6-port-unreachable
	// -p udp -j SNAT --to-source [2001:db8::1]:20000-29999 --random-fully
	// -d fd00:96::10/128 -p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00:10::7]:8080
	// -j NFLOG --nflog-prefix np --nflog-group 2 --nflog-size 80
	// -p udp -m udp ! --sport 53 -m multiport --dports 53,5353:5355 -j DROP
	// -i cali+ ! -o eth0 -j ACCEPT
	// -m mark --mark 0x10000/0x10000 -j MARK --set-xmark 0x0/0x10000
	// -m set ! --match-set np-trusted src -m set --match-set np-services dst,dst -j NP-SERVICES
	// -m addrtype --dst-type LOCAL --limit-iface-in -g NP-FROM-HOST
	// -p icmp -m icmp --icmp-type 8 -j ACCEPT
	// -p tcp -j REJECT --reject-with tcp-reset
	// -j MARK --set-xmark 0x4000/0xc000
	// ! -o cali+ -j MASQUERADE --random-fully
	// -j DNAT --to-destination 10.0.0.7
	// -j LOG --log-prefix np drop:  --log-level 6
	// -p udp -m udp --dport 53 -j CT --notrack
}

// A rule the model refuses, or that iptables cannot take, is an error
// under the package's prefix that matches netfilter.ErrInvalidRule.
func ExampleRuleArgs_refused() {
	showRuleArgs(netfilter.Rule{
		Matches: []netfilter.Match{netfilter.SourceNet(netip.MustParsePrefix("fd00::1/64"))},
		Action:  netfilter.Return(),
	}, ipfamily.IPv6)
	showRuleArgs(netfilter.Rule{Matches: []netfilter.Match{netfilter.ICMPType(8)}, Action: netfilter.Accept()}, ipfamily.IPv6)
	showRuleArgs(netfilter.Rule{Action: netfilter.Jump(strings.Repeat("X", 29))}, ipfamily.IPv4)
	showRuleArgs(netfilter.Rule{Action: netfilter.Log(strings.Repeat("x", 30))}, ipfamily.IPv4)
	// Output:
	// error: iptables: invalid rule: src prefix: ipfamily: prefix has host bits set: fd00::1/64 (the network is fd00::/64) (criterion 0)
	// error: iptables: invalid rule: icmp type match in an IPv6 rule (criterion 0)
	// error: iptables: invalid rule: jump target "XXXXXXXXXXXXXXXXXXXXXXXXXXXXX" must be 1 to 28 characters
	// error: iptables: invalid rule: log prefix is 30 bytes, longer than 29
}
