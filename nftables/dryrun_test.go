//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// requestLog records the fake's write requests to one table, as "op
// name" (and a new rule's comment), leaving out the anonymous sets of
// rules.
type requestLog struct {
	mu    sync.Mutex
	table string
	reqs  []string
}

func (l *requestLog) hook(r nftablesfake.Request) syscall.Errno {
	l.add(r)
	return 0
}

func (l *requestLog) add(r nftablesfake.Request) {
	if r.Table != l.table || strings.HasPrefix(r.Set, "__set") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	name := r.Table
	switch {
	case r.Chain != "":
		name = r.Chain
	case r.Set != "":
		name = r.Set
	}
	if r.Op == "newrule" {
		name += " " + r.Comment
	}
	l.reqs = append(l.reqs, r.Op+" "+name)
}

func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	slices.Sort(out)
	return out
}

// planRequests returns the requests a plan's writes make, as requestLog
// records them.
func planRequests(p dataplane.Plan) []string {
	var out []string
	for _, w := range p.Writes {
		name, _, _ := strings.Cut(w.Object, " ")
		switch {
		case w.Kind == "table" && w.Op == dataplane.WriteDelete: // "ip np"
			out = append(out, "deltable "+w.Object[len(name)+1:])
		case w.Kind == "table":
			out = append(out, "newtable "+w.Object[len(name)+1:])
		case w.Kind == nftables.KindChain && w.Op == dataplane.WriteDelete:
			out = append(out, "delrule "+name, "delchain "+name) // flushed, then deleted
		case w.Kind == nftables.KindChain:
			out = append(out, "newchain "+name)
		case w.Kind == "rule" && w.Op == dataplane.WriteAdd:
			out = append(out, "newrule "+w.Object)
		case w.Kind == "rule":
			out = append(out, "delrule "+name)
		case w.Kind == nftables.KindSet && w.Op == dataplane.WriteAdd:
			out = append(out, "newset "+name)
		case w.Kind == nftables.KindSet:
			out = append(out, "delset "+name)
		case w.Kind == nftables.KindElement && w.Op == dataplane.WriteAdd:
			out = append(out, "newsetelem "+name)
		case w.Kind == nftables.KindElement:
			out = append(out, "delsetelem "+name)
		}
	}
	slices.Sort(out)
	return out
}

// planGen makes random declarations and drift for the plan property
// tests, in one family.
type planGen struct {
	rng *rand.Rand
	fam ipfamily.Family
}

func (g *planGen) addr(i int) netip.Addr {
	if g.fam == ipfamily.IPv6 {
		return netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(i)})
	}
	return netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
}

func (g *planGen) prefix(i int) netip.Prefix {
	if g.fam == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0xfd, 1: byte(i)}), 16)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 0}), 16)
}

func (g *planGen) chain() string { return fmt.Sprintf("np-c%d", g.rng.IntN(6)) }

// rules are a chain's rules: jumps and gotos (to undeclared chains and in
// loops too), matches of the set "addrs", dispatches through "vm".
func (g *planGen) rules(self string, sets bool) []netfilter.Rule {
	var out []netfilter.Rule
	for range g.rng.IntN(4) {
		switch g.rng.IntN(5) {
		case 0, 1:
			if n := g.chain(); n != self {
				out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(g.prefix(g.rng.IntN(4)))}, Action: netfilter.Jump(n)})
			}
		case 2:
			if sets {
				out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceIPSet("addrs")}, Action: netfilter.Drop()})
			}
		case 3:
			if sets {
				out = append(out, netfilter.Rule{Action: netfilter.VerdictMap("vm", netfilter.Dst)})
			}
		default:
			out = append(out, netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceNet(g.prefix(g.rng.IntN(4)))}, Action: netfilter.Accept()})
		}
	}
	return out
}

func (g *planGen) sets() []nftables.Set {
	addrs := nftables.Set{Name: "addrs", Key: []nftables.KeyType{nftables.TypeAddr}}
	for range g.rng.IntN(6) {
		addrs.Elements = append(addrs.Elements, nftables.Elem(nftables.Addr(g.addr(g.rng.IntN(12)))))
	}
	vm := nftables.Set{Name: "vm", Key: []nftables.KeyType{nftables.TypeAddr}, Verdict: true}
	for range g.rng.IntN(4) {
		v := netfilter.Action(netfilter.Accept())
		if g.rng.IntN(3) > 0 {
			v = netfilter.Goto(g.chain())
		}
		vm.Elements = append(vm.Elements, nftables.Element{Key: []nftables.Value{nftables.Addr(g.addr(100 + g.rng.IntN(6)))}, Verdict: v})
	}
	return []nftables.Set{addrs, vm}
}

