//go:build linux

package rtnl

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/benchutil"
	"github.com/nodeplane/nodeplane/internal/kerneltest"
)

// benchTable is the (non-main) table the benchmarks write.
const benchTable = 100

// benchNS is a fresh namespace with the test links, one per benchmark
// function (kerneltest.Open: benchmarks do not use the testing.T helpers).
type benchNS struct {
	ns    *kerneltest.NS
	links testLinks
}

func openBenchNS(b *testing.B) *benchNS {
	b.Helper()
	kerneltest.RequireKernel(b)
	ns, err := kerneltest.Open()
	if err != nil {
		b.Fatal(err)
	}
	links, err := setupLinks(ns)
	if err != nil {
		ns.Close()
		b.Fatal(err)
	}
	return &benchNS{ns: ns, links: links}
}

// close removes the namespace and waits for the kernel to free it.
func (e *benchNS) close(b *testing.B) {
	if err := e.ns.Close(); err != nil {
		b.Error(err)
	}
	settle()
}

// reportPerRoute reports the elapsed time and the CPU time (this process
// and its children, kernel work included) per route. On a shared machine
// the CPU figure is the steadier one.
func reportPerRoute(b *testing.B, n int, cpu time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/route")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/route")
}

// settle waits for the kernel's deferred work of earlier benchmarks (a
// closed namespace's routes are freed asynchronously, under the rtnl lock)
// so it is not billed to the next measurement.
func settle() { time.Sleep(500 * time.Millisecond) }

// benchWrite measures the writer that newWriter prepares (untimed) for
// n routes, in one namespace, emptying the table (untimed) between
// iterations.
func benchWrite(b *testing.B, n int, newWriter func(e *benchNS, c *Conn, ops []RouteOp) func() error) {
	e := openBenchNS(b)
	defer e.close(b)
	c, err := Open(e.ns.NsHandle())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ops := genRoutes(true, n, benchTable, e.links.v0)
	dels := make([]RouteOp, n)
	for i := range ops {
		dels[i] = RouteOp{Kind: OpDelete, Route: ops[i].Route}
	}
	write := newWriter(e, c, ops)
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
		for i, err := range c.ApplyRoutes(context.Background(), dels) {
			if err != nil {
				b.Fatalf("delete %d: %v", i, err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportPerRoute(b, n, cpu)
}

func benchApplyRoutes(b *testing.B, n int) {
	benchWrite(b, n, func(_ *benchNS, c *Conn, ops []RouteOp) func() error {
		return func() error {
			for i, err := range c.ApplyRoutes(context.Background(), ops) {
				if err != nil {
					return fmt.Errorf("op %d: %w", i, err)
				}
			}
			return nil
		}
	})
}

func BenchmarkApplyRoutes1k(b *testing.B)  { benchApplyRoutes(b, 1_000) }
func BenchmarkApplyRoutes10k(b *testing.B) { benchApplyRoutes(b, 10_000) }

// benchReplaceLoop is the peer: one vishvananda RouteReplace (one request,
// one ack) per route, as Felix does.
func benchReplaceLoop(b *testing.B, n int) {
	benchWrite(b, n, func(e *benchNS, _ *Conn, ops []RouteOp) func() error {
		routes := make([]*netlink.Route, len(ops))
		for i := range ops {
			routes[i] = netlinkRoute(&ops[i].Route)
		}
		h := e.ns.Handle()
		return func() error {
			for _, r := range routes {
				if err := h.RouteReplace(r); err != nil {
					return err
				}
			}
			return nil
		}
	})
}

func BenchmarkNetlinkRouteReplaceLoop1k(b *testing.B)  { benchReplaceLoop(b, 1_000) }
func BenchmarkNetlinkRouteReplaceLoop10k(b *testing.B) { benchReplaceLoop(b, 10_000) }

// dumpBenchN is the size of the dump benchmarks.
const dumpBenchN = 100_000

// withDumpNS runs fn b.N times (timed) against one namespace holding
// dumpBenchN routes in benchTable.
func withDumpNS(b *testing.B, fn func(e *benchNS, c *Conn)) {
	e := openBenchNS(b)
	defer e.close(b)
	c, err := Open(e.ns.NsHandle())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	settle()
	for i, err := range c.ApplyRoutes(context.Background(), genRoutes(true, dumpBenchN, benchTable, e.links.v0)) {
		if err != nil {
			b.Fatalf("op %d: %v", i, err)
		}
	}
	b.ResetTimer()
	c0 := benchutil.TotalCPU()
	for range b.N {
		fn(e, c)
	}
	cpu := benchutil.TotalCPU() - c0
	b.StopTimer()
	reportPerRoute(b, dumpBenchN, cpu)
}

func BenchmarkDumpRoutes100k(b *testing.B) {
	withDumpNS(b, func(_ *benchNS, c *Conn) {
		n := 0
		err := c.DumpRoutes(context.Background(), unix.AF_INET, benchTable, func(*Route) error { n++; return nil }, func() { n = 0 })
		if err != nil || n != dumpBenchN {
			b.Fatalf("dumped %d routes, err %v", n, err)
		}
	})
}

func BenchmarkNetlinkRouteListFiltered100k(b *testing.B) {
	withDumpNS(b, func(e *benchNS, _ *Conn) {
		rs, err := e.ns.Handle().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: benchTable}, netlink.RT_FILTER_TABLE)
		if err != nil || len(rs) != dumpBenchN {
			b.Fatalf("listed %d routes, err %v", len(rs), err)
		}
	})
}

func BenchmarkIPRouteShow100k(b *testing.B) {
	withDumpNS(b, func(e *benchNS, _ *Conn) {
		out, err := e.ns.Exec(context.Background(), "ip", "route", "show", "table", strconv.Itoa(benchTable))
		if err != nil || len(out) == 0 {
			b.Fatalf("ip route show: %d bytes, err %v", len(out), err)
		}
	})
}
