package netfilter_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

// embedded is a type of another package that has the criteria's marker
// method by embedding one: it is not one of the package's values.
type embedded struct{ netfilter.MatchMark }

func TestValidateErrors(t *testing.T) {
	m := func(c ...netfilter.Match) []netfilter.Match { return c }
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	var nilNet *netfilter.MatchNet
	tests := []struct {
		name string
		v    ipfamily.Family
		rule netfilter.Rule
		is   error // the specific sentinel, besides ErrInvalidRule
		msg  string
	}{
		{"unknown family", 5, netfilter.Rule{Action: netfilter.Accept()}, nil, "unknown IP family"},
		{"no action", ipfamily.IPv4, netfilter.Rule{}, nil, "no action"},
		{"action pointer", ipfamily.IPv4, netfilter.Rule{Action: &netfilter.ActionJump{Chain: "C"}}, nil, "action is a *netfilter.ActionJump, not one of the Action values"},
		{"nil criterion", ipfamily.IPv4, netfilter.Rule{Matches: m(nil), Action: netfilter.Accept()}, nil, "no criterion (criterion 0)"},
		{"nil criterion pointer", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, nilNet), Action: netfilter.Accept()}, nil, "criterion 1 is a *netfilter.MatchNet"},
		{"criterion pointer", ipfamily.IPv4, netfilter.Rule{Matches: m(&netfilter.MatchProto{Proto: netfilter.ProtoTCP}), Action: netfilter.Accept()}, nil, "criterion 0 is a *netfilter.MatchProto, not one of the Match values"},
		{"foreign criterion", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, embedded{}), Action: netfilter.Accept()}, nil, "criterion 1 is a netfilter_test.embedded"},
		{"zero prefix", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceNet(netip.Prefix{})), Action: netfilter.Accept()}, nil, "invalid or zero prefix"},
		{"bad prefix length", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestNet(netip.PrefixFrom(addr("10.0.0.0"), 33))), Action: netfilter.Accept()}, nil, "invalid or zero prefix"},
		{"net without direction", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.MatchNet{Prefix: pfx("10.0.0.0/8")}), Action: netfilter.Accept()}, nil, "Direction(0)"},
		{"v4 prefix in v6 rule", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.SourceNet(pfx("10.0.0.0/8"))), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "src prefix 10.0.0.0/8 in an IPv6 rule"},
		{"v6 prefix in v4 rule", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestNet(pfx("fd00::/8"))), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "in an IPv4 rule"},
		{"mixed families", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceNet(pfx("10.0.0.0/8")), netfilter.DestNet(pfx("fd00::/8"))), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "criterion 1"},
		{"host bits", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceNet(pfx("10.0.0.1/24"))), Action: netfilter.Accept()}, ipfamily.ErrHostBits, "10.0.0.1/24 (the network is 10.0.0.0/24)"},
		{"host bits v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.Not(netfilter.DestNet(pfx("fd00::1/64")))), Action: netfilter.Accept()}, ipfamily.ErrHostBits, "dst prefix: ipfamily: prefix has host bits set: fd00::1/64"},
		{"negated /0", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Not(netfilter.SourceNet(pfx("0.0.0.0/0")))), Action: netfilter.Accept()}, nil, "matches no packet"},
		{"two sources", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceNet(pfx("10.0.0.0/8")), netfilter.SourceNet(pfx("11.0.0.0/8"))), Action: netfilter.Accept()}, nil, "more than one src address"},
		{"two protocols", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.Protocol(netfilter.ProtoUDP)), Action: netfilter.Accept()}, nil, "more than one protocol"},
		{"protocol zero", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Protocol(0)), Action: netfilter.Accept()}, nil, "protocol 0"},
		{"icmp protocol in v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoICMP)), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "protocol icmp in an IPv6 rule"},
		{"icmpv6 protocol in v4", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoICMPv6)), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "ipv6-icmp in an IPv4 rule"},
		{"ports without protocol", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestPorts(netfilter.Port(80))), Action: netfilter.Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with icmp", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoICMP), netfilter.DestPorts(netfilter.Port(80))), Action: netfilter.Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with negated tcp", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Not(netfilter.Protocol(netfilter.ProtoTCP)), netfilter.SourcePorts(netfilter.Port(80))), Action: netfilter.Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"ports with udplite", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDPLite), netfilter.SourcePorts(netfilter.Port(80))), Action: netfilter.Accept()}, nil, "port match without tcp/udp/sctp protocol"},
		{"no ports", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.DestPorts()), Action: netfilter.Accept()}, nil, "without ports"},
		{"inverted range", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.DestPorts(netfilter.Ports(90, 80))), Action: netfilter.Accept()}, nil, "ends below its start"},
		{"two dest port criteria", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.DestPorts(netfilter.Port(1)), netfilter.Not(netfilter.DestPorts(netfilter.Port(2), netfilter.Port(3)))), Action: netfilter.Accept()}, nil, "more than one dst port criterion"},
		{"whole port range", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.SourcePorts(netfilter.Ports(0, 65535))), Action: netfilter.Accept()}, nil, "matches every port"},
		{"negated whole port range", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.Not(netfilter.DestPorts(netfilter.Ports(0, 65535)))), Action: netfilter.Accept()}, nil, "matches every port"},
		{"ports without direction", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.MatchPorts{Ranges: []netfilter.PortRange{netfilter.Port(1)}}), Action: netfilter.Accept()}, nil, "port match with Direction(0)"},
		{"interface too long", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("abcdefghijklmnop")), Action: netfilter.Accept()}, nil, "must be 1 to 15 characters"},
		{"empty interface", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.OutInterface("")), Action: netfilter.Accept()}, nil, "must be 1 to 15"},
		{"interface with slash", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("eth/0")), Action: netfilter.Accept()}, nil, "contains '/'"},
		{"interface with space", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("eth 0")), Action: netfilter.Accept()}, nil, "contains ' '"},
		{"interface inner plus", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("et+h")), Action: netfilter.Accept()}, nil, "trailing"},
		{"interface dot", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("..")), Action: netfilter.Accept()}, nil, "not a valid name"},
		{"two in interfaces", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.InInterface("a"), netfilter.Not(netfilter.InInterface("b"))), Action: netfilter.Accept()}, nil, "more than one input interface"},
		{"mark outside mask", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Mark(0x3, 0x1)), Action: netfilter.Accept()}, nil, "mark 0x3 has bits outside mask 0x1"},
		{"mark zero mask", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Mark(0, 0)), Action: netfilter.Accept()}, nil, "zero mask"},
		{"set name too long", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceIPSet(strings.Repeat("s", 32))), Action: netfilter.Accept()}, nil, "must be 1 to 31"},
		{"set name empty", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestIPSet("")), Action: netfilter.Accept()}, nil, "must be 1 to 31"},
		{"set name blank", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestIPSet("a b")), Action: netfilter.Accept()}, nil, "contains ' '"},
		{"set name dash", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestIPSet("-x")), Action: netfilter.Accept()}, nil, "starts with"},
		{"set without dimensions", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.IPSet("s")), Action: netfilter.Accept()}, nil, "0 dimensions"},
		{"set with 7 dimensions", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.IPSet("s", netfilter.Src, netfilter.Src, netfilter.Src, netfilter.Dst, netfilter.Dst, netfilter.Dst, netfilter.Dst)), Action: netfilter.Accept()}, nil, "7 dimensions"},
		{"set bad dimension", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.IPSet("s", netfilter.Src, 7)), Action: netfilter.Accept()}, nil, "dimension 2 has Direction(7)"},
		{"no ct state", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.ConntrackState()), Action: netfilter.Accept()}, nil, "without states"},
		{"unknown ct state", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.ConntrackState(1 << 9)), Action: netfilter.Accept()}, nil, "unknown states"},
		{"no address type", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.SourceAddrType(0)), Action: netfilter.Accept()}, nil, "without types"},
		{"unknown address type", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.DestAddrType(1 << 14)), Action: netfilter.Accept()}, nil, "unknown types"},
		{"address type both limits", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true, LimitIfaceOut: true}), Action: netfilter.Accept()}, nil, "both"},
		{"address type without direction", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal}), Action: netfilter.Accept()}, nil, "Direction(0)"},
		{"unicast in v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.DestAddrType(netfilter.AddrTypeUnicast | netfilter.AddrTypeLocal)), Action: netfilter.Drop()}, netfilter.ErrUnsupported, "UNICAST of IPv6 mean the address's class to ip6tables"},
		{"multicast in v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.SourceAddrType(netfilter.AddrTypeMulticast)), Action: netfilter.Drop()}, netfilter.ErrUnsupported, "MULTICAST of IPv6"},
		{"broadcast in v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.DestAddrType(netfilter.AddrTypeBroadcast | netfilter.AddrTypeLocal)), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "BROADCAST do not exist for IPv6"},
		{"icmp in v6", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.ICMPType(8)), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "icmp type match in an IPv6 rule"},
		{"icmpv6 in v4", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.ICMPv6TypeCode(1, 0)), Action: netfilter.Accept()}, netfilter.ErrWrongFamily, "ipv6-icmp type match in an IPv4 rule"},
		{"icmp without family", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.MatchICMP{Type: 8}), Action: netfilter.Accept()}, nil, "unknown IP family"},
		{"icmp with tcp", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp, netfilter.ICMPType(8)), Action: netfilter.Accept()}, nil, "protocol criterion is tcp"},
		{"icmp with negated icmp", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.ICMPType(8), netfilter.Not(netfilter.Protocol(netfilter.ProtoICMP))), Action: netfilter.Accept()}, nil, "protocol criterion is ! icmp"},
		{"icmp any with code", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.ICMPTypeCode(255, 0)), Action: netfilter.Accept()}, nil, "takes no code"},
		{"negated limit", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Not(netfilter.Limit(1, netfilter.PerSecond, 0))), Action: netfilter.Log("x")}, nil, "negated limit"},
		{"limit rate 0", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.Limit(0, netfilter.PerSecond, 0)), Action: netfilter.Accept()}, nil, "rate 0"},
		{"limit without period", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.MatchLimit{Rate: 1}), Action: netfilter.Accept()}, nil, "LimitUnit(0)"},
		{"limit too fast", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Limit(600001, netfilter.PerMinute, 0)), Action: netfilter.Accept()}, nil, "faster than 10000 per second"},
		{"limit burst too big", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Limit(1, netfilter.PerHour, 10001)), Action: netfilter.Accept()}, nil, "burst 10001"},
		{"two limits", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Limit(1, netfilter.PerHour, 0), netfilter.Limit(2, netfilter.PerHour, 0)), Action: netfilter.Accept()}, nil, "more than one limit"},
		{"comment with newline", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"a\nb"}}, nil, "newline"},
		{"comment with quote", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{`say "hi"`}}, nil, "double quote"},
		{"comment with backslash", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{`a\b`}}, nil, "backslash"},
		{"comment with tab", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"a\tb"}}, nil, "control character"},
		{"comment not utf-8", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"a\xffb"}}, nil, "UTF-8"},
		{"empty comment", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"ok", ""}}, nil, "comment 1"},
		{"jump name too long", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Jump(strings.Repeat("C", 29))}, netfilter.ErrInvalidChainName, "must be 1 to 28 characters"},
		{"goto empty chain", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Goto("")}, netfilter.ErrInvalidChainName, "goto target"},
		{"jump to builtin chain", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Jump("INPUT")}, netfilter.ErrInvalidChainName, "built-in chain or a target"},
		{"jump to target name", ipfamily.IPv6, netfilter.Rule{Action: netfilter.Goto("MASQUERADE")}, netfilter.ErrInvalidChainName, "built-in chain or a target"},
		{"jump with blank", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Jump("a b")}, netfilter.ErrInvalidChainName, "contains ' '"},
		{"reject unknown", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Reject(99)}, nil, "RejectWith(99)"},
		{"reject v4 reply in v6", ipfamily.IPv6, netfilter.Rule{Action: netfilter.Reject(netfilter.RejectHostProhibited)}, netfilter.ErrWrongFamily, "host-prohibited does not exist in IPv6"},
		{"reject v6 reply in v4", ipfamily.IPv4, netfilter.Rule{Action: netfilter.Reject(netfilter.RejectNoRoute)}, netfilter.ErrWrongFamily, "no-route does not exist in IPv4"},
		{"tcp reset without tcp", ipfamily.IPv4, netfilter.Rule{Matches: m(netfilter.Protocol(netfilter.ProtoUDP)), Action: netfilter.Reject(netfilter.RejectTCPReset)}, nil, "tcp-reset needs"},
		{"tcp reset with negated tcp", ipfamily.IPv6, netfilter.Rule{Matches: m(netfilter.Not(netfilter.Protocol(netfilter.ProtoTCP))), Action: netfilter.Reject(netfilter.RejectTCPReset)}, nil, "tcp-reset needs"},
		{"set mark outside mask", ipfamily.IPv4, netfilter.Rule{Action: netfilter.SetMaskedMark(0x10, 0x1)}, nil, "bits outside mask"},
		{"set mark zero mask", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ClearMark(0)}, nil, "zero mask"},
		{"masquerade ports without protocol", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionMasquerade{ToPorts: netfilter.Port(80)}}, nil, "ports without tcp/udp/sctp"},
		{"masquerade port zero", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp), Action: netfilter.ActionMasquerade{ToPorts: netfilter.Ports(0, 10)}}, nil, "must be 1 to 65535"},
		{"masquerade inverted ports", ipfamily.IPv4, netfilter.Rule{Matches: m(tcp), Action: netfilter.ActionMasquerade{ToPorts: netfilter.Ports(20, 10)}}, nil, "not end below"},
		{"snat without address", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionSNAT{To: netip.Addr{}}}, nil, "without an address"},
		{"snat v6 address in v4", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionSNAT{To: addr("fd00::1")}}, netfilter.ErrWrongFamily, "SNAT address fd00::1 in an IPv4 rule"},
		{"snat zoned address", ipfamily.IPv6, netfilter.Rule{Action: netfilter.ActionSNAT{To: addr("fe80::1%eth0")}}, nil, "has a zone"},
		{"snat unspecified", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionSNAT{To: addr("0.0.0.0")}}, nil, "unspecified"},
		{"snat ports without protocol", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionSNAT{To: addr("1.2.3.4"), Ports: netfilter.Port(5)}}, nil, "ports without tcp/udp/sctp"},
		{"dnat v4 address in v6", ipfamily.IPv6, netfilter.Rule{Action: netfilter.DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}, netfilter.ErrWrongFamily, "DNAT address 10.0.0.1 in an IPv6 rule"},
		{"dnat port without protocol", ipfamily.IPv4, netfilter.Rule{Action: netfilter.DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}, nil, "ports without tcp/udp/sctp"},
		{"dnat zero", ipfamily.IPv6, netfilter.Rule{Action: netfilter.DNAT(netip.AddrPort{})}, nil, "without an address"},
		{"log prefix newline", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionLog{Prefix: "a\n"}}, nil, "newline"},
		{"log level unknown", ipfamily.IPv4, netfilter.Rule{Action: netfilter.ActionLog{Level: 9}}, nil, "unknown log level"},
		{"nflog prefix quote", ipfamily.IPv6, netfilter.Rule{Action: netfilter.ActionNFLOG{Prefix: `"`}}, nil, "double quote"},
		{"verdict map without name", ipfamily.IPv4, netfilter.Rule{Action: netfilter.VerdictMap("", netfilter.Dst)}, nil, "verdict map name \"\" must be 1 to 31"},
		{"verdict map name with quote", ipfamily.IPv4, netfilter.Rule{Action: netfilter.VerdictMap("a'b", netfilter.Dst)}, nil, "verdict map name"},
		{"verdict map without dimensions", ipfamily.IPv6, netfilter.Rule{Action: netfilter.VerdictMap("m")}, nil, "verdict map \"m\" has 0 dimensions"},
		{"verdict map bad dimension", ipfamily.IPv4, netfilter.Rule{Action: netfilter.VerdictMap("m", 0)}, nil, "dimension 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.rule.Validate(tc.v)
			require.Error(t, err)
			assert.ErrorIs(t, err, netfilter.ErrInvalidRule)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			} else {
				assert.NotErrorIs(t, err, netfilter.ErrWrongFamily)
			}
			assert.Contains(t, err.Error(), tc.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "netfilter: invalid rule: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "netfilter:"), err.Error())
		})
	}
}

