package routerule_test

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

var (
	_ dataplane.Driver = (*routerule.Rules)(nil)
	_ dataplane.Named  = (*routerule.Rules)(nil)
	_ kernel.Rules     = (*kernel.Namespace)(nil)
	_ kernel.Rules     = (*kernelfake.Namespace)(nil)
)

// TestDrivenByTheLoop registers Rules with a dataplane.Loop: nothing is
// written before the loop is in sync, the desired rule is written after,
// and a failed write is retried by the loop until it converges.
func TestDrivenByTheLoop(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{})
	rules, err := routerule.New(routerule.Options{Family: routerule.IPv4, Kernel: k, Priorities: []uint32{100}, Tables: []uint32{100}})
	require.NoError(t, err)
	require.NoError(t, rules.SetRule(routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 100}}))
	k.Fail(kernelfake.OpAddRule, 1, syscall.ENOBUFS)

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
		return slices.ContainsFunc(fakeRules(t, k), func(r kernel.Rule) bool {
			return r.Priority == 100 && r.Mark == 0x8 && r.Table == 100
		})
	}
	assert.Zero(t, k.Calls(kernelfake.OpRules)+k.Writes(), "no kernel access before the loop is in sync")
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	require.Eventually(t, installed, 10*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, k.Calls(kernelfake.OpAddRule), 2, "the failed add was retried")
}

// declare is a message for declarer: a change to make to the rules.
type declare func(*routerule.Rules) error

// declarer is a manager that makes the changes it is sent and counts the
// passes, so a test can tell in which pass a change was made.
type declarer struct {
	rules   *routerule.Rules
	pending []declare
	passes  int

	mu     sync.Mutex
	madeIn []int // the pass of each change, in order
}

// made returns the pass that made change i (0, 1… in the order sent), or
// 0 if it is not made yet.
func (d *declarer) made(i int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i < len(d.madeIn) {
		return d.madeIn[i]
	}
	return 0
}

func (d *declarer) OnUpdate(msg any) {
	if f, ok := msg.(declare); ok {
		d.pending = append(d.pending, f)
	}
}

func (d *declarer) CompleteDeferredWork(context.Context) error {
	d.passes++
	for _, f := range d.pending {
		if err := f(d.rules); err != nil {
			return err
		}
		d.mu.Lock()
		d.madeIn = append(d.madeIn, d.passes)
		d.mu.Unlock()
	}
	d.pending = nil
	return nil
}

// A rule the kernel keeps refusing does not hold the loop back: the
// instance is not backed off, a rule declared later is in the kernel after
// the very pass that declared it, the refused rule is reported in Health
// (and gone from it at the pass that withdraws it).
func TestRefusedRuleDoesNotHoldTheLoop(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{})
	bad := routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 100}}
	k.Refuse(func(op kernelfake.Op, obj any) error {
		if r, ok := obj.(kernel.Rule); ok && op == kernelfake.OpAddRule && r.Mark == 0x8 {
			return syscall.EINVAL
		}
		return nil
	})
	rules, err := routerule.New(routerule.Options{Family: routerule.IPv4, Kernel: k, Priorities: []uint32{100, 101}, Tables: []uint32{100}})
	require.NoError(t, err)
	d := &declarer{rules: rules}
	var mu sync.Mutex
	health := map[uint64]dataplane.Health{} // by pass
	loop, err := dataplane.New(dataplane.Options{ResyncInterval: time.Hour, HealthInterval: -1, OnHealth: func(h dataplane.Health) {
		mu.Lock()
		health[h.Applies] = h
		mu.Unlock()
	}})
	require.NoError(t, err)
	require.NoError(t, loop.AddManager(d))
	require.NoError(t, loop.AddDriver(rules))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	healthAt := func(pass int) dataplane.Health {
		mu.Lock()
		defer mu.Unlock()
		return health[uint64(pass)]
	}
	sent := 0
	// send sends a change and returns the pass that made it, once that
	// pass is over.
	send := func(f declare) int {
		t.Helper()
		require.NoError(t, loop.Send(ctx, f))
		sent++
		var pass int
		require.Eventually(t, func() bool {
			pass = d.made(sent - 1)
			return pass > 0 && healthAt(pass).Applies == uint64(pass)
		}, 10*time.Second, time.Millisecond)
		return pass
	}
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	pass := send(func(r *routerule.Rules) error { return r.SetRule(bad) })
	h := healthAt(pass)
	assert.ErrorIs(t, h.LastError, dataplane.ErrPartial)
	assert.Empty(t, h.FailingDrivers, "a refused rule does not back the instance off")
	assert.Equal(t, 1, h.FailingObjects)

	// Let it fail a few more times, then declare a good rule: written in
	// the pass that declares it.
	require.Eventually(t, func() bool { return k.Calls(kernelfake.OpAddRule) >= 4 }, 10*time.Second, time.Millisecond)
	good := routerule.Rule{Priority: 101, Mark: 0x9, Action: routerule.ActionLookup{Table: 100}}
	start := time.Now()
	pass = send(func(r *routerule.Rules) error { return r.SetRule(good) })
	t.Logf("a rule declared beside one refused %d times was written in %v", k.Calls(kernelfake.OpAddRule)-1, time.Since(start))
	assert.True(t, slices.ContainsFunc(fakeRules(t, k), func(r kernel.Rule) bool { return r.Mark == 0x9 }))
	assert.Equal(t, 1, healthAt(pass).FailingObjects)
	assert.Empty(t, healthAt(pass).FailingDrivers)

	pass = send(func(r *routerule.Rules) error { return r.RemoveRule(bad) })
	assert.Zero(t, healthAt(pass).FailingObjects, "withdrawn: no longer failing, at once")
}

// fakeRules returns the IPv4 rules of a fake namespace, read without being
// counted.
func fakeRules(t *testing.T, k *kernelfake.Namespace) []kernel.Rule {
	t.Helper()
	rules, err := k.Admin().Rules(context.Background(), kernel.IPv4)
	require.NoError(t, err)
	return rules
}
