package routetable_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// A Table registered with a loop follows the link updates the loop is
// given: a route held for a missing interface is written once the loop
// hands the Table the interface's appearance, with no wiring of the Table
// itself.
func TestLinkUpdatesThroughTheLoop(t *testing.T) {
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

	idx := addLink(t, k, "np-new", 1)
	loop.OnLink(kernel.Link{Name: "np-new", Index: idx, AdminUp: true, Running: true}, kernel.LinkUp)
	require.Eventually(t, func() bool { return len(routes(k, rt.IPv4)) == 1 }, 5*time.Second, time.Millisecond,
		"the route is written once the loop handed the Table the link")
}
