package dataplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewValidatesOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"negative queue size", Options{QueueSize: -1}},
		{"negative max batch", Options{MaxBatch: -5}},
		{"negative burst", Options{Throttle: Throttle{Burst: -1}}},
		{"negative backoff initial", Options{Backoff: Backoff{Initial: -time.Second}}},
		{"negative backoff max", Options{Backoff: Backoff{Max: -time.Second}}},
		{"backoff max below initial", Options{Backoff: Backoff{Initial: 2 * time.Second, Max: time.Second}}},
		{"jitter of one", Options{ResyncJitter: 1}},
		{"jitter above one", Options{ResyncJitter: 3.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Nil(t, l)
		})
	}
}

func TestNewDefaults(t *testing.T) {
	l, err := New(Options{})
	require.NoError(t, err)
	o := l.opts
	assert.Equal(t, DefaultQueueSize, o.QueueSize)
	assert.Equal(t, DefaultMaxBatch, o.MaxBatch)
	assert.Equal(t, DefaultCoalesce, o.Coalesce)
	assert.Equal(t, Throttle{Burst: DefaultThrottleBurst, Refill: DefaultThrottleRefill}, o.Throttle)
	assert.Equal(t, Backoff{Initial: DefaultBackoffInitial, Max: DefaultBackoffMax}, o.Backoff)
	assert.Equal(t, DefaultResyncInterval, o.ResyncInterval)
	assert.InDelta(t, DefaultResyncJitter, o.ResyncJitter, 1e-9)
	assert.Equal(t, DefaultHealthInterval, o.HealthInterval)
	assert.NotNil(t, o.Logger)
	assert.NotNil(t, o.Clock)
	assert.NotNil(t, o.Rand)
	assert.Equal(t, Health{}, l.Health(), "nothing reported before Run")

	// A large Initial with no Max lifts the default cap to Initial.
	l, err = New(Options{Backoff: Backoff{Initial: time.Minute}})
	require.NoError(t, err)
	assert.Equal(t, time.Minute, l.opts.Backoff.Max)
	// A negative jitter means none.
	l, err = New(Options{ResyncJitter: -1})
	require.NoError(t, err)
	assert.Zero(t, l.opts.ResyncJitter)
}

// panicPhase is a driver whose Phase panics.
type panicPhase struct{ fakeDriver }

func (*panicPhase) Phase() Phase { panic("no phase") }

// valueDriver is a driver with a value receiver (not a pointer).
type valueDriver struct{ s []int }

func (valueDriver) Apply(context.Context) (ApplyResult, error) { return ApplyResult{}, nil }
func (valueDriver) QueueResync()                               {}
func (valueDriver) Phase() Phase                               { return PhaseRoutes }

func TestRegistrationErrors(t *testing.T) {
	l, err := New(Options{})
	require.NoError(t, err)
	m := &fakeManager{name: "m"}
	d := &fakeDriver{name: "d", phase: PhaseTables}
	require.NoError(t, l.AddManager(m))
	require.NoError(t, l.AddDriver(d))

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"nil manager", func() error { return l.AddManager(nil) }, ErrNilManager},
		{"nil driver", func() error { return l.AddDriver(nil) }, ErrNilDriver},
		{"zero phase", func() error { return l.AddDriver(&fakeDriver{name: "z"}) }, ErrInvalidPhase},
		{"phase past the end", func() error { return l.AddDriver(&fakeDriver{name: "p", phase: PhaseIPSetsDelete + 1}) }, ErrInvalidPhase},
		{"negative phase", func() error { return l.AddDriver(&fakeDriver{name: "n", phase: -1}) }, ErrInvalidPhase},
		{"panicking Phase", func() error { return l.AddDriver(&panicPhase{}) }, ErrPanic},
		{"duplicate manager", func() error { return l.AddManager(m) }, ErrDuplicate},
		{"duplicate driver", func() error { return l.AddDriver(d) }, ErrDuplicate},
		{"empty name", func() error { return l.AddDriver(&fakeDriver{phase: PhaseTables}, WithName("")) }, ErrInvalidOptions},
		{"nil option", func() error { return l.AddDriver(&fakeDriver{phase: PhaseTables}, nil) }, ErrInvalidOptions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.call(), tc.want)
		})
	}
	// Value drivers cannot be compared safely; both registrations are kept.
	require.NoError(t, l.AddDriver(valueDriver{s: []int{1}}))
	require.NoError(t, l.AddDriver(valueDriver{s: []int{1}}))
	assert.Len(t, l.drivers, 3)
	assert.Len(t, l.managers, 1)
}

func TestRunOnceAndNoRegistrationAfterRun(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	assert.ErrorIs(t, h.loop.Run(context.Background()), ErrAlreadyStarted)
	assert.ErrorIs(t, h.loop.AddManager(&fakeManager{}), ErrAlreadyStarted)
	assert.ErrorIs(t, h.loop.AddDriver(&fakeDriver{phase: PhaseRoutes}), ErrAlreadyStarted)
	h.stop()
	assert.ErrorIs(t, h.loop.Run(context.Background()), ErrAlreadyStarted, "a stopped loop does not run again")
}

