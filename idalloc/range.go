package idalloc

import (
	"fmt"
	"slices"
	"strconv"
)

// Range is an inclusive range of indices, Min through Max. A Range with
// Min > Max is invalid; a Range with Min == Max holds a single index.
type Range struct {
	// Min is the first index of the range.
	Min uint32
	// Max is the last index of the range (inclusive).
	Max uint32
}

// DefaultRouteTableRanges returns the ranges an IndexAllocator uses when
// IndexOptions.Ranges is empty: route tables 1 through 250. The result is a
// fresh slice that the caller may modify.
func DefaultRouteTableRanges() []Range {
	return []Range{{Min: 1, Max: 250}}
}

// DefaultExclusions returns the indices an IndexAllocator never hands out
// unless IndexOptions.NoDefaultExclusions is set: 0 (RT_TABLE_UNSPEC, which
// the kernel does not accept as a table of its own) and 253–255 (the
// kernel's default, main and local tables). The result is a fresh slice that
// the caller may modify.
func DefaultExclusions() []Range {
	return []Range{{Min: 0, Max: 0}, {Min: 253, Max: 255}}
}

// Validate reports an error wrapping ErrInvalidRange when Min > Max.
func (r Range) Validate() error {
	if r.Min > r.Max {
		return fmt.Errorf("%w: %d-%d: min is greater than max", ErrInvalidRange, r.Min, r.Max)
	}
	return nil
}

// Contains reports whether idx lies within the range.
func (r Range) Contains(idx uint32) bool {
	return r.Min <= idx && idx <= r.Max
}

// Len returns the number of indices in the range, or 0 for an invalid range.
// The result is a uint64 because the full uint32 space holds 2^32 indices.
func (r Range) Len() uint64 {
	if r.Min > r.Max {
		return 0
	}
	return uint64(r.Max) - uint64(r.Min) + 1
}

// String formats the range as "min-max", or "n" for a single index.
func (r Range) String() string {
	if r.Min == r.Max {
		return strconv.FormatUint(uint64(r.Min), 10)
	}
	return strconv.FormatUint(uint64(r.Min), 10) + "-" + strconv.FormatUint(uint64(r.Max), 10)
}

// normalize returns the valid ranges sorted by Min with overlapping and
// adjacent ranges merged. It does not modify its input.
func normalize(in []Range) []Range {
	rs := slices.Clone(in)
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Min < b.Min:
			return -1
		case a.Min > b.Min:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && uint64(r.Min) <= uint64(out[n-1].Max)+1 {
			out[n-1].Max = max(out[n-1].Max, r.Max)
			continue
		}
		out = append(out, r)
	}
	return out
}

// subtract returns the indices of ranges that are not in excl. Both inputs
// must be normalized; so is the result.
func subtract(ranges, excl []Range) []Range {
	var out []Range
	j := 0
	for _, r := range ranges {
		lo := uint64(r.Min)
		hi := uint64(r.Max)
		for j < len(excl) && uint64(excl[j].Max) < lo {
			j++
		}
		for k := j; k < len(excl) && uint64(excl[k].Min) <= hi && lo <= hi; k++ {
			e := excl[k]
			if uint64(e.Min) > lo {
				out = append(out, Range{Min: uint32(lo), Max: uint32(uint64(e.Min) - 1)})
			}
			lo = max(lo, uint64(e.Max)+1)
		}
		if lo <= hi {
			out = append(out, Range{Min: uint32(lo), Max: uint32(hi)})
		}
	}
	return out
}
