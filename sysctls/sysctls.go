package sysctls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultRecheckInterval is how often the Manager checks its settings
// again when Options.RecheckInterval is zero: the loop's own default
// resync interval.
const DefaultRecheckInterval = dataplane.DefaultResyncInterval

// Options configure a Manager. Kernel is required.
type Options struct {
	// Kernel is the network namespace whose net.* sysctls the Manager
	// keeps: a *kernel.Namespace (kernel.Open, kernel.OpenCurrent) or a
	// kernelfake.Namespace in tests.
	Kernel kernel.Sysctls
	// Host reads and writes the machine-wide keys (outside net): ProcSys
	// for the machine's own, ReadOnly(ProcSys{}) to report without
	// writing. Nil leaves such settings alone, reported as failed with
	// ErrNoHostAccess.
	Host kernel.Sysctls
	// Settings are the sysctls to keep; nil means Defaults(). An empty
	// non-nil slice keeps none.
	Settings []Setting
	// RecheckInterval is how often CompleteDeferredWork checks the
	// settings again, to repair what changed behind the agent's back;
	// it runs at the loop's next pass after the interval (a loop passes at
	// least every dataplane.Options.ResyncInterval). Zero means
	// DefaultRecheckInterval; negative checks only at the first call and
	// after QueueResync.
	RecheckInterval time.Duration
	// Clock times the rechecks; nil means clock.Real().
	Clock clock.Clock
	// OnReport, if set, is called with the Report of every check made by
	// CompleteDeferredWork that changed something or could not apply
	// something. It is called from the loop's goroutine and must be quick.
	OnReport func(Report)
	// Logger receives an info log for every change and a warning for every
	// failure; nil discards them.
	Logger *slog.Logger
	// Name is returned by Name, for the loop's logs; empty means
	// "sysctls".
	Name string
}

// Outcome is what a check did with one setting.
type Outcome uint8

const (
	// Kept: the value was acceptable and was left alone.
	Kept Outcome = iota + 1
	// Changed: the value was not acceptable; Value was written and read
	// back.
	Changed
	// Failed: the setting could not be brought to an acceptable value;
	// Result.Err says why.
	Failed
)

// String returns "kept", "changed" or "failed".
func (o Outcome) String() string {
	switch o {
	case Kept:
		return "kept"
	case Changed:
		return "changed"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// Result is what a check did with one setting.
type Result struct {
	// Setting is the setting checked.
	Setting Setting
	// Was is the value read before any write ("" when it could not be
	// read).
	Was string
	// Now is the value read after a write, else Was.
	Now string
	// Outcome says what happened.
	Outcome Outcome
	// Err, for a Failed outcome, wraps ErrNotApplied and the cause
	// (ErrNoHostAccess, ErrReadOnly, kernel.ErrNotFound for a key this
	// kernel lacks, kernel.ErrInvalid for a value it refuses…).
	Err error
}

// String describes the result in one line, such as
// "net.ipv4.ip_forward: changed 0 -> 1".
func (r Result) String() string {
	switch r.Outcome {
	case Kept:
		return fmt.Sprintf("%s: kept %s", r.Setting.Key, r.Was)
	case Changed:
		return fmt.Sprintf("%s: changed %s -> %s", r.Setting.Key, r.Was, r.Now)
	}
	return fmt.Sprintf("%s: failed: %s", r.Setting.Key, strings.TrimPrefix(managerutil.Detail(r.Err), managerutil.Detail(ErrNotApplied)+": "+r.Setting.Key+": "))
}

// Report is the outcome of one check of every setting, in the order of
// Options.Settings.
type Report struct {
	// Results has one entry per setting.
	Results []Result
}

// Changed returns the results of the settings that were written.
func (r Report) Changed() []Result { return r.only(Changed) }

// Failed returns the results of the settings that could not be applied.
func (r Report) Failed() []Result { return r.only(Failed) }

func (r Report) only(o Outcome) []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Outcome == o {
			out = append(out, res)
		}
	}
	return out
}

// Err returns the failures of the required settings, joined, or nil.
func (r Report) Err() error {
	var errs []error
	for _, res := range r.Failed() {
		if res.Setting.Required {
			errs = append(errs, res.Err)
		}
	}
	return errors.Join(errs...)
}

// String lists the results, one per line.
func (r Report) String() string {
	lines := make([]string, len(r.Results))
	for i, res := range r.Results {
		lines[i] = res.String()
	}
	return strings.Join(lines, "\n")
}

// Manager keeps a namespace's static kernel configuration: sysctls that
// must hold a value (or one of a few) for the node to work. It is a
// dataplane.Manager that writes to the kernel itself, in
// CompleteDeferredWork, and so a dataplane.Resyncer: an inactive loop does
// not call it. Check runs a check at once, for use without a loop.
type Manager struct {
	o        Options
	log      *slog.Logger
	clk      clock.Clock
	settings []Setting
	resync   atomic.Bool
	next     time.Time // next recheck; zero: at the next call
}

