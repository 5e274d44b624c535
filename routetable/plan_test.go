package routetable_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// scribble changes the env's table as others would: it adds about n
// routes (foreign ones, with another protocol, and ours, with the Table's:
// leftovers and drifted copies), many at the keys of decls, and deletes
// some of the routes and static neighbour entries there are. The kernel
// may refuse some of the writes; that is part of the draw.
func scribble(t *testing.T, e *env, r *rand.Rand, decls []decl, n int) {
	t.Helper()
	ctx := context.Background()
	var dels []kernel.RouteOp
	require.NoError(t, e.k.DumpRoutes(ctx, e.fam, e.table, func(kr *kernel.Route) error {
		if r.IntN(4) == 0 {
			dels = append(dels, kernel.RouteOp{Kind: kernel.OpDelete, Route: *kr})
		}
		return nil
	}, func() { dels = nil }))
	_ = e.k.ApplyRoutes(ctx, dels)
	var nbrDels []kernel.NeighborOp
	for _, nb := range e.neighbors(t) {
		if nb.Protocol == rt.DefaultProtocol && r.IntN(3) == 0 {
			nbrDels = append(nbrDels, kernel.NeighborOp{Kind: kernel.OpDelete, Neighbor: nb})
		}
	}
	_ = e.k.ApplyNeighbors(ctx, nbrDels)
	for range n {
		dst := e.pfx(fmt.Sprintf("10.%d.%d.0/%d", r.IntN(99), r.IntN(256), pick(r, 16, 24, 32)))
		if len(decls) > 0 && r.IntN(2) == 0 {
			dst = decls[r.IntN(len(decls))].target.CIDR
		}
		kr := kernel.Route{Family: e.fam, Table: e.table, Dst: dst.Masked(), Type: kernel.RTNUnicast, Scope: kernel.ScopeLink,
			Protocol: pick(r, kernel.ProtoBoot, rt.DefaultProtocol), Priority: pick[uint32](r, 0, 0, 100),
			OIF: e.index(t, pick(r, "np-a", "np-b"))}
		if r.IntN(4) == 0 {
			kr.Type, kr.Scope, kr.OIF = kernel.RTNBlackhole, kernel.ScopeUniverse, 0
		}
		_ = e.k.ApplyRoutes(ctx, []kernel.RouteOp{{Kind: pick(r, kernel.OpAdd, kernel.OpReplace), Route: kr}})
	}
}

// planEvents is what the recorder logs of the writes of p: each route
// operation ("replace <dst>", "delete <dst>") and each address of a
// conntrack deletion ("conntrack <addr>"), in order.
func planEvents(t *testing.T, p dataplane.Plan) []string {
	t.Helper()
	var out []string
	for _, w := range p.Writes {
		switch w.Kind {
		case "route":
			f := strings.Fields(w.Object)
			dst, err := netip.ParsePrefix(f[0])
			if err != nil {
				dst, err = netip.ParsePrefix(f[1]) // after the type
			}
			require.NoError(t, err, w.Object)
			op := "replace"
			if w.Op == dataplane.WriteDelete {
				op = "delete"
			}
			out = append(out, op+" "+dst.String())
		case "conntrack":
			for _, a := range strings.Fields(strings.TrimPrefix(w.Object, "entries of ")) {
				out = append(out, "conntrack "+a)
			}
		}
	}
	return out
}

