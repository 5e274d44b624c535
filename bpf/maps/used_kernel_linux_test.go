//go:build linux

package maps_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
)

// Used counts what the map holds while an Apply runs (the desired entries
// and the stale ones until they are deleted), so that a caller admitting
// keys while Used stays within MaxEntries never has one refused for want
// of room, also when it replaces entries in a full map; Read makes the
// count include what someone else put in the map.
func TestKernelSyncUsed(t *testing.T) {
	spec := u32Spec
	spec.MaxEntries = 4
	m, _ := openMap(t, spec)
	ctx := context.Background()
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
	require.NoError(t, err)
	require.Zero(t, s.Used())
	s.ReplaceDesired(seq(0, 4))
	require.Equal(t, 4, s.Used())
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, 4, s.Used())

	// Replace two: the two old ones stay counted until they are deleted.
	s.Delete(0)
	s.Delete(1)
	require.True(t, s.Holds(0), "stale, in the map until deleted")
	require.Equal(t, 4, s.Used())
	admit := func(k uint32) bool {
		if !s.Holds(k) && s.Used() >= int(m.MaxEntries()) {
			return false
		}
		s.Set(k, k*10+1)
		return true
	}
	require.False(t, admit(10), "no room until 0 and 1 are deleted")
	require.True(t, admit(0), "taking a stale key back takes no room")
	require.Equal(t, 4, s.Used())
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, 3, s.Used())
	require.True(t, admit(10))
	require.False(t, admit(11))
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, map[uint32]uint32{0: 1, 2: 21, 3: 31, 10: 101}, dump[uint32, uint32](t, m))

	// Someone else deletes one entry and adds another: counted after Read.
	require.NoError(t, m.Delete(uint32(2)))
	require.NoError(t, m.Put(uint32(7), uint32(7)))
	s.QueueResync()
	require.NoError(t, s.Read(ctx))
	require.Equal(t, 5, s.Used(), "the four desired and the foreign one")
	require.True(t, s.Holds(7))
	// More than the map holds: writing 2 back before 7 is deleted fails.
	require.ErrorIs(t, s.ApplyUpdates(ctx), maps.ErrEntry)
	require.NoError(t, s.ApplyDeletions(ctx))
	require.NoError(t, s.ApplyUpdates(ctx))
	require.Equal(t, 4, s.Used())
	s.ReplaceDesired(seq(20, 1))
	require.Equal(t, 5, s.Used(), "one desired, four stale")
	require.NoError(t, s.ApplyDeletions(ctx))
	require.Equal(t, 1, s.Used())
	require.NoError(t, s.ApplyUpdates(ctx))
	require.Equal(t, 1, s.Used())
}
