package idalloc

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// IndexOptions configures an IndexAllocator.
type IndexOptions struct {
	// Ranges are the indices that may be handed out. Ranges may overlap or
	// touch; they are merged. Empty means DefaultRouteTableRanges().
	Ranges []Range
	// Exclusions are indices inside Ranges that are never handed out, in
	// addition to DefaultExclusions() (unless NoDefaultExclusions is set).
	Exclusions []Range
	// NoDefaultExclusions stops DefaultExclusions() (0 and 253–255, the
	// kernel's reserved route tables) from being removed from Ranges. Set
	// it when the indices are not route tables.
	NoDefaultExclusions bool
}

// index states kept in IndexAllocator.state.
const (
	stUsed   uint8 = 1 << iota // the index is in use
	stInHeap                   // the index is physically present in the heap
)

// IndexAllocator hands out small integer indices (such as route table
// numbers) from a set of ranges, lowest free index first. It is safe for
// concurrent use.
//
// Memory is proportional to the indices that have been handed out or
// reserved, never to the size of the ranges, so ranges may span the whole
// uint32 space. Grab, Reserve and Release are O(log n) amortised in the
// number of indices touched.
type IndexAllocator struct {
	mu sync.Mutex

	ranges []Range  // normalized allocatable ranges (exclusions removed)
	prefix []uint64 // prefix[i] = number of indices in ranges[:i]
	total  uint64   // number of indices in ranges

	// The frontier (fi, fv) splits the indices in two: those below it have
	// each been handed out at least once (or adopted, or skipped because
	// they were adopted), those at or above it are free unless reserved.
	// fi == len(ranges) means every index is below the frontier.
	fi int
	fv uint32

	// Every free index below the frontier is in heap (a min-heap). The heap
	// may also hold stale entries (now in use, or no longer below the
	// frontier); they are dropped lazily or by compaction.
	heap  []uint32
	state map[uint32]uint8

	used      uint64 // indices in use
	usedBelow uint64 // indices in use that are below the frontier
}

// NewIndexAllocator returns an allocator over opts.Ranges minus the
// exclusions. It returns an error wrapping ErrInvalidRange for a range or
// exclusion with Min > Max, and ErrNoIndices when nothing is left after the
// exclusions are removed.
func NewIndexAllocator(opts IndexOptions) (*IndexAllocator, error) {
	ranges := opts.Ranges
	if len(ranges) == 0 {
		ranges = DefaultRouteTableRanges()
	}
	for _, r := range ranges {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("range: %w", err)
		}
	}
	excl := slices.Clone(opts.Exclusions)
	for _, r := range excl {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("exclusion: %w", err)
		}
	}
	if !opts.NoDefaultExclusions {
		excl = append(excl, DefaultExclusions()...)
	}
	eff := subtract(normalize(ranges), normalize(excl))
	if len(eff) == 0 {
		return nil, fmt.Errorf("%w: ranges %v minus exclusions %v", ErrNoIndices, ranges, excl)
	}
	a := &IndexAllocator{
		ranges: eff,
		prefix: make([]uint64, len(eff)),
		fv:     eff[0].Min,
		state:  make(map[uint32]uint8),
	}
	for i, r := range eff {
		a.prefix[i] = a.total
		a.total += r.Len()
	}
	return a, nil
}

// Ranges returns the effective ranges: the configured ranges merged, sorted
// and with the exclusions removed. The result is a fresh slice.
func (a *IndexAllocator) Ranges() []Range {
	return slices.Clone(a.ranges) // immutable after construction
}

// Contains reports whether idx can ever be handed out: it lies within the
// ranges and outside the exclusions.
func (a *IndexAllocator) Contains(idx uint32) bool {
	_, ok := a.find(idx)
	return ok
}

// InUse reports whether idx is currently in use (grabbed or reserved).
func (a *IndexAllocator) InUse(idx uint32) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state[idx]&stUsed != 0
}

// Free returns the number of indices that are not in use. On 32-bit
// platforms a count above math.MaxInt is reported as math.MaxInt.
func (a *IndexAllocator) Free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return clampInt(a.total - a.used)
}

