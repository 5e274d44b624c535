package nfcore

import (
	"bytes"
	"log/slog"
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

func TestRecheckSettle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	r := NewRecheck([]time.Duration{time.Second, 10 * time.Second})

	r.Settle(t0, false, false, log)
	assert.True(t, r.At().IsZero(), "no write, no recheck: nothing scheduled")
	r.Settle(t0, true, false, log)
	assert.Equal(t, t0.Add(time.Second), r.At(), "a write starts the schedule")
	assert.Empty(t, logged.String(), "an ordinary write is not logged")

	r.Settle(t0.Add(time.Second), false, true, log)
	assert.Equal(t, t0.Add(11*time.Second), r.At(), "a clean recheck moves on")
	r.Settle(t0.Add(11*time.Second), true, true, log)
	assert.Equal(t, t0.Add(12*time.Second), r.At(), "a recheck that wrote starts over")
	assert.Contains(t, logged.String(), "repaired drift")
}
