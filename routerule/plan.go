package routerule

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/dataplane"
)

// kindRule is the kind of the instance's objects in its Plan, State and
// errors.
const kindRule dataplane.ObjectKind = "rule"

// Plan returns the rule additions and deletions the next Apply would
// make, in its order (make before break; a priority the kernel's wildcard
// matching makes ambiguous is rebuilt), counting every write a success.
// It writes nothing: it decides with Apply's own code on a copy of the
// model. It reads the kernel when the next Apply would (the first call,
// after QueueResync), and that read serves the Apply. Rules waiting for
// their retry are not in it. It implements dataplane.Planner. A nil ctx
// is context.Background().
func (r *Rules) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := dataplane.Plan{Driver: r.opt.name}
	r.failed.Begin()
	if err := r.read(ctx); err != nil {
		return p, err
	}
	if !r.dirty {
		return p, nil
	}
	model := r.groups
	defer func() { r.groups = model }()
	r.groups = make(map[uint32][]*entry, len(model))
	for prio, g := range model {
		c := make([]*entry, len(g))
		for i, e := range g {
			x := *e
			c[i] = &x
		}
		r.groups[prio] = c
	}
	r.converge(ctx, &applyState{seen: map[write]bool{}, plan: &p.Writes})
	if err := ctx.Err(); err != nil {
		return dataplane.Plan{Driver: r.opt.name}, fmt.Errorf("routerule: %s: %w", r.opt.name, err)
	}
	return p, nil
}

// State returns the rules of the instance in the kernel (at its
// priorities), the desired rules the kernel lacks and the rules of its
// it holds but does not want, and the failing writes. It writes nothing;
// it reads the kernel as Plan does. It implements dataplane.Stater. A nil
// ctx is context.Background().
func (r *Rules) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := dataplane.State{Driver: r.opt.name}
	if err := r.read(ctx); err != nil {
		return s, err
	}
	held := map[Rule]bool{}
	for _, g := range r.groups {
		for _, e := range g {
			if e.gone || e.kernels {
				continue
			}
			s.Owned = append(s.Owned, dataplane.Object{Kind: kindRule, Text: describe(e)})
			if d, ok := r.desired[e.rule.key()]; ok && e.ok && d == e.rule && !held[d] {
				held[d] = true
				continue
			}
			s.Drift = append(s.Drift, dataplane.Drift{Kind: kindRule, Name: describe(e), Have: describe(e)})
		}
	}
	for _, d := range r.desired {
		if !held[d] {
			s.Drift = append(s.Drift, dataplane.Drift{Kind: kindRule, Name: d.String(), Want: d.String()})
		}
	}
	s.Failing = r.failed.Errors()
	dataplane.SortState(&s)
	return s, nil
}

var (
	_ dataplane.Planner = (*Rules)(nil)
	_ dataplane.Stater  = (*Rules)(nil)
)
