package drivertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
)

// maxPasses bounds the apply passes of one convergence.
const maxPasses = 100

// leakWait is how long a check waits for the driver's goroutines to end
// before it reports them. It is a bound on a wait, not a timing assertion:
// the check ends as soon as they are gone.
var leakWait = 30 * time.Second

// failureCounts are the numbers of writes the failure check fails in a row.
var failureCounts = []int{1, 3}

// Run runs the suite for the driver s describes in env: one subtest per
// variant, and in it one per check, each in fresh namespaces:
//
//   - Converge: Declare, apply until no retry is pending; Check holds.
//   - Idempotent: then another pass writes nothing, and so does one after
//     QueueResync.
//   - RestartAdopts: a new instance of the variant on the programmed
//     kernel, with the same declarations, writes nothing.
//   - ForeignSurvive: Foreign objects added before the first Apply and
//     after it stay exactly as they are (as Dump shows them, and in their
//     order) through applies, a resync, a restart and the removal of ours.
//   - ExternalDeletionRepaired: after Delete and a foreign change in the
//     same place, QueueResync and apply put ours back and leave the
//     foreign change.
//   - FailureConverges/<injector>-<n>: with the next n writes failing (by
//     each of the environment's injectors), applying as the loop does
//     converges to Declare's state, and then to nothing after Withdraw.
//   - BadInputRejected: every BadInput errors and writes nothing, neither
//     when declared nor at the next apply, on a fresh instance and on a
//     programmed one, whose state stays.
//   - Removal: Withdraw removes every object of ours and nothing else,
//     and so does a new instance that declares nothing.
//
// Every apply keeps the loop contract: an error wrapping
// dataplane.ErrPartial has a positive RetryAfter and a
// *dataplane.PartialError, whose objects failed in this apply only when
// some write of it failed (the others wait for their retry); a failure of
// the whole driver (any other error) comes only when some write failed,
// and never when only object writes (routes, rules, links…) did. Applies are made as a dataplane.Loop makes them: Apply, then
// ApplyDeletions for a dataplane.DeletionApplier; after a partial failure
// the suite moves the fake clock by RetryAfter, after a whole failure it
// calls QueueResync. A panic in a driver fails the check, and so does a
// goroutine of the driver's package left running when the check ends.
func Run[D dataplane.Driver, V fmt.Stringer](t *testing.T, env Environment, s Subject[D, V]) {
	t.Helper()
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	if env.open == nil {
		t.Fatal("drivertest: the zero Environment: use Fake or Kernel")
	}
	markers := leakMarkers[D]()
	for _, v := range s.Variants {
		t.Run(v.String(), func(t *testing.T) {
			for _, c := range checks[D, V](env) {
				t.Run(c.name, func(t *testing.T) {
					// Registered first, so it runs last: after the
					// namespaces are closed.
					t.Cleanup(func() { leakcheck.NoGoroutines(t, leakWait, markers...) })
					ss := &session[D, V]{t: t, name: c.name, s: &s, v: v, environ: env, excused: map[int]bool{}}
					ss.e = ss.open()
					c.run(ss)
					ss.unexcused()
				})
			}
		})
	}
}

// leakMarkers returns the stack markers of D's package: its functions'
// names start with its path and a dot. A driver defined in a test package
// (whose functions, the running test's included, share that start) is
// known by its type's methods alone.
func leakMarkers[D any]() []string {
	typ := reflect.TypeFor[D]()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	pkg := typ.PkgPath()
	switch {
	case pkg == "":
		return nil
	case strings.HasSuffix(pkg, "_test"):
		return []string{pkg + ".(*" + typ.Name() + ").", pkg + "." + typ.Name() + "."}
	}
	return []string{pkg + "."}
}

// check is one check of the suite.
type check[D dataplane.Driver, V fmt.Stringer] struct {
	name string
	run  func(ss *session[D, V])
}

func checks[D dataplane.Driver, V fmt.Stringer](env Environment) []check[D, V] {
	cs := []check[D, V]{
		{"Converge", (*session[D, V]).checkConverge},
		{"Idempotent", (*session[D, V]).checkIdempotent},
		{"RestartAdopts", (*session[D, V]).checkRestart},
		{"ForeignSurvive", (*session[D, V]).checkForeign},
		{"ExternalDeletionRepaired", (*session[D, V]).checkRepair},
	}
	for _, inj := range env.injectors {
		for _, n := range failureCounts {
			cs = append(cs, check[D, V]{fmt.Sprintf("FailureConverges/%s-%d", inj, n), func(ss *session[D, V]) { ss.checkFailure(inj, n) }})
		}
	}
	return append(cs,
		check[D, V]{"BadInputRejected", (*session[D, V]).checkBadInput},
		check[D, V]{"Removal", (*session[D, V]).checkRemoval},
	)
}