func TestNames(t *testing.T) {
	l, err := New(Options{})
	require.NoError(t, err)
	require.NoError(t, l.AddDriver(&fakeDriver{name: "own", phase: PhaseTables}))
	require.NoError(t, l.AddDriver(&fakeDriver{name: "own2", phase: PhaseTables}, WithName("given")))
	require.NoError(t, l.AddDriver(&fakeDriver{phase: PhaseTables})) // empty Name()
	require.NoError(t, l.AddDriver(valueDriver{}))
	var got []string
	for _, e := range l.drivers {
		got = append(got, e.name)
	}
	assert.Equal(t, []string{"own", "given", "*dataplane.fakeDriver", "dataplane.valueDriver"}, got)
}

func TestPhaseString(t *testing.T) {
	tests := []struct {
		p     Phase
		want  string
		valid bool
	}{
		{PhaseIPSetsUpdate, "ipsets-update", true},
		{PhaseTunnelL2, "tunnel-l2", true},
		{PhaseTables, "tables", true},
		{PhaseRoutes, "routes", true},
		{PhaseIPSetsDelete, "ipsets-delete", true},
		{0, "Phase(0)", false},
		{42, "Phase(42)", false},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.String())
			assert.Equal(t, tc.valid, tc.p.Valid())
		})
	}
}

// rendezvous makes the drivers tables and routes wait for each other, so the
// pass only completes quickly if they run at the same time.
func rendezvous(rec *recorder, a, b *fakeDriver) {
	started := map[*fakeDriver]chan struct{}{a: make(chan struct{}), b: make(chan struct{})}
	var once sync.Map
	wait := func(self, other *fakeDriver) func(context.Context) (ApplyResult, error) {
		return func(ctx context.Context) (ApplyResult, error) {
			if _, loaded := once.LoadOrStore(self, true); !loaded {
				close(started[self])
			}
			select {
			case <-started[other]:
				rec.add("%s saw %s", self.name, other.name)
			case <-time.After(5 * time.Second):
				rec.add("%s alone", self.name)
			}
			return ApplyResult{}, nil
		}
	}
	a.applyFn = wait(a, b)
	b.applyFn = wait(b, a)
}

func TestPhaseOrder(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, Options{})
	m1 := &fakeManager{name: "m1", rec: rec}
	m2 := &fakeManager{name: "m2", rec: rec}
	ipsets := &fakeDeleter{fakeDriver: fakeDriver{name: "ipsets", phase: PhaseIPSetsUpdate, rec: rec}}
	l2 := &fakeDriver{name: "l2", phase: PhaseTunnelL2, rec: rec}
	tables := &fakeDriver{name: "tables", phase: PhaseTables, rec: rec}
	routes := &fakeDriver{name: "routes", phase: PhaseRoutes, rec: rec}
	late := &fakeDeleter{fakeDriver: fakeDriver{name: "late", phase: PhaseIPSetsDelete, rec: rec}}
	rendezvous(rec, tables, routes)
	// Register in an order unrelated to the phases.
	h.addDriver(late)
	h.addDriver(routes)
	h.addManager(m1)
	h.addDriver(tables)
	h.addDriver(l2)
	h.addDriver(ipsets)
	h.addManager(m2)
	h.start()
	h.openGates()
	require.EqualValues(t, 1, h.applies())

	pos := func(ev string) int {
		i := rec.index(ev)
		require.GreaterOrEqual(t, i, 0, "missing event %q in %v", ev, rec.list())
		return i
	}
	before := func(a, b string) {
		assert.Less(t, pos(a), pos(b), "%q should come before %q in %v", a, b, rec.list())
	}
	before("cdw m1", "cdw m2")
	before("cdw m2", "start ipsets")
	before("end ipsets", "start l2")
	before("end l2", "start tables")
	before("end l2", "start routes")
	before("end tables", "start ipsets.del")
	before("end routes", "start ipsets.del")
	before("end tables", "start late")
	before("end routes", "start late")
	before("end late", "start late.del")
	// Tables and routes overlapped.
	pos("tables saw routes")
	pos("routes saw tables")
	assert.Equal(t, -1, rec.index("tables alone"))
	assert.EqualValues(t, 1, ipsets.applies.Load())
	assert.EqualValues(t, 1, ipsets.deletions.Load())
	assert.EqualValues(t, 1, late.deletions.Load())
}

func TestGating(t *testing.T) {
	tests := []struct {
		name    string
		markers []string // sent in this order, each followed by a settle
	}{
		{"none", nil},
		{"datastore only", []string{"ds"}},
		{"interfaces only", []string{"if"}},
		{"datastore then interfaces", []string{"ds", "if"}},
		{"interfaces then datastore", []string{"if", "ds"}},
		{"repeated calls", []string{"ds", "ds", "if", "if"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			m := &fakeManager{name: "m", keepMsgs: true}
			d := &fakeDriver{name: "d", phase: PhaseRoutes}
			h.addManager(m)
			h.addDriver(d)
			h.start()
			h.send("a", "b")
			both := map[string]bool{}
			passes := 0 // expected
			for _, mk := range tc.markers {
				if mk == "ds" {
					h.loop.DatastoreInSync()
				} else {
					h.loop.InterfacesInSync()
				}
				wasOpen := both["ds"] && both["if"]
				both[mk] = true
				h.settle(nil)
				if !wasOpen && both["ds"] && both["if"] {
					passes++ // the gate opens
				}
				h.send("after-" + mk)
				h.advance(time.Hour) // time alone opens nothing
				if both["ds"] && both["if"] {
					passes++ // a message after the gate opened
				} else {
					assert.Zero(t, m.cdws.Load(), "no CompleteDeferredWork before both markers")
					assert.Zero(t, d.applies.Load(), "no Apply before both markers")
					assert.Zero(t, h.inSyncs.Load())
				}
			}
			hl := h.loop.Health()
			assert.Equal(t, both["ds"], hl.DatastoreInSync)
			assert.Equal(t, both["if"], hl.InterfacesInSync)
			if both["ds"] && both["if"] {
				assert.EqualValues(t, passes, m.cdws.Load())
				assert.EqualValues(t, passes, d.applies.Load())
				assert.EqualValues(t, 1, h.inSyncs.Load())
				assert.True(t, hl.Ready)
			} else {
				assert.False(t, hl.Ready)
			}
			// Every message, markers included, reached the manager in order,
			// and each marker only once.
			want := []any{"a", "b"}
			seen := map[string]bool{}
			for _, mk := range tc.markers {
				if !seen[mk] {
					if mk == "ds" {
						want = append(want, DatastoreInSync{})
					} else {
						want = append(want, InterfacesInSync{})
					}
				}
				seen[mk] = true
				want = append(want, "after-"+mk)
			}
			assert.Equal(t, want, m.messages())
		})
	}
}

