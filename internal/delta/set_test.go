package delta

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sorted(seq func(func(string) bool)) []string {
	return slices.Sorted(seq)
}

func pendingKeys(p PendingSet[string]) []string {
	var out []string
	p.Iter(func(k string) IterAction { out = append(out, k); return IterActionNoOp })
	slices.Sort(out)
	return out
}

func TestSetTracker(t *testing.T) {
	tests := []struct {
		name                 string
		ops                  func(s *SetTracker[string])
		desired, dataplane   []string
		wantAdds, wantDels   []string
		wantInSync           bool
		containsD, containsP string
	}{
		{
			name:       "empty",
			ops:        func(*SetTracker[string]) {},
			wantInSync: true,
		},
		{
			name: "adds and deletions",
			ops: func(s *SetTracker[string]) {
				s.Desired().Add("a")
				s.Desired().Add("b")
				s.Dataplane().Add("b")
				s.Dataplane().Add("c")
			},
			desired:   []string{"a", "b"},
			dataplane: []string{"b", "c"},
			wantAdds:  []string{"a"},
			wantDels:  []string{"c"},
			containsD: "a",
			containsP: "c",
		},
		{
			name: "delete both sides",
			ops: func(s *SetTracker[string]) {
				s.Desired().Add("a")
				s.Dataplane().Add("a")
				s.Desired().Delete("a")
				s.Dataplane().Delete("a")
			},
			wantInSync: true,
		},
		{
			name: "DeleteAll and ReplaceAll",
			ops: func(s *SetTracker[string]) {
				s.Desired().Add("a")
				s.Desired().Add("b")
				s.Desired().DeleteAll()
				s.Desired().Add("x")
				s.Dataplane().Add("stale")
				s.Dataplane().ReplaceAll(slices.Values([]string{"x", "y"}))
			},
			desired:   []string{"x"},
			dataplane: []string{"x", "y"},
			wantDels:  []string{"y"},
			containsD: "x",
			containsP: "y",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSet[string]()
			tc.ops(s)
			assert.Equal(t, tc.desired, sorted(s.Desired().All()))
			assert.Equal(t, tc.dataplane, sorted(s.Dataplane().All()))
			assert.Equal(t, tc.wantAdds, pendingKeys(s.PendingAdds()))
			assert.Equal(t, tc.wantDels, pendingKeys(s.PendingDeletions()))
			assert.Equal(t, len(tc.desired), s.Desired().Len())
			assert.Equal(t, len(tc.dataplane), s.Dataplane().Len())
			assert.Equal(t, len(tc.wantAdds), s.PendingAdds().Len())
			assert.Equal(t, len(tc.wantDels), s.PendingDeletions().Len())
			assert.Equal(t, tc.wantInSync, s.InSync())
			if tc.containsD != "" {
				assert.True(t, s.Desired().Contains(tc.containsD))
			}
			if tc.containsP != "" {
				assert.True(t, s.Dataplane().Contains(tc.containsP))
			}
			assert.False(t, s.Desired().Contains("never"))
			assert.False(t, s.Dataplane().Contains("never"))
			for _, k := range tc.wantAdds {
				assert.True(t, s.PendingAdds().Contains(k))
			}
			for _, k := range tc.wantDels {
				assert.True(t, s.PendingDeletions().Contains(k))
			}
		})
	}
}

func TestSetTrackerZeroValueAndActions(t *testing.T) {
	var s SetTracker[int]
	for k := range 6 {
		s.Desired().Add(k)
	}
	s.Dataplane().Add(42)

	s.PendingAdds().Iter(func(k int) IterAction {
		if k < 3 {
			return IterActionUpdateDataplane
		}
		return IterActionNoOp
	})
	assert.Equal(t, 3, s.PendingAdds().Len())

	var sent []int
	err := s.PendingAdds().IterBatched(2, func(b []int) (int, error) {
		sent = append(sent, b...)
		return len(b), nil
	})
	require.NoError(t, err)
	assert.ElementsMatch(t, []int{3, 4, 5}, sent)

	boom := errors.New("boom")
	err = s.PendingDeletions().IterBatched(5, func(b []int) (int, error) {
		assert.Equal(t, []int{42}, b)
		return 0, boom
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 1, s.PendingDeletions().Len())

	s.PendingDeletions().Iter(func(int) IterAction { return IterActionUpdateDataplane })
	assert.True(t, s.InSync())
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, slices.Sorted(s.Dataplane().All()))

	s.PendingAdds().Iter(nil)
	require.ErrorIs(t, s.PendingAdds().IterBatched(1, nil), ErrNilFunc)
	require.ErrorIs(t, s.PendingAdds().IterBatched(0, func([]int) (int, error) { return 0, nil }), ErrInvalidBatchSize)
}

func TestSetTrackerReplaceAllIter(t *testing.T) {
	s := NewSet[string]()
	s.Desired().Add("a")
	require.ErrorIs(t, s.Dataplane().ReplaceAllIter(nil), ErrNilFunc)
	boom := errors.New("dump failed")
	err := s.Dataplane().ReplaceAllIter(func(add func(string)) error {
		add("a")
		add("b")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, pendingKeys(s.PendingDeletions()))
	err = s.Dataplane().ReplaceAllIter(func(add func(string)) error { return boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, 2, s.Dataplane().Len(), "a failed dump removes nothing")
	s.Dataplane().ReplaceAll(nil)
	assert.Equal(t, 0, s.Dataplane().Len())
}
