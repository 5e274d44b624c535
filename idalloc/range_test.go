package idalloc

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRangeMethods(t *testing.T) {
	tests := []struct {
		name    string
		r       Range
		valid   bool
		length  uint64
		str     string
		in, out []uint32
	}{
		{name: "single", r: Range{Min: 7, Max: 7}, valid: true, length: 1, str: "7", in: []uint32{7}, out: []uint32{6, 8}},
		{name: "span", r: Range{Min: 1, Max: 250}, valid: true, length: 250, str: "1-250", in: []uint32{1, 100, 250}, out: []uint32{0, 251}},
		{name: "zero", r: Range{}, valid: true, length: 1, str: "0", in: []uint32{0}, out: []uint32{1}},
		{name: "full space", r: Range{Min: 0, Max: math.MaxUint32}, valid: true, length: 1 << 32, str: "0-4294967295", in: []uint32{0, math.MaxUint32}},
		{name: "inverted", r: Range{Min: 9, Max: 3}, valid: false, length: 0, str: "9-3", out: []uint32{3, 5, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate()
			if tt.valid {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidRange)
			}
			assert.Equal(t, tt.length, tt.r.Len())
			assert.Equal(t, tt.str, tt.r.String())
			for _, i := range tt.in {
				assert.True(t, tt.r.Contains(i), "%d", i)
			}
			for _, i := range tt.out {
				assert.False(t, tt.r.Contains(i), "%d", i)
			}
		})
	}
}

func TestNormalizeAndSubtract(t *testing.T) {
	tests := []struct {
		name   string
		ranges []Range
		excl   []Range
		want   []Range
	}{
		{name: "nothing", want: nil},
		{name: "unsorted overlapping", ranges: []Range{{20, 30}, {1, 5}, {4, 10}, {25, 40}}, want: []Range{{1, 10}, {20, 40}}},
		{name: "adjacent merged", ranges: []Range{{1, 5}, {6, 9}}, want: []Range{{1, 9}}},
		{name: "contained", ranges: []Range{{1, 100}, {10, 20}}, want: []Range{{1, 100}}},
		{name: "hole in middle", ranges: []Range{{1, 10}}, excl: []Range{{4, 6}}, want: []Range{{1, 3}, {7, 10}}},
		{name: "trim both ends", ranges: []Range{{1, 10}}, excl: []Range{{0, 2}, {9, 20}}, want: []Range{{3, 8}}},
		{name: "exclusion spans ranges", ranges: []Range{{1, 5}, {10, 15}, {20, 25}}, excl: []Range{{4, 21}}, want: []Range{{1, 3}, {22, 25}}},
		{name: "all excluded", ranges: []Range{{3, 4}}, excl: []Range{{0, 10}}, want: nil},
		{name: "top of space", ranges: []Range{{math.MaxUint32 - 5, math.MaxUint32}}, excl: []Range{{math.MaxUint32, math.MaxUint32}}, want: []Range{{math.MaxUint32 - 5, math.MaxUint32 - 1}}},
		{name: "full space minus top and bottom", ranges: []Range{{0, math.MaxUint32}}, excl: []Range{{0, 0}, {math.MaxUint32, math.MaxUint32}}, want: []Range{{1, math.MaxUint32 - 1}}},
		{name: "adjacent at top", ranges: []Range{{math.MaxUint32 - 1, math.MaxUint32}, {0, math.MaxUint32 - 2}}, want: []Range{{0, math.MaxUint32}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := subtract(normalize(tt.ranges), normalize(tt.excl))
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestNormalizeDoesNotModifyInput(t *testing.T) {
	in := []Range{{20, 30}, {1, 5}, {4, 10}}
	orig := append([]Range(nil), in...)
	_ = normalize(in)
	assert.Equal(t, orig, in)
}

func TestDefaultsAreFreshCopies(t *testing.T) {
	r := DefaultRouteTableRanges()
	r[0].Max = 1
	assert.Equal(t, []Range{{1, 250}}, DefaultRouteTableRanges())
	e := DefaultExclusions()
	e[1].Min = 0
	assert.Equal(t, []Range{{0, 0}, {253, 255}}, DefaultExclusions())
}

func TestNewIndexAllocator(t *testing.T) {
	tests := []struct {
		name    string
		opts    IndexOptions
		wantErr error
		want    []Range
	}{
		{name: "defaults", opts: IndexOptions{}, want: []Range{{1, 250}}},
		{name: "empty non-nil ranges use default", opts: IndexOptions{Ranges: []Range{}}, want: []Range{{1, 250}}},
		{name: "default exclusions applied to custom range", opts: IndexOptions{Ranges: []Range{{0, 300}}}, want: []Range{{1, 252}, {256, 300}}},
		{name: "no default exclusions", opts: IndexOptions{Ranges: []Range{{0, 300}}, NoDefaultExclusions: true}, want: []Range{{0, 300}}},
		{name: "extra exclusions", opts: IndexOptions{Exclusions: []Range{{100, 199}}}, want: []Range{{1, 99}, {200, 250}}},
		{name: "overlapping ranges merged", opts: IndexOptions{Ranges: []Range{{10, 20}, {15, 30}, {40, 40}}}, want: []Range{{10, 30}, {40, 40}}},
		{name: "full uint32 space", opts: IndexOptions{Ranges: []Range{{0, math.MaxUint32}}, NoDefaultExclusions: true}, want: []Range{{0, math.MaxUint32}}},
		{name: "inverted range", opts: IndexOptions{Ranges: []Range{{1, 10}, {20, 19}}}, wantErr: ErrInvalidRange},
		{name: "inverted exclusion", opts: IndexOptions{Exclusions: []Range{{5, 4}}}, wantErr: ErrInvalidRange},
		{name: "everything excluded", opts: IndexOptions{Exclusions: []Range{{0, 1000}}}, wantErr: ErrNoIndices},
		{name: "only reserved tables", opts: IndexOptions{Ranges: []Range{{253, 255}}}, wantErr: ErrNoIndices},
		{name: "only table zero", opts: IndexOptions{Ranges: []Range{{0, 0}}}, wantErr: ErrNoIndices},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewIndexAllocator(tt.opts)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, a)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, a.Ranges())
			var total uint64
			for _, r := range tt.want {
				total += r.Len()
			}
			assert.Equal(t, clampInt(total), a.Free())
			assert.Zero(t, a.Len())
		})
	}
}

func TestNewIndexAllocatorDoesNotModifyOptions(t *testing.T) {
	opts := IndexOptions{Ranges: []Range{{30, 40}, {1, 10}}, Exclusions: []Range{{5, 6}, {2, 3}}}
	_, err := NewIndexAllocator(opts)
	require.NoError(t, err)
	assert.Equal(t, []Range{{30, 40}, {1, 10}}, opts.Ranges)
	assert.Equal(t, []Range{{5, 6}, {2, 3}}, opts.Exclusions)
}
