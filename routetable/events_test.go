package routetable_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// adminRoute writes a route as someone else would and returns it as the
// kernel holds it (as ifacemonitor would report it).
func adminRoute(t *testing.T, k *kernelfake.Namespace, kind kernel.OpKind, r kernel.Route) kernel.Route {
	t.Helper()
	require.NoError(t, k.Admin().ApplyRoutes(bg, []kernel.RouteOp{{Kind: kind, Route: r}})[0])
	if kind == kernel.OpDelete {
		return r
	}
	got, ok := route(k, r.Family, r.Dst)
	require.True(t, ok, "%v written", r.Dst)
	return got
}

// A route of ours that someone deletes is written again by the next Apply
// once the event is in, without reading the table: one write, no dump.
// Without the event the Table trusts its view and writes nothing.
func TestRouteEventRepairsWithoutRead(t *testing.T) {
	k, rec, tbl, _ := newRecorded(t, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}, {CIDR: mustP("10.0.2.0/24"), Gateway: gw(rt.IPv4, 1)}}))
	_, err := tbl.Apply(bg)
	require.NoError(t, err)
	r, ok := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	require.True(t, ok)
	adminRoute(t, k, kernel.OpDelete, r)

	rec.resetCounts()
	_, err = tbl.Apply(bg)
	require.NoError(t, err)
	writes, _ := rec.counts()
	require.Zero(t, writes, "without the event the Table does not know")

	woken := 0
	tbl.SetWake(func() { woken++ })
	tbl.OnRouteUpdate(r, true)
	assert.Equal(t, 1, woken, "the event wakes the loop")
	_, err = tbl.Apply(bg)
	require.NoError(t, err)
	writes, dumps, rescans := rec.counts3()
	assert.Equal(t, 1, writes, "%v", rec.events())
	assert.Zero(t, dumps+rescans, "no read of the table")
	_, ok = route(k, rt.IPv4, mustP("10.0.1.0/24"))
	assert.True(t, ok, "written again")
}

