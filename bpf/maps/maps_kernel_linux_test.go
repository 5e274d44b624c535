//go:build linux

package maps_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

func TestSpecValidate(t *testing.T) {
	ok := maps.Spec{Name: "np_lb.v1", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 1}
	for _, tc := range []struct {
		name  string
		edit  func(*maps.Spec)
		field string // "" when valid
	}{
		{"valid", func(*maps.Spec) {}, ""},
		{"15 bytes", func(s *maps.Spec) { s.Name = "abcdefghijklmno" }, ""},
		{"empty name", func(s *maps.Spec) { s.Name = "" }, "Name"},
		{"16 bytes", func(s *maps.Spec) { s.Name = "abcdefghijklmnop" }, "Name"},
		{"slash", func(s *maps.Spec) { s.Name = "a/b" }, "Name"},
		{"dash", func(s *maps.Spec) { s.Name = "np-lb" }, "Name"},
		{"dot", func(s *maps.Spec) { s.Name = "." }, "Name"},
		{"dot dot", func(s *maps.Spec) { s.Name = ".." }, "Name"},
		{"type", func(s *maps.Spec) { s.Type = ebpf.UnspecifiedMap }, "Type"},
		{"key size", func(s *maps.Spec) { s.KeySize = 0 }, "KeySize"},
		{"value size", func(s *maps.Spec) { s.ValueSize = 0 }, "ValueSize"},
		{"max entries", func(s *maps.Spec) { s.MaxEntries = 0 }, "MaxEntries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			err := s.Validate()
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, maps.ErrInvalidSpec)
			require.Contains(t, err.Error(), tc.field)
			require.Regexp(t, "^maps: ", err.Error())
		})
	}
}

func TestOpenNotBPFFS(t *testing.T) {
	dir := t.TempDir()
	_, err := maps.Open(dir, u32Spec)
	require.ErrorIs(t, err, maps.ErrNotBPFFS)
	// A missing directory under a file system that is not bpffs is not
	// created.
	sub := filepath.Join(dir, "a", "b")
	_, err = maps.Open(sub, u32Spec)
	require.ErrorIs(t, err, maps.ErrNotBPFFS)
	_, statErr := os.Stat(filepath.Join(dir, "a"))
	require.ErrorIs(t, statErr, os.ErrNotExist)
	// Bad specs are refused before anything else.
	_, err = maps.Open(dir, maps.Spec{Name: "x"})
	require.ErrorIs(t, err, maps.ErrInvalidSpec)
}

func mapID(t *testing.T, m *ebpf.Map) ebpf.MapID {
	t.Helper()
	info, err := m.Info()
	require.NoError(t, err)
	id, ok := info.ID()
	require.True(t, ok)
	return id
}

func TestKernelOpen(t *testing.T) {
	root := bpftest.Dir(t)
	dir := filepath.Join(root, "nodeplane", "lb") // created by Open
	m, err := maps.Open(dir, u32Spec)
	require.NoError(t, err)
	defer m.Close()
	require.FileExists(t, filepath.Join(dir, u32Spec.Name))
	require.NoError(t, m.Put(uint32(1), uint32(2)))

	// Reopening returns the same map, entries included.
	again, err := maps.Open(dir, u32Spec)
	require.NoError(t, err)
	defer again.Close()
	require.Equal(t, mapID(t, m), mapID(t, again))
	var v uint32
	require.NoError(t, again.Lookup(uint32(1), &v))
	require.Equal(t, uint32(2), v)

	// Another shape replaces the pin with a new, empty map.
	for _, edit := range []func(*maps.Spec){
		func(s *maps.Spec) { s.ValueSize = 8 },
		func(s *maps.Spec) { s.Type = ebpf.LRUHash },
		func(s *maps.Spec) { s.MaxEntries = 10 },
		func(s *maps.Spec) { s.Flags = 1 }, // BPF_F_NO_PREALLOC
	} {
		spec := u32Spec
		edit(&spec)
		other, err := maps.Open(dir, spec)
		require.NoError(t, err)
		require.NotEqual(t, mapID(t, m), mapID(t, other))
		require.Equal(t, spec.Type, other.Type())
		require.Equal(t, spec.ValueSize, other.ValueSize())
		require.Equal(t, spec.MaxEntries, other.MaxEntries())
		require.Empty(t, dump[uint32, []byte](t, other))
		// ... and reopening that shape returns it.
		same, err := maps.Open(dir, spec)
		require.NoError(t, err)
		require.Equal(t, mapID(t, other), mapID(t, same))
		require.NoError(t, same.Close())
		require.NoError(t, other.Close())
	}
	// The old map lives on while someone holds it.
	require.NoError(t, m.Lookup(uint32(1), &v))

	// Other pins in dir are left alone.
	spec2 := u32Spec
	spec2.Name = "np_other"
	m2, err := maps.Open(dir, spec2)
	require.NoError(t, err)
	require.NoError(t, m2.Close())

	require.NoError(t, maps.Remove(dir, u32Spec.Name))
	require.NoFileExists(t, filepath.Join(dir, u32Spec.Name))
	require.FileExists(t, filepath.Join(dir, spec2.Name))
	require.NoError(t, maps.Remove(dir, u32Spec.Name)) // missing: not an error
	require.ErrorIs(t, maps.Remove(dir, "../x"), maps.ErrInvalidSpec)
}

