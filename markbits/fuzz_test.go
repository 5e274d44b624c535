package markbits

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
)

var sentinels = []error{ErrEmptyMask, ErrExhausted, ErrOverlap, ErrOutsideMask, ErrInvalidOwner, ErrInvalidSize, ErrOutOfRange}

// requireSentinel checks err wraps exactly one of the package's sentinels.
func requireSentinel(t testing.TB, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	require.Equal(t, 1, n, "error %q must wrap exactly one sentinel", err)
}

// FuzzBlockRoundTrip checks that, for any block, every number that fits
// survives Mark then Number, numbers that do not fit are rejected, and any
// mark survives Number then Mark restricted to the block.
func FuzzBlockRoundTrip(f *testing.F) {
	f.Add(uint32(0xffff0000), uint64(0), uint32(0))
	f.Add(uint32(0xfff00000), uint64(4095), uint32(0xffffffff))
	f.Add(uint32(0xfff00000), uint64(4096), uint32(0x12345678))
	f.Add(uint32(0x0f0f0f0f), uint64(0xabcd), uint32(0xa5a5a5a5))
	f.Add(uint32(0x80000001), uint64(3), uint32(0x80000000))
	f.Add(uint32(0xffffffff), uint64(0xffffffff), uint32(0xdeadbeef))
	f.Add(uint32(0xffffffff), uint64(1)<<32, uint32(1))
	f.Add(uint32(0), uint64(0), uint32(0xffffffff))
	f.Add(uint32(0), uint64(1), uint32(0))
	f.Fuzz(func(t *testing.T, mask uint32, n uint64, mark uint32) {
		b := Block{Mask: mask}
		m, err := b.Mark(n)
		if n >= b.Capacity() {
			require.ErrorIs(t, err, ErrOutOfRange)
			requireSentinel(t, err)
			require.Zero(t, m)
		} else {
			require.NoError(t, err)
			require.True(t, b.Contains(m))
			require.Equal(t, refMark(mask, n), m)
			require.Equal(t, n, b.Number(m))
		}

		got := b.Number(mark)
		require.Less(t, got, b.Capacity())
		back, err := b.Mark(got)
		require.NoError(t, err)
		require.Equal(t, mark&mask, back)

		nb, err := NewBlock(mask)
		if mask == 0 {
			require.ErrorIs(t, err, ErrEmptyMask)
		} else {
			require.NoError(t, err)
			require.Equal(t, b, nb)
		}
	})
}

// fuzzBits spreads one byte over the 32 bits of a mark.
func fuzzBits(arg byte) uint32 {
	return bits.RotateLeft32(uint32(arg)|uint32(arg)<<13, int(arg>>2))
}

// FuzzAllocator drives an allocator with an arbitrary sequence of operations
// and checks after each one that it did what it promised, that failures
// changed nothing, and that the bookkeeping stays consistent.
func FuzzAllocator(f *testing.F) {
	f.Add(uint32(0xffff0000), []byte{0, 0, 0, 1, 1, 14, 2, 2})
	f.Add(uint32(0x0000ffff), []byte{3, 0xc0, 0, 0, 2, 1, 4, 0, 0, 0})
	f.Add(uint32(0x0f0f0f0f), []byte{1, 5, 1, 40, 5, 0xff, 2, 3, 3, 7, 4, 2})
	f.Add(uint32(0x00000001), []byte{0, 0, 0, 1, 4, 0, 0, 1})
	f.Add(uint32(0xffffffff), []byte{1, 34, 1, 2, 2, 0, 3, 9, 5, 9})
	f.Add(uint32(0), []byte{0, 0})
	f.Fuzz(func(t *testing.T, mask uint32, ops []byte) {
		a, err := New(mask)
		if mask == 0 {
			require.ErrorIs(t, err, ErrEmptyMask)
			require.Nil(t, a)
			return
		}
		require.NoError(t, err)
		owners := []string{"a", "b", "c", "", "k", "m"}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			owner := owners[int(arg)%len(owners)]
			before := snap(a)
			var err error
			switch op {
			case 0:
				var bit uint32
				bit, err = a.NextBit(owner)
				if err == nil {
					require.Equal(t, before.Free&-before.Free, bit, "lowest free bit")
				}
			case 1:
				n := int(arg%40) - 2
				var blk Block
				blk, err = a.Block(owner, n)
				if err == nil {
					require.Equal(t, n, blk.Size())
					require.Equal(t, blk.Mask, before.Free&blk.Mask)
					rest := before.Free &^ blk.Mask
					if rest != 0 {
						require.Less(t, bits.Len32(blk.Mask), bits.TrailingZeros32(rest)+1, "lowest bits first")
					}
				}
			case 2:
				var blk Block
				blk, err = a.BlockAll(owner)
				if err == nil {
					require.Equal(t, before.Free, blk.Mask)
				}
			case 3:
				err = a.Reserve(owner, fuzzBits(arg))
				if err == nil {
					require.Equal(t, before.Free&^fuzzBits(arg), a.Free())
				}
			case 4:
				got := a.Release(owner)
				require.Equal(t, before.Free|(got&mask), a.Free())
			case 5:
				got := a.ReleaseBits(fuzzBits(arg))
				require.Zero(t, got&^fuzzBits(arg))
				require.Equal(t, before.Free|(got&mask), a.Free())
			}
			if err != nil {
				requireSentinel(t, err)
				require.Equal(t, before, snap(a), "a failed call changes nothing")
			}
			checkInvariants(t, a)
		}
	})
}

// FuzzNewLayout checks NewLayout on arbitrary options: it either fails with a
// sentinel error and a zero Layout, or returns a layout that satisfies every
// invariant.
func FuzzNewLayout(f *testing.F) {
	f.Add(uint32(0), false, uint32(0), uint32(0), uint32(0), uint8(0), int8(0))
	f.Add(uint32(0), true, uint32(0x1ff00000), KubeProxyMarks, uint32(0), uint8(0), int8(0))
	f.Add(uint32(0x0000ffff), true, uint32(0), KubeProxyMarks, uint32(0x3), uint8(1), int8(2))
	f.Add(uint32(0x0000001f), false, uint32(0), uint32(0), uint32(0), uint8(0), int8(0))
	f.Add(uint32(0x0000000f), false, uint32(0), uint32(0), uint32(0), uint8(0), int8(0))
	f.Add(uint32(0xffff0000), false, uint32(0x0000ff00), uint32(0), uint32(0), uint8(0), int8(0))
	f.Add(uint32(0xffffffff), true, uint32(0x0f000000), uint32(0x3), uint32(0x2), uint8(3), int8(8))
	f.Add(uint32(0xffffffff), true, uint32(0), uint32(0), uint32(0), uint8(30), int8(-1))
	f.Fuzz(func(t *testing.T, mask uint32, wg bool, bpf, res1, res2 uint32, nExtra uint8, minEP int8) {
		opts := LayoutOptions{Mask: mask, WireGuard: wg, BPFReserved: bpf, MinEndpointBits: int(minEP)}
		for i := range int(nExtra % 40) {
			opts.Extra = append(opts.Extra, string(rune('a'+i%26))+string(rune('0'+i/26)))
		}
		if res1 != 0 || res2 != 0 {
			opts.Reserved = map[string]uint32{"r1": res1, "r2": res2}
		}
		l, err := NewLayout(opts)
		if err != nil {
			requireSentinel(t, err)
			require.Equal(t, Layout{}, l)
			return
		}
		checkLayout(t, l, opts)
		require.NotEmpty(t, l.String())
		require.NotEmpty(t, l.Allocations())
	})
}
