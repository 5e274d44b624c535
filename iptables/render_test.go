package iptables

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// rmRule is a rule of the criteria ms and action a.
func rmRule(a netfilter.Action, ms ...netfilter.Match) netfilter.Rule {
	return netfilter.Rule{Matches: ms, Action: a}
}

func TestRejectReplies(t *testing.T) {
	for w := netfilter.RejectPortUnreachable; w <= netfilter.RejectRejectRoute; w++ {
		for i, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			r := rmRule(netfilter.Reject(w), netfilter.Protocol(netfilter.ProtoTCP))
			got, err := RuleArgs(r, f)
			if r.Validate(f) != nil {
				assert.ErrorIs(t, err, netfilter.ErrWrongFamily, "%v in %v", w, f)
				continue
			}
			require.NoError(t, err, "%v in %v", w, f)
			want := rejectNames[w][i]
			assert.Equal(t, []string{"-p", "tcp", "-j", "REJECT", "--reject-with", want}, got)
		}
	}
	// A reply the model gains before this package learns it is refused,
	// not rendered wrong.
	st := ruleRender{v: ipfamily.IPv4}
	var w tokWriter
	err := st.action(netfilter.ActionReject{With: netfilter.RejectRejectRoute + 1}, &w)
	assert.ErrorIs(t, err, netfilter.ErrUnsupported)
}

func TestLogLevels(t *testing.T) {
	for l := netfilter.LogLevelDefault; l <= netfilter.LogLevelDebug; l++ {
		got, err := RuleArgs(rmRule(netfilter.ActionLog{Level: l}), ipfamily.IPv4)
		require.NoError(t, err)
		if l == netfilter.LogLevelDefault || l == netfilter.LogLevelWarning {
			assert.Equal(t, []string{"-j", "LOG"}, got, "warning is iptables' default and is left out")
			continue
		}
		assert.Equal(t, []string{"-j", "LOG", "--log-level", strconv.Itoa(int(l) - 1)}, got)
	}
}

func TestNATTargets(t *testing.T) {
	tests := []struct {
		name string
		v    ipfamily.Family
		a    netfilter.Action
		want []string
	}{
		{"snat v4 one port", ipfamily.IPv4, netfilter.ActionSNAT{To: rmAddr("1.2.3.4"), Ports: netfilter.Port(5)}, rmArgs("-j SNAT --to-source 1.2.3.4:5")},
		{"snat v6 no port", ipfamily.IPv6, netfilter.ActionSNAT{To: rmAddr("2001:db8::1"), RandomFully: true}, rmArgs("-j SNAT --to-source 2001:db8::1 --random-fully")},
		{"dnat v6 port", ipfamily.IPv6, netfilter.DNAT(netip.MustParseAddrPort("[2001:db8::1]:53")), rmArgs("-j DNAT --to-destination [2001:db8::1]:53")},
		{"dnat v6 range", ipfamily.IPv6, netfilter.ActionDNAT{To: rmAddr("2001:db8::1"), Ports: netfilter.Ports(1, 9)}, rmArgs("-j DNAT --to-destination [2001:db8::1]:1-9")},
		{"dnat v4-mapped in v6", ipfamily.IPv6, netfilter.DNAT(netip.AddrPortFrom(rmAddr("::ffff:10.0.0.1"), 0)), rmArgs("-j DNAT --to-destination ::ffff:10.0.0.1")},
		{"masquerade ports", ipfamily.IPv4, netfilter.ActionMasquerade{ToPorts: netfilter.Ports(1, 65535)}, rmArgs("-j MASQUERADE --to-ports 1-65535")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RuleArgs(rmRule(tc.a, netfilter.Protocol(netfilter.ProtoTCP)), tc.v)
			require.NoError(t, err)
			assert.Equal(t, append(rmArgs("-p tcp"), tc.want...), got)
		})
	}
}

func TestMarkActionRendering(t *testing.T) {
	tests := []struct {
		a    netfilter.Action
		want string
	}{
		{netfilter.SetMark(0), "0x0/0xffffffff"},
		{netfilter.SetMark(0xabc), "0xabc/0xffffffff"},
		{netfilter.SetMaskedMark(0x10, 0xf0), "0x10/0xf0"},
		{netfilter.ClearMark(0xffff0000), "0x0/0xffff0000"},
	}
	for _, tc := range tests {
		got, err := RuleArgs(rmRule(tc.a), ipfamily.IPv6)
		require.NoError(t, err)
		assert.Equal(t, []string{"-j", "MARK", "--set-xmark", tc.want}, got)
	}
}

