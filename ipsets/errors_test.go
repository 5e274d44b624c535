package ipsets_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
)

// requirePrefixedOnce checks that err's text starts with the package's
// prefix, names it once, and that errors.Is matches every sentinel.
func requirePrefixedOnce(t *testing.T, err error, sentinels ...error) {
	t.Helper()
	require.Error(t, err)
	text := err.Error()
	assert.True(t, strings.HasPrefix(text, "ipsets: "), "prefix: %s", text)
	assert.Equal(t, 1, strings.Count(text, "ipsets: "), "prefix once: %s", text)
	assert.NotContains(t, text, "ipfamily: ", "one package prefix: %s", text)
	for _, s := range sentinels {
		assert.ErrorIs(t, err, s, text)
	}
}

// TestBadInputErrors checks the errors of bad input at every entry point:
// one "ipsets: " prefix at the start, errors.Is matching every sentinel the
// text speaks of, and nothing run.
func TestBadInputErrors(t *testing.T) {
	ma, mp := netip.MustParseAddr, netip.MustParsePrefix
	ip := func(s string) ipsets.Member { return ipsets.IPMember(ma(s)) }
	hashIP := ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP}
	hashNet := ipsets.SetMetadata{Name: "n", Type: ipsets.HashNet}
	cases := []struct {
		name      string
		call      func(d *ipsets.IPSets) error
		sentinels []error
		names     string // a part of the text that says what was wrong
	}{
		{"host bits", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashNet, []ipsets.Member{ipsets.NetMember(mp("10.0.0.1/24"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/24 has host bits set (the network is 10.0.0.0/24)"},
		{"host bits added", func(d *ipsets.IPSets) error {
			return d.AddMembers("n", []ipsets.Member{ipsets.NetMember(mp("10.9.9.9/16"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.9.9.9/16"},
		{"host bits removed", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("n", []ipsets.Member{ipsets.NetNetMember(mp("10.0.0.0/8"), mp("10.0.0.1/8"))})
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "10.0.0.1/8"},
		{"wrong family member", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(hashIP, []ipsets.Member{ip("10.0.0.1"), ip("fd00::1")})
		}, []error{ipsets.ErrWrongFamily, ipfamily.ErrWrongFamily}, `fd00::1 is IPv6, the set is IPv4 (set "s", member 1)`},
		{"wrong family set", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, Family: ipsets.IPv6}, nil)
		}, []error{ipsets.ErrWrongFamily, ipfamily.ErrWrongFamily}, "the driver is IPv4"},
		{"unspecified address", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{ip("0.0.0.0")})
		}, []error{ipsets.ErrInvalidMember}, "unspecified address"},
		{"zone", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{ipsets.IPMember(ma("fe80::1%eth0"))})
		}, []error{ipsets.ErrInvalidMember}, "zone"},
		{"zero member", func(d *ipsets.IPSets) error {
			return d.AddMembers("s", []ipsets.Member{{}})
		}, []error{ipsets.ErrInvalidMember}, "zero Member"},
		{"unknown type", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: "hash:mac"}, nil)
		}, []error{ipsets.ErrUnknownType}, `"hash:mac"`},
		{"bad metadata", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.BitmapPort, MaxSize: 3}, nil)
		}, []error{ipsets.ErrInvalidMetadata}, "MaxSize must be zero"},
		{"too many", func(d *ipsets.IPSets) error {
			return d.AddOrReplaceSet(ipsets.SetMetadata{Name: "s", Type: ipsets.HashIP, MaxSize: 1}, []ipsets.Member{ip("10.0.0.1"), ip("10.0.0.2")})
		}, []error{ipsets.ErrTooManyMembers}, "MaxSize is 1"},
		{"unknown set", func(d *ipsets.IPSets) error {
			return d.AddMembers("nope", []ipsets.Member{ip("10.0.0.1")})
		}, []error{ipsets.ErrUnknownSet}, `"nope"`},
		{"bad name", func(d *ipsets.IPSets) error {
			return d.RemoveMembers("a b", nil)
		}, []error{ipsets.ErrInvalidName}, `"a b"`},
		{"name too long", func(d *ipsets.IPSets) error {
			return d.RemoveSet(strings.Repeat("x", 28))
		}, []error{ipsets.ErrNameTooLong}, "the kernel allows 31"},
		{"kernel name", func(d *ipsets.IPSets) error {
			_, err := d.KernelName("~0")
			return err
		}, []error{ipsets.ErrInvalidName}, `"~0"`},
		{"parse host bits", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember(ipsets.HashNet, "fd00::1/64")
			return err
		}, []error{ipsets.ErrInvalidMember, ipfamily.ErrHostBits}, "fd00::1/64 has host bits"},
		{"parse syntax", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember(ipsets.HashIPPort, "10.0.0.1,tcp:")
			return err
		}, []error{ipsets.ErrInvalidMember}, "malformed member"},
		{"parse type", func(*ipsets.IPSets) error {
			_, err := ipsets.ParseMember("list:set", "a")
			return err
		}, []error{ipsets.ErrUnknownType}, `"list:set"`},
		{"options", func(*ipsets.IPSets) error {
			_, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4~"})
			return err
		}, []error{ipsets.ErrInvalidOptions}, `"np4~"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, k := newFake(t, ipsets.IPv4)
			require.NoError(t, d.AddOrReplaceSet(hashIP, []ipsets.Member{ip("10.0.0.1")}))
			require.NoError(t, d.AddOrReplaceSet(hashNet, []ipsets.Member{ipsets.NetMember(mp("10.0.0.0/8"))}))
			apply(t, d)
			before := len(k.Calls())
			err := tc.call(d)
			requirePrefixedOnce(t, err, tc.sentinels...)
			assert.Contains(t, err.Error(), tc.names)
			assert.Len(t, k.Calls(), before, "nothing run")
			apply(t, d)
			assert.Zero(t, k.CountCalls("restore")-1, "nothing written after the bad input")
		})
	}
}