func TestMarkersKeepTheirPlaceAndNeverBlock(t *testing.T) {
	h := newHarness(t, Options{QueueSize: 3})
	m := &fakeManager{name: "m", keepMsgs: true}
	h.addManager(m)
	for _, s := range []string{"1", "2", "3"} {
		require.NoError(t, h.loop.TrySend(s))
	}
	require.ErrorIs(t, h.loop.TrySend("4"), ErrQueueFull)
	h.loop.InterfacesInSync() // the queue is full, yet these return at once
	h.loop.DatastoreInSync()
	h.start()
	h.settle(func() bool { return m.updates.Load() == 5 })
	assert.Equal(t, []any{"1", "2", "3", InterfacesInSync{}, DatastoreInSync{}}, m.messages())
	// Sending a marker as a message works too.
	require.NoError(t, h.loop.Send(context.Background(), DatastoreInSync{}))
	h.settle(func() bool { return m.updates.Load() == 6 })
	assert.True(t, h.loop.Health().DatastoreInSync)
}

func TestCoalescing(t *testing.T) {
	tests := []struct {
		name     string
		maxBatch int
		coalesce time.Duration
	}{
		{"one batch", 0, 0},
		{"many small batches", 7, 0},
		{"coalesce off, one batch", 2000, -1},
		{"coalesce window", 100, 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{QueueSize: 1000, MaxBatch: tc.maxBatch, Coalesce: tc.coalesce})
			m := &fakeManager{name: "m"}
			d := &fakeDriver{name: "d", phase: PhaseTables}
			h.addManager(m)
			h.addDriver(d)
			for i := range 1000 {
				require.NoError(t, h.loop.TrySend(i))
			}
			h.loop.DatastoreInSync()
			h.loop.InterfacesInSync()
			h.start()
			h.settle(func() bool { return m.updates.Load() == 1002 })
			if tc.coalesce > 0 {
				assert.Zero(t, d.applies.Load(), "waits for the window")
				h.advance(tc.coalesce)
			}
			assert.EqualValues(t, 1, d.applies.Load())
			assert.EqualValues(t, 1, m.cdws.Load())
			assert.EqualValues(t, 1, h.applies())
		})
	}
}

func TestCoalesceWindow(t *testing.T) {
	const window = 50 * time.Millisecond
	h := newHarness(t, Options{Coalesce: window})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.start()
	h.openGates()
	h.advance(window)
	require.EqualValues(t, 1, d.applies.Load())

	h.send("x")
	h.advance(window / 2)
	h.send("y") // does not restart the window: latency stays bounded
	h.advance(window/2 - time.Millisecond)
	assert.EqualValues(t, 1, d.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 2, d.applies.Load())
	h.advance(time.Hour)
	assert.EqualValues(t, 2, d.applies.Load(), "nothing dirty, nothing applied")
}

