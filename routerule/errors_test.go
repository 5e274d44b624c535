package routerule_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// Bad input is refused with an error whose text names the package once and
// names what is wrong, that errors.Is matches against every sentinel it
// speaks of, and that writes nothing.
func TestBadInputErrors(t *testing.T) {
	r, k := newFakeRules(t, routerule.IPv4)
	require.NoError(t, r.SetRule(routerule.Rule{Priority: 100, Src: v4Src, Action: lookup(100)}))
	_, err := r.Apply(context.Background())
	require.NoError(t, err)
	k.ResetCounts()
	before := r.Desired()

	for _, tc := range []struct {
		name string
		call func() error
		is   []error
		text string
	}{
		{"source host bits", func() error {
			return r.SetRule(routerule.Rule{Priority: 100, Src: mustPrefix("10.1.2.3/16"), Action: lookup(100)})
		}, []error{routerule.ErrInvalidRule, ipfamily.ErrHostBits}, "source 10.1.2.3/16 has host bits set (the network is 10.1.0.0/16)"},
		{"destination host bits", func() error {
			return r.RemoveRule(routerule.Rule{Priority: 100, Dst: mustPrefix("10.2.0.1/24"), Action: lookup(100)})
		}, []error{routerule.ErrInvalidRule, ipfamily.ErrHostBits}, "destination 10.2.0.1/24"},
		{"priority not owned", func() error {
			return r.SetRule(routerule.Rule{Priority: 7, Action: lookup(100)})
		}, []error{routerule.ErrInvalidRule, routerule.ErrNotOwned}, "priority 7 is not owned"},
		{"table not owned", func() error {
			return r.SetRules([]routerule.Rule{{Priority: 100, Action: lookup(200)}})
		}, []error{routerule.ErrInvalidRule, routerule.ErrNotOwned}, "table 200 is not owned"},
		{"conflict", func() error {
			a := routerule.Rule{Priority: 100, Mark: 1, Mask: 1, Action: lookup(100)}
			b := a
			b.Invert = true
			return r.SetRules([]routerule.Rule{a, b})
		}, []error{routerule.ErrInvalidRule, routerule.ErrConflict}, "invert or goto target"},
		{"interface", func() error {
			return r.SetRule(routerule.Rule{Priority: 100, IIF: "a/b", Action: lookup(100)})
		}, []error{routerule.ErrInvalidRule}, `iif: interface name "a/b" contains '/'`},
		{"table 0", func() error {
			_, err := routerule.New(routerule.Options{Family: routerule.IPv4, Kernel: kernelfake.New(kernelfake.Options{}), Priorities: []uint32{1}, Tables: []uint32{0}})
			return err
		}, []error{routerule.ErrInvalidOptions}, "table 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			text := err.Error()
			assert.True(t, strings.HasPrefix(text, "routerule: "), "%q", text)
			assert.Equal(t, 1, strings.Count(text, "routerule: "), "one package prefix: %q", text)
			assert.Contains(t, text, tc.text)
			for _, s := range tc.is {
				assert.ErrorIs(t, err, s)
			}
		})
	}
	assert.Equal(t, before, r.Desired(), "nothing recorded")
	_, err = r.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, k.Calls(kernelfake.OpRules)+k.Writes(), "nothing written")
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