func TestICMPProtocolInteraction(t *testing.T) {
	// With or without a Protocol criterion, and in any order, an ICMP
	// criterion renders the same arguments.
	want := rmArgs("-p icmp -m icmp --icmp-type 8 -j ACCEPT")
	for _, m := range [][]netfilter.Match{
		{netfilter.ICMPType(8)},
		{netfilter.Protocol(netfilter.ProtoICMP), netfilter.ICMPType(8)},
		{netfilter.ICMPType(8), netfilter.Protocol(netfilter.ProtoICMP)},
	} {
		got, err := RuleArgs(rmRule(netfilter.Accept(), m...), ipfamily.IPv4)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	// Two ICMP criteria imply the protocol once.
	got, err := RuleArgs(rmRule(netfilter.Drop(), netfilter.ICMPv6Type(1),
		netfilter.Not(netfilter.ICMPv6TypeCode(1, 0))), ipfamily.IPv6)
	require.NoError(t, err)
	assert.Equal(t, rmArgs("-p ipv6-icmp -m icmp6 --icmpv6-type 1 -m icmp6 ! --icmpv6-type 1/0 -j DROP"), got)
}

func TestHeaderCriteriaOrder(t *testing.T) {
	// Whatever the order of the criteria, the header ones come first in
	// iptables-save's order and the others keep their order.
	got, err := RuleArgs(rmRule(netfilter.Accept(), netfilter.Mark(1, 1), netfilter.OutInterface("o"),
		netfilter.Not(netfilter.Protocol(netfilter.ProtoUDP)), netfilter.InInterface("i"),
		netfilter.DestNet(rmPrefix("10.0.0.0/8")), netfilter.SourceIPSet("s"), netfilter.SourceNet(rmPrefix("11.0.0.0/8"))), ipfamily.IPv4)
	require.NoError(t, err)
	assert.Equal(t, rmArgs("-s 11.0.0.0/8 -d 10.0.0.0/8 -i i -o o ! -p udp -m mark --mark 0x1/0x1 -m set --match-set s src -j ACCEPT"), got)
}

func TestLimitsOfIptables(t *testing.T) {
	// What the model takes and iptables does not: refused with the
	// package's prefix, matching netfilter.ErrInvalidRule.
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	ports := func(n int) []netfilter.PortRange {
		out := make([]netfilter.PortRange, n)
		for i := range out {
			out[i] = netfilter.Port(uint16(i + 1))
		}
		return out
	}
	tests := []struct {
		name string
		rule netfilter.Rule
		msg  string
	}{
		{"too many ports", rmRule(netfilter.Accept(), tcp, netfilter.DestPorts(ports(16)...)), "16 multiport entries, over the limit of 15 (a range counts as 2) (criterion 1)"},
		{"ranges count twice", rmRule(netfilter.Accept(), tcp, netfilter.SourcePorts(netfilter.Ports(1, 2), netfilter.Ports(3, 4),
			netfilter.Ports(5, 6), netfilter.Ports(7, 8), netfilter.Ports(9, 10), netfilter.Ports(11, 12), netfilter.Ports(13, 14),
			netfilter.Ports(15, 16))), "16 multiport entries"},
		{"comment too long", netfilter.Rule{Action: netfilter.Accept(), Comments: []string{"ok", strings.Repeat("c", 256)}}, "comment is 256 bytes, longer than 255 (comment 1)"},
		{"log prefix too long", rmRule(netfilter.Log(strings.Repeat("l", 30))), "log prefix is 30 bytes, longer than 29"},
		{"nflog prefix too long", rmRule(netfilter.ActionNFLOG{Prefix: strings.Repeat("n", 64)}), "NFLOG prefix is 64 bytes, longer than 63"},
		{"interface dash", rmRule(netfilter.Accept(), netfilter.InInterface("-eth")), `"-eth" starts with '-'`},
		{"interface bang", rmRule(netfilter.Accept(), netfilter.OutInterface("!eth")), `starts with '!'`},
		{"interface quote", rmRule(netfilter.Accept(), netfilter.InInterface(`a"`)), `contains '"'`},
		{"interface backslash", rmRule(netfilter.Accept(), netfilter.InInterface(`a\`)), `contains '\\'`},
		{"interface not ascii", rmRule(netfilter.Accept(), netfilter.InInterface("é")), "contains byte 0xc3, outside printable ASCII"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.rule.Validate(ipfamily.IPv4), "the model takes it")
			args, err := RuleArgs(tc.rule, ipfamily.IPv4)
			assert.Nil(t, args)
			assert.ErrorIs(t, err, netfilter.ErrInvalidRule)
			assert.ErrorContains(t, err, "iptables: invalid rule: ")
			assert.ErrorContains(t, err, tc.msg)
			assert.Equal(t, 1, strings.Count(err.Error(), "iptables:"), err.Error())
		})
	}
	// At the limits, it renders.
	r := netfilter.Rule{Action: netfilter.Log(strings.Repeat("l", MaxLogPrefixLength)),
		Comments: []string{strings.Repeat("é", MaxCommentLength/2), strings.Repeat("c", MaxCommentLength)}}
	_, err := RuleArgs(r, ipfamily.IPv4)
	assert.NoError(t, err)
	_, err = RuleArgs(rmRule(netfilter.Accept(), tcp, netfilter.DestPorts(ports(MaxMultiPorts)...)), ipfamily.IPv6)
	assert.NoError(t, err)
}
