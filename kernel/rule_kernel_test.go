//go:build linux

package kernel

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// asKernelStores returns r as a dump reports it: a mark without a mask
// gets the full mask.
func asKernelStores(r Rule) Rule {
	if r.Mark != 0 && r.Mask == 0 {
		r.Mask = 0xffffffff
	}
	return r
}

func TestKernelRules(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	cases := ruleCases()
	for name, r := range cases {
		require.NoError(t, e.ns.AddRule(ctx, r), name)
	}
	for _, f := range []Family{IPv4, IPv6} {
		got, err := e.ns.Rules(ctx, f)
		require.NoError(t, err)
		for name, r := range cases {
			if r.Family == f {
				assert.Contains(t, got, asKernelStores(r), name)
			}
		}
		// The kernel's own rules, with their actions.
		assert.Contains(t, got, Rule{Family: f, Priority: 0, Action: RuleLookup, Table: TableLocal, Protocol: ProtoKernel})
		assert.Contains(t, got, Rule{Family: f, Priority: 32766, Action: RuleLookup, Table: TableMain, Protocol: ProtoKernel})

		// The netlink library sees the same rules, in the same order (it
		// cannot tell their actions).
		nrs, err := e.kns.Handle().RuleList(f.AF())
		require.NoError(t, err)
		require.Len(t, got, len(nrs))
		for i, nr := range nrs {
			assert.Equal(t, uint32(nr.Priority), got[i].Priority, "rule %d", i)
			assert.Equal(t, uint32(nr.Table), got[i].Table, "rule %d", i)
			assert.Equal(t, nr.Invert, got[i].Invert, "rule %d", i)
			assert.Equal(t, nr.Mark, got[i].Mark, "rule %d", i)
			assert.Equal(t, nr.IifName, got[i].IIF, "rule %d", i)
			assert.Equal(t, uint32(max(nr.Goto, 0)), got[i].Goto, "rule %d", i)
			assert.Equal(t, prefixOfIPNet(nr.Src), got[i].Src, "rule %d", i)
		}
	}

	// An equal rule exists; a delete matches on the fields it sets.
	assert.ErrorIs(t, e.ns.AddRule(ctx, cases["v4 lookup"]), ErrExists)
	assert.ErrorIs(t, e.ns.AddRule(ctx, cases["v4 lookup"]), unix.EEXIST)
	for name, r := range cases {
		require.NoError(t, e.ns.DeleteRule(ctx, r), name)
		assert.ErrorIs(t, e.ns.DeleteRule(ctx, r), ErrNotFound, name)
	}
	require.NoError(t, e.ns.AddRule(ctx, rule(IPv6, 300, 9)))
	require.NoError(t, e.ns.DeleteRule(ctx, Rule{Family: IPv6, Priority: 300}), "priority alone")
	for _, f := range []Family{IPv4, IPv6} {
		got, err := e.ns.Rules(ctx, f)
		require.NoError(t, err)
		assert.Len(t, got, map[Family]int{IPv4: 3, IPv6: 2}[f], "only the kernel's own rules are left")
	}

	// Bad input is refused before anything is sent.
	assert.ErrorIs(t, e.ns.AddRule(ctx, Rule{Family: IPv4, Action: RuleLookup}), ErrInvalid)
	assert.ErrorIs(t, e.ns.DeleteRule(ctx, Rule{}), ErrInvalid)
	_, err := e.ns.Rules(ctx, 0)
	assert.ErrorIs(t, err, ErrInvalid)
}
