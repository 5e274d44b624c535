package iptables

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestActionConstructors(t *testing.T) {
	a := rmAddr("192.0.2.1")
	tests := []struct {
		got  Action
		want Action
	}{
		{Accept(), AcceptAction{}},
		{Drop(), DropAction{}},
		{Return(), ReturnAction{}},
		{Reject(RejectTCPReset), RejectAction{With: RejectTCPReset}},
		{Jump("C"), JumpAction{Chain: "C"}},
		{Goto("C"), GotoAction{Chain: "C"}},
		{SetMark(5), SetMarkAction{Mark: 5, Mask: 0xffffffff}},
		{SetMaskedMark(5, 7), SetMarkAction{Mark: 5, Mask: 7}},
		{ClearMark(7), SetMarkAction{Mask: 7}},
		{Masquerade(MasqueradeOptions{RandomFully: true, ToPorts: Port(9)}), MasqueradeAction{RandomFully: true, ToPorts: Port(9)}},
		{SNAT(a, SNATOptions{RandomFully: true, Ports: Ports(1, 2)}), SNATAction{To: a, Ports: Ports(1, 2), RandomFully: true}},
		{DNAT(netip.AddrPortFrom(a, 0)), DNATAction{To: a}},
		{DNAT(netip.AddrPortFrom(a, 80)), DNATAction{To: a, Ports: Port(80)}},
		{Log(LogOptions{Prefix: "p", Level: LogLevelInfo}), LogAction{Prefix: "p", Level: LogLevelInfo}},
		{NoTrack(), NoTrackAction{}},
		{NFLOG(NFLOGOptions{Group: 1, Prefix: "p", Size: 2}), NFLOGAction{Group: 1, Prefix: "p", Size: 2}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestRejectRepliesPerVersion(t *testing.T) {
	for w := RejectPortUnreachable; w < rejectWithCount; w++ {
		names := rejectNames[w]
		for _, v := range []IPVersion{IPv4, IPv6} {
			want := names.v4
			if v == IPv6 {
				want = names.v6
			}
			r := Rule{Match: Match{Protocol(ProtoTCP)}, Action: Reject(w)}
			got, err := r.Args(v)
			if want == "" {
				assert.ErrorIs(t, err, ErrWrongIPVersion, "%v in %v", w, v)
				continue
			}
			require.NoError(t, err, "%v in %v", w, v)
			assert.Equal(t, []string{"-p", "tcp", "-j", "REJECT", "--reject-with", want}, got)
		}
		assert.NotEmpty(t, w.String())
	}
	assert.Equal(t, "port-unreachable", RejectAction{}.With.String(), "zero value is port unreachable")
	assert.Equal(t, "RejectWith(200)", RejectWith(200).String())
}

func TestLogLevels(t *testing.T) {
	for l := LogLevelDefault; l <= LogLevelDebug; l++ {
		got, err := Log(LogOptions{Level: l}).iptablesArgs(IPv4)
		require.NoError(t, err)
		if l == LogLevelDefault || l == LogLevelWarning {
			assert.Equal(t, []string{"-j", "LOG"}, got, "warning is iptables' default and is left out")
			continue
		}
		assert.Equal(t, []string{"-j", "LOG", "--log-level", strconv.Itoa(int(l) - 1)}, got)
	}
}

func TestNATTargets(t *testing.T) {
	tcp := Match{Protocol(ProtoTCP)}
	tests := []struct {
		name string
		v    IPVersion
		a    Action
		want []string
	}{
		{"snat v4 one port", IPv4, SNAT(rmAddr("1.2.3.4"), SNATOptions{Ports: Port(5)}), rmArgs("-j SNAT --to-source 1.2.3.4:5")},
		{"snat v6 no port", IPv6, SNAT(rmAddr("2001:db8::1"), SNATOptions{RandomFully: true}), rmArgs("-j SNAT --to-source 2001:db8::1 --random-fully")},
		{"dnat v6 port", IPv6, DNAT(netip.MustParseAddrPort("[2001:db8::1]:53")), rmArgs("-j DNAT --to-destination [2001:db8::1]:53")},
		{"dnat v6 range", IPv6, DNATAction{To: rmAddr("2001:db8::1"), Ports: Ports(1, 9)}, rmArgs("-j DNAT --to-destination [2001:db8::1]:1-9")},
		{"dnat v4-mapped in v6", IPv6, DNAT(netip.AddrPortFrom(rmAddr("::ffff:10.0.0.1"), 0)), rmArgs("-j DNAT --to-destination ::ffff:10.0.0.1")},
		{"masquerade ports", IPv4, Masquerade(MasqueradeOptions{ToPorts: Ports(1, 65535)}), rmArgs("-j MASQUERADE --to-ports 1-65535")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Rule{Match: tcp, Action: tc.a}.Args(tc.v)
			require.NoError(t, err)
			assert.Equal(t, append(rmArgs("-p tcp"), tc.want...), got)
		})
	}
	// A v4-mapped address is an IPv6 address: not for IPv4 rules.
	err := Rule{Action: DNAT(netip.AddrPortFrom(rmAddr("::ffff:10.0.0.1"), 0))}.Validate(IPv4)
	assert.ErrorIs(t, err, ErrWrongIPVersion)
}

func TestJumpTargetsReserved(t *testing.T) {
	for name := range reservedTargets {
		assert.ErrorIs(t, Rule{Action: Jump(name)}.Validate(IPv4), ErrInvalidChainName, name)
		assert.ErrorIs(t, Rule{Action: Goto(name)}.Validate(IPv6), ErrInvalidRule, name)
	}
	// Lower case and prefixed names are user chains.
	for _, name := range []string{"accept", "KUBE-SERVICES", "cali-INPUT", "LOGGING"} {
		assert.NoError(t, Rule{Action: Jump(name)}.Validate(IPv4), name)
	}
}

func TestMarkActionRendering(t *testing.T) {
	tests := []struct {
		a    Action
		want string
	}{
		{SetMark(0), "0x0/0xffffffff"},
		{SetMark(0xabc), "0xabc/0xffffffff"},
		{SetMaskedMark(0x10, 0xf0), "0x10/0xf0"},
		{ClearMark(0xffff0000), "0x0/0xffff0000"},
	}
	for _, tc := range tests {
		got, err := tc.a.iptablesArgs(IPv6)
		require.NoError(t, err)
		assert.Equal(t, []string{"-j", "MARK", "--set-xmark", tc.want}, got)
	}
}
