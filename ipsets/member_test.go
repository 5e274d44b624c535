package ipsets_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
)

func TestMemberCanonicalForm(t *testing.T) {
	mp := netip.MustParsePrefix
	ma := netip.MustParseAddr
	cases := []struct {
		name string
		m    ipsets.Member
		want string
		same ipsets.Member // an equal member built another way
	}{
		{"v4 address", ipsets.IPMember(ma("10.0.0.1")), "10.0.0.1", ipsets.NetMember(mp("10.0.0.1/32"))},
		{"v6 address", ipsets.IPMember(ma("fd00::1")), "fd00::1", ipsets.NetMember(mp("fd00::1/128"))},
		{"v6 not compressed", ipsets.IPMember(ma("FD00:0:0::0001")), "fd00::1", ipsets.IPMember(ma("fd00::1"))},
		{"prefix", ipsets.NetMember(mp("10.0.0.0/8")), "10.0.0.0/8", ipsets.NetMember(netip.PrefixFrom(ma("10.0.0.0"), 8))},
		{"v6 prefix", ipsets.NetMember(mp("fd00:1:2::/48")), "fd00:1:2::/48", ipsets.NetMember(mp("FD00:1:2:0::/48"))},
		{"4in6 stays v6", ipsets.IPMember(ma("::ffff:10.0.0.1")), "::ffff:10.0.0.1", ipsets.NetMember(mp("::ffff:10.0.0.1/128"))},
		{"ip port", ipsets.IPPortMember(ma("10.0.0.1"), ipsets.ProtocolUDP, 53), "10.0.0.1,udp:53", ipsets.IPPortMember(ma("10.0.0.1"), ipsets.ProtocolUDP, 53)},
		{"v6 ip port", ipsets.IPPortMember(ma("fd00::1"), ipsets.ProtocolSCTP, 0), "fd00::1,sctp:0", ipsets.IPPortMember(ma("fd00::1"), ipsets.ProtocolSCTP, 0)},
		{"net net", ipsets.NetNetMember(mp("10.0.0.0/8"), mp("192.168.1.1/32")), "10.0.0.0/8,192.168.1.1", ipsets.NetNetMember(mp("10.0.0.0/8"), ipsets.IPMember(ma("192.168.1.1")).Prefix())},
		{"port", ipsets.PortMember(443), "443", ipsets.PortMember(443)},
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
	m := ipsets.IPPortMember(a, ipsets.ProtocolTCP, 8080)
	assert.Equal(t, a, m.Addr())
	assert.Equal(t, netip.PrefixFrom(a, 128), m.Prefix())
	assert.Equal(t, ipsets.ProtocolTCP, m.Protocol())
	assert.Equal(t, uint16(8080), m.Port())
	assert.True(t, m.Is6())
	assert.False(t, m.Second().IsValid())

	nn := ipsets.NetNetMember(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.0.0/16"))
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/8"), nn.Prefix())
	assert.Equal(t, netip.MustParsePrefix("10.1.0.0/16"), nn.Second())
	assert.False(t, nn.Is6())

	p := ipsets.PortMember(22)
	assert.False(t, p.Addr().IsValid())
	assert.False(t, p.Prefix().IsValid())
	assert.Equal(t, uint16(22), p.Port())
	assert.Zero(t, p.Protocol())
}

func TestMemberIsCompact(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(ipsets.Member{}), uintptr(40))
}

func TestInvalidMembers(t *testing.T) {
	cases := []struct {
		name string
		m    ipsets.Member
		why  string
	}{
		{"zero", ipsets.Member{}, "zero Member"},
		{"invalid address", ipsets.IPMember(netip.Addr{}), "invalid address"},
		{"zone", ipsets.IPMember(netip.MustParseAddr("fe80::1%eth0")), "zone"},
		{"invalid prefix", ipsets.NetMember(netip.Prefix{}), "invalid"},
		{"mixed families", ipsets.NetNetMember(netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")), "different families"},
		{"protocol", ipsets.IPPortMember(netip.MustParseAddr("10.0.0.1"), 1, 80), "tcp, udp or sctp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.False(t, tc.m.Valid())
			require.ErrorIs(t, tc.m.Err(), ipsets.ErrInvalidMember)
			assert.Contains(t, tc.m.Err().Error(), tc.why)
			assert.Contains(t, tc.m.String(), "invalid(")
			_, err := tc.m.MarshalText()
			assert.ErrorIs(t, err, ipsets.ErrInvalidMember)
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
		m    ipsets.Member
		err  func() error
		bad  string
	}{
		{name: "v4 net", m: ipsets.NetMember(mp("10.0.0.1/24")), bad: "10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)"},
		{name: "v6 net", m: ipsets.NetMember(mp("fd00::1/64")), bad: "fd00::1/64 has host bits set (the network is fd00::/64)"},
		{name: "4in6 net", m: ipsets.NetMember(mp("::ffff:10.0.0.1/120")), bad: "::ffff:10.0.0.1/120 has host bits set (the network is ::ffff:10.0.0.0/120)"},
		{name: "first of pair", m: ipsets.NetNetMember(mp("10.1.2.3/8"), mp("10.0.0.0/8")), bad: "10.1.2.3/8 has host bits"},
		{name: "second of pair", m: ipsets.NetNetMember(mp("10.0.0.0/8"), mp("192.168.1.1/16")), bad: "192.168.1.1/16 has host bits"},
		{name: "v6 second of pair", m: ipsets.NetNetMember(mp("fd00::/16"), mp("fd01::1/32")), bad: "fd01::1/32 has host bits"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.False(t, tc.m.Valid())
			err := tc.m.Err()
			require.ErrorIs(t, err, ipsets.ErrInvalidMember)
			require.ErrorIs(t, err, ipfamily.ErrHostBits)
			assert.Contains(t, err.Error(), tc.bad)
			assert.True(t, strings.HasPrefix(err.Error(), "ipsets: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "ipsets: "), err.Error())
			assert.NotContains(t, err.Error(), "ipfamily:")
		})
	}
	for _, in := range []struct {
		typ ipsets.SetType
		s   string
	}{{ipsets.HashNet, "10.0.0.1/24"}, {ipsets.HashNet, "fd00::1/64"}, {ipsets.HashNetNet, "10.0.0.0/8,10.0.0.1/24"}} {
		_, err := ipsets.ParseMember(in.typ, in.s)
		require.ErrorIs(t, err, ipfamily.ErrHostBits, in.s)
		require.ErrorIs(t, err, ipsets.ErrInvalidMember, in.s)
		assert.Contains(t, err.Error(), "host bits set", in.s)
	}
}

func TestParseMember(t *testing.T) {
	cases := []struct {
		typ  ipsets.SetType
		in   string
		want string // "" means an error
	}{
		{ipsets.HashIP, "10.0.0.1", "10.0.0.1"},
		{ipsets.HashIP, "10.0.0.1/32", "10.0.0.1"},
		{ipsets.HashIP, "fd00::1", "fd00::1"},
		{ipsets.HashIP, "10.0.0.0/30", ""},
		{ipsets.HashIP, "10.0.0.256", ""},
		{ipsets.HashIP, "010.0.0.1", ""},
		{ipsets.HashIP, "10.0.0", ""},
		{ipsets.HashIP, "10.0.0.1.2", ""},
		{ipsets.HashIP, "fe80::1%eth0", ""},
		{ipsets.HashIP, "", ""},
		{ipsets.HashIP, "host.example", ""},
		{ipsets.HashNet, "10.1.0.0/16", "10.1.0.0/16"},
		{ipsets.HashNet, "10.1.2.3/16", ""},
		{ipsets.HashNet, "fd00::1/64", ""},
		{ipsets.HashNet, "::1.2.3.0/120", "::102:300/120"},
		{ipsets.HashIP, "0.0.0.0", ""},
		{ipsets.HashIP, "::", ""},
		{ipsets.HashIP, "::ffff:0.0.0.0", "::ffff:0.0.0.0"},
		{ipsets.HashNet, "0.0.0.0", "0.0.0.0"},
		{ipsets.HashIPPort, "0.0.0.0,tcp:80", ""},
		{ipsets.HashIPPort, "10.0.0.1,tcp:0", "10.0.0.1,tcp:0"},
		{ipsets.HashNet, "10.0.0.1", "10.0.0.1"},
		{ipsets.HashNet, "fd00::/64", "fd00::/64"},
		{ipsets.HashNet, "10.0.0.0/0", ""},
		{ipsets.HashNet, "10.0.0.0/33", ""},
		{ipsets.HashNet, "10.0.0.0/08", ""},
		{ipsets.HashNet, "10.0.0.0/", ""},
		{ipsets.HashIPPort, "10.0.0.1,tcp:80", "10.0.0.1,tcp:80"},
		{ipsets.HashIPPort, "10.0.0.1,80", "10.0.0.1,tcp:80"},
		{ipsets.HashIPPort, "fd00::1,udp:53", "fd00::1,udp:53"},
		{ipsets.HashIPPort, "10.0.0.1,sctp:65535", "10.0.0.1,sctp:65535"},
		{ipsets.HashIPPort, "10.0.0.1,tcp:65536", ""},
		{ipsets.HashIPPort, "10.0.0.1,icmp:8/0", ""},
		{ipsets.HashIPPort, "10.0.0.1", ""},
		{ipsets.HashIPPort, "10.0.0.0/8,tcp:80", ""},
		{ipsets.HashIPPort, "10.0.0.1,tcp:", ""},
		{ipsets.HashNetNet, "10.0.0.0/8,192.168.1.0/24", "10.0.0.0/8,192.168.1.0/24"},
		{ipsets.HashNetNet, "10.0.0.1,10.0.0.2/32", "10.0.0.1,10.0.0.2"},
		{ipsets.HashNetNet, "10.0.0.0/8,fd00::/8", ""},
		{ipsets.HashNetNet, "10.0.0.0/8", ""},
		{ipsets.HashNetNet, "10.0.0.0/0,10.0.0.0/8", ""},
		{ipsets.HashNetNet, "10.0.0.1/8,10.0.0.0/8", ""},
		{ipsets.HashNetNet, "10.0.0.0/8,10.0.0.1/8", ""},
		{ipsets.BitmapPort, "80", "80"},
		{ipsets.BitmapPort, "0", "0"},
		{ipsets.BitmapPort, "65535", "65535"},
		{ipsets.BitmapPort, "65536", ""},
		{ipsets.BitmapPort, "080", ""},
		{ipsets.BitmapPort, "-1", ""},
		{ipsets.BitmapPort, "10.0.0.1", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ)+" "+tc.in, func(t *testing.T) {
			m, err := ipsets.ParseMember(tc.typ, tc.in)
			if tc.want == "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, ipsets.ErrInvalidMember)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.String())
			again, err := ipsets.ParseMember(tc.typ, m.String())
			require.NoError(t, err)
			assert.Equal(t, m, again, "String round-trips")
		})
	}
	_, err := ipsets.ParseMember("hash:mac", "00:11:22:33:44:55")
	assert.ErrorIs(t, err, ipsets.ErrUnknownType)
}

func TestMemberCompare(t *testing.T) {
	in := []ipsets.Member{
		ipsets.IPMember(netip.MustParseAddr("10.0.0.2")),
		ipsets.IPMember(netip.MustParseAddr("10.0.0.10")),
		ipsets.NetMember(netip.MustParsePrefix("10.0.0.0/8")),
		ipsets.IPMember(netip.MustParseAddr("10.0.0.1")),
	}
	slices.SortFunc(in, ipsets.Member.Compare)
	var got []string
	for _, m := range in {
		got = append(got, m.String())
	}
	assert.Equal(t, []string{"10.0.0.0/8", "10.0.0.1", "10.0.0.2", "10.0.0.10"}, got)
	assert.Zero(t, in[0].Compare(in[0]))
}

func TestEnumStrings(t *testing.T) {
	assert.Equal(t, "inet", ipsets.FamilyName(ipsets.IPv4))
	assert.Equal(t, "inet6", ipsets.FamilyName(ipsets.IPv6))
	assert.Equal(t, "Family(5)", ipsets.FamilyName(ipsets.Family(5)))
	assert.False(t, ipsets.Family(0).Valid())
	assert.Equal(t, "tcp", ipsets.ProtocolTCP.String())
	assert.Equal(t, "udp", ipsets.ProtocolUDP.String())
	assert.Equal(t, "sctp", ipsets.ProtocolSCTP.String())
	assert.Equal(t, "Protocol(1)", ipsets.Protocol(1).String())
	assert.True(t, ipsets.HashNetNet.Valid())
	assert.False(t, ipsets.SetType("list:set").Valid())
	assert.Equal(t, "1000-2000", ipsets.PortRange{First: 1000, Last: 2000}.String())
	assert.True(t, ipsets.PortRange{}.Contains(65535), "the zero range is the full range")
	assert.False(t, ipsets.PortRange{First: 1, Last: 10}.Contains(11))
}

// FuzzParseMember checks that parsing never panics and that whatever
// parses prints back to text that parses to the same member.
func FuzzParseMember(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.0/8", "fd00::1,tcp:80", "10.0.0.0/8,10.1.0.0/16", "80", "::ffff:1.2.3.4", "1.2.3.4,udp:0"} {
		f.Add(uint8(0), s)
	}
	types := []ipsets.SetType{ipsets.HashIP, ipsets.HashNet, ipsets.HashIPPort, ipsets.HashNetNet, ipsets.BitmapPort}
	f.Fuzz(func(t *testing.T, ti uint8, s string) {
		typ := types[int(ti)%len(types)]
		m, err := ipsets.ParseMember(typ, s)
		if err != nil {
			return
		}
		again, err := ipsets.ParseMember(typ, m.String())
		if err != nil || again != m {
			t.Fatalf("%q (%s) printed as %q, which parses to %v, %v", s, typ, m.String(), again, err)
		}
	})
}
