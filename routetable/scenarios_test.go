package routetable_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

const (
	classLocal  rt.RouteClass = 10
	classTunnel rt.RouteClass = 20
	classOther  rt.RouteClass = 30
)

// line renders an expected route like formatRoute (without "proto 78"),
// mapping the plan's IPv4 prefix to the env's family.
func (e *env) line(cidr, rest string) string {
	if rest == "" {
		return e.pfx(cidr).String()
	}
	return e.pfx(cidr).String() + " " + rest
}

var scenarios = []scenario{
	{"AllTargetTypes", scenarioAllTypes},
	{"ForeignRoutesSurvive", scenarioForeign},
	{"ForeignKeyNotOverwritten", scenarioForeignConflict},
	{"OtherTableUntouched", scenarioOtherTable},
	{"ExternalChangesRepaired", scenarioRepair},
	{"ClassPriorityAndFallback", scenarioClasses},
	{"IfaceDownUp", scenarioDownUp},
	{"IfaceCarrierLostAndBack", scenarioCarrier},
	{"IfaceUnknownHeld", scenarioHeld},
	{"IfaceRecreated", scenarioRecreate},
	{"IfaceRecreatedForeignRouteGone", scenarioRecreateForeign},
	{"IfaceRenamed", scenarioRename},
	{"GracePeriod", scenarioGrace},
	{"ConntrackOnMove", scenarioConntrack},
	{"Multipath", scenarioMultipath},
	{"StaticNeighbors", scenarioNeighbors},
	{"StaticNeighborsAfterRestart", scenarioNeighborsRestart},
	{"RestartAdoption", scenarioAdoption},
	{"TwoTablesOneFamily", scenarioTwoTables},
	{"DeltasAndMetrics", scenarioDeltas},
	{"BadInputChangesNothing", scenarioBadInput},
}

func scenarioAllTypes(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	onlinkGW := e.ip("10.200.0.1")
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{
		{CIDR: e.pfx("10.0.1.0/24")},
		{CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1)},
		{CIDR: e.pfx("10.0.3.0/24"), Type: rt.TargetOnlink, Gateway: onlinkGW},
		{CIDR: e.pfx("10.0.4.1/32"), Type: rt.TargetLocal},
		{CIDR: e.pfx("10.0.5.0/24"), Src: e.src(1), MTU: 1400, Metric: 7},
	}))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, []rt.Target{
		{CIDR: e.pfx("10.0.6.0/24"), Type: rt.TargetBlackhole},
		{CIDR: e.pfx("10.0.7.0/24"), Type: rt.TargetUnreachable},
		{CIDR: e.pfx("10.0.8.0/24"), Type: rt.TargetProhibit},
		{CIDR: e.pfx("10.0.9.0/24"), Type: rt.TargetThrow, Metric: 5},
	}))
	e.converge(t, tbl, f)
	want := []string{
		e.line("10.0.1.0/24", "unicast dev np-a"),
		e.line("10.0.2.0/24", "unicast via "+e.gw(1).String()+" dev np-a"),
		e.line("10.0.3.0/24", "unicast via "+onlinkGW.String()+" dev np-a onlink"),
		e.line("10.0.4.1/32", "local dev np-a"),
		e.line("10.0.5.0/24", "metric 7 unicast dev np-a src "+e.src(1).String()+" mtu 1400"),
		e.line("10.0.6.0/24", "blackhole"),
		e.line("10.0.7.0/24", "unreachable"),
		e.line("10.0.8.0/24", "prohibit"),
		e.line("10.0.9.0/24", "metric 5 throw"),
	}
	slices.Sort(want)
	assert.Equal(t, want, e.ours(t))

	// Withdraw some: exactly those are deleted.
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}}))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, []rt.Target{{CIDR: e.pfx("10.0.6.0/24"), Type: rt.TargetBlackhole}}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-a"), e.line("10.0.6.0/24", "blackhole")}, e.ours(t))

	// A target that changes type in place.
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, []rt.Target{{CIDR: e.pfx("10.0.6.0/24"), Type: rt.TargetUnreachable}}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-a"), e.line("10.0.6.0/24", "unreachable")}, e.ours(t))

	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", nil))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, nil))
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t))
	assert.Zero(t, tbl.Counters().InKernel)
}

func scenarioForeign(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	fx := e.addLink(t, "fx0") // not ours: outside the pattern
	before := e.routes(t)     // what the kernel put there (address routes)
	foreign := []kernel.Route{
		{Family: e.fam, Table: e.table, Dst: e.pfx("10.1.1.0/24"), Type: kernel.RTNUnicast, Protocol: 4, Scope: kernel.ScopeLink, OIF: fx},
		{Family: e.fam, Table: e.table, Dst: e.pfx("10.1.2.0/24"), Type: kernel.RTNBlackhole, Protocol: 3},
	}
	for _, r := range foreign {
		e.addRoute(t, r)
	}
	withForeign := e.routes(t)
	// Both foreign routes are in, beside what the kernel had put there.
	// (Not a count: the kernel may add a veth peer's link-local route late.)
	require.Subset(t, withForeign, before)
	for _, r := range foreign {
		require.True(t, slices.ContainsFunc(withForeign, func(l string) bool { return strings.HasPrefix(l, r.Dst.String()+" ") }),
			"foreign route %s programmed", r.Dst)
	}

	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}}))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, []rt.Target{{CIDR: e.pfx("10.0.2.0/24"), Type: rt.TargetBlackhole}}))
	e.converge(t, tbl, f)
	assert.Subset(t, e.routes(t), withForeign)
	assert.Len(t, e.ours(t), 2)

	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", nil))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, nil))
	e.converge(t, tbl, f)
	// Only our routes went. (Subset, not equality: the kernel may add a
	// link-local route for a veth peer that gets carrier late.)
	assert.Subset(t, e.routes(t), withForeign, "every foreign route survived")
	assert.Empty(t, e.ours(t))
}

