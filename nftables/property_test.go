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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// propModel is the declared state of a Table, as the property test keeps
// it: what a fresh Table is given to compare with.
type propModel struct {
	chains map[string]netfilter.Chain
	// hooks holds each hook's InsertRules (0) and AppendRules (1) rules.
	hooks    map[netfilter.Hook][2][]netfilter.Rule
	policies map[netfilter.Hook]nftables.Policy
	// vmaps are the verdict maps' elements: service number → verdict.
	vmaps map[string]map[int]netfilter.Action
	addrs []netip.Addr // the plain set's addresses; nil: not declared
}

var propHooks = []netfilter.Hook{netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput}

func vmapSet(name string, elems map[int]netfilter.Action) nftables.Set {
	s := nftables.Set{Name: name, Key: svcKey, Verdict: true}
	for _, i := range slices.Sorted(maps.Keys(elems)) {
		s.Elements = append(s.Elements, vmapElem(i, elems[i]))
	}
	return s
}

func vmapElem(i int, v netfilter.Action) nftables.Element {
	return nftables.Element{Key: []nftables.Value{nftables.Addr(netip.AddrFrom4([4]byte{10, 96, 0, byte(i)})),
		nftables.Proto(netfilter.ProtoTCP), nftables.Port(80)}, Verdict: v}
}

func addrSet(addrs []netip.Addr) nftables.Set {
	s := nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}}
	for _, a := range addrs {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(a)))
	}
	return s
}

// declare gives a fresh Table the model's state.
func (m *propModel) declare(t *testing.T, tbl *nftables.Table) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(m.vmaps)) {
		require.NoError(t, tbl.SetSets(vmapSet(name, m.vmaps[name])))
	}
	if m.addrs != nil {
		require.NoError(t, tbl.SetSets(addrSet(m.addrs)))
	}
	require.NoError(t, tbl.SetChains(slices.Collect(maps.Values(m.chains))...))
	for h, g := range m.hooks {
		require.NoError(t, tbl.InsertRules("test", h, g[0]))
		require.NoError(t, tbl.AppendRules("test", h, g[1]))
	}
	for h, p := range m.policies {
		require.NoError(t, tbl.SetPolicy(h, p))
	}
}

// uses reports whether a declared rule uses set name.
func (m *propModel) uses(name string) bool {
	check := func(rules []netfilter.Rule) bool {
		for _, r := range rules {
			if v, ok := r.Action.(netfilter.ActionVerdictMap); ok && v.Map == name {
				return true
			}
			for _, x := range r.Matches {
				if s, ok := x.(netfilter.MatchSet); ok && s.Name == name {
					return true
				}
			}
		}
		return false
	}
	for _, c := range m.chains {
		if check(c.Rules) {
			return true
		}
	}
	for _, g := range m.hooks {
		if check(g[0]) || check(g[1]) {
			return true
		}
	}
	return false
}

// objectNames lists the objects a PartialError names, by kind and name.
func objectNames(err error) []string {
	var pe *dataplane.PartialError
	if !errors.As(err, &pe) {
		return nil
	}
	var out []string
	for _, o := range pe.Objects() {
		out = append(out, fmt.Sprintf("%s %s: %v", o.Kind, o.Name, o.Reason))
	}
	slices.Sort(out) // the ledger lists them in the order they first failed
	return out
}

