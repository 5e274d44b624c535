package routetable_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// newRecorded is newFake with the Table's calls recorded.
func newRecorded(t *testing.T, names ...string) (*kernelfake.Namespace, *recorder, *rt.Table, *clock.Fake) {
	t.Helper()
	k, _, clk := newFake(t, rt.IPv4, names...)
	rec := &recorder{k: k}
	tbl, err := rt.New(rt.Options{Kernel: rec, Family: rt.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}, Clock: clk})
	require.NoError(t, err)
	return k, rec, tbl, clk
}

// replaces counts the replaces of dst the Table sent.
func (r *recorder) replaces(dst string) int {
	n := 0
	for _, ev := range r.events() {
		if ev == "replace "+dst {
			n++
		}
	}
	return n
}

// A route the kernel keeps refusing (its gateway is on no link) is retried
// on its own backoff and reported as a partial failure; every other route
// is written at once, and passes in between do not try it again. A new
// declaration of it ends the backoff, and withdrawing it takes effect at
// the next Apply.
func TestRefusedRouteBacksOffAlone(t *testing.T) {
	k, rec, tbl, clk := newRecorded(t, "np-a")
	ctx := context.Background()
	bad := rt.Target{CIDR: mustP("10.9.0.0/24"), Gateway: mustA("192.0.2.1")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{bad, {CIDR: mustP("10.0.1.0/24")}}))

	res, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial, "a refused route is a partial failure")
	require.ErrorIs(t, err, rt.ErrRouteFailed)
	require.ErrorIs(t, err, syscall.ENETUNREACH)
	assert.Contains(t, err.Error(), "10.9.0.0/24")
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter, "the refused route's first retry")
	_, ok := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	assert.True(t, ok, "the other route is written in the same Apply")

	// A valid route declared afterwards is written by the very next
	// Apply; the refused one is not tried again before its time, but is
	// still reported.
	require.NoError(t, tbl.RouteUpdate(1, "np-a", rt.Target{CIDR: mustP("10.0.2.0/24")}))
	res, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	_, ok = route(k, rt.IPv4, mustP("10.0.2.0/24"))
	assert.True(t, ok)
	assert.Equal(t, 1, rec.replaces("10.9.0.0/24"), "not retried on an unrelated pass")
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter)

	// Exponential backoff: 100 ms, then 200 ms.
	clk.Advance(100 * time.Millisecond)
	res, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, 2, rec.replaces("10.9.0.0/24"))
	assert.Equal(t, 200*time.Millisecond, res.RetryAfter)
	clk.Advance(199 * time.Millisecond)
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, 2, rec.replaces("10.9.0.0/24"))

	// A new declaration of the route is tried at once.
	bad.MTU = 1400
	require.NoError(t, tbl.RouteUpdate(1, "np-a", bad))
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, 3, rec.replaces("10.9.0.0/24"))

	// Withdrawn, it is no longer reported, at the next Apply.
	require.NoError(t, tbl.RouteRemove(1, "np-a", bad.Key()))
	res, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter, "no retry left to ask for")
	assert.Equal(t, 3, rec.replaces("10.9.0.0/24"))
	assert.Zero(t, tbl.Counters().PendingUpdates)
}

// Withdrawing a route whose update the kernel refused deletes the version
// the kernel still holds at the next Apply, not after the backoff; a
// delete the kernel refuses backs off too.
func TestWithdrawnFailedRouteDeletedAtOnce(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	ctx := context.Background()
	r := rt.Target{CIDR: mustP("10.9.0.0/24")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{r}))
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)

	refuseRoutes(k, kernel.OpReplace, r.CIDR, syscall.EINVAL, -1)
	r.MTU = 1400
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{r}))
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, rt.ErrRouteFailed)

	deletes := 0
	k.Refuse(func(_ kernelfake.Op, obj any) error {
		if op, ok := obj.(kernel.RouteOp); ok && op.Kind == kernel.OpDelete && op.Route.Dst == r.CIDR {
			if deletes++; deletes == 1 {
				return syscall.EBUSY
			}
		}
		return nil
	})
	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	res, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, syscall.EBUSY, "the delete went out at once")
	assert.Equal(t, 1, deletes)
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, 1, deletes, "the failed delete waits for its retry")
	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, deletes)
	assert.Empty(t, routes(k, rt.IPv4))
}

// A route refused because its interface was down is written as soon as
// the interface is reported up, without waiting for its backoff.
func TestIfaceUpEndsTheBackoff(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	ctx := context.Background()
	idx := index(t, k, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)

	// Down and up again before the monitor said so: the write fails.
	setUp(t, k, "np-a", false)
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24"), MTU: 1400}}))
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, rt.ErrIfaceDown)
	setUp(t, k, "np-a", true)
	tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkDown)
	tbl.OnIfaceStateChanged("np-a", idx, kernel.LinkUp)
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	r, ok := route(k, rt.IPv4, mustP("10.0.1.0/24"))
	require.True(t, ok)
	assert.Equal(t, uint32(1400), r.MTU)
}