func scenarioForeignConflict(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	foreign := kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.1.2.0/24"), Type: kernel.RTNBlackhole, Protocol: 4}
	e.addRoute(t, foreign)
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.1.2.0/24")}, {CIDR: e.pfx("10.0.1.0/24")}}))
	err := applyOnce(t, tbl)
	require.ErrorIs(t, err, rt.ErrForeignRoute)
	assert.Contains(t, e.routes(t), e.line("10.1.2.0/24", "blackhole proto 4"), "the foreign route is not overwritten")
	assert.Contains(t, e.ours(t), e.line("10.0.1.0/24", "unicast dev np-a"), "the other routes are written")

	// Once the foreign route is gone, ours takes its place.
	e.deleteRoute(t, foreign)
	tbl.QueueResync()
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-a"), e.line("10.1.2.0/24", "unicast dev np-a")}, e.ours(t))
}

func scenarioOtherTable(t *testing.T, e *env, f failure) {
	idx := e.addLink(t, "np-a")
	other := kernel.Route{Family: e.fam, Table: e.table + 1, Dst: e.pfx("10.0.1.0/24"), Type: kernel.RTNUnicast,
		Protocol: rt.DefaultProtocol, Scope: kernel.ScopeLink, OIF: idx}
	e.addRoute(t, other)
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.2.0/24")}}))
	e.converge(t, tbl, f)
	var n int
	require.NoError(t, e.k.DumpRoutes(context.Background(), e.fam, e.table+1, func(r *kernel.Route) error {
		if r.Dst == other.Dst {
			n++
		}
		return nil
	}, nil))
	assert.Equal(t, 1, n, "a route with our protocol in another table is not ours")
	assert.Equal(t, []string{e.line("10.0.2.0/24", "unicast dev np-a")}, e.ours(t))
}

func scenarioRepair(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{
		{CIDR: e.pfx("10.0.1.0/24")}, {CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1)},
	}))
	e.converge(t, tbl, f)
	want := e.ours(t)
	require.Len(t, want, 2)

	// Deleted behind our back, another changed, one of ours added.
	e.deleteRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.1.0/24")})
	e.deleteRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.2.0/24")})
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.2.0/24"), Type: kernel.RTNUnicast,
		Protocol: rt.DefaultProtocol, Scope: kernel.ScopeLink, OIF: a, MTU: 1300})
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.3.0/24"), Type: kernel.RTNBlackhole,
		Protocol: rt.DefaultProtocol})
	require.NotEqual(t, want, e.ours(t))

	// Without a resync the Table trusts its cache.
	require.NoError(t, applyOnce(t, tbl))
	assert.NotEqual(t, want, e.ours(t))

	tbl.QueueResync()
	e.converge(t, tbl, f)
	assert.Equal(t, want, e.ours(t))
}

func scenarioClasses(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	e.addLink(t, "np-c") // created last: highest index
	tbl := e.newTable(t, rt.Options{})
	x := rt.Target{CIDR: e.pfx("10.0.7.0/24")}
	require.NoError(t, tbl.RouteUpdate(classTunnel, "np-b", x))
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-a", x))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.7.0/24", "unicast dev np-a")}, e.ours(t), "the lowest class wins")

	// The winner goes: the next one takes over with one replace, no
	// delete, in the same Apply.
	require.NoError(t, tbl.RouteRemove(classLocal, "np-a", x.Key()))
	e.kernel.resetCounts()
	require.NoError(t, applyOnce(t, tbl))
	assert.Equal(t, []string{"replace " + x.CIDR.String()}, e.kernel.events(), "no window without a route")
	assert.Equal(t, []string{e.line("10.0.7.0/24", "unicast dev np-b")}, e.ours(t))

	// Within a class the higher interface index wins, whatever the order.
	require.NoError(t, tbl.RouteUpdate(classOther, "np-c", rt.Target{CIDR: e.pfx("10.0.8.0/24")}))
	require.NoError(t, tbl.RouteUpdate(classOther, "np-a", rt.Target{CIDR: e.pfx("10.0.8.0/24")}))
	e.converge(t, tbl, f)
	assert.Contains(t, e.ours(t), e.line("10.0.8.0/24", "unicast dev np-c"))

	// Down takes a candidate out: the next one takes over.
	e.setUp(t, "np-c", false)
	e.tell(t, tbl, "np-c", kernel.LinkDown)
	e.converge(t, tbl, f)
	assert.Contains(t, e.ours(t), e.line("10.0.8.0/24", "unicast dev np-a"))
	e.setUp(t, "np-c", true)
	e.tell(t, tbl, "np-c", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Contains(t, e.ours(t), e.line("10.0.8.0/24", "unicast dev np-c"))

	require.NoError(t, tbl.SetRoutes(classTunnel, "np-b", nil))
	require.NoError(t, tbl.SetRoutes(classOther, "np-c", nil))
	require.NoError(t, tbl.SetRoutes(classOther, "np-a", nil))
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t))
}

