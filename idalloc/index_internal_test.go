package idalloc

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// indexModel is the obviously-correct reference: a membership predicate over
// a small window of the uint32 space and a map of used indices.
type indexModel struct {
	base, size uint32 // window [base, base+size)
	contains   func(uint32) bool
	used       map[uint32]bool
}

func newIndexModel(opts IndexOptions, base, size uint32) *indexModel {
	ranges := opts.Ranges
	if len(ranges) == 0 {
		ranges = DefaultRouteTableRanges()
	}
	excl := slices.Clone(opts.Exclusions)
	if !opts.NoDefaultExclusions {
		excl = append(excl, DefaultExclusions()...)
	}
	in := func(rs []Range, i uint32) bool {
		for _, r := range rs {
			if r.Contains(i) {
				return true
			}
		}
		return false
	}
	return &indexModel{
		base: base, size: size,
		contains: func(i uint32) bool { return in(ranges, i) && !in(excl, i) },
		used:     map[uint32]bool{},
	}
}

func (m *indexModel) free() int {
	n := 0
	for i := range m.size {
		if idx := m.base + i; m.contains(idx) && !m.used[idx] {
			n++
		}
	}
	return n
}

func (m *indexModel) grab() (uint32, bool) {
	for i := range m.size {
		if idx := m.base + i; m.contains(idx) && !m.used[idx] {
			m.used[idx] = true
			return idx, true
		}
	}
	return 0, false
}