// session is one check of one variant: the namespace the driver runs in
// and, once foreign objects are involved, a reference namespace where the
// driver never runs.
type session[D dataplane.Driver, V fmt.Stringer] struct {
	t *testing.T
	// name is the check's name, which starts the names of its assertions.
	name    string
	s       *Subject[D, V]
	v       V
	environ Environment
	e       *env
	// ref holds what the namespace would hold had the driver never run:
	// Setup and the same Foreign stages. nil until first needed.
	ref    *env
	stages []Stage
	// excused marks the Known entries that excused a failure.
	excused map[int]bool
}

// fail reports a failed assertion of the check, named when within it and
// about lines (Dump lines, writes, errors), unless a Known entry of the
// Subject excuses it.
func (ss *session[D, V]) fail(when string, lines []string, format string, args ...any) {
	ss.t.Helper()
	id := ss.name + ": " + when
	msg := id + ": " + fmt.Sprintf(format, args...)
	for i, k := range ss.s.Known {
		if k.Assertion == id && k.Lines != nil && len(lines) > 0 && !slices.ContainsFunc(lines, func(l string) bool { return !k.Lines.MatchString(l) }) {
			ss.excused[i] = true
			ss.t.Logf("KNOWN FAILURE, excused: %s\n%s", k.Why, msg)
			return
		}
	}
	ss.t.Error(msg)
}

// unexcused fails the check for each Known entry of its assertions that
// excused nothing although the check passed: the driver was fixed, and
// the entry must go.
func (ss *session[D, V]) unexcused() {
	if ss.t.Failed() {
		return
	}
	for i, k := range ss.s.Known {
		if strings.HasPrefix(k.Assertion, ss.name+": ") && !ss.excused[i] {
			ss.t.Errorf("%s: the known failure no longer happens (%s): remove it from Subject.Known", k.Assertion, k.Why)
		}
	}
}

// open opens a fresh namespace of the environment and sets it up.
func (ss *session[D, V]) open() *env {
	e := ss.environ.open(ss.t, ss.s.Binaries)
	if ss.s.Setup != nil {
		ss.s.Setup(ss.t, e.admin, ss.v)
	}
	return e
}

// reference returns the reference namespace, opened on first use.
func (ss *session[D, V]) reference() *env {
	if ss.ref == nil {
		ss.ref = ss.open()
		for _, at := range ss.stages {
			ss.s.Foreign(ss.t, ss.ref.admin, ss.v, at)
		}
	}
	return ss.ref
}

// foreign adds the Foreign objects of stage at, here and in the reference.
func (ss *session[D, V]) foreign(at Stage) {
	ss.t.Helper()
	ref := ss.reference()
	ss.s.Foreign(ss.t, ss.e.admin, ss.v, at)
	ss.s.Foreign(ss.t, ref.admin, ss.v, at)
	ss.stages = append(ss.stages, at)
}

func (ss *session[D, V]) dump(e *env) []string { return ss.s.Dump(ss.t, e.admin, ss.v) }

// protect runs fn, a call into the driver, and fails the check if it
// panics.
func (ss *session[D, V]) protect(what string, fn func()) {
	ss.t.Helper()
	defer func() {
		if p := recover(); p != nil {
			ss.t.Fatalf("%s panicked: %v\n%s", what, p, debug.Stack())
		}
	}()
	fn()
}

// newDriver returns a new instance of the variant on the Recorder.
func (ss *session[D, V]) newDriver() D {
	ss.t.Helper()
	var d D
	var err error
	ss.protect("New", func() { d, err = ss.s.New(ss.e.rec, ss.e.clock, ss.v) })
	if err != nil {
		ss.t.Fatalf("New: %v", err)
	}
	return d
}

func (ss *session[D, V]) declare(d D) {
	ss.t.Helper()
	var err error
	ss.protect("Declare", func() { err = ss.s.Declare(d, ss.v) })
	if err != nil {
		ss.t.Fatalf("Declare: %v", err)
	}
}