func scenarioDownUp(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{
		{CIDR: e.pfx("10.0.1.0/24")}, {CIDR: e.pfx("10.0.1.5/32")}, {CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1)},
	}))
	require.NoError(t, tbl.SetRoutes(classTunnel, "np-b", []rt.Target{{CIDR: e.pfx("10.0.1.0/24"), Gateway: e.gw(2)}}))
	e.converge(t, tbl, f)
	up := []string{
		e.line("10.0.1.0/24", "unicast dev np-a"),
		e.line("10.0.1.5/32", "unicast dev np-a"),
		e.line("10.0.2.0/24", "unicast via "+e.gw(1).String()+" dev np-a"),
	}
	assert.Equal(t, up, e.ours(t))

	e.setUp(t, "np-a", false) // the kernel drops the routes through it
	e.tell(t, tbl, "np-a", kernel.LinkDown)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast via "+e.gw(2).String()+" dev np-b")}, e.ours(t),
		"held routes are not written; the fallback takes over")

	e.setUp(t, "np-a", true)
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	if f == failNone {
		e.kernel.resetCounts()
		require.NoError(t, applyOnce(t, tbl))
		writes, dumps, rescans := e.kernel.counts3()
		assert.Equal(t, []int{3, 0, 1}, []int{writes, dumps, rescans},
			"the interface's routes re-read (the kernel removed them), then all three written: %v", e.kernel.events())
	}
	e.converge(t, tbl, f)
	assert.Equal(t, up, e.ours(t), "routes come back on up")
}

// An interface that loses only its carrier keeps its routes in the
// kernel. The Table leaves them there while the interface is down, and
// when it comes back re-reads them and writes only what changed meanwhile;
// a route another agent added to the interface while it was down is found
// then, not at the next refresh.
func scenarioCarrier(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{GracePeriod: -1})
	targets := []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}, {CIDR: e.pfx("10.0.1.5/32")}, {CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1)}}
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", targets))
	e.converge(t, tbl, f)
	all := []string{
		e.line("10.0.1.0/24", "unicast dev np-a"),
		e.line("10.0.1.5/32", "unicast dev np-a"),
		e.line("10.0.2.0/24", "unicast via "+e.gw(1).String()+" dev np-a"),
	}
	require.Equal(t, all, e.ours(t))

	e.setCarrier(t, "np-a", false)
	e.tell(t, tbl, "np-a", kernel.LinkDown)
	e.converge(t, tbl, f)
	assert.Equal(t, all, e.ours(t), "the kernel keeps them, and so does the Table")
	assert.Equal(t, 3, tbl.Counters().InKernel)

	// While it is down, a route is no longer wanted: it goes at once.
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", targets[:2]))
	e.converge(t, tbl, f)
	assert.Equal(t, all[:2], e.ours(t))

	// A route changes, and another agent adds one to the interface.
	changed := slices.Clone(targets[:2])
	changed[1].MTU = 1400
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", changed))
	e.converge(t, tbl, f)
	assert.Equal(t, all[:2], e.ours(t), "held while the interface is down")
	other := e.line("10.0.3.0/24", "unicast dev np-a proto 3")
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.0.3.0/24"), Type: kernel.RTNUnicast, Protocol: 3,
		Scope: kernel.ScopeLink, OIF: a})
	require.Contains(t, e.routes(t), other)

	e.setCarrier(t, "np-a", true)
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	if f == failNone {
		e.kernel.resetCounts()
		require.NoError(t, applyOnce(t, tbl))
		writes, dumps, rescans := e.kernel.counts3()
		assert.Equal(t, []int{2, 0, 1}, []int{writes, dumps, rescans},
			"one read of the interface's routes, then one delete and one replace: %v", e.kernel.events())
		assert.NotContains(t, e.routes(t), other, "found by the re-read, not at the next refresh")
	}
	e.converge(t, tbl, f)
	assert.Equal(t, []string{all[0], e.line("10.0.1.5/32", "unicast dev np-a mtu 1400")}, e.ours(t))
	assert.NotContains(t, e.routes(t), other)
}

func scenarioHeld(t *testing.T, e *env, f failure) {
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-c", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}}))
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t), "no interface yet")
	assert.Equal(t, 1, tbl.Counters().Declared)
	assert.Zero(t, tbl.Counters().Desired)

	e.addLink(t, "np-c")
	e.tell(t, tbl, "np-c", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-c")}, e.ours(t))
}

