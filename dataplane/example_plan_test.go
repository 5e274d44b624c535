package dataplane_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
)

// setDriver stands in for a driver of a kernel set: it wants some
// members, the kernel holds others, and it can say what its Apply would
// write (Planner) and what it holds (Stater) without writing.
type setDriver struct {
	name         string
	want, kernel []string
}

func (d *setDriver) Name() string           { return d.name }
func (d *setDriver) Phase() dataplane.Phase { return dataplane.PhaseIPSetsUpdate }
func (d *setDriver) QueueResync()           {}

// writes is the one place that decides the writes: Apply makes them, Plan
// lists them.
func (d *setDriver) writes() []dataplane.Write {
	var out []dataplane.Write
	for _, m := range d.want {
		if !slices.Contains(d.kernel, m) {
			out = append(out, dataplane.Write{Op: dataplane.WriteAdd, Kind: "element", Object: m + " in " + d.name})
		}
	}
	for _, m := range d.kernel {
		if !slices.Contains(d.want, m) {
			out = append(out, dataplane.Write{Op: dataplane.WriteDelete, Kind: "element", Object: m + " in " + d.name})
		}
	}
	return out
}

func (d *setDriver) Apply(context.Context) (dataplane.ApplyResult, error) {
	if len(d.writes()) > 0 {
		d.kernel = slices.Clone(d.want)
	}
	return dataplane.ApplyResult{}, nil
}

func (d *setDriver) Plan(context.Context) (dataplane.Plan, error) {
	return dataplane.Plan{Driver: d.name, Writes: d.writes()}, nil
}

func (d *setDriver) State(context.Context) (dataplane.State, error) {
	s := dataplane.State{Driver: d.name}
	for _, m := range d.kernel {
		s.Owned = append(s.Owned, dataplane.Object{Kind: "element", Text: m + " in " + d.name})
	}
	for _, w := range d.writes() {
		dr := dataplane.Drift{Kind: w.Kind, Name: w.Object}
		if w.Op == dataplane.WriteAdd {
			dr.Want = w.Object
		} else {
			dr.Have = w.Object
		}
		s.Drift = append(s.Drift, dr)
	}
	dataplane.SortState(&s)
	return s, nil
}

// Loop.Plan collects the plan of every driver that is a Planner, in phase
// order, without writing: a dry run, on a loop that runs or not (here an
// inactive one, which never applies). Loop.State does the same with each
// Stater's state.
func ExampleLoop_Plan() {
	loop, _ := dataplane.New(dataplane.Options{Inactive: true})
	_ = loop.AddDriver(&setDriver{name: "np-pods", want: []string{"10.0.0.1", "10.0.0.2"}, kernel: []string{"10.0.0.1", "10.0.0.9"}})
	_ = loop.AddDriver(&routeDriver{}) // not a Planner: not in the plan

	plans, err := loop.Plan(context.Background())
	for _, p := range plans {
		fmt.Println(p)
	}
	fmt.Println("error:", err)
	states, _ := loop.State(context.Background())
	for _, s := range states {
		fmt.Println(s)
	}
	// Output:
	// np-pods: 2 writes
	// + element 10.0.0.2 in np-pods
	// - element 10.0.0.9 in np-pods
	// error: <nil>
	// np-pods: 2 owned, 2 drifted, 0 failing
	//   element 10.0.0.2 in np-pods: missing (want 10.0.0.2 in np-pods)
	//   element 10.0.0.9 in np-pods: unwanted (have 10.0.0.9 in np-pods)
}