// checkPlan checks the Plan properties on tbl as it stands: Plan writes
// nothing; the Apply after it makes exactly the writes it lists, in its
// order; after that Apply, Plan is empty and an Apply writes nothing. It
// returns how many writes the Plan listed.
func checkPlan(t *testing.T, e *env, tbl *rt.Table, what string) int {
	t.Helper()
	ctx := context.Background()
	e.kernel.resetCounts()
	nsBefore := e.nsWrites()
	plan, err := tbl.Plan(ctx)
	require.NoError(t, err, what)
	require.Zero(t, e.kernel.allWrites(), "%s: Plan wrote: %v", what, e.kernel.events())
	require.Equal(t, nsBefore, e.nsWrites(), "%s: Plan wrote (the namespace's count)", what)
	for _, w := range plan.Writes {
		require.True(t, w.Op == dataplane.WriteAdd || w.Op == dataplane.WriteReplace || w.Op == dataplane.WriteDelete, "%s: %v", what, w)
	}

	_, err = tbl.Apply(ctx)
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, what)
	}
	require.Equal(t, planEvents(t, plan), e.kernel.events(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
	require.Equal(t, len(plan.Writes), e.kernel.allWrites(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
	if e.fake {
		require.Equal(t, nsBefore+len(plan.Writes), e.nsWrites(), "%s: the namespace's count of writes", what)
	}

	e.kernel.resetCounts()
	nsBefore = e.nsWrites()
	after, err := tbl.Plan(ctx)
	require.NoError(t, err, what)
	require.True(t, after.Empty(), "%s: Plan after Apply:\n%v", what, after)
	_, err = tbl.Apply(ctx)
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, what)
	}
	require.Zero(t, e.kernel.allWrites(), "%s: an Apply whose Plan is empty wrote: %v", what, e.kernel.events())
	require.Equal(t, nsBefore, e.nsWrites(), "%s: an Apply whose Plan is empty wrote (the namespace's count)", what)
	return len(plan.Writes)
}

// planProperty draws desired routes and a kernel with foreign, leftover
// and drifted routes, and checks the Plan properties over rounds in which
// the declarations change, the kernel drifts (then a resync), retries and
// grace periods come due. It returns how many writes the Plans listed.
func planProperty(t *testing.T, e *env, seed uint64, n int) int {
	t.Helper()
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	r := rand.New(rand.NewPCG(seed, 21))
	decls := genTargets(e, r, n)
	tbl := e.newTable(t, rt.Options{GracePeriod: pick(r, -time.Second, time.Minute)})
	scribble(t, e, r, decls, n/3)
	declared := map[int]bool{}
	declare := func() {
		for i, d := range decls {
			switch {
			case r.IntN(3) == 0 && declared[i]:
				require.NoError(t, tbl.RouteRemove(d.class, d.iface, d.target.Key()))
				delete(declared, i)
			case r.IntN(2) == 0:
				if tbl.RouteUpdate(d.class, d.iface, d.target) == nil {
					declared[i] = true
				}
			}
		}
	}
	declare()
	total := checkPlan(t, e, tbl, fmt.Sprintf("seed %d, first apply", seed))
	for round := 1; round <= 4; round++ {
		what := fmt.Sprintf("seed %d, round %d", seed, round)
		switch r.IntN(3) {
		case 0:
			declare()
		case 1:
			scribble(t, e, r, decls, n/5)
			tbl.QueueResync()
		default:
			declare()
			scribble(t, e, r, decls, n/5)
			tbl.QueueResync()
		}
		if r.IntN(2) == 0 {
			e.clock.Advance(2 * time.Minute) // retries and grace periods are due
		}
		total += checkPlan(t, e, tbl, what)
	}
	return total
}

// TestPlanProperties checks on a fake namespace, for both families and
// many seeds, that Plan writes nothing, that Apply makes exactly the
// writes Plan listed, and that after it Plan is empty and Apply writes
// nothing, counted by the recorder and by the fake namespace
// (kernelfake.Namespace.Writes) alike.
func TestPlanProperties(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for seed := range uint64(25) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				planned := planProperty(t, fakeEnv(t, fam, 1000), seed, 120)
				assert.Greater(t, planned, 40, "the draw makes writes to plan")
			})
		}
	}
}

