//go:build linux

package scenarios

import (
	"context"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
)

// Helpers shared by the scenarios of several areas: Setups that hand state
// to Run, waiting in Setup, closing at a later Setup what a trial left
// open, and the arithmetic of reported figures.

// setupFunc is a Variant's Setup.
type setupFunc = func(ctx context.Context, env *harness.Env) error

// keep returns a Setup that hands what load returns to Run as env.State.
func keep[T any](load func(ctx context.Context, env *harness.Env) (T, error)) setupFunc {
	return func(ctx context.Context, env *harness.Env) error {
		v, err := load(ctx, env)
		env.State = v
		return err
	}
}

// settleTime is how long a Setup waits after loading a state, so that the
// kernel's deferred work (hash resizes, RCU frees, the previous trial's
// namespace teardown) is not billed to the measured change.
const settleTime = 250 * time.Millisecond

// settle waits settleTime, or until ctx is done.
func settle(ctx context.Context) error { return pause(ctx, settleTime) }

// pause waits d, or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closers holds what trials leave open after their Run (the harness has no
// teardown) until a later Setup of the same area closes it, unmeasured.
type closers struct {
	mu  sync.Mutex
	fns []func()
}

// add queues fn for the next run.
func (c *closers) add(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, fn)
}

// run calls what add queued, newest first (as deferred calls run).
func (c *closers) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// heapPer returns the live heap gained since before (a
// benchutil.HeapInUse), per object of n. Keep what was built alive until
// it returns.
func heapPer(before uint64, n int) float64 {
	return float64(int64(benchutil.HeapInUse())-int64(before)) / float64(n)
}

// millis returns d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// micros returns d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
