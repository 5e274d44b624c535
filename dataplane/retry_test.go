package dataplane

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffDelayMethod(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 5 * time.Second}
	for failures, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 1000: 5 * time.Second} {
		assert.Equal(t, want, b.Delay(failures), "failures %d", failures)
	}
	assert.Equal(t, DefaultBackoffInitial, Backoff{}.Delay(1))
	assert.Equal(t, DefaultBackoffMax, Backoff{}.Delay(64))
}

func TestRetry(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 4 * time.Second}
	var r Retry
	assert.False(t, r.Waiting(epoch))
	assert.Zero(t, r.RetryAfter(epoch))
	boom := errors.New("refused")
	r = r.Failed(b, epoch, boom)
	assert.Equal(t, 1, r.Failures)
	assert.ErrorIs(t, r.Err, boom)
	assert.True(t, r.Waiting(epoch.Add(999*time.Millisecond)))
	assert.False(t, r.Waiting(epoch.Add(time.Second)))
	assert.Equal(t, 400*time.Millisecond, r.RetryAfter(epoch.Add(600*time.Millisecond)))
	assert.Equal(t, time.Nanosecond, r.RetryAfter(epoch.Add(time.Hour)), "an overdue retry still asks for a pass")
	now := epoch.Add(time.Second)
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second} {
		r = r.Failed(b, now, boom)
		assert.Equal(t, now.Add(want), r.Due)
		now = r.Due
	}
}

func ExampleRetry() {
	// A driver keeps one Retry per failing object and skips it until due.
	b := Backoff{Initial: 100 * time.Millisecond, Max: 30 * time.Second}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var r Retry
	r = r.Failed(b, now, errors.New("route refused"))
	r = r.Failed(b, r.Due, errors.New("route refused"))
	later := now.Add(250 * time.Millisecond)
	fmt.Println(r.Failures, r.Waiting(later), r.RetryAfter(later))
	// Output: 2 true 50ms
}
