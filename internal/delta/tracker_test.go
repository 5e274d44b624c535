package delta

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type state struct {
	desired, dataplane, updates, deletions map[string]int
}

func snapshot(tr *Tracker[string, int]) state {
	s := state{
		desired:   maps.Collect(tr.Desired().All()),
		dataplane: maps.Collect(tr.Dataplane().All()),
		updates:   map[string]int{},
		deletions: map[string]int{},
	}
	tr.PendingUpdates().Iter(func(k string, v int) IterAction { s.updates[k] = v; return IterActionNoOp })
	tr.PendingDeletions().Iter(func(k string, v int) IterAction { s.deletions[k] = v; return IterActionNoOp })
	return s
}

type m = map[string]int

func TestTrackerTransitions(t *testing.T) {
	tests := []struct {
		name string
		ops  func(tr *Tracker[string, int])
		want state
	}{
		{
			name: "empty",
			ops:  func(*Tracker[string, int]) {},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "desired only is a pending update",
			ops:  func(tr *Tracker[string, int]) { tr.Desired().Set("a", 1) },
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "dataplane only is a pending deletion",
			ops:  func(tr *Tracker[string, int]) { tr.Dataplane().Set("a", 1) },
			want: state{m{}, m{"a": 1}, m{}, m{"a": 1}},
		},
		{
			name: "equal values are in sync",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "dataplane first then equal desired is in sync",
			ops: func(tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 1)
				tr.Desired().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "different values are a pending update",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
			},
			want: state{m{"a": 1}, m{"a": 2}, m{"a": 1}, m{}},
		},
		{
			name: "desired changed back to the dataplane value is in sync",
			ops: func(tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 2)
				tr.Desired().Set("a", 1)
				tr.Desired().Set("a", 2)
			},
			want: state{m{"a": 2}, m{"a": 2}, m{}, m{}},
		},
		{
			name: "in sync key changed in the dataplane",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Set("a", 3)
			},
			want: state{m{"a": 1}, m{"a": 3}, m{"a": 1}, m{}},
		},
		{
			name: "in sync key deleted from the dataplane",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Delete("a")
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "in sync key no longer desired",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Desired().Delete("a")
			},
			want: state{m{}, m{"a": 1}, m{}, m{"a": 1}},
		},
		{
			name: "stale key no longer desired keeps its dataplane value",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Desired().Delete("a")
			},
			want: state{m{}, m{"a": 2}, m{}, m{"a": 2}},
		},
		{
			name: "pending deletion desired again",
			ops: func(tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 2)
				tr.Desired().Set("a", 5)
			},
			want: state{m{"a": 5}, m{"a": 2}, m{"a": 5}, m{}},
		},
		{
			name: "dataplane catches up with a pending update",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Dataplane().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "stale value removed from the dataplane",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Dataplane().Delete("a")
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "pending deletion done externally",
			ops: func(tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Delete("a")
			},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "deleting absent keys does nothing",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Delete("x")
				tr.Dataplane().Delete("y")
			},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "DeleteAll then rebuild keeps matching keys in sync",
			ops: func(tr *Tracker[string, int]) {
				for k, v := range (m{"a": 1, "b": 2, "c": 3}) {
					tr.Desired().Set(k, v)
					tr.Dataplane().Set(k, v)
				}
				tr.Dataplane().Set("c", 9)
				tr.Desired().Set("d", 4)
				tr.Desired().DeleteAll()
				tr.Desired().Set("a", 1)
				tr.Desired().Set("b", 7)
			},
			want: state{m{"a": 1, "b": 7}, m{"a": 1, "b": 2, "c": 9}, m{"b": 7}, m{"c": 9}},
		},
		{
			name: "ReplaceAll recomputes everything",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("same", 1)
				tr.Desired().Set("changed", 1)
				tr.Desired().Set("missing", 1)
				tr.Dataplane().Set("missing", 1)
				tr.Dataplane().Set("gone", 1)
				tr.Dataplane().ReplaceAll(m{"same": 1, "changed": 2, "extra": 3})
			},
			want: state{
				desired:   m{"same": 1, "changed": 1, "missing": 1},
				dataplane: m{"same": 1, "changed": 2, "extra": 3},
				updates:   m{"changed": 1, "missing": 1},
				deletions: m{"extra": 3},
			},
		},
		{
			name: "ReplaceAll with nothing empties the dataplane",
			ops: func(tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Set("b", 1)
				tr.Dataplane().ReplaceAll(nil)
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewComparable[string, int]()
			tc.ops(tr)
			got := snapshot(tr)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, len(tc.want.desired), tr.Desired().Len())
			assert.Equal(t, len(tc.want.dataplane), tr.Dataplane().Len())
			assert.Equal(t, len(tc.want.updates), tr.PendingUpdates().Len())
			assert.Equal(t, len(tc.want.deletions), tr.PendingDeletions().Len())
			assert.Equal(t, len(tc.want.updates)+len(tc.want.deletions) == 0, tr.InSync())
		})
	}
}

