package harness

import "runtime"

// HeapInUse returns the live heap after a full garbage collection. Take it
// before building a structure and again while the structure is still
// referenced; the difference divided by the object count is the heap cost per
// object.
func HeapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
