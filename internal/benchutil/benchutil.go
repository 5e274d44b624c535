// Package benchutil measures what the benchmarks and the bench command
// report besides wall time: the live heap and the CPU time of this process
// and of the child processes it ran.
package benchutil

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
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

// CPU returns the user+system time used so far by this process (self) and
// by its children that have been waited for (children): the binaries a
// driver runs count in children, the kernel work of this process's system
// calls in self.
func CPU() (self, children time.Duration) {
	return rusage(unix.RUSAGE_SELF), rusage(unix.RUSAGE_CHILDREN)
}

// TotalCPU is the sum of CPU's two figures.
func TotalCPU() time.Duration {
	self, children := CPU()
	return self + children
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