// TestBurst10kAtMostThreeApplies checks the coalescing promise with the
// default options: a burst of 10,000 updates into a running, in-sync loop
// costs at most three passes.
func TestBurst10kAtMostThreeApplies(t *testing.T) {
	h := newHarness(t, Options{Coalesce: DefaultCoalesce})
	m := &fakeManager{name: "m"}
	d := &fakeDriver{name: "d", phase: PhaseTables}
	h.addManager(m)
	h.addDriver(d)
	h.start()
	h.openGates()
	h.advance(time.Second) // first pass, and a full throttle bucket
	require.EqualValues(t, 1, d.applies.Load())
	base := m.updates.Load()

	const burst = 10000
	sent := make(chan error, 1)
	go func() {
		for i := range burst {
			if err := h.loop.Send(context.Background(), i); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	h.settle(func() bool { return m.updates.Load() == base+burst })
	require.NoError(t, <-sent)
	h.advance(DefaultCoalesce)
	h.advance(time.Second)
	applies := d.applies.Load() - 1
	assert.GreaterOrEqual(t, applies, int64(1))
	assert.LessOrEqual(t, applies, int64(3))
	assert.Equal(t, base+burst, m.updates.Load())
}

func TestThrottle(t *testing.T) {
	h := newHarness(t, Options{Throttle: Throttle{Burst: 3, Refill: time.Second}})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.start()
	h.openGates() // pass 1: two tokens left
	h.send("a")   // pass 2
	h.send("b")   // pass 3: bucket empty
	require.EqualValues(t, 3, d.applies.Load())
	h.send("c")
	h.send("d")
	assert.EqualValues(t, 3, d.applies.Load(), "throttled")
	h.advance(time.Second - time.Millisecond)
	assert.EqualValues(t, 3, d.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 4, d.applies.Load(), "one token, one pass covering c and d")
	h.send("e")
	h.advance(999 * time.Millisecond)
	assert.EqualValues(t, 4, d.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 5, d.applies.Load())
	// After a quiet spell the bucket is full again: a burst of three.
	h.advance(time.Hour)
	for i := range 4 {
		h.send(i)
	}
	assert.EqualValues(t, 8, d.applies.Load())
}

func TestThrottleOff(t *testing.T) {
	h := newHarness(t, Options{Throttle: Throttle{Burst: 1, Refill: -1}})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.start()
	h.openGates()
	for i := range 20 {
		h.send(i)
	}
	assert.EqualValues(t, 21, d.applies.Load())
}

func TestRetryBackoff(t *testing.T) {
	boom := errors.New("boom")
	h := newHarness(t, Options{
		Backoff:  Backoff{Initial: time.Second, Max: 4 * time.Second},
		Throttle: Throttle{Refill: -1},
	})
	rec := &recorder{}
	bad := &fakeDriver{name: "bad", phase: PhaseIPSetsUpdate, rec: rec}
	same := &fakeDriver{name: "same", phase: PhaseIPSetsUpdate, rec: rec}
	later := &fakeDriver{name: "later", phase: PhaseTables, rec: rec}
	h.addDriver(bad)
	h.addDriver(same)
	h.addDriver(later)
	for range 5 {
		bad.queue(outcome{err: boom})
	}
	h.start()
	h.openGates()
	require.EqualValues(t, 1, bad.applies.Load())

	// The other drivers, in the same and later phases, still ran.
	assert.EqualValues(t, 1, same.applies.Load())
	assert.EqualValues(t, 1, later.applies.Load())
	hl := h.loop.Health()
	require.ErrorIs(t, hl.LastError, boom)
	assert.Contains(t, hl.LastError.Error(), "bad")
	assert.Equal(t, 1, hl.ConsecutiveFailures)
	assert.Equal(t, epoch, hl.LastErrorAt)
	assert.False(t, hl.Ready)
	assert.Zero(t, h.inSyncs.Load())
	assert.EqualValues(t, 1, bad.resyncs.Load(), "the failed driver is resynced")
	assert.Zero(t, same.resyncs.Load(), "healthy drivers are not")
	assert.Less(t, rec.index("end bad"), rec.index("resync bad"))

	// Waits double, capped at Max. New messages are served at once by
	// the healthy drivers; the failed one waits out its backoff.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		sameBefore, failsBefore := same.applies.Load(), h.loop.Health().ConsecutiveFailures
		h.send(fmt.Sprint("msg", i))
		assert.Equal(t, sameBefore+1, same.applies.Load(), "message %d waited for the failed driver", i)
		assert.Equal(t, []string{"bad"}, h.loop.Health().FailingDrivers)
		h.advance(wait - time.Millisecond)
		require.EqualValues(t, i+1, bad.applies.Load(), "retry %d too early", i)
		h.advance(time.Millisecond)
		require.EqualValues(t, i+2, bad.applies.Load(), "retry %d missing", i)
		assert.EqualValues(t, i+2, bad.resyncs.Load())
		assert.Equal(t, failsBefore+2, h.loop.Health().ConsecutiveFailures, "the skipping pass and the retry")
	}
	// The fifth failure waits 4s; then the queue is empty: success.
	h.advance(4 * time.Second)
	require.EqualValues(t, 6, bad.applies.Load())
	hl = h.loop.Health()
	assert.Zero(t, hl.ConsecutiveFailures)
	assert.True(t, hl.Ready)
	assert.Equal(t, h.clk.Now(), hl.LastApply)
	assert.ErrorIs(t, hl.LastError, boom, "the last error is kept after recovery")
	assert.EqualValues(t, 1, h.inSyncs.Load())
	assert.EqualValues(t, 5, bad.resyncs.Load(), "no resync after a success")

	// A success reset the backoff: the next failure waits Initial again.
	bad.queue(outcome{err: boom})
	h.send("again")
	require.EqualValues(t, 7, bad.applies.Load())
	h.advance(time.Second - time.Millisecond)
	assert.EqualValues(t, 7, bad.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 8, bad.applies.Load())
	assert.EqualValues(t, 1, h.inSyncs.Load(), "OnInSync is called once")
}

func TestManagerFailure(t *testing.T) {
	boom := errors.New("cannot")
	h := newHarness(t, Options{Backoff: Backoff{Initial: time.Second}})
	plain := &fakeManager{name: "plain"}
	rs := &resyncManager{fakeManager{name: "rs"}}
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addManager(plain)
	h.addManager(rs)
	h.addDriver(d)
	plain.cdwErrs = []error{boom}
	rs.cdwErrs = []error{boom}
	h.start()
	h.openGates()
	hl := h.loop.Health()
	require.ErrorIs(t, hl.LastError, boom)
	assert.Contains(t, hl.LastError.Error(), "manager plain")
	assert.Contains(t, hl.LastError.Error(), "manager rs")
	assert.EqualValues(t, 1, d.applies.Load(), "drivers still run when a manager fails")
	assert.Zero(t, d.resyncs.Load())
	assert.EqualValues(t, 1, rs.resyncs.Load(), "a failed Resyncer manager is resynced")
	h.advance(time.Second)
	assert.EqualValues(t, 2, plain.cdws.Load())
	assert.Zero(t, h.loop.Health().ConsecutiveFailures)
	assert.EqualValues(t, 1, h.inSyncs.Load())
}

func TestRetryAfter(t *testing.T) {
	h := newHarness(t, Options{Throttle: Throttle{Refill: -1}})
	a := &fakeDriver{name: "a", phase: PhaseTables}
	b := &fakeDeleter{fakeDriver: fakeDriver{name: "b", phase: PhaseIPSetsUpdate}}
	h.addDriver(a)
	h.addDriver(b)
	a.queue(outcome{res: ApplyResult{RetryAfter: 5 * time.Second}})
	b.delOut = []outcome{{res: ApplyResult{RetryAfter: 3 * time.Second}}}
	h.start()
	h.openGates()
	require.EqualValues(t, 1, a.applies.Load())
	h.advance(3*time.Second - time.Millisecond)
	assert.EqualValues(t, 1, a.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 2, a.applies.Load(), "the shortest request wins")
	assert.EqualValues(t, 2, b.deletions.Load())
	h.advance(time.Hour)
	assert.EqualValues(t, 2, a.applies.Load(), "a pass without requests arms nothing")

	// A later pass replaces the pending request.
	a.queue(outcome{res: ApplyResult{RetryAfter: 10 * time.Second}}, outcome{res: ApplyResult{RetryAfter: -time.Second}})
	h.send("x")
	require.EqualValues(t, 3, a.applies.Load())
	h.send("y")
	require.EqualValues(t, 4, a.applies.Load())
	h.advance(time.Hour)
	assert.EqualValues(t, 4, a.applies.Load(), "negative RetryAfter is no request")
}

func TestPeriodicResync(t *testing.T) {
	h := newHarness(t, Options{ResyncInterval: 90 * time.Second, ResyncJitter: -1})
	def := &fakeDriver{name: "def", phase: PhaseRoutes}
	never := &fakeDriver{name: "never", phase: PhaseRoutes}
	fast := &fakeDriver{name: "fast", phase: PhaseTables}
	h.addDriver(def)
	h.addDriver(never, WithResyncInterval(-1))
	h.addDriver(fast, WithResyncInterval(10*time.Second))
	h.start()
	h.openGates()
	require.EqualValues(t, 1, def.applies.Load())
	for i := 1; i <= 9; i++ {
		h.advance(10 * time.Second)
		assert.EqualValues(t, i, fast.resyncs.Load())
		assert.EqualValues(t, i+1, def.applies.Load(), "each resync runs a pass")
	}
	// 90s: both fast and def resync, in one pass.
	assert.EqualValues(t, 1, def.resyncs.Load())
	assert.Zero(t, never.resyncs.Load())
	assert.EqualValues(t, 10, def.applies.Load())
	for range 40 { // the fake clock fires a timer once per Advance
		h.advance(90 * time.Second)
	}
	assert.EqualValues(t, 41, def.resyncs.Load())
	assert.Zero(t, never.resyncs.Load())
}

func TestPeriodicResyncJitter(t *testing.T) {
	h := newHarness(t, Options{
		ResyncInterval: 100 * time.Second,
		ResyncJitter:   0.1,
		Rand:           rand.New(rand.NewPCG(1, 2)),
	})
	ds := make([]*fakeDriver, 8)
	for i := range ds {
		ds[i] = &fakeDriver{name: fmt.Sprint("d", i), phase: PhaseTables}
		h.addDriver(ds[i])
	}
	h.start()
	first := map[int]time.Duration{}
	for step := time.Duration(1); step <= 300; step++ {
		h.advance(time.Second)
		for i, d := range ds {
			if _, ok := first[i]; !ok && d.resyncs.Load() > 0 {
				first[i] = step * time.Second
			}
		}
	}
	require.Len(t, first, len(ds))
	distinct := map[time.Duration]bool{}
	for i, at := range first {
		assert.GreaterOrEqual(t, at, 90*time.Second, "driver %d", i)
		assert.LessOrEqual(t, at, 111*time.Second, "driver %d", i) // 110s, rounded up to the step
		distinct[at] = true
	}
	assert.Greater(t, len(distinct), 1, "jitter spreads the drivers")
	for i, d := range ds {
		n := d.resyncs.Load()
		assert.True(t, n >= 2 && n <= 4, "driver %d resynced %d times in 300s", i, n)
	}
}

func TestPanicsBecomeErrors(t *testing.T) {
	errVal := errors.New("value error")
	tests := []struct {
		name  string
		setup func(m *fakeManager, d *fakeDeleter)
		// whether the failure is in a pass (and so retried)
		passFails bool
		resynced  bool
	}{
		{"manager OnUpdate", func(m *fakeManager, d *fakeDeleter) {
			m.onUpdate = func(msg any) {
				if msg == "bad" {
					panic("on update")
				}
			}
		}, false, false},
		{"manager CompleteDeferredWork", func(m *fakeManager, d *fakeDeleter) {
			once := false
			m.cdwFn = func() error {
				if !once {
					once = true
					panic(errVal)
				}
				return nil
			}
		}, true, false},
		{"driver Apply", func(m *fakeManager, d *fakeDeleter) {
			once := false
			d.applyFn = func(context.Context) (ApplyResult, error) {
				if !once {
					once = true
					idx := func() int { return 3 }()
					_ = []int{1}[idx] // a runtime panic
				}
				return ApplyResult{}, nil
			}
		}, true, true},
		{"driver nil panic", func(m *fakeManager, d *fakeDeleter) {
			once := false
			d.applyFn = func(context.Context) (ApplyResult, error) {
				if !once {
					once = true
					panic(nil)
				}
				return ApplyResult{}, nil
			}
		}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{Backoff: Backoff{Initial: time.Second}})
			m := &fakeManager{name: "m"}
			d := &fakeDeleter{fakeDriver: fakeDriver{name: "d", phase: PhaseIPSetsUpdate}}
			tc.setup(m, d)
			h.addManager(m)
			h.addDriver(d)
			h.start()
			h.send("bad")
			h.openGates()
			hl := h.loop.Health()
			require.ErrorIs(t, hl.LastError, ErrPanic)
			var pe *PanicError
			require.ErrorAs(t, hl.LastError, &pe)
			assert.NotEmpty(t, pe.Stack)
			if tc.name == "manager CompleteDeferredWork" {
				assert.ErrorIs(t, hl.LastError, errVal, "an error panic value is wrapped")
			}
			if tc.passFails {
				assert.Equal(t, 1, hl.ConsecutiveFailures)
				h.advance(time.Second)
			}
			if tc.resynced {
				assert.EqualValues(t, 1, d.resyncs.Load())
			}
			// The loop carries on and converges.
			h.send("good")
			hl = h.loop.Health()
			assert.True(t, hl.Live)
			assert.True(t, hl.Ready)
			assert.Zero(t, hl.ConsecutiveFailures)
			assert.EqualValues(t, 1, h.inSyncs.Load())
			assert.GreaterOrEqual(t, d.deletions.Load(), int64(2))
		})
	}
}