func scenarioRecreate(t *testing.T, e *env, f failure) {
	old := e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}, {CIDR: e.pfx("10.0.1.9/32")}}))
	e.converge(t, tbl, f)
	require.Len(t, e.ours(t), 2)

	e.deleteLink(t, "np-a")
	e.tell(t, tbl, "np-a", kernel.LinkGone)
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t))

	idx := e.addLink(t, "np-a")
	require.NotEqual(t, old, idx)
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-a"), e.line("10.0.1.9/32", "unicast dev np-a")}, e.ours(t))
	require.NoError(t, e.k.DumpRoutes(context.Background(), e.fam, e.table, func(r *kernel.Route) error {
		if r.Protocol == rt.DefaultProtocol {
			assert.Equal(t, idx, r.OIF, "on the new index")
		}
		return nil
	}, nil))
}

// scenarioRecreateForeign: a foreign route holds the key the Table wants
// through an interface outside its patterns (a flannel.1 the agent takes
// over); the interface is deleted, which takes the foreign route with it,
// and created again as ours. The Table's route through the new interface
// is written by the next Apply, without a resync: nothing cached of the
// old interface holds it back.
func scenarioRecreateForeign(t *testing.T, e *env, f failure) {
	fx := e.addLink(t, "fx0")
	foreign := kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.5.0.0/24"), Type: kernel.RTNUnicast,
		Protocol: 4, Scope: kernel.ScopeLink, OIF: fx}
	e.addRoute(t, foreign)
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classTunnel, "fx0", []rt.Target{{CIDR: e.pfx("10.5.0.0/24")}}))
	require.ErrorIs(t, applyOnce(t, tbl), rt.ErrForeignRoute)
	assert.Contains(t, e.routes(t), e.line("10.5.0.0/24", "unicast dev fx0 proto 4"))

	e.deleteLink(t, "fx0")
	e.tell(t, tbl, "fx0", kernel.LinkGone)
	require.NoError(t, applyOnce(t, tbl))
	e.addLink(t, "fx0")
	e.tell(t, tbl, "fx0", kernel.LinkUp)
	want := []string{e.line("10.5.0.0/24", "unicast dev fx0")}
	if f == failNone {
		resyncs := tbl.Counters().Resyncs
		require.NoError(t, applyOnce(t, tbl), "written by the next Apply")
		assert.Equal(t, resyncs, tbl.Counters().Resyncs, "without a re-read of the table")
		assert.Equal(t, want, e.ours(t))
	}
	e.converge(t, tbl, f)
	assert.Equal(t, want, e.ours(t))
}

func scenarioRename(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}}))
	e.converge(t, tbl, f)

	// The kernel renames only a link that is down, so its routes go.
	e.renameLink(t, "np-a", "np-r")
	e.tell(t, tbl, "np-a", kernel.LinkGone)
	e.tell(t, tbl, "np-r", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t), "the old name's routes are held, not written on the renamed link")

	require.NoError(t, tbl.SetRoutes(classLocal, "np-r", []rt.Target{{CIDR: e.pfx("10.0.2.0/24")}}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.2.0/24", "unicast dev np-r")}, e.ours(t))

	// A new link takes the old name: its routes come back.
	e.addLink(t, "np-a")
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "unicast dev np-a"), e.line("10.0.2.0/24", "unicast dev np-r")}, e.ours(t))
}

func scenarioGrace(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	b := e.addLink(t, "np-b")
	tbl := e.newTable(t, rt.Options{})
	cni := func(dst string, oif int) kernel.Route {
		return kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx(dst), Type: kernel.RTNUnicast, Protocol: 3,
			Scope: kernel.ScopeLink, OIF: oif}
	}
	e.addRoute(t, cni("10.0.1.7/32", a)) // a CNI plugin's route, before we know the pod
	e.converge(t, tbl, f)
	res, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.LessOrEqual(t, res.RetryAfter, rt.DefaultGracePeriod, "asks to be called when the grace period ends")
	assert.Positive(t, res.RetryAfter)
	assert.Contains(t, e.routes(t), e.line("10.0.1.7/32", "unicast dev np-a proto 3"))

	e.clock.Advance(rt.DefaultGracePeriod - time.Second)
	e.converge(t, tbl, f)
	assert.Contains(t, e.routes(t), e.line("10.0.1.7/32", "unicast dev np-a proto 3"), "still in its grace period")

	e.clock.Advance(2 * time.Second)
	e.converge(t, tbl, f)
	assert.NotContains(t, e.routes(t), e.line("10.0.1.7/32", "unicast dev np-a proto 3"), "deleted after it")

	// The grace period ends early once the interface's routes are known.
	e.addRoute(t, cni("10.0.2.7/32", b))
	tbl.QueueResync()
	e.converge(t, tbl, f)
	assert.Contains(t, e.routes(t), e.line("10.0.2.7/32", "unicast dev np-b proto 3"))
	require.NoError(t, tbl.SetRoutes(classLocal, "np-b", []rt.Target{{CIDR: e.pfx("10.0.2.8/32")}}))
	e.converge(t, tbl, f)
	assert.NotContains(t, e.routes(t), e.line("10.0.2.7/32", "unicast dev np-b proto 3"))
	assert.Equal(t, []string{e.line("10.0.2.8/32", "unicast dev np-b")}, e.ours(t))

	// The CNI route for the key we want is taken over (rewritten with our
	// protocol), not deleted.
	e.addRoute(t, cni("10.0.2.9/32", b))
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-b", rt.Target{CIDR: e.pfx("10.0.2.9/32")}))
	tbl.QueueResync()
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.2.8/32", "unicast dev np-b"), e.line("10.0.2.9/32", "unicast dev np-b")}, e.ours(t))
}

