package routerule_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// scribbleRules changes e's rules as others would: it deletes some of the
// rules at the owned priorities and adds about n rules there, a lookup of
// a table that is not owned (foreign) or one of rules (leftovers and
// drifted copies of ours). The kernel may refuse some; that is part of the
// draw.
func scribbleRules(t *testing.T, e env, r *rand.Rand, rules []routerule.Rule, n int) {
	t.Helper()
	ctx := context.Background()
	have, err := e.kern.Rules(ctx, e.fam)
	require.NoError(t, err)
	for _, k := range have {
		if k.Protocol != kernel.ProtoKernel && k.Priority >= ownedPrios[0] && k.Priority <= ownedPrios[len(ownedPrios)-1] && r.IntN(4) == 0 {
			_ = e.kern.DeleteRule(ctx, k)
		}
	}
	for range n {
		k := kernel.Rule{Family: e.fam, Priority: pick(r, ownedPrios...), Action: kernel.RuleLookup, Table: 200}
		if len(rules) > 0 && r.IntN(3) > 0 {
			w := rules[r.IntN(len(rules))]
			k.Src, k.Dst, k.Mark, k.Mask, k.Invert, k.IIF, k.OIF = w.Src, w.Dst, w.Mark, w.Mask, w.Invert, w.IIF, w.OIF
			if l, ok := w.Action.(routerule.ActionLookup); ok && r.IntN(2) == 0 {
				k.Table = l.Table
			} else {
				k.Table = pick(r, ownedTables...)
			}
		}
		_ = e.kern.AddRule(ctx, k)
	}
}

// ruleEvents is what the counter logs of p's writes.
func ruleEvents(p dataplane.Plan) []string {
	out := []string{}
	for _, w := range p.Writes {
		prio, _, _ := strings.Cut(w.Object, ":")
		out = append(out, w.Op.String()+" "+prio)
	}
	return out
}

// checkRulePlan checks the Plan properties on r as it stands: Plan writes
// nothing; the Apply after it makes exactly the writes it lists, in its
// order; after that Apply, Plan is empty and Apply writes nothing. writes
// is the namespace's own count of writes (nil on the kernel).
func checkRulePlan(t *testing.T, r *routerule.Rules, c *counter, writes func() int, what string) int {
	t.Helper()
	ctx := context.Background()
	count := func() int {
		if writes == nil {
			return 0
		}
		return writes()
	}
	c.calls()
	before := count()
	plan, err := r.Plan(ctx)
	require.NoError(t, err, what)
	_, adds, dels := c.calls()
	require.Zero(t, adds+dels, "%s: Plan wrote", what)
	require.Equal(t, before, count(), "%s: Plan wrote (the namespace's count)", what)

	_, err = r.Apply(ctx)
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, what)
	}
	got := c.writes()
	if got == nil {
		got = []string{}
	}
	// An add is "add", a delete "delete": the counter's words are the ops'.
	require.Equal(t, ruleEvents(plan), got, "%s: Apply made other writes than its Plan:\n%v", what, plan)
	if writes != nil {
		require.Equal(t, before+len(plan.Writes), count(), "%s: the namespace's count of writes", what)
	}

	c.calls()
	after, err := r.Plan(ctx)
	require.NoError(t, err, what)
	require.True(t, after.Empty(), "%s: Plan after Apply:\n%v", what, after)
	_, err = r.Apply(ctx)
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, what)
	}
	_, adds, dels = c.calls()
	require.Zero(t, adds+dels, "%s: an Apply whose Plan is empty wrote", what)
	return len(plan.Writes)
}

// rulePlanProperty draws rules and a kernel with foreign, leftover and
// drifted rules, and checks the Plan properties over rounds in which the
// declarations change, the kernel drifts (then a resync) and retries come
// due. It returns how many writes the Plans listed.
func rulePlanProperty(t *testing.T, e env, writes func() int, seed uint64, n int) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 21))
	clk := clock.NewFake(time.Unix(1000, 0))
	r, c := newRules(t, e, func(o *routerule.Options) { o.Clock = clk })
	rules := genRules(e, rng, n)
	scribbleRules(t, e, rng, rules, n/3)
	declare := func() {
		for _, w := range rules {
			switch rng.IntN(4) {
			case 0:
				_ = r.RemoveRule(w)
			case 1:
				_ = r.SetRule(w)
			}
		}
	}
	declare()
	total := checkRulePlan(t, r, c, writes, fmt.Sprintf("seed %d, first apply", seed))
	for round := 1; round <= 4; round++ {
		switch rng.IntN(3) {
		case 0:
			declare()
		case 1:
			scribbleRules(t, e, rng, rules, n/5)
			r.QueueResync()
		default:
			declare()
			scribbleRules(t, e, rng, rules, n/5)
			r.QueueResync()
		}
		if rng.IntN(2) == 0 {
			clk.Advance(time.Minute) // retries are due
		}
		total += checkRulePlan(t, r, c, writes, fmt.Sprintf("seed %d, round %d", seed, round))
	}
	return total
}

// TestPlanProperties checks on a fake namespace, for both families and
// many seeds, that Plan writes nothing, that Apply makes exactly the
// writes Plan listed, in its order, and that after it Plan is empty and
// Apply writes nothing: counted by the instance's counter and by the
// namespace (kernelfake.Namespace.Writes) alike.
func TestPlanProperties(t *testing.T) {
	for _, fam := range []routerule.Family{routerule.IPv4, routerule.IPv6} {
		for seed := range uint64(25) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ns := kernelfake.New(kernelfake.Options{})
				planned := rulePlanProperty(t, env{kern: ns, fam: fam}, ns.Writes, seed, 120)
				assert.Greater(t, planned, 30, "the draw makes writes to plan")
			})
		}
	}
}
