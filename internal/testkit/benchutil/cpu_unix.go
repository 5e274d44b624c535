//go:build unix

package benchutil

import (
	"time"

	"golang.org/x/sys/unix"
)

// CPU returns the user+system time used so far by this process (self) and
// by its children that have been waited for (children): the binaries a
// driver runs count in children, the kernel work of this process's system
// calls in self.
func CPU() (self, children time.Duration) {
	return rusage(unix.RUSAGE_SELF), rusage(unix.RUSAGE_CHILDREN)
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