// New validates opts and returns a Manager. It does no I/O.
func New(opts Options) (*Manager, error) {
	bad := func(format string, args ...any) (*Manager, error) {
		return nil, managerutil.Invalid(ErrInvalidOptions, format, args...)
	}
	if managerutil.IsNil(opts.Kernel) {
		return bad("Kernel is required")
	}
	if managerutil.IsNil(opts.Host) {
		opts.Host = nil
	}
	settings := opts.Settings
	if settings == nil {
		settings = Defaults()
	}
	seen := map[string]bool{}
	for i, s := range settings {
		p, err := path(s.Key)
		if err != nil {
			return bad("Settings[%d]: %v", i, err)
		}
		if seen[p] {
			return bad("Settings[%d]: %s given twice", i, s.Key)
		}
		seen[p] = true
		if s.Value == "" || strings.ContainsAny(s.Value, "\n\x00") {
			return bad("Settings[%d] %s: value %q is empty or has a newline or NUL", i, s.Key, s.Value)
		}
	}
	if opts.RecheckInterval == 0 {
		opts.RecheckInterval = DefaultRecheckInterval
	}
	if opts.Name == "" {
		opts.Name = "sysctls"
	}
	return &Manager{o: opts, log: managerutil.Logger(opts.Logger), clk: clock.OrReal(opts.Clock), settings: append([]Setting(nil), settings...)}, nil
}

// Name returns the Manager's name for the loop's logs.
func (m *Manager) Name() string { return m.o.Name }

// Settings returns the settings the Manager keeps.
func (m *Manager) Settings() []Setting { return append([]Setting(nil), m.settings...) }

// OnUpdate implements dataplane.Manager; the Manager takes no message.
func (m *Manager) OnUpdate(any) {}

// QueueResync makes the next CompleteDeferredWork check every setting,
// whenever the last check was. It implements dataplane.Resyncer (the loop
// calls it after a failure and when it becomes active) and may be called
// from any goroutine.
func (m *Manager) QueueResync() { m.resync.Store(true) }

// CompleteDeferredWork checks every setting when a check is due (the first
// call, after QueueResync, and once RecheckInterval has passed since the
// last check), and otherwise returns at once. A check reads each sysctl,
// leaves acceptable values alone, writes Value over the others and reads it
// back. The Report goes to Options.OnReport when something changed or
// failed. The error is the failures of Required settings (Report.Err):
// the loop then reports the Manager failed and calls it again after its
// backoff, with a resync; failures of other settings are only reported and
// tried again at the next recheck.
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	now := m.clk.Now()
	if !m.resync.Swap(false) && !m.next.IsZero() && (m.o.RecheckInterval < 0 || now.Before(m.next)) {
		return nil
	}
	rep := m.Check(ctx)
	if m.o.RecheckInterval > 0 {
		m.next = m.clk.Now().Add(m.o.RecheckInterval)
	} else {
		m.next = now // not zero: checked once
	}
	if cb := m.o.OnReport; cb != nil && (len(rep.Changed()) > 0 || len(rep.Failed()) > 0) {
		cb(rep)
	}
	return rep.Err()
}

// Check checks every setting now, writes those whose value is not
// acceptable, and returns what it did. It is what CompleteDeferredWork runs
// when a check is due; an agent may call it at start, without a loop. Like
// CompleteDeferredWork, it must not run concurrently with the Manager's
// other methods.
func (m *Manager) Check(ctx context.Context) Report {
	if ctx == nil {
		ctx = context.Background()
	}
	rep := Report{Results: make([]Result, 0, len(m.settings))}
	for _, s := range m.settings {
		res := m.check(ctx, s)
		switch res.Outcome {
		case Changed:
			m.log.Info("sysctls: changed", "key", s.Key, "was", res.Was, "now", res.Now, "why", s.Why)
		case Failed:
			m.log.Warn("sysctls: not applied", "key", s.Key, "error", res.Err, "required", s.Required, "why", s.Why)
		}
		rep.Results = append(rep.Results, res)
	}
	return rep
}

func (m *Manager) check(ctx context.Context, s Setting) Result {
	res := Result{Setting: s}
	fail := func(err error) Result {
		res.Outcome = Failed
		res.Err = managerutil.Quote(ErrNotApplied, err, s.Key)
		return res
	}
	k := m.o.Kernel
	if !s.namespaced() {
		if m.o.Host == nil {
			return fail(ErrNoHostAccess)
		}
		k = m.o.Host
	}
	was, err := k.Sysctl(ctx, s.Key)
	if err != nil {
		return fail(err)
	}
	res.Was, res.Now = was, was
	if s.acceptable(was) {
		res.Outcome = Kept
		return res
	}
	if err := k.SetSysctl(ctx, s.Key, s.Value); err != nil {
		return fail(err)
	}
	now, err := k.Sysctl(ctx, s.Key)
	if err != nil {
		return fail(err)
	}
	res.Now = now
	if !s.acceptable(now) {
		return fail(fmt.Errorf("wrote %q, read back %q", s.Value, now))
	}
	res.Outcome = Changed
	return res
}

var (
	_ dataplane.Manager  = (*Manager)(nil)
	_ dataplane.Resyncer = (*Manager)(nil)
)