func scenarioConntrack(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	pod, other := e.ip("10.0.5.7"), e.ip("10.0.5.8")
	peer := e.ip("10.50.0.1")
	tbl := e.newTable(t, rt.Options{})
	host := func(a string) rt.Target { return rt.Target{CIDR: e.pfx(a + "/32")} }
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{host("10.0.5.7"), host("10.0.5.8")}))
	require.NoError(t, tbl.SetRoutes(classTunnel, "np-b", []rt.Target{host("10.0.5.7")}))
	e.converge(t, tbl, f)
	e.addFlow(t, peer, pod)
	e.addFlow(t, pod, peer)
	e.addFlow(t, peer, other)
	require.Len(t, e.flows(t), 3)

	// 10.0.5.7 moves from np-a to np-b: its flows go first, then the
	// route is replaced.
	require.NoError(t, tbl.RouteRemove(classLocal, "np-a", host("10.0.5.7").Key()))
	e.kernel.resetCounts()
	e.converge(t, tbl, f)
	assert.Equal(t, []string{fmt.Sprintf("%v %v", peer, other)}, e.flows(t))
	assert.Contains(t, e.ours(t), e.line("10.0.5.7/32", "unicast dev np-b"))

	// Order: the conntrack deletion precedes the replace.
	e.addFlow(t, peer, pod)
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-a", host("10.0.5.7")))
	e.kernel.resetCounts()
	require.NoError(t, applyOnce(t, tbl))
	assert.Equal(t, []string{"conntrack " + pod.String(), "replace " + e.pfx("10.0.5.7/32").String()}, e.kernel.events())
	assert.Equal(t, []string{fmt.Sprintf("%v %v", peer, other)}, e.flows(t))

	// A route that disappears takes its flows with it.
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{host("10.0.5.7")}))
	e.converge(t, tbl, f)
	assert.Empty(t, e.flows(t))
	assert.NotContains(t, e.ours(t), e.line("10.0.5.8/32", "unicast dev np-a"))
}

func scenarioMultipath(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classTunnel, rt.InterfaceNone, []rt.Target{{
		CIDR: e.pfx("10.0.3.0/24"),
		NextHops: []rt.NextHop{
			{Iface: "np-a", Gateway: e.gw(1)},
			{Iface: "np-b", Gateway: e.gw(2), Weight: 3},
		},
	}}))
	e.converge(t, tbl, f)
	both := e.line("10.0.3.0/24", fmt.Sprintf("unicast nexthop via %v dev np-a weight 1 nexthop via %v dev np-b weight 3", e.gw(1), e.gw(2)))
	assert.Equal(t, []string{both}, e.ours(t))

	e.setUp(t, "np-a", false)
	e.tell(t, tbl, "np-a", kernel.LinkDown)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.3.0/24", fmt.Sprintf("unicast via %v dev np-b", e.gw(2)))}, e.ours(t))

	e.setUp(t, "np-a", true)
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{both}, e.ours(t))

	require.NoError(t, tbl.SetRoutes(classTunnel, rt.InterfaceNone, nil))
	e.converge(t, tbl, f)
	assert.Empty(t, e.ours(t))
}

func scenarioNeighbors(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	mac1, _ := net.ParseMAC("02:00:00:00:00:01")
	mac2, _ := net.ParseMAC("02:00:00:00:00:02")
	pod := e.pfx("10.0.1.4/32")
	ours := func() []string {
		var out []string
		for _, n := range e.neighbors(t) {
			if n.IP == pod.Addr() {
				out = append(out, fmt.Sprintf("%d %v %v %v", n.LinkIndex, n.IP, n.MAC, n.State&kernel.NUDPermanent != 0))
			}
		}
		return out
	}
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: pod, DestMAC: mac1}}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{fmt.Sprintf("%d %v %v true", a, pod.Addr(), mac1)}, ours())
	assert.Equal(t, []string{e.line("10.0.1.4/32", "unicast dev np-a")}, e.ours(t))

	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: pod, DestMAC: mac2}}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{fmt.Sprintf("%d %v %v true", a, pod.Addr(), mac2)}, ours())

	// Down flushes it; up brings it back.
	e.setUp(t, "np-a", false)
	e.tell(t, tbl, "np-a", kernel.LinkDown)
	e.converge(t, tbl, f)
	e.setUp(t, "np-a", true)
	e.tell(t, tbl, "np-a", kernel.LinkUp)
	e.converge(t, tbl, f)
	assert.Equal(t, []string{fmt.Sprintf("%d %v %v true", a, pod.Addr(), mac2)}, ours())

	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", nil))
	e.converge(t, tbl, f)
	assert.Empty(t, ours())
	assert.Empty(t, e.ours(t))
}

