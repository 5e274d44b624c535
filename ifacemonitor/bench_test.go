//go:build linux

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
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// benchSource hands the benchmark's events straight to the monitor.
type benchSource struct {
	ch   chan nlutil.Event
	dump []netlink.Addr
}

func (s *benchSource) subscribe(context.Context) (<-chan nlutil.Event, error) { return s.ch, nil }
func (s *benchSource) links(context.Context) ([]netlink.Link, error) {
	var ls []netlink.Link
	for i := range benchLinks {
		ls = append(ls, benchLink(i, 1500).netlink())
	}
	return ls, nil
}
func (s *benchSource) addrs(context.Context) ([]netlink.Addr, error)   { return s.dump, nil }
func (s *benchSource) routes(context.Context) ([]netlink.Route, error) { return nil, nil }

const benchLinks = 16

func benchLink(i, mtu int) fakeLink {
	return fakeLink{index: 10 + i, name: fmt.Sprintf("veth%d", i), adminUp: true, carrier: true, mtu: mtu, kind: "veth"}
}

// startBench starts a monitor on a benchSource and waits for in-sync; the
// returned stop cancels it and waits until it has stopped.
func startBench(b *testing.B, src *benchSource, opts Options) (*Monitor, func()) {
	b.Helper()
	opts.ResyncInterval = -1
	// A clock that stands still: re-lists take no time on it, so they are
	// never spaced out, and no timer fires.
	opts.Clock = clock.NewFake(epoch)
	m, err := newMonitor(opts, nlutil.Links|nlutil.Addrs)
	if err != nil {
		b.Fatal(err)
	}
	m.src = src
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	src.ch <- nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Links | nlutil.Addrs}}
	for !m.Stats().InSync {
		time.Sleep(time.Millisecond)
	}
	return m, func() {
		cancel()
		close(src.ch)
		<-m.Done()
	}
}

// BenchmarkEvents measures events processed per second: address events on
// 16 interfaces (each set growing to 32 addresses and shrinking again) with
// an MTU change every 64 events. "burst" queues them as fast as possible,
// so the monitor applies them in batches and reports each batch once;
// "each-reported" waits for every event's callback before sending the next.
func BenchmarkEvents(b *testing.B) {
	var cycle []nlutil.Event
	for phase, add := range []bool{true, false} {
		for j := range benchLinks * 32 {
			link := j % benchLinks
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(link), byte(j / benchLinks), 1}), 24)
			cycle = append(cycle, addrEvent(10+link, p, add))
			if j%64 == 0 { // a different link each time, so each is a change
				cycle = append(cycle, linkEvent(benchLink(j/64, 1400+100*phase), unix.RTM_NEWLINK))
			}
		}
	}
	for _, each := range []bool{false, true} {
		name := "burst"
		if each {
			name = "each-reported"
		}
		b.Run(name, func(b *testing.B) {
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
			src := &benchSource{ch: make(chan nlutil.Event, 4096)}
			_, stop := startBench(b, src, Options{
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
				src.ch <- cycle[i%len(cycle)]
				if each {
					<-reported
				}
			}
			src.ch <- linkEvent(fakeLink{index: 9999 + b.N, name: "barrier", kind: "veth"}, unix.RTM_NEWLINK)
			<-barrier
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(callbacks)/float64(b.N), "callbacks/event")
		})
	}
}

// BenchmarkResync measures a re-list after an overflow: diffing a dump of
// n addresses (1% of them changed) against the view and reporting the
// difference. The kernel's own dump time is not included (see the
// TestKernelOverflowConverges log for the end-to-end figure).
func BenchmarkResync(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprintf("addrs=%d", n), func(b *testing.B) {
			dumps := [2][]netlink.Addr{}
			for v := range dumps {
				for i := range n {
					last := byte(1)
					if i%100 == 0 {
						last = byte(1 + v) // the 1% that changes between dumps
					}
					p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), last}), 32)
					dumps[v] = append(dumps[v], netlink.Addr{IPNet: ipNet(p), LinkIndex: 10 + i%benchLinks})
				}
			}
			src := &benchSource{ch: make(chan nlutil.Event, 16), dump: dumps[0]}
			m, stop := startBench(b, src, Options{})
			defer stop()
			overflow := fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				src.dump = dumps[(i+1)%2] // read by the monitor only while it re-lists
				src.ch <- nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Addrs, Reason: overflow}}
				for m.Stats().Relists < uint64(i+2) {
					runtime.Gosched()
				}
			}
		})
	}
}