var planHooks = []netfilter.Hook{netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput}

// declare makes one random change of the declarations (the sets are
// always declared, so that rules may use them).
func (g *planGen) declare(t *testing.T, tbl *nftables.Table) {
	t.Helper()
	switch g.rng.IntN(8) {
	case 0, 1, 2:
		n := g.chain()
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: n, Rules: g.rules(n, true), ForceProgramming: g.rng.IntN(6) == 0}))
	case 3:
		require.NoError(t, tbl.RemoveChains(g.chain()))
	case 4:
		h := planHooks[g.rng.IntN(len(planHooks))]
		if g.rng.IntN(2) == 0 {
			require.NoError(t, tbl.InsertRules("a", h, g.rules("", true)))
		} else {
			require.NoError(t, tbl.AppendRules("b", h, g.rules("", true)))
		}
	case 5:
		require.NoError(t, tbl.SetPolicy(planHooks[g.rng.IntN(len(planHooks))], nftables.Policy(g.rng.IntN(2))))
	case 6:
		require.NoError(t, tbl.SetSets(g.sets()...))
	default:
		e := nftables.Elem(nftables.Addr(g.addr(g.rng.IntN(12))))
		if g.rng.IntN(2) == 0 {
			require.NoError(t, tbl.AddElements("addrs", e))
		} else {
			require.NoError(t, tbl.DeleteElements("addrs", e))
		}
	}
}

// drift changes the table behind the Table's back, as another writer
// would (errors are ignored: the object may not be there).
func (g *planGen) drift(ns *nftablesfake.Namespace, fam uint8) {
	a := ns.Admin()
	chains := ns.Chains(fam, "np")
	switch g.rng.IntN(5) {
	case 0:
		if len(chains) > 0 {
			c := chains[g.rng.IntN(len(chains))]
			if len(c.Rules) > 0 {
				_ = a.DeleteRule(fam, "np", c.Name, g.rng.IntN(len(c.Rules)))
			}
		}
	case 1:
		if n := len(ns.Elements(fam, "np", "addrs")); n > 0 {
			_ = a.DeleteElement(fam, "np", "addrs", g.rng.IntN(n))
		}
	case 2:
		_ = a.AddChain(fam, "np", "np-stray")
	case 3:
		if len(chains) > 0 {
			_ = a.AddRule(fam, "np", chains[g.rng.IntN(len(chains))].Name, "np:AAAAAAAAAAAAAAAA")
		}
	default:
		if len(chains) > 0 {
			_ = a.DeleteChain(fam, "np", chains[g.rng.IntN(len(chains))].Name)
		}
	}
}

// checkPlan checks one round: Plan writes nothing, the Apply right after
// makes exactly the planned requests, and then the Plan is empty, an
// Apply writes nothing and the State is in sync but for the objects that
// cannot be written.
//
// The fake, as the kernel, refuses some writes the Table makes: the
// deletion of a chain that a verdict-map element the Table cannot write
// (it jumps to a chain no longer declared) still jumps to. An Apply that
// is refused something sends more than one transaction, so compared
// reports whether the round could compare the Apply's writes with the
// plan.
func checkPlan(t *testing.T, ctx context.Context, tbl *nftables.Table, ns *nftablesfake.Namespace, log *requestLog, round string) (compared bool) {
	t.Helper()
	var gen uint32
	if ns != nil {
		gen = ns.Generation()
	}
	plan, err := tbl.Plan(ctx)
	require.NoError(t, err, round)
	require.Empty(t, log.take(), "%s: Plan wrote", round)
	if ns != nil {
		require.Equal(t, gen, ns.Generation(), "%s: Plan changed the ruleset", round)
	}
	_, err = tbl.Apply(ctx)
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, round)
	}
	reqs := log.take()
	if compared = !errors.Is(err, nftables.ErrRefused); compared {
		require.Equal(t, planRequests(plan), reqs, "%s: the Apply did not make the planned writes\n%s", round, plan)
	}
	require.Equal(t, tbl.Stats().Failing, len(objectNames(err)), round)

	again, perr := tbl.Plan(ctx)
	require.NoError(t, perr, round)
	require.True(t, again.Empty(), "%s: Plan after Apply:\n%s", round, again)
	_, err2 := tbl.Apply(ctx)
	require.Equal(t, objectNames(err), objectNames(err2), round)
	require.Empty(t, log.take(), "%s: an Apply whose Plan is empty wrote", round)
	st, serr := tbl.State(ctx)
	require.NoError(t, serr, round)
	require.Len(t, st.Failing, len(objectNames(err)), round)
	if err == nil {
		require.True(t, st.InSync(), "%s: %s", round, st)
	}
	return compared
}

