//go:build linux

package routerule_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// pick returns one of xs at random.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// genRules draws n rules for e's family at the owned priorities: every
// action, source and destination prefixes of every length (a few with host
// bits set, which the instance refuses), marks with and without masks,
// inverted matches, interface names that exist and that do not.
func genRules(e env, r *rand.Rand, n int) []routerule.Rule {
	prefix := func() netip.Prefix {
		if r.IntN(2) == 0 {
			return netip.Prefix{}
		}
		var p netip.Prefix
		if e.fam == routerule.IPv4 {
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), pick(r, 0, 8, 16, 24, 32))
		} else {
			p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, byte(r.IntN(256)), byte(r.IntN(256)), 15: byte(r.IntN(256))}), pick(r, 0, 8, 48, 64, 128))
		}
		if r.IntN(10) > 0 {
			p = p.Masked()
		}
		return p
	}
	out := make([]routerule.Rule, 0, n)
	for range n {
		rule := routerule.Rule{
			Priority: pick(r, ownedPrios...),
			Src:      prefix(),
			Dst:      prefix(),
			Invert:   r.IntN(5) == 0,
			IIF:      pick(r, "", "", "lo", "np-nowhere", "fifteen-bytes-x"),
			OIF:      pick(r, "", "", "lo", "np-nowhere"),
		}
		switch r.IntN(4) {
		case 1:
			rule.Mark = pick[uint32](r, 1, 0x10, 0xffffffff)
		case 2:
			rule.Mask = pick[uint32](r, 0x4, 0xff00, 0xffffffff)
			rule.Mark = rule.Mask & pick[uint32](r, 0, 0x4, 0xff00, 0x1234)
		}
		switch r.IntN(3) {
		case 0:
			rule.Action = routerule.ActionLookup{Table: pick(r, ownedTables...)}
		case 1:
			rule.Action = routerule.ActionGoto{Priority: rule.Priority + uint32(1+r.IntN(3))}
		default:
			rule.Action = routerule.ActionBlackhole{}
		}
		out = append(out, rule)
	}
	return out
}

// resyncWritesNothing declares generated rules (those the instance
// accepts), applies, and checks that a resync then writes nothing: every
// rule is read back as it was written. It returns how many rules the
// instance declared.
func resyncWritesNothing(t *testing.T, e env, seed uint64, n int) int {
	t.Helper()
	r, c := newRules(t, e)
	rng := rand.New(rand.NewPCG(seed, 0))
	invalid := 0
	for _, rule := range genRules(e, rng, n) {
		if err := r.SetRule(rule); err != nil {
			require.ErrorIs(t, err, routerule.ErrInvalidRule)
			invalid++
		}
	}
	ctx := context.Background()
	_, err := r.Apply(ctx)
	refused := 0
	if err != nil {
		var pe *dataplane.PartialError
		require.ErrorAs(t, err, &pe, "seed %d", seed)
		refused = pe.Failed
		t.Logf("seed %d: refused: %v", seed, err)
	}
	t.Logf("seed %d: %d rules invalid, %d declared, %d refused by the kernel", seed, invalid, len(r.Desired()), refused)
	c.calls()
	r.QueueResync()
	_, err = r.Apply(ctx)
	if refused == 0 {
		require.NoError(t, err)
	}
	lists, adds, dels := c.calls()
	assert.Equal(t, 1, lists)
	assert.Zero(t, adds+dels, "seed %d: a resync after Apply writes nothing", seed)
	if refused == 0 {
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...), "seed %d", seed)
	}
	return len(r.Desired())
}

// TestResyncWritesNothing is the property that every rule the instance
// accepts is stored by the fake as the instance reads it back: a resync
// right after Apply writes nothing, for many seeds.
func TestResyncWritesNothing(t *testing.T) {
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				declared := resyncWritesNothing(t, env{kern: kernelfake.New(kernelfake.Options{}), fam: fam}, seed, 200)
				assert.Greater(t, declared, 50)
			})
		}
	}
}

// TestKernelResyncWritesNothing is TestResyncWritesNothing against the
// real kernel, in a fresh namespace per family and seed.
func TestKernelResyncWritesNothing(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		for _, seed := range []uint64{1, 2} {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				declared := resyncWritesNothing(t, env{kern: openKernel(t), fam: fam}, seed, 300)
				assert.Greater(t, declared, 50)
			})
		}
	}
}
