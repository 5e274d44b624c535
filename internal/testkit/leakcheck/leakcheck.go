// Package leakcheck lets tests check that the goroutines a component
// started are gone once it stopped. It polls from the calling goroutine
// (a helper such as assert.Eventually would add goroutines of its own) and,
// on failure, reports the stacks of what is left.
package leakcheck

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// Poll is how often the checks look again.
const Poll = 5 * time.Millisecond

// NoGoroutines waits up to within until no goroutine's stack contains one
// of markers (function names such as "mypkg.(*run)"), and fails t with the
// stack of a goroutine still running otherwise.
func NoGoroutines(t testing.TB, within time.Duration, markers ...string) {
	t.Helper()
	var left string
	for deadline := time.Now().Add(within); ; time.Sleep(Poll) {
		if left = matching(markers); left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("leakcheck: goroutine left after %v:\n%s", within, left)
			return
		}
	}
}

// BackTo waits up to within until the number of goroutines is at most
// baseline (taken with runtime.NumGoroutine before the component started),
// and fails t with every goroutine's stack otherwise.
func BackTo(t testing.TB, within time.Duration, baseline int) {
	t.Helper()
	for deadline := time.Now().Add(within); runtime.NumGoroutine() > baseline; time.Sleep(Poll) {
		if time.Now().After(deadline) {
			t.Errorf("leakcheck: %d goroutines left, baseline %d:\n%s", runtime.NumGoroutine(), baseline, stacks())
			return
		}
	}
}

// matching returns the first goroutine stack that contains one of markers,
// or "".
func matching(markers []string) string {
	for g := range strings.SplitSeq(stacks(), "\n\n") {
		for _, m := range markers {
			if strings.Contains(g, m) {
				return g
			}
		}
	}
	return ""
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
