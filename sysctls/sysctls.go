package sysctls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/managerutil"
	"github.com/nodeplane/nodeplane/kernel"
)

// Options configure a Driver. Kernel is required.
type Options struct {
	// Kernel is the network namespace whose net.* sysctls the Driver
	// keeps: a *kernel.Namespace (kernel.Open, kernel.OpenCurrent) or a
	// kernelfake.Namespace in tests.
	Kernel kernel.Sysctls
	// Host reads and writes the machine-wide keys (outside net): ProcSys
	// for the machine's own, ReadOnly(ProcSys{}) to report without
	// writing. Nil leaves such settings alone, reported as failed with
	// ErrNoHostAccess.
	Host kernel.Sysctls
	// Settings are the sysctls to keep; nil means Defaults(). An empty
	// non-nil slice keeps none. SetGroup adds others (per interface, say).
	Settings []Setting
	// Clock times the retries of the settings that failed; nil means
	// clock.Real().
	Clock clock.Clock
	// OnReport, if set, is called with the Report of every Apply that
	// changed something or could not apply something. It is called from
	// the goroutine that runs Apply and must be quick.
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

// Driver keeps a namespace's kernel configuration: sysctls that must hold
// a value (or one of a few) for the node to work. It is a
// dataplane.Driver, so the loop's resync repairs what changed behind the
// agent's back and an inactive loop writes nothing; Check runs a check at
// once, for use without a loop. Its methods are safe for concurrent use.
type Driver struct {
	o      Options
	log    *slog.Logger
	static []Setting

	mu     sync.Mutex
	groups map[string][]Setting
	// resync makes the next Apply check every setting; due holds the keys
	// (paths) declared since the last Apply, which it checks too.
	resync bool
	due    map[string]bool
	// good holds the keys whose value was acceptable when last read or
	// written.
	good   map[string]bool
	failed *dataplane.Ledger[string]
	writes uint64
	// watchers receive every Report (Watch).
	watchers []func(Report)
}

// New validates opts and returns a Driver. It does no I/O: the first Apply
// (or Check) reads the kernel.
func New(opts Options) (*Driver, error) {
	if managerutil.IsNil(opts.Kernel) {
		return nil, managerutil.Invalid(ErrInvalidOptions, "Kernel is required")
	}
	if managerutil.IsNil(opts.Host) {
		opts.Host = nil
	}
	settings := opts.Settings
	if settings == nil {
		settings = Defaults()
	}
	if err := validate("Settings", settings, nil); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "sysctls"
	}
	return &Driver{o: opts, log: managerutil.Logger(opts.Logger), static: slices.Clone(settings),
		groups: map[string][]Setting{}, resync: true, due: map[string]bool{}, good: map[string]bool{},
		failed: dataplane.NewLedger[string](dataplane.Backoff{}, opts.Clock)}, nil
}

// validate checks settings, named what in errors: well-formed keys and
// values, no key twice, none of them in taken (keys as paths).
func validate(what string, settings []Setting, taken map[string]bool) error {
	seen := map[string]bool{}
	for i, s := range settings {
		p, err := path(s.Key)
		if err != nil {
			return managerutil.Invalid(ErrInvalidOptions, "%s[%d]: %v", what, i, err)
		}
		if seen[p] || taken[p] {
			return managerutil.Invalid(ErrInvalidOptions, "%s[%d]: %s given twice", what, i, s.Key)
		}
		seen[p] = true
		if s.Value == "" || strings.ContainsAny(s.Value, "\n\x00") {
			return managerutil.Invalid(ErrInvalidOptions, "%s[%d] %s: value %q is empty or has a newline or NUL", what, i, s.Key, s.Value)
		}
	}
	return nil
}

// Name returns the Driver's name for the loop's logs.
func (m *Driver) Name() string { return m.o.Name }

// Phase returns dataplane.PhaseRoutes: sysctls are written beside routes.
func (m *Driver) Phase() dataplane.Phase { return dataplane.PhaseRoutes }

// Settings returns the settings the Driver keeps: Options.Settings, then
// those of every group, by group name.
func (m *Driver) Settings() []Setting {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.desired()
}

func (m *Driver) desired() []Setting {
	out := slices.Clone(m.static)
	for _, g := range slices.Sorted(maps.Keys(m.groups)) {
		out = append(out, m.groups[g]...)
	}
	return out
}