// TestPlanProperty declares random chains, rules, hook rules, policies,
// sets and verdict maps (with jumps to undeclared chains and loops, which
// cannot be written), changes the fake's table behind the Table's back,
// and checks every round with checkPlan, in both families.
func TestPlanProperty(t *testing.T) {
	ctx := context.Background()
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s/%d", fam, seed), func(t *testing.T) {
				g := &planGen{rng: rand.New(rand.NewPCG(seed, 21)), fam: fam}
				ns := nftablesfake.New()
				log := &requestLog{table: "np"}
				ns.Refuse(log.hook)
				opts := fakeOpts(ns)
				opts.Family = fam
				opts.ChainPrefix = "np-"
				if seed%2 == 1 {
					// Element additions past the first two go in further
					// transactions, which the plan lists too.
					opts.ElementsPerTransaction = 2
				}
				tbl := newTable(t, opts)
				nfam := nftablesfake.IPv4
				if fam == ipfamily.IPv6 {
					nfam = nftablesfake.IPv6
				}
				require.NoError(t, tbl.SetSets(g.sets()...))
				compared := 0
				for round := range 25 {
					for range 1 + g.rng.IntN(3) {
						g.declare(t, tbl)
					}
					if g.rng.IntN(3) == 0 {
						g.drift(ns, nfam)
						log.take()
						tbl.QueueResync()
					}
					if checkPlan(t, ctx, tbl, ns, log, fmt.Sprintf("round %d", round)) {
						compared++
					}
					if g.rng.IntN(8) == 0 {
						// A restarted Table plans from a read.
						tbl = newTable(t, opts)
						require.NoError(t, tbl.SetSets(g.sets()...))
					}
				}
				require.GreaterOrEqual(t, compared, 12, "rounds whose Apply was refused nothing")
			})
		}
	}
}

// TestPlanAfterRefusal checks that an object the kernel refused is not
// planned while it waits for its retry, and is when the retry is due.
func TestPlanAfterRefusal(t *testing.T) {
	ctx := context.Background()
	ns := nftablesfake.New()
	refuse := true
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if refuse && r.Op == "newrule" && r.Chain == "np-bad" {
			return syscall.EOPNOTSUPP
		}
		return 0
	})
	opts := fakeOpts(ns)
	clk := opts.Clock.(*clock.Fake)
	tbl := newTable(t, opts)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-bad", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("np-bad")}))
	_, err := tbl.Apply(ctx)
	require.True(t, errors.Is(err, nftables.ErrRefused), "%v", err)
	p, err := tbl.Plan(ctx)
	require.NoError(t, err)
	require.True(t, p.Empty(), "waiting for its retry:\n%s", p)
	st, err := tbl.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.Failing, 1)
	require.Equal(t, "chain np-bad: want np-bad, 1 rules, have np-bad, 0 rules", st.Drift[0].String())

	refuse = false
	clk.Advance(2 * time.Second)
	p, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, p.Writes, 1, "%s", p)
	require.Equal(t, dataplane.WriteAdd, p.Writes[0].Op)
	require.Equal(t, "rule", string(p.Writes[0].Kind))
	require.True(t, strings.HasPrefix(p.Writes[0].Object, "np-bad np:"), p.Writes[0].Object)
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	st, err = tbl.State(ctx)
	require.NoError(t, err)
	require.True(t, st.InSync(), "%s", st)
}