func (ss *session[D, V]) withdraw(d D) {
	ss.t.Helper()
	var err error
	ss.protect("Withdraw", func() { err = ss.s.Withdraw(d, ss.v) })
	if err != nil {
		ss.t.Fatalf("Withdraw: %v", err)
	}
}

// outcome is what one apply pass reported.
type outcome struct {
	// retry is the shortest positive RetryAfter of the calls that
	// succeeded or failed partly.
	retry time.Duration
	// err joins the calls' errors; whole is set when one of them failed
	// as a whole (not with dataplane.ErrPartial).
	err   error
	whole bool
}

// pass applies d once, as a loop pass does: Apply and, for a
// DeletionApplier, ApplyDeletions.
func (ss *session[D, V]) pass(d D) outcome {
	ss.t.Helper()
	var o outcome
	add := func(res dataplane.ApplyResult, err error) {
		if err != nil {
			o.err = errors.Join(o.err, err)
			if !errors.Is(err, dataplane.ErrPartial) {
				o.whole = true
				return
			}
		}
		if res.RetryAfter > 0 && (o.retry == 0 || res.RetryAfter < o.retry) {
			o.retry = res.RetryAfter
		}
	}
	planned, planner := ss.plan(d, "before a pass")
	writes0 := ss.e.rec.Writes()
	add(ss.call(d, "Apply", d.Apply))
	if da, ok := any(d).(dataplane.DeletionApplier); ok {
		add(ss.call(d, "ApplyDeletions", da.ApplyDeletions))
	}
	if planner {
		ss.checkPlan(d, planned, ss.e.rec.Writes()-writes0, o)
	}
	return o
}

// plan returns the driver's Plan, and false when it is not a
// dataplane.Planner. A Plan must write nothing.
func (ss *session[D, V]) plan(d D, when string) (dataplane.Plan, bool) {
	ss.t.Helper()
	p, ok := any(d).(dataplane.Planner)
	if !ok {
		return dataplane.Plan{}, false
	}
	var plan dataplane.Plan
	var err error
	writes0 := ss.e.rec.Writes()
	ss.protect("Plan", func() { plan, err = p.Plan(context.Background()) })
	if w := ss.e.rec.Writes() - writes0; w > 0 {
		ss.fail("Plan writes nothing", ss.e.rec.Log(), "Plan %s made %d kernel writes", when, w)
	}
	if err != nil {
		ss.fail("Plan succeeds", []string{err.Error()}, "Plan %s failed: %v", when, err)
	}
	return plan, true
}

// checkPlan checks a pass against the Plan made just before it, given the
// kernel writes the pass made and its outcome: a pass whose Plan was empty
// writes nothing, one whose Plan lists writes and that succeeds writes,
// and after a pass that succeeded and asked for no other (a driver that
// writes in slices asks with RetryAfter) the Plan is empty.
func (ss *session[D, V]) checkPlan(d D, planned dataplane.Plan, writes int, o outcome) {
	ss.t.Helper()
	switch {
	case planned.Empty() && writes > 0:
		ss.fail("a pass whose Plan is empty writes nothing", ss.e.rec.Log(), "the Plan was empty, yet the pass made %d kernel writes:\n\t%s", writes, strings.Join(ss.e.rec.Log(), "\n\t"))
	case !planned.Empty() && writes == 0 && o.err == nil:
		ss.fail("a pass makes the writes its Plan lists", []string{planned.String()}, "the Plan listed %d writes, yet the pass made none:\n%s", len(planned.Writes), planned)
	}
	if o.err != nil || o.retry > 0 {
		return
	}
	if after, _ := ss.plan(d, "after a pass"); !after.Empty() {
		ss.fail("the Plan is empty after a pass that succeeded", []string{after.String()}, "the Plan still lists %d writes:\n%s", len(after.Writes), after)
	}
}

