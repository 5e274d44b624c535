package delta

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The model test drives a Tracker and a naive reference model (two plain
// maps) with the same operations and checks after every step that every
// view of the Tracker matches what the model derives from first principles.

const (
	modelKeys   = 12 // small key and value spaces so equal values and
	modelValues = 3  // repeated keys are common
)

type model struct {
	desired, dataplane map[int]int
}

func newModel() *model {
	return &model{desired: map[int]int{}, dataplane: map[int]int{}}
}

func (m *model) pendingUpdates() map[int]int {
	out := map[int]int{}
	for k, v := range m.desired {
		if dv, ok := m.dataplane[k]; !ok || dv != v {
			out[k] = v
		}
	}
	return out
}

func (m *model) pendingDeletions() map[int]int {
	out := map[int]int{}
	for k, v := range m.dataplane {
		if _, ok := m.desired[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// byteSource hands out small numbers from a byte string; it returns zeros
// once exhausted so every input is a valid program.
type byteSource struct {
	b []byte
	i int
}

func (s *byteSource) next(n int) int {
	if s.i >= len(s.b) {
		return 0
	}
	v := int(s.b[s.i]) % n
	s.i++
	return v
}

func (s *byteSource) done() bool { return s.i >= len(s.b) }

var errInjected = errors.New("injected")

const numOps = 8

// step applies one operation chosen by src to both tr and m and returns a
// description for failure messages.
func step(t testing.TB, tr *Tracker[int, int], m *model, src *byteSource) string {
	op := src.next(numOps)
	switch op {
	case 0:
		k, v := src.next(modelKeys), src.next(modelValues)
		tr.Desired().Set(k, v)
		m.desired[k] = v
		return fmt.Sprintf("Desired.Set(%d,%d)", k, v)
	case 1:
		k := src.next(modelKeys)
		tr.Desired().Delete(k)
		delete(m.desired, k)
		return fmt.Sprintf("Desired.Delete(%d)", k)
	case 2:
		k, v := src.next(modelKeys), src.next(modelValues)
		tr.Dataplane().Set(k, v)
		m.dataplane[k] = v
		return fmt.Sprintf("Dataplane.Set(%d,%d)", k, v)
	case 3:
		k := src.next(modelKeys)
		tr.Dataplane().Delete(k)
		delete(m.dataplane, k)
		return fmt.Sprintf("Dataplane.Delete(%d)", k)
	case 4, 5:
		// A dump of the kernel, possibly reporting a key twice (the later
		// value wins). A successful dump (4) removes the keys it did not
		// report; a dump that fails part way (5) records what it saw and
		// removes nothing.
		fail := op == 5
		var seen [][2]int
		for range src.next(modelKeys + 1) {
			seen = append(seen, [2]int{src.next(modelKeys), src.next(modelValues)})
		}
		var leaked func(int, int)
		err := tr.Dataplane().ReplaceAllIter(func(add func(int, int)) error {
			for _, kv := range seen {
				add(kv[0], kv[1])
			}
			leaked = add
			if fail {
				return errInjected
			}
			return nil
		})
		leaked(0, 99) // must be ignored: the dump has returned
		if fail {
			require.ErrorIs(t, err, errInjected)
		} else {
			require.NoError(t, err)
			clear(m.dataplane)
		}
		for _, kv := range seen {
			m.dataplane[kv[0]] = kv[1]
		}
		return fmt.Sprintf("Dataplane.ReplaceAllIter(fail=%v, %v)", fail, seen)
	case 6:
		want := m.pendingUpdates()
		visited := map[int]bool{}
		tr.PendingUpdates().Iter(func(k, v int) IterAction {
			require.False(t, visited[k], "key %d visited twice", k)
			visited[k] = true
			require.Equal(t, want[k], v, "pending update value for %d", k)
			if src.next(2) == 1 {
				m.dataplane[k] = m.desired[k]
				return IterActionUpdateDataplane
			}
			return IterActionNoOp
		})
		require.Len(t, visited, len(want))
		return "PendingUpdates.Iter"
	case 7:
		want := m.pendingDeletions()
		visited := map[int]bool{}
		tr.PendingDeletions().Iter(func(k, v int) IterAction {
			require.False(t, visited[k], "key %d visited twice", k)
			visited[k] = true
			require.Equal(t, want[k], v, "pending deletion value for %d", k)
			if src.next(2) == 1 {
				delete(m.dataplane, k)
				return IterActionUpdateDataplane
			}
			return IterActionNoOp
		})
		require.Len(t, visited, len(want))
		return "PendingDeletions.Iter"
	}
	panic("unreachable")
}

// checkModel verifies every view of tr against m, and the tracker's own
// structural invariants.
func checkModel(t testing.TB, tr *Tracker[int, int], m *model, what string) {
	t.Helper()
	require.Equal(t, m.desired, maps.Collect(tr.Desired().All()), "desired after %s", what)
	require.Equal(t, m.dataplane, maps.Collect(tr.Dataplane().All()), "dataplane after %s", what)
	require.Equal(t, len(m.desired), tr.Desired().Len(), "desired len after %s", what)
	require.Equal(t, len(m.dataplane), tr.Dataplane().Len(), "dataplane len after %s", what)

	wantUpd, wantDel := m.pendingUpdates(), m.pendingDeletions()
	require.Equal(t, len(wantUpd), tr.PendingUpdates().Len(), "pending updates len after %s", what)
	require.Equal(t, len(wantDel), tr.PendingDeletions().Len(), "pending deletions len after %s", what)
	require.Equal(t, len(wantUpd) == 0 && len(wantDel) == 0, tr.InSync(), "InSync after %s", what)
	for k := range modelKeys {
		dv, dok := m.desired[k]
		gv, gok := tr.Desired().Get(k)
		require.Equal(t, dok, gok, "Desired.Get(%d) after %s", k, what)
		require.Equal(t, dv, gv, "Desired.Get(%d) after %s", k, what)

		pv, pok := m.dataplane[k]
		gv, gok = tr.Dataplane().Get(k)
		require.Equal(t, pok, gok, "Dataplane.Get(%d) after %s", k, what)
		require.Equal(t, pv, gv, "Dataplane.Get(%d) after %s", k, what)

		uv, uok := wantUpd[k]
		gv, gok = tr.PendingUpdates().Get(k)
		require.Equal(t, uok, gok, "PendingUpdates.Get(%d) after %s", k, what)
		require.Equal(t, uv, gv, "PendingUpdates.Get(%d) after %s", k, what)

		xv, xok := wantDel[k]
		gv, gok = tr.PendingDeletions().Get(k)
		require.Equal(t, xok, gok, "PendingDeletions.Get(%d) after %s", k, what)
		require.Equal(t, xv, gv, "PendingDeletions.Get(%d) after %s", k, what)
	}

	// Structure: each key is stored once per view.
	for k := range tr.inSync.m {
		require.NotContains(t, tr.updates.m, k)
		require.NotContains(t, tr.deletions.m, k)
	}
	for k, v := range tr.stale.m {
		require.Contains(t, tr.updates.m, k, "stale key %d without an update", k)
		require.NotEqual(t, tr.updates.m[k], v, "stale value equal to desired for %d", k)
	}
	for k := range tr.updates.m {
		require.NotContains(t, tr.deletions.m, k)
	}
}

func runProgram(t testing.TB, program []byte) {
	tr := NewComparable[int, int]()
	m := newModel()
	src := &byteSource{b: program}
	checkModel(t, tr, m, "start")
	for !src.done() {
		what := step(t, tr, m, src)
		checkModel(t, tr, m, what)
	}
}

func TestTrackerMatchesModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for range 120 {
		program := make([]byte, 400)
		for i := range program {
			program[i] = byte(r.Uint32())
		}
		runProgram(t, program)
	}
}

func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 1, 2, 2, 1, 2, 6, 1})
	f.Add([]byte{2, 3, 1, 0, 3, 1, 1, 5, 3, 3, 1, 4, 2, 7, 1})
	f.Add([]byte{0, 1, 1, 0, 2, 1, 4, 3, 1, 2, 2, 0, 1, 0, 6, 1, 7, 1, 5, 1, 3, 0, 1, 1})
	f.Fuzz(func(t *testing.T, program []byte) {
		runProgram(t, program)
	})
}

