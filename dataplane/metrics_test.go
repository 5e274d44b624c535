package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsRecorder is a Metrics that keeps everything it is given. The loop
// calls it from one goroutine; the lock is for the test's reads.
type metricsRecorder struct {
	mu       sync.Mutex
	applies  []DriverApply
	managers []ManagerWork
	passes   []PassStats
	depths   []int
	resyncs  []ResyncEvent
}

func (m *metricsRecorder) DriverApplied(a DriverApply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applies = append(m.applies, a)
}

func (m *metricsRecorder) ManagerCompleted(w ManagerWork) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.managers = append(m.managers, w)
}

func (m *metricsRecorder) PassCompleted(p PassStats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passes = append(m.passes, p)
}

func (m *metricsRecorder) QueueDepth(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.depths = append(m.depths, n)
}

func (m *metricsRecorder) Resynced(r ResyncEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resyncs = append(m.resyncs, r)
}

// reset returns what was recorded and starts over.
func (m *metricsRecorder) reset() (applies []DriverApply, managers []ManagerWork, passes []PassStats, depths []int, resyncs []ResyncEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	applies, managers, passes, depths, resyncs = m.applies, m.managers, m.passes, m.depths, m.resyncs
	m.applies, m.managers, m.passes, m.depths, m.resyncs = nil, nil, nil, nil, nil
	return
}

// summary renders driver applies as "name/phase/outcome/failed" for
// order-independent comparison.
func summary(applies []DriverApply) []string {
	var s []string
	for _, a := range applies {
		s = append(s, fmt.Sprintf("%s/%s/%s/%d", a.Driver, a.Phase, a.Outcome, a.FailedObjects))
	}
	return s
}

func TestMetrics(t *testing.T) {
	rec := &metricsRecorder{}
	boom := errors.New("cannot read")
	refused := errors.New("refused")
	h := newHarness(t, Options{
		Metrics:        rec,
		Backoff:        Backoff{Initial: time.Second},
		Throttle:       Throttle{Refill: -1},
		ResyncInterval: time.Hour,
		ResyncJitter:   -1,
	})
	m := &fakeManager{name: "m"}
	writer := &resyncManager{fakeManager{name: "writer"}}
	routes := &fakeDriver{name: "routes", phase: PhaseRoutes}
	tables := &fakeDriver{name: "tables", phase: PhaseTables}
	sets := &fakeDeleter{fakeDriver: fakeDriver{name: "sets", phase: PhaseIPSetsUpdate}}
	h.addManager(m)
	h.addManager(writer)
	h.addDriver(routes)
	h.addDriver(tables)
	h.addDriver(sets)
	routes.queue(outcome{err: Partial(2, refused, refused), res: ApplyResult{RetryAfter: time.Hour}})
	tables.queue(outcome{err: boom})
	writer.cdwErrs = []error{boom}
	sets.applyFn = func(context.Context) (ApplyResult, error) {
		h.clk.Advance(5 * time.Millisecond) // durations come from the loop's clock
		return ApplyResult{}, nil
	}
	// Queued before Run: the first batch the loop takes holds both.
	require.NoError(t, h.loop.Send(context.Background(), "a"))
	require.NoError(t, h.loop.Send(context.Background(), "b"))
	h.start()
	h.openGates()

	applies, managers, passes, depths, resyncs := rec.reset()
	assert.ElementsMatch(t, []string{
		"sets/ipsets-update/succeeded/0",
		"tables/tables/failed/0",
		"routes/routes/partial/2",
		"sets/ipsets-delete/succeeded/0",
	}, summary(applies))
	for _, a := range applies {
		if a.Driver == "sets" && !a.Deletions {
			assert.Equal(t, 5*time.Millisecond, a.Duration)
		}
		assert.Equal(t, a.Phase == PhaseIPSetsDelete, a.Deletions, a.Driver)
		assert.Equal(t, a.Outcome == OutcomeSucceeded, a.Err == nil, a.Driver)
	}
	require.Len(t, managers, 2)
	assert.Equal(t, "m", managers[0].Manager)
	assert.Equal(t, OutcomeSucceeded, managers[0].Outcome)
	assert.Equal(t, "writer", managers[1].Manager)
	assert.Equal(t, OutcomeFailed, managers[1].Outcome)
	require.ErrorIs(t, managers[1].Err, boom)
	require.Len(t, passes, 1)
	assert.Equal(t, PassStats{Duration: 5 * time.Millisecond, Active: true, Outcome: OutcomeFailed}, passes[0])
	require.NotEmpty(t, depths)
	assert.Equal(t, 2, depths[0], "the backlog the loop found")
	assert.Zero(t, depths[len(depths)-1], "nothing waits after the pass")
	assert.ElementsMatch(t, []ResyncEvent{
		{Name: "tables", Reason: ResyncAfterFailure},
		{Name: "writer", Manager: true, Reason: ResyncAfterFailure},
	}, resyncs)

	// The retry after the backoff succeeds: a succeeded pass.
	h.advance(time.Second)
	applies, _, passes, _, resyncs = rec.reset()
	assert.Contains(t, summary(applies), "tables/tables/succeeded/0")
	require.Len(t, passes, 1)
	assert.Equal(t, OutcomeSucceeded, passes[0].Outcome)
	assert.Empty(t, resyncs)

	// Only objects failing: a partial pass.
	routes.queue(outcome{err: Partial(1, refused), res: ApplyResult{RetryAfter: time.Hour}})
	h.send("c")
	_, _, passes, _, _ = rec.reset()
	require.Len(t, passes, 1)
	assert.Equal(t, OutcomePartial, passes[0].Outcome)

	// Periodic resync, then activation after a standby period.
	h.advance(time.Hour)
	_, _, _, _, resyncs = rec.reset()
	assert.ElementsMatch(t, []ResyncEvent{
		{Name: "routes", Reason: ResyncPeriodic},
		{Name: "tables", Reason: ResyncPeriodic},
		{Name: "sets", Reason: ResyncPeriodic},
	}, resyncs)
	h.loop.SetActive(false)
	h.send("d")
	applies, managers, passes, _, _ = rec.reset()
	assert.Empty(t, applies)
	require.Len(t, passes, 1)
	assert.Equal(t, PassStats{Active: false, Outcome: OutcomeSucceeded}, passes[0])
	require.Len(t, managers, 1, "the writer is not called in standby")
	assert.Equal(t, "m", managers[0].Manager)
	h.loop.SetActive(true)
	h.settle(func() bool { return h.loop.Health().Active })
	_, _, passes, _, resyncs = rec.reset()
	assert.ElementsMatch(t, []ResyncEvent{
		{Name: "routes", Reason: ResyncActivated},
		{Name: "tables", Reason: ResyncActivated},
		{Name: "sets", Reason: ResyncActivated},
		{Name: "writer", Manager: true, Reason: ResyncActivated},
	}, resyncs)
	require.Len(t, passes, 1)
	assert.True(t, passes[0].Active)
}

