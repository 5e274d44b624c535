//go:build linux

package routerule

import "time"

// The backoff of a rule write the kernel refused: the first retry waits
// retryInitial, each further failure doubles the wait, up to retryMax.
const (
	retryInitial = 100 * time.Millisecond
	retryMax     = 30 * time.Second
)

// retry is the backoff of one write whose last attempt failed. The zero
// value is a write that has not failed.
type retry struct {
	failures int       // consecutive failures
	due      time.Time // the next attempt is not made before
	err      error     // the last failure, reported while the write waits
}

// failed returns b after one more failure, err, at now.
func (b retry) failed(now time.Time, err error) retry {
	b.failures++
	wait := retryMax
	if b.failures < 20 {
		wait = min(retryInitial<<(b.failures-1), retryMax)
	}
	b.due, b.err = now.Add(wait), err
	return b
}

// waiting reports whether the write must not be made at now.
func (b retry) waiting(now time.Time) bool { return now.Before(b.due) }
