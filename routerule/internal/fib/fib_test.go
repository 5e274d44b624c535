package fib_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/routerule/internal/fib"
)

func cidr(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// TestDumpRoundTrip checks that a stored rule, dumped as netlink reports it
// and read back, is the same rule, except that drop actions become
// ActionUnknown.
func TestDumpRoundTrip(t *testing.T) {
	mask := uint32(0xf0)
	tests := []struct {
		name string
		mod  func(*netlink.Rule)
	}{
		{"lookup v4", func(r *netlink.Rule) { r.Table, r.Src = 100, cidr("10.0.0.0/8") }},
		{"lookup big table v6", func(r *netlink.Rule) { r.Family, r.Table, r.Dst = netlink.FAMILY_V6, 1<<20, cidr("fd00::/8") }},
		{"goto", func(r *netlink.Rule) { r.Goto = 200 }},
		{"blackhole", func(r *netlink.Rule) { r.Type = fib.ActionBlackhole }},
		{"prohibit", func(r *netlink.Rule) { r.Type = fib.ActionProhibit }},
		{"mark with mask", func(r *netlink.Rule) { r.Table, r.Mark, r.Mask = 5, 0x10, &mask }},
		{"mark default mask", func(r *netlink.Rule) { r.Table, r.Mark = 5, 0x10 }},
		{"exotic", func(r *netlink.Rule) {
			r.Table, r.IifName, r.OifName, r.Invert, r.Protocol = 5, "a", "b", true, 9
			r.IPProto, r.Dport, r.Sport = 6, netlink.NewRulePortRange(1, 2), netlink.NewRulePortRange(3, 4)
			r.UIDRange, r.Flow, r.TunID, r.Tos = netlink.NewRuleUIDRange(5, 6), 7, 8, 4
			r.SuppressPrefixlen, r.SuppressIfgroup = 1, 2
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := netlink.NewRule()
			r.Family, r.Priority = netlink.FAMILY_V4, 10
			tt.mod(r)
			stored, err := fib.FromRequest(r, true)
			require.NoError(t, err)
			back := fib.FromDump(stored.Dump())
			want := stored
			if fib.IsDrop(stored.Action) {
				want.Action = fib.ActionUnknown
			}
			assert.Equal(t, want, back)
			assert.True(t, fib.Exists(stored, back), "a rule blocks its own re-add")
			assert.True(t, fib.DeleteMatches(stored, back), "a rule's own delete matches it")
		})
	}
}

func TestFromRequestErrors(t *testing.T) {
	r := netlink.NewRule()
	r.Src, r.Dst = cidr("10.0.0.0/8"), cidr("fd00::/8")
	_, err := fib.FromRequest(r, true)
	require.ErrorIs(t, err, fib.ErrFamilyMismatch)

	r = netlink.NewRule()
	r.Src = &net.IPNet{IP: net.ParseIP("10.0.0.0").To4(), Mask: net.CIDRMask(40, 128)}
	_, err = fib.FromRequest(r, true)
	require.ErrorIs(t, err, fib.ErrPrefixLength)
}

func TestAddressWildcards(t *testing.T) {
	narrow := fib.Rule{Family: fib.FamilyV4, Priority: 5, HasPriority: true, Action: fib.ActionToTable, Table: 9,
		Src: netip.MustParsePrefix("10.0.0.0/8"), SuppressPrefixlen: -1, SuppressIfgroup: -1}
	wide := narrow
	wide.Src = netip.Prefix{}
	assert.True(t, fib.Exists(wide, narrow), "a catch-all request matches the narrower rule")
	assert.False(t, fib.Exists(narrow, wide))
	assert.True(t, fib.DeleteMatches(wide, narrow))
	assert.False(t, fib.DeleteMatches(narrow, wide))
	inverted := narrow
	inverted.Invert = true
	assert.True(t, fib.Exists(narrow, inverted), "invert is not compared")
}
