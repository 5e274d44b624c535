package markbits

import (
	"fmt"
	"math/bits"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// snapshot captures everything observable about an allocator, to check that a
// failed call changed nothing.
type snapshot struct {
	Mask, Free, Allocated, Reserved uint32
	Allocations                     []Allocation
}

func snap(a *Allocator) snapshot {
	return snapshot{a.Mask(), a.Free(), a.Allocated(), a.Reserved(), a.Allocations()}
}

// checkInvariants verifies the allocator's bookkeeping is consistent.
func checkInvariants(t testing.TB, a *Allocator) {
	t.Helper()
	mask, free := a.Mask(), a.Free()
	require.Zero(t, free&^mask, "free bits outside mask")
	require.Equal(t, bits.OnesCount32(free), a.Available())
	var union uint32
	for _, al := range a.Allocations() {
		require.NotEmpty(t, al.Owner)
		require.NotZero(t, al.Bits, "owner %q holds nothing", al.Owner)
		require.Zero(t, union&al.Bits, "owner %q overlaps another owner", al.Owner)
		require.Zero(t, free&al.Bits, "owner %q holds free bits", al.Owner)
		if !al.Reserved {
			require.Zero(t, al.Bits&^mask, "allocated bits of %q outside mask", al.Owner)
		}
		require.Equal(t, al.Bits, a.Bits(al.Owner))
		union |= al.Bits
	}
	require.Equal(t, mask, (union&mask)|free, "every mask bit is free or held")
	require.Equal(t, union, a.Allocated()|a.Reserved())
	require.Zero(t, a.Allocated()&a.Reserved())
}

func TestNew(t *testing.T) {
	_, err := New(0)
	require.ErrorIs(t, err, ErrEmptyMask)

	for _, mask := range blockShapes {
		a, err := New(mask)
		require.NoError(t, err)
		assert.Equal(t, mask, a.Mask())
		assert.Equal(t, mask, a.Free())
		assert.Equal(t, len(refBits(mask)), a.Available())
		assert.Empty(t, a.Allocations())
		checkInvariants(t, a)
	}
}

func TestNextBitLowestFirstUntilExhausted(t *testing.T) {
	for _, mask := range blockShapes {
		a, err := New(mask)
		require.NoError(t, err)
		for i, want := range refBits(mask) {
			owner := fmt.Sprintf("o%d", i)
			got, err := a.NextBit(owner)
			require.NoError(t, err)
			require.Equal(t, want, got, "mask %#x bit %d", mask, i)
			name, ok := a.Owner(got)
			require.True(t, ok)
			require.Equal(t, owner, name)
		}
		assert.Zero(t, a.Available())
		before := snap(a)
		_, err = a.NextBit("late")
		require.ErrorIs(t, err, ErrExhausted)
		assert.Equal(t, before, snap(a), "a failed call changes nothing")
		checkInvariants(t, a)
	}
}

func TestNextBitSameOwnerAccumulates(t *testing.T) {
	a, err := New(0x00f0)
	require.NoError(t, err)
	b1, err := a.NextBit("x")
	require.NoError(t, err)
	b2, err := a.NextBit("x")
	require.NoError(t, err)
	assert.Equal(t, b1|b2, a.Bits("x"))
	assert.Equal(t, []Allocation{{Owner: "x", Bits: b1 | b2}}, a.Allocations())
}

func TestBlock(t *testing.T) {
	a, err := New(0x0f0f0000)
	require.NoError(t, err)
	want := refBits(0x0f0f0000)

	blk, err := a.Block("ep", 6)
	require.NoError(t, err)
	var expect uint32
	for _, b := range want[:6] {
		expect |= b
	}
	assert.Equal(t, expect, blk.Mask, "the six lowest bits, across the gap")
	assert.Equal(t, 6, blk.Size())
	assert.Equal(t, 2, a.Available())

	before := snap(a)
	_, err = a.Block("more", 3)
	require.ErrorIs(t, err, ErrExhausted, "never a partial block")
	assert.Equal(t, before, snap(a))

	rest, err := a.BlockAll("rest")
	require.NoError(t, err)
	assert.Equal(t, want[6]|want[7], rest.Mask)
	assert.Zero(t, a.Available())

	_, err = a.BlockAll("none")
	require.ErrorIs(t, err, ErrExhausted)
	checkInvariants(t, a)
}

func TestBlockWholeMask(t *testing.T) {
	a, err := New(0xffffffff)
	require.NoError(t, err)
	blk, err := a.Block("all", 32)
	require.NoError(t, err)
	assert.Equal(t, uint32(0xffffffff), blk.Mask)
	assert.Equal(t, uint64(1)<<32, blk.Capacity())
}

func TestAllocatorErrors(t *testing.T) {
	// Each case starts from a fresh allocator over 0x00ff0000 where "ours"
	// holds the lowest bit and "kube" has reserved 0x0000c000.
	tests := []struct {
		name string
		call func(a *Allocator) error
		want error
	}{
		{"NextBit empty owner", func(a *Allocator) error { _, err := a.NextBit(""); return err }, ErrInvalidOwner},
		{"NextBit reserved owner", func(a *Allocator) error { _, err := a.NextBit("kube"); return err }, ErrInvalidOwner},
		{"Block zero", func(a *Allocator) error { _, err := a.Block("x", 0); return err }, ErrInvalidSize},
		{"Block negative", func(a *Allocator) error { _, err := a.Block("x", -1); return err }, ErrInvalidSize},
		{"Block 33", func(a *Allocator) error { _, err := a.Block("x", 33); return err }, ErrInvalidSize},
		{"Block too big", func(a *Allocator) error { _, err := a.Block("x", 8); return err }, ErrExhausted},
		{"Block empty owner", func(a *Allocator) error { _, err := a.Block("", 1); return err }, ErrInvalidOwner},
		{"Block reserved owner", func(a *Allocator) error { _, err := a.Block("kube", 1); return err }, ErrInvalidOwner},
		{"BlockAll empty owner", func(a *Allocator) error { _, err := a.BlockAll(""); return err }, ErrInvalidOwner},
		{"BlockAll reserved owner", func(a *Allocator) error { _, err := a.BlockAll("kube"); return err }, ErrInvalidOwner},
		{"Reserve empty owner", func(a *Allocator) error { return a.Reserve("", 0x1) }, ErrInvalidOwner},
		{"Reserve zero bits", func(a *Allocator) error { return a.Reserve("other", 0) }, ErrEmptyMask},
		{"Reserve by allocating owner", func(a *Allocator) error { return a.Reserve("ours", 0x1) }, ErrInvalidOwner},
		{"Reserve over allocation", func(a *Allocator) error { return a.Reserve("other", 0x00030000) }, ErrOverlap},
		{"Reserve over reservation outside mask", func(a *Allocator) error { return a.Reserve("other", 0x00008000) }, ErrOverlap},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := New(0x00ff0000)
			require.NoError(t, err)
			_, err = a.NextBit("ours")
			require.NoError(t, err)
			require.NoError(t, a.Reserve("kube", KubeProxyMarks))
			before := snap(a)

			err = tt.call(a)
			require.ErrorIs(t, err, tt.want)
			assert.NotEmpty(t, err.Error())
			assert.Equal(t, before, snap(a), "a failed call changes nothing")
			checkInvariants(t, a)
		})
	}
}