func TestIterActionsRecordTheDataplane(t *testing.T) {
	tr := NewComparable[string, int]()
	tr.Desired().Set("new", 1)
	tr.Desired().Set("changed", 2)
	tr.Dataplane().Set("changed", 1)
	tr.Dataplane().Set("old", 3)

	tr.PendingUpdates().Iter(func(k string, v int) IterAction {
		if k == "new" {
			return IterActionUpdateDataplane
		}
		return IterActionNoOp
	})
	tr.PendingDeletions().Iter(func(string, int) IterAction { return IterActionUpdateDataplane })

	got := snapshot(tr)
	assert.Equal(t, state{
		desired:   m{"new": 1, "changed": 2},
		dataplane: m{"new": 1, "changed": 1},
		updates:   m{"changed": 2},
		deletions: m{},
	}, got)

	// Nil callbacks are ignored rather than crashing.
	tr.PendingUpdates().Iter(nil)
	tr.PendingDeletions().Iter(nil)
	assert.Equal(t, got, snapshot(tr))
}

func TestCustomEqualityKeepsTheDesiredValue(t *testing.T) {
	type route struct {
		Dev  string
		Note string // not part of equality: e.g. a field the kernel does not report
	}
	tr := New[string, route](func(a, b route) bool { return a.Dev == b.Dev })

	tr.Dataplane().Set("10.0.0.0/8", route{Dev: "eth0", Note: "from kernel"})
	tr.Desired().Set("10.0.0.0/8", route{Dev: "eth0", Note: "wanted"})
	require.True(t, tr.InSync())

	d, ok := tr.Desired().Get("10.0.0.0/8")
	require.True(t, ok)
	assert.Equal(t, "wanted", d.Note)
	p, ok := tr.Dataplane().Get("10.0.0.0/8")
	require.True(t, ok)
	assert.Equal(t, "wanted", p.Note, "an in-sync key stores the desired value once")

	// A dataplane value equal to the desired one changes nothing.
	tr.Dataplane().Set("10.0.0.0/8", route{Dev: "eth0", Note: "again"})
	p, _ = tr.Dataplane().Get("10.0.0.0/8")
	assert.Equal(t, "wanted", p.Note)
}

func TestNilEqualityUsesDeepEqual(t *testing.T) {
	for _, tr := range []*Tracker[int, []string]{New[int, []string](nil), {}} {
		tr.Desired().Set(1, []string{"a", "b"})
		tr.Dataplane().Set(1, []string{"a", "b"})
		assert.True(t, tr.InSync())
		tr.Dataplane().Set(1, []string{"a"})
		assert.False(t, tr.InSync())
		assert.Equal(t, 1, tr.PendingUpdates().Len())
	}
}

func TestReplaceAllIter(t *testing.T) {
	t.Run("later duplicates win", func(t *testing.T) {
		tr := NewComparable[string, int]()
		tr.Desired().Set("a", 2)
		err := tr.Dataplane().ReplaceAllIter(func(add func(string, int)) error {
			add("a", 1)
			add("a", 2)
			return nil
		})
		require.NoError(t, err)
		assert.True(t, tr.InSync())
	})
	t.Run("a failed dump removes nothing", func(t *testing.T) {
		tr := NewComparable[string, int]()
		tr.Dataplane().Set("kept", 1)
		tr.Desired().Set("kept", 1)
		tr.Dataplane().Set("other", 1)
		boom := errors.New("dump failed")
		err := tr.Dataplane().ReplaceAllIter(func(add func(string, int)) error {
			add("new", 5)
			return boom
		})
		require.ErrorIs(t, err, boom)
		assert.Equal(t, m{"kept": 1, "other": 1, "new": 5}, maps.Collect(tr.Dataplane().All()))
	})
	t.Run("nil dump is an error and changes nothing", func(t *testing.T) {
		tr := NewComparable[string, int]()
		tr.Dataplane().Set("a", 1)
		require.ErrorIs(t, tr.Dataplane().ReplaceAllIter(nil), ErrNilFunc)
		assert.Equal(t, 1, tr.Dataplane().Len())
	})
}

