package dataplane

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenBucket(t *testing.T) {
	type step struct {
		at    time.Duration // since start
		admit bool          // expected answer
		next  time.Duration // expected next token time, since start, before admitting
	}
	tests := []struct {
		name   string
		burst  int
		refill time.Duration
		steps  []step
	}{
		{"burst then one per refill", 3, time.Second, []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0},
			{0, false, time.Second},
			{999 * time.Millisecond, false, time.Second},
			{time.Second, true, time.Second},
			{time.Second, false, 2 * time.Second},
			{2500 * time.Millisecond, true, 2500 * time.Millisecond},
			// the half second already earned counts towards the next token
			{2500 * time.Millisecond, false, 3 * time.Second},
			{3 * time.Second, true, 3 * time.Second},
		}},
		{"refills cap at burst", 2, 100 * time.Millisecond, []step{
			{0, true, 0}, {0, true, 0}, {0, false, 100 * time.Millisecond},
			{time.Hour, true, time.Hour},
			{time.Hour, true, time.Hour},
			{time.Hour, false, time.Hour + 100*time.Millisecond},
		}},
		{"burst of one", 1, time.Second, []step{
			{0, true, 0}, {500 * time.Millisecond, false, time.Second},
			{1500 * time.Millisecond, true, 1500 * time.Millisecond},
			{1500 * time.Millisecond, false, 2500 * time.Millisecond},
		}},
		{"off", 1, -1, []step{
			{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTokenBucket(tc.burst, tc.refill, epoch)
			for i, s := range tc.steps {
				now := epoch.Add(s.at)
				require.Equal(t, epoch.Add(s.next), b.next(now), "step %d next", i)
				require.Equal(t, s.admit, b.admit(now), "step %d admit", i)
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	const maxDur = time.Duration(1<<63 - 1)
	tests := []struct {
		initial, limit time.Duration
		failures       int
		want           time.Duration
	}{
		{time.Second, time.Minute, 1, time.Second},
		{time.Second, time.Minute, 2, 2 * time.Second},
		{time.Second, time.Minute, 3, 4 * time.Second},
		{time.Second, time.Minute, 6, 32 * time.Second},
		{time.Second, time.Minute, 7, time.Minute},
		{time.Second, time.Minute, 1000, time.Minute},
		{time.Second, time.Second, 5, time.Second},
		{time.Hour, maxDur, 200, maxDur},
		{time.Second, time.Minute, 0, time.Second},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, backoffDelay(tc.initial, tc.limit, tc.failures),
			"initial %v limit %v failures %d", tc.initial, tc.limit, tc.failures)
	}
}

func TestJittered(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered(100*time.Second, 0.1, r)
		require.GreaterOrEqual(t, d, 90*time.Second)
		require.LessOrEqual(t, d, 110*time.Second)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 900, "values spread")
	assert.Equal(t, 100*time.Second, jittered(100*time.Second, 0, r))
	assert.Equal(t, time.Duration(0), jittered(0, 0.5, r))
	for range 100 {
		assert.Positive(t, jittered(time.Nanosecond, 0.99, r))
	}
}