func TestPanickingCallbacksAndDeletions(t *testing.T) {
	h := newHarness(t, Options{
		Backoff:  Backoff{Initial: time.Second},
		OnHealth: func(Health) { panic("health") },
		OnInSync: func() { panic("in sync") },
	})
	d := &fakeDeleter{fakeDriver: fakeDriver{name: "d", phase: PhaseIPSetsDelete}}
	d.delOut = []outcome{{err: errors.New("in use")}}
	h.addDriver(d)
	h.start()
	h.openGates()
	hl := h.loop.Health()
	require.Error(t, hl.LastError)
	assert.Contains(t, hl.LastError.Error(), "deletions")
	assert.EqualValues(t, 1, d.resyncs.Load())
	h.advance(time.Second)
	hl = h.loop.Health()
	assert.Zero(t, hl.ConsecutiveFailures)
	assert.ErrorIs(t, hl.LastError, ErrPanic, "the OnInSync panic is recorded")
	assert.EqualValues(t, 1, h.inSyncs.Load())
	h.send("x")
	assert.EqualValues(t, 3, d.applies.Load(), "still running")
}

func TestSendQueueFullAndStopped(t *testing.T) {
	h := newHarness(t, Options{QueueSize: 2})
	m := &fakeManager{name: "m", keepMsgs: true}
	h.addManager(m)
	ctx := context.Background()

	require.ErrorIs(t, h.loop.Send(ctx, nil), ErrNilMessage)
	require.ErrorIs(t, h.loop.TrySend(nil), ErrNilMessage)
	require.NoError(t, h.loop.Send(ctx, 1))
	require.NoError(t, h.loop.TrySend(2))
	require.ErrorIs(t, h.loop.TrySend(3), ErrQueueFull)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, h.loop.Send(cctx, 3), context.Canceled)

	blocked := make(chan error, 1)
	var returned atomic.Bool
	go func() {
		err := h.loop.Send(ctx, 3)
		returned.Store(true)
		blocked <- err
	}()
	// The sender stays blocked while the queue is full and Run has not started.
	runtime.Gosched()
	assert.False(t, returned.Load())
	assert.Equal(t, 2, h.loop.q.len())

	h.start()
	require.NoError(t, <-blocked)
	h.settle(func() bool { return m.updates.Load() == 3 })
	assert.Equal(t, []any{1, 2, 3}, m.messages())

	h.stop()
	assert.ErrorIs(t, h.loop.Send(ctx, 4), ErrStopped)
	assert.ErrorIs(t, h.loop.TrySend(4), ErrStopped)
	h.loop.DatastoreInSync() // a no-op, not a panic
	assert.False(t, h.loop.Health().Live)
}

