package markbits

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refBits lists the single bits of mask from the lowest up, computed
// independently of the code under test (one test per bit position).
func refBits(mask uint32) []uint32 {
	var out []uint32
	for i := range 32 {
		if mask&(1<<i) != 0 {
			out = append(out, 1<<i)
		}
	}
	return out
}

// refMark is a straightforward reference scatter: bit i of n goes to the
// i-th lowest bit of mask.
func refMark(mask uint32, n uint64) uint32 {
	var m uint32
	for i, bit := range refBits(mask) {
		if n&(1<<i) != 0 {
			m |= bit
		}
	}
	return m
}

// blockShapes are masks of several shapes: contiguous, non-contiguous,
// single-bit, top and bottom bits, the default endpoint block, and the full
// mask.
var blockShapes = []uint32{
	0x00000001,
	0x80000000,
	0x80000001,
	0x0000000f,
	0x000000f0,
	0x00050005,
	0xaaaa0000,
	0x0f0f0f0f,
	0x1ff00000,
	0xfff00000,
	0xffe00000,
	0xe00f0000,
	0x12345678,
	0x0000ffff,
	0xffff0000,
	0xffffffff,
}

func TestNewBlock(t *testing.T) {
	_, err := NewBlock(0)
	require.ErrorIs(t, err, ErrEmptyMask)

	for _, mask := range blockShapes {
		b, err := NewBlock(mask)
		require.NoError(t, err)
		assert.Equal(t, mask, b.Mask)
		assert.Equal(t, len(refBits(mask)), b.Size())
		assert.Equal(t, uint64(1)<<len(refBits(mask)), b.Capacity())
	}
}

func TestBlockZeroValue(t *testing.T) {
	var b Block
	assert.Equal(t, 0, b.Size())
	assert.Equal(t, uint64(1), b.Capacity(), "an empty block holds just the number 0")
	m, err := b.Mark(0)
	require.NoError(t, err)
	assert.Zero(t, m)
	_, err = b.Mark(1)
	require.ErrorIs(t, err, ErrOutOfRange)
	assert.Zero(t, b.Number(0xffffffff))
	assert.True(t, b.Contains(0))
	assert.False(t, b.Contains(1))
}

func TestBlockMarkHandChecked(t *testing.T) {
	// Each case is worked out by hand: the number's bits, lowest first, are
	// placed on the block's bits, lowest first.
	tests := []struct {
		name string
		mask uint32
		n    uint64
		want uint32
	}{
		{"zero", 0xffff0000, 0, 0},
		{"one lands on lowest block bit", 0xffff0000, 1, 0x00010000},
		{"contiguous shift", 0xff000000, 0xab, 0xab000000},
		{"two separate bits, value 2", 0x80000001, 2, 0x80000000},
		{"two separate bits, value 3", 0x80000001, 3, 0x80000001},
		{"nibbles split by a gap", 0x0f0f0000, 0xab, 0x0a0b0000},
		{"alternating bits", 0x0000aaaa, 0xff, 0x0000aaaa},
		{"alternating bits, low half", 0x0000aaaa, 0x0f, 0x000000aa},
		{"full mask max", 0xffffffff, 0xffffffff, 0xffffffff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Block{Mask: tt.mask}
			got, err := b.Mark(tt.n)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "Mark(%#x) in %#x", tt.n, tt.mask)
			assert.Equal(t, tt.n, b.Number(got))
		})
	}
}

func TestBlockMarkOutOfRange(t *testing.T) {
	for _, mask := range blockShapes {
		b := Block{Mask: mask}
		for _, n := range []uint64{b.Capacity(), b.Capacity() + 1, 1 << 40, ^uint64(0)} {
			m, err := b.Mark(n)
			require.ErrorIs(t, err, ErrOutOfRange, "mask %#x n %d", mask, n)
			assert.Zero(t, m)
		}
	}
}

func TestBlockNumberIgnoresForeignBits(t *testing.T) {
	b := Block{Mask: 0x0f0f0000}
	for _, n := range []uint64{0, 1, 0x55, 0xff} {
		m, err := b.Mark(n)
		require.NoError(t, err)
		assert.Equal(t, n, b.Number(m|^b.Mask&0xf0f0ffff), "foreign bits must not change the number")
		assert.True(t, b.Contains(m))
		assert.False(t, b.Contains(m|0x1))
	}
}

// TestBlockRoundTripAllValues is the property test: for every shape with at
// most 16 bits, every value of the block maps to a distinct mark inside the
// block, equal to the reference scatter, increasing with the value, and back
// to the same number. Wider blocks are checked at both ends and on a
// deterministic random sample.
func TestBlockRoundTripAllValues(t *testing.T) {
	for _, mask := range blockShapes {
		b := Block{Mask: mask}
		check := func(n uint64) uint32 {
			m, err := b.Mark(n)
			require.NoError(t, err)
			require.Equal(t, uint32(0), m&^mask, "mark %#x outside block %#x", m, mask)
			require.Equal(t, refMark(mask, n), m, "mask %#x n %d", mask, n)
			require.Equal(t, n, b.Number(m), "mask %#x n %d", mask, n)
			return m
		}
		if b.Size() <= 16 {
			seen := make(map[uint32]bool, b.Capacity())
			prev := uint32(0)
			for n := range b.Capacity() {
				m := check(n)
				require.False(t, seen[m], "mark %#x repeated", m)
				seen[m] = true
				if n > 0 {
					require.Greater(t, m, prev, "marks must increase with the number")
				}
				prev = m
			}
			assert.Len(t, seen, int(b.Capacity()))
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(mask), 1))
		for n := range uint64(1024) {
			check(n)
			check(b.Capacity() - 1 - n)
			check(rng.Uint64N(b.Capacity()))
		}
	}
}

// TestBlockGatherScatterIdentity checks the other direction: for any mark,
// Mark(Number(mark)) is the mark restricted to the block.
func TestBlockGatherScatterIdentity(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, mask := range blockShapes {
		b := Block{Mask: mask}
		for range 2000 {
			mark := rng.Uint32()
			n := b.Number(mark)
			require.Less(t, n, b.Capacity())
			m, err := b.Mark(n)
			require.NoError(t, err)
			require.Equal(t, mark&mask, m)
		}
	}
}

func TestBlockString(t *testing.T) {
	b := Block{Mask: 0xfff00000}
	s := b.String()
	assert.Contains(t, s, "0xfff00000")
	assert.Contains(t, s, "12 bits")
}

func BenchmarkBlockMark(b *testing.B) {
	for _, mask := range []uint32{0xfff00000, 0x0f0f0f0f, 0xffffffff} {
		blk := Block{Mask: mask}
		max := blk.Capacity() - 1
		b.Run(blk.String(), func(b *testing.B) {
			var sink uint32
			var n uint64
			for b.Loop() {
				m, _ := blk.Mark(n & max)
				sink |= m
				n++
			}
			_ = sink
		})
	}
}

func BenchmarkBlockNumber(b *testing.B) {
	for _, mask := range []uint32{0xfff00000, 0x0f0f0f0f, 0xffffffff} {
		blk := Block{Mask: mask}
		b.Run(blk.String(), func(b *testing.B) {
			var sink uint64
			var m uint32
			for b.Loop() {
				sink += blk.Number(m)
				m += 0x00100001
			}
			_ = sink
		})
	}
}