// scenarioNeighborsRestart: the static neighbour entries carry the
// Table's protocol, so a restarted Table deletes those of targets
// withdrawn while it was down (their routes of its own are still in its
// table), adopts the others, marks an entry it wants that has no protocol,
// and leaves alone every entry without its protocol, those with its
// protocol that serve no route of its own (another Table's, maybe), and,
// as a Table with ExclusivePolicy in a table of its own, every entry it
// did not write.
func scenarioNeighborsRestart(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	fx := e.addLink(t, "fx0") // outside the pattern
	mac := func(i byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, i} }
	pod := func(i int) netip.Prefix { return e.pfx(fmt.Sprintf("10.0.1.%d/32", i)) }
	type entry struct {
		link  int
		ip    netip.Addr
		mac   net.HardwareAddr
		proto uint8
	}
	static := func() []entry {
		var out []entry
		for _, n := range e.neighbors(t) {
			if n.State&kernel.NUDPermanent != 0 {
				out = append(out, entry{n.LinkIndex, n.IP, n.MAC, n.Protocol})
			}
		}
		return out
	}
	ours := func(i int) entry { return entry{a, pod(i).Addr(), mac(byte(i)), rt.DefaultProtocol} }
	foreign := []entry{
		{a, e.ip("10.0.1.77"), mac(77), 0},                   // no protocol, on our interface
		{a, e.ip("10.0.1.78"), mac(78), 4},                   // another protocol
		{fx, e.ip("10.0.2.79"), mac(79), rt.DefaultProtocol}, // ours, outside the pattern
		{a, pod(5).Addr(), mac(5), 0},                        // what an agent without the mark wrote
	}
	for _, n := range foreign {
		require.NoError(t, e.k.ApplyNeighbors(context.Background(), []kernel.NeighborOp{{Kind: kernel.OpAdd,
			Neighbor: kernel.Neighbor{LinkIndex: n.link, IP: n.ip, MAC: n.mac, Protocol: n.proto}}})[0])
	}
	declare := func(tbl *rt.Table, pods ...int) {
		var targets []rt.Target
		for _, i := range pods {
			targets = append(targets, rt.Target{CIDR: pod(i), DestMAC: mac(byte(i))})
		}
		require.NoError(t, tbl.SetRoutes(classLocal, "np-a", targets))
		e.tell(t, tbl, "np-a", kernel.LinkUp)
	}

	first := e.newTable(t, rt.Options{})
	declare(first, 1, 2, 3)
	e.converge(t, first, f)
	assert.ElementsMatch(t, append(slices.Clone(foreign), ours(1), ours(2), ours(3)), static())

	// A Table of its own (ExclusivePolicy) beside it declares nothing and
	// deletes nothing.
	other := e.newTable(t, rt.Options{Table: 1234, Ownership: rt.ExclusivePolicy{}})
	e.converge(t, other, f)
	assert.ElementsMatch(t, append(slices.Clone(foreign), ours(1), ours(2), ours(3)), static())

	// Restarted without pod 2 and with pod 5: pod 2's entry goes, pod 5's
	// is marked, pod 1's and 3's are adopted as they are.
	second := e.newTable(t, rt.Options{})
	declare(second, 1, 3, 5)
	e.converge(t, second, f)
	assert.ElementsMatch(t, append(slices.Clone(foreign[:3]), ours(1), ours(3), ours(5)), static())
	if f == failNone {
		assert.Equal(t, uint64(2), second.Counters().NeighborWrites, "pod 2 deleted, pod 5 marked: %v", e.kernel.events())
	}

	// Restarted with nothing declared: all of ours go, nothing else.
	third := e.newTable(t, rt.Options{})
	e.converge(t, third, f)
	assert.ElementsMatch(t, foreign[:3], static())
}

// allTypes declares one route of every kind on tbl (links np-a, np-b).
func allTypes(t *testing.T, e *env, tbl *rt.Table) {
	mac, _ := net.ParseMAC("02:00:00:00:00:09")
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{
		{CIDR: e.pfx("10.0.1.0/24")},
		{CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1), MTU: 1400},
		{CIDR: e.pfx("10.0.3.0/24"), Type: rt.TargetOnlink, Gateway: e.ip("10.200.0.1")},
		{CIDR: e.pfx("10.0.4.1/32"), Type: rt.TargetLocal},
		{CIDR: e.pfx("10.0.5.0/24"), Src: e.src(1), Metric: 7},
		{CIDR: e.pfx("10.0.5.5/32"), DestMAC: mac},
	}))
	require.NoError(t, tbl.SetRoutes(classLocal, rt.InterfaceNone, []rt.Target{
		{CIDR: e.pfx("10.0.6.0/24"), Type: rt.TargetBlackhole},
		{CIDR: e.pfx("10.0.7.0/24"), Type: rt.TargetUnreachable},
		{CIDR: e.pfx("10.0.8.0/24"), Type: rt.TargetProhibit},
		{CIDR: e.pfx("10.0.9.0/24"), Type: rt.TargetThrow},
		{CIDR: e.pfx("10.0.10.0/24"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: e.gw(1)}, {Iface: "np-b", Gateway: e.gw(2)}}},
	}))
}

