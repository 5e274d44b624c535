package delta

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/nodeplane/nodeplane/internal/benchutil"
)

type benchRoute struct {
	Dev    string
	Metric int
	Src    netip.Addr
}

const benchKeys = 100_000

func benchPrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

// heapPerKey reports the heap retained by what build returns, per key.
func heapPerKey(b *testing.B, build func() any) {
	var perKey float64
	for b.Loop() {
		before := benchutil.HeapInUse()
		x := build()
		after := benchutil.HeapInUse()
		runtime.KeepAlive(x)
		perKey = float64(int64(after)-int64(before)) / benchKeys
	}
	b.ReportMetric(perKey, "heapB/key")
}

func BenchmarkHeapPerKeyInSync(b *testing.B) {
	heapPerKey(b, func() any {
		tr := NewComparable[netip.Prefix, benchRoute]()
		for i := range benchKeys {
			r := benchRoute{Dev: "eth0", Metric: i}
			tr.Desired().Set(benchPrefix(i), r)
			tr.Dataplane().Set(benchPrefix(i), r)
		}
		return tr
	})
}

func BenchmarkHeapPerKeyStaleUpdates(b *testing.B) {
	heapPerKey(b, func() any {
		tr := NewComparable[netip.Prefix, benchRoute]()
		for i := range benchKeys {
			tr.Desired().Set(benchPrefix(i), benchRoute{Dev: "eth0", Metric: i})
			tr.Dataplane().Set(benchPrefix(i), benchRoute{Dev: "eth1", Metric: i})
		}
		return tr
	})
}

// The naive layout (one map per side) for comparison with InSync.
func BenchmarkHeapPerKeyNaiveTwoMaps(b *testing.B) {
	heapPerKey(b, func() any {
		d, p := map[netip.Prefix]benchRoute{}, map[netip.Prefix]benchRoute{}
		for i := range benchKeys {
			r := benchRoute{Dev: "eth0", Metric: i}
			d[benchPrefix(i)] = r
			p[benchPrefix(i)] = r
		}
		return [2]any{d, p}
	})
}

func BenchmarkHeapPerKeySetInSync(b *testing.B) {
	heapPerKey(b, func() any {
		s := NewSet[netip.Addr]()
		for i := range benchKeys {
			s.Desired().Add(benchPrefix(i).Addr())
			s.Dataplane().Add(benchPrefix(i).Addr())
		}
		return s
	})
}

func BenchmarkDesiredSet(b *testing.B) {
	tr := NewComparable[netip.Prefix, benchRoute]()
	i := 0
	for b.Loop() {
		tr.Desired().Set(benchPrefix(i%benchKeys), benchRoute{Dev: "eth0", Metric: i})
		i++
	}
}

// A periodic resync that finds nothing changed: the cost of ReplaceAll over
// 100k keys.
func BenchmarkReplaceAllNoChange100k(b *testing.B) {
	tr := NewComparable[netip.Prefix, benchRoute]()
	dump := make(map[netip.Prefix]benchRoute, benchKeys)
	for i := range benchKeys {
		r := benchRoute{Dev: "eth0", Metric: i}
		tr.Desired().Set(benchPrefix(i), r)
		dump[benchPrefix(i)] = r
	}
	tr.Dataplane().ReplaceAll(dump)
	for b.Loop() {
		tr.Dataplane().ReplaceAll(dump)
	}
	if !tr.InSync() {
		b.Fatal("not in sync")
	}
}

// Programming 100k pending routes 256 per batch.
func BenchmarkIterBatched100k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		tr := NewComparable[netip.Prefix, benchRoute]()
		for i := range benchKeys {
			tr.Desired().Set(benchPrefix(i), benchRoute{Dev: "eth0", Metric: i})
		}
		b.StartTimer()
		err := tr.PendingUpdates().IterBatched(256, func(batch []Entry[netip.Prefix, benchRoute]) (int, error) {
			return len(batch), nil
		})
		if err != nil || !tr.InSync() {
			b.Fatal("not programmed", err)
		}
	}
}

// After a first full programming pass, every key has moved from the pending
// map to the in-sync map.
func BenchmarkHeapPerKeyAfterProgramming(b *testing.B) {
	heapPerKey(b, func() any {
		tr := NewComparable[netip.Prefix, benchRoute]()
		for i := range benchKeys {
			tr.Desired().Set(benchPrefix(i), benchRoute{Dev: "eth0", Metric: i})
		}
		_ = tr.PendingUpdates().IterBatched(256, func(batch []Entry[netip.Prefix, benchRoute]) (int, error) {
			return len(batch), nil
		})
		return tr
	})
}
