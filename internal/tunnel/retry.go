package tunnel

import (
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// DefaultBackoff paces the retries of one object (a device, a neighbour,
// an FDB entry) the kernel refused.
var DefaultBackoff = dataplane.Backoff{Initial: 100 * time.Millisecond, Max: 30 * time.Second}

// maxKept bounds the object errors a PartialError quotes.
const maxKept = 16

// Retries is the backoff of each failing object of a driver, by key.
type Retries[K comparable] struct {
	m map[K]dataplane.Retry
}

// Waiting reports whether k failed and its next attempt is not due at now.
func (r *Retries[K]) Waiting(k K, now time.Time) bool {
	rt, ok := r.m[k]
	return ok && rt.Waiting(now)
}

// Failing reports whether k failed and has not succeeded since.
func (r *Retries[K]) Failing(k K) bool {
	_, ok := r.m[k]
	return ok
}

// Fail records a failed attempt of k at now.
func (r *Retries[K]) Fail(k K, now time.Time, err error) {
	if r.m == nil {
		r.m = map[K]dataplane.Retry{}
	}
	r.m[k] = r.m[k].Failed(DefaultBackoff, now, err)
}

// Clear forgets k's failures: it succeeded, or it is no longer wanted or
// was declared anew.
func (r *Retries[K]) Clear(k K) {
	if len(r.m) == 0 {
		return
	}
	delete(r.m, k)
	if len(r.m) == 0 {
		r.m = nil // iterating a map costs its capacity: start afresh
	}
}

// Len returns the number of failing objects.
func (r *Retries[K]) Len() int { return len(r.m) }

// Collect adds the failing objects to pe: those in tried as failed in
// this Apply, the others as waiting for their retry. It returns the delay
// until the first of them is due (0 when none fails).
func (r *Retries[K]) Collect(pe *dataplane.PartialError, now time.Time, tried map[K]bool) time.Duration {
	var after time.Duration
	for k, rt := range r.m {
		if tried[k] {
			pe.Failed++
		} else {
			pe.Waiting++
		}
		if len(pe.Errs) < maxKept {
			pe.Errs = append(pe.Errs, rt.Err)
		}
		after = MinAfter(after, rt.RetryAfter(now))
	}
	return after
}

// MinAfter returns the smaller of two positive delays, a zero one meaning
// none.
func MinAfter(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// Outcome returns an Apply's result from the failing objects pe collected:
// pe with RetryAfter set to after when any fails or waits, and otherwise
// nothing.
func Outcome(pe *dataplane.PartialError, after time.Duration) (dataplane.ApplyResult, error) {
	if pe.Failed+pe.Waiting == 0 {
		return dataplane.ApplyResult{}, nil
	}
	return dataplane.ApplyResult{RetryAfter: after}, pe
}
