package wireguard_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/wireguard"
)

var testTime = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func sprint(v any) string { return fmt.Sprintf("%v %s %#v %x", v, v, v, v)[:10] }

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// pass applies m as one loop pass does: CompleteDeferredWork, then its
// drivers phase by phase (the device and the rule's Apply, the table, the
// rule's ApplyDeletions). It returns the earliest retry they ask for and
// their errors, joined.
func pass(m *wireguard.Manager) (dataplane.ApplyResult, error) {
	ctx := context.Background()
	errs := []error{m.CompleteDeferredWork(ctx)}
	var res dataplane.ApplyResult
	add := func(r dataplane.ApplyResult, err error) {
		errs = append(errs, err)
		if r.RetryAfter > 0 && (res.RetryAfter <= 0 || r.RetryAfter < res.RetryAfter) {
			res = r
		}
	}
	for _, phase := range []dataplane.Phase{dataplane.PhaseTunnelL2, dataplane.PhaseRoutes} {
		for _, d := range m.Drivers() {
			if d.Phase() == phase {
				add(d.Apply(ctx))
			}
		}
	}
	for _, d := range m.Drivers() {
		if da, ok := d.(dataplane.DeletionApplier); ok {
			add(da.ApplyDeletions(ctx))
		}
	}
	return res, errors.Join(errs...)
}

// resync queues a resync of each of m's drivers, as the loop's periodic
// resync does.
func resync(m *wireguard.Manager) {
	for _, d := range m.Drivers() {
		d.QueueResync()
	}
}