// SetGroup replaces the settings of group (a manager hands its own here:
// endpoints the per-interface sysctls of an interface, say); nil or empty
// removes the group. Settings are validated as Options.Settings are, and a
// key already kept by Options.Settings or another group is refused: on any
// error, nothing changes. The next Apply checks the group's new or changed
// settings; a removed setting is left as it is in the kernel.
func (m *Driver) SetGroup(group string, settings []Setting) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	taken := map[string]bool{}
	for g, ss := range m.groups {
		if g == group {
			continue
		}
		for _, s := range ss {
			p, _ := path(s.Key)
			taken[p] = true
		}
	}
	for _, s := range m.static {
		p, _ := path(s.Key)
		taken[p] = true
	}
	if err := validate("group "+group, settings, taken); err != nil {
		return err
	}
	old := map[string]string{}
	for _, s := range m.groups[group] {
		p, _ := path(s.Key)
		old[p] = fmt.Sprint(s)
	}
	if len(settings) == 0 {
		delete(m.groups, group)
	} else {
		m.groups[group] = slices.Clone(settings)
	}
	for _, s := range settings {
		p, _ := path(s.Key)
		if old[p] != fmt.Sprint(s) {
			m.due[p] = true
			m.failed.Forget(p) // a new declaration ends the backoff
		}
		delete(old, p)
	}
	for p := range old {
		// No longer kept: its failure, if any, is no longer the Driver's.
		m.failed.Forget(p)
		delete(m.due, p)
		delete(m.good, p)
	}
	return nil
}

// RecheckGroup makes the next Apply check the settings of group again, as
// if they had just been declared, and ends their backoff: a manager calls
// it when the object its settings are about was re-created with the
// kernel's defaults (an interface deleted and made again, say). It does
// no I/O; an unknown group is ignored.
func (m *Driver) RecheckGroup(group string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.groups[group] {
		p, _ := path(s.Key)
		m.due[p] = true
		m.failed.Forget(p)
	}
}

// Watch registers fn to receive the Report of every Apply and Check that
// checked at least one setting, kept, changed or failed alike: a manager
// that hands its settings to the Driver (SetGroup) learns their outcome
// from it. fn is called from the goroutine that ran the Apply, after it,
// outside the Driver's lock (it may call the Driver's other methods, not
// Apply), and must be quick.
func (m *Driver) Watch(fn func(Report)) {
	if fn == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, fn)
}

// tell hands rep to the watchers; the caller does not hold the lock.
func tell(watchers []func(Report), rep Report) {
	if len(rep.Results) == 0 {
		return
	}
	for _, fn := range watchers {
		fn(rep)
	}
}

// Failure returns the error of the setting key while it fails (a
// *dataplane.ObjectError wrapping ErrNotApplied and the cause).
func (m *Driver) Failure(key string) (*dataplane.ObjectError, bool) {
	p, err := path(key)
	if err != nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed.Get(p)
}

// QueueResync makes the next Apply check every setting. It implements
// dataplane.Driver: the loop calls it every ResyncInterval, which repairs
// values changed behind the agent's back, and after the Driver failed.
func (m *Driver) QueueResync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resync = true
}

// Stats returns the Driver's dataplane.DriverStats: the settings kept,
// those whose value was acceptable when last read or written, those
// failing, and the writes made.
func (m *Driver) Stats() dataplane.DriverStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.desired()
	in := 0
	for _, s := range d {
		if p, _ := path(s.Key); m.good[p] {
			in++
		}
	}
	return dataplane.DriverStats{Desired: len(d), InKernel: in, Failing: m.failed.Len(), Writes: m.writes}
}

// Apply checks the settings that are due: every one at the first call and
// after QueueResync, else those declared since the last Apply and those
// whose retry is due. A check reads each sysctl, leaves an acceptable value
// alone, writes Value over any other and reads it back; an Apply with
// nothing due does no I/O. The Report goes to Options.OnReport when
// something changed or failed.
//
// A setting that fails is retried on its own backoff (from 100 ms,
// doubling up to 30 s) and reported in a *dataplane.PartialError (one
// *dataplane.ObjectError per setting, wrapping ErrNotApplied and the
// cause). A failed Required setting (forwarding, in Defaults) fails the
// whole Apply instead, with the failures of the required settings: the
// loop reports the Driver failed, backs it off and resyncs it. A nil ctx is
// context.Background().
func (m *Driver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	res, rep, err := m.apply(ctx)
	watchers := m.watchers
	m.mu.Unlock()
	tell(watchers, rep)
	return res, err
}

