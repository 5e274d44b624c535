package netfilter_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

func TestMemberCanonicalForm(t *testing.T) {
	mp := netip.MustParsePrefix
	ma := netip.MustParseAddr
	cases := []struct {
		name string
		m    netfilter.Member
		want string
		same netfilter.Member // an equal member built another way
	}{
		{"v4 address", netfilter.IPMember(ma("10.0.0.1")), "10.0.0.1", netfilter.NetMember(mp("10.0.0.1/32"))},
		{"v6 address", netfilter.IPMember(ma("fd00::1")), "fd00::1", netfilter.NetMember(mp("fd00::1/128"))},
		{"v6 not compressed", netfilter.IPMember(ma("FD00:0:0::0001")), "fd00::1", netfilter.IPMember(ma("fd00::1"))},
		{"prefix", netfilter.NetMember(mp("10.0.0.0/8")), "10.0.0.0/8", netfilter.NetMember(netip.PrefixFrom(ma("10.0.0.0"), 8))},
		{"v6 prefix", netfilter.NetMember(mp("fd00:1:2::/48")), "fd00:1:2::/48", netfilter.NetMember(mp("FD00:1:2:0::/48"))},
		{"4in6 stays v6", netfilter.IPMember(ma("::ffff:10.0.0.1")), "::ffff:10.0.0.1", netfilter.NetMember(mp("::ffff:10.0.0.1/128"))},
		{"ip port", netfilter.IPPortMember(ma("10.0.0.1"), netfilter.ProtoUDP, 53), "10.0.0.1,udp:53", netfilter.IPPortMember(ma("10.0.0.1"), netfilter.ProtoUDP, 53)},
		{"v6 ip port", netfilter.IPPortMember(ma("fd00::1"), netfilter.ProtoSCTP, 0), "fd00::1,sctp:0", netfilter.IPPortMember(ma("fd00::1"), netfilter.ProtoSCTP, 0)},
		{"net net", netfilter.NetNetMember(mp("10.0.0.0/8"), mp("192.168.1.1/32")), "10.0.0.0/8,192.168.1.1", netfilter.NetNetMember(mp("10.0.0.0/8"), netfilter.IPMember(ma("192.168.1.1")).Prefix())},
		{"port", netfilter.PortMember(443), "443", netfilter.PortMember(443)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.True(t, tc.m.Valid())
			require.NoError(t, tc.m.Err())
			assert.Equal(t, tc.want, tc.m.String())
			assert.Equal(t, tc.same, tc.m)
			text, err := tc.m.MarshalText()
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(text))
			b, err := tc.m.AppendText([]byte("x "))
			require.NoError(t, err)
			assert.Equal(t, "x "+tc.want, string(b))
		})
	}
}

func TestMemberAccessors(t *testing.T) {
	a := netip.MustParseAddr("fd00::1")
	m := netfilter.IPPortMember(a, netfilter.ProtoTCP, 8080)
	assert.Equal(t, a, m.Addr())
	assert.Equal(t, netip.PrefixFrom(a, 128), m.Prefix())
	assert.Equal(t, netfilter.ProtoTCP, m.Protocol())
	assert.Equal(t, uint16(8080), m.Port())
	assert.True(t, m.Is6())
	assert.False(t, m.Second().IsValid())

	nn := netfilter.NetNetMember(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"))
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/8"), nn.Prefix())
	assert.Equal(t, netip.MustParsePrefix("10.1.0.0/16"), nn.Second())
	assert.False(t, nn.Is6())

	p := netfilter.PortMember(22)
	assert.False(t, p.Addr().IsValid())
	assert.False(t, p.Prefix().IsValid())
	assert.Equal(t, uint16(22), p.Port())
	assert.Zero(t, p.Protocol())
}

func TestMemberIsCompact(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(netfilter.Member{}), uintptr(40))
}

