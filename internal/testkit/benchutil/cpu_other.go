//go:build !unix

package benchutil

import "time"

// CPU returns zeros: this platform has no getrusage.
func CPU() (self, children time.Duration) { return 0, 0 }