// call makes one call of the driver and checks the loop contract on its
// result.
func (ss *session[D, V]) call(d D, what string, fn func(context.Context) (dataplane.ApplyResult, error)) (res dataplane.ApplyResult, err error) {
	t := ss.t
	t.Helper()
	failed0, objects0 := ss.e.rec.Failed()
	stats0, _ := ss.stats(d)
	writes0 := ss.e.rec.Writes()
	ss.protect(what, func() { res, err = fn(context.Background()) })
	failed1, objects1 := ss.e.rec.Failed()
	failed, objects := failed1-failed0, objects1-objects0
	ss.checkStats(d, what, stats0, ss.e.rec.Writes()-writes0, failed, err)
	if err == nil {
		return res, nil
	}
	when, lines := what+" keeps the loop contract", []string{err.Error()}
	if !errors.Is(err, dataplane.ErrPartial) {
		switch {
		case failed == 0:
			ss.fail(when, lines, "it failed though no write failed: %v", err)
		case objects == failed:
			ss.fail(when, lines, "only object writes failed (%d), yet it failed as a whole driver (the error does not wrap dataplane.ErrPartial): %v", failed, err)
		}
		return res, err
	}
	var pe *dataplane.PartialError
	switch {
	case !errors.As(err, &pe):
		ss.fail(when, lines, "the error wraps dataplane.ErrPartial but holds no *dataplane.PartialError: %v", err)
	case pe.Failed == 0 && pe.Waiting == 0:
		ss.fail(when, lines, "a *dataplane.PartialError with no object failed or waiting: %v", err)
	case pe.Failed > 0 && failed == 0:
		ss.fail(when, lines, "%d objects failed though no write failed: %v", pe.Failed, err)
	}
	if res.RetryAfter <= 0 {
		ss.fail(when, lines, "objects failed but RetryAfter is %v, so nothing would retry them: %v", res.RetryAfter, err)
	}
	return res, err
}

// stats returns the driver's dataplane.DriverStats, and false when it
// does not implement dataplane.StatsReporter.
func (ss *session[D, V]) stats(d D) (dataplane.DriverStats, bool) {
	sr, ok := any(d).(dataplane.StatsReporter)
	if !ok {
		return dataplane.DriverStats{}, false
	}
	var st dataplane.DriverStats
	ss.protect("Stats", func() { st = sr.Stats() })
	return st, true
}

// checkStats checks the driver's DriverStats after one call (Apply or
// ApplyDeletions) that made writes kernel writes, failed of which failed,
// and returned err, given its DriverStats before it: Writes grew when a
// write succeeded and stayed when none was made (a refused write may count
// or not), and Failing counts the objects that failed or wait (none after
// a success).
func (ss *session[D, V]) checkStats(d D, what string, before dataplane.DriverStats, writes, failed int, err error) {
	ss.t.Helper()
	after, ok := ss.stats(d)
	if !ok {
		return
	}
	when, lines := what+" keeps DriverStats", []string{fmt.Sprintf("%+v", after)}
	switch grew := after.Writes - before.Writes; {
	case after.Writes < before.Writes:
		ss.fail(when, lines, "Writes went down from %d to %d", before.Writes, after.Writes)
	case writes > failed && grew == 0:
		ss.fail(when, lines, "%d kernel writes succeeded, yet Writes stayed at %d", writes-failed, after.Writes)
	case writes == 0 && grew > 0:
		ss.fail(when, lines, "no kernel write made, yet Writes grew by %d", grew)
	}
	var pe *dataplane.PartialError
	switch {
	case err == nil && after.Failing != 0:
		ss.fail(when, lines, "the call succeeded, yet Failing is %d", after.Failing)
	case errors.As(err, &pe) && after.Failing != pe.Failed+pe.Waiting:
		ss.fail(when, lines, "the PartialError counts %d objects failed and %d waiting, yet Failing is %d", pe.Failed, pe.Waiting, after.Failing)
	}
	if after.Desired < 0 || after.InKernel < 0 {
		ss.fail(when, lines, "a negative count")
	}
}

// settled checks the driver's DriverStats once it converged: nothing
// failing, and every desired object in the kernel.
func (ss *session[D, V]) settled(d D, when string) {
	ss.t.Helper()
	st, ok := ss.stats(d)
	if !ok {
		return
	}
	if st.Failing != 0 || st.Desired != st.InKernel {
		ss.fail(when+", DriverStats show it settled", []string{fmt.Sprintf("%+v", st)},
			"want nothing failing and every desired object in the kernel (Desired == InKernel): %+v", st)
	}
}