// Routes of other tables and families, with a TOS, or without a valid
// destination are not the Table's business: they are dropped at once,
// without waking the loop.
func TestRouteEventsOfOthersIgnored(t *testing.T) {
	k, rec, tbl, _ := newRecorded(t, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	_, err := tbl.Apply(bg)
	require.NoError(t, err)
	r, ok := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	require.True(t, ok)
	woken := 0
	tbl.SetWake(func() { woken++ })
	other := r
	other.Table = 100
	tos := r
	tos.TOS = 0x10
	v6 := r
	v6.Family, v6.Dst = rt.IPv6, mustP("fd00::/64")
	mapped := r
	mapped.Dst = mustP("::ffff:10.0.1.0/120")
	for _, ev := range []kernel.Route{other, tos, v6, mapped, {Family: rt.IPv4, Table: kernel.TableMain}} {
		tbl.OnRouteUpdate(ev, true)
	}
	assert.Zero(t, woken)
	rec.resetCounts()
	_, err = tbl.Apply(bg)
	require.NoError(t, err)
	writes, _ := rec.counts()
	assert.Zero(t, writes, "%v", rec.events())
}

// Each case changes the kernel as someone else would and hands the Table
// the events ifacemonitor would report: the next Apply does what an Apply
// after a re-read of the table would do, and a re-read after it finds the
// view right (writes nothing, reports the same). fx0 is outside the
// Table's pattern.
func TestRouteEventsAsAReadWouldSee(t *testing.T) {
	blk := func(dst string, proto uint8) kernel.Route {
		return kernel.Route{Family: rt.IPv4, Table: kernel.TableMain, Dst: mustP(dst), Type: kernel.RTNBlackhole, Protocol: proto}
	}
	type ev struct {
		r    kernel.Route
		gone bool
	}
	tests := []struct {
		name string
		// change changes the kernel and returns the events.
		change func(t *testing.T, k *kernelfake.Namespace, fx int) []ev
		// writes is what the next Apply writes; foreign is whether it
		// reports a key held by a foreign route.
		writes  int
		foreign bool
		check   func(t *testing.T, k *kernelfake.Namespace)
	}{
		{name: "ours changed by someone", writes: 1,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				r, _ := route(k, rt.IPv4, mustP("10.0.1.0/24"))
				r.MTU = 1300
				return []ev{{r: adminRoute(t, k, kernel.OpReplace, r)}}
			},
			check: func(t *testing.T, k *kernelfake.Namespace) {
				r, _ := route(k, rt.IPv4, mustP("10.0.1.0/24"))
				assert.Zero(t, r.MTU)
			}},
		{name: "a route with our protocol added by someone", writes: 1,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				return []ev{{r: adminRoute(t, k, kernel.OpAdd, blk("10.0.3.0/24", rt.DefaultProtocol))}}
			},
			check: func(t *testing.T, k *kernelfake.Namespace) {
				_, ok := route(k, rt.IPv4, mustP("10.0.3.0/24"))
				assert.False(t, ok, "deleted")
			}},
		{name: "a foreign route added beside ours", writes: 0,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				return []ev{{r: adminRoute(t, k, kernel.OpAdd, blk("10.0.3.0/24", 4))}}
			}},
		{name: "ours replaced in place by a foreign route", writes: 0, foreign: true,
			change: func(t *testing.T, k *kernelfake.Namespace, fx int) []ev {
				r, _ := route(k, rt.IPv4, mustP("10.0.4.0/24"))
				r.Protocol = 4
				return []ev{{r: adminRoute(t, k, kernel.OpReplace, r)}}
			},
			check: func(t *testing.T, k *kernelfake.Namespace) {
				r, _ := route(k, rt.IPv4, mustP("10.0.4.0/24"))
				assert.Equal(t, uint8(4), r.Protocol, "not overwritten")
			}},
		{name: "the removal of a route reported after its successor", writes: 0,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				r, _ := route(k, rt.IPv4, mustP("10.0.1.0/24"))
				old := r
				old.OIF = index(t, k, "fx0")
				return []ev{{r: r}, {r: old, gone: true}}
			}},
		{name: "the report of a route someone deleted and added again", writes: 0,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				r, _ := route(k, rt.IPv4, mustP("10.0.1.0/24"))
				adminRoute(t, k, kernel.OpDelete, r)
				return []ev{{r: r, gone: true}, {r: adminRoute(t, k, kernel.OpAdd, r)}}
			}},
		{name: "a foreign route that held a key we want is gone", writes: 1,
			change: func(t *testing.T, k *kernelfake.Namespace, _ int) []ev {
				return []ev{{r: adminRoute(t, k, kernel.OpDelete, blk("10.0.5.0/24", 4)), gone: true}}
			},
			check: func(t *testing.T, k *kernelfake.Namespace) {
				r, _ := route(k, rt.IPv4, mustP("10.0.5.0/24"))
				assert.Equal(t, rt.DefaultProtocol, r.Protocol, "ours")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, rec, tbl, _ := newRecorded(t, "np-a")
			fx := addLink(t, k, "fx0", 2)
			adminRoute(t, k, kernel.OpAdd, blk("10.0.5.0/24", 4))
			require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
			require.NoError(t, tbl.SetRoutes(1, "fx0", []rt.Target{{CIDR: mustP("10.0.4.0/24")}}))
			require.NoError(t, tbl.SetRoutes(2, rt.InterfaceNone, []rt.Target{{CIDR: mustP("10.0.5.0/24"), Type: rt.TargetBlackhole}}))
			_, err := tbl.Apply(bg)
			require.ErrorIs(t, err, rt.ErrForeignRoute, "10.0.5.0/24 is held")

			for _, e := range tc.change(t, k, fx) {
				tbl.OnRouteUpdate(e.r, e.gone)
			}
			rec.resetCounts()
			_, err = tbl.Apply(bg)
			writes, dumps, rescans := rec.counts3()
			assert.Equal(t, tc.writes, writes, "%v", rec.events())
			assert.Zero(t, dumps+rescans)
			if tc.foreign {
				require.ErrorIs(t, err, rt.ErrForeignRoute)
				assert.Contains(t, err.Error(), "10.0.4.0/24")
			}
			if tc.check != nil {
				tc.check(t, k)
			}

			rec.resetCounts()
			tbl.QueueResync()
			_, again := tbl.Apply(bg)
			writes, _ = rec.counts()
			assert.Zero(t, writes, "a re-read finds the view right: %v", rec.events())
			assert.Equal(t, fmt.Sprint(err), fmt.Sprint(again), "and reports the same")
		})
	}
}

