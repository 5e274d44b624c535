package dataplane

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
)

// countManager and countDriver do nothing but count, so a benchmark
// measures the loop itself.
type countManager struct {
	updates atomic.Int64
	seen    atomic.Int64 // updates seen by the last CompleteDeferredWork
}

func (m *countManager) OnUpdate(any) { m.updates.Add(1) }
func (m *countManager) CompleteDeferredWork(context.Context) error {
	m.seen.Store(m.updates.Load())
	return nil
}

type countDriver struct{ applies atomic.Int64 }

func (d *countDriver) Apply(context.Context) (ApplyResult, error) {
	d.applies.Add(1)
	return ApplyResult{}, nil
}
func (d *countDriver) QueueResync() {}
func (d *countDriver) Phase() Phase { return PhaseTables }

const burstSize = 10000

// burstMsgs are boxed once, so allocations reported are the loop's own.
var burstMsgs = func() []any {
	msgs := make([]any, burstSize)
	for i := range msgs {
		msgs[i] = i
	}
	return msgs
}()

// BenchmarkLoopBurst10k sends bursts of 10,000 updates into a running,
// in-sync loop with default options on a fake clock, then lets the clock
// run past the coalescing window. It reports the passes per burst (the
// promise is at most 3) and the loop's cost per update: queueing, batching
// and delivery to a manager, plus the burst's share of its pass.
func BenchmarkLoopBurst10k(b *testing.B) {
	clk := clock.NewFake(epoch)
	l, err := New(Options{Clock: clk, ResyncInterval: -1, HealthInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	m, d := &countManager{}, &countDriver{}
	if err := l.AddManager(m); err != nil {
		b.Fatal(err)
	}
	if err := l.AddDriver(d); err != nil {
		b.Fatal(err)
	}
	// The hook never blocks: it reports when the loop has taken poke gen
	// and has nothing pending.
	settled := make(chan uint64, 1)
	l.testPoke = make(chan uint64, 1)
	l.testHookIdle = func(quiet bool, poke uint64) {
		for quiet {
			select {
			case settled <- poke:
				return
			default:
			}
			select { // replace an unread report
			case <-settled:
			default:
			}
		}
	}
	var gen uint64
	settle := func() {
		gen++
		l.testPoke <- gen
		for {
			select {
			case got := <-settled:
				if got == gen {
					return
				}
			case <-time.After(time.Minute):
				b.Fatal("loop did not settle")
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	l.DatastoreInSync()
	l.InterfacesInSync()
	settle()
	clk.Advance(time.Second)
	settle()
	start := d.applies.Load()
	if start != 1 {
		b.Fatalf("%d passes before the bursts, want 1", start)
	}

	bursts := 0
	for b.Loop() {
		for _, msg := range burstMsgs {
			if err := l.Send(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
		settle()
		// Past the window and one throttle refill, so each burst finds a token.
		clk.Advance(DefaultThrottleRefill)
		settle()
		bursts++
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if got, want := m.seen.Load(), int64(bursts*burstSize+2); got != want {
		b.Fatalf("the last pass saw %d updates, want %d", got, want)
	}
	applies := float64(d.applies.Load()-start) / float64(bursts)
	if applies > 3 {
		b.Errorf("%.2f passes per burst of %d, want at most 3", applies, burstSize)
	}
	b.ReportMetric(applies, "applies/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(bursts*burstSize), "ns/update")
}

// BenchmarkLoopBurst10kRealClock is the same burst on the real clock with
// default options, so the coalescing window and the throttle act in real
// time. Its time per op is dominated by those waits; the figure of interest
// is applies/op.
func BenchmarkLoopBurst10kRealClock(b *testing.B) {
	l, err := New(Options{ResyncInterval: -1, HealthInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	m, d := &countManager{}, &countDriver{}
	if err := l.AddManager(m); err != nil {
		b.Fatal(err)
	}
	if err := l.AddDriver(d); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	l.DatastoreInSync()
	l.InterfacesInSync()
	waitSeen := func(n int64) {
		for m.seen.Load() < n {
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitSeen(2)
	start := d.applies.Load()
	total := int64(2)
	bursts := 0
	for b.Loop() {
		for _, msg := range burstMsgs {
			if err := l.Send(ctx, msg); err != nil {
				b.Fatal(err)
			}
		}
		total += burstSize
		waitSeen(total)
		bursts++
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d.applies.Load()-start)/float64(bursts), "applies/op")
}
