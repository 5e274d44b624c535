package idalloc_test

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/idalloc"
)

func ExampleNewIndexAllocator() {
	// Route tables 1–250; 0 and 253–255 are never handed out.
	tables, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tables.Ranges(), tables.Free())

	// Overlapping ranges are merged and exclusions cut out.
	custom, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{
		Ranges:     []idalloc.Range{{Min: 100, Max: 300}, {Min: 250, Max: 400}},
		Exclusions: []idalloc.Range{{Min: 200, Max: 209}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(custom.Ranges())

	_, err = idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 10, Max: 1}}})
	fmt.Println(errors.Is(err, idalloc.ErrInvalidRange))
	// Output:
	// [1-250] 250
	// [100-199 210-252 256-400]
	// true
}

func ExampleIndexAllocator_Grab() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: 2}}})
	for range 3 {
		idx, err := tables.Grab()
		if errors.Is(err, idalloc.ErrExhausted) {
			fmt.Println("exhausted")
			continue
		}
		fmt.Println("table", idx)
	}
	// Output:
	// table 1
	// table 2
	// exhausted
}

func ExampleIndexAllocator_GrabBlock() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: 5}}})
	block, _ := tables.GrabBlock(3)
	fmt.Println(block)
	// All or nothing: 2 are left, so asking for 3 takes none.
	_, err := tables.GrabBlock(3)
	fmt.Println(errors.Is(err, idalloc.ErrExhausted), tables.Free())
	// Output:
	// [1 2 3]
	// true 2
}

func ExampleIndexAllocator_Reserve() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	// After a restart, adopt the tables the kernel shows are ours.
	for _, inKernel := range []uint32{1, 3} {
		if err := tables.Reserve(inKernel); err != nil {
			fmt.Println(err)
		}
	}
	idx, _ := tables.Grab()
	fmt.Println("new table", idx)
	fmt.Println(errors.Is(tables.Reserve(3), idalloc.ErrInUse))
	fmt.Println(errors.Is(tables.Reserve(254), idalloc.ErrNotInRange))
	// Output:
	// new table 2
	// true
	// true
}

func ExampleIndexAllocator_Release() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	_, _ = tables.GrabBlock(3)
	_ = tables.Release(2)
	idx, _ := tables.Grab() // the lowest free index comes back first
	fmt.Println(idx)
	fmt.Println(errors.Is(tables.Release(9), idalloc.ErrNotAllocated))
	// Output:
	// 2
	// true
}

func ExampleIndexAllocator_Contains() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 250, Max: 260}}})
	fmt.Println(tables.Contains(252), tables.Contains(254), tables.Contains(256))
	// Output:
	// true false true
}

func ExampleIndexAllocator_InUse() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	idx, _ := tables.Grab()
	fmt.Println(tables.InUse(idx), tables.InUse(idx+1))
	// Output:
	// true false
}

func ExampleIndexAllocator_Free() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	_, _ = tables.GrabBlock(10)
	fmt.Println(tables.Free(), tables.Len())
	// Output:
	// 240 10
}

func ExampleIndexAllocator_Allocated() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	_ = tables.Reserve(42)
	_, _ = tables.Grab()
	fmt.Println(tables.Allocated())
	// Output:
	// [1 42]
}

func ExampleRange() {
	r := idalloc.Range{Min: 1, Max: 250}
	fmt.Println(r, r.Len(), r.Contains(250), r.Validate())
	bad := idalloc.Range{Min: 5, Max: 1}
	fmt.Println(errors.Is(bad.Validate(), idalloc.ErrInvalidRange))
	// Output:
	// 1-250 250 true <nil>
	// true
}

func ExampleDefaultRouteTableRanges() {
	fmt.Println(idalloc.DefaultRouteTableRanges(), idalloc.DefaultExclusions())
	// Output:
	// [1-250] [0 253-255]
}

func ExampleNewIDAllocator() {
	ids := idalloc.NewIDAllocator()
	web := ids.GetOrAlloc("svc:default/web")
	fmt.Println(web != 0, web == ids.GetOrAlloc("svc:default/web"), ids.Len())

	// A "restarted" allocator gives the same name the same ID.
	again := idalloc.NewIDAllocator()
	_ = again.GetOrAlloc("svc:default/db")
	fmt.Println(again.GetOrAlloc("svc:default/web") == web)
	// Output:
	// true true 1
	// true
}

func ExampleIDAllocator_Get() {
	ids := idalloc.NewIDAllocator()
	_, ok := ids.Get("set-a")
	fmt.Println(ok)
	id := ids.GetOrAlloc("set-a")
	got, ok := ids.Get("set-a")
	fmt.Println(ok, got == id)
	// Output:
	// false
	// true true
}

func ExampleIDAllocator_ReserveWellKnown() {
	ids := idalloc.NewIDAllocator()
	fmt.Println(ids.ReserveWellKnown("all-hosts", 1))
	fmt.Println(ids.ReserveWellKnown("all-hosts", 1)) // same pair: no-op
	fmt.Println(errors.Is(ids.ReserveWellKnown("other", 1), idalloc.ErrConflict))
	fmt.Println(errors.Is(ids.ReserveWellKnown("zero", 0), idalloc.ErrInvalidID))
	// Output:
	// <nil>
	// <nil>
	// true
	// true
}

func ExampleIDAllocator_Release() {
	ids := idalloc.NewIDAllocator()
	_ = ids.GetOrAlloc("set-a")
	fmt.Println(ids.Release("set-a"), ids.Release("set-a"), ids.Len())
	// Output:
	// true false 0
}

func ExampleIDAllocator_Reverse() {
	ids := idalloc.NewIDAllocator()
	_ = ids.ReserveWellKnown("all-hosts", 1)
	name, ok := ids.Reverse(1)
	fmt.Println(name, ok)
	_, ok = ids.Reverse(2)
	fmt.Println(ok)
	// Output:
	// all-hosts true
	// false
}

func ExampleIDAllocator_Len() {
	ids := idalloc.NewIDAllocator()
	_ = ids.GetOrAlloc("a")
	_ = ids.GetOrAlloc("b")
	_ = ids.GetOrAlloc("a")
	fmt.Println(ids.Len())
	// Output:
	// 2
}

func ExampleIndexAllocator_Ranges() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{
		Ranges:     []idalloc.Range{{Min: 1, Max: 10}, {Min: 5, Max: 20}},
		Exclusions: []idalloc.Range{{Min: 12, Max: 12}},
	})
	fmt.Println(tables.Ranges())
	// Output:
	// [1-11 13-20]
}

func ExampleIndexAllocator_Len() {
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	_ = tables.Reserve(7)
	_, _ = tables.Grab()
	fmt.Println(tables.Len())
	// Output:
	// 2
}

func ExampleDefaultExclusions() {
	// Without the default exclusions every index of the range is usable.
	plain, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{
		Ranges:              []idalloc.Range{{Min: 0, Max: 255}},
		NoDefaultExclusions: true,
	})
	tables, _ := idalloc.NewIndexAllocator(idalloc.IndexOptions{
		Ranges: []idalloc.Range{{Min: 0, Max: 255}},
	})
	fmt.Println(idalloc.DefaultExclusions(), plain.Free(), tables.Free())
	// Output:
	// [0 253-255] 256 252
}
