package routetable_test

import (
	"context"
	"net/netip"
	"runtime"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// sinkKernel accepts every route write and dumps nothing, so that a
// benchmark measures the Table's own heap, not a fake namespace's.
type sinkKernel struct{ *kernelfake.Namespace }

func (sinkKernel) DumpRoutes(context.Context, kernel.Family, uint32, func(*kernel.Route) error, func()) error {
	return nil
}

func (sinkKernel) DumpInterfaceRoutes(context.Context, kernel.Family, uint32, int, func(*kernel.Route) error, func()) error {
	return nil
}

func (sinkKernel) ApplyRoutes(_ context.Context, ops []kernel.RouteOp) []error {
	return make([]error, len(ops))
}

func (sinkKernel) Links(context.Context) ([]kernel.Link, error) {
	return []kernel.Link{{Name: "lo", Index: 1, AdminUp: true, Running: true}, {Name: "np-a", Index: 2, AdminUp: true, Running: true}}, nil
}

func benchTargets(n int) []rt.Target {
	out := make([]rt.Target, n)
	for i := range n {
		out[i] = rt.Target{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)}
	}
	return out
}

// BenchmarkHeapPerRoute reports the heap a Table keeps per route once
// 100k routes are programmed: the declared candidates, the desired winners
// and the kernel view together.
func BenchmarkHeapPerRoute(b *testing.B) {
	const n = 100_000
	targets := benchTargets(n)
	var perRoute float64
	for b.Loop() {
		before := benchutil.HeapInUse()
		tbl, err := rt.New(rt.Options{Kernel: sinkKernel{kernelfake.New(kernelfake.Options{})}, Family: rt.IPv4, Table: kernel.TableMain})
		if err != nil {
			b.Fatal(err)
		}
		if err := tbl.SetRoutes(1, "np-a", targets); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
		after := benchutil.HeapInUse()
		if s := tbl.Counters(); s.InKernel != n || s.PendingUpdates != 0 {
			b.Fatalf("not programmed: %+v", s)
		}
		runtime.KeepAlive(tbl)
		perRoute = float64(int64(after)-int64(before)) / n
	}
	b.ReportMetric(perRoute, "heapB/route")
}

// BenchmarkNoopResync100k is a periodic resync that finds nothing to do:
// one dump of 100k routes from a fake namespace, no writes.
func BenchmarkNoopResync100k(b *testing.B) {
	const n = 100_000
	k := newNS(b)
	addLink(b, k, "np-a", 1)
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: 1000})
	if err != nil {
		b.Fatal(err)
	}
	if err := tbl.SetRoutes(1, "np-a", benchTargets(n)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := tbl.Apply(ctx); err != nil {
		b.Fatal(err)
	}
	k.ResetCounts()
	for b.Loop() {
		tbl.QueueResync()
		if _, err := tbl.Apply(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if w := k.Writes(); w != 0 {
		b.Fatalf("%d writes", w)
	}
}

// BenchmarkChangeOne100k changes one route of 100k and applies it.
func BenchmarkChangeOne100k(b *testing.B) {
	const n = 100_000
	tbl, err := rt.New(rt.Options{Kernel: sinkKernel{kernelfake.New(kernelfake.Options{})}, Family: rt.IPv4, Table: kernel.TableMain})
	if err != nil {
		b.Fatal(err)
	}
	targets := benchTargets(n)
	if err := tbl.SetRoutes(1, "np-a", targets); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := tbl.Apply(ctx); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		tg := targets[i%n]
		tg.MTU = uint32(1000 + i%2)
		if err := tbl.RouteUpdate(1, "np-a", tg); err != nil {
			b.Fatal(err)
		}
		if _, err := tbl.Apply(ctx); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRouteEvents10k hands a Table in sync with 10k routes 10k route
// events (OnRouteUpdate, as ifacemonitor reports them) and applies them:
// "echo", the reports of the Table's own writes, which change nothing;
// "deleted", every route reported gone, which the Apply writes again (to
// a kernel that accepts every write at once). ns/op is per batch of 10k.
func BenchmarkRouteEvents10k(b *testing.B) {
	const n = 10_000
	targets := benchTargets(n)
	events := make([]kernel.Route, n)
	for i, tg := range targets {
		events[i] = kernel.Route{Family: rt.IPv4, Table: kernel.TableMain, Dst: tg.CIDR, Type: kernel.RTNUnicast,
			Protocol: rt.DefaultProtocol, Scope: kernel.ScopeLink, OIF: 2}
	}
	for _, gone := range []bool{false, true} {
		name := map[bool]string{false: "echo", true: "deleted"}[gone]
		b.Run(name, func(b *testing.B) {
			tbl, err := rt.New(rt.Options{Kernel: sinkKernel{kernelfake.New(kernelfake.Options{})}, Family: rt.IPv4, Table: kernel.TableMain})
			if err != nil {
				b.Fatal(err)
			}
			if err := tbl.SetRoutes(1, "np-a", targets); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := tbl.Apply(ctx); err != nil {
				b.Fatal(err)
			}
			writes := tbl.Counters().RouteWrites
			for b.Loop() {
				for _, r := range events {
					tbl.OnRouteUpdate(r, gone)
				}
				if _, err := tbl.Apply(ctx); err != nil {
					b.Fatal(err)
				}
			}
			s := tbl.Counters()
			if s.InKernel != n || s.PendingUpdates != 0 || s.Resyncs != 1 {
				b.Fatalf("not in sync: %+v", s)
			}
			perBatch := float64(s.RouteWrites-writes) / float64(b.N)
			if want := map[bool]float64{false: 0, true: n}[gone]; perBatch != want {
				b.Fatalf("%v writes per batch, want %v", perBatch, want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
		})
	}
}
