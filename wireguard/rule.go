package wireguard

import (
	"context"

	"github.com/nodeplane/nodeplane/dataplane"
)

// ruleDriver is RuleDriver's value: the Manager's rule, around the routes
// of a pass, and the removal of the device when the Manager is disabled.
type ruleDriver struct{ m *Manager }

// Name is "wireguard-rule-IPv4" or "wireguard-rule-IPv6", for the loop's
// logs.
func (d *ruleDriver) Name() string { return "wireguard-rule-" + d.m.cfg.Family.String() }

// Phase is dataplane.PhaseTunnelL2, before the routes: see Apply and
// ApplyDeletions for what comes before and after them.
func (d *ruleDriver) Phase() dataplane.Phase { return dataplane.PhaseTunnelL2 }

// QueueResync makes the next Apply read the rules again.
func (d *ruleDriver) QueueResync() { d.m.rules.QueueResync() }

// Apply runs before the routes are written. Enabled, it keeps the rule
// once it was added (repairing it). Disabled, it removes the rule and,
// once it is gone, withdraws the routes from the table, which removes them
// next; the device goes last (ApplyDeletions).
func (d *ruleDriver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return dataplane.ApplyResult{}, nil
	case m.enabled && !m.ruleSet:
		return dataplane.ApplyResult{}, nil
	case m.enabled:
		return d.applyRules(ctx)
	}
	m.ruleSet = false
	if err := m.rules.SetRules(nil); err != nil {
		return dataplane.ApplyResult{}, err
	}
	if res, err := m.rules.Apply(ctx); err != nil {
		return res, err
	}
	m.ruleUp = false
	return dataplane.ApplyResult{}, m.withdrawRoutes()
}

// ApplyDeletions runs after the routes are written (it makes the driver a
// dataplane.DeletionApplier, which the loop applies in
// dataplane.PhaseIPSetsDelete). Enabled, it adds the rule once the device
// is configured and every route is in the table: a rule that sends traffic
// to the table never finds it without them. Disabled, it deletes the
// device once the rule and the routes are gone.
func (d *ruleDriver) ApplyDeletions(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m := d.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return dataplane.ApplyResult{}, nil
	}
	if !m.enabled {
		if st := m.table.Stats(); m.ruleUp || st.Desired > 0 || st.InKernel > 0 {
			return dataplane.ApplyResult{}, nil // the rule's or the table's retry brings the next pass
		}
		return dataplane.ApplyResult{}, m.deleteDevice(ctx)
	}
	if !m.ruleSet && m.devOK && m.routesReady() {
		if err := m.rules.SetRule(m.rule); err != nil {
			return dataplane.ApplyResult{}, err
		}
		m.ruleSet = true
	}
	if !m.ruleSet {
		return dataplane.ApplyResult{}, nil
	}
	return d.applyRules(ctx)
}

// applyRules applies the rules driver and notes whether the rule is in.
func (d *ruleDriver) applyRules(ctx context.Context) (dataplane.ApplyResult, error) {
	res, err := d.m.rules.Apply(ctx)
	d.m.ruleUp = err == nil
	return res, err
}

// Plan is the rules driver's (routerule.Rules.Plan): the rule writes its
// next Apply would make for the rule as declared so far (ApplyDeletions
// declares it once the device and the routes are ready, and Apply
// withdraws it when the Manager is disabled).
func (d *ruleDriver) Plan(ctx context.Context) (dataplane.Plan, error) { return d.m.rules.Plan(ctx) }

// State is the rules driver's.
func (d *ruleDriver) State(ctx context.Context) (dataplane.State, error) { return d.m.rules.State(ctx) }

// Stats are the rules driver's.
func (d *ruleDriver) Stats() dataplane.DriverStats { return d.m.rules.Stats() }

var (
	_ dataplane.Named           = (*ruleDriver)(nil)
	_ dataplane.DeletionApplier = (*ruleDriver)(nil)
	_ dataplane.Planner         = (*ruleDriver)(nil)
	_ dataplane.Stater          = (*ruleDriver)(nil)
	_ dataplane.StatsReporter   = (*ruleDriver)(nil)
)
