package leakcheck_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
)

// printTB stands in for a test's t: it prints failures.
type printTB struct{ testing.TB }

func (printTB) Helper() {}
func (printTB) Errorf(string, ...any) {
	fmt.Println("FAIL: goroutine left")
}

// worker is the component under test's goroutine.
func worker(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

// After stopping a component, a test checks that none of its goroutines
// is left, naming them by function.
func ExampleNoGoroutines() {
	started, stop := make(chan struct{}), make(chan struct{})
	go worker(started, stop)
	<-started

	leakcheck.NoGoroutines(printTB{}, 20*time.Millisecond, "leakcheck_test.worker") // not stopped yet
	close(stop)
	leakcheck.NoGoroutines(printTB{}, 5*time.Second, "leakcheck_test.worker")
	fmt.Println("stopped")
	// Output:
	// FAIL: goroutine left
	// stopped
}