// checkIndexInvariants verifies the allocator's internal bookkeeping. When
// window is true it also checks every index of the model's window.
func checkIndexInvariants(t *testing.T, a *IndexAllocator, m *indexModel) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()

	if a.fi < len(a.ranges) {
		require.True(t, a.ranges[a.fi].Contains(a.fv), "frontier %d not in range %v", a.fv, a.ranges[a.fi])
	} else {
		require.Equal(t, len(a.ranges), a.fi)
	}
	inHeap := make(map[uint32]bool, len(a.heap))
	for i, idx := range a.heap {
		if inHeap[idx] {
			t.Fatalf("index %d twice in heap", idx)
		}
		inHeap[idx] = true
		if a.state[idx]&stInHeap == 0 {
			t.Fatalf("heap entry %d lacks stInHeap", idx)
		}
		if i > 0 && a.heap[(i-1)/2] > idx {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	var used, usedBelow uint64
	for idx, st := range a.state {
		if st == 0 {
			t.Fatalf("zero state kept for %d", idx)
		}
		if st&stInHeap != 0 != inHeap[idx] {
			t.Fatalf("stInHeap of %d is %v, heap says %v", idx, st&stInHeap != 0, inHeap[idx])
		}
		if _, ok := a.find(idx); !ok {
			t.Fatalf("state kept for uncontained %d", idx)
		}
		if st&stUsed != 0 {
			used++
			if a.below(idx) {
				usedBelow++
			}
		}
	}
	require.Equal(t, used, a.used)
	require.Equal(t, usedBelow, a.usedBelow)
	live := a.ordinal() - a.usedBelow
	require.LessOrEqual(t, uint64(len(a.heap)), 2*live+64, "heap not compacted")

	if m == nil {
		return
	}
	require.Equal(t, len(m.used), int(a.used))
	for i := range m.size {
		idx := m.base + i
		_, ok := a.find(idx)
		if m.contains(idx) != ok {
			t.Fatalf("find(%d) = %v, model says %v", idx, ok, m.contains(idx))
		}
		if m.used[idx] != (a.state[idx]&stUsed != 0) {
			t.Fatalf("used(%d) = %v, model says %v", idx, !m.used[idx], m.used[idx])
		}
		if ok && !m.used[idx] && a.below(idx) && !inHeap[idx] {
			t.Fatalf("free index %d below frontier missing from heap", idx)
		}
	}
}

// indexOp is one step of a generated sequence.
type indexOp struct {
	kind byte // see runIndexOps
	arg  uint32
}

// runIndexOps applies ops to a and the model and requires them to agree.
func runIndexOps(t *testing.T, a *IndexAllocator, m *indexModel, ops []indexOp, checkEvery bool) {
	t.Helper()
	for n, op := range ops {
		switch op.kind % 6 {
		case 0, 1: // Grab
			want, ok := m.grab()
			got, err := a.Grab()
			if !ok {
				require.ErrorIs(t, err, ErrExhausted, "op %d", n)
				break
			}
			require.NoError(t, err, "op %d", n)
			require.Equal(t, want, got, "op %d: grab", n)
			// Lowest first: every allowed index below it is in use.
			for i := m.base; i < got; i++ {
				require.True(t, !m.contains(i) || m.used[i], "op %d: grabbed %d while %d free", n, got, i)
			}
		case 2: // Release an index in the window (usually a used one)
			idx := m.base + op.arg%m.size
			if len(m.used) > 0 && op.arg%4 != 0 {
				keys := make([]uint32, 0, len(m.used))
				for k := range m.used {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				idx = keys[int(op.arg/4)%len(keys)]
			}
			err := a.Release(idx)
			switch {
			case !m.contains(idx):
				require.ErrorIs(t, err, ErrNotAllocated, "op %d", n)
				require.ErrorIs(t, err, ErrNotInRange, "op %d", n)
			case !m.used[idx]:
				require.ErrorIs(t, err, ErrNotAllocated, "op %d", n)
				require.NotErrorIs(t, err, ErrNotInRange, "op %d", n)
			default:
				require.NoError(t, err, "op %d", n)
				delete(m.used, idx)
			}
		case 3: // Reserve
			idx := m.base + op.arg%m.size
			err := a.Reserve(idx)
			switch {
			case !m.contains(idx):
				require.ErrorIs(t, err, ErrNotInRange, "op %d", n)
			case m.used[idx]:
				require.ErrorIs(t, err, ErrInUse, "op %d", n)
			default:
				require.NoError(t, err, "op %d", n)
				m.used[idx] = true
			}
		case 4: // GrabBlock
			k := int(op.arg%7) - 1
			free := m.free()
			got, err := a.GrabBlock(k)
			switch {
			case k <= 0:
				require.ErrorIs(t, err, ErrInvalidCount, "op %d", n)
				require.Nil(t, got)
			case k > free:
				require.ErrorIs(t, err, ErrExhausted, "op %d", n)
				require.Nil(t, got)
			default:
				require.NoError(t, err, "op %d", n)
				want := make([]uint32, 0, k)
				for range k {
					idx, ok := m.grab()
					require.True(t, ok)
					want = append(want, idx)
				}
				require.Equal(t, want, got, "op %d: block", n)
			}
		case 5: // Queries
			idx := m.base + op.arg%m.size
			require.Equal(t, m.contains(idx), a.Contains(idx), "op %d: Contains(%d)", n, idx)
			require.Equal(t, m.used[idx], a.InUse(idx), "op %d: InUse(%d)", n, idx)
			require.Equal(t, m.free(), a.Free(), "op %d: Free", n)
			require.Equal(t, len(m.used), a.Len(), "op %d: Len", n)
		}
		if checkEvery {
			checkIndexInvariants(t, a, m)
		}
	}
	checkIndexInvariants(t, a, m)
	var want []uint32
	for i := range m.size {
		if m.used[m.base+i] {
			want = append(want, m.base+i)
		}
	}
	got := a.Allocated()
	if len(want) == 0 {
		require.Empty(t, got)
	} else {
		require.Equal(t, want, got)
	}
}

func TestIndexAllocatorMatchesModel(t *testing.T) {
	configs := []struct {
		name       string
		opts       IndexOptions
		base, size uint32
	}{
		{name: "route tables", opts: IndexOptions{Ranges: []Range{{0, 300}}}, base: 0, size: 310},
		{name: "tiny", opts: IndexOptions{Ranges: []Range{{10, 14}}}, base: 5, size: 15},
		{name: "fragmented", opts: IndexOptions{Ranges: []Range{{1, 10}, {20, 30}, {25, 60}, {100, 100}}, Exclusions: []Range{{5, 5}, {28, 40}}}, base: 0, size: 110},
		{name: "top of space", opts: IndexOptions{Ranges: []Range{{math.MaxUint32 - 40, math.MaxUint32}}, Exclusions: []Range{{math.MaxUint32 - 20, math.MaxUint32 - 18}}}, base: math.MaxUint32 - 49, size: 50},
		{name: "bottom of space", opts: IndexOptions{Ranges: []Range{{0, 40}}, NoDefaultExclusions: true}, base: 0, size: 50},
	}
	for _, cfg := range configs {
		for seed := range uint64(8) {
			t.Run(cfg.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 0x1dea11c))
				a, err := NewIndexAllocator(cfg.opts)
				require.NoError(t, err)
				m := newIndexModel(cfg.opts, cfg.base, cfg.size)
				ops := make([]indexOp, 3000)
				for i := range ops {
					ops[i] = indexOp{kind: byte(r.IntN(6)), arg: r.Uint32()}
				}
				runIndexOps(t, a, m, ops, true)
			})
		}
	}
}

// TestIndexAllocatorChurnKeepsMemoryBounded runs long grab/release/reserve
// churn and checks that internal state tracks what is in use, not history.
func TestIndexAllocatorChurnKeepsMemoryBounded(t *testing.T) {
	a, err := NewIndexAllocator(IndexOptions{Ranges: []Range{{0, math.MaxUint32}}, NoDefaultExclusions: true})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	var held []uint32
	for range 200000 {
		if len(held) < 50 || r.IntN(2) == 0 {
			idx, err := a.Grab()
			require.NoError(t, err)
			held = append(held, idx)
		} else {
			i := r.IntN(len(held))
			require.NoError(t, a.Release(held[i]))
			held[i] = held[len(held)-1]
			held = held[:len(held)-1]
		}
	}
	for _, idx := range held {
		require.NoError(t, a.Release(idx))
	}
	checkIndexInvariants(t, a, nil)
	assert.Zero(t, a.Len())
	assert.Equal(t, clampInt(1<<32), a.Free())
	// Everything released: the frontier is back at the start and no
	// bookkeeping for free indices is left behind beyond the heap bound.
	assert.Equal(t, uint64(0), a.ordinal())
	assert.LessOrEqual(t, len(a.heap), 64)
	assert.LessOrEqual(t, len(a.state), 64)
	idx, err := a.Grab()
	require.NoError(t, err)
	assert.Equal(t, uint32(0), idx)
}

