//go:build linux

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// Role says what a variant stands for in a scenario.
type Role int

const (
	// Ours is nodeplane's implementation.
	Ours Role = iota
	// Peer is the naive way other agents or libraries do the same job.
	Peer
	// Floor is the cheapest hand-written way to reach the same state.
	Floor
)

// String returns "ours", "peer" or "floor".
func (r Role) String() string {
	switch r {
	case Ours:
		return "ours"
	case Peer:
		return "peer"
	case Floor:
		return "floor"
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// Env is what a variant gets for one trial: a fresh network namespace, and
// a place to report extra metrics.
type Env struct {
	// NS is the trial's network namespace. It runs binaries (NS.Run, a
	// command.Runner) and has a netlink handle bound to it (NS.Handle()).
	NS *kerneltest.NS
	// State is whatever Setup stored for Run to use.
	State any

	metrics map[string]float64
}

// Report records an extra metric of this trial (for example heap bytes per
// object). The harness reports the median over trials.
func (e *Env) Report(name string, value float64) { e.metrics[name] = value }

// Variant is one way of doing a scenario's job.
type Variant struct {
	// Name identifies the variant in the report, e.g. "go-iptables".
	Name string
	// Role is ours, peer or floor.
	Role Role
	// Setup prepares the namespace (pre-existing state, generated input).
	// It is not measured. Optional.
	Setup func(ctx context.Context, env *Env) error
	// Run is the measured work.
	Run func(ctx context.Context, env *Env) error
}

// Scenario is one benchmark: the same job done by each variant.
type Scenario struct {
	// Name is "<area>/<what>/<size>", e.g. "ipsets/initial/100000".
	Name string
	// Size is the number of objects the job handles (for per-object figures).
	Size int
	// Note says anything a reader needs to judge the figures (for example
	// that a peer was capped).
	Note string
	// Trials is the number of trials per variant; 0 means the run's default.
	Trials int
	// Variants are the ways of doing the job; normally one Ours.
	Variants []Variant
}

var (
	registryMu sync.Mutex
	registry   []Scenario
)

// Register adds scenarios to the set the bench command runs. It is meant
// for init functions of package bench/scenarios.
func Register(s ...Scenario) {
	registryMu.Lock()
	defer registryMu.Unlock()
	registry = append(registry, s...)
}

// Registered returns the registered scenarios whose name matches filter
// (nil matches all), in registration order.
func Registered(filter *regexp.Regexp) []Scenario {
	registryMu.Lock()
	defer registryMu.Unlock()
	var out []Scenario
	for _, s := range registry {
		if filter == nil || filter.MatchString(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

// Measurement is one variant's result in one scenario.
type Measurement struct {
	// Variant and Role name the variant.
	Variant string `json:"variant"`
	Role    string `json:"role"`
	// Trials is the number of successful trials.
	Trials int `json:"trials"`
	// WallMS and CPUMS are the medians of wall and CPU time (this process
	// and its children) in milliseconds.
	WallMS float64 `json:"wall_ms_median"`
	CPUMS  float64 `json:"cpu_ms_median"`
	// WallRatio and CPURatio are this variant's median over ours'.
	WallRatio float64 `json:"wall_ratio_to_ours"`
	CPURatio  float64 `json:"cpu_ratio_to_ours"`
	// Metrics are the medians of what the variant reported with Env.Report.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Error is the first failure of the variant; its trials then stopped.
	Error string `json:"error,omitempty"`
}

// Result is a scenario's measurements.
type Result struct {
	// Scenario, Size and Note are copied from the Scenario.
	Scenario string `json:"scenario"`
	Size     int    `json:"size"`
	Note     string `json:"note,omitempty"`
	// Measurements has one entry per variant, in the scenario's order.
	Measurements []Measurement `json:"measurements"`
}

// Options tune a run.
type Options struct {
	// Trials per variant when a scenario does not say; 0 means 3.
	Trials int
	// Progress, when set, receives a line per finished trial.
	Progress io.Writer
}

// Run runs each scenario and returns its results. A variant that fails is
// reported with its error; the others still run.
func Run(ctx context.Context, scenarios []Scenario, opts Options) []Result {
	if opts.Trials <= 0 {
		opts.Trials = 3
	}
	var results []Result
	for _, s := range scenarios {
		if ctx.Err() != nil {
			break
		}
		results = append(results, runScenario(ctx, s, opts))
	}
	return results
}

type sample struct {
	wall, cpu time.Duration
	metrics   map[string]float64
}

func runScenario(ctx context.Context, s Scenario, opts Options) Result {
	trials := s.Trials
	if trials <= 0 {
		trials = opts.Trials
	}
	samples := make([][]sample, len(s.Variants))
	errs := make([]error, len(s.Variants))
	for round := 0; round < trials; round++ {
		for k := range s.Variants {
			i := (k + round) % len(s.Variants) // rotate the order every round
			if errs[i] != nil {
				continue
			}
			smp, err := runTrial(ctx, s.Variants[i])
			if err != nil {
				errs[i] = err
				continue
			}
			samples[i] = append(samples[i], smp)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "%s %s trial %d: wall %v cpu %v\n", s.Name, s.Variants[i].Name, round+1, smp.wall, smp.cpu)
			}
		}
	}
	res := Result{Scenario: s.Name, Size: s.Size, Note: s.Note}
	var oursWall, oursCPU float64
	for i, v := range s.Variants {
		m := Measurement{Variant: v.Name, Role: v.Role.String(), Trials: len(samples[i])}
		if errs[i] != nil {
			m.Error = errs[i].Error()
		}
		if len(samples[i]) > 0 {
			m.WallMS = medianMS(samples[i], func(s sample) time.Duration { return s.wall })
			m.CPUMS = medianMS(samples[i], func(s sample) time.Duration { return s.cpu })
			m.Metrics = medianMetrics(samples[i])
		}
		if v.Role == Ours && m.Error == "" {
			oursWall, oursCPU = m.WallMS, m.CPUMS
		}
		res.Measurements = append(res.Measurements, m)
	}
	for i := range res.Measurements {
		m := &res.Measurements[i]
		if oursWall > 0 && m.Error == "" {
			m.WallRatio = m.WallMS / oursWall
		}
		if oursCPU > 0 && m.Error == "" {
			m.CPURatio = m.CPUMS / oursCPU
		}
	}
	return res
}

func runTrial(ctx context.Context, v Variant) (sample, error) {
	ns, err := kerneltest.Open()
	if err != nil {
		return sample{}, err
	}
	defer ns.Close()
	env := &Env{NS: ns, metrics: map[string]float64{}}
	if v.Setup != nil {
		if err := v.Setup(ctx, env); err != nil {
			return sample{}, fmt.Errorf("setup: %w", err)
		}
	}
	runtime.GC() // start each measured run from the same heap state
	cpu0 := benchutil.TotalCPU()
	t0 := time.Now()
	err = v.Run(ctx, env)
	wall := time.Since(t0)
	cpu := benchutil.TotalCPU() - cpu0
	if err != nil {
		return sample{}, err
	}
	return sample{wall: wall, cpu: cpu, metrics: env.metrics}, nil
}

func medianMS(ss []sample, f func(sample) time.Duration) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = float64(f(s)) / float64(time.Millisecond)
	}
	return median(v)
}

func medianMetrics(ss []sample) map[string]float64 {
	names := map[string][]float64{}
	for _, s := range ss {
		for k, v := range s.metrics {
			names[k] = append(names[k], v)
		}
	}
	if len(names) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k, v := range names {
		out[k] = median(v)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// WriteTable prints results as an aligned table: per variant the median
// wall and CPU time and their ratio to ours, then the extra metrics.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tvariant\trole\ttrials\twall ms\tcpu ms\twall ×ours\tcpu ×ours\tmetrics")
	for _, r := range results {
		for _, m := range r.Measurements {
			if m.Error != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t-\t-\t-\t-\terror: %s\n", r.Scenario, m.Variant, m.Role, m.Trials, oneLine(m.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\n", r.Scenario, m.Variant, m.Role, m.Trials,
				m.WallMS, m.CPUMS, m.WallRatio, m.CPURatio, formatMetrics(m.Metrics))
		}
		if r.Note != "" {
			fmt.Fprintf(tw, "%s\t(note)\t\t\t\t\t\t\t%s\n", r.Scenario, r.Note)
		}
	}
	return tw.Flush()
}

// WriteJSON writes results as indented JSON.
func WriteJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

func formatMetrics(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.4g", k, m[k])
	}
	return strings.Join(parts, " ")
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