// TestIPSetsPlanAndState checks the set driver's Plan (always empty: the
// Table writes its sets, and its own Plan lists them) and State: its sets
// in sync after the Table's Apply, a member deleted behind its back as
// drift until the Table repairs it, and a set whose removal waits for the
// rules that use it as failing, then gone.
func TestIPSetsPlanAndState(t *testing.T) {
	ctx := context.Background()
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	sets := newIPSets(t, tbl, "np4-")
	require.NoError(t, sets.AddOrReplaceSet(netfilter.SetMetadata{Name: "ips", Type: netfilter.HashIP},
		[]netfilter.Member{netfilter.IPMember(addr("10.0.0.1")), netfilter.IPMember(addr("10.0.0.2"))}))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("np4-ips")}, Action: netfilter.Accept()}}}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))

	p, err := sets.Plan(ctx)
	require.NoError(t, err)
	require.True(t, p.Empty())
	tp, err := tbl.Plan(ctx)
	require.NoError(t, err)
	require.Contains(t, tp.String(), "+ set np4-ips (type addr)")
	require.Contains(t, tp.String(), "+ element np4-ips 10.0.0.2")
	st, err := sets.State(ctx)
	require.NoError(t, err)
	require.Equal(t, "nftables-ip-np-sets: 0 owned, 1 drifted, 0 failing\n  set np4-ips: missing (want type addr)", st.String())

	apply(t, tbl)
	st, err = sets.State(ctx)
	require.NoError(t, err)
	require.True(t, st.InSync(), "%s", st)
	require.Len(t, st.Owned, 3, "the set and its two elements")

	require.NoError(t, ns.Admin().DeleteElement(nftablesfake.IPv4, "np", "np4-ips", 0))
	tbl.QueueResync()
	st, err = sets.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.Drift, 1, "%s", st)
	require.Equal(t, dataplane.ObjectKind("element"), st.Drift[0].Kind)
	require.Empty(t, st.Drift[0].Have)
	tp, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, tp.Writes, 1, "%s", tp)
	require.Equal(t, "+ element "+st.Drift[0].Name, tp.Writes[0].String())
	apply(t, tbl)
	st, err = sets.State(ctx)
	require.NoError(t, err)
	require.True(t, st.InSync(), "%s", st)

	require.NoError(t, sets.RemoveSet("ips"))
	_, err = sets.ApplyDeletions(ctx)
	require.ErrorIs(t, err, nftables.ErrSetInUse)
	require.ErrorIs(t, err, netfilter.ErrSetInUse)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "nftables: set np4-ips: set still used by declared rules: its removal waits for the rules that use it", pe.Objects()[0].Error())
	st, err = sets.State(ctx)
	require.NoError(t, err)
	require.Len(t, st.Failing, 1)
	require.Len(t, st.Owned, 3, "the set stays, with its elements, while rules use it")

	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	_, err = sets.ApplyDeletions(ctx)
	require.NoError(t, err)
	tp, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.Contains(t, tp.String(), "- set np4-ips")
	apply(t, tbl)
	st, err = sets.State(ctx)
	require.NoError(t, err)
	require.Equal(t, "nftables-ip-np-sets: 0 owned, 0 drifted, 0 failing", st.String())
}

// TestPlanRebuild checks that after RebuildAfter failures in a row the
// Plan is the rebuild the next Apply makes: the table deleted and written
// whole, stray chain gone.
func TestPlanRebuild(t *testing.T) {
	ctx := context.Background()
	ns := nftablesfake.New()
	log := &requestLog{table: "np"}
	ns.Refuse(log.hook)
	opts := fakeOpts(ns)
	opts.RebuildAfter = 2
	tbl := newTable(t, opts)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))
	apply(t, tbl)
	require.NoError(t, ns.Admin().AddChain(nftablesfake.IPv4, "np", "stray"))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
	ns.FailTransactions(2, syscall.EIO)
	for range 2 {
		_, err := tbl.Apply(ctx)
		require.ErrorIs(t, err, nftables.ErrWrite)
	}
	log.take()

	p, err := tbl.Plan(ctx)
	require.NoError(t, err)
	require.Empty(t, log.take())
	require.Equal(t, "- table ip np (to rebuild it whole)", p.Writes[0].String())
	require.Equal(t, "+ table ip np", p.Writes[1].String())
	require.Contains(t, p.String(), "+ chain fw\n")
	require.NotContains(t, p.String(), "stray", "the table is deleted whole, its stray chain with it")
	apply(t, tbl)
	require.Equal(t, planRequests(p), log.take())
	require.Equal(t, 1, tbl.WorkStats().Rebuilds)
	p, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.True(t, p.Empty(), "%s", p)
}
