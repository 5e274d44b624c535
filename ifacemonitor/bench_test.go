package ifacemonitor

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
)

const benchLinks = 16

// benchKernel is a fake namespace with benchLinks bridges, whose stream
// carries the benchmark's events alone (scripted).
func benchKernel(b *testing.B) (*testKernel, []kernel.Link) {
	b.Helper()
	ns := newFake(b)
	var links []kernel.Link
	for i := range benchLinks {
		l, err := ns.AddLink(bg, kernel.Link{Name: fmt.Sprintf("br%d", i), Kind: kernel.KindBridge})
		if err != nil {
			b.Fatal(err)
		}
		links = append(links, l)
	}
	k := newTestKernel(ns)
	k.scripted = true
	return k, links
}

// startBench runs a monitor on k and waits for in-sync; it returns the
// stream to send events on, and stop, which cancels the monitor and waits
// until Run has returned.
func startBench(b *testing.B, k *testKernel, opts Options) (*Monitor, chan<- kernel.Event, func()) {
	b.Helper()
	opts.Kernel = k
	opts.ResyncInterval = -1
	// A clock that stands still: re-lists take no time on it, so they are
	// never spaced out, and no timer fires.
	opts.Clock = clock.NewFake(epoch)
	m, err := New(opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	var stream chan<- kernel.Event
	for stream == nil {
		time.Sleep(time.Millisecond)
		stream = k.stream()
	}
	stream <- kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventLinks | kernel.EventAddrs}}
	for !m.Stats().InSync {
		time.Sleep(time.Millisecond)
	}
	return m, stream, func() {
		cancel()
		if err := <-errc; err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkEvents measures events processed per second: address events on
// 16 interfaces (each set growing to 32 addresses and shrinking again) with
// an MTU change every 64 events. "burst" queues them as fast as possible,
// so the monitor applies them in batches and reports each batch once;
// "each-reported" waits for every event's callback before sending the next.
func BenchmarkEvents(b *testing.B) {
	for _, each := range []bool{false, true} {
		name := "burst"
		if each {
			name = "each-reported"
		}
		b.Run(name, func(b *testing.B) {
			k, links := benchKernel(b)
			var cycle []kernel.Event
			for phase, add := range []bool{true, false} {
				for j := range benchLinks * 32 {
					l := j % benchLinks
					p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(l), byte(j / benchLinks), 1}), 24)
					cycle = append(cycle, kernel.Event{Addr: &kernel.AddrEvent{Addr: kernel.Addr{LinkIndex: links[l].Index, Prefix: p}, Deleted: !add}})
					if j%64 == 0 { // a different link each time, so each is a change
						ch := links[j/64]
						ch.MTU = 1400 + 100*phase
						cycle = append(cycle, kernel.Event{Link: &kernel.LinkEvent{Link: ch}})
					}
				}
			}
			reported := make(chan struct{}, 1)
			barrier := make(chan struct{}, 1)
			callbacks := 0
			var armed atomic.Bool // not during the initial listing
			signal := func() {
				if armed.Load() {
					callbacks++
					if each {
						reported <- struct{}{}
					}
				}
			}
			_, stream, stop := startBench(b, k, Options{
				OnLinkState: func(u LinkUpdate) {
					if u.Name == "barrier" {
						barrier <- struct{}{}
						return
					}
					signal()
				},
				OnAddrs: func(string, []netip.Prefix) { signal() },
			})
			defer stop()

			armed.Store(true)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				stream <- cycle[i%len(cycle)]
				if each {
					<-reported
				}
			}
			stream <- kernel.Event{Link: &kernel.LinkEvent{Link: kernel.Link{Index: 9999 + b.N, Name: "barrier", Kind: kernel.KindBridge}}}
			<-barrier
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(callbacks)/float64(b.N), "callbacks/event")
		})
	}
}

// BenchmarkResync measures a re-list after an overflow: diffing a listing
// of n addresses (1% of them changed since the last one) against the view
// and reporting the difference. The listing is handed over ready-made; the
// kernel's dump time is not included (see the TestKernelOverflowConverges
// log for the end-to-end figure).
func BenchmarkResync(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("addrs=%d", n), func(b *testing.B) {
			k, links := benchKernel(b)
			var listings [2][2][]kernel.Addr // IPv4 only
			for v := range listings {
				for i := range n {
					last := byte(1)
					if i%100 == 0 {
						last = byte(1 + v) // the 1% that changes between listings
					}
					p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), last}), 32)
					listings[v][0] = append(listings[v][0], kernel.Addr{LinkIndex: links[i%benchLinks].Index, Prefix: p})
				}
			}
			k.addrs.Store(&listings[0])
			m, stream, stop := startBench(b, k, Options{})
			defer stop()
			overflow := fmt.Errorf("%w", kernel.ErrOverflow)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k.addrs.Store(&listings[(i+1)%2]) // read by the monitor only while it re-lists
				stream <- kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventAddrs, Reason: overflow}}
				for m.Stats().Relists < uint64(i+2) {
					runtime.Gosched()
				}
			}
		})
	}
}
