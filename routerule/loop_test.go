//go:build linux

package routerule_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/routerule/routerulefake"
)

var (
	_ dataplane.Driver  = (*routerule.Rules)(nil)
	_ dataplane.Named   = (*routerule.Rules)(nil)
	_ routerule.Netlink = (*netlink.Handle)(nil)
	_ routerule.Netlink = (*routerulefake.Kernel)(nil)
)

// TestDrivenByTheLoop registers Rules with a dataplane.Loop: nothing is
// written before the loop is in sync, the desired rule is written after,
// and a failed write is retried by the loop until it converges.
func TestDrivenByTheLoop(t *testing.T) {
	k := routerulefake.New()
	rules, err := routerule.New(routerule.Options{Family: routerule.IPv4, Handle: k, Priorities: []uint32{100}, Tables: []uint32{100}})
	require.NoError(t, err)
	require.NoError(t, rules.SetRule(routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 100}}))
	k.FailNext(routerulefake.OpAdd, 1, syscall.ENOBUFS)

	loop, err := dataplane.New(dataplane.Options{Backoff: dataplane.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(rules))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	installed := func() bool {
		for _, r := range k.Rules(netlink.FAMILY_V4) {
			if r.Priority == 100 && r.Mark == 0x8 && r.Table == 100 {
				return true
			}
		}
		return false
	}
	assert.Zero(t, k.Calls(routerulefake.OpList)+k.Writes(), "no kernel access before the loop is in sync")
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	require.Eventually(t, installed, 10*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, k.Calls(routerulefake.OpAdd), 2, "the failed add was retried")
}