func TestKernelNewSyncOptions(t *testing.T) {
	m, _ := openMap(t, maps.Spec{Name: "np_sync", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 10})
	_, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{})
	require.NoError(t, err)
	type padded struct {
		A uint8
		B uint32
	}
	for name, f := range map[string]func() error{
		"nil map":        func() error { _, err := maps.NewSync[svcKey, backend](nil, maps.SyncOptions{}); return err },
		"negative batch": func() error { _, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{BatchSize: -1}); return err },
		"key size":       func() error { _, err := maps.NewSync[uint32, backend](m, maps.SyncOptions{}); return err },
		"value size":     func() error { _, err := maps.NewSync[svcKey, uint16](m, maps.SyncOptions{}); return err },
		"padding":        func() error { _, err := maps.NewSync[padded, backend](m, maps.SyncOptions{}); return err },
		"not fixed":      func() error { _, err := maps.NewSync[svcKey, string](m, maps.SyncOptions{}); return err },
	} {
		err := f()
		require.ErrorIs(t, err, maps.ErrInvalidOptions, name)
	}
}

func TestKernelSync(t *testing.T) {
	m, _ := openMap(t, u32Spec)
	ctx := context.Background()
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{BatchSize: 16})
	require.NoError(t, err)

	// Apply writes everything.
	want := seq(0, 100)
	s.ReplaceDesired(want)
	require.Equal(t, 100, s.DesiredLen())
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, want, dump[uint32, uint32](t, m))
	st := s.Counters()
	require.Equal(t, 1, st.Reads)
	require.Equal(t, 100, st.Updated)
	require.Equal(t, 0, st.Deleted)

	// A second Apply makes no syscall.
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, st, s.Counters())

	// One change, one entry, one syscall.
	s.Set(7, 777)
	require.NoError(t, s.Apply(ctx))
	after := s.Counters()
	require.Equal(t, st.Updated+1, after.Updated)
	require.Equal(t, st.Syscalls+1, after.Syscalls)
	want[7] = 777
	v, ok := s.Desired(7)
	require.True(t, ok)
	require.Equal(t, uint32(777), v)

	// One deletion.
	s.Delete(8)
	delete(want, 8)
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, after.Deleted+1, s.Counters().Deleted)
	require.Equal(t, want, dump[uint32, uint32](t, m))
	_, ok = s.Desired(8)
	require.False(t, ok)

	// Someone else deletes an entry, overwrites one and adds one: unseen
	// until a resync, repaired after it (the foreign entry is deleted: the
	// Sync owns the whole map).
	require.NoError(t, m.Delete(uint32(1)))
	require.NoError(t, m.Put(uint32(2), uint32(999)))
	require.NoError(t, m.Put(uint32(5000), uint32(1)))
	before := s.Counters()
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, before, s.Counters())
	s.QueueResync()
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, want, dump[uint32, uint32](t, m))
	after = s.Counters()
	require.Equal(t, before.Reads+1, after.Reads)
	require.Equal(t, before.Updated+2, after.Updated)
	require.Equal(t, before.Deleted+1, after.Deleted)

	// Kernel is a copy of what the map holds.
	got, err := s.Kernel(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got[1] = 0
	again, err := s.Kernel(ctx)
	require.NoError(t, err)
	require.Equal(t, want, again)

	// ApplyUpdates writes, ApplyDeletions deletes.
	next := seq(50, 100)
	s.ReplaceDesired(next)
	require.NoError(t, s.ApplyUpdates(ctx))
	inMap := dump[uint32, uint32](t, m)
	require.Len(t, inMap, 150-1) // 0..149 but 8
	require.NoError(t, s.ApplyDeletions(ctx))
	require.Equal(t, next, dump[uint32, uint32](t, m))

	// A nil context is context.Background().
	s.QueueResync()
	//lint:ignore SA1012 a nil context means context.Background()
	require.NoError(t, s.Apply(nil))
}

