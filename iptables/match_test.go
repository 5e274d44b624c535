package iptables

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDirectionString(t *testing.T) {
	assert.Equal(t, "src", Src.String())
	assert.Equal(t, "dst", Dst.String())
	assert.Equal(t, "Direction(0)", Direction(0).String())
}

func TestProtoString(t *testing.T) {
	tests := map[Proto]string{
		ProtoICMP: "icmp", ProtoTCP: "tcp", ProtoUDP: "udp", ProtoESP: "esp", ProtoAH: "ah",
		ProtoICMPv6: "ipv6-icmp", ProtoSCTP: "sctp", ProtoUDPLite: "udplite", ProtoGRE: "47", 0: "0", 255: "255",
	}
	for p, want := range tests {
		assert.Equal(t, want, p.String())
	}
}

func TestPortRange(t *testing.T) {
	assert.Equal(t, PortRange{First: 80, Last: 80}, Port(80))
	assert.Equal(t, PortRange{First: 1, Last: 2}, Ports(1, 2))
	assert.Equal(t, "80", Port(80).String())
	assert.Equal(t, "1000:2000", Ports(1000, 2000).String())
	assert.Equal(t, "1000-2000", string(Ports(1000, 2000).appendTo(nil, '-')))
	assert.Equal(t, 1, Ports(5, 5).slots())
	assert.Equal(t, 2, Ports(5, 6).slots())
}

func TestFlagStrings(t *testing.T) {
	assert.Equal(t, "NEW,ESTABLISHED", (CTStateEstablished | CTStateNew).String())
	assert.Equal(t, "INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT", ctStateAll.String())
	assert.Equal(t, "DNAT,CTState(0x100)", (CTStateDNAT | 1<<8).String())
	assert.Equal(t, "", CTState(0).String())
	assert.Equal(t, "UNICAST,LOCAL", (AddrTypeLocal | AddrTypeUnicast).String())
	assert.Equal(t, "UNSPEC,UNICAST,LOCAL,BROADCAST,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE",
		addrTypeAll.String())
	assert.Equal(t, "AddrType(0x8000)", AddrType(1<<15).String())
}