// TestPropertyIncrementalEqualsFull declares random states — chains
// jumping and going to each other, to undeclared chains, to the base
// chains' names and to names outside ChainPrefix; hooks' inserted and
// appended rules and policies; verdict maps whose elements jump anywhere;
// a plain set — and checks after every step that:
//   - a declaration naming a base chain or a chain outside ChainPrefix as
//     a jump or goto target is refused, with nothing changed;
//   - every accepted declaration is applied so that the incremental plan
//     reaches the state a full plan does: the Table's own view of what is
//     programmed is the one a walk of the whole table computes, a resync
//     (which reads the table and plans everything) writes nothing, and a
//     fresh Table given the same declarations finds nothing to write and
//     the same objects it cannot write.
func TestPropertyIncrementalEqualsFull(t *testing.T) {
	for seed := range uint64(64) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 20))
			ns := nftablesfake.New()
			opts := fakeOpts(ns)
			opts.ChainPrefix = "np-"
			clk := opts.Clock.(*clock.Fake)
			tbl := newTable(t, opts)
			m := &propModel{chains: map[string]netfilter.Chain{}, hooks: map[netfilter.Hook][2][]netfilter.Rule{},
				policies: map[netfilter.Hook]nftables.Policy{}, vmaps: map[string]map[int]netfilter.Action{}}
			own := func() string { return fmt.Sprintf("np-c%d", rng.IntN(10)) }
			// target returns a jump target: mostly our chains, now and then
			// a base chain's name or a name outside the prefix (invalid).
			target := func() (string, bool) {
				switch rng.IntN(20) {
				case 0:
					return string(propHooks[rng.IntN(len(propHooks))]), false
				case 1:
					return nftables.BaseChain(propHooks[rng.IntN(len(propHooks))]), false
				case 2:
					return "other-x", false
				}
				return own(), true
			}
			verdict := func() (netfilter.Action, bool) {
				switch rng.IntN(6) {
				case 0:
					return netfilter.Accept(), true
				case 1:
					n, ok := target()
					return netfilter.Jump(n), ok
				}
				n, ok := target()
				return netfilter.Goto(n), ok
			}
			rules := func(self string) ([]netfilter.Rule, bool) {
				var out []netfilter.Rule
				valid := true
				for range rng.IntN(4) {
					switch rng.IntN(6) {
					case 0, 1, 2:
						n, ok := target()
						if n == self {
							continue
						}
						valid = valid && ok
						a := netfilter.Jump(n)
						if rng.IntN(3) == 0 {
							a = netfilter.Goto(n)
						}
						out = append(out, netfilter.Rule{Matches: []netfilter.Match{src(fmt.Sprintf("10.%d.0.0/16", rng.IntN(3)))}, Action: a})
					case 3:
						if names := slices.Sorted(maps.Keys(m.vmaps)); len(names) > 0 {
							out = append(out, netfilter.Rule{Action: netfilter.VerdictMap(names[rng.IntN(len(names))], netfilter.Dst, netfilter.Dst)})
						}
					case 4:
						if m.addrs != nil {
							out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceIPSet("addrs")}, Action: netfilter.Drop()})
						}
					default:
						out = append(out, acceptFrom(fmt.Sprintf("10.%d.0.0/16", rng.IntN(3))))
					}
				}
				return out, valid
			}
			for step := range 80 {
				var err error
				valid := true
				what := ""
				switch op := rng.IntN(12); op {
				case 0, 1, 2:
					n := own()
					rs, ok := rules(n)
					c := netfilter.Chain{Name: n, Rules: rs, ForceProgramming: rng.IntN(5) == 0}
					what, valid = fmt.Sprintf("SetChains %s %v", n, rs), ok
					if err = tbl.SetChains(c); err == nil {
						m.chains[n] = c
					}
				case 3:
					n := own()
					what = "RemoveChains " + n
					if err = tbl.RemoveChains(n); err == nil {
						delete(m.chains, n)
					}
				case 4, 5:
					h := propHooks[rng.IntN(len(propHooks))]
					rs, ok := rules("")
					g := m.hooks[h]
					appendGroup := rng.IntN(2)
					what, valid = fmt.Sprintf("hook %s group %d %v", h, appendGroup, rs), ok
					if appendGroup == 1 {
						err = tbl.AppendRules("test", h, rs)
					} else {
						err = tbl.InsertRules("test", h, rs)
					}
					if err == nil {
						g[appendGroup] = rs
						m.hooks[h] = g
					}
				case 6:
					h := propHooks[rng.IntN(len(propHooks))]
					p := nftables.Policy(rng.IntN(2))
					what = fmt.Sprintf("SetPolicy %s %v", h, p)
					if err = tbl.SetPolicy(h, p); err == nil {
						m.policies[h] = p
					}
				case 7: // declare a verdict map anew
					name := []string{"vm", "vm2"}[rng.IntN(2)]
					elems := map[int]netfilter.Action{}
					oks := map[int]bool{}
					for range rng.IntN(4) {
						i := rng.IntN(6)
						elems[i], oks[i] = verdict()
					}
					for _, ok := range oks {
						valid = valid && ok
					}
					what = fmt.Sprintf("SetSets %s %v", name, elems)
					if err = tbl.SetSets(vmapSet(name, elems)); err == nil {
						m.vmaps[name] = elems
					}
				case 8, 9: // add or change an element
					name := []string{"vm", "vm2"}[rng.IntN(2)]
					if m.vmaps[name] == nil {
						continue
					}
					i := rng.IntN(6)
					v, ok := verdict()
					what, valid = fmt.Sprintf("AddElements %s %d %v", name, i, v), ok
					if err = tbl.AddElements(name, vmapElem(i, v)); err == nil {
						m.vmaps[name][i] = v
					}
				case 10:
					name := []string{"vm", "vm2"}[rng.IntN(2)]
					if m.vmaps[name] == nil {
						continue
					}
					i := rng.IntN(6)
					what = fmt.Sprintf("DeleteElements %s %d", name, i)
					if err = tbl.DeleteElements(name, vmapElem(i, nil)); err == nil {
						delete(m.vmaps[name], i)
					}
				case 11:
					switch name := []string{"vm", "vm2", "addrs"}[rng.IntN(3)]; {
					case rng.IntN(2) == 0 && name == "addrs":
						addrs := []netip.Addr{}
						for range rng.IntN(3) {
							addrs = append(addrs, netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(8))}))
						}
						what = "SetSets addrs"
						if err = tbl.SetSets(addrSet(addrs)); err == nil {
							m.addrs = addrs
						}
					default:
						what = "RemoveSets " + name
						used := m.uses(name)
						err = tbl.RemoveSets(name)
						if used {
							require.ErrorIs(t, err, nftables.ErrSetInUse, "step %d: %s", step, what)
							err = nil
						} else if err == nil {
							delete(m.vmaps, name)
							if name == "addrs" {
								m.addrs = nil
							}
						}
					}
				}
				if !valid {
					require.Error(t, err, "step %d: %s: a jump to a base chain or outside ChainPrefix was accepted", step, what)
					if !errors.Is(err, nftables.ErrNotOwned) {
						require.ErrorIs(t, err, netfilter.ErrInvalidChainName, "step %d: %s", step, what)
					}
				} else {
					require.NoError(t, err, "step %d: %s", step, what)
				}
				_, err = tbl.Apply(context.Background())
				if err != nil && !errors.Is(err, dataplane.ErrPartial) {
					t.Fatalf("step %d (%s): %v", step, what, err)
				}
				t.Logf("step %d: %s: %v", step, what, objectNames(err))
				if errors.Is(err, nftables.ErrRefused) {
					// An object the kernel refused waits for its retry, which
					// a fresh Table does not: compare after it.
					clk.Advance(10 * time.Minute)
					_, err = tbl.Apply(context.Background())
					if err != nil && !errors.Is(err, dataplane.ErrPartial) {
						t.Fatalf("step %d (%s): %v", step, what, err)
					}
				}
				require.NoError(t, nftables.CheckProgrammed(tbl), "step %d (%s): the incremental view of what is programmed differs from a full walk", step, what)
				// A resync reads the table and plans everything: it finds
				// nothing to change (it may try again what the kernel refused,
				// and be refused again).
				dump := ns.Dump()
				tbl.QueueResync()
				bumpGeneration(t, ns) // make the resync read the table
				_, rerr := tbl.Apply(context.Background())
				require.Equal(t, objectNames(err), objectNames(rerr), "step %d (%s): a resync changed the objects not written", step, what)
				require.Equal(t, dump, ns.Dump(), "step %d (%s): a resync after an Apply changed the table", step, what)

				fresh := newTable(t, opts)
				m.declare(t, fresh)
				_, ferr := fresh.Apply(context.Background())
				require.Equal(t, objectNames(err), objectNames(ferr), "step %d (%s): a fresh Table names other objects", step, what)
				require.Equal(t, dump, ns.Dump(), "step %d (%s): a fresh Table's full plan changed the table", step, what)
				require.NoError(t, fresh.Close())
			}
		})
	}
}

// bumpGeneration moves the fake's ruleset generation without changing
// the Table's table (another table comes and goes), so that a resync
// reads the table again.
func bumpGeneration(t *testing.T, ns *nftablesfake.Namespace) {
	t.Helper()
	require.NoError(t, ns.Admin().AddTable(2, "bump"))
	require.NoError(t, ns.Admin().DeleteTable(2, "bump"))
}
