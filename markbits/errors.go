package markbits

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them, so callers can test with errors.Is.
var (
	// ErrEmptyMask means a mask or a set of bits that must be non-empty was 0.
	ErrEmptyMask = errors.New("markbits: empty mask")
	// ErrExhausted means there are not enough free bits left for the request.
	ErrExhausted = errors.New("markbits: not enough free mark bits")
	// ErrOverlap means the requested bits are already allocated or reserved
	// by another owner.
	ErrOverlap = errors.New("markbits: mark bits already in use")
	// ErrOutsideMask means bits that must lie inside a mask do not.
	ErrOutsideMask = errors.New("markbits: mark bits outside the mask")
	// ErrInvalidOwner means an owner name is empty, clashes with a name the
	// caller may not use, or is already used for the other kind of holding
	// (allocated versus reserved).
	ErrInvalidOwner = errors.New("markbits: invalid owner")
	// ErrInvalidSize means a block size is out of range.
	ErrInvalidSize = errors.New("markbits: invalid block size")
	// ErrOutOfRange means a number does not fit in a block.
	ErrOutOfRange = errors.New("markbits: number out of range for block")
	// ErrBlockFull means every mark of an EndpointMarks block is held.
	ErrBlockFull = errors.New("markbits: every endpoint mark is held")
)