// An update of many chunks is written side by side (several goroutines):
// the map ends as desired, every chunk one batch syscall; and in a map too
// small for it, the entries that fit are written and accounted for, the
// others held as full, whichever chunks got there first.
func TestKernelSyncParallelChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // side by side even on one CPU
	ctx := context.Background()
	spec := u32Spec
	spec.MaxEntries = 5000
	m, _ := openMap(t, spec)
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{BatchSize: 100})
	require.NoError(t, err)
	require.NoError(t, s.Read(ctx))
	want := seq(0, 4000)
	s.ReplaceDesired(want)
	before := s.Counters()
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, want, dump[uint32, uint32](t, m))
	require.Equal(t, 4000, s.Counters().Updated-before.Updated)
	require.Equal(t, 40, s.Counters().Syscalls-before.Syscalls, "one batch per chunk")
	require.Equal(t, dataplane.DriverStats{Desired: 4000, InKernel: 4000, Writes: 4000}, s.Stats())

	spec.Name, spec.MaxEntries = "np_small", 1000
	small, _ := openMap(t, spec)
	s, err = maps.NewSync[uint32, uint32](small, maps.SyncOptions{BatchSize: 100})
	require.NoError(t, err)
	want = seq(0, 1500)
	s.ReplaceDesired(want)
	err = s.Apply(ctx)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, maps.ErrFull)
	require.Equal(t, 500, pe.Failed)
	inMap := dump[uint32, uint32](t, small)
	require.Len(t, inMap, 1000)
	for k, v := range inMap {
		require.Equal(t, want[k], v)
		got, ok := s.InKernel(k)
		require.True(t, ok, "key %d written and known", k)
		require.Equal(t, v, got)
	}
	require.Equal(t, dataplane.DriverStats{Desired: 1500, InKernel: 1000, Failing: 500, Writes: 1000}, s.Stats())
}

func TestKernelSyncMapFull(t *testing.T) {
	spec := u32Spec
	spec.MaxEntries = 10
	m, _ := openMap(t, spec)
	ctx := context.Background()
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{Name: "full"})
	require.NoError(t, err)
	want := seq(0, 15)
	s.ReplaceDesired(want)
	err = s.Apply(ctx)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, maps.ErrEntry)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, maps.ErrFull)
	require.Equal(t, 5, pe.Failed)
	require.Len(t, pe.Errs, 5, "one error per new entry left out")
	var oe *dataplane.ObjectError
	require.ErrorAs(t, pe.Errs[0], &oe)
	require.Equal(t, "update", oe.Op)
	require.Zero(t, oe.RetryAt, "no backoff: room is made by an Apply")
	require.Regexp(t, `^maps: update entry full key [0-9a-f]{8}: map full: the map holds its 10 entries$`, oe.Error())
	require.Equal(t, dataplane.DriverStats{Desired: 15, InKernel: 10, Failing: 5, Writes: 10}, s.Stats())
	inMap := dump[uint32, uint32](t, m)
	require.Len(t, inMap, 10)
	for k, v := range inMap {
		require.Equal(t, want[k], v)
	}

	// The failed entries stay pending: tried again, and only them; once
	// the map refuses one, the others are not tried.
	before := s.Counters()
	err = s.Apply(ctx)
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, maps.ErrFull)
	require.Equal(t, 5, pe.Failed)
	require.Equal(t, 0, s.Counters().Updated-before.Updated)
	require.Equal(t, 1+1, s.Counters().Syscalls-before.Syscalls) // the batch, then the first one alone
	require.ErrorAs(t, pe.Errs[0], &oe)
	require.Equal(t, 2, oe.Attempts, "the ledger counts the attempts in a row")

	// Keys the map holds are still overwritten in a full map, one by one
	// once it refused a new key.
	for k := range inMap {
		s.Set(k, 7)
		want[k] = 7
	}
	err = s.Apply(ctx)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 5, pe.Failed)
	inMap = dump[uint32, uint32](t, m)
	for k, v := range inMap {
		require.Equal(t, uint32(7), v, "key %d", k)
	}

	// Room made, they are written.
	n := 0
	for k := range inMap {
		if n == 5 {
			break
		}
		s.Delete(k)
		delete(want, k)
		n++
	}
	require.NoError(t, s.ApplyDeletions(ctx))
	require.NoError(t, s.ApplyUpdates(ctx))
	require.Equal(t, want, dump[uint32, uint32](t, m))
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, dataplane.DriverStats{Desired: 10, InKernel: 10, Failing: 0, Writes: s.Stats().Writes}, s.Stats())
}

