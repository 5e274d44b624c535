package clock

import "time"

// Clock is the source of time for every nodeplane component that waits,
// schedules or timestamps. Components take a Clock in their options; nil
// means Real().
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// NewTimer returns a Timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that fires every d. d must be positive.
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer, the injectable counterpart of *time.Timer.
// Its channel has a buffer of one, so a fire is never lost while the
// receiver is busy, and a fire is never delivered twice.
type Timer interface {
	// C returns the channel on which the fire time is delivered.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped a pending timer; a fire not yet received counts as pending
	// (as with time.Timer since Go 1.23), and is drained.
	Stop() bool
	// Reset re-arms the timer to fire after d, discarding any undelivered
	// fire. It reports whether the timer was pending (as Stop counts it).
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at a fixed interval, the injectable counterpart of
// *time.Ticker. Ticks that the receiver is too slow to take are dropped.
type Ticker interface {
	// C returns the channel on which ticks are delivered.
	C() <-chan time.Time
	// Stop turns the ticker off; no more ticks are sent.
	Stop()
	// Reset stops the ticker and restarts it with period d.
	Reset(d time.Duration)
}

// Real returns the Clock backed by package time.
func Real() Clock { return realClock{} }

// OrReal returns c, or Real() when c is nil. Option structs use it to
// apply the default.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }

// Since Go 1.23 Stop and Reset on a time.Timer guarantee that no stale value
// is received afterwards, which is the contract of Timer.
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