// Events that came before a re-read of the table are dropped: the read
// supersedes them.
func TestRouteEventsBeforeAReadDropped(t *testing.T) {
	k, rec, tbl, _ := newRecorded(t, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	_, err := tbl.Apply(bg)
	require.NoError(t, err)
	r, _ := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	tbl.OnRouteUpdate(r, true) // older than the read below: the route is there
	tbl.QueueResync()
	rec.resetCounts()
	_, err = tbl.Apply(bg)
	require.NoError(t, err)
	writes, dumps := rec.counts()
	assert.Zero(t, writes, "%v", rec.events())
	assert.Equal(t, 1, dumps)
}

// eventRig runs a Table of an env in a dataplane.Loop, fed by a real
// ifacemonitor (link states and routes) as the package documentation
// wires them, with the periodic resync an hour away.
type eventRig struct {
	e    *env
	tbl  *rt.Table
	loop *dataplane.Loop
	stop func()
}

func startEventRig(t *testing.T, e *env, tbl *rt.Table) *eventRig {
	t.Helper()
	loop, err := dataplane.New(dataplane.Options{ResyncInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(tbl))
	mon, err := ifacemonitor.New(ifacemonitor.Options{
		Kernel:      e.k,
		WatchRoutes: true,
		OnLinkState: func(u ifacemonitor.LinkUpdate) { tbl.OnIfaceStateChanged(u.Name, u.Index, u.State) },
		OnRoute:     func(u ifacemonitor.RouteUpdate) { tbl.OnRouteUpdate(u.Route, u.Gone) },
		OnInSync:    loop.InterfacesInSync,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{loop.Run, mon.Run} {
		wg.Go(func() { errs <- run(ctx) })
	}
	var once sync.Once
	r := &eventRig{e: e, tbl: tbl, loop: loop, stop: func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
		})
	}}
	t.Cleanup(r.stop)
	loop.DatastoreInSync()
	require.Eventually(t, func() bool { return loop.Health().Applies > 0 && tbl.Counters().Resyncs > 0 }, 5*time.Second, time.Millisecond)
	return r
}

// waitFor waits until cond holds, and returns how long that took.
func (r *eventRig) waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, cond, 5*time.Second, time.Millisecond, "%s", what)
	return time.Since(start)
}

// has reports whether the env's table holds a route to dst (the plan's
// prefix) with protocol proto.
func (e *env) has(t *testing.T, dst string, proto uint8) bool {
	t.Helper()
	found := false
	require.NoError(t, e.k.DumpRoutes(context.Background(), e.fam, e.table, func(r *kernel.Route) error {
		found = found || (r.Dst == e.pfx(dst) && r.Protocol == proto)
		return nil
	}, func() { found = false }))
	return found
}

// delRoute deletes a route as another process would: with iproute2 in a
// real namespace, through the fake's admin view in a fake one.
func (e *env) delRoute(t *testing.T, dst string, proto uint8) {
	t.Helper()
	if e.ipCmd != nil {
		e.ipCmd(t, "route", "del", e.pfx(dst).String(), "table", fmt.Sprint(e.table), "proto", fmt.Sprint(proto))
		return
	}
	e.deleteRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx(dst), Protocol: proto})
}

