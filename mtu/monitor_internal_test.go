package mtu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// guard bounds every wait of these tests, so a bug fails the test instead of
// hanging it. It is never asserted on.
const guard = 10 * time.Second

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type change struct{ old, cur Result }

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// monitorHarness runs a Monitor on a fake clock and a fake namespace and
// tells the test each time the Monitor is idle.
type monitorHarness struct {
	t       *testing.T
	clk     *clock.Fake
	ns      *kernelfake.Namespace
	m       *Monitor
	idle    chan struct{}
	changes chan change
	logs    *syncBuffer
	cancel  context.CancelFunc
	done    chan error
}

// newMonitorHarness lists the links through k, which is ns or wraps it.
func newMonitorHarness(t *testing.T, k kernel.Links, ns *kernelfake.Namespace, opts MonitorOptions) *monitorHarness {
	t.Helper()
	h := &monitorHarness{
		t:       t,
		clk:     clock.NewFake(epoch),
		ns:      ns,
		idle:    make(chan struct{}, 100),
		changes: make(chan change, 100),
		logs:    &syncBuffer{},
	}
	det, err := NewDetector(DetectorOptions{Include: []string{"^eth"}, Kernel: k})
	require.NoError(t, err)
	opts.Detector = det
	opts.Clock = h.clk
	opts.Logger = slog.New(slog.NewTextHandler(h.logs, nil))
	opts.OnChange = func(old, cur Result) { h.changes <- change{old, cur} }
	h.m, err = NewMonitor(opts)
	require.NoError(t, err)
	h.m.testHookIdle = func() { h.idle <- struct{}{} }
	return h
}

func (h *monitorHarness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- h.m.Run(ctx) }()
	h.t.Cleanup(func() { h.stop() })
}

func (h *monitorHarness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		assert.NoError(h.t, err)
	case <-time.After(guard):
		h.t.Fatal("Run did not return after cancel")
	}
}

func (h *monitorHarness) waitIdle() {
	h.t.Helper()
	select {
	case <-h.idle:
	case <-time.After(guard):
		h.t.Fatal("the monitor never became idle")
	}
}

// noChange asserts that no OnChange call is pending. Call it after
// waitIdle: OnChange runs before the Monitor goes idle.
func (h *monitorHarness) noChange() {
	h.t.Helper()
	select {
	case c := <-h.changes:
		h.t.Fatalf("unexpected OnChange(%+v, %+v)", c.old, c.cur)
	default:
	}
}

func (h *monitorHarness) nextChange() change {
	h.t.Helper()
	select {
	case c := <-h.changes:
		return c
	default:
		h.t.Fatal("OnChange was not called")
		return change{}
	}
}

func vxlanOpts() MonitorOptions {
	return MonitorOptions{PodMTU: PodMTUOptions{Encaps: []Encap{VXLAN}}, PollInterval: time.Minute, RetryInterval: 10 * time.Second}
}

func twoUplinks(t *testing.T) *kernelfake.Namespace {
	return FakeNode(t,
		TestLink{Name: "eth0", MTU: 9000, Up: true},
		TestLink{Name: "eth1", MTU: 1500, Up: true},
		TestLink{Name: "veth0", MTU: 1000, Up: true},
	)
}

// listings is how many times the Monitor listed the links.
func listings(ns *kernelfake.Namespace) int { return ns.Calls(kernelfake.OpLinks) }

func TestMonitorReportsInitialValues(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	_, ok := h.m.Current()
	assert.False(t, ok, "nothing before Run")
	assert.Zero(t, listings(fake), "NewMonitor does no I/O")

	h.start()
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, Result{}, c.old, "the first report has a zero old value")
	want := Result{Host: HostMTU{MTU: 1500, Interface: "eth1"}, PodMTU: 1500 - VXLANOverheadV4}
	assert.Equal(t, want, c.cur)
	cur, ok := h.m.Current()
	require.True(t, ok)
	assert.Equal(t, want, cur)
	next, ok := h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, epoch.Add(time.Minute), next, "the backstop poll is armed")
}

func TestMonitorTriggerReportsChanges(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	h.start()
	h.waitIdle()
	first := h.nextChange().cur

	SetTestMTU(t, fake, "eth1", 1450)
	h.m.Trigger()
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, first, c.old)
	assert.Equal(t, Result{Host: HostMTU{MTU: 1450, Interface: "eth1"}, PodMTU: 1450 - VXLANOverheadV4}, c.cur)

	// A detection that finds the same values reports nothing.
	h.m.Trigger()
	h.waitIdle()
	h.noChange()
	assert.Equal(t, 3, listings(fake))

	// Raising the other uplink does not change the minimum.
	SetTestMTU(t, fake, "eth0", 1500)
	h.m.Trigger()
	h.waitIdle()
	h.noChange()

	// The minimum moves to another link with the same MTU: not a change
	// of values, but Current follows.
	SetTestMTU(t, fake, "eth0", 1450)
	SetTestMTU(t, fake, "eth1", 9000)
	h.m.Trigger()
	h.waitIdle()
	h.noChange()
	cur, _ := h.m.Current()
	assert.Equal(t, "eth0", cur.Host.Interface)

	// A link going down removes it from the minimum.
	SetTestUp(t, fake, "eth0", false)
	h.m.Trigger()
	h.waitIdle()
	c = h.nextChange()
	assert.Equal(t, 1450, c.old.Host.MTU)
	assert.Equal(t, 9000, c.cur.Host.MTU)
	assert.Equal(t, 9000-VXLANOverheadV4, c.cur.PodMTU)
}

