package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/routetable"
)

// The scenario suite: every scenario runs against the fake kernel (once
// per failure kind and family) and against the real kernel in a fresh
// namespace (once per family).

// failure is a kind of fault armed before every convergence step.
type failure string

const (
	failNone         failure = "none"
	failFirstWrite   failure = "fail-first-write"
	failENODEV       failure = "enodev"
	failENETDOWN     failure = "enetdown"
	failInterrupted  failure = "dump-interrupted"
	failDumpError    failure = "dump-error"
	failLinks        failure = "links-error"
	failConntrack    failure = "conntrack-error"
	failDeleteFailed failure = "delete-failed"
)

var allFailures = []failure{failNone, failFirstWrite, failENODEV, failENETDOWN, failInterrupted, failDumpError,
	failLinks, failConntrack, failDeleteFailed}

// env is where a scenario runs.
type env struct {
	fam   routetable.Family
	table uint32
	// kernel is the Table's kernel, behind a recorder.
	kernel *recorder
	// fake is set when the kernel is the fake (for its own inspection).
	fake bool
	// arm injects a fault of the given kind into the next calls.
	arm func(f failure)
	// disarm removes any fault left.
	disarm func()
	// addLink creates an interface, up, with the link's addresses
	// (linkAddr) so gateways and sources on it are valid; returns its
	// index.
	addLink func(t *testing.T, name string) int
	// setUp brings an interface up or down.
	setUp func(t *testing.T, name string, up bool)
	// setCarrier gives an interface (which stays up) its carrier or takes
	// it away; waits until the kernel shows the change.
	setCarrier func(t *testing.T, name string, carrier bool)
	// deleteLink deletes an interface.
	deleteLink func(t *testing.T, name string)
	// renameLink renames an interface.
	renameLink func(t *testing.T, name, newName string)
	// addRoute adds a route as another agent would.
	addRoute func(t *testing.T, r routetable.KernelRoute)
	// deleteRoute deletes a route as an administrator would.
	deleteRoute func(t *testing.T, r routetable.KernelRoute)
	// flows and addFlow inspect and create conntrack entries (the fake's,
	// or the kernel's through ctnetlink).
	addFlow func(t *testing.T, src, dst netip.Addr)
	flows   func(t *testing.T) []string
	// neighbors lists the neighbour entries of the family.
	neighbors func(t *testing.T) []routetable.Neighbor
	clock     *clock.Fake
}

// pfx maps an IPv4 prefix of the scenario's plan to the env's family:
// a.b.c.d/n is fd00::a.b.c.d/(96+n) in IPv6.
func (e *env) pfx(s string) netip.Prefix {
	p := netip.MustParsePrefix(s)
	if e.fam == routetable.IPv4 {
		return p
	}
	a4 := p.Addr().As4()
	var a16 [16]byte
	a16[0], a16[1] = 0xfd, 0x00
	copy(a16[12:], a4[:])
	return netip.PrefixFrom(netip.AddrFrom16(a16), p.Bits()+96)
}

// ip maps an IPv4 address of the plan to the env's family.
func (e *env) ip(s string) netip.Addr { return e.pfx(s + "/32").Addr() }

// linkAddr is the address interface number n gets: 10.99.n.1/24.
func linkAddr(n int) string { return fmt.Sprintf("10.99.%d.1/24", n) }

// gw is a gateway on interface number n's subnet.
func (e *env) gw(n int) netip.Addr { return e.ip(fmt.Sprintf("10.99.%d.2", n)) }

// src is interface number n's own address.
func (e *env) src(n int) netip.Addr { return e.ip(fmt.Sprintf("10.99.%d.1", n)) }

// newTable returns a Table of the env with opts filled in.
func (e *env) newTable(t *testing.T, opts routetable.Options) *routetable.Table {
	t.Helper()
	opts.Kernel = e.kernel
	opts.Family = e.fam
	if opts.Table == 0 {
		opts.Table = e.table
	}
	if opts.Clock == nil {
		opts.Clock = e.clock
	}
	if opts.InterfacePatterns == nil && opts.Ownership == nil {
		opts.InterfacePatterns = []string{`^np-`}
	}
	tbl, err := routetable.New(opts)
	require.NoError(t, err)
	return tbl
}

