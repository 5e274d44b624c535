package iptables_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodeplane/nodeplane/iptables"
)

// showRuleArgs renders r for v and prints the arguments, or the error.
func showRuleArgs(r iptables.Rule, v iptables.IPVersion) {
	args, err := r.Args(v)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(strings.Join(args, " "))
}

func ExampleRule_Args() {
	r := iptables.Rule{
		Match: iptables.Match{
			iptables.Protocol(iptables.ProtoTCP),
			iptables.DestPorts(iptables.Port(443)),
			iptables.SourceNet(netip.MustParsePrefix("10.0.0.0/8")),
		},
		Action:   iptables.Accept(),
		Comments: []string{"web"},
	}
	args, err := r.Args(iptables.IPv4)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", args)
	// Output:
	// ["-s" "10.0.0.0/8" "-p" "tcp" "-m" "tcp" "--dport" "443" "-m" "comment" "--comment" "web" "-j" "ACCEPT"]
}

func ExampleRule_Validate() {
	portsWithoutProtocol := iptables.Rule{
		Match:  iptables.Match{iptables.DestPorts(iptables.Port(53))},
		Action: iptables.Accept(),
	}
	err := portsWithoutProtocol.Validate(iptables.IPv4)
	fmt.Println(errors.Is(err, iptables.ErrInvalidRule), err)

	v4InV6 := iptables.Rule{
		Match:  iptables.Match{iptables.SourceNet(netip.MustParsePrefix("10.0.0.0/8"))},
		Action: iptables.Drop(),
	}
	err = v4InV6.Validate(iptables.IPv6)
	fmt.Println(errors.Is(err, iptables.ErrWrongIPVersion))
	// Output:
	// true iptables: invalid rule: port match without tcp/udp/sctp protocol (criterion 0)
	// true
}

func ExampleSourceNet() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{
			iptables.SourceNet(netip.MustParsePrefix("fd00::/64")),
			iptables.NotDestNet(netip.MustParsePrefix("fd00:1::/64")),
		},
		Action: iptables.Return(),
	}, iptables.IPv6)
	// A prefix with host bits set is refused, not masked.
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.SourceNet(netip.MustParsePrefix("fd00::1/64"))},
		Action: iptables.Return(),
	}, iptables.IPv6)
	// Output:
	// -s fd00::/64 ! -d fd00:1::/64 -j RETURN
	// error: iptables: invalid rule: src prefix: ipfamily: prefix has host bits set: fd00::1/64 (the network is fd00::/64) (criterion 0)
}

func ExampleDestPorts() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{
			iptables.Protocol(iptables.ProtoUDP),
			iptables.NotSourcePorts(iptables.Port(53)),
			iptables.DestPorts(iptables.Port(53), iptables.Ports(5353, 5355)),
		},
		Action: iptables.Drop(),
	}, iptables.IPv4)
	// Output:
	// -p udp -m udp ! --sport 53 -m multiport --dports 53,5353:5355 -j DROP
}

func ExampleInInterface() {
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.InInterface("cali+"), iptables.NotOutInterface("eth0")},
		Action: iptables.Accept(),
	}, iptables.IPv4)
	// Output:
	// -i cali+ ! -o eth0 -j ACCEPT
}

func ExampleMarkMatches() {
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.MarkMatches(0x10000, 0x10000)},
		Action: iptables.ClearMark(0x10000),
	}, iptables.IPv4)
	// Output:
	// -m mark --mark 0x10000/0x10000 -j MARK --set-xmark 0x0/0x10000
}

func ExampleIPSetMatch() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{
			iptables.NotSourceIPSet("np-trusted"),
			// A hash:ip,port set of destination address and port.
			iptables.IPSetMatch("np-services", iptables.Dst, iptables.Dst),
		},
		Action: iptables.Jump("NP-SERVICES"),
	}, iptables.IPv4)
	// Output:
	// -m set ! --match-set np-trusted src -m set --match-set np-services dst,dst -j NP-SERVICES
}

func ExampleConntrackState() {
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.ConntrackState(iptables.CTStateEstablished, iptables.CTStateRelated)},
		Action: iptables.Accept(),
	}, iptables.IPv6)
	// Output:
	// -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
}

func ExampleAddrTypeMatch() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{
			iptables.AddrTypeMatch{Types: iptables.AddrTypeLocal, Dir: iptables.Dst, LimitIfaceIn: true},
		},
		Action: iptables.Goto("NP-FROM-HOST"),
	}, iptables.IPv4)
	// Output:
	// -m addrtype --dst-type LOCAL --limit-iface-in -g NP-FROM-HOST
}

