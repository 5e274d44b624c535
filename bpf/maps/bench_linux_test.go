//go:build linux

package maps_test

import (
	"context"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
)

const benchN = 10000

// BenchmarkKernelSyncInitial writes 10k entries into an empty map: ours
// (one read, then batch updates) against the naive peer, a Map.Update per
// key.
func BenchmarkKernelSyncInitial(b *testing.B) {
	want := seq(0, benchN)
	b.Run("ours", func(b *testing.B) {
		m, _ := openMap(b, u32Spec)
		ctx := context.Background()
		for b.Loop() {
			b.StopTimer()
			emptyMap(m)
			s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
			require.NoError(b, err)
			s.ReplaceDesired(want)
			b.StartTimer()
			require.NoError(b, s.Apply(ctx))
		}
	})
	b.Run("perkey", func(b *testing.B) {
		m, _ := openMap(b, u32Spec)
		for b.Loop() {
			b.StopTimer()
			emptyMap(m)
			b.StartTimer()
			for k, v := range want {
				if err := m.Update(k, v, ebpf.UpdateAny); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// emptyMap empties m outside the timed part.
func emptyMap(m *ebpf.Map) {
	var k, next uint32
	var keys []uint32
	for err := m.NextKey(nil, &next); err == nil; err = m.NextKey(k, &next) {
		k = next
		keys = append(keys, k)
	}
	if len(keys) > 0 {
		_, _ = m.BatchDelete(keys, nil)
	}
}

// BenchmarkKernelSyncChangeOne changes one entry of a synced map of N and
// applies: the cost must not grow with N.
func BenchmarkKernelSyncChangeOne(b *testing.B) {
	for _, n := range []struct {
		name string
		n    uint32
	}{{"N=100", 100}, {"N=10000", 10000}} {
		b.Run(n.name+"/ours", func(b *testing.B) {
			m, _ := openMap(b, u32Spec)
			ctx := context.Background()
			s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
			require.NoError(b, err)
			s.ReplaceDesired(seq(0, n.n))
			require.NoError(b, s.Apply(ctx))
			i := uint32(0)
			for b.Loop() {
				i++
				s.Set(i%n.n, i)
				if err := s.Apply(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKernelRead reads a map of 10k entries whole: batch lookups
// (ours, through Sync.Kernel after QueueResync) against Map.Iterate (a
// next-key and a lookup per entry).
func BenchmarkKernelRead(b *testing.B) {
	b.Run("batchlookup", func(b *testing.B) {
		m, _ := openMap(b, u32Spec)
		fill(b, m)
		ctx := context.Background()
		s, err := maps.NewSync[uint32, uint32](m, maps.SyncOptions{})
		require.NoError(b, err)
		for b.Loop() {
			s.QueueResync()
			got, err := s.Kernel(ctx)
			if err != nil || len(got) != benchN {
				b.Fatal(err, len(got))
			}
		}
	})
	b.Run("iterate", func(b *testing.B) {
		m, _ := openMap(b, u32Spec)
		fill(b, m)
		for b.Loop() {
			got := make(map[uint32]uint32, benchN)
			var k, v uint32
			it := m.Iterate()
			for it.Next(&k, &v) {
				got[k] = v
			}
			if it.Err() != nil || len(got) != benchN {
				b.Fatal(it.Err(), len(got))
			}
		}
	})
}

func fill(b *testing.B, m *ebpf.Map) {
	b.Helper()
	want := seq(0, benchN)
	keys := make([]uint32, 0, benchN)
	vals := make([]uint32, 0, benchN)
	for k, v := range want {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	_, err := m.BatchUpdate(keys, vals, nil)
	require.NoError(b, err)
}
