package managertest

import (
	"context"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// StartLoop builds a dataplane.Loop with opts, registers managers and
// drivers, and runs it until the test ends (then waits for Run to return).
// It sends no in-sync marker: the test does, when its first state is sent.
func StartLoop(t testing.TB, opts dataplane.Options, managers []dataplane.Manager, drivers ...dataplane.Driver) *dataplane.Loop {
	t.Helper()
	l, err := dataplane.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range managers {
		if err := l.AddManager(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range drivers {
		if err := l.AddDriver(d); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("loop: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("loop did not stop")
		}
	})
	return l
}

// Send sends msgs to l, failing the test on an error.
func Send(t testing.TB, l *dataplane.Loop, msgs ...any) {
	t.Helper()
	for _, m := range msgs {
		if err := l.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
}

// InSync sends both in-sync markers.
func InSync(l *dataplane.Loop) {
	l.DatastoreInSync()
	l.InterfacesInSync()
}

// WaitReady waits until the loop has applied successfully, with nothing
// failing, and returns its health; it fails the test with the last health
// after timeout. The timeout only bounds a hung test.
func WaitReady(t testing.TB, l *dataplane.Loop, timeout time.Duration) dataplane.Health {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h := l.Health()
		if h.Ready && h.ConsecutiveFailures == 0 && h.FailingObjects == 0 && !h.LastApply.IsZero() {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("loop not ready after %v: %+v", timeout, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
