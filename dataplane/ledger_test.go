package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
)

var errTestRefused = errors.New("toy: refused")

func refusal(name string, errno error) *ObjectError {
	return &ObjectError{Driver: "toy", Op: "add", Kind: "route", Name: name, Reason: errTestRefused, Err: errno}
}

// The ledger backs each object off on its own, on the injected clock:
// Initial, then doubling up to Max; an object is waiting until its retry
// is due, counted as failed in the Apply that tried it and as waiting in
// the others, and forgotten on success or withdrawal.
func TestLedger(t *testing.T) {
	clk := clock.NewFake(epoch)
	l := NewLedger[string](Backoff{Initial: time.Second, Max: 4 * time.Second}, clk)
	require.NoError(t, l.Err())
	require.Zero(t, l.RetryAfter())

	now := l.Begin()
	require.Equal(t, epoch, now)
	assert.False(t, l.Waiting("a"), "an object that never failed is not waiting")
	eio := errors.New("input/output error")
	a := l.Fail("a", refusal("a", eio))
	assert.Equal(t, 1, a.Attempts)
	assert.Equal(t, epoch.Add(time.Second), a.RetryAt)
	l.Fail("b", refusal("b", nil))
	assert.True(t, l.Waiting("a"))
	assert.Equal(t, time.Second, l.RetryAfter())
	assert.False(t, l.Due(clk.Now()))
	assert.True(t, l.Due(epoch.Add(time.Second)))

	err := l.Err()
	var pe *PartialError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Failed)
	assert.Zero(t, pe.Waiting)
	assert.ErrorIs(t, err, ErrPartial)
	assert.ErrorIs(t, err, errTestRefused)
	assert.ErrorIs(t, err, eio)
	assert.Equal(t, []*ObjectError{a, pe.Objects()[1]}, pe.Objects(), "in the order they first failed")
	assert.Equal(t, "b", pe.Objects()[1].Name)

	// Half a second later: both wait, neither is tried, both count as waiting.
	clk.Advance(500 * time.Millisecond)
	l.Begin()
	assert.True(t, l.Waiting("a"))
	assert.True(t, l.Waiting("b"))
	require.ErrorAs(t, l.Err(), &pe)
	assert.Equal(t, 0, pe.Failed)
	assert.Equal(t, 2, pe.Waiting)
	assert.Equal(t, 500*time.Millisecond, l.RetryAfter())

	// Due: a fails again (its delay doubles), b is written.
	clk.Advance(500 * time.Millisecond)
	l.Begin()
	require.False(t, l.Waiting("a"))
	require.False(t, l.Waiting("b"))
	a2 := l.Fail("a", refusal("a", eio))
	assert.Equal(t, 2, a2.Attempts)
	assert.Equal(t, epoch.Add(3*time.Second), a2.RetryAt)
	l.Forget("b")
	got, ok := l.Get("a")
	assert.True(t, ok)
	assert.Same(t, a2, got)
	_, ok = l.Get("b")
	assert.False(t, ok)
	assert.Equal(t, 1, l.Len())

	// The delay is capped at Max.
	for range 3 {
		clk.Advance(time.Hour)
		l.Begin()
		a2 = l.Fail("a", refusal("a", eio))
	}
	assert.Equal(t, 5, a2.Attempts)
	assert.Equal(t, 4*time.Second, a2.RetryAt.Sub(clk.Now()))

	// A withdrawal forgets the object.
	l.Retain(func(k string) bool { return k != "a" })
	assert.Zero(t, l.Len())
	require.NoError(t, l.Err())
	assert.Zero(t, l.RetryAfter())
}

// An object due when the Apply began, but not tried (something else holds
// it back), asks for no pass; nor does an object held without a backoff,
// which is never waiting.
func TestLedgerOverdueAndHeld(t *testing.T) {
	clk := clock.NewFake(epoch)
	l := NewLedger[int](Backoff{}, clk)
	l.Begin()
	l.Fail(1, &ObjectError{Name: "1", Reason: errTestRefused})
	assert.Equal(t, DefaultBackoffInitial, l.RetryAfter())
	clk.Advance(time.Hour)
	l.Begin()
	assert.Zero(t, l.RetryAfter())
	assert.Equal(t, DefaultBackoffInitial, l.Errors()[0].RetryAt.Sub(epoch))

	l.Forget(1)
	h := l.Hold(2, &ObjectError{Name: "2", Reason: errTestRefused})
	assert.Equal(t, 1, h.Attempts)
	assert.True(t, h.RetryAt.IsZero())
	assert.False(t, l.Waiting(2))
	assert.True(t, l.Held(2))
	assert.False(t, l.Held(1), "forgotten")
	assert.Zero(t, l.RetryAfter())
	var pe *PartialError
	require.ErrorAs(t, l.Err(), &pe)
	assert.Equal(t, 1, pe.Failed)
	l.Begin()
	assert.Equal(t, 2, l.Hold(2, &ObjectError{Name: "2", Reason: errTestRefused}).Attempts)
	// Held, then refused: it backs off from its first refusal.
	f := l.Fail(2, &ObjectError{Name: "2", Reason: errTestRefused})
	assert.Equal(t, 3, f.Attempts)
	assert.True(t, l.Waiting(2))
	assert.False(t, l.Held(2), "a Fail after a Hold backs off")
	assert.Equal(t, 4*DefaultBackoffInitial, l.RetryAfter())
}