func scenarioAdoption(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	first := e.newTable(t, rt.Options{})
	allTypes(t, e, first)
	e.converge(t, first, f)
	want := e.ours(t)
	require.Len(t, want, 11)

	// A restarted agent: a new Table, the same intent, no interface events
	// yet. It writes nothing.
	e.kernel.resetCounts()
	second := e.newTable(t, rt.Options{})
	allTypes(t, e, second)
	require.NoError(t, applyOnce(t, second))
	writes, dumps := e.kernel.counts()
	assert.Zero(t, writes, "restart adoption writes nothing: %v", e.kernel.events())
	assert.Equal(t, 1, dumps)
	assert.Equal(t, want, e.ours(t))
	s := second.Counters()
	assert.Equal(t, 11, s.InKernel)
	assert.Zero(t, s.PendingUpdates+s.PendingDeletions)
	assert.Zero(t, s.NeighborWrites)

	// Monitor events that arrive later change nothing either.
	for _, name := range []string{"np-a", "np-b", "lo"} {
		e.tell(t, second, name, kernel.LinkUp)
	}
	require.NoError(t, applyOnce(t, second))
	writes, _ = e.kernel.counts()
	assert.Zero(t, writes)
}

// scenarioTwoTables: two Tables of one family, one protocol and one
// interface pattern, in two routing tables, with the same destinations on
// the same interface and static neighbour entries of their own. Each owns
// exactly its routes and its neighbour entries: resyncs of either write
// nothing, a withdrawal deletes only the withdrawing Table's entry, and
// both restarted write nothing.
func scenarioTwoTables(t *testing.T, e *env, f failure) {
	a := e.addLink(t, "np-a")
	otherTable := e.table + 100
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)} }
	pod := func(i int) netip.Prefix { return e.pfx(fmt.Sprintf("10.0.1.%d/32", i)) }
	// Each Table wants its pods with their MACs, and the same block.
	declare := func(tbl *rt.Table, pods ...int) {
		targets := []rt.Target{{CIDR: e.pfx("10.0.9.0/24")}}
		for _, i := range pods {
			targets = append(targets, rt.Target{CIDR: pod(i), DestMAC: mac(i)})
		}
		require.NoError(t, tbl.SetRoutes(classLocal, "np-a", targets))
		e.tell(t, tbl, "np-a", kernel.LinkUp)
	}
	static := func() []string {
		var out []string
		for _, n := range e.neighbors(t) {
			if n.State&kernel.NUDPermanent != 0 {
				out = append(out, fmt.Sprintf("%d %v %v proto %d", n.LinkIndex, n.IP, n.MAC, n.Protocol))
			}
		}
		slices.Sort(out)
		return out
	}
	entries := func(pods ...int) []string {
		var out []string
		for _, i := range pods {
			out = append(out, fmt.Sprintf("%d %v %v proto %d", a, pod(i).Addr(), mac(i), rt.DefaultProtocol))
		}
		slices.Sort(out)
		return out
	}
	// tableRoutes lists the routes with our protocol in table.
	tableRoutes := func(table uint32) []string {
		var out []string
		names := e.linkNames(t)
		require.NoError(t, e.k.DumpRoutes(context.Background(), e.fam, table, func(r *kernel.Route) error {
			if r.Protocol == rt.DefaultProtocol {
				out = append(out, formatRoute(r, names))
			}
			return nil
		}, nil))
		slices.Sort(out)
		return out
	}
	routesOf := func(pods ...int) []string {
		out := []string{e.line("10.0.9.0/24", "unicast dev np-a proto 78")}
		for _, i := range pods {
			out = append(out, e.line(fmt.Sprintf("10.0.1.%d/32", i), "unicast dev np-a proto 78"))
		}
		slices.Sort(out)
		return out
	}
	neighborWrites := func(tbls ...*rt.Table) (n uint64) {
		for _, tbl := range tbls {
			n += tbl.Counters().NeighborWrites
		}
		return n
	}

	main := e.newTable(t, rt.Options{})
	other := e.newTable(t, rt.Options{Table: otherTable})
	declare(main, 1, 2)
	declare(other, 3, 4)
	e.converge(t, main, f)
	e.converge(t, other, f)
	e.converge(t, main, f)
	require.Equal(t, entries(1, 2, 3, 4), static())
	require.Equal(t, routesOf(1, 2), tableRoutes(e.table))
	require.Equal(t, routesOf(3, 4), tableRoutes(otherTable))

	// Resyncs, one after the other, in either order: nothing written.
	e.kernel.resetCounts()
	written := neighborWrites(main, other)
	for range 2 {
		for _, tbl := range []*rt.Table{main, other} {
			tbl.QueueResync()
			require.NoError(t, applyOnce(t, tbl))
		}
	}
	writes, _ := e.kernel.counts()
	assert.Zero(t, writes, "route writes: %v", e.kernel.events())
	assert.Equal(t, written, neighborWrites(main, other), "neighbour writes")
	assert.Equal(t, entries(1, 2, 3, 4), static())

	// One withdraws a pod: its entry and route go, nothing of the other.
	declare(other, 3)
	e.converge(t, other, f)
	e.converge(t, main, f)
	assert.Equal(t, entries(1, 2, 3), static())
	assert.Equal(t, routesOf(1, 2), tableRoutes(e.table))
	assert.Equal(t, routesOf(3), tableRoutes(otherTable))

	// Both restarted with the same intent: nothing written.
	e.kernel.resetCounts()
	main2 := e.newTable(t, rt.Options{})
	other2 := e.newTable(t, rt.Options{Table: otherTable})
	declare(main2, 1, 2)
	declare(other2, 3)
	for range 2 {
		for _, tbl := range []*rt.Table{main2, other2} {
			require.NoError(t, applyOnce(t, tbl))
			tbl.QueueResync()
		}
	}
	writes, _ = e.kernel.counts()
	assert.Zero(t, writes, "route writes after a restart: %v", e.kernel.events())
	assert.Zero(t, neighborWrites(main2, other2), "neighbour writes after a restart")
	assert.Equal(t, entries(1, 2, 3), static())

	// Restarted without pod 2: its entry goes (its route in the Table's own
	// table says it was the Table's), the other Table's stay.
	main3 := e.newTable(t, rt.Options{})
	declare(main3, 1)
	e.converge(t, main3, f)
	assert.Equal(t, entries(1, 3), static())
	assert.Equal(t, routesOf(1), tableRoutes(e.table))
	assert.Equal(t, routesOf(3), tableRoutes(otherTable))
}