func TestReserve(t *testing.T) {
	a, err := New(0x0000ffff)
	require.NoError(t, err)

	// kube-proxy's bits are inside this mask: they are carved out.
	require.NoError(t, a.Reserve("kube-proxy", KubeProxyMarks))
	assert.Equal(t, uint32(0x0000ffff)&^KubeProxyMarks, a.Free())
	assert.Equal(t, KubeProxyMarks, a.Reserved())
	assert.Zero(t, a.Allocated())

	// Reserving again, or a subset, for the same owner is fine.
	require.NoError(t, a.Reserve("kube-proxy", 0x00004000))
	assert.Equal(t, KubeProxyMarks, a.Bits("kube-proxy"))

	// Bits outside the mask are recorded but change nothing free.
	free := a.Free()
	require.NoError(t, a.Reserve("cni", 0x0f000000))
	assert.Equal(t, free, a.Free())
	owner, ok := a.Owner(0x01000000)
	require.True(t, ok)
	assert.Equal(t, "cni", owner)

	// Allocation skips reserved bits.
	blk, err := a.BlockAll("ep")
	require.NoError(t, err)
	assert.Equal(t, uint32(0x00003fff), blk.Mask)

	assert.Equal(t, []Allocation{
		{Owner: "ep", Bits: 0x00003fff},
		{Owner: "kube-proxy", Bits: KubeProxyMarks, Reserved: true},
		{Owner: "cni", Bits: 0x0f000000, Reserved: true},
	}, a.Allocations())
	checkInvariants(t, a)
}

