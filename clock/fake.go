package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when the test says so. Timers and
// tickers created from it fire, in deadline order, during Advance or Set.
// It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed and replaced whenever the waiter set changes
}

type fakeWaiter struct {
	clock    *Fake
	deadline time.Time
	period   time.Duration // zero for a one-shot timer
	ch       chan time.Time
	active   bool
}

// NewFake returns a Fake clock that reads start until advanced.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires when the fake time reaches Now()+d.
// A timer with d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{clock: f, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	f.arm(w, d)
	f.fireDue()
	f.mu.Unlock()
	return fakeTimer{w}
}

// NewTicker returns a ticker with period d. It panics, like time.NewTicker,
// when d <= 0: that is a programming error, not an input error.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := &fakeWaiter{clock: f, ch: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	f.arm(w, d)
	f.mu.Unlock()
	return fakeTicker{w}
}

// Advance moves the fake time forward by d, firing every timer and ticker
// whose deadline is reached, in deadline order. A ticker that is due several
// times fires once per period, with ticks the receiver has not taken dropped,
// as with a real ticker. A negative d does nothing: time never goes back.
func (f *Fake) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLocked(f.now.Add(d))
}

// Set moves the fake time to t (never backwards) and fires what is due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.setLocked(t)
	}
}

// Waiters reports how many timers and tickers are currently armed.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// NextDeadline reports the earliest armed deadline, if any.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		return time.Time{}, false
	}
	f.sortLocked()
	return f.waiters[0].deadline, true
}

// BlockUntil waits until at least n timers or tickers are armed, or ctx is
// done. Tests use it to know that the code under test has reached its wait
// before they advance the clock.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		count, changed := len(f.waiters), f.changed
		f.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) setLocked(t time.Time) {
	for {
		f.sortLocked()
		if len(f.waiters) == 0 || f.waiters[0].deadline.After(t) {
			break
		}
		w := f.waiters[0]
		if w.deadline.After(f.now) { // a timer armed with d <= 0 fires at now
			f.now = w.deadline
		}
		f.fire(w)
	}
	f.now = t
}

// fireDue fires waiters already due at the current time.
func (f *Fake) fireDue() { f.setLocked(f.now) }

func (f *Fake) fire(w *fakeWaiter) {
	select {
	case w.ch <- f.now:
	default: // receiver is behind; drop, as time.Ticker does
	}
	if w.period > 0 {
		w.deadline = w.deadline.Add(w.period)
		return
	}
	f.disarm(w)
}

func (f *Fake) arm(w *fakeWaiter, d time.Duration) {
	w.deadline = f.now.Add(d)
	if !w.active {
		w.active = true
		f.waiters = append(f.waiters, w)
	}
	f.notify()
}

func (f *Fake) disarm(w *fakeWaiter) bool {
	if !w.active {
		return false
	}
	w.active = false
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	f.notify()
	return true
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Fake) sortLocked() {
	sort.SliceStable(f.waiters, func(i, j int) bool {
		return f.waiters[i].deadline.Before(f.waiters[j].deadline)
	})
}

// drain empties ch and reports whether it held a fire.
func drain(ch chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type fakeTimer struct{ w *fakeWaiter }

func (t fakeTimer) C() <-chan time.Time { return t.w.ch }

func (t fakeTimer) Stop() bool {
	f := t.w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	// A fire not yet received counts as pending, as with time.Timer.
	undelivered := drain(t.w.ch)
	return f.disarm(t.w) || undelivered
}

func (t fakeTimer) Reset(d time.Duration) bool {
	f := t.w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	undelivered := drain(t.w.ch)
	was := t.w.active || undelivered
	f.arm(t.w, d)
	f.fireDue()
	return was
}

type fakeTicker struct{ w *fakeWaiter }

func (t fakeTicker) C() <-chan time.Time { return t.w.ch }

func (t fakeTicker) Stop() {
	f := t.w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	drain(t.w.ch) // as with time.Ticker, no tick is received after Stop
	f.disarm(t.w)
}

func (t fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	f := t.w.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	drain(t.w.ch) // as with time.Ticker, no stale tick after Reset
	t.w.period = d
	f.arm(t.w, d)
}
