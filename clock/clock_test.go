package clock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// received returns the value waiting on ch, if any, without blocking.
func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestOrReal(t *testing.T) {
	assert.Equal(t, Real(), OrReal(nil))
	f := NewFake(epoch)
	assert.Same(t, f, OrReal(f))
}

func TestRealClock(t *testing.T) {
	c := Real()
	start := c.Now()
	assert.GreaterOrEqual(t, c.Since(start), time.Duration(0))

	tm := c.NewTimer(time.Millisecond)
	v := <-tm.C()
	assert.False(t, v.Before(start))
	assert.False(t, tm.Stop(), "a fired timer is no longer pending")
	assert.False(t, tm.Reset(time.Hour))
	assert.True(t, tm.Stop())

	tk := c.NewTicker(time.Millisecond)
	<-tk.C()
	tk.Reset(time.Millisecond)
	<-tk.C()
	tk.Stop()
}

func TestFakeNowSinceSet(t *testing.T) {
	f := NewFake(epoch)
	assert.Equal(t, epoch, f.Now())
	f.Advance(90 * time.Second)
	assert.Equal(t, epoch.Add(90*time.Second), f.Now())
	assert.Equal(t, 90*time.Second, f.Since(epoch))

	f.Set(epoch.Add(time.Hour))
	assert.Equal(t, epoch.Add(time.Hour), f.Now())
	f.Set(epoch) // never backwards
	assert.Equal(t, epoch.Add(time.Hour), f.Now())
}

func TestFakeAdvanceNeverGoesBackwards(t *testing.T) {
	f := NewFake(epoch)
	f.Advance(-time.Minute)
	assert.Equal(t, epoch, f.Now())
}

func TestFakeTimer(t *testing.T) {
	tests := []struct {
		name      string
		d         time.Duration
		advance   []time.Duration
		wantFired bool
		wantAt    time.Time
	}{
		{name: "before deadline", d: time.Second, advance: []time.Duration{999 * time.Millisecond}},
		{name: "at deadline", d: time.Second, advance: []time.Duration{time.Second}, wantFired: true, wantAt: epoch.Add(time.Second)},
		{name: "past deadline reports the deadline", d: time.Second, advance: []time.Duration{5 * time.Second}, wantFired: true, wantAt: epoch.Add(time.Second)},
		{name: "in steps", d: time.Second, advance: []time.Duration{600 * time.Millisecond, 400 * time.Millisecond}, wantFired: true, wantAt: epoch.Add(time.Second)},
		{name: "zero fires at once", d: 0, wantFired: true, wantAt: epoch},
		{name: "negative fires at once with the current time", d: -time.Second, wantFired: true, wantAt: epoch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(epoch)
			tm := f.NewTimer(tc.d)
			for _, d := range tc.advance {
				f.Advance(d)
			}
			v, ok := received(tm.C())
			require.Equal(t, tc.wantFired, ok)
			if ok {
				assert.Equal(t, tc.wantAt, v)
				_, again := received(tm.C())
				assert.False(t, again, "a timer fires once")
				assert.Equal(t, 0, f.Waiters())
			} else {
				assert.Equal(t, 1, f.Waiters())
			}
			assert.False(t, f.Now().Before(epoch), "time never goes backwards")
		})
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(time.Second)
	assert.True(t, tm.Stop())
	assert.False(t, tm.Stop())
	f.Advance(time.Hour)
	_, ok := received(tm.C())
	assert.False(t, ok, "a stopped timer does not fire")

	assert.False(t, tm.Reset(time.Second), "a stopped timer was not pending")
	assert.True(t, tm.Reset(2*time.Second), "a re-armed timer is pending")
	f.Advance(time.Second)
	_, ok = received(tm.C())
	assert.False(t, ok, "Reset moved the deadline")
	f.Advance(time.Second)
	_, ok = received(tm.C())
	assert.True(t, ok)

	// A fire not yet received is discarded by Stop and by Reset, and
	// counts as pending, as with time.Timer (TestStopAndResetAsReal).
	tm.Reset(time.Second)
	f.Advance(time.Second)
	assert.True(t, tm.Stop(), "the fire was not received: pending")
	_, ok = received(tm.C())
	assert.False(t, ok, "Stop drains an undelivered fire")
	assert.False(t, tm.Stop())

	tm.Reset(time.Second)
	f.Advance(time.Second)
	assert.True(t, tm.Reset(time.Minute), "the fire was not received: pending")
	_, ok = received(tm.C())
	assert.False(t, ok, "Reset drains an undelivered fire")
	assert.Equal(t, 1, f.Waiters())

	// A fire received: no longer pending.
	tm.Reset(time.Second)
	f.Advance(time.Second)
	_, ok = received(tm.C())
	require.True(t, ok)
	assert.False(t, tm.Stop())
	assert.False(t, tm.Reset(time.Second))
}

