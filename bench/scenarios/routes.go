//go:build linux

package scenarios

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/kernel"
)

// The routes scenarios measure the batched route layer of package kernel
// (its own rtnetlink codec) that the routetable driver writes and reads
// through. N IPv4 /32 device routes (`10.x.y.z/32 dev v0 table 100 proto
// 80 scope link`, as in research/floors.md) on a veth v0 (peer v1, both
// up) created by Setup in the trial's namespace. Ours opens the namespace
// with kernel.Open in Run, so its figures include opening the socket.
//
//   - routes/initial/N: program N routes into an empty table. Ours is
//     kernel.Namespace.ApplyRoutes (many requests per sendmsg, acks
//     drained in bulk);
//     the peer is one vishvananda/netlink RouteReplace per route, in
//     process (what Felix does: one request and one ack per route); the
//     floor is one hand-written `ip -batch` of `route add` lines; peer2 is
//     one `ip route add` exec per route (capped at 1k).
//   - routes/dump/N: read a table of N routes. Ours is
//     kernel.Namespace.DumpRoutes (streamed, parsed in place, counted); the
//     floor is `ip route show table 100` (output captured); the peer is
//     netlink RouteListFiltered.
const (
	routesTable = 100
	routesProto = 80
)

func init() {
	for _, n := range []int{100, 1_000, 10_000, 100_000} {
		harness.Register(routesInitial(n))
	}
	harness.Register(routesDump(1_000), routesDump(100_000))
}

// routesSetupLink creates v0/v1 and returns v0's index, then waits for the
// machine to be idle (routesQuiesce).
func routesSetupLink(ctx context.Context, env *harness.Env) (int32, error) {
	idx, err := setupVeth(env, "v0", "v1")
	if err != nil {
		return 0, err
	}
	return int32(idx), routesQuiesce(ctx)
}

// routesQuiesce waits until the machine is idle (under 3% of all CPUs busy
// over 100 ms, read from /proc/stat), at most 3 s: a closed namespace's
// routes are freed asynchronously by kernel workers, and a trial that ran
// beside them would measure them (they hold the rtnl lock that every route
// write takes, and a core).
func routesQuiesce(ctx context.Context) error {
	sample := func() (busy, total uint64) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0
		}
		line, _, _ := bytes.Cut(b, []byte{'\n'})
		for i, f := range bytes.Fields(line)[1:] {
			v, _ := strconv.ParseUint(string(f), 10, 64)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total
	}
	deadline := time.Now().Add(3 * time.Second)
	b0, t0 := sample()
	for time.Now().Before(deadline) {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		b1, t1 := sample()
		if t1 > t0 && float64(b1-b0) < 0.03*float64(t1-t0) {
			return nil
		}
		b0, t0 = b1, t1
	}
	return nil // still busy: measure anyway
}

// routesOps returns the N routes as kernel operations.
func routesOps(n int, oif int32) []kernel.RouteOp {
	ops := make([]kernel.RouteOp, n)
	for i := range ops {
		ops[i] = kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{
			Family: kernel.IPv4, Table: routesTable, Dst: routeDst(i), Type: kernel.RTNUnicast,
			Protocol: routesProto, Scope: kernel.ScopeLink, OIF: int(oif),
		}}
	}
	return ops
}

// routesApply programs ops through a kernel.Namespace opened on the
// trial's namespace.
func routesApply(ctx context.Context, env *harness.Env, ops []kernel.RouteOp) error {
	ns, err := kernel.Open(env.NS.Path())
	if err != nil {
		return err
	}
	defer ns.Close()
	for i, err := range ns.ApplyRoutes(ctx, ops) {
		if err != nil {
			return fmt.Errorf("route %d: %w", i, err)
		}
	}
	return nil
}

func routesInitial(n int) harness.Scenario {
	w := routeWrite{n: n, link: "v0", table: routesTable, proto: routesProto,
		setup: func(ctx context.Context, env *harness.Env) (int, error) {
			oif, err := routesSetupLink(ctx, env)
			return int(oif), err
		}}
	peers, note := w.peers()
	return harness.Scenario{
		Name: "routes/initial/" + strconv.Itoa(n),
		Size: n,
		Note: note,
		Variants: append([]harness.Variant{{
			Name: "kernel ApplyRoutes", Role: harness.Ours,
			Setup: func(ctx context.Context, env *harness.Env) error {
				oif, err := routesSetupLink(ctx, env)
				env.State = routesOps(n, oif)
				return err
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				return routesApply(ctx, env, env.State.([]kernel.RouteOp))
			},
		}}, peers...),
	}
}

func routesDump(n int) harness.Scenario {
	setup := func(ctx context.Context, env *harness.Env) error {
		oif, err := routesSetupLink(ctx, env)
		if err != nil {
			return err
		}
		if err := routesApply(ctx, env, routesOps(n, oif)); err != nil {
			return err
		}
		return routesQuiesce(ctx)
	}
	check := routeCountCheck(n)
	return harness.Scenario{
		Name: "routes/dump/" + strconv.Itoa(n),
		Size: n,
		Note: "read back a table of " + strconv.Itoa(n) + " routes (of a namespace holding nothing else but lo and a veth pair)",
		Variants: []harness.Variant{
			{
				Name: "kernel DumpRoutes", Role: harness.Ours, Setup: setup,
				Run: func(ctx context.Context, env *harness.Env) error {
					ns, err := kernel.Open(env.NS.Path())
					if err != nil {
						return err
					}
					defer ns.Close()
					count := 0
					err = ns.DumpRoutes(ctx, kernel.IPv4, routesTable, func(*kernel.Route) error { count++; return nil }, func() { count = 0 })
					if err != nil {
						return err
					}
					return check("DumpRoutes", count)
				},
			},
			ipRouteShowFloor(routesTable, "", setup, check),
			routeListPeer(routesTable, "", setup, check),
		},
	}
}