// stateReportsDrift programs two routes and a neighbour entry, then,
// behind the Table's back, deletes one route, changes the MTU of the
// other, adds a leftover of ours and a foreign route, and checks what
// State and Plan say after a resync, and that neither writes.
func stateReportsDrift(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{GracePeriod: -1})
	mac := []byte{2, 0, 0, 0, 0, 7}
	require.NoError(t, tbl.SetRoutes(10, "np-a", []rt.Target{
		{CIDR: e.pfx("10.0.1.0/24"), Gateway: e.gw(1)},
		{CIDR: e.pfx("10.0.2.7/32"), DestMAC: mac},
	}))
	require.NoError(t, tbl.SetRoutes(10, rt.InterfaceNone, []rt.Target{{CIDR: e.pfx("10.0.9.0/24"), Type: rt.TargetBlackhole, MTU: 1400}}))
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)
	st, err := tbl.State(ctx)
	require.NoError(t, err)
	require.True(t, st.InSync(), "%v", st)
	require.Len(t, st.Owned, 4, "three routes and a neighbour entry: %v", st.Owned)

	a := e.index(t, "np-a")
	p := func(s string) string { return e.pfx(s).String() }
	m := "" // IPv6 routes have a metric: 1024 when none is given
	if e.fam == rt.IPv6 {
		m = " metric 1024"
	}
	e.deleteRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.1.0/24"), Protocol: rt.DefaultProtocol})
	e.writeRoute(t, kernel.OpReplace, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.9.0/24"),
		Type: kernel.RTNBlackhole, Protocol: rt.DefaultProtocol, MTU: 1300})
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.3.0/24"), OIF: a, Scope: kernel.ScopeLink,
		Type: kernel.RTNUnicast, Protocol: rt.DefaultProtocol})
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.4.0/24"), Type: kernel.RTNBlackhole,
		Protocol: kernel.ProtoBoot}) // on no interface of ours: foreign
	tbl.QueueResync()
	e.kernel.resetCounts()
	st, err = tbl.State(ctx)
	require.NoError(t, err)
	assert.Zero(t, e.kernel.allWrites(), "State writes nothing")
	assert.Equal(t, "routetable-"+strings.ToLower(e.fam.String())+"-1000", st.Driver)
	assert.Equal(t, []dataplane.Drift{
		{Kind: "route", Name: p("10.0.1.0/24") + m, Want: p("10.0.1.0/24") + " via " + e.gw(1).String() + " dev np-a proto 78" + m},
		{Kind: "route", Name: p("10.0.3.0/24") + m, Have: p("10.0.3.0/24") + " dev np-a proto 78" + m},
		{Kind: "route", Name: p("10.0.9.0/24") + m, Want: "blackhole " + p("10.0.9.0/24") + " mtu 1400 proto 78" + m,
			Have: "blackhole " + p("10.0.9.0/24") + " mtu 1300 proto 78" + m},
	}, st.Drift)
	assert.True(t, slices.IsSortedFunc(st.Owned, func(a, b dataplane.Object) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Text, b.Text))
	}), "sorted: %v", st.Owned)
	assert.ElementsMatch(t, []dataplane.Object{
		{Kind: "neighbour", Text: e.ip("10.0.2.7").String() + " dev np-a lladdr 02:00:00:00:00:07 PERMANENT proto 78"},
		{Kind: "route", Text: p("10.0.2.7/32") + " dev np-a proto 78" + m},
		{Kind: "route", Text: p("10.0.3.0/24") + " dev np-a proto 78" + m},
		{Kind: "route", Text: "blackhole " + p("10.0.9.0/24") + " mtu 1300 proto 78" + m},
	}, st.Owned, "the foreign route is not ours")
	assert.Empty(t, st.Failing)

	plan, err := tbl.Plan(ctx)
	require.NoError(t, err)
	assert.Zero(t, e.kernel.allWrites(), "Plan writes nothing")
	assert.Equal(t, []dataplane.Write{
		{Op: dataplane.WriteDelete, Kind: "route", Object: p("10.0.3.0/24") + " dev np-a proto 78" + m},
		{Op: dataplane.WriteAdd, Kind: "route", Object: p("10.0.1.0/24") + " via " + e.gw(1).String() + " dev np-a proto 78" + m},
		{Op: dataplane.WriteReplace, Kind: "route", Object: "blackhole " + p("10.0.9.0/24") + " mtu 1400 proto 78" + m,
			Detail: "was blackhole " + p("10.0.9.0/24") + " mtu 1300 proto 78" + m},
	}, plan.Writes)
}

// TestState checks State's account of a drifted table on a fake
// namespace, for both families.
func TestState(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) { stateReportsDrift(t, fakeEnv(t, fam, 1000)) })
	}
}