func TestSendBlockedWakesOnStop(t *testing.T) {
	l, err := New(Options{QueueSize: 1})
	require.NoError(t, err)
	require.NoError(t, l.TrySend(1))
	errc := make(chan error, 1)
	go func() { errc <- l.Send(context.Background(), 2) }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, l.Run(ctx), "a cancelled context stops Run cleanly")
	// Run took at most one batch or none; the waiting sender either got in
	// before the stop or is told the loop stopped.
	err = <-errc
	if err != nil {
		assert.ErrorIs(t, err, ErrStopped)
	}
	assert.ErrorIs(t, l.Send(context.Background(), 3), ErrStopped)
}

func TestHealthReports(t *testing.T) {
	h := newHarness(t, Options{HealthInterval: 10 * time.Second})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	assert.False(t, h.loop.Health().Live)
	h.start()
	hl := h.loop.Health()
	assert.True(t, hl.Live)
	assert.False(t, hl.Ready)
	assert.True(t, hl.LastApply.IsZero())

	h.advance(5 * time.Second)
	h.openGates()
	hl = h.loop.Health()
	assert.True(t, hl.Ready)
	assert.Equal(t, epoch.Add(5*time.Second), hl.LastApply)
	assert.EqualValues(t, 1, hl.Applies)
	assert.NoError(t, hl.LastError)

	before := len(h.healthLog())
	for range 3 {
		h.advance(10 * time.Second)
	}
	assert.Len(t, h.healthLog(), before+3, "one report per interval while quiet")
	h.stop()
	log := h.healthLog()
	last := log[len(log)-1]
	assert.False(t, last.Live, "the final report says the loop stopped")
	assert.True(t, last.Ready)
	assert.True(t, log[0].Live)
	assert.False(t, log[0].Ready)
}