// Bulk transitions drain the pending maps; once empty after being large
// they are dropped so their memory is returned.
func TestStoresShrinkAfterBulkChanges(t *testing.T) {
	const n = 3 * shrinkMin
	tr := NewComparable[int, int]()
	mdl := newModel()
	for k := range n {
		tr.Desired().Set(k, k)
		mdl.desired[k] = k
	}
	require.Len(t, tr.updates.m, n)

	// A resync that finds everything programmed drains updates.
	dump := maps.Clone(mdl.desired)
	require.NoError(t, tr.Dataplane().ReplaceAllIter(func(add func(int, int)) error {
		for k, v := range dump {
			add(k, v)
		}
		return nil
	}))
	mdl.dataplane = maps.Clone(dump)
	checkModel(t, tr, mdl, "ReplaceAllIter")
	assert.Nil(t, tr.updates.m, "drained update map is dropped")

	// Every value changes in the kernel: updates and stale fill up, then a
	// programming pass drains both.
	for k := range n {
		tr.Dataplane().Set(k, k+1)
		mdl.dataplane[k] = k + 1
	}
	checkModel(t, tr, mdl, "dataplane drift")
	require.Len(t, tr.stale.m, n)
	tr.PendingUpdates().Iter(func(k, v int) IterAction {
		mdl.dataplane[k] = v
		return IterActionUpdateDataplane
	})
	checkModel(t, tr, mdl, "PendingUpdates.Iter")
	assert.Nil(t, tr.updates.m)
	assert.Nil(t, tr.stale.m)

	// Nothing is desired any more: in-sync drains into deletions, then a
	// deletion pass drains those.
	for k := range n {
		tr.Desired().Delete(k)
		delete(mdl.desired, k)
	}
	checkModel(t, tr, mdl, "Desired.Delete of every key")
	assert.Nil(t, tr.inSync.m, "drained in-sync map is dropped")
	require.Len(t, tr.deletions.m, n)
	tr.PendingDeletions().Iter(func(k, _ int) IterAction {
		delete(mdl.dataplane, k)
		return IterActionUpdateDataplane
	})
	checkModel(t, tr, mdl, "PendingDeletions.Iter")
	assert.Nil(t, tr.deletions.m)

	// The tracker still works after its maps were dropped.
	tr.Desired().Set(1, 1)
	tr.Dataplane().Set(2, 2)
	mdl.desired[1] = 1
	mdl.dataplane[2] = 2
	checkModel(t, tr, mdl, "reuse")
}