// The Fake's Stop and Reset report what the real clock's do, for a timer
// whose fire is undelivered and for one whose fire was received.
func TestStopAndResetAsReal(t *testing.T) {
	f := NewFake(epoch)
	for name, c := range map[string]Clock{"real": Real(), "fake": f} {
		fired := func(Timer) {
			if c == Clock(f) {
				f.Advance(time.Millisecond)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		tm := c.NewTimer(time.Millisecond)
		fired(tm)
		assert.True(t, tm.Stop(), "%s: undelivered fire", name)
		tm.Reset(time.Millisecond)
		fired(tm)
		assert.True(t, tm.Reset(time.Hour), "%s: undelivered fire", name)
		assert.True(t, tm.Stop(), "%s: pending", name)
		tm.Reset(time.Millisecond)
		fired(tm)
		select {
		case <-tm.C():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no fire", name)
		}
		assert.False(t, tm.Stop(), "%s: fire received", name)
	}
}

func TestFakeTicker(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(10 * time.Second)
	_, ok := received(tk.C())
	assert.False(t, ok, "no tick at creation")

	f.Advance(10 * time.Second)
	v, ok := received(tk.C())
	require.True(t, ok)
	assert.Equal(t, epoch.Add(10*time.Second), v)

	// Several periods in one Advance: the receiver was not reading, so
	// only the first tick is kept, as with time.Ticker.
	f.Advance(35 * time.Second)
	v, ok = received(tk.C())
	require.True(t, ok)
	assert.Equal(t, epoch.Add(20*time.Second), v)
	_, ok = received(tk.C())
	assert.False(t, ok)
	next, ok := f.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, epoch.Add(50*time.Second), next)

	tk.Reset(time.Second)
	f.Advance(time.Second)
	v, ok = received(tk.C())
	require.True(t, ok)
	assert.Equal(t, epoch.Add(46*time.Second), v)

	tk.Stop()
	assert.Equal(t, 0, f.Waiters())
	f.Advance(time.Hour)
	_, ok = received(tk.C())
	assert.False(t, ok, "a stopped ticker does not tick")
}

func TestFakeTickerStopAndResetDropUndeliveredTick(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Second)
	f.Advance(time.Second)
	tk.Stop()
	_, ok := received(tk.C())
	assert.False(t, ok, "no tick is received after Stop")

	tk.Reset(time.Second)
	f.Advance(time.Second)
	tk.Reset(time.Minute)
	_, ok = received(tk.C())
	assert.False(t, ok, "no stale tick is received after Reset")
}

func TestFakeTickerRejectsNonPositivePeriod(t *testing.T) {
	f := NewFake(epoch)
	assert.Panics(t, func() { f.NewTicker(0) })
	tk := f.NewTicker(time.Second)
	assert.Panics(t, func() { tk.Reset(-time.Second) })
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	f := NewFake(epoch)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	tk := f.NewTicker(2 * time.Second)
	assert.Equal(t, 3, f.Waiters())
	next, ok := f.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, epoch.Add(time.Second), next)

	f.Advance(3 * time.Second)
	for _, c := range []struct {
		ch   <-chan time.Time
		want time.Duration
	}{{early.C(), time.Second}, {tk.C(), 2 * time.Second}, {late.C(), 3 * time.Second}} {
		v, ok := received(c.ch)
		require.True(t, ok)
		assert.Equal(t, epoch.Add(c.want), v)
	}
	assert.Equal(t, epoch.Add(3*time.Second), f.Now())
	assert.Equal(t, 1, f.Waiters(), "only the ticker is still armed")

	tk.Stop()
	_, ok = f.NextDeadline()
	assert.False(t, ok)
}

func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fired := make(chan time.Time)
	go func() {
		tm := f.NewTimer(time.Minute)
		fired <- <-tm.C()
	}()
	require.NoError(t, f.BlockUntil(ctx, 1))
	f.Advance(time.Minute)
	assert.Equal(t, epoch.Add(time.Minute), <-fired)

	short, cancelShort := context.WithCancel(context.Background())
	cancelShort()
	assert.ErrorIs(t, f.BlockUntil(short, 5), context.Canceled)
	assert.NoError(t, f.BlockUntil(short, 0), "already satisfied")
}

// Many goroutines arm, stop and reset timers while time moves; run with
// -race.
func TestFakeConcurrentUse(t *testing.T) {
	f := NewFake(epoch)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				tm := f.NewTimer(time.Duration(i%5) * time.Millisecond)
				tk := f.NewTicker(time.Millisecond)
				tm.Reset(time.Millisecond)
				_ = f.Now()
				tm.Stop()
				tk.Stop()
			}
		}()
	}
	for range 200 {
		f.Advance(time.Millisecond)
	}
	wg.Wait()
	assert.Equal(t, 0, f.Waiters())
	assert.Equal(t, epoch.Add(200*time.Millisecond), f.Now())
}
