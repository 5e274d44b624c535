package leakcheck

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

//go:noinline
func parkedWorker(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

// startWorker starts parkedWorker and returns once it runs.
func startWorker() (stop chan struct{}) {
	started, stop := make(chan struct{}), make(chan struct{})
	go parkedWorker(started, stop)
	<-started
	return stop
}

func TestNoGoroutines(t *testing.T) {
	stop := startWorker()
	r := &recorder{TB: t}
	NoGoroutines(r, 30*time.Millisecond, "leakcheck.parkedWorker")
	if assert.Len(t, r.errs, 1, "a running worker is a leak") {
		assert.Contains(t, r.errs[0], "leakcheck.parkedWorker", "its stack is reported")
	}

	close(stop)
	r = &recorder{TB: t}
	NoGoroutines(r, 5*time.Second, "leakcheck.parkedWorker")
	assert.Empty(t, r.errs, "gone once stopped")
}

func TestBackTo(t *testing.T) {
	base := runtime.NumGoroutine()
	// Several workers, so that goroutines of earlier tests that end
	// meanwhile cannot bring the count back to base.
	var stops []chan struct{}
	for range 5 {
		stops = append(stops, startWorker())
	}
	r := &recorder{TB: t}
	BackTo(r, 30*time.Millisecond, base)
	if assert.Len(t, r.errs, 1) {
		assert.True(t, strings.Contains(r.errs[0], "parkedWorker"), "stacks reported")
	}
	for _, stop := range stops {
		close(stop)
	}
	r = &recorder{TB: t}
	BackTo(r, 5*time.Second, base)
	assert.Empty(t, r.errs)
}
