package nfcore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRecheckSchedule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := NewRecheck([]time.Duration{time.Second, 10 * time.Second})
	assert.False(t, r.Due(t0), "nothing scheduled before a write")
	assert.True(t, r.At().IsZero())

	r.Wrote(t0)
	assert.Equal(t, t0.Add(time.Second), r.At())
	assert.False(t, r.Due(t0.Add(time.Second-1)))
	assert.True(t, r.Due(t0.Add(time.Second)))

	// A clean recheck moves to the next delay, from when it ran.
	r.Clean(t0.Add(2 * time.Second))
	assert.Equal(t, t0.Add(12*time.Second), r.At())
	// A recheck that repaired something starts over.
	r.Wrote(t0.Add(12 * time.Second))
	assert.Equal(t, t0.Add(13*time.Second), r.At())
	r.Clean(t0.Add(13 * time.Second))
	r.Clean(t0.Add(23 * time.Second))
	assert.True(t, r.At().IsZero(), "after the last delay none is due")
	assert.False(t, r.Due(t0.Add(time.Hour)))

	var off Recheck
	off.Wrote(t0)
	assert.False(t, off.Due(t0.Add(time.Hour)), "no delays: never")
}