// Len returns the number of indices in use.
func (a *IndexAllocator) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return clampInt(a.used)
}

// Allocated returns the indices in use, in ascending order.
func (a *IndexAllocator) Allocated() []uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]uint32, 0, a.used)
	for idx, st := range a.state {
		if st&stUsed != 0 {
			out = append(out, idx)
		}
	}
	slices.Sort(out)
	return out
}

// Grab returns the lowest free index and marks it in use. It returns an
// error wrapping ErrExhausted when every index is in use.
func (a *IndexAllocator) Grab() (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx, ok := a.grab()
	if !ok {
		return 0, fmt.Errorf("%w: all %d indices in use", ErrExhausted, a.total)
	}
	return idx, nil
}

// GrabBlock returns the n lowest free indices, in ascending order, and marks
// them in use. It is all or nothing: when fewer than n indices are free it
// returns an error wrapping ErrExhausted and takes none. n must be positive
// (ErrInvalidCount otherwise).
func (a *IndexAllocator) GrabBlock(n int) ([]uint32, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d: must be positive", ErrInvalidCount, n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if free := a.total - a.used; uint64(n) > free {
		return nil, fmt.Errorf("%w: asked for %d indices, %d free", ErrExhausted, n, free)
	}
	out := make([]uint32, 0, n)
	for range n {
		idx, ok := a.grab()
		if !ok { // unreachable: the free count was checked above
			for _, got := range out {
				a.release(got)
			}
			return nil, fmt.Errorf("%w: asked for %d indices", ErrExhausted, n)
		}
		out = append(out, idx)
	}
	return out, nil
}