func TestCriterionConstructors(t *testing.T) {
	p := rmPrefix("10.0.0.0/8")
	tests := []struct {
		got  Criterion
		want Criterion
	}{
		{SourceNet(p), NetMatch{Prefix: p, Dir: Src}},
		{NotSourceNet(p), NetMatch{Prefix: p, Dir: Src, Negate: true}},
		{DestNet(p), NetMatch{Prefix: p, Dir: Dst}},
		{NotDestNet(p), NetMatch{Prefix: p, Dir: Dst, Negate: true}},
		{Protocol(ProtoUDP), ProtoMatch{Proto: ProtoUDP}},
		{NotProtocol(ProtoUDP), ProtoMatch{Proto: ProtoUDP, Negate: true}},
		{SourcePorts(Port(1)), PortMatch{Dir: Src, Ranges: []PortRange{Port(1)}}},
		{NotSourcePorts(Port(1)), PortMatch{Dir: Src, Ranges: []PortRange{Port(1)}, Negate: true}},
		{DestPorts(Port(1), Port(2)), PortMatch{Dir: Dst, Ranges: []PortRange{Port(1), Port(2)}}},
		{NotDestPorts(Port(1)), PortMatch{Dir: Dst, Ranges: []PortRange{Port(1)}, Negate: true}},
		{InInterface("a"), IfaceMatch{Name: "a"}},
		{NotInInterface("a"), IfaceMatch{Name: "a", Negate: true}},
		{OutInterface("a"), IfaceMatch{Name: "a", Out: true}},
		{NotOutInterface("a"), IfaceMatch{Name: "a", Out: true, Negate: true}},
		{MarkMatches(1, 3), MarkMatch{Mark: 1, Mask: 3}},
		{NotMarkMatches(1, 3), MarkMatch{Mark: 1, Mask: 3, Negate: true}},
		{SourceIPSet("s"), SetMatch{Name: "s", Dims: []Direction{Src}}},
		{NotSourceIPSet("s"), SetMatch{Name: "s", Dims: []Direction{Src}, Negate: true}},
		{DestIPSet("s"), SetMatch{Name: "s", Dims: []Direction{Dst}}},
		{NotDestIPSet("s"), SetMatch{Name: "s", Dims: []Direction{Dst}, Negate: true}},
		{IPSetMatch("s", Src, Dst), SetMatch{Name: "s", Dims: []Direction{Src, Dst}}},
		{ConntrackState(CTStateNew, CTStateRelated), ConntrackMatch{States: CTStateNew | CTStateRelated}},
		{NotConntrackState(CTStateInvalid), ConntrackMatch{States: CTStateInvalid, Negate: true}},
		{SourceAddrType(AddrTypeLocal), AddrTypeMatch{Types: AddrTypeLocal, Dir: Src}},
		{NotSourceAddrType(AddrTypeLocal), AddrTypeMatch{Types: AddrTypeLocal, Dir: Src, Negate: true}},
		{DestAddrType(AddrTypeLocal), AddrTypeMatch{Types: AddrTypeLocal, Dir: Dst}},
		{NotDestAddrType(AddrTypeLocal), AddrTypeMatch{Types: AddrTypeLocal, Dir: Dst, Negate: true}},
		{ICMPType(8), ICMPMatch{Version: IPv4, Type: 8}},
		{ICMPTypeCode(3, 1), ICMPMatch{Version: IPv4, Type: 3, Code: 1, HasCode: true}},
		{ICMPv6Type(128), ICMPMatch{Version: IPv6, Type: 128}},
		{ICMPv6TypeCode(1, 4), ICMPMatch{Version: IPv6, Type: 1, Code: 4, HasCode: true}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestConstructorsCopyTheirSlices(t *testing.T) {
	ports := []PortRange{Port(80), Port(443)}
	dims := []Direction{Src, Dst}
	pm := DestPorts(ports...)
	sm := IPSetMatch("s", dims...)
	ports[0], dims[0] = Port(1), Dst
	assert.Equal(t, []PortRange{Port(80), Port(443)}, pm.(PortMatch).Ranges)
	assert.Equal(t, []Direction{Src, Dst}, sm.(SetMatch).Dims)
}

func TestInterfaceNames(t *testing.T) {
	for _, ok := range []string{"eth0", "+", "eth+", "veth1234567890a", "br-0f3e.100", "cali1234+", "wg_0@x"} {
		assert.NoError(t, validateIfaceName(ok), ok)
	}
	for _, bad := range []string{"", "abcdefghijklmnop", "a/b", "a:b", "a b", "a\tb", "é", `a"`, "a'", `a\`, ".", "..", "-a", "!a", "a++", "+a"} {
		err := validateIfaceName(bad)
		assert.ErrorIs(t, err, ErrInvalidRule, "%q", bad)
	}
}

func TestSetNames(t *testing.T) {
	for _, ok := range []string{"s", "KUBE-SVC-1", "np:set.v4", "a_b-c", "0123456789012345678901234567890"} {
		assert.NoError(t, validateSetName(ok), ok)
	}
	for _, bad := range []string{"", "01234567890123456789012345678901", "a b", "-a", "!a", `a"b`, "a\\b", "é"} {
		assert.ErrorIs(t, validateSetName(bad), ErrInvalidRule, "%q", bad)
	}
}

func TestICMPProtocolInteraction(t *testing.T) {
	// With or without a Protocol criterion, and in any order, an ICMP
	// criterion renders the same arguments.
	want := rmArgs("-p icmp -m icmp --icmp-type 8 -j ACCEPT")
	for _, m := range []Match{
		{ICMPType(8)},
		{Protocol(ProtoICMP), ICMPType(8)},
		{ICMPType(8), Protocol(ProtoICMP)},
	} {
		got, err := Rule{Match: m, Action: Accept()}.Args(IPv4)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	// Two ICMP criteria imply the protocol once.
	got, err := Rule{Match: Match{ICMPv6Type(1), ICMPMatch{Version: IPv6, Type: 1, Code: 0, HasCode: true, Negate: true}}, Action: Drop()}.Args(IPv6)
	require.NoError(t, err)
	assert.Equal(t, rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 1 -m icmp6 ! --icmpv6-type 1/0 -j DROP"), got)
	// The implied protocol has no ports and is not tcp.
	_, err = Rule{Match: Match{ICMPType(8), Protocol(ProtoTCP)}, Action: Accept()}.Args(IPv4)
	assert.ErrorIs(t, err, ErrInvalidRule)
	_, err = Rule{Match: Match{ICMPType(3)}, Action: Reject(RejectTCPReset)}.Args(IPv4)
	assert.ErrorContains(t, err, "tcp-reset")
}

func TestHeaderCriteriaOrder(t *testing.T) {
	// Whatever the order of the criteria, the header ones come first in
	// iptables-save's order and the others keep their order.
	a := Match{MarkMatches(1, 1), OutInterface("o"), NotProtocol(ProtoUDP), InInterface("i"),
		DestNet(rmPrefix("10.0.0.0/8")), SourceIPSet("s"), SourceNet(rmPrefix("11.0.0.0/8"))}
	got, err := Rule{Match: a, Action: Accept()}.Args(IPv4)
	require.NoError(t, err)
	assert.Equal(t, rmArgs("-s 11.0.0.0/8 -d 10.0.0.0/8 -i i -o o ! -p udp -m mark --mark 0x1/0x1 -m set --match-set s src -j ACCEPT"), got)
}

func TestAddrTypeIPv6(t *testing.T) {
	for _, bit := range []AddrType{AddrTypeBroadcast, AddrTypeBlackhole, AddrTypeProhibit, AddrTypeThrow, AddrTypeNAT, AddrTypeXResolve} {
		r := Rule{Match: Match{DestAddrType(bit)}, Action: Accept()}
		assert.ErrorIs(t, r.Validate(IPv6), ErrWrongIPVersion, "%v", bit)
		assert.NoError(t, r.Validate(IPv4), "%v", bit)
	}
}
