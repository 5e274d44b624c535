package routetable

import "time"

// The backoff of an object whose write failed: the first retry waits
// retryInitial, each further failure doubles the wait, up to retryMax. A
// new declaration of the object (or its interface coming up, which changes
// what is declared) forgets its failures.
const (
	retryInitial = 100 * time.Millisecond
	retryMax     = 30 * time.Second
)

// retry is the backoff of one object (a route, a neighbour entry, the
// conntrack deletion) whose last write failed. The zero value is an object
// that has not failed.
type retry struct {
	failures int       // consecutive failures
	due      time.Time // the next attempt is not made before
	err      error     // the last failure, reported while the object waits
}

// failed returns r after one more failure, err, at now.
func (r retry) failed(now time.Time, err error) retry {
	r.failures++
	wait := retryMax
	if r.failures < 20 {
		wait = min(retryInitial<<(r.failures-1), retryMax)
	}
	r.due, r.err = now.Add(wait), err
	return r
}

// waiting reports whether the object must not be written at now.
func (r retry) waiting(now time.Time) bool { return now.Before(r.due) }
