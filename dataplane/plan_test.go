package dataplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/textform/textformtest"
)

// planDriver plans and states what it is given, counting its Applies: a
// Plan or a State must not apply.
type planDriver struct {
	name    string
	phase   dataplane.Phase
	plan    []dataplane.Write
	err     error
	panics  bool
	applies int
}

func (d *planDriver) Name() string           { return d.name }
func (d *planDriver) Phase() dataplane.Phase { return d.phase }
func (d *planDriver) QueueResync()           {}
func (d *planDriver) Apply(context.Context) (dataplane.ApplyResult, error) {
	d.applies++
	return dataplane.ApplyResult{}, nil
}

func (d *planDriver) Plan(context.Context) (dataplane.Plan, error) {
	if d.panics {
		panic("plan: boom")
	}
	return dataplane.Plan{Driver: d.name, Writes: d.plan}, d.err
}

func (d *planDriver) State(context.Context) (dataplane.State, error) {
	if d.panics {
		panic("state: boom")
	}
	return dataplane.State{Driver: d.name, Owned: []dataplane.Object{{Kind: "route", Text: d.name}}}, d.err
}

// plainDriver implements neither Planner nor Stater.
type plainDriver struct{ planDriver }

func (plainDriver) Plan()  {}
func (plainDriver) State() {}

// TestLoopPlanAndState: the loop collects the plans and states of the
// drivers that have them, in phase order (registration order within a
// phase), skips the others, and reports a driver's error or panic by its
// name while returning the others' results. Nothing is applied.
func TestLoopPlanAndState(t *testing.T) {
	loop, err := dataplane.New(dataplane.Options{})
	require.NoError(t, err)
	w := dataplane.Write{Op: dataplane.WriteAdd, Kind: "route", Object: "10.0.0.0/24 dev eth0"}
	routes := &planDriver{name: "routes", phase: dataplane.PhaseRoutes, plan: []dataplane.Write{w}}
	tables := &planDriver{name: "tables", phase: dataplane.PhaseTables}
	sets := &planDriver{name: "sets", phase: dataplane.PhaseIPSetsUpdate}
	broken := &planDriver{name: "broken", phase: dataplane.PhaseRoutes, err: errors.New("dump failed")}
	panicky := &planDriver{name: "panicky", phase: dataplane.PhaseTunnelL2, panics: true}
	plain := &plainDriver{planDriver{name: "plain", phase: dataplane.PhaseRoutes}}
	for _, d := range []dataplane.Driver{routes, tables, broken, plain, panicky, sets} {
		require.NoError(t, loop.AddDriver(d))
	}

	plans, err := loop.Plan(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, "dataplane: driver broken: Plan: dump failed")
	assert.ErrorIs(t, err, dataplane.ErrPanic)
	assert.ErrorContains(t, err, "driver panicky: Plan")
	var names []string
	for _, p := range plans {
		names = append(names, p.Driver)
	}
	assert.Equal(t, []string{"sets", "tables", "routes"}, names)
	assert.Equal(t, []string{"plain"}, loop.Unplanned(), "what the plans leave out")
	assert.Equal(t, []dataplane.Write{w}, plans[2].Writes)
	assert.True(t, plans[0].Empty())

	states, err := loop.State(context.Background())
	require.Error(t, err)
	assert.ErrorContains(t, err, "dataplane: driver broken: State: dump failed")
	names = nil
	for _, s := range states {
		names = append(names, s.Driver)
	}
	assert.Equal(t, []string{"sets", "tables", "routes"}, names)
	for _, d := range []*planDriver{routes, tables, sets, broken, panicky} {
		assert.Zero(t, d.applies, "%s was applied", d.name)
	}
}

