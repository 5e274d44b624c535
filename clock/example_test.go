package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// retryAfter is component code: it waits d on the injected clock, or gives
// up when ctx is done.
func retryAfter(ctx context.Context, c clock.Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A test drives a component's wait with a Fake: BlockUntil says the code has
// reached its timer, Advance fires it. Nothing sleeps.
func ExampleFake() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)

	done := make(chan error)
	go func() { done <- retryAfter(context.Background(), fake, 30*time.Second) }()

	if err := fake.BlockUntil(context.Background(), 1); err != nil {
		fmt.Println(err)
		return
	}
	next, _ := fake.NextDeadline()
	fmt.Println("waiting until", next.Sub(start))
	fake.Advance(30 * time.Second)
	fmt.Println("retried:", <-done, "after", fake.Since(start))
	// Output:
	// waiting until 30s
	// retried: <nil> after 30s
}

// A ticker on a Fake ticks once per period of fake time.
func ExampleFake_NewTicker() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	tk := fake.NewTicker(90 * time.Second)
	defer tk.Stop()

	for range 3 {
		fake.Advance(90 * time.Second)
		fmt.Println("tick at", (<-tk.C()).Sub(start))
	}
	// Output:
	// tick at 1m30s
	// tick at 3m0s
	// tick at 4m30s
}

// Option structs leave the clock nil for production; OrReal applies the
// default.
func ExampleOrReal() {
	type Options struct{ Clock clock.Clock }
	var opts Options
	c := clock.OrReal(opts.Clock)
	fmt.Println(c == clock.Real())
	// Output:
	// true
}
