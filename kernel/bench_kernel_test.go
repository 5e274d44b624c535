//go:build linux

package kernel

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// The benchmarks write N objects into an empty namespace, ours batched
// (ApplyRoutes, ApplyNeighbors, ApplyFDB: many requests per sendmsg, acks
// drained in bulk) against the peer, one netlink-library call per object
// (RouteReplace, NeighSet: one request and one ack each, as Felix does),
// and report the wall and the CPU time (this process and its children,
// kernel work included) per object. On a shared machine the CPU figure is
// the steadier one.

// benchTable is the (non-main) table the route benchmarks write.
const benchTable = 100

// benchNS is a fresh namespace with the test links and a Namespace on it,
// one per benchmark function (kerneltest.Open: benchmarks do not use the
// testing.T helpers).
type benchNS struct {
	kns   *kerneltest.NS
	links testLinks
	ns    *Namespace
}

func openBenchNS(b *testing.B) *benchNS {
	b.Helper()
	kerneltest.RequireKernel(b)
	kns, err := kerneltest.Open()
	if err != nil {
		b.Fatal(err)
	}
	links, err := setupLinks(kns)
	if err == nil {
		var ns *Namespace
		if ns, err = Open(kns.Path()); err == nil {
			return &benchNS{kns: kns, links: links, ns: ns}
		}
	}
	kns.Close()
	b.Fatal(err)
	return nil
}

// close removes the namespace and waits for the kernel to free it.
func (e *benchNS) close(b *testing.B) {
	if err := e.ns.Close(); err != nil {
		b.Error(err)
	}
	if err := e.kns.Close(); err != nil {
		b.Error(err)
	}
	settle()
}

// settle waits for the kernel's deferred work of earlier benchmarks (a
// closed namespace's objects are freed asynchronously, under the rtnl
// lock) so it is not billed to the next measurement.
func settle() { time.Sleep(500 * time.Millisecond) }

// reportPer reports the elapsed time and the CPU time per object.
func reportPer(b *testing.B, unit string, n int, cpu time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/"+unit)
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/"+unit)
}

// benchWrite measures write (timed) b.N times in one namespace, running
// undo (untimed) after each; prepare builds both, untimed.
func benchWrite(b *testing.B, unit string, n int, prepare func(e *benchNS) (write, undo func() error)) {
	e := openBenchNS(b)
	defer e.close(b)
	write, undo := prepare(e)
	settle()
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		c0 := benchutil.TotalCPU()
		if err := write(); err != nil {
			b.Fatal(err)
		}
		cpu += benchutil.TotalCPU() - c0
		b.StopTimer()
		if err := undo(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPer(b, unit, n, cpu)
}

// firstErr returns the first error of a batched write.
func firstErr(errs []error) error {
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	return nil
}

// batch returns a write of ops in one batch through apply (one of the
// Namespace's batched writes).
func batch[T any](apply func(context.Context, []T) []error, ops []T) func() error {
	return func() error { return firstErr(apply(context.Background(), ops)) }
}

// oneByOne returns the peer's write: call (a netlink-library call) once
// per object.
func oneByOne[T any](objs []T, call func(T) error) func() error {
	return func() error {
		for _, o := range objs {
			if err := call(o); err != nil {
				return err
			}
		}
		return nil
	}
}

// deletes returns the OpDelete of every op.
func deletes[T any](ops []T, del func(T) T) []T {
	out := make([]T, len(ops))
	for i, op := range ops {
		out[i] = del(op)
	}
	return out
}

func routeDeletes(ops []RouteOp) []RouteOp {
	return deletes(ops, func(op RouteOp) RouteOp { return RouteOp{Kind: OpDelete, Route: op.Route} })
}

func benchApplyRoutes(b *testing.B, n int) {
	benchWrite(b, "route", n, func(e *benchNS) (func() error, func() error) {
		ops := genRoutes(true, n, benchTable, e.links.v0)
		return batch(e.ns.ApplyRoutes, ops), batch(e.ns.ApplyRoutes, routeDeletes(ops))
	})
}

func BenchmarkApplyRoutes1k(b *testing.B)  { benchApplyRoutes(b, 1_000) }
func BenchmarkApplyRoutes10k(b *testing.B) { benchApplyRoutes(b, 10_000) }

// benchRouteReplaceLoop is the peer: one RouteReplace per route.
func benchRouteReplaceLoop(b *testing.B, n int) {
	benchWrite(b, "route", n, func(e *benchNS) (func() error, func() error) {
		ops := genRoutes(true, n, benchTable, e.links.v0)
		routes := make([]*netlink.Route, len(ops))
		for i := range ops {
			routes[i] = netlinkRoute(&ops[i].Route)
		}
		return oneByOne(routes, e.kns.Handle().RouteReplace), batch(e.ns.ApplyRoutes, routeDeletes(ops))
	})
}

func BenchmarkNetlinkRouteReplaceLoop1k(b *testing.B)  { benchRouteReplaceLoop(b, 1_000) }
func BenchmarkNetlinkRouteReplaceLoop10k(b *testing.B) { benchRouteReplaceLoop(b, 10_000) }

// benchNeighbors returns n permanent IPv4 neighbours on v0.
func benchNeighbors(e *benchNS, n int) []NeighborOp {
	ops := make([]NeighborOp, n)
	for i := range ops {
		ops[i] = NeighborOp{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: e.links.v0,
			IP: netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), MAC: mac(i)}}
	}
	return ops
}