// routes returns the table's routes in the env's compact text form,
// sorted, read through the kernel (not the recorder).
func (e *env) routes(t *testing.T) []string {
	t.Helper()
	var out []string
	names := e.linkNames(t)
	err := e.kernel.k.DumpRoutes(context.Background(), e.fam, e.table, func(r *routetable.KernelRoute) error {
		out = append(out, formatRoute(r, names))
		return nil
	}, func() { out = nil })
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// detailed is routes with what formatRoute leaves out: the scope and the
// flags of the route and of its next hops (in formatRoute's order).
func (e *env) detailed(t *testing.T) []string {
	t.Helper()
	var out []string
	names := e.linkNames(t)
	err := e.kernel.k.DumpRoutes(context.Background(), e.fam, e.table, func(r *routetable.KernelRoute) error {
		line := fmt.Sprintf("%s scope %d flags %#x", formatRoute(r, names), r.Scope, r.Flags)
		hops := slices.Clone(r.NextHops)
		slices.SortFunc(hops, func(a, b routetable.KernelNextHop) int { return a.Gateway.Compare(b.Gateway) })
		for _, h := range hops {
			line += fmt.Sprintf(" hop-flags %#x", h.Flags)
		}
		out = append(out, line)
		return nil
	}, func() { out = nil })
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

// ours returns the routes with our protocol.
func (e *env) ours(t *testing.T) []string {
	var out []string
	for _, r := range e.routes(t) {
		if strings.HasSuffix(r, " proto 78") {
			out = append(out, strings.TrimSuffix(r, " proto 78"))
		}
	}
	return out
}

func (e *env) linkNames(t *testing.T) map[int]string {
	t.Helper()
	links, err := e.kernel.k.Links(context.Background())
	require.NoError(t, err)
	names := map[int]string{}
	for _, l := range links {
		names[l.Index] = l.Name
	}
	return names
}

func (e *env) index(t *testing.T, name string) int {
	t.Helper()
	for idx, n := range e.linkNames(t) {
		if n == name {
			return idx
		}
	}
	t.Fatalf("no link %s", name)
	return 0
}

// formatRoute renders a route compactly: "DST [metric M] TYPE [via GW]
// [dev NAME] [src S] [mtu N] [onlink] [nexthop …] proto P". IPv6 metric
// 1024 and IPv4 metric 0 are left out.
func formatRoute(r *routetable.KernelRoute, names map[int]string) string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if !(r.Priority == 0 || (r.Family == routetable.IPv6 && r.Priority == 1024)) {
		fmt.Fprintf(&b, " metric %d", r.Priority)
	}
	typ := map[uint8]string{routetable.RTNUnicast: "unicast", routetable.RTNLocal: "local",
		routetable.RTNBlackhole: "blackhole", routetable.RTNUnreachable: "unreachable",
		routetable.RTNProhibit: "prohibit", routetable.RTNThrow: "throw"}[r.Type]
	b.WriteString(" " + typ)
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	if r.OIF != 0 && (r.Type == routetable.RTNUnicast || r.Type == routetable.RTNLocal) {
		b.WriteString(" dev " + names[r.OIF])
	}
	if r.PrefSrc.IsValid() {
		b.WriteString(" src " + r.PrefSrc.String())
	}
	if r.MTU != 0 {
		fmt.Fprintf(&b, " mtu %d", r.MTU)
	}
	if r.Flags&routetable.FlagOnlink != 0 {
		b.WriteString(" onlink")
	}
	hops := slices.Clone(r.NextHops)
	slices.SortFunc(hops, func(a, b routetable.KernelNextHop) int { return a.Gateway.Compare(b.Gateway) })
	for _, h := range hops {
		fmt.Fprintf(&b, " nexthop via %v dev %s weight %d", h.Gateway, names[h.OIF], int(h.Weight)+1)
		if uint32(h.Flags)&routetable.FlagOnlink != 0 {
			b.WriteString(" onlink")
		}
	}
	fmt.Fprintf(&b, " proto %d", r.Protocol)
	return b.String()
}

// recorder wraps a Kernel: it counts route writes, records the order of
// route writes and conntrack deletions, and (for the real kernel) injects
// faults.
type recorder struct {
	k routetable.Kernel

	mu       sync.Mutex
	writes   int
	dumps    int
	rescans  int // interface dumps
	log      []string
	fault    failure // injected by the recorder itself (kernel env)
	faultHit bool
}

func (r *recorder) DumpRoutes(ctx context.Context, fam routetable.Family, table uint32, fn func(*routetable.KernelRoute) error, reset func()) error {
	r.mu.Lock()
	r.dumps++
	r.mu.Unlock()
	return r.dump(func(fn func(*routetable.KernelRoute) error, reset func()) error {
		return r.k.DumpRoutes(ctx, fam, table, fn, reset)
	}, fn, reset)
}

func (r *recorder) DumpInterfaceRoutes(ctx context.Context, fam routetable.Family, table uint32, oif int, fn func(*routetable.KernelRoute) error, reset func()) error {
	r.mu.Lock()
	r.rescans++
	r.mu.Unlock()
	return r.dump(func(fn func(*routetable.KernelRoute) error, reset func()) error {
		return r.k.DumpInterfaceRoutes(ctx, fam, table, oif, fn, reset)
	}, fn, reset)
}

// dump runs one dump of the kernel, with the armed dump fault if any.
func (r *recorder) dump(dump func(fn func(*routetable.KernelRoute) error, reset func()) error, fn func(*routetable.KernelRoute) error, reset func()) error {
	r.mu.Lock()
	f := r.takeFault(failInterrupted, failDumpError)
	r.mu.Unlock()
	if f == "" {
		return dump(fn, reset)
	}
	// Report half the routes, then fail or start over.
	var all []routetable.KernelRoute
	if err := dump(func(kr *routetable.KernelRoute) error {
		c := *kr
		c.NextHops = slices.Clone(kr.NextHops)
		all = append(all, c)
		return nil
	}, func() { all = nil }); err != nil {
		return err
	}
	for i := range all[:len(all)/2] {
		if err := fn(&all[i]); err != nil {
			return err
		}
	}
	if f == failDumpError {
		return fmt.Errorf("injected: %w", syscall.EIO)
	}
	reset()
	for i := range all {
		if err := fn(&all[i]); err != nil {
			return err
		}
	}
	return nil
}

// takeFault returns the armed fault if it is one of kinds and not yet
// used. Called with r.mu held.
func (r *recorder) takeFault(kinds ...failure) failure {
	if r.faultHit || !slices.Contains(kinds, r.fault) {
		return ""
	}
	r.faultHit = true
	return r.fault
}

func (r *recorder) ApplyRoutes(ctx context.Context, ops []routetable.RouteOp) []error {
	r.mu.Lock()
	r.writes += len(ops)
	for _, op := range ops {
		r.log = append(r.log, fmt.Sprintf("%v %v", op.Kind, op.Route.Dst))
	}
	var injected error
	first := -1
	switch f := r.takeFault(failFirstWrite, failENODEV, failENETDOWN, failDeleteFailed); f {
	case failFirstWrite:
		injected, first = syscall.EIO, 0
	case failENODEV:
		injected, first = syscall.ENODEV, 0
	case failENETDOWN:
		injected, first = syscall.ENETDOWN, 0
	case failDeleteFailed:
		first = slices.IndexFunc(ops, func(op routetable.RouteOp) bool { return op.Kind == routetable.OpDelete })
		injected = syscall.EBUSY
		if first < 0 {
			r.faultHit = false // no delete in this batch: keep it armed
		}
	}
	r.mu.Unlock()
	if first < 0 {
		return r.k.ApplyRoutes(ctx, ops)
	}
	rest := slices.Concat(ops[:first], ops[first+1:])
	errs := r.k.ApplyRoutes(ctx, rest)
	errs = slices.Insert(errs, first, error(fmt.Errorf("injected: %w", injected)))
	return errs
}

func (r *recorder) Links(ctx context.Context) ([]routetable.Link, error) {
	r.mu.Lock()
	f := r.takeFault(failLinks)
	r.mu.Unlock()
	if f != "" {
		return nil, fmt.Errorf("injected: %w", syscall.EIO)
	}
	return r.k.Links(ctx)
}

func (r *recorder) Neighbors(ctx context.Context, fam routetable.Family) ([]routetable.Neighbor, error) {
	return r.k.Neighbors(ctx, fam)
}

func (r *recorder) SetNeighbor(ctx context.Context, n routetable.Neighbor) error {
	return r.k.SetNeighbor(ctx, n)
}

func (r *recorder) DeleteNeighbor(ctx context.Context, n routetable.Neighbor) error {
	return r.k.DeleteNeighbor(ctx, n)
}

func (r *recorder) DeleteConntrack(ctx context.Context, fam routetable.Family, addrs []netip.Addr) (int, error) {
	r.mu.Lock()
	f := r.takeFault(failConntrack)
	for _, a := range addrs {
		r.log = append(r.log, "conntrack "+a.String())
	}
	r.mu.Unlock()
	if f != "" {
		return 0, fmt.Errorf("injected: %w", syscall.EIO)
	}
	return r.k.DeleteConntrack(ctx, fam, addrs)
}

func (r *recorder) resetCounts() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes, r.dumps, r.rescans, r.log = 0, 0, 0, nil
}