func TestIterBatched(t *testing.T) {
	newTracker := func() *Tracker[int, int] {
		tr := NewComparable[int, int]()
		for k := range 10 {
			tr.Desired().Set(k, k*10)
			tr.Dataplane().Set(100+k, k)
		}
		return tr
	}
	boom := errors.New("netlink batch failed")

	tests := []struct {
		name      string
		n         int
		send      func(calls int, batch []Entry[int, int]) (int, error)
		wantErr   error
		wantCalls int
		wantLeft  int // pending after the call
	}{
		{
			name:      "all succeed in batches of 3",
			n:         3,
			send:      func(_ int, b []Entry[int, int]) (int, error) { return len(b), nil },
			wantCalls: 4,
		},
		{
			name:      "batch larger than pending",
			n:         100,
			send:      func(_ int, b []Entry[int, int]) (int, error) { return len(b), nil },
			wantCalls: 1,
		},
		{
			name:      "partial success continues",
			n:         4,
			send:      func(_ int, b []Entry[int, int]) (int, error) { return len(b) / 2, nil },
			wantCalls: 3,
			wantLeft:  10 - (2 + 2 + 1),
		},
		{
			name: "error stops after recording the prefix",
			n:    4,
			send: func(calls int, b []Entry[int, int]) (int, error) {
				if calls == 2 {
					return 1, boom
				}
				return len(b), nil
			},
			wantErr:   boom,
			wantCalls: 2,
			wantLeft:  10 - 5,
		},
		{
			name:      "count above batch size is rejected",
			n:         4,
			send:      func(_ int, b []Entry[int, int]) (int, error) { return len(b) + 1, nil },
			wantErr:   ErrInvalidCount,
			wantCalls: 1,
			wantLeft:  10,
		},
		{
			name:      "negative count is rejected",
			n:         4,
			send:      func(int, []Entry[int, int]) (int, error) { return -1, nil },
			wantErr:   ErrInvalidCount,
			wantCalls: 1,
			wantLeft:  10,
		},
		{
			name:     "zero batch size",
			n:        0,
			send:     func(_ int, b []Entry[int, int]) (int, error) { return len(b), nil },
			wantErr:  ErrInvalidBatchSize,
			wantLeft: 10,
		},
	}
	for _, tc := range tests {
		for _, kind := range []string{"updates", "deletions"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				tr := newTracker()
				pending := tr.PendingUpdates().Len
				iter := tr.PendingUpdates().IterBatched
				if kind == "deletions" {
					pending = tr.PendingDeletions().Len
					iter = tr.PendingDeletions().IterBatched
				}
				calls := 0
				err := iter(tc.n, func(b []Entry[int, int]) (int, error) {
					calls++
					require.LessOrEqual(t, len(b), tc.n)
					return tc.send(calls, b)
				})
				if tc.wantErr != nil {
					require.ErrorIs(t, err, tc.wantErr)
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, tc.wantCalls, calls)
				assert.Equal(t, tc.wantLeft, pending())
				// Both views stay consistent with each other.
				assert.Equal(t, 10, tr.Desired().Len())
				if kind == "updates" {
					assert.Equal(t, 10+(10-tc.wantLeft), tr.Dataplane().Len())
				} else {
					assert.Equal(t, tc.wantLeft, tr.Dataplane().Len())
				}
			})
		}
	}
}

func TestIterBatchedMarksReorderedSuccesses(t *testing.T) {
	tr := NewComparable[int, int]()
	for k := range 4 {
		tr.Desired().Set(k, k)
	}
	// The "kernel" accepts only even keys; the callback moves them first.
	err := tr.PendingUpdates().IterBatched(4, func(b []Entry[int, int]) (int, error) {
		slices.SortFunc(b, func(x, y Entry[int, int]) int { return x.Key%2 - y.Key%2 })
		ok := 0
		for _, e := range b {
			if e.Key%2 == 0 {
				ok++
			}
		}
		return ok, nil
	})
	require.NoError(t, err)
	assert.Equal(t, map[int]int{0: 0, 2: 2}, maps.Collect(tr.Dataplane().All()))
	_, ok := tr.PendingUpdates().Get(1)
	assert.True(t, ok)
	_, ok = tr.PendingUpdates().Get(2)
	assert.False(t, ok)
}

func TestIterBatchedNilSend(t *testing.T) {
	tr := NewComparable[int, int]()
	tr.Desired().Set(1, 1)
	require.ErrorIs(t, tr.PendingUpdates().IterBatched(1, nil), ErrNilFunc)
	require.ErrorIs(t, tr.PendingDeletions().IterBatched(1, nil), ErrNilFunc)
	assert.Equal(t, 1, tr.PendingUpdates().Len())
}

func TestIterBatchedEmptyDoesNotCall(t *testing.T) {
	tr := NewComparable[int, int]()
	called := false
	err := tr.PendingUpdates().IterBatched(8, func([]Entry[int, int]) (int, error) { called = true; return 0, nil })
	require.NoError(t, err)
	assert.False(t, called)
}

func TestAllStopsEarly(t *testing.T) {
	tr := NewComparable[int, int]()
	for k := range 10 {
		tr.Desired().Set(k, k)
		tr.Dataplane().Set(k+5, k)
	}
	for _, seq := range []func(func(int, int) bool){tr.Desired().All(), tr.Dataplane().All()} {
		n := 0
		for range seq {
			n++
			if n == 3 {
				break
			}
		}
		assert.Equal(t, 3, n)
	}
}

func TestIterActionString(t *testing.T) {
	tests := map[IterAction]string{
		IterActionNoOp:            "NoOp",
		IterActionUpdateDataplane: "UpdateDataplane",
		IterAction(7):             "IterAction(7)",
	}
	for a, want := range tests {
		assert.Equal(t, want, a.String())
	}
}
