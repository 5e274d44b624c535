//go:build linux

package nlutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// interrupted is how netlink v1.3.1 reports an interrupted dump: the
// partial result together with ErrDumpInterrupted.
func interrupted(n int) ([]int, error) {
	return make([]int, n), netlink.ErrDumpInterrupted
}

func TestRetryDump(t *testing.T) {
	boom := errors.New("EPERM or such")
	tests := []struct {
		name      string
		attempts  int
		results   []func() ([]int, error) // one per call; the last repeats
		wantCalls int
		wantLen   int
		wantErrs  []error // errors.Is targets; empty means success
	}{
		{
			name:      "clean first time",
			attempts:  3,
			results:   []func() ([]int, error){func() ([]int, error) { return []int{1, 2}, nil }},
			wantCalls: 1,
			wantLen:   2,
		},
		{
			name:     "interrupted then clean",
			attempts: 3,
			results: []func() ([]int, error){
				func() ([]int, error) { return interrupted(1) },
				func() ([]int, error) { return interrupted(2) },
				func() ([]int, error) { return []int{7, 8, 9}, nil },
			},
			wantCalls: 3,
			wantLen:   3,
		},
		{
			name:      "always interrupted returns the last partial result",
			attempts:  4,
			results:   []func() ([]int, error){func() ([]int, error) { return interrupted(5) }},
			wantCalls: 4,
			wantLen:   5,
			wantErrs:  []error{netlink.ErrDumpInterrupted},
		},
		{
			name:     "interruption wrapped by the caller still counts",
			attempts: 2,
			results: []func() ([]int, error){
				func() ([]int, error) { return nil, fmt.Errorf("ctx: %w", netlink.ErrDumpInterrupted) },
				func() ([]int, error) { return []int{1}, nil },
			},
			wantCalls: 2,
			wantLen:   1,
		},
		{
			name:      "other errors are returned at once",
			attempts:  5,
			results:   []func() ([]int, error){func() ([]int, error) { return nil, boom }},
			wantCalls: 1,
			wantErrs:  []error{boom},
		},
		{
			name:      "one attempt",
			attempts:  1,
			results:   []func() ([]int, error){func() ([]int, error) { return interrupted(1) }},
			wantCalls: 1,
			wantLen:   1,
			wantErrs:  []error{netlink.ErrDumpInterrupted},
		},
		{
			name:     "zero attempts",
			attempts: 0,
			results:  []func() ([]int, error){func() ([]int, error) { return nil, nil }},
			wantErrs: []error{ErrInvalidArgument},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			fn := func() ([]int, error) {
				i := min(calls, len(tc.results)-1)
				calls++
				return tc.results[i]()
			}
			// The real clock: the backoff is a few milliseconds.
			res, err := retryDump(context.Background(), clock.Real(), tc.attempts, fn)
			assert.Equal(t, tc.wantCalls, calls)
			assert.Len(t, res, tc.wantLen)
			if len(tc.wantErrs) == 0 {
				require.NoError(t, err)
			}
			for _, want := range tc.wantErrs {
				require.ErrorIs(t, err, want)
			}
		})
	}
}

func TestRetryDumpBadInput(t *testing.T) {
	_, err := retryDump[int](context.Background(), clock.Real(), 3, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	//lint:ignore SA1012 a nil context is the bad input under test
	_, err = retryDump(nil, clock.Real(), 3, func() ([]int, error) { return nil, nil })
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestRetryDumpBacksOffOnTheClock(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	calls := make(chan struct{}, 10)
	type result struct {
		res []int
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := retryDump(ctx, fake, 10, func() ([]int, error) {
			calls <- struct{}{}
			if len(calls) == 4 {
				return []int{42}, nil
			}
			return interrupted(0)
		})
		done <- result{res, err}
	}()

	// Each wait doubles: 1ms, 2ms, 4ms.
	for _, want := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond} {
		require.NoError(t, fake.BlockUntil(ctx, 1))
		next, ok := fake.NextDeadline()
		require.True(t, ok)
		assert.Equal(t, want, next.Sub(fake.Now()))
		fake.Advance(want)
	}
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, []int{42}, r.res)
	assert.Len(t, calls, 4)
}

func TestRetryDumpHonoursContext(t *testing.T) {
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))

	t.Run("already done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		_, err := retryDump(ctx, fake, 3, func() ([]int, error) { called = true; return nil, nil })
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, called)
	})

	t.Run("cancelled during the backoff", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := retryDump(ctx, fake, 3, func() ([]int, error) { return interrupted(1) })
			errc <- err
		}()
		wait, cancelWait := context.WithTimeout(ctx, 5*time.Second)
		defer cancelWait()
		require.NoError(t, fake.BlockUntil(wait, 1))
		cancel()
		err := <-errc
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, netlink.ErrDumpInterrupted)
		assert.Equal(t, 0, fake.Waiters(), "the backoff timer is stopped")
	})
}

func TestListHelpersRejectNilHandle(t *testing.T) {
	ctx := context.Background()
	calls := []func() error{
		func() error { _, err := LinkList(ctx, nil); return err },
		func() error { _, err := AddrList(ctx, nil, nil, netlink.FAMILY_ALL); return err },
	}
	for i, call := range calls {
		assert.ErrorIs(t, call(), ErrNilHandle, "helper %d", i)
	}
}
