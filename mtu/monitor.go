package mtu

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// Default Monitor intervals.
const (
	// DefaultPollInterval is how long a Monitor waits after a detection
	// before detecting again without a Trigger.
	DefaultPollInterval = 30 * time.Second
	// DefaultRetryInterval is how long a Monitor waits after a failed
	// detection (or pod MTU computation) before trying again.
	DefaultRetryInterval = 5 * time.Second
)

// Result is what a Monitor reports: the host MTU and the pod MTU computed
// from it.
type Result struct {
	// Host is the detected host MTU.
	Host HostMTU
	// PodMTU is PodMTU(opts) with opts.HostMTU = Host.MTU.
	PodMTU int
}

// MonitorOptions configure a Monitor.
type MonitorOptions struct {
	// Detector detects the host MTU. Required.
	Detector *Detector
	// PodMTU computes the pod MTU from each detection; its HostMTU field is
	// ignored and replaced by the detected value. It is validated by
	// NewMonitor.
	PodMTU PodMTUOptions
	// PollInterval is the backstop: how long after a detection the Monitor
	// detects again without a Trigger. Zero means DefaultPollInterval;
	// negative is an error.
	PollInterval time.Duration
	// RetryInterval is how long the Monitor waits after a failure before
	// trying again. Zero means DefaultRetryInterval; negative is an error.
	// It is capped at PollInterval.
	RetryInterval time.Duration
	// OnChange is called, from Run's goroutine, when the host MTU or the
	// pod MTU differs from the last reported values; the first successful
	// detection is reported with a zero old Result. Another detection
	// waits until it returns. May be nil (use Current instead).
	OnChange func(old, cur Result)
	// Clock drives the poll and retry timers; nil means clock.Real().
	Clock clock.Clock
	// Logger receives failures (as warnings) and changes (as info); nil
	// discards.
	Logger *slog.Logger
}

// Monitor keeps the host and pod MTUs current. It detects at the start of
// Run, whenever Trigger is called and PollInterval after the last
// detection, and calls OnChange when the values change. It never acts on a
// change itself: setting device MTUs or rewriting the CNI file is the
// caller's decision. Trigger and Current are safe to call from any
// goroutine, before, during and after Run.
type Monitor struct {
	det      *Detector
	pod      PodMTUOptions
	poll     time.Duration
	retry    time.Duration
	onChange func(old, cur Result)
	clk      clock.Clock
	log      *slog.Logger

	trigger chan struct{}

	mu       sync.Mutex
	started  bool
	current  Result
	have     bool
	reported Result

	// testHookIdle, set by tests only, is called from Run's goroutine each
	// time it starts waiting.
	testHookIdle func()
}

// NewMonitor validates o and returns a Monitor. Bad options (no Detector,
// negative intervals, invalid PodMTU options) return an error wrapping
// ErrInvalidOptions. It does no I/O and starts no goroutines.
func NewMonitor(o MonitorOptions) (*Monitor, error) {
	if o.Detector == nil {
		return nil, invalidf(ErrInvalidOptions, "MonitorOptions.Detector is required")
	}
	if o.PollInterval < 0 || o.RetryInterval < 0 {
		return nil, invalidf(ErrInvalidOptions, "MonitorOptions intervals must not be negative, got PollInterval %v and RetryInterval %v",
			o.PollInterval, o.RetryInterval)
	}
	if err := o.PodMTU.validateStatic("MonitorOptions.PodMTU"); err != nil {
		return nil, err
	}
	poll := o.PollInterval
	if poll == 0 {
		poll = DefaultPollInterval
	}
	retry := o.RetryInterval
	if retry == 0 {
		retry = DefaultRetryInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pod := o.PodMTU
	pod.Encaps = append([]Encap(nil), o.PodMTU.Encaps...)
	return &Monitor{
		det:      o.Detector,
		pod:      pod,
		poll:     poll,
		retry:    min(retry, poll),
		onChange: o.OnChange,
		clk:      clock.OrReal(o.Clock),
		log:      log,
		trigger:  make(chan struct{}, 1),
	}, nil
}

// Trigger asks the running Monitor to detect again soon, for example from
// an interface monitor's link callback. It never blocks: triggers that
// arrive while one is pending or a detection is running are coalesced into
// one more detection. A Trigger before Run is kept for it.
func (m *Monitor) Trigger() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Current returns the result of the last successful detection, and false
// before the first one.
func (m *Monitor) Current() (Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.current, m.have
}

// Run detects at once and then whenever triggered or polled, until ctx is
// done; then it returns nil. It blocks and starts no goroutine. A failed
// detection or pod MTU computation is logged, keeps the last values and is
// retried after RetryInterval (or sooner on Trigger). A Monitor runs once:
// calling Run again returns ErrAlreadyStarted. A nil ctx is taken as
// context.Background().
func (m *Monitor) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrAlreadyStarted
	}
	m.started = true
	m.mu.Unlock()

	var timer clock.Timer
	for {
		wait := m.poll
		if !m.check(ctx) {
			wait = m.retry
		}
		if ctx.Err() != nil {
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if timer == nil {
			timer = m.clk.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		if m.testHookIdle != nil {
			m.testHookIdle()
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-m.trigger:
		case <-timer.C():
		}
	}
}

// check detects once, updates the current values and reports a change. It
// returns false when the detection or the computation failed.
func (m *Monitor) check(ctx context.Context) bool {
	host, err := m.det.Detect(ctx)
	if err != nil {
		if ctx.Err() == nil {
			m.log.Warn("mtu: host MTU detection failed; keeping the last values", "error", err, "retry", m.retry)
		}
		return false
	}
	opts := m.pod
	opts.HostMTU = host.MTU
	pod, err := PodMTU(opts)
	if err != nil {
		m.log.Error("mtu: cannot compute the pod MTU; keeping the last values",
			"error", err, "hostMTU", host.MTU, "interface", host.Interface, "retry", m.retry)
		return false
	}
	cur := Result{Host: host, PodMTU: pod}
	m.mu.Lock()
	m.current, m.have = cur, true
	old := m.reported
	changed := old.Host.MTU != cur.Host.MTU || old.PodMTU != cur.PodMTU
	if changed {
		m.reported = cur
	}
	m.mu.Unlock()
	if !changed {
		return true
	}
	if host.FellBack {
		m.log.Warn("mtu: no interface qualifies for host MTU detection; using the fallback", "hostMTU", host.MTU, "podMTU", pod)
	}
	if m.pod.Override > host.MTU {
		m.log.Warn("mtu: the pod MTU override is larger than the host MTU; large packets will be fragmented or dropped",
			"override", m.pod.Override, "hostMTU", host.MTU, "interface", host.Interface)
	}
	m.log.Info("mtu: MTU changed", "oldHostMTU", old.Host.MTU, "hostMTU", host.MTU,
		"interface", host.Interface, "oldPodMTU", old.PodMTU, "podMTU", pod)
	if m.onChange != nil {
		m.onChange(old, cur)
	}
	return true
}
