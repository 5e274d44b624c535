package iptables_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestIncrementalPlanMatchesFullPlan drives two Tables through the same
// random sequence of declarations, foreign changes and resyncs: one plans
// only what changed since its last write (the default), the other compares
// everything every time. Every Apply must write the same restore input
// (or none), return the same error and leave the same kernel.
func TestIncrementalPlanMatchesFullPlan(t *testing.T) {
	for _, appendGroup := range []bool{false, true} {
		for seed := int64(1); seed <= 40; seed++ {
			t.Run(fmt.Sprintf("append=%v/seed%d", appendGroup, seed), func(t *testing.T) {
				checkPlanEquivalence(t, appendGroup, seed)
			})
		}
	}
}

// checkPlanEquivalence runs one sequence; appendGroup makes the
// randomly declared hooks AppendRules groups rather than InsertRules ones.
func checkPlanEquivalence(t *testing.T, appendGroup bool, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	b, v := iptables.BackendNFT, ipfamily.IPv4
	type side struct {
		k   *iptablesfake.Kernel
		tbl *iptables.Table
	}
	var sides [2]side
	for i := range sides {
		ns, k := newFake()
		require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.1/32", "-j", "DROP"))
		tbl := newTable(t, fakeOpts(ns))
		if i == 1 {
			iptables.PlanFullyForTest(tbl)
		}
		sides[i] = side{k, tbl}
	}
	names := []string{"np-a", "np-b", "np-c", "np-d", "np-e", "np-f"}
	// randRules returns rules for chain i: accepts, and jumps only to
	// chains after it (no loops), sometimes to an undeclared one.
	randRules := func(i int) []netfilter.Rule {
		rules := make([]netfilter.Rule, rng.Intn(5))
		for j := range rules {
			switch {
			case i+1 < len(names) && rng.Intn(4) == 0:
				rules[j] = jump(names[i+1+rng.Intn(len(names)-i-1)])
			default:
				rules[j] = acceptFrom(fmt.Sprintf("10.0.%d.0/24", rng.Intn(6)))
			}
		}
		return rules
	}
	randJumps := func() []netfilter.Rule {
		rules := make([]netfilter.Rule, rng.Intn(4))
		for j := range rules {
			if rng.Intn(3) == 0 {
				rules[j] = acceptFrom(fmt.Sprintf("10.9.%d.0/24", rng.Intn(4)))
			} else {
				rules[j] = jump(names[rng.Intn(len(names))])
			}
		}
		return rules
	}
	// declared mirrors what was declared, for content-only changes.
	declared := map[string][]netfilter.Rule{}
	// recontent keeps the jumps of rules and replaces the other rules.
	recontent := func(rules []netfilter.Rule) []netfilter.Rule {
		out := make([]netfilter.Rule, len(rules))
		for j, r := range rules {
			out[j] = r
			if r.JumpTarget() == "" {
				out[j] = acceptFrom(fmt.Sprintf("10.%d.%d.0/24", rng.Intn(3), rng.Intn(6)))
			}
		}
		return out
	}
	var all []netfilter.Chain
	for i, n := range names {
		declared[n] = randRules(i)
		all = append(all, netfilter.Chain{Name: n, Rules: declared[n]})
	}
	for _, s := range sides {
		require.NoError(t, s.tbl.SetChains(all...))
	}
	hookRules := map[netfilter.Hook][]netfilter.Rule{}
	setHook := (*iptables.Table).InsertRules
	if appendGroup {
		setHook = (*iptables.Table).AppendRules
	}
	for step := 0; step < 80; step++ {
		var do func(s side) error
		switch op := rng.Intn(14); {
		case op >= 10:
			// Content-only changes: same jumps, other rules.
			var chains []netfilter.Chain
			for _, n := range names {
				if rules, ok := declared[n]; ok && rng.Intn(3) == 0 {
					declared[n] = recontent(rules)
					chains = append(chains, netfilter.Chain{Name: n, Rules: declared[n]})
				}
			}
			hook := []netfilter.Hook{netfilter.HookForward, netfilter.HookInput}[rng.Intn(2)]
			hr := recontent(hookRules[hook])
			hookRules[hook] = hr
			do = func(s side) error {
				if err := s.tbl.SetChains(chains...); err != nil {
					return err
				}
				return setHook(s.tbl, "test", hook, hr)
			}
		case op < 4:
			var chains []netfilter.Chain
			for i, n := range names {
				if rng.Intn(3) == 0 {
					declared[n] = randRules(i)
					chains = append(chains, netfilter.Chain{Name: n, Rules: declared[n], ForceProgramming: rng.Intn(6) == 0})
				}
			}
			do = func(s side) error { return s.tbl.SetChains(chains...) }
		case op == 4:
			n := names[rng.Intn(len(names))]
			delete(declared, n)
			do = func(s side) error { return s.tbl.RemoveChains(n) }
		case op == 5:
			chain, rules := []netfilter.Hook{netfilter.HookForward, netfilter.HookInput}[rng.Intn(2)], randJumps()
			hookRules[chain] = rules
			do = func(s side) error { return setHook(s.tbl, "test", chain, rules) }
		case op == 6:
			chain, rules := []netfilter.Hook{netfilter.HookForward, netfilter.HookOutput}[rng.Intn(2)], randJumps()
			do = func(s side) error { return s.tbl.AppendRules("test", chain, rules) }
		case op == 7:
			// Another agent: a foreign rule, a foreign jump to one of our
			// chains, or one of our rules deleted behind our back.
			args := [][]string{
				{"-I", "FORWARD", "1", "-s", "198.51.100.0/24", "-j", "ACCEPT"},
				{"-A", "OUTPUT", "-j", names[rng.Intn(len(names))]},
				{"-F", names[rng.Intn(len(names))]},
			}[rng.Intn(3)]
			do = func(s side) error { _ = s.k.Exec(iptablesfake.Backend(b), v, args...); return nil }
		case op == 8:
			do = func(s side) error { s.tbl.QueueResync(); return nil }
		default:
			do = func(side) error { return nil }
		}
		var errs [2]string
		for i, s := range sides {
			if err := do(s); err != nil {
				errs[i] = err.Error()
			}
		}
		require.Equal(t, errs[0], errs[1], "step %d: declaration", step)

		var inputs, saves [2]string
		for i, s := range sides {
			s.k.ResetCalls()
			_, err := s.tbl.Apply(context.Background())
			errs[i] = ""
			if err != nil {
				errs[i] = err.Error()
			}
			inputs[i] = lastRestore(s.k)
			saves[i] = s.k.Save(iptablesfake.Backend(b), v, "filter")
		}
		require.Equal(t, errs[0], errs[1], "step %d: Apply error", step)
		require.Equal(t, inputs[1], inputs[0], "step %d: restore input", step)
		require.Equal(t, saves[1], saves[0], "step %d: kernel", step)
		st0, st1 := sides[0].tbl.WorkStats(), sides[1].tbl.WorkStats()
		require.Equal(t, [2]int{st1.Chains, st1.Rules}, [2]int{st0.Chains, st0.Rules}, "step %d: gauges", step)
	}
}
