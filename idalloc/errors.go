package idalloc

import "errors"

// Sentinel errors. Every error returned by this package wraps one (or, where
// two apply, both) of these, so callers can test with errors.Is.
var (
	// ErrInvalidRange reports a Range whose Min is greater than its Max.
	ErrInvalidRange = errors.New("idalloc: invalid range")
	// ErrNoIndices reports that the ranges, after exclusions are removed,
	// contain no index at all.
	ErrNoIndices = errors.New("idalloc: no allocatable indices")
	// ErrExhausted reports that every index is in use (or, for GrabBlock,
	// that fewer indices are free than were asked for).
	ErrExhausted = errors.New("idalloc: indices exhausted")
	// ErrInvalidCount reports a GrabBlock size that is not positive.
	ErrInvalidCount = errors.New("idalloc: invalid block size")
	// ErrNotInRange reports an index outside the allocator's ranges or
	// inside one of its exclusions.
	ErrNotInRange = errors.New("idalloc: index not in range")
	// ErrInUse reports a Reserve of an index that is already in use.
	ErrInUse = errors.New("idalloc: index already in use")
	// ErrNotAllocated reports a Release of an index that is not in use.
	ErrNotAllocated = errors.New("idalloc: index not allocated")
	// ErrInvalidID reports the ID 0, which the IDAllocator never uses.
	ErrInvalidID = errors.New("idalloc: invalid id")
	// ErrConflict reports a well-known reservation that clashes with an
	// existing mapping: the ID belongs to another name, or the name
	// already has another ID.
	ErrConflict = errors.New("idalloc: conflicting id")
)
