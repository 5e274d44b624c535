package idalloc_test

import (
	"math"
	"sync"
	"testing"

	"github.com/nodeplane/nodeplane/idalloc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustIndex(t *testing.T, opts idalloc.IndexOptions) *idalloc.IndexAllocator {
	t.Helper()
	a, err := idalloc.NewIndexAllocator(opts)
	require.NoError(t, err)
	return a
}

func TestIndexAllocatorDefaultRouteTables(t *testing.T) {
	a := mustIndex(t, idalloc.IndexOptions{})
	assert.Equal(t, 250, a.Free())
	got, err := a.GrabBlock(250)
	require.NoError(t, err)
	for i, idx := range got {
		assert.Equal(t, uint32(i+1), idx)
	}
	_, err = a.Grab()
	require.ErrorIs(t, err, idalloc.ErrExhausted)
	assert.Zero(t, a.Free())
	assert.Equal(t, 250, a.Len())
}

func TestIndexAllocatorSkipsReservedKernelTables(t *testing.T) {
	a := mustIndex(t, idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 252, Max: 257}}})
	got, err := a.GrabBlock(3)
	require.NoError(t, err)
	assert.Equal(t, []uint32{252, 256, 257}, got)
	for _, idx := range []uint32{253, 254, 255} {
		assert.False(t, a.Contains(idx), "%d", idx)
		assert.ErrorIs(t, a.Reserve(idx), idalloc.ErrNotInRange, "%d", idx)
	}
}

func TestIndexAllocatorErrors(t *testing.T) {
	// Each case starts from an allocator over 10-20 minus 15 with 10 and
	// 12 in use, runs one call, and checks the error and that nothing
	// changed.
	tests := []struct {
		name string
		call func(a *idalloc.IndexAllocator) error
		want []error
	}{
		{name: "reserve below range", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(9) }, want: []error{idalloc.ErrNotInRange}},
		{name: "reserve above range", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(21) }, want: []error{idalloc.ErrNotInRange}},
		{name: "reserve excluded", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(15) }, want: []error{idalloc.ErrNotInRange}},
		{name: "reserve max uint32", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(math.MaxUint32) }, want: []error{idalloc.ErrNotInRange}},
		{name: "reserve grabbed", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(10) }, want: []error{idalloc.ErrInUse}},
		{name: "reserve reserved", call: func(a *idalloc.IndexAllocator) error { return a.Reserve(12) }, want: []error{idalloc.ErrInUse}},
		{name: "release free", call: func(a *idalloc.IndexAllocator) error { return a.Release(11) }, want: []error{idalloc.ErrNotAllocated}},
		{name: "release out of range", call: func(a *idalloc.IndexAllocator) error { return a.Release(0) }, want: []error{idalloc.ErrNotAllocated, idalloc.ErrNotInRange}},
		{name: "release excluded", call: func(a *idalloc.IndexAllocator) error { return a.Release(15) }, want: []error{idalloc.ErrNotAllocated, idalloc.ErrNotInRange}},
		{name: "block of zero", call: func(a *idalloc.IndexAllocator) error { _, err := a.GrabBlock(0); return err }, want: []error{idalloc.ErrInvalidCount}},
		{name: "negative block", call: func(a *idalloc.IndexAllocator) error { _, err := a.GrabBlock(-3); return err }, want: []error{idalloc.ErrInvalidCount}},
		{name: "block too big", call: func(a *idalloc.IndexAllocator) error { _, err := a.GrabBlock(9); return err }, want: []error{idalloc.ErrExhausted}},
		{name: "block of max int", call: func(a *idalloc.IndexAllocator) error { _, err := a.GrabBlock(math.MaxInt); return err }, want: []error{idalloc.ErrExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustIndex(t, idalloc.IndexOptions{
				Ranges:     []idalloc.Range{{Min: 10, Max: 20}},
				Exclusions: []idalloc.Range{{Min: 15, Max: 15}},
			})
			idx, err := a.Grab()
			require.NoError(t, err)
			require.Equal(t, uint32(10), idx)
			require.NoError(t, a.Reserve(12))
			beforeFree, beforeUsed := a.Free(), a.Allocated()

			err = tt.call(a)
			require.Error(t, err)
			for _, want := range tt.want {
				assert.ErrorIs(t, err, want)
			}
			assert.Equal(t, beforeFree, a.Free())
			assert.Equal(t, beforeUsed, a.Allocated())
		})
	}
}

func TestIndexAllocatorReserveThenGrabSkips(t *testing.T) {
	// Adopting tables found in the kernel before grabbing new ones.
	a := mustIndex(t, idalloc.IndexOptions{})
	for _, idx := range []uint32{2, 3, 5} {
		require.NoError(t, a.Reserve(idx))
	}
	got, err := a.GrabBlock(4)
	require.NoError(t, err)
	assert.Equal(t, []uint32{1, 4, 6, 7}, got)
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7}, a.Allocated())
	assert.Equal(t, 250-7, a.Free())
}

func TestIndexAllocatorReleaseReturnsLowestFirst(t *testing.T) {
	a := mustIndex(t, idalloc.IndexOptions{})
	_, err := a.GrabBlock(10)
	require.NoError(t, err)
	for _, idx := range []uint32{7, 3, 9} {
		require.NoError(t, a.Release(idx))
	}
	var got []uint32
	for range 4 {
		idx, err := a.Grab()
		require.NoError(t, err)
		got = append(got, idx)
	}
	assert.Equal(t, []uint32{3, 7, 9, 11}, got)
}

func TestIndexAllocatorFullUint32Space(t *testing.T) {
	a := mustIndex(t, idalloc.IndexOptions{
		Ranges:              []idalloc.Range{{Min: 0, Max: math.MaxUint32}},
		NoDefaultExclusions: true,
	})
	require.NoError(t, a.Reserve(math.MaxUint32))
	require.NoError(t, a.Reserve(0))
	idx, err := a.Grab()
	require.NoError(t, err)
	assert.Equal(t, uint32(1), idx)
	assert.True(t, a.InUse(math.MaxUint32))
	assert.Equal(t, []uint32{0, 1, math.MaxUint32}, a.Allocated())
	require.NoError(t, a.Release(math.MaxUint32))
	assert.False(t, a.InUse(math.MaxUint32))
}

func TestIndexAllocatorConcurrentUse(t *testing.T) {
	a := mustIndex(t, idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: 1000}}, NoDefaultExclusions: true})
	const workers, rounds = 8, 300
	var mu sync.Mutex
	owner := map[uint32]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			var mine []uint32
			for i := range rounds {
				switch i % 3 {
				case 0, 1:
					idx, err := a.Grab()
					if err != nil {
						errs <- err
						continue
					}
					mu.Lock()
					if prev, dup := owner[idx]; dup {
						t.Errorf("index %d handed to worker %d while held by %d", idx, w, prev)
					}
					owner[idx] = w
					mu.Unlock()
					mine = append(mine, idx)
				case 2:
					idx := mine[0]
					mine = mine[1:]
					mu.Lock()
					delete(owner, idx)
					mu.Unlock()
					if err := a.Release(idx); err != nil {
						errs <- err
					}
				}
				_ = a.Free()
				_ = a.InUse(uint32(i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	assert.Equal(t, len(owner), a.Len())
	assert.Equal(t, 1000-len(owner), a.Free())
}
