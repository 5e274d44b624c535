package dataplane

import "time"

// Delay is the wait after the failures-th consecutive failure:
// Initial·2^(failures-1), capped at Max. Zero fields take
// DefaultBackoffInitial and DefaultBackoffMax; failures below 1 count as 1.
func (b Backoff) Delay(failures int) time.Duration {
	initial, limit := b.Initial, b.Max
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if limit <= 0 {
		limit = max(DefaultBackoffMax, initial)
	}
	return backoffDelay(initial, limit, failures)
}

// Retry is the backoff of one object whose write failed: a route, a rule,
// a set. Drivers keep one per failing object (in a map by the object's
// key, say), skip the object while it is Waiting, and report it in a
// PartialError until it is written. The zero value is an object that has
// not failed; a new declaration of the object should reset it to zero.
type Retry struct {
	// Failures counts the consecutive failed attempts.
	Failures int
	// Due is when the next attempt may be made.
	Due time.Time
	// Err is the last attempt's error.
	Err error
}

// Failed returns r after one more failure, err, at now: the next attempt
// is due after b.Delay of the failure count.
func (r Retry) Failed(b Backoff, now time.Time, err error) Retry {
	r.Failures++
	r.Due, r.Err = now.Add(b.Delay(r.Failures)), err
	return r
}

// Waiting reports whether the object must not be tried at now.
func (r Retry) Waiting(now time.Time) bool { return r.Failures > 0 && now.Before(r.Due) }

// RetryAfter is how long from now until r is due (at least 1ns when it is
// failing, so that a positive ApplyResult.RetryAfter still asks for a
// pass), or 0 for an object that has not failed.
func (r Retry) RetryAfter(now time.Time) time.Duration {
	if r.Failures == 0 {
		return 0
	}
	return max(r.Due.Sub(now), time.Nanosecond)
}