// A skipped driver (backing off) is not measured; a panicking Metrics is
// recovered and the loop carries on.
func TestMetricsSkippedAndPanicking(t *testing.T) {
	rec := &metricsRecorder{}
	h := newHarness(t, Options{Metrics: panicky{rec}, Backoff: Backoff{Initial: time.Minute}})
	bad := &fakeDriver{name: "bad", phase: PhaseRoutes}
	good := &fakeDriver{name: "good", phase: PhaseTables}
	h.addDriver(bad)
	h.addDriver(good)
	bad.queue(outcome{err: errors.New("down")})
	h.start()
	h.openGates()
	h.send("x")
	assert.EqualValues(t, 2, good.applies.Load())
	assert.EqualValues(t, 1, bad.applies.Load())
	applies, _, passes, _, _ := rec.reset()
	assert.Equal(t, []string{"bad/routes/failed/0", "good/tables/succeeded/0", "good/tables/succeeded/0"}, sortedSummary(applies))
	assert.Len(t, passes, 2)
	assert.True(t, h.loop.Health().Live)
}

// panicky records, then panics on every call.
type panicky struct{ rec *metricsRecorder }

func (p panicky) DriverApplied(a DriverApply)    { p.rec.DriverApplied(a); panic("metrics") }
func (p panicky) ManagerCompleted(w ManagerWork) { p.rec.ManagerCompleted(w); panic("metrics") }
func (p panicky) PassCompleted(s PassStats)      { p.rec.PassCompleted(s); panic("metrics") }
func (p panicky) QueueDepth(n int)               { p.rec.QueueDepth(n); panic("metrics") }
func (p panicky) Resynced(r ResyncEvent)         { p.rec.Resynced(r); panic("metrics") }

func sortedSummary(applies []DriverApply) []string {
	s := summary(applies)
	sort.Strings(s)
	return s
}

func TestOutcomeAndReasonStrings(t *testing.T) {
	assert.Equal(t, "succeeded", OutcomeSucceeded.String())
	assert.Equal(t, "partial", OutcomePartial.String())
	assert.Equal(t, "failed", OutcomeFailed.String())
	assert.Equal(t, "unknown", Outcome(0).String())
	assert.Equal(t, "periodic", ResyncPeriodic.String())
	assert.Equal(t, "failure", ResyncAfterFailure.String())
	assert.Equal(t, "activated", ResyncActivated.String())
	assert.Equal(t, "unknown", ResyncReason(0).String())
	var _ Metrics = NopMetrics{}
	NopMetrics{}.DriverApplied(DriverApply{})
	NopMetrics{}.ManagerCompleted(ManagerWork{})
	NopMetrics{}.PassCompleted(PassStats{})
	NopMetrics{}.QueueDepth(0)
	NopMetrics{}.Resynced(ResyncEvent{})
}