// TestShutdown checks that cancelling Run mid-pass stops every goroutine
// the loop started, and that Run returns nil.
func TestShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	l, err := New(Options{Coalesce: -1, ResyncInterval: time.Millisecond})
	require.NoError(t, err)
	inApply := make(chan struct{}, 8)
	blocker := func(ctx context.Context) (ApplyResult, error) {
		select {
		case inApply <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ApplyResult{}, ctx.Err()
	}
	for i := range 3 {
		d := &fakeDriver{name: fmt.Sprint("t", i), phase: PhaseTables}
		d.applyFn = blocker
		require.NoError(t, l.AddDriver(d))
	}
	require.NoError(t, l.AddDriver(&fakeDriver{name: "r", phase: PhaseRoutes}))
	l.DatastoreInSync()
	l.InterfacesInSync()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for range 3 {
		<-inApply // all three tables are inside Apply, in parallel
	}
	cancel()
	require.NoError(t, <-done)
	assert.False(t, l.Health().Live)
	assert.Zero(t, l.Health().ConsecutiveFailures, "a cancelled pass is not a failure")

	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind")
}

func TestRunWithCancelledContext(t *testing.T) {
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	l, err := New(Options{Coalesce: -1})
	require.NoError(t, err)
	require.NoError(t, l.AddDriver(d))
	l.DatastoreInSync()
	l.InterfacesInSync()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, l.Run(ctx))
	assert.Zero(t, d.applies.Load(), "nothing runs once the context is done")
}

func TestNilContexts(t *testing.T) {
	l, err := New(Options{})
	require.NoError(t, err)
	//lint:ignore SA1012 nil contexts must not panic
	require.NoError(t, l.Send(nil, "x"))
}

// One bad object never holds the loop back: a driver whose Apply reports
// only objects that failed (ErrPartial) is not backed off, its RetryAfter
// is honoured, new messages are served at once, and the failure is
// reported through health and its counters.
func TestPartialFailureDoesNotBackOff(t *testing.T) {
	refused := errors.New("route refused")
	h := newHarness(t, Options{
		Backoff:  Backoff{Initial: 10 * time.Second, Max: 30 * time.Second},
		Throttle: Throttle{Refill: -1},
	})
	rt := &fakeDriver{name: "routes", phase: PhaseRoutes}
	other := &fakeDriver{name: "tables", phase: PhaseTables}
	h.addDriver(rt)
	h.addDriver(other)
	partial := outcome{res: ApplyResult{RetryAfter: 2 * time.Second}, err: Partial(2, refused, refused)}
	rt.queue(partial, partial)
	h.start()
	h.openGates()
	require.EqualValues(t, 1, rt.applies.Load())
	hl := h.loop.Health()
	assert.True(t, hl.Ready, "objects that failed on their own do not make the pass fail")
	assert.Zero(t, hl.ConsecutiveFailures)
	assert.Empty(t, hl.FailingDrivers)
	assert.Equal(t, 2, hl.FailingObjects)
	assert.EqualValues(t, 2, hl.ObjectFailures)
	require.ErrorIs(t, hl.LastError, ErrPartial)
	require.ErrorIs(t, hl.LastError, refused)
	assert.Zero(t, rt.resyncs.Load(), "a partial failure forces no resync")
	assert.EqualValues(t, 1, h.inSyncs.Load())

	// A new message is applied at once, to both drivers.
	h.send("m1")
	assert.EqualValues(t, 2, rt.applies.Load())
	assert.EqualValues(t, 2, other.applies.Load())
	assert.EqualValues(t, 4, h.loop.Health().ObjectFailures)

	// Objects waiting for their retry count as failing, not as failures.
	rt.queue(outcome{res: ApplyResult{RetryAfter: 2 * time.Second}, err: &PartialError{Waiting: 2, Errs: []error{refused}}}, partial)
	h.send("m2")
	assert.EqualValues(t, 3, rt.applies.Load())
	assert.Equal(t, 2, h.loop.Health().FailingObjects)
	assert.EqualValues(t, 4, h.loop.Health().ObjectFailures)

	// The driver's own retry request is honoured.
	h.advance(2*time.Second - time.Millisecond)
	assert.EqualValues(t, 3, rt.applies.Load())
	h.advance(time.Millisecond)
	assert.EqualValues(t, 4, rt.applies.Load())
	assert.EqualValues(t, 6, h.loop.Health().ObjectFailures)

	// Once the objects are written, the count drops to zero; the counter stays.
	h.advance(2 * time.Second)
	assert.EqualValues(t, 5, rt.applies.Load())
	hl = h.loop.Health()
	assert.Zero(t, hl.FailingObjects)
	assert.EqualValues(t, 6, hl.ObjectFailures)
}