func scenarioDeltas(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	tbl := e.newTable(t, rt.Options{})
	// Same CIDR, two metrics: two routes.
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-a", rt.Target{CIDR: e.pfx("10.0.1.0/24"), Metric: 10}))
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-b", rt.Target{CIDR: e.pfx("10.0.1.0/24"), Metric: 20}))
	e.converge(t, tbl, f)
	assert.Equal(t, []string{
		e.line("10.0.1.0/24", "metric 10 unicast dev np-a"),
		e.line("10.0.1.0/24", "metric 20 unicast dev np-b"),
	}, e.ours(t))

	// An update changes a route in place.
	require.NoError(t, tbl.RouteUpdate(classLocal, "np-a", rt.Target{CIDR: e.pfx("10.0.1.0/24"), Metric: 10, MTU: 1300}))
	e.converge(t, tbl, f)
	assert.Contains(t, e.ours(t), e.line("10.0.1.0/24", "metric 10 unicast dev np-a mtu 1300"))

	require.NoError(t, tbl.RouteRemove(classLocal, "np-b", rt.RouteKey{CIDR: e.pfx("10.0.1.0/24"), Metric: 20}))
	require.NoError(t, tbl.RouteRemove(classLocal, "np-b", rt.RouteKey{CIDR: e.pfx("10.0.1.0/24"), Metric: 99}), "unknown: no-op")
	require.NoError(t, tbl.RouteRemove(classLocal, "np-zz", rt.RouteKey{CIDR: e.pfx("10.0.1.0/24")}), "unknown iface: no-op")
	e.converge(t, tbl, f)
	assert.Equal(t, []string{e.line("10.0.1.0/24", "metric 10 unicast dev np-a mtu 1300")}, e.ours(t))
	assert.Equal(t, 1, tbl.Counters().Declared)
}

func scenarioBadInput(t *testing.T, e *env, f failure) {
	e.addLink(t, "np-a")
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}}))
	e.converge(t, tbl, f)
	before := e.ours(t)
	other := "10.1.0.0/16"
	if e.fam == rt.IPv4 {
		other = "fd00::/64"
	}
	bad := [][]rt.Target{
		{{CIDR: e.pfx("10.0.2.0/24")}, {CIDR: netip.MustParsePrefix(other)}},
		{{CIDR: e.pfx("10.0.2.0/24")}, {CIDR: e.pfx("10.0.2.0/24")}},
		{{CIDR: e.pfx("10.0.2.0/24"), Type: rt.TargetBlackhole}},
		{{CIDR: e.pfx("10.0.2.0/24"), Type: rt.TargetOnlink}},
	}
	for _, targets := range bad {
		require.Error(t, tbl.SetRoutes(classLocal, "np-a", targets))
	}
	require.ErrorIs(t, tbl.SetRoutes(classLocal, "bad/name", nil), rt.ErrInvalidInterface)
	require.ErrorIs(t, tbl.RouteUpdate(classLocal, "np-a", rt.Target{}), rt.ErrInvalidTarget)
	e.converge(t, tbl, f)
	assert.Equal(t, before, e.ours(t), "nothing changed")
	assert.Equal(t, 1, tbl.Counters().Declared)
	assert.True(t, strings.HasPrefix(before[0], e.pfx("10.0.1.0/24").String()))
}