// Reserve marks a specific index in use, for example a route table that the
// kernel shows is already ours after a restart. It returns an error wrapping
// ErrNotInRange when idx is outside the ranges or excluded, and ErrInUse
// when idx is already in use; in both cases nothing changes.
func (a *IndexAllocator) Reserve(idx uint32) error {
	if !a.Contains(idx) {
		return fmt.Errorf("reserve %d: %w (ranges %v)", idx, ErrNotInRange, a.ranges)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state[idx]
	if st&stUsed != 0 {
		return fmt.Errorf("reserve %d: %w", idx, ErrInUse)
	}
	a.state[idx] = st | stUsed
	a.used++
	if a.below(idx) {
		// Its heap entry (there must be one) is now stale.
		a.usedBelow++
		a.maybeCompact()
	}
	return nil
}

// Release returns idx to the free pool. It returns an error wrapping
// ErrNotAllocated when idx is not in use (and also ErrNotInRange when idx
// could never have been handed out); nothing changes then.
func (a *IndexAllocator) Release(idx uint32) error {
	if !a.Contains(idx) {
		return fmt.Errorf("release %d: %w (%w)", idx, ErrNotAllocated, ErrNotInRange)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state[idx]&stUsed == 0 {
		return fmt.Errorf("release %d: %w", idx, ErrNotAllocated)
	}
	a.release(idx)
	return nil
}

// find returns the position of the range that contains idx.
func (a *IndexAllocator) find(idx uint32) (int, bool) {
	i := sort.Search(len(a.ranges), func(i int) bool { return a.ranges[i].Max >= idx })
	return i, i < len(a.ranges) && a.ranges[i].Min <= idx
}

// below reports whether the contained index idx is below the frontier.
func (a *IndexAllocator) below(idx uint32) bool {
	return a.fi == len(a.ranges) || idx < a.fv
}

// ordinal returns the number of indices below the frontier.
func (a *IndexAllocator) ordinal() uint64 {
	if a.fi == len(a.ranges) {
		return a.total
	}
	return a.prefix[a.fi] + uint64(a.fv-a.ranges[a.fi].Min)
}

// advance moves the frontier past its current index.
func (a *IndexAllocator) advance() {
	if a.fv < a.ranges[a.fi].Max {
		a.fv++
		return
	}
	a.fi++
	if a.fi < len(a.ranges) {
		a.fv = a.ranges[a.fi].Min
	}
}

// prev returns the index just below the frontier, if there is one.
func (a *IndexAllocator) prev() (fi int, fv uint32, ok bool) {
	switch {
	case a.fi < len(a.ranges) && a.fv > a.ranges[a.fi].Min:
		return a.fi, a.fv - 1, true
	case a.fi > 0:
		return a.fi - 1, a.ranges[a.fi-1].Max, true
	}
	return 0, 0, false
}

// setState stores st for idx, dropping the map entry when st is zero.
func (a *IndexAllocator) setState(idx uint32, st uint8) {
	if st == 0 {
		delete(a.state, idx)
		return
	}
	a.state[idx] = st
}

// grab takes the lowest free index. The caller holds mu.
func (a *IndexAllocator) grab() (uint32, bool) {
	for len(a.heap) > 0 {
		idx := a.heapPop()
		st := a.state[idx] &^ stInHeap
		if st&stUsed == 0 && a.below(idx) {
			a.state[idx] = stUsed
			a.used++
			a.usedBelow++
			a.maybeCompact()
			return idx, true
		}
		a.setState(idx, st) // stale entry
	}
	for a.fi < len(a.ranges) {
		idx := a.fv
		a.advance()
		a.usedBelow++ // idx is now below the frontier and (will be) in use
		st := a.state[idx]
		if st&stUsed != 0 {
			continue // reserved ahead of the frontier
		}
		a.state[idx] = st | stUsed
		a.used++
		return idx, true
	}
	return 0, false
}

// release frees the in-use index idx. The caller holds mu.
func (a *IndexAllocator) release(idx uint32) {
	st := a.state[idx] &^ stUsed
	a.used--
	if !a.below(idx) {
		a.setState(idx, st) // reserved ahead of the frontier
		return
	}
	a.usedBelow--
	if fi, fv, ok := a.prev(); ok && fv == idx {
		// Pull the frontier back over idx and any free indices below it,
		// so that grab/release churn at the top does not grow the heap.
		// Their heap entries become stale.
		a.setState(idx, st)
		a.fi, a.fv = fi, fv
		for {
			fi, fv, ok := a.prev()
			if !ok || a.state[fv]&stUsed != 0 {
				break
			}
			a.fi, a.fv = fi, fv
		}
		a.maybeCompact()
		return
	}
	if st&stInHeap == 0 {
		a.heapPush(idx)
		st |= stInHeap
	}
	a.setState(idx, st)
}

// maybeCompact drops stale heap entries once they outnumber live ones, so
// the heap never holds more than 2×live+64 entries, where live is the
// number of free indices below the frontier. Stale entries are created one
// at a time by O(1) steps, and a compaction runs only once there are more
// stale entries than live ones, so its cost is amortised over those steps.
func (a *IndexAllocator) maybeCompact() {
	live := a.ordinal() - a.usedBelow
	if uint64(len(a.heap)) <= 2*live+64 {
		return
	}
	kept := a.heap[:0]
	for _, idx := range a.heap {
		st := a.state[idx]
		if st&stUsed == 0 && a.below(idx) {
			kept = append(kept, idx)
			continue
		}
		a.setState(idx, st&^stInHeap)
	}
	clear(a.heap[len(kept):])
	a.heap = kept
	for i := len(a.heap)/2 - 1; i >= 0; i-- {
		a.siftDown(i)
	}
}

func (a *IndexAllocator) heapPush(idx uint32) {
	a.heap = append(a.heap, idx)
	i := len(a.heap) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a.heap[p] <= a.heap[i] {
			break
		}
		a.heap[p], a.heap[i] = a.heap[i], a.heap[p]
		i = p
	}
}

func (a *IndexAllocator) heapPop() uint32 {
	top := a.heap[0]
	last := len(a.heap) - 1
	a.heap[0] = a.heap[last]
	a.heap = a.heap[:last]
	a.siftDown(0)
	return top
}

func (a *IndexAllocator) siftDown(i int) {
	h := a.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func clampInt(n uint64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
