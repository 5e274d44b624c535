//go:build linux

package maps

import (
	"context"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

func internalMap(t *testing.T) *ebpf.Map {
	t.Helper()
	m, err := Open(bpftest.Dir(t), Spec{Name: "np_int", Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: 20000})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// The paths the kernel does not normally take: no batch operations at all
// (key by key reads and writes), and a batch smaller than a bucket.
func TestKernelSyncFallbacks(t *testing.T) {
	ctx := context.Background()
	m := internalMap(t)
	want := map[uint32]uint32{}
	for i := range uint32(10000) {
		want[i] = ^i
	}
	s, err := NewSync[uint32, uint32](m, SyncOptions{BatchSize: 100})
	require.NoError(t, err)
	s.noBatchLookup, s.noBatchUpdate, s.noBatchDelete = true, true, true
	s.ReplaceDesired(want)
	require.NoError(t, s.Apply(ctx))
	st := s.Counters()
	require.Equal(t, 10000, st.Updated)
	// The list of changed keys is made anew small once written, so its
	// memory goes with the large Apply.
	require.Empty(t, s.dirty)
	require.Zero(t, cap(s.dirty))
	require.Equal(t, 1+10000, st.Syscalls) // one next-key on the empty map, then one update each

	got, err := s.iterateRead(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	st = s.Counters()

	for k := range uint32(5000) {
		s.Delete(k)
		delete(want, k)
	}
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, st.Syscalls+5000, s.Counters().Syscalls)

	// A batch of 1 is smaller than many buckets: the read starts over with
	// larger batches and still returns every entry once.
	s2, err := NewSync[uint32, uint32](m, SyncOptions{BatchSize: 1})
	require.NoError(t, err)
	got, err = s2.batchRead(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// Reserve makes the empty sets anew and leaves those that hold entries as
// they are: what was declared and written stays so, and the next Apply
// writes only what changed.
func TestKernelSyncReserve(t *testing.T) {
	ctx := context.Background()
	m := internalMap(t)
	s, err := NewSync[uint32, uint32](m, SyncOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Read(ctx))
	s.Reserve(10000)
	for i := range uint32(10000) {
		s.Set(i, i+1)
	}
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, 10000, s.Counters().Updated)
	require.Empty(t, s.dirty)

	// Holding entries now: Reserve keeps them.
	s.Reserve(20000)
	require.Equal(t, 10000, s.DesiredLen())
	v, ok := s.InKernel(9999)
	require.True(t, ok)
	require.Equal(t, uint32(10000), v)
	s.Set(1, 7)
	s.Reserve(20000) // dirty holds key 1: kept
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, 10001, s.Counters().Updated, "the one changed entry written")
	got, err := s.iterateRead(ctx)
	require.NoError(t, err)
	require.Len(t, got, 10000)
	require.Equal(t, uint32(7), got[1])
	s.Reserve(0) // no-op
	s.Reserve(-1)
	require.Equal(t, 10000, s.DesiredLen())
}

// A key's entry is freed once the key is neither desired nor in the map,
// and a new key takes a freed entry: under churn the Sync grows by what it
// holds at once, not by every key it ever saw, and the map always ends up
// equal to the desired set — also after entries were changed behind the
// Sync's back and read again.
func TestKernelSyncEntriesReused(t *testing.T) {
	ctx := context.Background()
	m := internalMap(t)
	s, err := NewSync[uint32, uint32](m, SyncOptions{})
	require.NoError(t, err)
	want := map[uint32]uint32{}
	set := func(from, to uint32) {
		for k := from; k < to; k++ {
			s.Set(k, k*3)
			want[k] = k * 3
		}
	}
	check := func(what string) {
		t.Helper()
		require.NoError(t, s.Apply(ctx), what)
		got, err := s.iterateRead(ctx)
		require.NoError(t, err, what)
		require.Equal(t, want, got, what)
		require.Equal(t, len(want), s.Used(), what)
		require.Equal(t, len(want), s.Stats().InKernel, what)
		require.Equal(t, len(want), len(s.index), what)
		p, err := s.Plan(ctx)
		require.NoError(t, err, what)
		require.Empty(t, p.Writes, what)
	}

	set(0, 1000)
	check("first")
	require.Len(t, s.entries, 1000)

	for k := range uint32(500) {
		s.Delete(k)
		delete(want, k)
	}
	set(1000, 1500)
	check("500 deleted, 500 new")
	require.Len(t, s.entries, 1500, "the new keys were declared before the deleted ones were gone")
	require.Len(t, s.free, 500)
	require.False(t, s.Holds(1))

	set(2000, 2500)
	check("500 more")
	require.Len(t, s.entries, 1500, "the new keys took the freed entries")
	require.Empty(t, s.free)

	// A key set and deleted again before an Apply leaves nothing behind.
	s.Set(9000, 1)
	s.Delete(9000)
	check("set and deleted")
	require.Len(t, s.free, 1)

	// Behind the Sync's back: a desired entry deleted, one changed, a
	// foreign one added. A read finds them, the Apply mends them, and the
	// foreign key's entry is freed.
	require.NoError(t, m.Delete(uint32(700)))
	require.NoError(t, m.Put(uint32(701), uint32(1)))
	require.NoError(t, m.Put(uint32(5000), uint32(5)))
	s.QueueResync()
	p, err := s.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, p.Writes, 3)
	check("after the resync")
	_, known := s.index[5000]
	require.False(t, known, "the foreign key's entry is freed once deleted")
}
