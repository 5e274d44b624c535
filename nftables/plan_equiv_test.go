//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// equivState is a declared state the test replays on a fresh Table.
type equivState struct {
	chains map[string]netfilter.Chain
	hook   []netfilter.Rule
	elems  map[int]string // service → chain its element goes to
}

func (s *equivState) declare(t *testing.T, tbl *nftables.Table) {
	t.Helper()
	vm := nftables.Set{Name: "svc", Key: svcKey, Verdict: true}
	for _, i := range slices.Sorted(maps.Keys(s.elems)) {
		vm.Elements = append(vm.Elements, svcElem(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}).String(), 80, s.elems[i]))
	}
	require.NoError(t, tbl.SetSets(vm))
	require.NoError(t, tbl.SetChains(slices.Collect(maps.Values(s.chains))...))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, s.hook))
}

// TestIncrementalPlansMatchFullPlans makes random changes of every kind
// (chains declared, changed, removed, forced; jumps from the hook; map
// elements added, moved, removed) and after each Apply, which plans only
// what changed, checks that a restarted Table — which reads and plans
// everything — finds the kernel as declared, and reports the same objects
// as not writable.
func TestIncrementalPlansMatchFullPlans(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			ns := nftablesfake.New()
			tbl := newTable(t, fakeOpts(ns))
			st := &equivState{chains: map[string]netfilter.Chain{}, elems: map[int]string{}}
			name := func() string { return fmt.Sprintf("c%d", rng.IntN(12)) }
			st.declare(t, tbl)
			for step := range 60 {
				switch rng.IntN(7) {
				case 0, 1: // declare or change a chain: rules jumping to others
					n := name()
					var rules []netfilter.Rule
					for range rng.IntN(3) {
						if tgt := name(); tgt != n {
							rules = append(rules, jump(tgt))
						}
					}
					rules = append(rules, acceptFrom(fmt.Sprintf("10.%d.0.0/16", rng.IntN(4))))
					ch := netfilter.Chain{Name: n, Rules: rules, ForceProgramming: rng.IntN(4) == 0}
					st.chains[n] = ch
					require.NoError(t, tbl.SetChains(ch))
				case 2:
					n := name()
					delete(st.chains, n)
					require.NoError(t, tbl.RemoveChains(n))
				case 3: // the hook jumps to a few chains
					st.hook = nil
					for range rng.IntN(3) {
						st.hook = append(st.hook, jump(name()))
					}
					require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, st.hook))
				case 4, 5: // a map element goes to a chain
					i, n := rng.IntN(8), name()
					st.elems[i] = n
					require.NoError(t, tbl.AddElements("svc", svcElem(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}).String(), 80, n)))
				case 6:
					i := rng.IntN(8)
					delete(st.elems, i)
					require.NoError(t, tbl.DeleteElements("svc", svcElem(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)}).String(), 80, "")))
				}
				_, err := tbl.Apply(context.Background())
				if err != nil && !errors.Is(err, dataplane.ErrPartial) {
					t.Fatalf("step %d: %v", step, err)
				}
				fresh := newTable(t, fakeOpts(ns))
				st.declare(t, fresh)
				n, perr := nftables.PendingAfterRead(fresh)
				objectErrs := func(err error) []string {
					var pe *dataplane.PartialError
					if !errors.As(err, &pe) {
						return nil
					}
					var out []string
					for _, o := range pe.Objects() {
						if o.Reason != nftables.ErrRefused {
							out = append(out, string(o.Kind)+" "+o.Name)
						}
					}
					slices.Sort(out) // the ledger lists them in the order they first failed
					return out
				}
				if objectErrs(err) == nil {
					require.NoError(t, perr, "step %d: the restarted Table finds objects it cannot write\n%s", step, ns.Dump())
					require.Zero(t, n, "step %d: the kernel differs from the declared state\n%s", step, ns.Dump())
				} else {
					_, ferr := fresh.Apply(context.Background())
					require.Equal(t, objectErrs(err), objectErrs(ferr), "step %d", step)
				}
			}
		})
	}
}
