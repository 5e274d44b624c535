package netfilter_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestDirectionString(t *testing.T) {
	assert.Equal(t, "src", netfilter.Src.String())
	assert.Equal(t, "dst", netfilter.Dst.String())
	assert.Equal(t, "Direction(0)", netfilter.Direction(0).String())
}

func TestProtoString(t *testing.T) {
	tests := map[netfilter.Proto]string{
		netfilter.ProtoICMP: "icmp", netfilter.ProtoTCP: "tcp", netfilter.ProtoUDP: "udp", netfilter.ProtoESP: "esp",
		netfilter.ProtoAH: "ah", netfilter.ProtoICMPv6: "ipv6-icmp", netfilter.ProtoSCTP: "sctp",
		netfilter.ProtoUDPLite: "udplite", netfilter.ProtoGRE: "47", 0: "0", 255: "255",
	}
	for p, want := range tests {
		assert.Equal(t, want, p.String())
	}
}

func TestPortRange(t *testing.T) {
	assert.Equal(t, netfilter.PortRange{First: 80, Last: 80}, netfilter.Port(80))
	assert.Equal(t, netfilter.PortRange{First: 1, Last: 2}, netfilter.Ports(1, 2))
	assert.Equal(t, "80", netfilter.Port(80).String())
	assert.Equal(t, "1000:2000", netfilter.Ports(1000, 2000).String())
}

func TestFlagStrings(t *testing.T) {
	allStates := netfilter.CTStateInvalid | netfilter.CTStateNew | netfilter.CTStateRelated | netfilter.CTStateEstablished |
		netfilter.CTStateUntracked | netfilter.CTStateSNAT | netfilter.CTStateDNAT
	assert.Equal(t, "NEW,ESTABLISHED", (netfilter.CTStateEstablished | netfilter.CTStateNew).String())
	assert.Equal(t, "INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT", allStates.String())
	assert.Equal(t, "DNAT,CTState(0x100)", (netfilter.CTStateDNAT | 1<<8).String())
	assert.Equal(t, "", netfilter.CTState(0).String())
	b, err := netfilter.CTStateNew.AppendText([]byte("x "))
	assert.NoError(t, err)
	assert.Equal(t, "x NEW", string(b))

	allTypes := netfilter.AddrType(1<<12 - 1)
	assert.Equal(t, "UNICAST,LOCAL", (netfilter.AddrTypeLocal | netfilter.AddrTypeUnicast).String())
	assert.Equal(t, "UNSPEC,UNICAST,LOCAL,BROADCAST,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE",
		allTypes.String())
	assert.Equal(t, "AddrType(0x8000)", netfilter.AddrType(1<<15).String())
	b, err = netfilter.AddrTypeLocal.AppendText(nil)
	assert.NoError(t, err)
	assert.Equal(t, "LOCAL", string(b))
}