// converge applies d until a pass succeeds with no retry pending, as a
// dataplane.Loop would: after a partial failure it moves the clock by
// RetryAfter; after a whole failure it calls QueueResync and moves the
// clock by the loop's first backoff. It returns the writes made.
func (ss *session[D, V]) converge(d D) int {
	t := ss.t
	t.Helper()
	start := ss.e.rec.Writes()
	var o outcome
	for range maxPasses {
		o = ss.pass(d)
		switch {
		case o.err == nil && o.retry <= 0:
			ss.settled(d, "after converging")
			return ss.e.rec.Writes() - start
		case o.whole:
			d.QueueResync()
			ss.e.clock.Advance(dataplane.DefaultBackoffInitial)
		case o.retry > 0:
			ss.e.clock.Advance(o.retry)
		default:
			// A partial failure without RetryAfter (reported by
			// call): move on as a periodic resync would.
			d.QueueResync()
			ss.e.clock.Advance(dataplane.DefaultResyncInterval)
		}
	}
	t.Fatalf("no convergence after %d passes; last error: %v\n%s", maxPasses, o.err, ss.show(ss.e))
	return 0
}

// quiet converges d and fails the check if that writes anything.
func (ss *session[D, V]) quiet(d D, what string) {
	ss.t.Helper()
	ss.e.rec.ResetCounts()
	if w := ss.converge(d); w > 0 {
		log := ss.e.rec.Log()
		ss.fail(what+" writes nothing", log, "%d writes:\n\t%s", w, strings.Join(log, "\n\t"))
	}
}

// programmed returns a new instance, declared and converged.
func (ss *session[D, V]) programmed() D {
	ss.t.Helper()
	d := ss.newDriver()
	ss.declare(d)
	ss.converge(d)
	ss.check("after converging")
	return d
}

// check runs the Subject's Check.
func (ss *session[D, V]) check(when string) {
	ss.t.Helper()
	failed := ss.t.Failed()
	defer func() {
		// Also when Check stopped the test with FailNow.
		if !failed && ss.t.Failed() {
			ss.t.Logf("Check failed %s; %s", when, ss.show(ss.e))
		}
	}()
	ss.s.Check(ss.t, ss.e.admin, ss.v)
}