func TestIndexAllocatorReserveFarAheadIsCheap(t *testing.T) {
	a, err := NewIndexAllocator(IndexOptions{Ranges: []Range{{1, math.MaxUint32}}})
	require.NoError(t, err)
	require.NoError(t, a.Reserve(math.MaxUint32))
	require.NoError(t, a.Reserve(1_000_000_000))
	assert.Len(t, a.state, 2)
	assert.Empty(t, a.heap)
	got, err := a.GrabBlock(3)
	require.NoError(t, err)
	assert.Equal(t, []uint32{1, 2, 3}, got)
	require.NoError(t, a.Release(math.MaxUint32))
	checkIndexInvariants(t, a, nil)
	assert.False(t, a.InUse(math.MaxUint32))
	assert.Len(t, a.state, 4)
}

func TestIndexAllocatorFillsTopOfSpace(t *testing.T) {
	a, err := NewIndexAllocator(IndexOptions{Ranges: []Range{{math.MaxUint32 - 2, math.MaxUint32}}})
	require.NoError(t, err)
	got, err := a.GrabBlock(3)
	require.NoError(t, err)
	assert.Equal(t, []uint32{math.MaxUint32 - 2, math.MaxUint32 - 1, math.MaxUint32}, got)
	_, err = a.Grab()
	require.ErrorIs(t, err, ErrExhausted)
	checkIndexInvariants(t, a, nil)
	require.NoError(t, a.Release(math.MaxUint32-1))
	idx, err := a.Grab()
	require.NoError(t, err)
	assert.Equal(t, uint32(math.MaxUint32-1), idx)
	checkIndexInvariants(t, a, nil)
}

func FuzzIndexAllocator(f *testing.F) {
	f.Add([]byte{0, 1, 10}, []byte{0, 0, 0, 0, 2, 1, 3, 5, 4, 4, 5, 0})
	f.Add([]byte{1, 0, 255, 5, 5}, []byte{0, 1, 2, 3, 3, 200, 0, 9, 2, 200})
	f.Add([]byte{2, 250, 255, 240, 245}, []byte{4, 6, 4, 6, 0, 0, 2, 7, 2, 8, 0, 0})
	f.Add([]byte{3, 0, 0}, []byte{0, 0, 0, 0, 2, 0, 0, 0})
	f.Add([]byte{0, 9, 3}, []byte{0, 0})
	f.Add([]byte{0, 1, 250, 100, 120, 30, 40}, []byte{3, 50, 3, 60, 0, 0, 2, 50, 0, 0, 5, 50})
	f.Fuzz(func(t *testing.T, spec, opsData []byte) {
		// spec[0]: bit0 NoDefaultExclusions, bit1 shift to the top of the
		// uint32 space, bits2-3 number of range pairs (1–4); then byte pairs
		// (min, max) for ranges followed by exclusions.
		if len(spec) == 0 || len(opsData) > 4000 {
			return
		}
		flags := spec[0]
		var base uint32
		if flags&2 != 0 {
			base = math.MaxUint32 - 255
		}
		nRanges := int(flags>>2&3) + 1
		var ranges, excl []Range
		for i := 1; i+1 < len(spec) && i < 1+2*16; i += 2 {
			r := Range{Min: base + uint32(spec[i]), Max: base + uint32(spec[i+1])}
			if len(ranges) < nRanges {
				ranges = append(ranges, r)
			} else {
				excl = append(excl, r)
			}
		}
		opts := IndexOptions{Ranges: ranges, Exclusions: excl, NoDefaultExclusions: flags&1 != 0}
		a, err := NewIndexAllocator(opts)
		invalid := false
		for _, r := range append(slices.Clone(ranges), excl...) {
			invalid = invalid || r.Min > r.Max
		}
		if invalid {
			require.ErrorIs(t, err, ErrInvalidRange)
			return
		}
		m := newIndexModel(opts, base, 256)
		if len(ranges) == 0 {
			m = newIndexModel(opts, 0, 256)
		}
		if m.free() == 0 { // the window covers every index the options can allow
			require.ErrorIs(t, err, ErrNoIndices)
			return
		}
		require.NoError(t, err)
		ops := make([]indexOp, 0, len(opsData)/2)
		for i := 0; i+1 < len(opsData); i += 2 {
			ops = append(ops, indexOp{kind: opsData[i], arg: uint32(opsData[i+1]) * 2654435761})
		}
		runIndexOps(t, a, m, ops, false)
	})
}

func TestErrorsAreDistinct(t *testing.T) {
	all := []error{ErrInvalidRange, ErrNoIndices, ErrExhausted, ErrInvalidCount, ErrNotInRange, ErrInUse, ErrNotAllocated, ErrInvalidID, ErrConflict}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b), "%v vs %v", a, b)
		}
	}
}
