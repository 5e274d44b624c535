package delta

import (
	"errors"
	"maps"
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

// replaceAll loads dump into tr's dataplane view through ReplaceAllIter, as
// a driver does after a successful kernel dump.
func replaceAll[K comparable, V any](tb testing.TB, tr *Tracker[K, V], dump map[K]V) {
	tb.Helper()
	err := tr.Dataplane().ReplaceAllIter(func(add func(K, V)) error {
		for k, v := range dump {
			add(k, v)
		}
		return nil
	})
	require.NoError(tb, err)
}

func TestTrackerTransitions(t *testing.T) {
	tests := []struct {
		name string
		ops  func(t testing.TB, tr *Tracker[string, int])
		want state
	}{
		{
			name: "empty",
			ops:  func(testing.TB, *Tracker[string, int]) {},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "desired only is a pending update",
			ops:  func(_ testing.TB, tr *Tracker[string, int]) { tr.Desired().Set("a", 1) },
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "dataplane only is a pending deletion",
			ops:  func(_ testing.TB, tr *Tracker[string, int]) { tr.Dataplane().Set("a", 1) },
			want: state{m{}, m{"a": 1}, m{}, m{"a": 1}},
		},
		{
			name: "equal values are in sync",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "dataplane first then equal desired is in sync",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 1)
				tr.Desired().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "different values are a pending update",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
			},
			want: state{m{"a": 1}, m{"a": 2}, m{"a": 1}, m{}},
		},
		{
			name: "desired changed back to the dataplane value is in sync",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 2)
				tr.Desired().Set("a", 1)
				tr.Desired().Set("a", 2)
			},
			want: state{m{"a": 2}, m{"a": 2}, m{}, m{}},
		},
		{
			name: "in sync key changed in the dataplane",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Set("a", 3)
			},
			want: state{m{"a": 1}, m{"a": 3}, m{"a": 1}, m{}},
		},
		{
			name: "in sync key deleted from the dataplane",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Delete("a")
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "in sync key no longer desired",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Desired().Delete("a")
			},
			want: state{m{}, m{"a": 1}, m{}, m{"a": 1}},
		},
		{
			name: "stale key no longer desired keeps its dataplane value",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Desired().Delete("a")
			},
			want: state{m{}, m{"a": 2}, m{}, m{"a": 2}},
		},
		{
			name: "pending deletion desired again",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 2)
				tr.Desired().Set("a", 5)
			},
			want: state{m{"a": 5}, m{"a": 2}, m{"a": 5}, m{}},
		},
		{
			name: "dataplane catches up with a pending update",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Dataplane().Set("a", 1)
			},
			want: state{m{"a": 1}, m{"a": 1}, m{}, m{}},
		},
		{
			name: "stale value removed from the dataplane",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 2)
				tr.Dataplane().Delete("a")
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
		{
			name: "pending deletion done externally",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Delete("a")
			},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "deleting absent keys does nothing",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Delete("x")
				tr.Dataplane().Delete("y")
			},
			want: state{m{}, m{}, m{}, m{}},
		},
		{
			name: "deleting every desired key then rebuilding keeps matching keys in sync",
			ops: func(_ testing.TB, tr *Tracker[string, int]) {
				for k, v := range (m{"a": 1, "b": 2, "c": 3}) {
					tr.Desired().Set(k, v)
					tr.Dataplane().Set(k, v)
				}
				tr.Dataplane().Set("c", 9)
				tr.Desired().Set("d", 4)
				for _, k := range []string{"a", "b", "c", "d"} {
					tr.Desired().Delete(k)
				}
				tr.Desired().Set("a", 1)
				tr.Desired().Set("b", 7)
			},
			want: state{m{"a": 1, "b": 7}, m{"a": 1, "b": 2, "c": 9}, m{"b": 7}, m{"c": 9}},
		},
		{
			name: "ReplaceAllIter recomputes everything",
			ops: func(t testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("same", 1)
				tr.Desired().Set("changed", 1)
				tr.Desired().Set("missing", 1)
				tr.Desired().Set("stale", 1)
				tr.Dataplane().Set("missing", 1)
				tr.Dataplane().Set("stale", 2)
				tr.Dataplane().Set("gone", 1)
				replaceAll(t, tr, m{"same": 1, "changed": 2, "extra": 3})
			},
			want: state{
				desired:   m{"same": 1, "changed": 1, "missing": 1, "stale": 1},
				dataplane: m{"same": 1, "changed": 2, "extra": 3},
				updates:   m{"changed": 1, "missing": 1, "stale": 1},
				deletions: m{"extra": 3},
			},
		},
		{
			name: "ReplaceAllIter with an empty dump empties the dataplane",
			ops: func(t testing.TB, tr *Tracker[string, int]) {
				tr.Desired().Set("a", 1)
				tr.Dataplane().Set("a", 1)
				tr.Dataplane().Set("b", 1)
				replaceAll(t, tr, nil)
			},
			want: state{m{"a": 1}, m{}, m{"a": 1}, m{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewComparable[string, int]()
			tc.ops(t, tr)
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
	t.Run("add after the dump returned is ignored", func(t *testing.T) {
		tr := NewComparable[string, int]()
		var leaked func(string, int)
		err := tr.Dataplane().ReplaceAllIter(func(add func(string, int)) error {
			add("a", 1)
			leaked = add
			return nil
		})
		require.NoError(t, err)
		leaked("b", 2)
		leaked("a", 3)
		assert.Equal(t, m{"a": 1}, maps.Collect(tr.Dataplane().All()))
	})
	t.Run("a failed dump keeps unreported stale values", func(t *testing.T) {
		tr := NewComparable[string, int]()
		tr.Desired().Set("a", 1)
		tr.Dataplane().Set("a", 2)
		err := tr.Dataplane().ReplaceAllIter(func(func(string, int)) error { return errors.New("dump failed") })
		require.Error(t, err)
		assert.Equal(t, state{m{"a": 1}, m{"a": 2}, m{"a": 1}, m{}}, snapshot(tr))
	})
	t.Run("nil dump is an error and changes nothing", func(t *testing.T) {
		tr := NewComparable[string, int]()
		tr.Dataplane().Set("a", 1)
		require.ErrorIs(t, tr.Dataplane().ReplaceAllIter(nil), ErrNilFunc)
		assert.Equal(t, 1, tr.Dataplane().Len())
	})
}

func TestAllStopsEarly(t *testing.T) {
	tr := NewComparable[int, int]()
	for k := range 10 {
		tr.Desired().Set(k, k)
		tr.Dataplane().Set(k+5, k+5) // 5..9 in sync, 10..14 stale or deleted
	}
	tr.Dataplane().Set(0, 1) // a stale value
	for _, seq := range []func(func(int, int) bool){tr.Desired().All(), tr.Dataplane().All()} {
		total := 0
		for range seq {
			total++
		}
		for stop := 1; stop <= total; stop++ {
			n := 0
			for range seq {
				n++
				if n == stop {
					break
				}
			}
			assert.Equal(t, stop, n)
		}
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