func TestMonitorPollsAsBackstop(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	h.start()
	h.waitIdle()
	h.nextChange()

	SetTestMTU(t, fake, "eth1", 1400)
	h.clk.Advance(time.Minute - time.Nanosecond)
	select {
	case <-h.idle:
		t.Fatal("detected before the poll interval")
	default:
	}
	assert.Equal(t, 1, listings(fake))
	h.clk.Advance(time.Nanosecond)
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, 1500, c.old.Host.MTU)
	assert.Equal(t, 1400, c.cur.Host.MTU)

	// The next poll is PollInterval after the last detection, also when a
	// Trigger caused it.
	h.clk.Advance(30 * time.Second)
	h.m.Trigger()
	h.waitIdle()
	next, ok := h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, h.clk.Now().Add(time.Minute), next)
	h.noChange()
}

// gatedLinks is a fake namespace whose every Links call blocks until the
// test releases it.
type gatedLinks struct {
	*kernelfake.Namespace
	entered chan struct{}
	release chan struct{}
}

func (g gatedLinks) Links(ctx context.Context) ([]kernel.Link, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Namespace.Links(ctx)
}

func TestMonitorCoalescesTriggers(t *testing.T) {
	fake := twoUplinks(t)
	g := gatedLinks{Namespace: fake, entered: make(chan struct{}, 10), release: make(chan struct{})}
	h := newMonitorHarness(t, g, fake, vxlanOpts())
	h.m.Trigger()
	h.m.Trigger() // before Run: kept, coalesced
	h.start()

	pass := func() {
		t.Helper()
		select {
		case <-g.entered:
		case <-time.After(guard):
			t.Fatal("no detection started")
		}
		select {
		case g.release <- struct{}{}:
		case <-time.After(guard):
			t.Fatal("detection not released")
		}
		h.waitIdle()
	}
	pass() // start of Run
	pass() // the triggers from before Run, as one
	assert.Equal(t, 2, listings(fake))

	h.m.Trigger()
	<-g.entered // a detection is running
	for range 50 {
		h.m.Trigger()
	}
	g.release <- struct{}{}
	h.waitIdle()
	pass() // the 50 triggers during the detection, as one
	assert.Equal(t, 4, listings(fake))
	assert.Empty(t, h.m.trigger, "no trigger pending")
	assert.Empty(t, g.entered, "no further detection")
	assert.Len(t, h.changes, 1, "one report: the values never changed")
}

func TestMonitorKeepsLastValueOnErrorAndRetries(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	h.start()
	h.waitIdle()
	good := h.nextChange().cur

	fake.Fail(kernelfake.OpLinks, -1, errors.New("netlink: no buffer space"))
	SetTestMTU(t, fake, "eth1", 1400)
	h.m.Trigger()
	h.waitIdle()
	h.noChange()
	cur, ok := h.m.Current()
	require.True(t, ok)
	assert.Equal(t, good, cur, "the last good values are kept")
	assert.Contains(t, h.logs.String(), "no buffer space")
	next, ok := h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, h.clk.Now().Add(10*time.Second), next, "retried after RetryInterval, not PollInterval")

	// Still failing: retried again.
	h.clk.Advance(10 * time.Second)
	h.waitIdle()
	assert.Equal(t, 3, listings(fake))
	h.noChange()

	fake.ClearFailures()
	h.clk.Advance(10 * time.Second)
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, good, c.old)
	assert.Equal(t, 1400, c.cur.Host.MTU)
	next, _ = h.clk.NextDeadline()
	assert.Equal(t, h.clk.Now().Add(time.Minute), next, "back to the poll interval")
}

func TestMonitorPodMTUErrorKeepsLastValue(t *testing.T) {
	fake := twoUplinks(t)
	opts := vxlanOpts()
	opts.PodMTU.PodIPv6 = true
	h := newMonitorHarness(t, fake, fake, opts)
	h.start()
	h.waitIdle()
	good := h.nextChange().cur

	SetTestMTU(t, fake, "eth1", 1300) // 1300-50 < 1280
	h.m.Trigger()
	h.waitIdle()
	h.noChange()
	cur, _ := h.m.Current()
	assert.Equal(t, good, cur)
	assert.Contains(t, h.logs.String(), "pod MTU too small")
}