func TestObjectErrorText(t *testing.T) {
	errno := errors.New("toy: no such device")
	for _, c := range []struct {
		e    ObjectError
		want string
	}{
		{ObjectError{Driver: "toy", Op: "replace", Kind: "route", Name: "10.0.0.0/24 dev eth0", Reason: errTestRefused, Err: errno},
			"toy: replace route 10.0.0.0/24 dev eth0: refused: no such device"},
		{ObjectError{Driver: "toy", Kind: "chain", Name: "toy-fw", Reason: errTestRefused, Detail: "line 3: bad jump", Err: errno},
			"toy: chain toy-fw: refused: line 3: bad jump"},
		{ObjectError{Name: "x", Reason: errTestRefused}, "x: toy: refused"},
	} {
		assert.Equal(t, c.want, c.e.Error())
		assert.ErrorIs(t, &c.e, errTestRefused)
	}
	e := &ObjectError{Driver: "toy", Name: "x", Reason: errTestRefused, Err: errno}
	assert.ErrorIs(t, e, errno)
	wrapped := &PartialError{Driver: "toy", Failed: 1, Errs: []error{fmt.Errorf("ctx: %w", e), errno, e}}
	assert.Equal(t, "toy: 1 object(s) failed; ctx: toy: x: refused: no such device; no such device; x: refused: no such device", wrapped.Error(),
		"the prefix once, at the front")
	assert.Equal(t, []*ObjectError{e, e}, wrapped.Objects())
	var oe *ObjectError
	require.ErrorAs(t, error(wrapped), &oe)
	assert.Same(t, e, oe)
}

// statsDriver is a fakeDriver that reports DriverStats.
type statsDriver struct {
	fakeDriver
	writes atomic.Uint64
}

func (d *statsDriver) Apply(ctx context.Context) (ApplyResult, error) {
	d.writes.Add(1)
	return d.fakeDriver.Apply(ctx)
}

func (d *statsDriver) Stats() DriverStats {
	return DriverStats{Desired: 3, InKernel: 2, Failing: 1, Writes: d.writes.Load()}
}

// The loop reports a StatsReporter's counts after each Apply, in Health
// and to Metrics.
func TestLoopReportsDriverStats(t *testing.T) {
	var seen atomic.Pointer[DriverStats]
	h := newHarness(t, Options{Throttle: Throttle{Refill: -1}, Metrics: statsMetrics{&seen}})
	d := &statsDriver{fakeDriver: fakeDriver{name: "routes", phase: PhaseRoutes}}
	plain := &fakeDriver{name: "plain", phase: PhaseTables}
	h.addDriver(d)
	h.addDriver(plain)
	h.start()
	h.openGates()
	h.send("x")
	hl := h.loop.Health()
	assert.Equal(t, map[string]DriverStats{"routes": {Desired: 3, InKernel: 2, Failing: 1, Writes: 2}}, hl.Drivers)
	require.NotNil(t, seen.Load())
	assert.Equal(t, DriverStats{Desired: 3, InKernel: 2, Failing: 1, Writes: 2}, *seen.Load())
}

type statsMetrics struct{ seen *atomic.Pointer[DriverStats] }

func (statsMetrics) ManagerCompleted(ManagerWork) {}
func (statsMetrics) PassCompleted(PassStats)      {}
func (statsMetrics) QueueDepth(int)               {}
func (statsMetrics) Resynced(ResyncEvent)         {}
func (m statsMetrics) DriverApplied(a DriverApply) {
	if a.Stats != nil {
		m.seen.Store(a.Stats)
	} else if a.Driver == "routes" {
		panic("no stats for a StatsReporter")
	}
}

func ExampleLedger() {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLedger[string](Backoff{Initial: 100 * time.Millisecond}, clk)
	refused := errors.New("routes: refused")

	// One Apply: a route is refused, the others are written.
	l.Begin()
	if !l.Waiting("10.0.0.0/24") {
		l.Fail("10.0.0.0/24", &ObjectError{Driver: "routes", Op: "add", Kind: "route", Name: "10.0.0.0/24", Reason: refused})
	}
	fmt.Println(l.Err(), l.RetryAfter())

	// The next Apply, 50ms later, leaves it alone; the one after retries it.
	clk.Advance(50 * time.Millisecond)
	l.Begin()
	fmt.Println(l.Waiting("10.0.0.0/24"), l.RetryAfter())
	clk.Advance(50 * time.Millisecond)
	l.Begin()
	if !l.Waiting("10.0.0.0/24") {
		l.Forget("10.0.0.0/24") // written this time
	}
	fmt.Println(l.Err())
	// Output:
	// routes: 1 object(s) failed; add route 10.0.0.0/24: refused 100ms
	// true 50ms
	// <nil>
}
