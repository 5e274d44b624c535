package managertest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
)

// Pass runs one apply pass as a dataplane.Loop runs it, but synchronously
// and without its policy: CompleteDeferredWork of every manager in order,
// then every driver's Apply phase by phase, then ApplyDeletions of every
// dataplane.DeletionApplier. It returns the joined errors; an error
// wrapping dataplane.ErrPartial comes with the drivers' shortest RetryAfter.
func Pass(ctx context.Context, managers []dataplane.Manager, drivers ...dataplane.Driver) (dataplane.ApplyResult, error) {
	var errs []error
	for _, m := range managers {
		if err := m.CompleteDeferredWork(ctx); err != nil {
			errs = append(errs, fmt.Errorf("manager %T: %w", m, err))
		}
	}
	ordered := slices.Clone(drivers)
	slices.SortStableFunc(ordered, func(a, b dataplane.Driver) int { return int(a.Phase()) - int(b.Phase()) })
	var res dataplane.ApplyResult
	keep := func(r dataplane.ApplyResult, err error, d dataplane.Driver) {
		if err != nil {
			errs = append(errs, fmt.Errorf("driver %T: %w", d, err))
		}
		if r.RetryAfter > 0 && (res.RetryAfter == 0 || r.RetryAfter < res.RetryAfter) {
			res.RetryAfter = r.RetryAfter
		}
	}
	for _, d := range ordered {
		r, err := d.Apply(ctx)
		keep(r, err, d)
	}
	for _, d := range ordered {
		if del, ok := d.(dataplane.DeletionApplier); ok {
			r, err := del.ApplyDeletions(ctx)
			keep(r, err, d)
		}
	}
	return res, errors.Join(errs...)
}
