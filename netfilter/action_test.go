package netfilter_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestActionConstructors(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.1")
	tests := []struct {
		got  netfilter.Action
		want netfilter.Action
	}{
		{netfilter.Accept(), netfilter.ActionAccept{}},
		{netfilter.Drop(), netfilter.ActionDrop{}},
		{netfilter.Return(), netfilter.ActionReturn{}},
		{netfilter.Reject(netfilter.RejectTCPReset), netfilter.ActionReject{With: netfilter.RejectTCPReset}},
		{netfilter.Jump("C"), netfilter.ActionJump{Chain: "C"}},
		{netfilter.Goto("C"), netfilter.ActionGoto{Chain: "C"}},
		{netfilter.SetMark(5), netfilter.ActionSetMark{Mark: 5, Mask: 0xffffffff}},
		{netfilter.SetMaskedMark(5, 7), netfilter.ActionSetMark{Mark: 5, Mask: 7}},
		{netfilter.ClearMark(7), netfilter.ActionSetMark{Mask: 7}},
		{netfilter.Masquerade(), netfilter.ActionMasquerade{}},
		{netfilter.SNAT(a), netfilter.ActionSNAT{To: a}},
		{netfilter.DNAT(netip.AddrPortFrom(a, 0)), netfilter.ActionDNAT{To: a}},
		{netfilter.DNAT(netip.AddrPortFrom(a, 80)), netfilter.ActionDNAT{To: a, Ports: netfilter.Port(80)}},
		{netfilter.Log("p"), netfilter.ActionLog{Prefix: "p"}},
		{netfilter.NoTrack(), netfilter.ActionNoTrack{}},
		{netfilter.NFLOG(3), netfilter.ActionNFLOG{Group: 3}},
		{netfilter.VerdictMap("m", netfilter.Dst, netfilter.Dst), netfilter.ActionVerdictMap{Map: "m", Dims: []netfilter.Direction{netfilter.Dst, netfilter.Dst}}},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, tc.got)
	}
}

func TestRejectRepliesPerFamily(t *testing.T) {
	v4only := map[netfilter.RejectWith]bool{netfilter.RejectNetUnreachable: true, netfilter.RejectHostUnreachable: true,
		netfilter.RejectProtoUnreachable: true, netfilter.RejectNetProhibited: true, netfilter.RejectHostProhibited: true}
	v6only := map[netfilter.RejectWith]bool{netfilter.RejectNoRoute: true, netfilter.RejectAddrUnreachable: true,
		netfilter.RejectPolicyFail: true, netfilter.RejectRejectRoute: true}
	for w := netfilter.RejectPortUnreachable; w <= netfilter.RejectRejectRoute; w++ {
		r := netfilter.Rule{Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP)}, Action: netfilter.Reject(w)}
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			err := r.Validate(f)
			if f == ipfamily.IPv4 && v6only[w] || f == ipfamily.IPv6 && v4only[w] {
				assert.ErrorIs(t, err, netfilter.ErrWrongFamily, "%v in %v", w, f)
				continue
			}
			assert.NoError(t, err, "%v in %v", w, f)
		}
		assert.NotEmpty(t, w.String())
	}
	assert.Equal(t, "port-unreachable", netfilter.ActionReject{}.With.String(), "zero value is port unreachable")
	assert.Equal(t, "no-route", netfilter.RejectNoRoute.String())
	assert.Equal(t, "RejectWith(200)", netfilter.RejectWith(200).String())
}

func TestLogLevelSyslog(t *testing.T) {
	assert.Equal(t, 4, netfilter.LogLevelDefault.Syslog(), "the default is warning")
	assert.Equal(t, 4, netfilter.LogLevelWarning.Syslog())
	assert.Equal(t, 0, netfilter.LogLevelEmerg.Syslog())
	assert.Equal(t, 7, netfilter.LogLevelDebug.Syslog())
}

func TestJumpTarget(t *testing.T) {
	assert.Equal(t, "A", netfilter.Rule{Action: netfilter.Jump("A")}.JumpTarget())
	assert.Equal(t, "B", netfilter.Rule{Action: netfilter.Goto("B")}.JumpTarget())
	for _, a := range []netfilter.Action{nil, netfilter.Accept(), netfilter.Drop(), netfilter.Return(), netfilter.Reject(0),
		netfilter.SetMark(1), netfilter.ClearMark(1), netfilter.SetMaskedMark(1, 1), netfilter.Masquerade(),
		netfilter.SNAT(netip.MustParseAddr("1.1.1.1")), netfilter.DNAT(netip.AddrPort{}), netfilter.Log(""),
		netfilter.NoTrack(), netfilter.NFLOG(0), netfilter.VerdictMap("m", netfilter.Dst), &netfilter.ActionJump{Chain: "C"}} {
		assert.Empty(t, netfilter.Rule{Action: a}.JumpTarget(), "%T", a)
	}
}

func TestJumpTargetsReserved(t *testing.T) {
	for _, name := range []string{"INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING", "ACCEPT", "DROP", "RETURN",
		"REJECT", "MASQUERADE", "SNAT", "DNAT", "MARK", "LOG", "NFLOG", "CT", "NOTRACK", "QUEUE", "TPROXY"} {
		assert.ErrorIs(t, netfilter.Rule{Action: netfilter.Jump(name)}.Validate(ipfamily.IPv4), netfilter.ErrInvalidChainName, name)
		assert.ErrorIs(t, netfilter.Rule{Action: netfilter.Goto(name)}.Validate(ipfamily.IPv6), netfilter.ErrInvalidRule, name)
	}
	// Lower case and prefixed names are user chains.
	for _, name := range []string{"accept", "KUBE-SERVICES", "cali-INPUT", "LOGGING"} {
		assert.NoError(t, netfilter.Rule{Action: netfilter.Jump(name)}.Validate(ipfamily.IPv4), name)
	}
}

func TestNATAddresses(t *testing.T) {
	// A v4-mapped address is an IPv6 address: not for IPv4 rules.
	mapped := netip.MustParseAddr("::ffff:10.0.0.1")
	assert.ErrorIs(t, netfilter.Rule{Action: netfilter.DNAT(netip.AddrPortFrom(mapped, 0))}.Validate(ipfamily.IPv4), netfilter.ErrWrongFamily)
	assert.NoError(t, netfilter.Rule{Action: netfilter.DNAT(netip.AddrPortFrom(mapped, 0))}.Validate(ipfamily.IPv6))
}
