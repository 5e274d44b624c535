package dataplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An inactive loop gives every message to its managers and runs those that
// only declare desired state, but applies no driver and calls no manager
// that writes to the kernel itself; made active, it resyncs everything and
// converges at once, without a restart.
func TestInactiveLoopWritesNothingThenConverges(t *testing.T) {
	h := newHarness(t, Options{Inactive: true})
	plain := &fakeManager{name: "plain", keepMsgs: true}
	writer := &resyncManager{fakeManager{name: "writer"}}
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	sets := &fakeDeleter{fakeDriver: fakeDriver{name: "sets", phase: PhaseIPSetsUpdate}}
	h.addManager(plain)
	h.addManager(writer)
	h.addDriver(d)
	h.addDriver(sets)
	require.False(t, h.loop.Active())
	h.start()
	h.send("m1")
	h.openGates()
	h.send("m2")

	assert.Equal(t, []any{"m1", DatastoreInSync{}, InterfacesInSync{}, "m2"}, plain.messages(), "managers get every message")
	assert.EqualValues(t, 4, writer.updates.Load())
	assert.Positive(t, plain.cdws.Load(), "managers that only declare run in standby")
	assert.Zero(t, writer.cdws.Load(), "a manager that writes to the kernel itself is not called")
	assert.Zero(t, d.applies.Load()+sets.applies.Load()+sets.deletions.Load(), "no driver is applied")
	assert.Zero(t, d.resyncs.Load()+writer.resyncs.Load())
	hl := h.loop.Health()
	assert.True(t, hl.Live)
	assert.False(t, hl.Active)
	assert.False(t, hl.Ready)
	assert.Zero(t, hl.Applies)
	assert.Zero(t, h.inSyncs.Load(), "OnInSync waits for the first apply pass")

	// Leadership gained: a resync everywhere and one pass, at once.
	h.loop.SetActive(true)
	h.settle(func() bool { return h.loop.Health().Active })
	assert.True(t, h.loop.Active())
	assert.EqualValues(t, 1, d.resyncs.Load())
	assert.EqualValues(t, 1, sets.resyncs.Load())
	assert.EqualValues(t, 1, writer.resyncs.Load())
	assert.EqualValues(t, 1, writer.cdws.Load())
	assert.EqualValues(t, 1, d.applies.Load())
	assert.EqualValues(t, 1, sets.deletions.Load())
	hl = h.loop.Health()
	assert.True(t, hl.Ready)
	assert.EqualValues(t, 1, hl.Applies)
	assert.EqualValues(t, 1, h.inSyncs.Load())

	// Leadership lost: messages still reach the managers, nothing is applied.
	h.loop.SetActive(false)
	h.settle(func() bool { return !h.loop.Health().Active })
	writerCDWs := writer.cdws.Load()
	h.send("m3")
	assert.EqualValues(t, 1, d.applies.Load())
	assert.Equal(t, writerCDWs, writer.cdws.Load())
	assert.Contains(t, plain.messages(), "m3")

	// And back: another resync, another pass.
	h.loop.SetActive(true)
	h.settle(func() bool { return h.loop.Health().Active })
	assert.EqualValues(t, 2, d.resyncs.Load())
	assert.EqualValues(t, 2, writer.resyncs.Load())
	assert.EqualValues(t, 2, d.applies.Load())
	assert.EqualValues(t, 1, h.inSyncs.Load(), "OnInSync is called once")
}

// SetActive with the state the loop already has does nothing, and so does
// a flip that is undone before the loop sees it.
func TestSetActiveNoChange(t *testing.T) {
	h := newHarness(t, Options{})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	require.True(t, h.loop.Active())
	h.start()
	h.openGates()
	require.EqualValues(t, 1, d.applies.Load())
	h.loop.SetActive(true)
	h.settle(nil)
	assert.Zero(t, d.resyncs.Load())
	assert.EqualValues(t, 1, d.applies.Load())
	assert.True(t, h.loop.Health().Active)
}

// SetActive before Run decides how Run starts.
func TestSetActiveBeforeRun(t *testing.T) {
	h := newHarness(t, Options{})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.loop.SetActive(false)
	h.start()
	h.openGates()
	assert.Zero(t, d.applies.Load())
	assert.False(t, h.loop.Health().Active)
	h.loop.SetActive(true)
	h.settle(func() bool { return h.loop.Health().Active })
	assert.EqualValues(t, 1, d.applies.Load())
}

// While inactive, periodic resyncs queue nothing and run no pass; the
// timers keep running, so resync resumes on schedule once active.
func TestInactiveSkipsPeriodicResync(t *testing.T) {
	h := newHarness(t, Options{Inactive: true, ResyncInterval: 10 * time.Second, ResyncJitter: -1})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.start()
	h.openGates()
	for range 3 {
		h.advance(10 * time.Second)
	}
	assert.Zero(t, d.resyncs.Load())
	assert.Zero(t, d.applies.Load())
	h.loop.SetActive(true)
	h.settle(func() bool { return h.loop.Health().Active })
	assert.EqualValues(t, 1, d.resyncs.Load(), "activation resyncs")
	h.advance(10 * time.Second)
	assert.EqualValues(t, 2, d.resyncs.Load())
	assert.EqualValues(t, 2, d.applies.Load())
}

// A manager that fails in a standby pass is reported and retried after its
// backoff, as in an apply pass.
func TestStandbyManagerFailureRetries(t *testing.T) {
	boom := errors.New("bad intent")
	h := newHarness(t, Options{Inactive: true, Backoff: Backoff{Initial: time.Second}})
	m := &fakeManager{name: "m"}
	m.cdwErrs = []error{boom}
	h.addManager(m)
	h.start()
	h.openGates()
	require.EqualValues(t, 1, m.cdws.Load())
	hl := h.loop.Health()
	require.ErrorIs(t, hl.LastError, boom)
	assert.Contains(t, hl.LastError.Error(), "manager m")
	assert.False(t, hl.Ready)
	h.advance(time.Second - time.Millisecond)
	assert.EqualValues(t, 1, m.cdws.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 2, m.cdws.Load())
}

// Messages sent while inactive are processed before the pass that
// activation runs, so that pass writes the managers' complete state.
func TestActivationAppliesStateBuiltWhileInactive(t *testing.T) {
	h := newHarness(t, Options{Inactive: true})
	drv := &fakeDriver{name: "d", phase: PhaseRoutes}
	var declared, applied []string
	m := &fakeManager{name: "m"}
	m.onUpdate = func(msg any) {
		if s, ok := msg.(string); ok {
			declared = append(declared, s)
		}
	}
	drv.applyFn = func(context.Context) (ApplyResult, error) {
		applied = append([]string(nil), declared...)
		return ApplyResult{}, nil
	}
	h.addManager(m)
	h.addDriver(drv)
	h.start()
	h.openGates()
	h.send("a", "b")
	assert.Empty(t, applied)
	h.loop.SetActive(true)
	h.settle(func() bool { return drv.applies.Load() == 1 })
	assert.Equal(t, []string{"a", "b"}, applied)
}