func TestValidateChainName(t *testing.T) {
	assert.NoError(t, netfilter.ValidateChainName(strings.Repeat("c", netfilter.MaxChainNameLength)))
	for _, bad := range []string{"", strings.Repeat("c", netfilter.MaxChainNameLength+1), "-x", "!x", "a b", "é", `a"b`, "a'b"} {
		assert.ErrorIs(t, netfilter.ValidateChainName(bad), netfilter.ErrInvalidChainName, "%q", bad)
	}
}

// everyType holds a valid rule using each criterion and each action of the
// package, per family.
func everyType(f ipfamily.Family) []netfilter.Rule {
	net, to, icmp := pfx("10.0.0.0/8"), addr("192.0.2.1"), netfilter.ICMPType(8)
	if f == ipfamily.IPv6 {
		net, to, icmp = pfx("fd00::/8"), addr("2001:db8::1"), netfilter.ICMPv6TypeCode(1, 4)
	}
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	return []netfilter.Rule{
		{Matches: []netfilter.Match{netfilter.SourceNet(net), tcp, netfilter.DestPorts(netfilter.Port(80), netfilter.Ports(8000, 8080)),
			netfilter.InInterface("eth+"), netfilter.Not(netfilter.Mark(1, 3)), netfilter.IPSet("s", netfilter.Src, netfilter.Dst),
			netfilter.ConntrackState(netfilter.CTStateNew), netfilter.DestAddrType(netfilter.AddrTypeLocal)},
			Action: netfilter.Accept(), Comments: []string{"every criterion"}},
		{Matches: []netfilter.Match{icmp}, Action: netfilter.Drop()},
		{Action: netfilter.Return()},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.Reject(netfilter.RejectTCPReset)},
		{Action: netfilter.Jump("np-a")},
		{Action: netfilter.Goto("np-b")},
		{Action: netfilter.SetMaskedMark(0x10, 0xf0)},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.ActionMasquerade{ToPorts: netfilter.Ports(1024, 65535), RandomFully: true}},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.ActionSNAT{To: to, Ports: netfilter.Port(9)}},
		{Matches: []netfilter.Match{tcp}, Action: netfilter.DNAT(netip.AddrPortFrom(to, 53))},
		{Action: netfilter.ActionLog{Prefix: "np: ", Level: netfilter.LogLevelInfo}},
		{Action: netfilter.NoTrack()},
		{Action: netfilter.ActionNFLOG{Group: 2, Prefix: "np", Size: 128}},
		{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
	}
}

func TestValidateAcceptsEveryType(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for i, r := range everyType(f) {
			assert.NoError(t, r.Validate(f), "rule %d in %v", i, f)
		}
	}
}

func TestValidateAllocatesNothing(t *testing.T) {
	rules := everyType(ipfamily.IPv4)
	allocs := testing.AllocsPerRun(100, func() {
		for _, r := range rules {
			if err := r.Validate(ipfamily.IPv4); err != nil {
				t.Fatal(err)
			}
		}
	})
	assert.Zero(t, allocs)
}
