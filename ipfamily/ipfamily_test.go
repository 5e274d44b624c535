package ipfamily

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFamilyBasics(t *testing.T) {
	tests := []struct {
		f          Family
		str        string
		valid      bool
		bits, af   int
		fromAFOkay bool
	}{
		{IPv4, "IPv4", true, 32, 2, true},
		{IPv6, "IPv6", true, 128, 10, true},
		{0, "Family(0)", false, 0, 0, false},
		{5, "Family(5)", false, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.str, func(t *testing.T) {
			assert.Equal(t, tc.str, tc.f.String())
			assert.Equal(t, tc.valid, tc.f.Valid())
			assert.Equal(t, tc.bits, tc.f.Bits())
			assert.Equal(t, tc.af, tc.f.AF())
			back, ok := FromAF(tc.af)
			assert.Equal(t, tc.fromAFOkay, ok)
			if ok {
				assert.Equal(t, tc.f, back)
			}
		})
	}
	assert.Equal(t, [...]Family{IPv4, IPv6}, All)
}

func TestOfAndContains(t *testing.T) {
	tests := []struct {
		addr string
		want Family
	}{
		{"10.0.0.1", IPv4},
		{"0.0.0.0", IPv4},
		{"fd00::1", IPv6},
		{"::ffff:10.0.0.1", IPv6}, // mapped stays IPv6
		{"fe80::1%eth0", IPv6},
	}
	for _, tc := range tests {
		a := netip.MustParseAddr(tc.addr)
		assert.Equal(t, tc.want, Of(a), tc.addr)
		assert.True(t, tc.want.Contains(a), tc.addr)
		other := IPv4
		if tc.want == IPv4 {
			other = IPv6
		}
		assert.False(t, other.Contains(a), tc.addr)
		assert.True(t, tc.want.ContainsPrefix(netip.PrefixFrom(a.WithZone(""), 1)), tc.addr)
	}
	assert.Equal(t, Family(0), Of(netip.Addr{}))
	assert.False(t, IPv4.Contains(netip.Addr{}))
	assert.False(t, Family(0).Contains(netip.MustParseAddr("10.0.0.1")))
	assert.False(t, IPv4.ContainsPrefix(netip.Prefix{}))
}

func TestCheck(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.1")
	v6 := netip.MustParseAddr("2001:db8::1")
	require.NoError(t, IPv4.Check(v4))
	require.NoError(t, IPv6.Check(v6))
	require.ErrorIs(t, IPv4.Check(v6), ErrWrongFamily)
	require.ErrorIs(t, IPv6.Check(v4), ErrWrongFamily)
	require.ErrorIs(t, IPv4.Check(netip.Addr{}), ErrInvalidAddress)
	require.ErrorIs(t, Family(9).Check(v4), ErrInvalidFamily)
	assert.Contains(t, IPv6.Check(v4).Error(), "192.0.2.1 is not an IPv6 address")
	zoned := IPv6.Check(netip.MustParseAddr("fe80::1%eth0"))
	require.ErrorIs(t, zoned, ErrInvalidAddress)
	assert.Contains(t, zoned.Error(), "fe80::1%eth0 has a zone")

	require.NoError(t, IPv4.CheckPrefix(netip.MustParsePrefix("192.0.2.0/24")))
	require.ErrorIs(t, IPv6.CheckPrefix(netip.MustParsePrefix("192.0.2.0/24")), ErrWrongFamily)
	require.ErrorIs(t, IPv6.CheckPrefix(netip.Prefix{}), ErrInvalidAddress)
	require.ErrorIs(t, Family(0).CheckPrefix(netip.Prefix{}), ErrInvalidFamily)
}

func TestCheckNet(t *testing.T) {
	for _, tc := range []struct {
		f    Family
		p    string
		want error
	}{
		{IPv4, "10.0.0.0/24", nil},
		{IPv4, "10.0.0.1/32", nil},
		{IPv4, "0.0.0.0/0", nil},
		{IPv4, "10.0.0.1/24", ErrHostBits},
		{IPv4, "10.0.0.1/0", ErrHostBits},
		{IPv6, "fd00::/64", nil},
		{IPv6, "fd00::1/64", ErrHostBits},
		{IPv6, "10.0.0.0/24", ErrWrongFamily},
		{IPv4, "fd00::/64", ErrWrongFamily},
	} {
		err := tc.f.CheckNet(netip.MustParsePrefix(tc.p))
		if tc.want == nil {
			require.NoError(t, err, tc.p)
			continue
		}
		require.ErrorIs(t, err, tc.want, tc.p)
		require.Contains(t, err.Error(), tc.p)
	}
	require.ErrorIs(t, IPv4.CheckNet(netip.Prefix{}), ErrInvalidAddress)
}