func TestInvalidMembers(t *testing.T) {
	cases := []struct {
		name string
		m    netfilter.Member
		why  string
	}{
		{"zero", netfilter.Member{}, "zero Member"},
		{"invalid address", netfilter.IPMember(netip.Addr{}), "invalid address"},
		{"zone", netfilter.IPMember(netip.MustParseAddr("fe80::1%eth0")), "zone"},
		{"invalid prefix", netfilter.NetMember(netip.Prefix{}), "invalid"},
		{"mixed families", netfilter.NetNetMember(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")), "different families"},
		{"protocol", netfilter.IPPortMember(netip.MustParseAddr("10.0.0.1"), 1, 80), "tcp, udp or sctp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.False(t, tc.m.Valid())
			require.ErrorIs(t, tc.m.Err(), netfilter.ErrInvalidMember)
			assert.Contains(t, tc.m.Err().Error(), tc.why)
			assert.Contains(t, tc.m.String(), "invalid(")
			_, err := tc.m.MarshalText()
			assert.ErrorIs(t, err, netfilter.ErrInvalidMember)
		})
	}
}

// A prefix with host bits set is an error that names it, never silently
// masked (10.0.0.1/24 is not 10.0.0.0/24): from every constructor and
// from ParseMember.
func TestHostBitsAreAnError(t *testing.T) {
	mp := netip.MustParsePrefix
	cases := []struct {
		name string
		m    netfilter.Member
		err  func() error
		bad  string
	}{
		{name: "v4 net", m: netfilter.NetMember(mp("10.0.0.1/24")), bad: "10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)"},
		{name: "v6 net", m: netfilter.NetMember(mp("fd00::1/64")), bad: "fd00::1/64 has host bits set (the network is fd00::/64)"},
		{name: "4in6 net", m: netfilter.NetMember(mp("::ffff:10.0.0.1/120")), bad: "::ffff:10.0.0.1/120 has host bits set (the network is ::ffff:10.0.0.0/120)"},
		{name: "first of pair", m: netfilter.NetNetMember(mp("10.1.2.3/8"), mp("10.0.0.0/8")), bad: "10.1.2.3/8 has host bits"},
		{name: "second of pair", m: netfilter.NetNetMember(mp("10.0.0.0/8"), mp("192.168.1.1/16")), bad: "192.168.1.1/16 has host bits"},
		{name: "v6 second of pair", m: netfilter.NetNetMember(mp("fd00::/16"), mp("fd01::1/32")), bad: "fd01::1/32 has host bits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.False(t, tc.m.Valid())
			err := tc.m.Err()
			require.ErrorIs(t, err, netfilter.ErrInvalidMember)
			require.ErrorIs(t, err, ipfamily.ErrHostBits)
			assert.Contains(t, err.Error(), tc.bad)
			assert.True(t, strings.HasPrefix(err.Error(), "netfilter: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "netfilter: "), err.Error())
			assert.NotContains(t, err.Error(), "ipfamily:")
		})
	}
	for _, in := range []struct {
		typ netfilter.SetType
		s   string
	}{{netfilter.HashNet, "10.0.0.1/24"}, {netfilter.HashNet, "fd00::1/64"}, {netfilter.HashNetNet, "10.0.0.0/8,10.0.0.1/24"}} {
		_, err := netfilter.ParseMember(in.typ, in.s)
		require.ErrorIs(t, err, ipfamily.ErrHostBits, in.s)
		require.ErrorIs(t, err, netfilter.ErrInvalidMember, in.s)
		assert.Contains(t, err.Error(), "host bits set", in.s)
	}
}

func TestParseMember(t *testing.T) {
	cases := []struct {
		typ  netfilter.SetType
		in   string
		want string // "" means an error
	}{
		{netfilter.HashIP, "10.0.0.1", "10.0.0.1"},
		{netfilter.HashIP, "10.0.0.1/32", "10.0.0.1"},
		{netfilter.HashIP, "fd00::1", "fd00::1"},
		{netfilter.HashIP, "10.0.0.0/30", ""},
		{netfilter.HashIP, "10.0.0.256", ""},
		{netfilter.HashIP, "010.0.0.1", ""},
		{netfilter.HashIP, "10.0.0", ""},
		{netfilter.HashIP, "10.0.0.1.2", ""},
		{netfilter.HashIP, "fe80::1%eth0", ""},
		{netfilter.HashIP, "", ""},
		{netfilter.HashIP, "host.example", ""},
		{netfilter.HashNet, "10.1.0.0/16", "10.1.0.0/16"},
		{netfilter.HashNet, "10.1.2.3/16", ""},
		{netfilter.HashNet, "fd00::1/64", ""},
		{netfilter.HashNet, "::1.2.3.0/120", "::102:300/120"},
		{netfilter.HashIP, "0.0.0.0", ""},
		{netfilter.HashIP, "::", ""},
		{netfilter.HashIP, "::ffff:0.0.0.0", "::ffff:0.0.0.0"},
		{netfilter.HashNet, "0.0.0.0", "0.0.0.0"},
		{netfilter.HashIPPort, "0.0.0.0,tcp:80", ""},
		{netfilter.HashIPPort, "10.0.0.1,tcp:0", "10.0.0.1,tcp:0"},
		{netfilter.HashNet, "10.0.0.1", "10.0.0.1"},
		{netfilter.HashNet, "fd00::/64", "fd00::/64"},
		{netfilter.HashNet, "10.0.0.0/0", ""},
		{netfilter.HashNet, "10.0.0.0/33", ""},
		{netfilter.HashNet, "10.0.0.0/08", ""},
		{netfilter.HashNet, "10.0.0.0/", ""},
		{netfilter.HashIPPort, "10.0.0.1,tcp:80", "10.0.0.1,tcp:80"},
		{netfilter.HashIPPort, "10.0.0.1,80", "10.0.0.1,tcp:80"},
		{netfilter.HashIPPort, "fd00::1,udp:53", "fd00::1,udp:53"},
		{netfilter.HashIPPort, "10.0.0.1,sctp:65535", "10.0.0.1,sctp:65535"},
		{netfilter.HashIPPort, "10.0.0.1,tcp:65536", ""},
		{netfilter.HashIPPort, "10.0.0.1,icmp:8/0", ""},
		{netfilter.HashIPPort, "10.0.0.1", ""},
		{netfilter.HashIPPort, "10.0.0.0/8,tcp:80", ""},
		{netfilter.HashIPPort, "10.0.0.1,tcp:", ""},
		{netfilter.HashNetNet, "10.0.0.0/8,192.168.1.0/24", "10.0.0.0/8,192.168.1.0/24"},
		{netfilter.HashNetNet, "10.0.0.1,10.0.0.2/32", "10.0.0.1,10.0.0.2"},
		{netfilter.HashNetNet, "10.0.0.0/8,fd00::/8", ""},
		{netfilter.HashNetNet, "10.0.0.0/8", ""},
		{netfilter.HashNetNet, "10.0.0.0/0,10.0.0.0/8", ""},
		{netfilter.HashNetNet, "10.0.0.1/8,10.0.0.0/8", ""},
		{netfilter.HashNetNet, "10.0.0.0/8,10.0.0.1/8", ""},
		{netfilter.BitmapPort, "80", "80"},
		{netfilter.BitmapPort, "0", "0"},
		{netfilter.BitmapPort, "65535", "65535"},
		{netfilter.BitmapPort, "65536", ""},
		{netfilter.BitmapPort, "080", ""},
		{netfilter.BitmapPort, "-1", ""},
		{netfilter.BitmapPort, "10.0.0.1", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ)+" "+tc.in, func(t *testing.T) {
			m, err := netfilter.ParseMember(tc.typ, tc.in)
			if tc.want == "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, netfilter.ErrInvalidMember)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.String())
			again, err := netfilter.ParseMember(tc.typ, m.String())
			require.NoError(t, err)
			assert.Equal(t, m, again, "String round-trips")
		})
	}
	_, err := netfilter.ParseMember("hash:mac", "00:11:22:33:44:55")
	assert.ErrorIs(t, err, netfilter.ErrUnknownSetType)
}

func TestMemberCompare(t *testing.T) {
	in := []netfilter.Member{
		netfilter.IPMember(netip.MustParseAddr("10.0.0.2")),
		netfilter.IPMember(netip.MustParseAddr("10.0.0.10")),
		netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8")),
		netfilter.IPMember(netip.MustParseAddr("10.0.0.1")),
	}
	slices.SortFunc(in, netfilter.Member.Compare)
	var got []string
	for _, m := range in {
		got = append(got, m.String())
	}
	assert.Equal(t, []string{"10.0.0.0/8", "10.0.0.1", "10.0.0.2", "10.0.0.10"}, got)
	assert.Zero(t, in[0].Compare(in[0]))
}

func TestSetEnumStrings(t *testing.T) {
	assert.Equal(t, "tcp", netfilter.ProtoTCP.String())
	assert.Equal(t, "udp", netfilter.ProtoUDP.String())
	assert.Equal(t, "sctp", netfilter.ProtoSCTP.String())
	assert.True(t, netfilter.HashNetNet.Valid())
	assert.False(t, netfilter.SetType("list:set").Valid())
	assert.True(t, netfilter.PortRange{First: 1, Last: 10}.Contains(10))
	assert.False(t, netfilter.PortRange{First: 1, Last: 10}.Contains(11))
	assert.False(t, netfilter.PortRange{First: 1, Last: 10}.Contains(0))
}

// FuzzParseMember checks that parsing never panics and that whatever
// parses prints back to text that parses to the same member.
func FuzzParseMember(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.0/8", "fd00::1,tcp:80", "10.0.0.0/8,10.1.0.0/16", "80", "::ffff:1.2.3.4", "1.2.3.4,udp:0"} {
		f.Add(uint8(0), s)
	}
	types := []netfilter.SetType{netfilter.HashIP, netfilter.HashNet, netfilter.HashIPPort, netfilter.HashNetNet, netfilter.BitmapPort}
	f.Fuzz(func(t *testing.T, ti uint8, s string) {
		typ := types[int(ti)%len(types)]
		m, err := netfilter.ParseMember(typ, s)
		if err != nil {
			return
		}
		again, err := netfilter.ParseMember(typ, m.String())
		if err != nil || again != m {
			t.Fatalf("%q (%s) printed as %q, which parses to %v, %v", s, typ, m.String(), again, err)
		}
	})
}

// TestParseMemberErrors checks ParseMember's errors: one "netfilter: "
// prefix, the sentinels the text speaks of, and what was wrong.
func TestParseMemberErrors(t *testing.T) {
	cases := []struct {
		typ       netfilter.SetType
		in        string
		sentinels []error
		names     string
	}{
		{netfilter.HashNet, "fd00::1/64", []error{netfilter.ErrInvalidMember, ipfamily.ErrHostBits}, "fd00::1/64 has host bits"},
		{netfilter.HashIPPort, "10.0.0.1,tcp:", []error{netfilter.ErrInvalidMember}, "malformed member"},
		{"list:set", "a", []error{netfilter.ErrUnknownSetType}, `"list:set"`},
	}
	for _, tc := range cases {
		_, err := netfilter.ParseMember(tc.typ, tc.in)
		require.Error(t, err, tc.in)
		assert.True(t, strings.HasPrefix(err.Error(), "netfilter: "), err.Error())
		assert.Equal(t, 1, strings.Count(err.Error(), "netfilter: "), err.Error())
		assert.Contains(t, err.Error(), tc.names)
		for _, s := range tc.sentinels {
			assert.ErrorIs(t, err, s)
		}
	}
}
