package routetable_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

var (
	_ dataplane.Driver   = (*rt.Table)(nil)
	_ dataplane.Wakeable = (*rt.Table)(nil)
	_ dataplane.Named    = (*rt.Table)(nil)
)

// OnIfaceStateChanged, called from outside the loop (an interface
// monitor's callback), wakes the loop it is registered with: routes held
// for an interface are written when it comes up, not at the next periodic
// resync (an hour away here).
func TestInterfaceEventWakesTheLoop(t *testing.T) {
	k := newNS(t)
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}})
	require.NoError(t, err)
	require.NoError(t, tbl.SetRoutes(1, "np-new", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))

	inSync := make(chan struct{})
	loop, err := dataplane.New(dataplane.Options{ResyncInterval: time.Hour, OnInSync: func() { close(inSync) }})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(tbl))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	<-inSync
	require.Empty(t, routes(k, rt.IPv4), "held: no interface yet")
	applies := loop.Health().Applies

	idx := addLink(t, k, "np-new", 1)
	tbl.OnIfaceStateChanged("np-new", idx, kernel.LinkUp)
	require.Eventually(t, func() bool { return len(routes(k, rt.IPv4)) == 1 }, 5*time.Second, time.Millisecond,
		"the route is written by a pass the event asked for")
	assert.Greater(t, loop.Health().Applies, applies)
}

// Without a loop, OnIfaceStateChanged wakes nobody; with one, every call
// wakes it (a pass that finds nothing to do is cheap), and an invalid
// update does not.
func TestSetWake(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv4, "np-a")
	tbl.OnIfaceStateChanged("np-a", 3, kernel.LinkUp) // no wake function: nothing to call
	woken := 0
	tbl.SetWake(func() { woken++ })
	tbl.OnIfaceStateChanged("np-a", 3, kernel.LinkDown)
	tbl.OnIfaceStateChanged("np-a", 3, kernel.LinkUp)
	tbl.OnIfaceStateChanged("bad/name", 3, kernel.LinkUp)
	assert.Equal(t, 2, woken)
}

// Loop.Plan and Loop.State may be called while the loop runs: they take
// the Table's lock as Apply does (run with -race), and once the loop has
// applied, the Table's plan is empty and its state in sync.
func TestPlanAndStateWhileTheLoopRuns(t *testing.T) {
	k := newNS(t)
	idx := addLink(t, k, "np-a", 1)
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}})
	require.NoError(t, err)
	tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkUp)
	inSync := make(chan struct{})
	loop, err := dataplane.New(dataplane.Options{ResyncInterval: time.Hour, OnInSync: func() { close(inSync) }})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(tbl))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	stop := make(chan struct{})
	planned := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				planned <- nil
				return
			default:
			}
			if _, err := loop.Plan(ctx); err != nil {
				planned <- err
				return
			}
			if _, err := loop.State(ctx); err != nil {
				planned <- err
				return
			}
		}
	}()
	for i := range 50 {
		require.NoError(t, tbl.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP(fmt.Sprintf("10.0.%d.0/24", i))}))
		loop.Wake()
	}
	<-inSync
	require.Eventually(t, func() bool { return len(routes(k, rt.IPv4)) == 50 }, 5*time.Second, time.Millisecond)
	close(stop)
	require.NoError(t, <-planned)
	require.Eventually(t, func() bool {
		plans, err := loop.Plan(ctx)
		return err == nil && len(plans) == 1 && plans[0].Empty()
	}, 5*time.Second, time.Millisecond, "the loop applied what the Table planned")
	states, err := loop.State(ctx)
	require.NoError(t, err)
	require.Len(t, states, 1)
	assert.True(t, states[0].InSync(), "%v", states[0])
	assert.Len(t, states[0].Owned, 50)
}