func TestKernelSyncAdopt(t *testing.T) {
	spec := maps.Spec{Name: "np_adopt", Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 1000}
	dir := bpftest.Dir(t)
	ctx := context.Background()
	want := map[svcKey]backend{}
	for i := range uint32(300) {
		want[svcKey{Addr: 0x0a000000 + i, Port: 80, Proto: 6}] = backend{ID: i, Weight: 1}
	}
	m, err := maps.Open(dir, spec)
	require.NoError(t, err)
	old, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{})
	require.NoError(t, err)
	old.ReplaceDesired(want)
	require.NoError(t, old.Apply(ctx))
	require.NoError(t, m.Close())

	// A restarted agent: the pin holds the entries, Kernel returns them and
	// the same desired set writes nothing.
	m, err = maps.Open(dir, spec)
	require.NoError(t, err)
	defer m.Close()
	s, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{})
	require.NoError(t, err)
	got, err := s.Kernel(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	s.ReplaceDesired(got)
	require.NoError(t, s.Apply(ctx))
	st := s.Counters()
	require.Equal(t, 1, st.Reads)
	require.Zero(t, st.Updated)
	require.Zero(t, st.Deleted)
}

func TestKernelSyncLRU(t *testing.T) {
	m, _ := openMap(t, maps.Spec{Name: "np_lru", Type: ebpf.LRUHash, KeySize: 8, ValueSize: 8, MaxEntries: 4096})
	ctx := context.Background()
	s, err := maps.NewSync[svcKey, backend](m, maps.SyncOptions{BatchSize: 64})
	require.NoError(t, err)
	want := map[svcKey]backend{}
	for i := range uint32(1000) {
		want[svcKey{Addr: i, Port: uint16(i), Proto: 17}] = backend{ID: i, Weight: 2}
	}
	s.ReplaceDesired(want)
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, want, dump[svcKey, backend](t, m))
	before := s.Counters()
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, before, s.Counters())
	s.QueueResync()
	got, err := s.Kernel(ctx)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NoError(t, s.Apply(ctx))
	require.Equal(t, before.Updated, s.Counters().Updated)
}

func TestKernelSyncRead10k(t *testing.T) {
	ctx := context.Background()
	for _, batch := range []int{0, 100, 1} { // 1: buckets larger than a batch (ENOSPC)
		m, _ := openMap(t, u32Spec)
		want := seq(0, 10000)
		for k, v := range want {
			require.NoError(t, m.Put(k, v))
		}
		s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{BatchSize: batch})
		require.NoError(t, err)
		got, err := s.Kernel(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got, "batch %d", batch)
		s.ReplaceDesired(want)
		require.NoError(t, s.Apply(ctx))
		require.Zero(t, s.Counters().Updated)
	}
}

// Entries appear and disappear while the Sync reads: every entry present
// for the whole read is found, and nothing the map never held.
func TestKernelSyncReadConcurrent(t *testing.T) {
	for _, typ := range []ebpf.MapType{ebpf.Hash, ebpf.LRUHash} {
		t.Run(typ.String(), func(t *testing.T) {
			spec := u32Spec
			spec.Type = typ
			m, _ := openMap(t, spec)
			stable := seq(0, 5000)
			for k, v := range stable {
				require.NoError(t, m.Put(k, v))
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := uint32(0); ctx.Err() == nil; i++ {
					k := 100000 + i%3000
					if i%2 == 0 {
						_ = m.Put(k, k)
					} else {
						_ = m.Delete(100000 + (i/2)%3000)
					}
				}
			}()
			for _, batch := range []int{64, 4096} {
				for range 5 {
					s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{BatchSize: batch})
					require.NoError(t, err)
					got, err := s.Kernel(context.Background())
					require.NoError(t, err)
					for k, v := range stable {
						require.Equal(t, v, got[k])
					}
					for k, v := range got {
						if _, ok := stable[k]; !ok {
							require.True(t, k >= 100000 && k < 103000 && v == k, "entry %d=%d", k, v)
						}
					}
				}
			}
			cancel()
			wg.Wait()
		})
	}
}

func TestKernelSyncContext(t *testing.T) {
	m, _ := openMap(t, u32Spec)
	s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
	require.NoError(t, err)
	s.ReplaceDesired(seq(0, 10))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, maps.ErrRead)
	require.NoError(t, s.Apply(context.Background()))
	require.Equal(t, seq(0, 10), dump[uint32, uint32](t, m))
}
