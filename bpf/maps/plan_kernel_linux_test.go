//go:build linux

package maps_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/dataplane"
)

// hx is a uint32 as the map holds it, in hex.
func hx(x uint32) string { return fmt.Sprintf("%x", binary.NativeEndian.AppendUint32(nil, x)) }

// wantWrites is the plan an Apply from kernel to desired makes, computed
// here from the two maps alone: updates (add, replace) sorted by text,
// then deletes sorted by text.
func wantWrites(kernel, desired map[uint32]uint32) []dataplane.Write {
	var upd, del []dataplane.Write
	for k, v := range desired {
		kv, has := kernel[k]
		switch {
		case !has:
			upd = append(upd, dataplane.Write{Op: dataplane.WriteAdd, Kind: "entry", Object: hx(k) + " → " + hx(v)})
		case kv != v:
			upd = append(upd, dataplane.Write{Op: dataplane.WriteReplace, Kind: "entry", Object: hx(k) + " → " + hx(v), Detail: "was " + hx(kv)})
		}
	}
	for k, kv := range kernel {
		if _, ok := desired[k]; !ok {
			del = append(del, dataplane.Write{Op: dataplane.WriteDelete, Kind: "entry", Object: hx(k) + " → " + hx(kv)})
		}
	}
	by := func(a, b dataplane.Write) int { return strings.Compare(a.Object, b.Object) }
	slices.SortFunc(upd, by)
	slices.SortFunc(del, by)
	return append(upd, del...)
}

// scribbleMap writes n random entries of 64 keys into m behind the Sync's
// back and deletes some, as another writer would.
func scribbleMap(t *testing.T, m *ebpf.Map, r *rand.Rand, n int) {
	t.Helper()
	for range n {
		k := r.Uint32N(64)
		if r.IntN(3) == 0 {
			_ = m.Delete(k) // a key not there is fine
			continue
		}
		require.NoError(t, m.Put(k, r.Uint32N(4)))
	}
}

// For random map contents and random desired sets (reached by whole
// replacements and by single Sets and Deletes, and after writes behind
// the Sync's back found by a resync), on a real hash map: Plan writes
// nothing and names exactly the writes the map needs, State's drift names
// the same entries, the next Apply makes exactly the planned writes (the
// map changes by them, the counters count them), and then Plan is empty
// and State in sync.
func TestKernelSyncPlanProperties(t *testing.T) {
	ctx := context.Background()
	planned := 0
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 21))
			m, _ := openMap(t, u32Spec)
			scribbleMap(t, m, r, 40)
			s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{Name: "np_plan", BatchSize: 1 + r.IntN(16)})
			require.NoError(t, err)
			desired := map[uint32]uint32{}
			for round := range 8 {
				switch round % 3 {
				case 0:
					desired = map[uint32]uint32{}
					for range r.IntN(40) {
						desired[r.Uint32N(64)] = r.Uint32N(4)
					}
					s.ReplaceDesired(desired)
				case 1:
					for range r.IntN(20) {
						k := r.Uint32N(64)
						if r.IntN(2) == 0 {
							s.Delete(k)
							delete(desired, k)
							continue
						}
						v := r.Uint32N(4)
						s.Set(k, v)
						desired[k] = v
					}
				case 2:
					scribbleMap(t, m, r, 20)
					s.QueueResync()
				}
				before := dump[uint32, uint32](t, m)
				c0 := s.Counters()
				p, err := s.Plan(ctx)
				require.NoError(t, err)
				assert.Equal(t, before, dump[uint32, uint32](t, m), "Plan writes nothing")
				c1 := s.Counters()
				assert.Equal(t, c0.Updated+c0.Deleted, c1.Updated+c1.Deleted, "Plan writes nothing")
				assert.Equal(t, "np_plan", p.Driver)
				want := wantWrites(before, desired)
				require.Equal(t, want, p.Writes, "round %d", round)
				planned += len(p.Writes)

				st, err := s.State(ctx)
				require.NoError(t, err)
				require.Len(t, st.Drift, len(p.Writes))
				assert.Len(t, st.Owned, len(before))
				assert.Empty(t, st.Failing)

				require.NoError(t, s.Apply(ctx))
				after := dump[uint32, uint32](t, m)
				assert.Equal(t, desired, after)
				assert.Equal(t, p.Writes, wantWrites(before, after), "the map changed by the planned writes")
				c2 := s.Counters()
				assert.Equal(t, len(p.Writes), c2.Updated+c2.Deleted-c1.Updated-c1.Deleted, "and no other")

				p, err = s.Plan(ctx)
				require.NoError(t, err)
				assert.True(t, p.Empty(), "%v", p)
				st, err = s.State(ctx)
				require.NoError(t, err)
				assert.True(t, st.InSync(), "%v", st)
				assert.Len(t, st.Owned, len(desired))
			}
		})
	}
	assert.Greater(t, planned, 200, "the draw makes writes to plan")
}

// State and Plan of a full map: Plan lists every desired entry (a write
// Apply tries again), the Apply leaves those the map has no room for
// failing, and State names them as drift and failures.
func TestKernelSyncPlanFullMap(t *testing.T) {
	ctx := context.Background()
	m, _ := openMap(t, maps.Spec{Name: "np_full", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 4})
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
	require.NoError(t, err)
	s.ReplaceDesired(seq(1, 6))
	p, err := s.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, p.Writes, 6)
	assert.Equal(t, "np_full: 6 writes", strings.SplitN(p.String(), "\n", 2)[0])
	assert.Equal(t, "+ entry "+hx(1)+" → "+hx(11), p.Writes[0].String())
	assert.Error(t, s.Apply(ctx))
	st, err := s.State(ctx)
	require.NoError(t, err)
	assert.Len(t, st.Owned, 4)
	assert.Len(t, st.Drift, 2)
	require.Len(t, st.Failing, 2)
	for i, d := range st.Drift {
		assert.Empty(t, d.Have)
		assert.ErrorIs(t, st.Failing[i], maps.ErrFull)
	}
	p, err = s.Plan(ctx)
	require.NoError(t, err)
	assert.Len(t, p.Writes, 2, "the entries the map had no room for are tried again")
}
