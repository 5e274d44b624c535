package markbits

import (
	"fmt"
	"math/bits"
)

// Block is a group of mark bits used as a small unsigned integer field. The
// bits need not be contiguous: Mark scatters the bits of a number, lowest
// first, into the block's bits from the lowest up, and Number gathers them
// back. A block of k bits holds the numbers 0 to 2^k-1.
//
// The zero Block has no bits and holds only the number 0.
type Block struct {
	// Mask holds the block's bits.
	Mask uint32
}

// NewBlock returns the block made of the bits of mask. It fails with
// ErrEmptyMask if mask is 0.
func NewBlock(mask uint32) (Block, error) {
	if mask == 0 {
		return Block{}, fmt.Errorf("%w: block mask is 0", ErrEmptyMask)
	}
	return Block{Mask: mask}, nil
}

// Size returns the number of bits in the block.
func (b Block) Size() int {
	return bits.OnesCount32(b.Mask)
}

// Capacity returns how many distinct numbers the block can hold: 2^Size().
func (b Block) Capacity() uint64 {
	return uint64(1) << uint(b.Size())
}

// Mark scatters n into the block's bits and returns the resulting mark; bit i
// of n lands on the i-th lowest bit of the block. It fails with ErrOutOfRange
// if n does not fit (n >= Capacity()).
func (b Block) Mark(n uint64) (uint32, error) {
	if n >= b.Capacity() {
		return 0, fmt.Errorf("%w: %d does not fit in block 0x%08x (%d bits, max %d)",
			ErrOutOfRange, n, b.Mask, b.Size(), b.Capacity()-1)
	}
	var mark uint32
	for mask := b.Mask; n != 0; n >>= 1 {
		low := mask & -mask
		if n&1 != 0 {
			mark |= low
		}
		mask &^= low
	}
	return mark, nil
}

// Number gathers the block's bits of mark into a number; it is the inverse of
// Mark. Bits of mark outside the block are ignored, so Number can be applied
// directly to a full packet mark.
func (b Block) Number(mark uint32) uint64 {
	var n uint64
	bit := uint64(1)
	for mask := b.Mask; mask != 0; mask &= mask - 1 {
		if mark&mask&-mask != 0 {
			n |= bit
		}
		bit <<= 1
	}
	return n
}

// Contains reports whether every set bit of mark lies inside the block.
func (b Block) Contains(mark uint32) bool {
	return mark&^b.Mask == 0
}

// String describes the block for logs, for example "0xfff00000 (12 bits)".
func (b Block) String() string {
	return fmt.Sprintf("0x%08x (%d bits)", b.Mask, b.Size())
}