// A partial failure in ApplyDeletions counts the same way, and a driver
// that fails as a whole in one of its two tasks is backed off.
func TestPartialFailureInDeletions(t *testing.T) {
	h := newHarness(t, Options{Backoff: Backoff{Initial: time.Second}, Throttle: Throttle{Refill: -1}})
	d := &fakeDeleter{fakeDriver: fakeDriver{name: "sets", phase: PhaseIPSetsUpdate}}
	h.addDriver(d)
	d.delOut = []outcome{{err: Partial(1, errors.New("set in use"))}, {err: errors.New("ipset binary missing")}}
	h.start()
	h.openGates()
	hl := h.loop.Health()
	assert.Equal(t, 1, hl.FailingObjects)
	assert.Empty(t, hl.FailingDrivers)
	h.send("x")
	hl = h.loop.Health()
	assert.Equal(t, []string{"sets"}, hl.FailingDrivers)
	assert.EqualValues(t, 1, d.resyncs.Load())
	h.send("y")
	assert.EqualValues(t, 2, d.applies.Load(), "backing off: skipped")
	h.advance(time.Second)
	assert.EqualValues(t, 3, d.applies.Load())
	assert.Empty(t, h.loop.Health().FailingDrivers)
}

// A driver's calls each report every object it has failing (its Ledger's
// Err): the loop counts the objects its latest call of the pass reported,
// not the sum of its Apply and ApplyDeletions, which name the same ones.
func TestFailingObjectsOfADeletionApplier(t *testing.T) {
	h := newHarness(t, Options{Throttle: Throttle{Refill: -1}})
	d := &fakeDeleter{fakeDriver: fakeDriver{name: "sets", phase: PhaseIPSetsUpdate}}
	h.addDriver(d)
	refused := errors.New("set refused")
	// Apply tries the set and fails; ApplyDeletions reports it waiting.
	d.queue(outcome{res: ApplyResult{RetryAfter: time.Second}, err: &PartialError{Failed: 1, Errs: []error{refused}}})
	d.delOut = []outcome{{res: ApplyResult{RetryAfter: time.Second}, err: &PartialError{Waiting: 1, Errs: []error{refused}}}}
	h.start()
	h.openGates()
	hl := h.loop.Health()
	assert.Equal(t, 1, hl.FailingObjects, "one set, reported by both calls")
	assert.EqualValues(t, 1, hl.ObjectFailures, "tried once")
	// Written by the next Apply: ApplyDeletions reports nothing failing.
	h.advance(time.Second)
	assert.Zero(t, h.loop.Health().FailingObjects)
}

func TestPartialError(t *testing.T) {
	assert.NoError(t, Partial(0))
	a, b := errors.New("a"), errors.New("b")
	err := Partial(5, a, b)
	require.ErrorIs(t, err, ErrPartial)
	require.ErrorIs(t, err, a)
	require.ErrorIs(t, err, b)
	assert.Equal(t, "5 object(s) failed; a; b", err.Error())
	var pe *PartialError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 5, pe.Failed)
	assert.Equal(t, 2, Partial(0, a, b).(*PartialError).Failed, "never fewer than the errors given")
	many := Partial(4, a, a, a, a).Error()
	assert.Equal(t, "4 object(s) failed; a; a; a; …", many)
	tried, waiting := failedObjects(a)
	assert.Equal(t, [2]int{1, 0}, [2]int{tried, waiting})
	pe.Waiting = 3
	tried, waiting = failedObjects(fmt.Errorf("wrapped: %w", err))
	assert.Equal(t, [2]int{5, 3}, [2]int{tried, waiting})
	assert.Equal(t, "8 object(s) failed; a; b", err.Error())
}

// wakeDriver is a fakeDriver that implements Wakeable.
type wakeDriver struct {
	fakeDriver
	wake func()
}

func (d *wakeDriver) SetWake(wake func()) { d.wake = wake }

// A driver that learns of work outside the loop wakes it; the wake obeys
// the in-sync gates and merges with other pending wakes.
func TestWake(t *testing.T) {
	h := newHarness(t, Options{Throttle: Throttle{Refill: -1}})
	d := &wakeDriver{fakeDriver: fakeDriver{name: "routes", phase: PhaseRoutes}}
	h.addDriver(d)
	require.NotNil(t, d.wake, "AddDriver hands a Wakeable driver its wake function")
	d.wake() // before Run: kept
	h.start()
	assert.Zero(t, d.applies.Load(), "nothing is applied before the in-sync markers")
	h.openGates()
	require.EqualValues(t, 1, d.applies.Load())

	// From other goroutines, many times: at least one pass, never more
	// than one per wake.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(d.wake)
	}
	wg.Wait()
	h.settle(nil)
	n := d.applies.Load()
	assert.True(t, n >= 2 && n <= 9, "applies after 8 wakes: %d", n)

	h.loop.Wake()
	h.settle(nil)
	assert.Equal(t, n+1, d.applies.Load())
}

// Wake honours the coalescing window like a message.
func TestWakeCoalesces(t *testing.T) {
	h := newHarness(t, Options{Coalesce: 50 * time.Millisecond, Throttle: Throttle{Refill: -1}})
	d := &fakeDriver{name: "d", phase: PhaseRoutes}
	h.addDriver(d)
	h.start()
	h.openGates()
	h.advance(50 * time.Millisecond)
	require.EqualValues(t, 1, d.applies.Load())
	h.loop.Wake()
	h.settle(nil)
	assert.EqualValues(t, 1, d.applies.Load())
	h.advance(50 * time.Millisecond)
	assert.EqualValues(t, 2, d.applies.Load())
}
