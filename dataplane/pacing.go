package dataplane

import (
	"math/rand/v2"
	"time"
)

// tokenBucket admits at most burst events at once and earns one back every
// refill. It reads time only from its arguments, so it is deterministic. A
// non-positive refill admits everything.
type tokenBucket struct {
	burst  int
	refill time.Duration
	tokens int
	stamp  time.Time // time up to which refills have been counted
}

func newTokenBucket(burst int, refill time.Duration, now time.Time) *tokenBucket {
	return &tokenBucket{burst: burst, refill: refill, tokens: burst, stamp: now}
}

// fill adds the tokens earned since the last call.
func (b *tokenBucket) fill(now time.Time) {
	if b.tokens >= b.burst {
		b.stamp = now
		return
	}
	elapsed := now.Sub(b.stamp)
	if elapsed < b.refill {
		return
	}
	earned := elapsed / b.refill
	if earned >= time.Duration(b.burst-b.tokens) {
		b.tokens = b.burst
		b.stamp = now
		return
	}
	b.tokens += int(earned)
	b.stamp = b.stamp.Add(earned * b.refill)
}

// admit takes a token if one is available.
func (b *tokenBucket) admit(now time.Time) bool {
	if b.refill <= 0 {
		return true
	}
	b.fill(now)
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

// next returns when a token will be available (now, if one is).
func (b *tokenBucket) next(now time.Time) time.Time {
	if b.refill <= 0 {
		return now
	}
	b.fill(now)
	if b.tokens > 0 {
		return now
	}
	return b.stamp.Add(b.refill)
}

// backoffDelay returns the wait after the failures-th consecutive failure:
// initial·2^(failures-1), capped at limit.
func backoffDelay(initial, limit time.Duration, failures int) time.Duration {
	d := initial
	for i := 1; i < failures && d < limit; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// jittered spreads d by up to ±fraction·d, drawing from r.
func jittered(d time.Duration, fraction float64, r *rand.Rand) time.Duration {
	if fraction <= 0 || d <= 0 {
		return d
	}
	spread := float64(d) * fraction * (2*r.Float64() - 1)
	return d + time.Duration(spread)
}
