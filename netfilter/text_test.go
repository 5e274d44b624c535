package netfilter_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestEnumText(t *testing.T) {
	textformtest.Enum(t, ".", map[string]netfilter.Hook{
		"HookPrerouting": netfilter.HookPrerouting, "HookInput": netfilter.HookInput, "HookForward": netfilter.HookForward,
		"HookOutput": netfilter.HookOutput, "HookPostrouting": netfilter.HookPostrouting,
	})
	textformtest.Enum(t, ".", map[string]netfilter.SetType{
		"HashIP": netfilter.HashIP, "HashNet": netfilter.HashNet, "HashIPPort": netfilter.HashIPPort,
		"HashNetNet": netfilter.HashNetNet, "BitmapPort": netfilter.BitmapPort,
	})
	textformtest.Enum(t, ".", map[string]netfilter.Direction{"Src": netfilter.Src, "Dst": netfilter.Dst})
	textformtest.Enum(t, ".", map[string]netfilter.LimitUnit{"PerSecond": netfilter.PerSecond, "PerMinute": netfilter.PerMinute, "PerHour": netfilter.PerHour})
	textformtest.Enum(t, ".", map[string]netfilter.Proto{
		"ProtoICMP": netfilter.ProtoICMP, "ProtoTCP": netfilter.ProtoTCP, "ProtoUDP": netfilter.ProtoUDP,
		"ProtoGRE": netfilter.ProtoGRE, "ProtoESP": netfilter.ProtoESP, "ProtoAH": netfilter.ProtoAH,
		"ProtoICMPv6": netfilter.ProtoICMPv6, "ProtoSCTP": netfilter.ProtoSCTP, "ProtoUDPLite": netfilter.ProtoUDPLite,
	})
	textformtest.Enum(t, ".", map[string]netfilter.LogLevel{
		"LogLevelDefault": netfilter.LogLevelDefault, "LogLevelEmerg": netfilter.LogLevelEmerg,
		"LogLevelAlert": netfilter.LogLevelAlert, "LogLevelCrit": netfilter.LogLevelCrit, "LogLevelErr": netfilter.LogLevelErr,
		"LogLevelWarning": netfilter.LogLevelWarning, "LogLevelNotice": netfilter.LogLevelNotice,
		"LogLevelInfo": netfilter.LogLevelInfo, "LogLevelDebug": netfilter.LogLevelDebug,
	})
	require.Equal(t, "LogLevel(9)", netfilter.LogLevel(9).String())
	textformtest.Enum(t, ".", map[string]netfilter.RejectWith{
		"RejectPortUnreachable": netfilter.RejectPortUnreachable, "RejectTCPReset": netfilter.RejectTCPReset,
		"RejectAdminProhibited": netfilter.RejectAdminProhibited, "RejectNetUnreachable": netfilter.RejectNetUnreachable,
		"RejectHostUnreachable": netfilter.RejectHostUnreachable, "RejectProtoUnreachable": netfilter.RejectProtoUnreachable,
		"RejectNetProhibited": netfilter.RejectNetProhibited, "RejectHostProhibited": netfilter.RejectHostProhibited,
		"RejectNoRoute": netfilter.RejectNoRoute, "RejectAddrUnreachable": netfilter.RejectAddrUnreachable,
		"RejectPolicyFail": netfilter.RejectPolicyFail, "RejectRejectRoute": netfilter.RejectRejectRoute,
	})
}

// TestProtoNumberText: a protocol without a name is its number both ways;
// a named one also reads from its number.
func TestProtoNumberText(t *testing.T) {
	for text, want := range map[string]netfilter.Proto{"0": 0, "47": netfilter.ProtoGRE, "6": netfilter.ProtoTCP, "255": 255} {
		var p netfilter.Proto
		require.NoError(t, p.UnmarshalText([]byte(text)), text)
		require.Equal(t, want, p, text)
	}
	b, err := netfilter.Proto(200).MarshalText()
	require.NoError(t, err)
	require.Equal(t, "200", string(b))
	for _, text := range []string{"256", "-1", "TCP", "0x6", ""} {
		p := netfilter.ProtoUDP
		require.ErrorContains(t, p.UnmarshalText([]byte(text)), `netfilter: unknown Proto "`+text+`"; valid: icmp, tcp, udp, esp, ah, ipv6-icmp, sctp, udplite, or a protocol number from 0 to 255`, text)
		require.Equal(t, netfilter.ProtoUDP, p, "unchanged")
	}
}

func TestFlagsText(t *testing.T) {
	textformtest.Flags(t, ".", map[string]netfilter.CTState{
		"CTStateInvalid": netfilter.CTStateInvalid, "CTStateNew": netfilter.CTStateNew, "CTStateRelated": netfilter.CTStateRelated,
		"CTStateEstablished": netfilter.CTStateEstablished, "CTStateUntracked": netfilter.CTStateUntracked,
		"CTStateSNAT": netfilter.CTStateSNAT, "CTStateDNAT": netfilter.CTStateDNAT,
	})
	textformtest.Flags(t, ".", map[string]netfilter.AddrType{
		"AddrTypeUnspec": netfilter.AddrTypeUnspec, "AddrTypeUnicast": netfilter.AddrTypeUnicast,
		"AddrTypeLocal": netfilter.AddrTypeLocal, "AddrTypeBroadcast": netfilter.AddrTypeBroadcast,
		"AddrTypeAnycast": netfilter.AddrTypeAnycast, "AddrTypeMulticast": netfilter.AddrTypeMulticast,
		"AddrTypeBlackhole": netfilter.AddrTypeBlackhole, "AddrTypeUnreachable": netfilter.AddrTypeUnreachable,
		"AddrTypeProhibit": netfilter.AddrTypeProhibit, "AddrTypeThrow": netfilter.AddrTypeThrow,
		"AddrTypeNAT": netfilter.AddrTypeNAT, "AddrTypeXResolve": netfilter.AddrTypeXResolve,
	})
	var s netfilter.CTState
	require.NoError(t, s.UnmarshalText([]byte("ESTABLISHED,NEW")), "any order")
	require.Equal(t, netfilter.CTStateNew|netfilter.CTStateEstablished, s)
}