func TestMonitorReportsFallback(t *testing.T) {
	fake := FakeNode(t, TestLink{Name: "eth0", MTU: 1500, Up: false})
	h := newMonitorHarness(t, fake, fake, MonitorOptions{})
	h.start()
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, Result{Host: HostMTU{MTU: FallbackMTU, FellBack: true}, PodMTU: FallbackMTU}, c.cur)
	assert.Contains(t, h.logs.String(), "fallback")
	next, _ := h.clk.NextDeadline()
	assert.Equal(t, epoch.Add(DefaultPollInterval), next, "default poll interval")

	SetTestUp(t, fake, "eth0", true)
	h.m.Trigger()
	h.waitIdle()
	c = h.nextChange()
	assert.True(t, c.old.Host.FellBack)
	assert.Equal(t, HostMTU{MTU: 1500, Interface: "eth0"}, c.cur.Host)
}

func TestMonitorStopsOnCancel(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	h.start()
	h.waitIdle()
	require.Equal(t, 1, h.clk.Waiters())
	h.stop()
	assert.Zero(t, h.clk.Waiters(), "the timer is stopped")
	h.m.Trigger() // after Run: harmless
	assert.ErrorIs(t, h.m.Run(context.Background()), ErrAlreadyStarted)
}

func TestMonitorCancelDuringDetection(t *testing.T) {
	fake := twoUplinks(t)
	g := gatedLinks{Namespace: fake, entered: make(chan struct{}, 10), release: make(chan struct{})}
	h := newMonitorHarness(t, g, fake, vxlanOpts())
	h.start()
	<-g.entered
	h.stop()
	assert.Zero(t, h.clk.Waiters())
	assert.Empty(t, h.changes)
	assert.NotContains(t, h.logs.String(), "failed", "a cancelled detection is not a failure")
}

func TestMonitorRunTwice(t *testing.T) {
	fake := twoUplinks(t)
	h := newMonitorHarness(t, fake, fake, vxlanOpts())
	h.start()
	h.waitIdle()
	assert.ErrorIs(t, h.m.Run(context.Background()), ErrAlreadyStarted)
}

func TestMonitorRetryCappedAtPoll(t *testing.T) {
	fake := twoUplinks(t)
	fake.Fail(kernelfake.OpLinks, -1, errors.New("down"))
	h := newMonitorHarness(t, fake, fake, MonitorOptions{PollInterval: time.Second, RetryInterval: time.Hour})
	h.start()
	h.waitIdle()
	next, _ := h.clk.NextDeadline()
	assert.Equal(t, epoch.Add(time.Second), next)
}

func TestMonitorNilOnChange(t *testing.T) {
	fake := twoUplinks(t)
	det, err := NewDetector(DetectorOptions{Kernel: fake, Exclude: DefaultExclude()})
	require.NoError(t, err)
	clk := clock.NewFake(epoch)
	m, err := NewMonitor(MonitorOptions{Detector: det, Clock: clk})
	require.NoError(t, err)
	idle := make(chan struct{}, 10)
	m.testHookIdle = func() { idle <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-idle
	cur, ok := m.Current()
	require.True(t, ok)
	assert.Equal(t, 1500, cur.PodMTU)
	cancel()
	require.NoError(t, <-done)
}

func TestNewMonitorErrors(t *testing.T) {
	det, err := NewDetector(DetectorOptions{Kernel: FakeNode(t)})
	require.NoError(t, err)
	tests := []struct {
		name string
		opts MonitorOptions
	}{
		{"no detector", MonitorOptions{}},
		{"negative poll", MonitorOptions{Detector: det, PollInterval: -time.Second}},
		{"negative retry", MonitorOptions{Detector: det, RetryInterval: -time.Second}},
		{"negative extra", MonitorOptions{Detector: det, PodMTU: PodMTUOptions{Extra: -1}}},
		{"negative override", MonitorOptions{Detector: det, PodMTU: PodMTUOptions{Override: -1}}},
		{"override below IPv6 minimum", MonitorOptions{Detector: det, PodMTU: PodMTUOptions{Override: 1000, PodIPv6: true}}},
		{"bad encapsulation", MonitorOptions{Detector: det, PodMTU: PodMTUOptions{Encaps: []Encap{{Name: "x", V4: -20}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMonitor(tc.opts)
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Nil(t, m)
		})
	}
}

func TestMonitorCopiesEncaps(t *testing.T) {
	fake := twoUplinks(t)
	opts := vxlanOpts()
	encaps := []Encap{VXLAN}
	opts.PodMTU.Encaps = encaps
	h := newMonitorHarness(t, fake, fake, opts)
	encaps[0] = Encap{Name: "huge", V4: 1000}
	h.start()
	h.waitIdle()
	assert.Equal(t, 1500-VXLANOverheadV4, h.nextChange().cur.PodMTU)
}

func TestMonitorWarnsAboutOverrideAboveHost(t *testing.T) {
	fake := twoUplinks(t)
	opts := vxlanOpts()
	opts.PodMTU.Override = 9000
	h := newMonitorHarness(t, fake, fake, opts)
	h.start()
	h.waitIdle()
	c := h.nextChange()
	assert.Equal(t, 9000, c.cur.PodMTU, "the override wins")
	assert.Equal(t, 1500, c.cur.Host.MTU)
	assert.Contains(t, h.logs.String(), "override is larger than the host MTU")
}