// TestPlanText: a Plan reads like a diff, one write a line.
func TestPlanText(t *testing.T) {
	p := dataplane.Plan{Driver: "routetable-ipv4-254", Writes: []dataplane.Write{
		{Op: dataplane.WriteAdd, Kind: "route", Object: "10.0.1.0/24 via 10.0.0.2 dev eth0 proto 80"},
		{Op: dataplane.WriteReplace, Kind: "sysctl", Object: "net.ipv4.ip_forward = 1", Detail: "was 0"},
		{Op: dataplane.WriteDelete, Kind: "element", Object: "10.0.0.7 in np-all"},
	}}
	assert.Equal(t, "routetable-ipv4-254: 3 writes\n"+
		"+ route 10.0.1.0/24 via 10.0.0.2 dev eth0 proto 80\n"+
		"~ sysctl net.ipv4.ip_forward = 1 (was 0)\n"+
		"- element 10.0.0.7 in np-all", p.String())
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"Writes":[{"Op":"add","Kind":"route"`, "JSON keeps the structure")
	assert.Equal(t, "x: no writes", dataplane.Plan{Driver: "x"}.String())
	assert.Equal(t, "x: 1 write\n- rule 100: from all lookup 100", dataplane.Plan{Driver: "x", Writes: []dataplane.Write{
		{Op: dataplane.WriteDelete, Kind: "rule", Object: "100: from all lookup 100"}}}.String())
	assert.Equal(t, "? route x", dataplane.Write{Kind: "route", Object: "x"}.String(), "an invalid op")

	b, err = json.Marshal(p.Writes[1])
	require.NoError(t, err)
	assert.JSONEq(t, `{"Op":"replace","Kind":"sysctl","Object":"net.ipv4.ip_forward = 1","Detail":"was 0"}`, string(b))
	textformtest.Enum(t, ".", map[string]dataplane.WriteOp{
		"WriteAdd": dataplane.WriteAdd, "WriteReplace": dataplane.WriteReplace, "WriteDelete": dataplane.WriteDelete,
	})
}

// TestStateText: a State counts what the driver owns and lists its drift
// and failures; its JSON gives each failure as its text.
func TestStateText(t *testing.T) {
	fail := &dataplane.ObjectError{Driver: "routetable", Op: "replace", Kind: "route", Name: "10.0.5.0/24",
		Err: errors.New("network is unreachable")}
	s := dataplane.State{Driver: "routetable-ipv4-254",
		Owned: []dataplane.Object{{Kind: "route", Text: "10.0.2.0/24 dev eth0 proto 80"}},
		Drift: []dataplane.Drift{
			{Kind: "route", Name: "10.0.1.0/24", Want: "10.0.1.0/24 dev eth0 proto 80"},
			{Kind: "route", Name: "10.0.2.0/24", Want: "10.0.2.0/24 dev eth0 proto 80 mtu 1400", Have: "10.0.2.0/24 dev eth0 proto 80"},
			{Kind: "route", Name: "10.0.3.0/24", Have: "10.0.3.0/24 dev eth1 proto 80"},
		},
		Failing: []*dataplane.ObjectError{fail},
	}
	assert.Equal(t, "routetable-ipv4-254: 1 owned, 3 drifted, 1 failing\n"+
		"  route 10.0.1.0/24: missing (want 10.0.1.0/24 dev eth0 proto 80)\n"+
		"  route 10.0.2.0/24: want 10.0.2.0/24 dev eth0 proto 80 mtu 1400, have 10.0.2.0/24 dev eth0 proto 80\n"+
		"  route 10.0.3.0/24: unwanted (have 10.0.3.0/24 dev eth1 proto 80)\n"+
		"! routetable: replace route 10.0.5.0/24: network is unreachable", s.String())
	assert.False(t, s.InSync())
	assert.True(t, dataplane.State{Owned: s.Owned}.InSync())
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"Failing":["routetable: replace route 10.0.5.0/24: network is unreachable"]`)
}

// TestSortState: owned objects by kind and text, drift by kind and name.
func TestSortState(t *testing.T) {
	s := dataplane.State{
		Owned: []dataplane.Object{{Kind: "route", Text: "b"}, {Kind: "neighbour", Text: "z"}, {Kind: "route", Text: "a"}},
		Drift: []dataplane.Drift{{Kind: "route", Name: "b"}, {Kind: "route", Name: "a"}, {Kind: "neighbour", Name: "c"}},
	}
	dataplane.SortState(&s)
	assert.Equal(t, []dataplane.Object{{Kind: "neighbour", Text: "z"}, {Kind: "route", Text: "a"}, {Kind: "route", Text: "b"}}, s.Owned)
	assert.Equal(t, []dataplane.Drift{{Kind: "neighbour", Name: "c"}, {Kind: "route", Name: "a"}, {Kind: "route", Name: "b"}}, s.Drift)
}
