package endpoints

import (
	"context"

	"github.com/nodeplane/nodeplane/dataplane"
)

// RouteDriver returns the Manager's route table as a dataplane.Driver, to
// register with the loop in place of the table itself: its Apply applies
// the table and then tells the Manager which endpoints' routes were written
// and which failed, so that statuses say so (an endpoint is reported
// StateProgrammed only once an Apply wrote its routes). Its Phase,
// QueueResync and wake are the table's.
//
// When the table reports more failures than routetable.MaxReportedErrors,
// the endpoints whose failures it does not name keep their last status
// until an Apply names them or succeeds.
func (m *Manager) RouteDriver() dataplane.Driver { return m.driver }

// routeDriver is RouteDriver's value.
type routeDriver struct{ m *Manager }

// Apply applies the route table and passes its outcome to the Manager.
func (d *routeDriver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	res, err := d.m.o.Routes.Apply(ctx)
	d.m.afterRoutes(err)
	return res, err
}

// QueueResync is the table's.
func (d *routeDriver) QueueResync() { d.m.o.Routes.QueueResync() }

// Phase is the table's: dataplane.PhaseRoutes.
func (d *routeDriver) Phase() dataplane.Phase { return d.m.o.Routes.Phase() }

// SetWake hands the loop's wake function to the table, which calls it when
// an interface changes state.
func (d *routeDriver) SetWake(wake func()) { d.m.o.Routes.SetWake(wake) }

// Name is the table's, for the loop's logs.
func (d *routeDriver) Name() string { return d.m.o.Routes.Name() }

var _ dataplane.Wakeable = (*routeDriver)(nil)

// Plan is the table's: the route and neighbour writes its next Apply would
// make.
func (d *routeDriver) Plan(ctx context.Context) (dataplane.Plan, error) {
	return d.m.o.Routes.Plan(ctx)
}

// State is the table's.
func (d *routeDriver) State(ctx context.Context) (dataplane.State, error) {
	return d.m.o.Routes.State(ctx)
}

// Stats are the table's.
func (d *routeDriver) Stats() dataplane.DriverStats { return d.m.o.Routes.Stats() }

var (
	_ dataplane.Planner       = (*routeDriver)(nil)
	_ dataplane.Stater        = (*routeDriver)(nil)
	_ dataplane.StatsReporter = (*routeDriver)(nil)
)