func ExampleICMPType() {
	showRuleArgs(iptables.Rule{Match: iptables.Match{iptables.ICMPType(8)}, Action: iptables.Accept()}, iptables.IPv4)
	showRuleArgs(iptables.Rule{Match: iptables.Match{iptables.ICMPv6TypeCode(1, 4)}, Action: iptables.Accept()}, iptables.IPv6)
	showRuleArgs(iptables.Rule{Match: iptables.Match{iptables.ICMPType(8)}, Action: iptables.Accept()}, iptables.IPv6)
	// Output:
	// -p icmp -m icmp --icmp-type 8 -j ACCEPT
	// -p ipv6-icmp -m icmp6 --icmpv6-type 1/4 -j ACCEPT
	// error: iptables: invalid rule: icmp type match in an IPv6 rule (criterion 0)
}

func ExampleReject() {
	tcp := iptables.Match{iptables.Protocol(iptables.ProtoTCP)}
	showRuleArgs(iptables.Rule{Action: iptables.Reject(iptables.RejectPortUnreachable)}, iptables.IPv6)
	showRuleArgs(iptables.Rule{Match: tcp, Action: iptables.Reject(iptables.RejectTCPReset)}, iptables.IPv4)
	// Output:
	// -j REJECT --reject-with icmp6-port-unreachable
	// -p tcp -j REJECT --reject-with tcp-reset
}

func ExampleJump() {
	a := iptables.Jump("NP-FORWARD")
	fmt.Println(a.JumpTarget())
	showRuleArgs(iptables.Rule{Action: iptables.Jump(strings.Repeat("X", 29))}, iptables.IPv4)
	// Output:
	// NP-FORWARD
	// error: iptables: invalid rule: jump target "XXXXXXXXXXXXXXXXXXXXXXXXXXXXX" must be 1 to 28 characters
}

func ExampleSetMaskedMark() {
	showRuleArgs(iptables.Rule{Action: iptables.SetMaskedMark(0x4000, 0xc000)}, iptables.IPv4)
	showRuleArgs(iptables.Rule{Action: iptables.SetMark(0x1)}, iptables.IPv4)
	showRuleArgs(iptables.Rule{Action: iptables.SetMaskedMark(0x1, 0xc000)}, iptables.IPv4)
	// Output:
	// -j MARK --set-xmark 0x4000/0xc000
	// -j MARK --set-xmark 0x1/0xffffffff
	// error: iptables: invalid rule: set mark: mark 0x1 has bits outside mask 0xc000
}

func ExampleMasquerade() {
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.NotOutInterface("cali+")},
		Action: iptables.Masquerade(iptables.MasqueradeOptions{RandomFully: true}),
	}, iptables.IPv4)
	// Output:
	// ! -o cali+ -j MASQUERADE --random-fully
}

func ExampleSNAT() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{iptables.Protocol(iptables.ProtoUDP)},
		Action: iptables.SNAT(netip.MustParseAddr("2001:db8::1"),
			iptables.SNATOptions{Ports: iptables.Ports(20000, 29999), RandomFully: true}),
	}, iptables.IPv6)
	// Output:
	// -p udp -j SNAT --to-source [2001:db8::1]:20000-29999 --random-fully
}

func ExampleDNAT() {
	showRuleArgs(iptables.Rule{
		Match: iptables.Match{
			iptables.Protocol(iptables.ProtoTCP),
			iptables.DestNet(netip.MustParsePrefix("fd00:96::10/128")),
			iptables.DestPorts(iptables.Port(80)),
		},
		Action: iptables.DNAT(netip.MustParseAddrPort("[fd00:10::7]:8080")),
	}, iptables.IPv6)
	showRuleArgs(iptables.Rule{
		Action: iptables.DNAT(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.7"), 0)),
	}, iptables.IPv4)
	// Output:
	// -d fd00:96::10/128 -p tcp -m tcp --dport 80 -j DNAT --to-destination [fd00:10::7]:8080
	// -j DNAT --to-destination 10.0.0.7
}

func ExampleLog() {
	r := iptables.Rule{
		Action: iptables.Log(iptables.LogOptions{Prefix: "np drop: ", Level: iptables.LogLevelInfo}),
	}
	args, err := r.Args(iptables.IPv4)
	fmt.Printf("%q %v\n", args, err)
	// Output:
	// ["-j" "LOG" "--log-prefix" "np drop: " "--log-level" "6"] <nil>
}

func ExampleNFLOG() {
	showRuleArgs(iptables.Rule{
		Action: iptables.NFLOG(iptables.NFLOGOptions{Group: 2, Prefix: "np", Size: 80}),
	}, iptables.IPv6)
	// Output:
	// -j NFLOG --nflog-prefix np --nflog-group 2 --nflog-size 80
}

func ExampleNoTrack() {
	showRuleArgs(iptables.Rule{
		Match:  iptables.Match{iptables.Protocol(iptables.ProtoUDP), iptables.DestPorts(iptables.Port(53))},
		Action: iptables.NoTrack(),
	}, iptables.IPv4)
	// Output:
	// -p udp -m udp --dport 53 -j CT --notrack
}
