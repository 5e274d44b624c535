package dataplane

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueOrderAndWrap(t *testing.T) {
	q := newQueue(3)
	var out []any
	next := 0
	for round := range 10 {
		// push 1–3, drain 2 at a time: the ring wraps many times
		for i := range 1 + round%3 {
			_, err := q.tryPush(next+i, false)
			require.NoError(t, err)
		}
		want := []any{}
		for i := range 1 + round%3 {
			want = append(want, next+i)
		}
		next += len(want)
		var got []any
		for q.len() > 0 {
			out = q.drain(out, 2)
			got = append(got, out...)
		}
		assert.Equal(t, want, got, "round %d", round)
	}
}

func TestQueueForcedPushesGrowPastTheRing(t *testing.T) {
	q := newQueue(1)
	_, err := q.tryPush("a", false)
	require.NoError(t, err)
	_, err = q.tryPush("b", false)
	require.ErrorIs(t, err, ErrQueueFull)
	for _, m := range []string{"m1", "m2", "m3", "m4"} { // more than the two markers it sizes for
		_, err = q.tryPush(m, true)
		require.NoError(t, err)
	}
	assert.Equal(t, []any{"a", "m1", "m2", "m3", "m4"}, q.drain(nil, 100))
	assert.Zero(t, q.len())
}

func TestQueueReadySignal(t *testing.T) {
	q := newQueue(10)
	select {
	case <-q.ready:
		t.Fatal("ready on an empty queue")
	default:
	}
	for i := range 5 {
		_, err := q.tryPush(i, false)
		require.NoError(t, err)
	}
	<-q.ready
	assert.Len(t, q.drain(nil, 2), 2)
	<-q.ready // re-signalled: three left
	assert.Len(t, q.drain(nil, 10), 3)
	select {
	case <-q.ready:
		t.Fatal("ready after the queue emptied")
	default:
	}
}

func TestQueuePushWaitsForRoom(t *testing.T) {
	q := newQueue(1)
	require.NoError(t, q.push(context.Background(), 1))
	errc := make(chan error, 1)
	go func() { errc <- q.push(context.Background(), 2) }()
	// Drain until the waiting push has landed.
	var got []any
	for len(got) < 2 {
		<-q.ready
		got = append(got, q.drain(nil, 1)...)
	}
	require.NoError(t, <-errc)
	assert.Equal(t, []any{1, 2}, got)

	require.NoError(t, q.push(context.Background(), 3))
	go func() { errc <- q.push(context.Background(), 4) }()
	q.stop()
	assert.ErrorIs(t, <-errc, ErrStopped)
	assert.Zero(t, q.len(), "stop drops what was queued")
	q.stop() // twice is fine
}