func TestReleaseAndReuse(t *testing.T) {
	a, err := New(0x000000ff)
	require.NoError(t, err)
	first, err := a.NextBit("a")
	require.NoError(t, err)
	_, err = a.NextBit("b")
	require.NoError(t, err)
	require.NoError(t, a.Reserve("f", 0x00000100|0x00000004))

	assert.Equal(t, first, a.Release("a"))
	assert.Zero(t, a.Release("a"), "second release finds nothing")
	assert.Zero(t, a.Release("unknown"))
	_, ok := a.Owner(first)
	assert.False(t, ok)

	again, err := a.NextBit("c")
	require.NoError(t, err)
	assert.Equal(t, first, again, "the lowest free bit is reused")

	// Releasing a reservation frees only its in-mask bits.
	assert.Equal(t, uint32(0x00000104), a.Release("f"))
	assert.NotZero(t, a.Free()&0x4)
	assert.Zero(t, a.Free()&0x100)
	checkInvariants(t, a)
}

func TestReleaseBits(t *testing.T) {
	a, err := New(0x000000ff)
	require.NoError(t, err)
	blk, err := a.Block("ep", 4)
	require.NoError(t, err)
	bit, err := a.NextBit("x")
	require.NoError(t, err)
	require.NoError(t, a.Reserve("f", 0x00000300))

	// Free one bit of the block, the single bit, a foreign bit outside the
	// mask and a bit that was free anyway.
	lowBlock := blk.Mask & -blk.Mask
	got := a.ReleaseBits(lowBlock | bit | 0x00000200 | 0x00000080)
	assert.Equal(t, lowBlock|bit|0x00000200, got, "only held bits are reported")
	assert.Equal(t, blk.Mask&^lowBlock, a.Bits("ep"), "the owner keeps the rest")
	assert.Zero(t, a.Bits("x"))
	assert.Equal(t, uint32(0x00000100), a.Bits("f"))
	assert.Zero(t, a.ReleaseBits(0), "nothing to release")
	checkInvariants(t, a)
}

func TestOwner(t *testing.T) {
	a, err := New(0x0000000f)
	require.NoError(t, err)
	_, err = a.Block("ep", 2)
	require.NoError(t, err)

	for _, bit := range []uint32{0, 0x3, 0xffffffff} {
		_, ok := a.Owner(bit)
		assert.False(t, ok, "%#x is not a single bit", bit)
	}
	_, ok := a.Owner(0x4)
	assert.False(t, ok, "free bit")
	name, ok := a.Owner(0x2)
	assert.True(t, ok)
	assert.Equal(t, "ep", name)
}

func TestZeroAllocator(t *testing.T) {
	var a Allocator
	_, err := a.NextBit("x")
	require.ErrorIs(t, err, ErrExhausted)
	_, err = a.BlockAll("x")
	require.ErrorIs(t, err, ErrExhausted)
	require.NoError(t, a.Reserve("f", 0x1), "zero allocator still records foreign bits")
	assert.Equal(t, uint32(0x1), a.Reserved())
	assert.Zero(t, a.Free())
	checkInvariants(t, &a)
}

// TestConcurrentAllocateRelease runs under -race: many goroutines take and
// give back bits, and no bit is ever held by two of them at once.
func TestConcurrentAllocateRelease(t *testing.T) {
	a, err := New(0x0f0f0f0f)
	require.NoError(t, err)
	var (
		mu     sync.Mutex
		inUse  uint32
		grants int
		errs   []error
		wg     sync.WaitGroup
		rounds = 200
	)
	record := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for g := range 8 {
		wg.Go(func() {
			owner := fmt.Sprintf("g%d", g)
			for i := range rounds {
				var got uint32
				if i%3 == 0 {
					blk, err := a.Block(owner, 2)
					if err != nil {
						continue // the other goroutines hold too much right now
					}
					got = blk.Mask
				} else {
					bit, err := a.NextBit(owner)
					if err != nil {
						continue
					}
					got = bit
				}
				mu.Lock()
				if inUse&got != 0 {
					mu.Unlock()
					record(fmt.Errorf("%s got %#x while %#x in use", owner, got, inUse))
					return
				}
				inUse |= got
				grants++
				mu.Unlock()

				_ = a.Allocations()
				_ = a.Available()

				mu.Lock()
				inUse &^= got
				mu.Unlock()
				if released := a.Release(owner); released != got {
					record(fmt.Errorf("%s released %#x, held %#x", owner, released, got))
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	assert.Positive(t, grants, "some allocations succeeded")
	assert.Equal(t, a.Mask(), a.Free(), "everything was given back")
	checkInvariants(t, a)
}
