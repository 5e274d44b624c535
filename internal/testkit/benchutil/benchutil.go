// Package benchutil measures what the benchmarks and the bench command
// report besides wall time: the live heap and the CPU time of this process
// and of the child processes it ran.
package benchutil

import (
	"runtime"
	"time"
)

// HeapInUse returns the live heap after a full garbage collection. Take it
// before building a structure and again while the structure is still
// referenced; the difference divided by the object count is the heap cost
// per object.
func HeapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TotalCPU is the sum of CPU's two figures.
func TotalCPU() time.Duration {
	self, children := CPU()
	return self + children
}
