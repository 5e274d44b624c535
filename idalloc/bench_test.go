package idalloc_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/nodeplane/nodeplane/idalloc"
)

func BenchmarkIndexGrabRelease(b *testing.B) {
	a, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := a.GrabBlock(100); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		idx, err := a.Grab()
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Release(idx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexGrabReleaseFragmented releases from the middle of a large
// allocated block, so grabs come from the heap of released indices.
func BenchmarkIndexGrabReleaseFragmented(b *testing.B) {
	a, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{
		Ranges:              []idalloc.Range{{Min: 1, Max: math.MaxUint32}},
		NoDefaultExclusions: true,
	})
	if err != nil {
		b.Fatal(err)
	}
	const held = 100000
	if _, err := a.GrabBlock(held); err != nil {
		b.Fatal(err)
	}
	for i := uint32(1); i < held; i += 2 {
		if err := a.Release(i); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := uint32(0)
	for b.Loop() {
		idx, err := a.Grab()
		if err != nil {
			b.Fatal(err)
		}
		victim := 2 + (i*7919)%(held-2)
		i++
		if victim == idx || !a.InUse(victim) {
			victim = idx
		}
		if err := a.Release(victim); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIndexGrabFill(b *testing.B) {
	const n = 1 << 16
	b.ReportAllocs()
	for b.Loop() {
		a, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: math.MaxUint32}}})
		if err != nil {
			b.Fatal(err)
		}
		for range n {
			if _, err := a.Grab(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkIDGetOrAllocNew(b *testing.B) {
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = "kube-svc:default/svc-" + strconv.Itoa(i)
	}
	a := idalloc.NewIDAllocator()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(names) {
			b.StopTimer()
			a = idalloc.NewIDAllocator()
			i = 0
			b.StartTimer()
		}
		_ = a.GetOrAlloc(names[i])
		i++
	}
}

func BenchmarkIDGetOrAllocExisting(b *testing.B) {
	a := idalloc.NewIDAllocator()
	names := make([]string, 1024)
	for i := range names {
		names[i] = "kube-svc:default/svc-" + strconv.Itoa(i)
		a.GetOrAlloc(names[i])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = a.GetOrAlloc(names[i%len(names)])
		i++
	}
}
