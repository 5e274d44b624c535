package dataplane

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/stretchr/testify/require"
)

// epoch is the fake clock's start.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// recorder collects events from fakes running on several goroutines.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// index returns the position of ev, or -1.
func (r *recorder) index(ev string) int {
	for i, e := range r.list() {
		if e == ev {
			return i
		}
	}
	return -1
}

// fakeManager records what the loop gives it.
type fakeManager struct {
	name    string
	rec     *recorder
	updates atomic.Int64
	cdws    atomic.Int64
	resyncs atomic.Int64

	mu       sync.Mutex
	msgs     []any
	keepMsgs bool
	cdwErrs  []error       // consumed one per CompleteDeferredWork; nil entries succeed
	onUpdate func(msg any) // optional behaviour
	cdwFn    func() error  // optional behaviour, after cdwErrs
}

func (m *fakeManager) Name() string { return m.name }

func (m *fakeManager) OnUpdate(msg any) {
	m.updates.Add(1)
	m.mu.Lock()
	if m.keepMsgs {
		m.msgs = append(m.msgs, msg)
	}
	fn := m.onUpdate
	m.mu.Unlock()
	if fn != nil {
		fn(msg)
	}
}

func (m *fakeManager) CompleteDeferredWork(context.Context) error {
	m.cdws.Add(1)
	m.rec.add("cdw %s", m.name)
	m.mu.Lock()
	var err error
	if len(m.cdwErrs) > 0 {
		err, m.cdwErrs = m.cdwErrs[0], m.cdwErrs[1:]
	}
	fn := m.cdwFn
	m.mu.Unlock()
	if err == nil && fn != nil {
		err = fn()
	}
	return err
}

func (m *fakeManager) messages() []any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]any(nil), m.msgs...)
}

// resyncManager is a fakeManager that implements Resyncer.
type resyncManager struct{ fakeManager }

func (m *resyncManager) QueueResync() { m.resyncs.Add(1) }

// outcome is what one fake Apply returns.
type outcome struct {
	res ApplyResult
	err error
}

// fakeDriver records its calls and returns queued outcomes.
type fakeDriver struct {
	name    string
	phase   Phase
	rec     *recorder
	applies atomic.Int64
	resyncs atomic.Int64

	mu       sync.Mutex
	outcomes []outcome                                      // consumed one per Apply
	applyFn  func(ctx context.Context) (ApplyResult, error) // optional, when outcomes is empty
}

func (d *fakeDriver) Name() string { return d.name }
func (d *fakeDriver) Phase() Phase { return d.phase }
func (d *fakeDriver) QueueResync() { d.resyncs.Add(1); d.rec.add("resync %s", d.name) }
func (d *fakeDriver) queue(o ...outcome) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes = append(d.outcomes, o...)
}

func (d *fakeDriver) Apply(ctx context.Context) (ApplyResult, error) {
	d.applies.Add(1)
	d.rec.add("start %s", d.name)
	defer d.rec.add("end %s", d.name)
	d.mu.Lock()
	var o *outcome
	if len(d.outcomes) > 0 {
		o = &d.outcomes[0]
		d.outcomes = d.outcomes[1:]
	}
	fn := d.applyFn
	d.mu.Unlock()
	switch {
	case o != nil:
		return o.res, o.err
	case fn != nil:
		return fn(ctx)
	}
	return ApplyResult{}, nil
}

// fakeDeleter is a fakeDriver that also implements DeletionApplier.
type fakeDeleter struct {
	fakeDriver
	deletions atomic.Int64
	delMu     sync.Mutex
	delOut    []outcome
}

func (d *fakeDeleter) ApplyDeletions(ctx context.Context) (ApplyResult, error) {
	d.deletions.Add(1)
	d.rec.add("start %s.del", d.name)
	defer d.rec.add("end %s.del", d.name)
	d.delMu.Lock()
	defer d.delMu.Unlock()
	if len(d.delOut) > 0 {
		o := d.delOut[0]
		d.delOut = d.delOut[1:]
		return o.res, o.err
	}
	return ApplyResult{}, nil
}