// routeEventsThroughMonitor wires a real ifacemonitor to a Table in a
// loop whose periodic resync is an hour away. A route of ours that
// another process deletes is written again, a foreign route that goes
// frees its key for ours, and an interface deleted with a foreign route
// and created again gets our route: each seen through the monitor's
// events, without a re-read of the table (no resync, no rescan of an
// interface). Stopped, the Table's view is the kernel's: an Apply writes
// nothing, nor does a resync after it.
func routeEventsThroughMonitor(t *testing.T, e *env) {
	e.addLink(t, "np-a")
	fx := e.addLink(t, "fx0")
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.5.0.0/24"), Type: kernel.RTNBlackhole, Protocol: 4})
	e.addRoute(t, kernel.Route{Family: e.fam, Table: e.table, Dst: e.pfx("10.6.0.0/24"), Type: kernel.RTNUnicast,
		Protocol: 4, Scope: kernel.ScopeLink, OIF: fx})
	tbl := e.newTable(t, rt.Options{})
	require.NoError(t, tbl.SetRoutes(classLocal, "np-a", []rt.Target{{CIDR: e.pfx("10.0.1.0/24")}, {CIDR: e.pfx("10.0.2.0/24"), Gateway: e.gw(1)}}))
	require.NoError(t, tbl.SetRoutes(classTunnel, rt.InterfaceNone, []rt.Target{{CIDR: e.pfx("10.5.0.0/24"), Type: rt.TargetBlackhole}}))
	require.NoError(t, tbl.SetRoutes(classTunnel, "fx0", []rt.Target{{CIDR: e.pfx("10.6.0.0/24")}}))
	rig := startEventRig(t, e, tbl)
	rig.waitFor(t, "our routes written", func() bool {
		return e.has(t, "10.0.1.0/24", rt.DefaultProtocol) && e.has(t, "10.0.2.0/24", rt.DefaultProtocol)
	})
	start := tbl.Counters()
	_, dumps, rescans := e.kernel.counts3()

	e.delRoute(t, "10.0.1.0/24", rt.DefaultProtocol)
	d := rig.waitFor(t, "our deleted route written again", func() bool { return e.has(t, "10.0.1.0/24", rt.DefaultProtocol) })
	t.Logf("%v table %d: a route of ours deleted by another process was back after %v", e.fam, e.table, d)

	e.delRoute(t, "10.5.0.0/24", 4)
	d = rig.waitFor(t, "ours where a foreign route was", func() bool { return e.has(t, "10.5.0.0/24", rt.DefaultProtocol) })
	t.Logf("%v table %d: our route was written %v after the foreign route holding its key was deleted", e.fam, e.table, d)

	e.deleteLink(t, "fx0")
	e.addLink(t, "fx0")
	d = rig.waitFor(t, "ours through the re-created interface", func() bool { return e.has(t, "10.6.0.0/24", rt.DefaultProtocol) })
	t.Logf("%v table %d: our route through a re-created interface was written %v after it came up", e.fam, e.table, d)

	s := tbl.Counters()
	assert.Equal(t, start.Resyncs, s.Resyncs, "no re-read of the table")
	_, dumpsNow, rescansNow := e.kernel.counts3()
	assert.Equal(t, dumps, dumpsNow, "no dump of the table")
	t.Logf("%d reads of the routes through an interface that came up (fx0 and its peer)", rescansNow-rescans)
	assert.Equal(t, []string{
		e.line("10.0.1.0/24", "unicast dev np-a"),
		e.line("10.0.2.0/24", "unicast via "+e.gw(1).String()+" dev np-a"),
		e.line("10.5.0.0/24", "blackhole"),
		e.line("10.6.0.0/24", "unicast dev fx0"),
	}, e.ours(t))

	rig.stop()
	e.kernel.resetCounts()
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	tbl.QueueResync()
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	writes, _ := e.kernel.counts()
	assert.Zero(t, writes, "the view the events kept is the kernel's: %v", e.kernel.events())
}

// TestRouteEventsThroughMonitor is routeEventsThroughMonitor on a fake
// namespace, for both families.
func TestRouteEventsThroughMonitor(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		t.Run(fam.String(), func(t *testing.T) { routeEventsThroughMonitor(t, fakeEnv(t, fam, kernel.TableMain)) })
	}
}