// intact fails the check unless every line of the reference's Dump is in
// the namespace's, in the same order: no foreign object changed, went or
// moved.
func (ss *session[D, V]) intact(when string) {
	t := ss.t
	t.Helper()
	want, got := ss.dump(ss.reference()), ss.dump(ss.e)
	i := 0
	for _, line := range got {
		if i < len(want) && line == want[i] {
			i++
		}
	}
	if i < len(want) {
		ss.fail(when+", foreign objects are intact", []string{want[i]},
			"a foreign object changed, went or moved: %q is not where it belongs\nwithout the driver:\n\t%s\nwith it:\n\t%s",
			want[i], strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
	}
}

// pristine fails the check unless the namespace's Dump is the
// reference's: nothing of ours is left and everything foreign is as it
// was.
func (ss *session[D, V]) pristine(when string) {
	t := ss.t
	t.Helper()
	want, got := ss.dump(ss.reference()), ss.dump(ss.e)
	if slices.Equal(want, got) {
		return
	}
	extra, missing := minus(got, want), minus(want, got)
	ss.fail(when+", nothing of ours is left", append(extra, missing...),
		"the namespace is not as it would be had the driver never run:\nleft over (or changed):\n\t%s\nmissing (or changed):\n\t%s\nwithout the driver:\n\t%s\nwith it:\n\t%s",
		strings.Join(extra, "\n\t"), strings.Join(missing, "\n\t"), strings.Join(want, "\n\t"), strings.Join(got, "\n\t"))
}

// minus returns the lines of a that b lacks, counting duplicates.
func minus(a, b []string) []string {
	n := map[string]int{}
	for _, l := range b {
		n[l]++
	}
	var out []string
	for _, l := range a {
		if n[l] > 0 {
			n[l]--
			continue
		}
		out = append(out, l)
	}
	return out
}

// show renders e's Dump for a failure message.
func (ss *session[D, V]) show(e *env) string {
	return "the namespace holds:\n\t" + strings.Join(ss.dump(e), "\n\t")
}

func (ss *session[D, V]) checkConverge() {
	d := ss.newDriver()
	ss.declare(d)
	if ss.converge(d) == 0 {
		ss.fail("converging writes", nil, "nothing was written: does New give the driver the kernel it is handed?")
	}
	ss.check("after converging")
}

func (ss *session[D, V]) checkIdempotent() {
	d := ss.programmed()
	ss.quiet(d, "another Apply")
	d.QueueResync()
	ss.quiet(d, "QueueResync and Apply")
	ss.check("after a resync")
}

func (ss *session[D, V]) checkRestart() {
	ss.programmed()
	d := ss.newDriver()
	ss.declare(d)
	ss.quiet(d, "a new instance on the programmed kernel")
	ss.check("after a restart")
}

func (ss *session[D, V]) checkForeign() {
	ss.foreign(BeforeApply)
	d := ss.programmed()
	ss.intact("after the first Apply")
	ss.foreign(AfterApply)
	// Drift is the driver's to see at the next resync, not before.
	ss.converge(d)
	ss.intact("after an Apply with foreign objects added")
	d.QueueResync()
	ss.converge(d)
	ss.intact("after a resync")
	ss.check("after a resync")
	restarted := ss.newDriver()
	ss.declare(restarted)
	ss.quiet(restarted, "a new instance beside foreign objects")
	ss.intact("after a restart")
	ss.withdraw(restarted)
	ss.converge(restarted)
	ss.pristine("after withdrawing everything")
}

func (ss *session[D, V]) checkRepair() {
	d := ss.programmed()
	ss.s.Delete(ss.t, ss.e.admin, ss.v)
	ss.foreign(InPlace)
	d.QueueResync()
	ss.e.rec.ResetCounts()
	if ss.converge(d) == 0 {
		ss.fail("the repair writes", nil, "QueueResync and Apply wrote nothing after our objects were deleted")
	}
	ss.check("after the repair")
	ss.intact("after the repair")
	ss.withdraw(d)
	ss.converge(d)
	ss.pristine("after withdrawing everything")
}

func (ss *session[D, V]) checkFailure(injector string, n int) {
	t := ss.t
	d := ss.newDriver()
	ss.declare(d)
	ss.failing(d, injector, n, "programming")
	ss.check("after converging through failures")
	ss.quiet(d, "an Apply after converging through failures")

	ss.withdraw(d)
	ss.failing(d, injector, n, "removing")
	ss.pristine("after removing everything through failures")
	if t.Failed() {
		t.Logf("writes of the last convergence:\n%s", strings.Join(ss.e.rec.Log(), "\n"))
	}
}

// failing converges d with the next n writes failing, and fails the check
// if none did.
func (ss *session[D, V]) failing(d D, injector string, n int, what string) {
	ss.t.Helper()
	ss.e.rec.ResetCounts()
	ss.e.arm(injector, n)
	ss.converge(d)
	ss.e.disarm()
	if failed, _ := ss.e.rec.Failed(); failed == 0 {
		ss.fail(what+" hits failures", nil, "no write failed: the failures armed never reached the driver")
	}
}

func (ss *session[D, V]) checkBadInput() {
	d := ss.newDriver()
	ss.refuseAll(d)
	ss.quiet(d, "an Apply after refused declarations on a fresh instance")
	ss.pristine("after refused declarations on a fresh instance")

	ss.declare(d)
	ss.converge(d)
	ss.check("after converging")
	ss.refuseAll(d)
	ss.quiet(d, "an Apply after refused declarations")
	ss.check("after refused declarations")
}

// refuseAll makes every bad declaration and fails the check for each one
// the driver accepts.
func (ss *session[D, V]) refuseAll(d D) {
	ss.t.Helper()
	for i, b := range ss.s.BadInputs {
		var err error
		writes := ss.e.rec.Writes()
		ss.protect(fmt.Sprintf("bad input %d (%s)", i, b.Name), func() { err = b.Declare(d, ss.v) })
		if err == nil {
			ss.fail("bad input is refused", []string{b.Name}, "bad input %d (%s) accepted", i, b.Name)
		}
		if w := ss.e.rec.Writes() - writes; w > 0 {
			ss.fail("bad input writes nothing", []string{b.Name}, "bad input %d (%s) wrote %d times", i, b.Name, w)
		}
	}
}

func (ss *session[D, V]) checkRemoval() {
	ss.foreign(BeforeApply)
	d := ss.programmed()
	ss.foreign(AfterApply)
	ss.withdraw(d)
	ss.converge(d)
	ss.pristine("after withdrawing everything")

	// What an earlier run left is removed by a new instance that declares
	// nothing, and nothing else is.
	ss.programmed()
	ss.converge(ss.newDriver())
	ss.pristine("after a new instance that declares nothing")
}