// apply is Apply under the lock; it returns the Report of what it checked
// too.
func (m *Driver) apply(ctx context.Context) (dataplane.ApplyResult, Report, error) {
	m.failed.Begin()
	check := m.dueSettings()
	if len(check) == 0 {
		return dataplane.ApplyResult{RetryAfter: m.failed.RetryAfter()}, Report{}, m.err()
	}
	rep := m.run(ctx, check)
	if err := ctx.Err(); err != nil {
		m.resync = true
		return dataplane.ApplyResult{}, rep, fmt.Errorf("sysctls: %s: %w", m.o.Name, err)
	}
	m.resync = false
	clear(m.due)
	if cb := m.o.OnReport; cb != nil && (len(rep.Changed()) > 0 || len(rep.Failed()) > 0) {
		cb(rep)
	}
	return dataplane.ApplyResult{RetryAfter: m.failed.RetryAfter()}, rep, m.err()
}

// err is Apply's error: the failures of the Required settings, joined,
// while one fails; else the ledger's *dataplane.PartialError, or nil.
func (m *Driver) err() error {
	var errs []error
	for _, s := range m.desired() {
		p, _ := path(s.Key)
		if e, failing := m.failed.Get(p); failing && s.Required {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return m.failed.Err()
}

// dueSettings returns the settings the current Apply (or Plan) checks:
// every one after a resync, else those declared since the last Apply and
// those whose retry is due.
func (m *Driver) dueSettings() []Setting {
	var check []Setting
	for _, s := range m.desired() {
		p, _ := path(s.Key)
		if m.resync || m.due[p] || m.failingDue(p) {
			check = append(check, s)
		}
	}
	return check
}

// failingDue reports whether the setting at p failed and its retry is due.
func (m *Driver) failingDue(p string) bool {
	_, failing := m.failed.Get(p)
	return failing && !m.failed.Waiting(p)
}

// Check checks every setting now, writes those whose value is not
// acceptable, and returns what it did. It is what Apply runs on a resync;
// an agent may call it at start, without a loop.
func (m *Driver) Check(ctx context.Context) Report {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	m.failed.Begin()
	rep := m.run(ctx, m.desired())
	watchers := m.watchers
	m.mu.Unlock()
	tell(watchers, rep)
	return rep
}

// run checks settings and keeps the outcome: the failing ones in the
// ledger, the others forgotten there; settings no longer kept are
// forgotten too.
func (m *Driver) run(ctx context.Context, settings []Setting) Report {
	rep := Report{Results: make([]Result, 0, len(settings))}
	for _, s := range settings {
		res, cause := m.check(ctx, s)
		p, _ := path(s.Key)
		m.good[p] = res.Outcome != Failed
		switch res.Outcome {
		case Changed:
			m.writes++
			m.log.Info("sysctls: changed", "key", s.Key, "was", res.Was, "now", res.Now, "why", s.Why)
		case Failed:
			m.log.Warn("sysctls: not applied", "key", s.Key, "error", res.Err, "required", s.Required, "why", s.Why)
		}
		if res.Outcome == Failed {
			m.failed.Fail(p, &dataplane.ObjectError{Driver: "sysctls", Op: "write", Kind: kindSysctl, Name: s.Key,
				Reason: ErrNotApplied, Detail: managerutil.Detail(cause), Err: cause})
		} else {
			m.failed.Forget(p)
		}
		rep.Results = append(rep.Results, res)
	}
	kept := map[string]bool{}
	for _, s := range m.desired() {
		p, _ := path(s.Key)
		kept[p] = true
	}
	m.failed.Retain(func(p string) bool { return kept[p] })
	maps.DeleteFunc(m.good, func(p string, _ bool) bool { return !kept[p] })
	return rep
}

// read reads setting s: the kernel it lives in (the namespace's, or
// Options.Host for a machine-wide key) and its value. A check writes it
// there when the value is not acceptable.
func (m *Driver) read(ctx context.Context, s Setting) (kernel.Sysctls, string, error) {
	k := m.o.Kernel
	if !s.namespaced() {
		if m.o.Host == nil {
			return nil, "", ErrNoHostAccess
		}
		k = m.o.Host
	}
	was, err := k.Sysctl(ctx, s.Key)
	return k, was, err
}

// check checks one setting; for a failure it returns the cause too.
func (m *Driver) check(ctx context.Context, s Setting) (Result, error) {
	res := Result{Setting: s}
	fail := func(err error) (Result, error) {
		res.Outcome = Failed
		res.Err = managerutil.Quote(ErrNotApplied, err, s.Key)
		return res, err
	}
	k, was, err := m.read(ctx, s)
	if err != nil {
		return fail(err)
	}
	res.Was, res.Now = was, was
	if s.acceptable(was) {
		res.Outcome = Kept
		return res, nil
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
	return res, nil
}

var (
	_ dataplane.Driver        = (*Driver)(nil)
	_ dataplane.StatsReporter = (*Driver)(nil)
)