func TestMatchConstructors(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/8")
	tests := []struct {
		got  netfilter.Match
		want netfilter.Match
	}{
		{netfilter.SourceNet(p), netfilter.MatchNet{Prefix: p, Dir: netfilter.Src}},
		{netfilter.DestNet(p), netfilter.MatchNet{Prefix: p, Dir: netfilter.Dst}},
		{netfilter.Protocol(netfilter.ProtoUDP), netfilter.MatchProto{Proto: netfilter.ProtoUDP}},
		{netfilter.SourcePorts(netfilter.Port(1)), netfilter.MatchPorts{Dir: netfilter.Src, Ranges: []netfilter.PortRange{netfilter.Port(1)}}},
		{netfilter.DestPorts(netfilter.Port(1), netfilter.Port(2)), netfilter.MatchPorts{Dir: netfilter.Dst, Ranges: []netfilter.PortRange{netfilter.Port(1), netfilter.Port(2)}}},
		{netfilter.InInterface("a"), netfilter.MatchIface{Name: "a"}},
		{netfilter.OutInterface("a"), netfilter.MatchIface{Name: "a", Out: true}},
		{netfilter.Mark(1, 3), netfilter.MatchMark{Mark: 1, Mask: 3}},
		{netfilter.SourceIPSet("s"), netfilter.MatchSet{Name: "s", Dims: []netfilter.Direction{netfilter.Src}}},
		{netfilter.DestIPSet("s"), netfilter.MatchSet{Name: "s", Dims: []netfilter.Direction{netfilter.Dst}}},
		{netfilter.IPSet("s", netfilter.Src, netfilter.Dst), netfilter.MatchSet{Name: "s", Dims: []netfilter.Direction{netfilter.Src, netfilter.Dst}}},
		{netfilter.ConntrackState(netfilter.CTStateNew, netfilter.CTStateRelated), netfilter.MatchConntrack{States: netfilter.CTStateNew | netfilter.CTStateRelated}},
		{netfilter.SourceAddrType(netfilter.AddrTypeLocal), netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Src}},
		{netfilter.DestAddrType(netfilter.AddrTypeLocal), netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst}},
		{netfilter.ICMPType(8), netfilter.MatchICMP{Family: ipfamily.IPv4, Type: 8}},
		{netfilter.ICMPTypeCode(3, 1), netfilter.MatchICMP{Family: ipfamily.IPv4, Type: 3, Code: 1, HasCode: true}},
		{netfilter.ICMPv6Type(128), netfilter.MatchICMP{Family: ipfamily.IPv6, Type: 128}},
		{netfilter.ICMPv6TypeCode(1, 4), netfilter.MatchICMP{Family: ipfamily.IPv6, Type: 1, Code: 4, HasCode: true}},
		{netfilter.Limit(5, netfilter.PerMinute, 9), netfilter.MatchLimit{Rate: 5, Per: netfilter.PerMinute, Burst: 9}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestNot(t *testing.T) {
	p := netip.MustParsePrefix("10.0.0.0/8")
	for _, m := range []netfilter.Match{
		netfilter.SourceNet(p), netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(netfilter.Port(1)),
		netfilter.InInterface("a"), netfilter.Mark(1, 1), netfilter.SourceIPSet("s"),
		netfilter.ConntrackState(netfilter.CTStateNew), netfilter.DestAddrType(netfilter.AddrTypeLocal), netfilter.ICMPType(8),
		netfilter.Limit(1, netfilter.PerSecond, 0),
	} {
		n := netfilter.Not(m)
		assert.NotEqual(t, m, n, "%T", m)
		assert.Equal(t, m, netfilter.Not(n), "%T: Not twice is the criterion", m)
		assert.IsType(t, m, n)
	}
	assert.Equal(t, netfilter.MatchNet{Prefix: p, Dir: netfilter.Dst, Negate: true}, netfilter.Not(netfilter.DestNet(p)))
	// What is not one of the values is returned as it is.
	ptr := &netfilter.MatchMark{Mark: 1, Mask: 1}
	assert.Same(t, ptr, netfilter.Not(ptr))
	assert.Nil(t, netfilter.Not(nil))
}

func TestConstructorsCopyTheirSlices(t *testing.T) {
	ports := []netfilter.PortRange{netfilter.Port(80), netfilter.Port(443)}
	dims := []netfilter.Direction{netfilter.Src, netfilter.Dst}
	pm := netfilter.DestPorts(ports...)
	sm := netfilter.IPSet("s", dims...)
	ports[0], dims[0] = netfilter.Port(1), netfilter.Dst
	assert.Equal(t, []netfilter.PortRange{netfilter.Port(80), netfilter.Port(443)}, pm.(netfilter.MatchPorts).Ranges)
	assert.Equal(t, []netfilter.Direction{netfilter.Src, netfilter.Dst}, sm.(netfilter.MatchSet).Dims)
}

// rule is a rule accepting packets that match ms.
func rule(ms ...netfilter.Match) netfilter.Rule {
	return netfilter.Rule{Matches: ms, Action: netfilter.Accept()}
}

func TestInterfaceNames(t *testing.T) {
	for _, ok := range []string{"eth0", "+", "eth+", "veth1234567890a", "br-0f3e.100", "cali1234+", "wg_0@x", "é", `a"`, "-a"} {
		assert.NoError(t, rule(netfilter.InInterface(ok)).Validate(ipfamily.IPv4), "%q", ok)
	}
	for bad, msg := range map[string]string{
		"":                 "must be 1 to 15",
		"abcdefghijklmnop": "must be 1 to 15",
		"abcdefghijklmno+": "must be 1 to 15",
		"a/b":              `contains '/'`,
		"a:b":              `contains ':'`,
		"a b":              `contains ' '`,
		"a\tb":             `contains '\t'`,
		".":                "not a valid name",
		"..+":              "not a valid name",
		"a++":              "trailing",
		"+a":               "trailing",
	} {
		err := rule(netfilter.OutInterface(bad)).Validate(ipfamily.IPv6)
		assert.ErrorIs(t, err, netfilter.ErrInvalidRule, "%q", bad)
		assert.ErrorContains(t, err, msg, "%q", bad)
	}
}

func TestSetNames(t *testing.T) {
	for _, ok := range []string{"s", "KUBE-SVC-1", "np:set.v4", "a_b-c", "0123456789012345678901234567890"} {
		assert.NoError(t, rule(netfilter.SourceIPSet(ok)).Validate(ipfamily.IPv4), ok)
	}
	for _, bad := range []string{"", "01234567890123456789012345678901", "a b", "-a", "!a", `a"b`, "a\\b", "é"} {
		assert.ErrorIs(t, rule(netfilter.DestIPSet(bad)).Validate(ipfamily.IPv4), netfilter.ErrInvalidRule, "%q", bad)
	}
}

func TestAddrTypeIPv6(t *testing.T) {
	for _, bit := range []netfilter.AddrType{netfilter.AddrTypeBroadcast, netfilter.AddrTypeBlackhole,
		netfilter.AddrTypeProhibit, netfilter.AddrTypeThrow, netfilter.AddrTypeNAT, netfilter.AddrTypeXResolve} {
		r := rule(netfilter.DestAddrType(bit))
		assert.ErrorIs(t, r.Validate(ipfamily.IPv6), netfilter.ErrWrongFamily, "%v", bit)
		assert.NoError(t, r.Validate(ipfamily.IPv4), "%v", bit)
	}
}

func TestICMPProtocol(t *testing.T) {
	// An ICMP criterion brings its protocol; a protocol criterion beside
	// it must be the same, not negated.
	for _, ms := range [][]netfilter.Match{
		{netfilter.ICMPType(8)},
		{netfilter.Protocol(netfilter.ProtoICMP), netfilter.ICMPType(8)},
		{netfilter.ICMPType(8), netfilter.Protocol(netfilter.ProtoICMP)},
	} {
		assert.NoError(t, rule(ms...).Validate(ipfamily.IPv4))
	}
	assert.ErrorContains(t, rule(netfilter.ICMPType(8), netfilter.Protocol(netfilter.ProtoTCP)).Validate(ipfamily.IPv4),
		"protocol criterion is tcp")
	// The implied protocol is not tcp: no TCP reset.
	r := netfilter.Rule{Matches: []netfilter.Match{netfilter.ICMPType(3)}, Action: netfilter.Reject(netfilter.RejectTCPReset)}
	assert.ErrorContains(t, r.Validate(ipfamily.IPv4), "tcp-reset")
	// Nor ports.
	assert.ErrorContains(t, rule(netfilter.ICMPType(3), netfilter.DestPorts(netfilter.Port(1))).Validate(ipfamily.IPv4),
		"port match without tcp/udp/sctp")
}

func TestLongNamesAreTheBackendsToBound(t *testing.T) {
	// Lengths that only some backend limits are not the model's to refuse.
	r := netfilter.Rule{Action: netfilter.Log(strings.Repeat("l", 100)), Comments: []string{strings.Repeat("c", 300)}}
	assert.NoError(t, r.Validate(ipfamily.IPv4))
	many := make([]netfilter.PortRange, 40)
	for i := range many {
		many[i] = netfilter.Port(uint16(i + 1))
	}
	assert.NoError(t, rule(netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestPorts(many...)).Validate(ipfamily.IPv6))
}
