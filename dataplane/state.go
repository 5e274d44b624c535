package dataplane

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Stater is implemented by drivers that can say what they hold in the
// kernel. The loop's State collects it from every driver that has it.
type Stater interface {
	// State returns what the driver owns in the kernel, how that differs
	// from what it wants, and what fails. It writes nothing; it reads the
	// kernel when the next Apply would (on the first call, after
	// QueueResync), else it reports the driver's view as of its last read
	// and writes. It is safe to call while the loop runs.
	State(ctx context.Context) (State, error)
}

// State is one driver's account of its slice of the kernel.
type State struct {
	// Driver is the driver's name, such as "routetable-ipv4-254".
	Driver string
	// Owned are the objects of the driver the kernel holds, in the
	// driver's canonical text, sorted by kind and text.
	Owned []Object
	// Drift are the objects whose kernel form differs from the desired
	// one: missing, different, or held but unwanted. It counts every
	// difference, also those the next Apply leaves for later (an object
	// waiting for its retry, one a foreign object blocks), so it may hold
	// more than the Plan. Sorted by kind and name.
	Drift []Drift
	// Failing are the objects whose last write failed, in the order they
	// first failed (the driver's Ledger.Errors).
	Failing []*ObjectError
}

// Object is one kernel object a driver owns: its kind and its text, as in
// a Write.
type Object struct {
	// Kind is what the object is ("route", "rule", "sysctl" …).
	Kind ObjectKind
	// Text is the object in the driver's canonical form.
	Text string
}

// String returns the kind and the text, such as "route 10.0.0.0/24 dev
// eth0 proto 80".
func (o Object) String() string { return string(o.Kind) + " " + o.Text }

// Drift is one object whose kernel form is not the desired one.
type Drift struct {
	// Kind is what the object is.
	Kind ObjectKind
	// Name identifies the object within its kind (a route's destination
	// and metric, a sysctl's key).
	Name string
	// Want is the desired form, empty when the object is not wanted.
	Want string
	// Have is the kernel's form, empty when the kernel lacks it.
	Have string
}

// String describes the drift in one line: "route 10.0.0.0/24: missing
// (want …)", "…: unwanted (have …)" or "…: want …, have …".
func (d Drift) String() string {
	pre := string(d.Kind) + " " + d.Name + ": "
	switch {
	case d.Have == "":
		return pre + "missing (want " + d.Want + ")"
	case d.Want == "":
		return pre + "unwanted (have " + d.Have + ")"
	}
	return pre + "want " + d.Want + ", have " + d.Have
}

// InSync reports whether the kernel holds what the driver wants and
// nothing fails: no Drift and no Failing.
func (s State) InSync() bool { return len(s.Drift) == 0 && len(s.Failing) == 0 }

// String returns the state as text: a header with the counts, then the
// drifts and the failures, one a line ("! " before a failure). The owned
// objects are counted, not listed.
func (s State) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d owned, %d drifted, %d failing", s.Driver, len(s.Owned), len(s.Drift), len(s.Failing))
	for _, d := range s.Drift {
		b.WriteString("\n  ")
		b.WriteString(d.String())
	}
	for _, f := range s.Failing {
		b.WriteString("\n! ")
		b.WriteString(f.Error())
	}
	return b.String()
}

// MarshalJSON encodes s as encoding/json does, but with each of Failing as
// its text, which it would write as {}.
func (s State) MarshalJSON() ([]byte, error) {
	type plain State
	failing := make([]string, len(s.Failing))
	for i, f := range s.Failing {
		failing[i] = f.Error()
	}
	return json.Marshal(struct {
		plain
		Failing []string
	}{plain(s), failing})
}

// SortState sorts s.Owned by kind and text and s.Drift by kind and name,
// the order State documents; a driver calls it on the State it returns.
func SortState(s *State) {
	slices.SortFunc(s.Owned, func(a, b Object) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Text, b.Text))
	})
	slices.SortFunc(s.Drift, func(a, b Drift) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
}

// State returns the State of every registered driver that implements
// Stater, in phase order (drivers of one phase in registration order).
// Nothing is written. A driver whose State fails (or panics) is left out
// and its error, naming it, is joined into the returned error. It may be
// called at any time, also while Run runs. A nil ctx is
// context.Background().
func (l *Loop) State(ctx context.Context) ([]State, error) {
	return collect(l, ctx, "State", func(ctx context.Context, s Stater) (State, error) { return s.State(ctx) })
}

// collect calls get on every registered driver that is an I, in phase
// order, and returns the results and the errors (named by driver and
// method), joined.
func collect[I, R any](l *Loop, ctx context.Context, method string, get func(context.Context, I) (R, error)) ([]R, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var out []R
	var errs []error
	l.eachDriver(func(e *driverEntry) {
		x, ok := e.d.(I)
		if !ok {
			return
		}
		var r R
		err := safeCall(func() (err error) {
			r, err = get(ctx, x)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("dataplane: driver %s: %s: %w", e.name, method, err))
			return
		}
		out = append(out, r)
	})
	return out, errors.Join(errs...)
}

// eachDriver calls fn for every registered driver in phase order
// (registration order within a phase), outside the registration lock.
func (l *Loop) eachDriver(fn func(*driverEntry)) {
	l.regMu.Lock()
	drivers := slices.Clone(l.drivers)
	l.regMu.Unlock()
	slices.SortStableFunc(drivers, func(a, b *driverEntry) int { return cmp.Compare(a.phase, b.phase) })
	for _, e := range drivers {
		fn(e)
	}
}