// harness runs a Loop on a fake clock and lets the test wait until the
// loop has settled: it has seen everything the test did, has nothing
// pending, and is about to wait.
type harness struct {
	t      *testing.T
	clk    *clock.Fake
	loop   *Loop
	idle   chan idleReport
	quit   chan struct{}
	cancel context.CancelFunc
	done   chan error
	gen    uint64 // last poke sent

	hmu     sync.Mutex
	healths []Health
	inSyncs atomic.Int64
}

type idleReport struct {
	quiet bool
	poke  uint64
}

// newHarness builds a Loop with opts on a fake clock. Unless the test set
// them, coalescing is off (so a batch applies at once) and periodic
// resync and health ticks are off (so no timer fires unless the test wants).
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{
		t:    t,
		clk:  clock.NewFake(epoch),
		idle: make(chan idleReport),
		quit: make(chan struct{}),
		done: make(chan error, 1),
	}
	opts.Clock = h.clk
	if opts.Coalesce == 0 {
		opts.Coalesce = -1
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = -1
	}
	userHealth, userInSync := opts.OnHealth, opts.OnInSync
	opts.OnHealth = func(hl Health) {
		h.hmu.Lock()
		h.healths = append(h.healths, hl)
		h.hmu.Unlock()
		if userHealth != nil {
			userHealth(hl)
		}
	}
	opts.OnInSync = func() {
		h.inSyncs.Add(1)
		if userInSync != nil {
			userInSync()
		}
	}
	l, err := New(opts)
	require.NoError(t, err)
	l.testPoke = make(chan uint64, 1)
	l.testHookIdle = func(quiet bool, poke uint64) {
		select {
		case h.idle <- idleReport{quiet, poke}:
		case <-h.quit:
		}
	}
	h.loop = l
	t.Cleanup(h.stop)
	return h
}

func (h *harness) addManager(m Manager) {
	h.t.Helper()
	require.NoError(h.t, h.loop.AddManager(m))
}

func (h *harness) addDriver(d Driver, opts ...DriverOption) {
	h.t.Helper()
	require.NoError(h.t, h.loop.AddDriver(d, opts...))
}

// start runs the loop and waits until it has settled.
func (h *harness) start() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.loop.Run(ctx) }()
	h.settle(nil)
}

// settle wakes the loop and waits until it has seen the wake-up, has no
// event pending and cond (if any) holds. Everything the test did before
// the call has then been processed. The timeout only guards against a hung
// test.
func (h *harness) settle(cond func() bool) {
	h.t.Helper()
	h.gen++
	select {
	case <-h.loop.testPoke: // replace an unread poke
	default:
	}
	h.loop.testPoke <- h.gen
	timeout := time.After(20 * time.Second)
	for {
		select {
		case r := <-h.idle:
			if r.quiet && r.poke == h.gen && (cond == nil || cond()) {
				return
			}
		case err := <-h.done:
			h.done <- err
			h.t.Fatalf("loop stopped while settling: %v", err)
		case <-timeout:
			h.t.Fatalf("loop did not settle")
		}
	}
}

// openGates sends both in-sync markers and waits for the loop to settle.
func (h *harness) openGates() {
	h.t.Helper()
	h.loop.DatastoreInSync()
	h.loop.InterfacesInSync()
	h.settle(func() bool {
		hl := h.loop.Health()
		return hl.DatastoreInSync && hl.InterfacesInSync
	})
}

// send queues msgs and waits until the loop has taken them all.
func (h *harness) send(msgs ...any) {
	h.t.Helper()
	for _, m := range msgs {
		require.NoError(h.t, h.loop.Send(context.Background(), m))
	}
	h.settle(func() bool { return h.loop.q.len() == 0 })
}

// advance moves the fake clock and waits for the loop to settle.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	h.settle(nil)
}

func (h *harness) applies() uint64 { return h.loop.Health().Applies }

// stop cancels Run and checks that it returned nil.
func (h *harness) stop() {
	select {
	case <-h.quit:
		return
	default:
	}
	close(h.quit)
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		require.NoError(h.t, err)
	case <-time.After(20 * time.Second):
		h.t.Fatalf("Run did not return after cancel")
	}
}

func (h *harness) healthLog() []Health {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	return append([]Health(nil), h.healths...)
}