func neighborDeletes(ops []NeighborOp) []NeighborOp {
	return deletes(ops, func(op NeighborOp) NeighborOp { return NeighborOp{Kind: OpDelete, Neighbor: op.Neighbor} })
}

func BenchmarkApplyNeighbors10k(b *testing.B) {
	const n = 10_000
	benchWrite(b, "neigh", n, func(e *benchNS) (func() error, func() error) {
		ops := benchNeighbors(e, n)
		return batch(e.ns.ApplyNeighbors, ops), batch(e.ns.ApplyNeighbors, neighborDeletes(ops))
	})
}

// BenchmarkNetlinkNeighSetLoop10k is the peer: one NeighSet per entry.
func BenchmarkNetlinkNeighSetLoop10k(b *testing.B) {
	const n = 10_000
	benchWrite(b, "neigh", n, func(e *benchNS) (func() error, func() error) {
		ops := benchNeighbors(e, n)
		neighs := make([]*netlink.Neigh, n)
		for i, op := range ops {
			neighs[i] = &netlink.Neigh{LinkIndex: op.Neighbor.LinkIndex, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
				IP: op.Neighbor.IP.AsSlice(), HardwareAddr: op.Neighbor.MAC}
		}
		return oneByOne(neighs, e.kns.Handle().NeighSet), batch(e.ns.ApplyNeighbors, neighborDeletes(ops))
	})
}

// benchFDB returns a VXLAN device's n permanent entries, each MAC towards
// one of 250 VTEPs.
func benchFDB(b *testing.B, e *benchNS, n int) []FDBOp {
	vx := addVXLAN(b, e.kns.Handle(), "np-vx", e.links.v0, testAddr4.Addr())
	ops := make([]FDBOp, n)
	for i := range ops {
		ops[i] = FDBOp{Kind: OpReplace, Entry: FDBEntry{LinkIndex: vx, MAC: mac(i),
			Dst: netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i%250)}), Permanent: true}}
	}
	return ops
}

func fdbDeletes(ops []FDBOp) []FDBOp {
	return deletes(ops, func(op FDBOp) FDBOp { return FDBOp{Kind: OpDelete, Entry: op.Entry} })
}

func BenchmarkApplyFDB10k(b *testing.B) {
	const n = 10_000
	benchWrite(b, "fdb", n, func(e *benchNS) (func() error, func() error) {
		ops := benchFDB(b, e, n)
		return batch(e.ns.ApplyFDB, ops), batch(e.ns.ApplyFDB, fdbDeletes(ops))
	})
}

// BenchmarkNetlinkFDBNeighSetLoop10k is the peer: one NeighSet (AF_BRIDGE,
// NTF_SELF) per entry.
func BenchmarkNetlinkFDBNeighSetLoop10k(b *testing.B) {
	const n = 10_000
	benchWrite(b, "fdb", n, func(e *benchNS) (func() error, func() error) {
		ops := benchFDB(b, e, n)
		neighs := make([]*netlink.Neigh, n)
		for i, op := range ops {
			neighs[i] = &netlink.Neigh{LinkIndex: op.Entry.LinkIndex, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
				State: netlink.NUD_PERMANENT, IP: op.Entry.Dst.AsSlice(), HardwareAddr: net.HardwareAddr(op.Entry.MAC)}
		}
		return oneByOne(neighs, e.kns.Handle().NeighSet), batch(e.ns.ApplyFDB, fdbDeletes(ops))
	})
}

// dumpBenchN is the size of the dump benchmarks.
const dumpBenchN = 100_000

// withDumpNS runs fn b.N times (timed) against one namespace holding
// dumpBenchN routes in benchTable.
func withDumpNS(b *testing.B, fn func(e *benchNS)) {
	e := openBenchNS(b)
	defer e.close(b)
	settle()
	if err := firstErr(e.ns.ApplyRoutes(context.Background(), genRoutes(true, dumpBenchN, benchTable, e.links.v0))); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c0 := benchutil.TotalCPU()
	for range b.N {
		fn(e)
	}
	cpu := benchutil.TotalCPU() - c0
	b.StopTimer()
	reportPer(b, "route", dumpBenchN, cpu)
}

func BenchmarkDumpRoutes100k(b *testing.B) {
	withDumpNS(b, func(e *benchNS) {
		n := 0
		err := e.ns.DumpRoutes(context.Background(), IPv4, benchTable, func(*Route) error { n++; return nil }, func() { n = 0 })
		if err != nil || n != dumpBenchN {
			b.Fatalf("dumped %d routes, err %v", n, err)
		}
	})
}

func BenchmarkNetlinkRouteListFiltered100k(b *testing.B) {
	withDumpNS(b, func(e *benchNS) {
		rs, err := e.kns.Handle().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: benchTable}, netlink.RT_FILTER_TABLE)
		if err != nil || len(rs) != dumpBenchN {
			b.Fatalf("listed %d routes, err %v", len(rs), err)
		}
	})
}

func BenchmarkIPRouteShow100k(b *testing.B) {
	withDumpNS(b, func(e *benchNS) {
		out, err := e.kns.Exec(context.Background(), "ip", "route", "show", "table", strconv.Itoa(benchTable))
		if err != nil || len(out) == 0 {
			b.Fatalf("ip route show: %d bytes, err %v", len(out), err)
		}
	})
}