func (r *recorder) counts() (writes, dumps int) {
	writes, dumps, _ = r.counts3()
	return writes, dumps
}

// counts3 is counts with the number of interface dumps.
func (r *recorder) counts3() (writes, dumps, rescans int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.dumps, r.rescans
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// converge applies until the Table reports success, as the dataplane loop
// does: after objects failed (dataplane.ErrPartial) it comes back when the
// Table asks (the fake clock moves on by RetryAfter); after a failure of
// the whole Table it queues a resync. Then it checks that the Table is
// stable: a resync right after writes nothing.
func (e *env) converge(t *testing.T, tbl *routetable.Table, f failure) {
	t.Helper()
	e.arm(f)
	defer e.disarm()
	ctx := context.Background()
	var err error
	for range 5 {
		var res dataplane.ApplyResult
		if res, err = tbl.Apply(ctx); err == nil {
			break
		}
		t.Logf("apply failed (retrying as the loop would): %v", err)
		if errors.Is(err, dataplane.ErrPartial) {
			e.clock.Advance(res.RetryAfter)
		} else {
			tbl.QueueResync()
		}
	}
	require.NoError(t, err, "no convergence")
	e.disarm()
	e.kernel.resetCounts()
	tbl.QueueResync()
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	writes, dumps := e.kernel.counts()
	assert.Zero(t, writes, "a resync right after convergence writes nothing: %v", e.kernel.events())
	assert.Equal(t, 1, dumps, "a resync is one dump")
}

// applyOnce applies without retry and returns the error.
func applyOnce(t *testing.T, tbl *routetable.Table) error {
	t.Helper()
	_, err := tbl.Apply(context.Background())
	return err
}

type scenario struct {
	name string
	run  func(t *testing.T, e *env, f failure)
}

// up tells tbl about every link of the env as the interface monitor would.
func (e *env) tell(t *testing.T, tbl *routetable.Table, name string, state routetable.IfaceState) {
	t.Helper()
	idx := 0
	if state != routetable.IfaceGone {
		idx = e.index(t, name)
	}
	tbl.OnIfaceStateChanged(name, idx, state)
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
