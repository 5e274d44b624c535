package delta

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
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

func BenchmarkDesiredSet(b *testing.B) {
	tr := NewComparable[netip.Prefix, benchRoute]()
	i := 0
	for b.Loop() {
		tr.Desired().Set(benchPrefix(i%benchKeys), benchRoute{Dev: "eth0", Metric: i})
		i++
	}
}

// A periodic resync that finds nothing changed: the cost of ReplaceAllIter
// over 100k keys.
func BenchmarkReplaceAllIterNoChange100k(b *testing.B) {
	tr := NewComparable[netip.Prefix, benchRoute]()
	dump := make(map[netip.Prefix]benchRoute, benchKeys)
	for i := range benchKeys {
		r := benchRoute{Dev: "eth0", Metric: i}
		tr.Desired().Set(benchPrefix(i), r)
		dump[benchPrefix(i)] = r
	}
	replay := func(add func(netip.Prefix, benchRoute)) error {
		for k, v := range dump {
			add(k, v)
		}
		return nil
	}
	if err := tr.Dataplane().ReplaceAllIter(replay); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := tr.Dataplane().ReplaceAllIter(replay); err != nil {
			b.Fatal(err)
		}
	}
	if !tr.InSync() {
		b.Fatal("not in sync")
	}
}

// programAll records every pending update as programmed.
func programAll(tr *Tracker[netip.Prefix, benchRoute]) {
	tr.PendingUpdates().Iter(func(netip.Prefix, benchRoute) IterAction {
		return IterActionUpdateDataplane
	})
}

// Programming 100k pending routes.
func BenchmarkPendingUpdatesIter100k(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		tr := NewComparable[netip.Prefix, benchRoute]()
		for i := range benchKeys {
			tr.Desired().Set(benchPrefix(i), benchRoute{Dev: "eth0", Metric: i})
		}
		b.StartTimer()
		programAll(tr)
		if !tr.InSync() {
			b.Fatal("not programmed")
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
		programAll(tr)
		return tr
	})
}
