package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
)

// The scenario suite: every scenario runs against a fake namespace
// (kernelfake; once per failure kind and family) and against the real
// kernel in a fresh namespace (per family and table, with and without the
// faults that hit route writes and dumps), both reached the one way, as a
// kernel.Kernel.

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

// env is where a scenario runs: a fake namespace (kernelfake) or a fresh
// network namespace of the kernel, both reached through kernel.Kernel.
type env struct {
	fam   routetable.Family
	table uint32
	// k is the namespace as an administrator or another agent reaches it:
	// its calls are neither counted nor failed.
	k kernel.Kernel
	// kernel is the Table's Kernel (the namespace), behind a recorder.
	kernel *recorder
	// fake is set when the namespace is a kernelfake.Namespace.
	fake bool
	// nsWrites is the namespace's own count of writes (every caller's
	// but the admin view's), for a fake namespace; 0 on the kernel.
	nsWrites func() int
	// arm injects a fault of the given kind into the next calls.
	arm func(f failure)
	// disarm removes any fault left.
	disarm func()
	// waitRunning waits until the kernel reports the link's carrier as
	// on (the kernel sets it asynchronously after a veth pair comes up).
	waitRunning func(t *testing.T, name string, on bool)
	// renameLink renames an interface, which the kernel does only while
	// it is down, and brings it up again.
	renameLink func(t *testing.T, name, newName string)
	// flows and addFlow inspect and create conntrack entries (the fake's,
	// or the kernel's through ctnetlink).
	addFlow func(t *testing.T, src, dst netip.Addr)
	flows   func(t *testing.T) []string
	clock   *clock.Fake
	// ipCmd runs iproute2's ip in the namespace, as another process would
	// (nil for a fake namespace).
	ipCmd func(t *testing.T, args ...string)
	// links counts the links created, peers names each link's veth peer
	// by index.
	links int
	peers map[int]string
}

// newEnv returns an env on k, whose admin view is admin, with the
// sysctls every scenario wants: no duplicate address detection (addresses
// are usable at once) and IPv6 addresses kept on down, as hosts with
// static addresses do (else a link going down takes the gateways'
// subnets with it).
func newEnv(t *testing.T, fam routetable.Family, table uint32, k, admin kernel.Kernel) *env {
	t.Helper()
	for _, key := range []string{"net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"} {
		require.NoError(t, admin.SetSysctl(context.Background(), key, "0"))
	}
	require.NoError(t, admin.SetSysctl(context.Background(), "net.ipv6.conf.all.keep_addr_on_down", "1"))
	return &env{fam: fam, table: table, k: admin, kernel: &recorder{k: k}, clock: clock.NewFake(t0), peers: map[int]string{},
		nsWrites: func() int { return 0 }}
}

// addLink creates an interface (a veth pair), up, with the link's address
// (linkAddr) so gateways and sources on it are valid; returns its index.
func (e *env) addLink(t *testing.T, name string) int {
	t.Helper()
	ctx := context.Background()
	e.links++
	peer := fmt.Sprintf("peer%d", e.links)
	l, err := e.k.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: peer}})
	require.NoError(t, err)
	require.NoError(t, e.k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: e.pfx(linkAddr(e.links))}))
	require.NoError(t, e.k.SetLinkUp(ctx, e.index(t, peer), true))
	require.NoError(t, e.k.SetLinkUp(ctx, l.Index, true))
	e.waitRunning(t, name, true)
	e.waitLocal(t, e.pfx(linkAddr(e.links)).Addr())
	e.peers[l.Index] = peer
	return l.Index
}

// waitLocal waits until the address a is usable as a source: its local
// route is in table local. (An IPv6 address is tentative until duplicate
// address detection has run, which even without DAD takes the kernel a
// moment after the link comes up; the fake does it at once.)
func (e *env) waitLocal(t *testing.T, a netip.Addr) {
	t.Helper()
	host := netip.PrefixFrom(a, a.BitLen())
	require.Eventually(t, func() bool {
		found := false
		err := e.k.DumpRoutes(context.Background(), e.fam, kernel.TableLocal, func(r *kernel.Route) error {
			found = found || (r.Dst == host && r.Type == kernel.RTNLocal)
			return nil
		}, func() { found = false })
		return err == nil && found
	}, 5*time.Second, time.Millisecond, "%v never became usable", a)
}

// setUp brings an interface up (and waits for its carrier) or down.
func (e *env) setUp(t *testing.T, name string, up bool) {
	t.Helper()
	require.NoError(t, e.k.SetLinkUp(context.Background(), e.index(t, name), up))
	if up {
		e.waitRunning(t, name, true)
	}
}

// setCarrier gives an interface (which stays up) its carrier or takes it
// away, through its veth peer, and waits until the kernel shows it.
func (e *env) setCarrier(t *testing.T, name string, on bool) {
	t.Helper()
	require.NoError(t, e.k.SetLinkUp(context.Background(), e.index(t, e.peers[e.index(t, name)]), on))
	e.waitRunning(t, name, on)
}

// deleteLink deletes an interface (and its peer).
func (e *env) deleteLink(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, e.k.DeleteLink(context.Background(), e.index(t, name)))
}

// addRoute adds a route as another agent would.
func (e *env) addRoute(t *testing.T, r kernel.Route) { t.Helper(); e.writeRoute(t, kernel.OpAdd, r) }

// deleteRoute deletes a route as an administrator would.
func (e *env) deleteRoute(t *testing.T, r kernel.Route) {
	t.Helper()
	e.writeRoute(t, kernel.OpDelete, r)
}

func (e *env) writeRoute(t *testing.T, kind kernel.OpKind, r kernel.Route) {
	t.Helper()
	errs := e.k.ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kind, Route: r}})
	require.NoError(t, errs[0], "%v %v", kind, r.Dst)
}

// neighbors lists the neighbour entries of the family.
func (e *env) neighbors(t *testing.T) []kernel.Neighbor {
	t.Helper()
	ns, err := e.k.Neighbors(context.Background(), e.fam, 0)
	require.NoError(t, err)
	return ns
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
	err := e.k.DumpRoutes(context.Background(), e.fam, e.table, func(r *kernel.Route) error {
		out = append(out, formatRoute(r, names))
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
	links, err := e.k.Links(context.Background())
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
func formatRoute(r *kernel.Route, names map[int]string) string {
	var b strings.Builder
	b.WriteString(r.Dst.String())
	if !(r.Priority == 0 || (r.Family == routetable.IPv6 && r.Priority == 1024)) {
		fmt.Fprintf(&b, " metric %d", r.Priority)
	}
	typ := map[uint8]string{kernel.RTNUnicast: "unicast", kernel.RTNLocal: "local",
		kernel.RTNBlackhole: "blackhole", kernel.RTNUnreachable: "unreachable",
		kernel.RTNProhibit: "prohibit", kernel.RTNThrow: "throw", kernel.RTNBroadcast: "broadcast",
		kernel.RTNAnycast: "anycast", kernel.RTNMulticast: "multicast"}[r.Type]
	b.WriteString(" " + typ)
	if r.Gateway.IsValid() {
		b.WriteString(" via " + r.Gateway.String())
	}
	if r.OIF != 0 && (r.Type == kernel.RTNUnicast || r.Type == kernel.RTNLocal) {
		b.WriteString(" dev " + names[r.OIF])
	}
	if r.PrefSrc.IsValid() {
		b.WriteString(" src " + r.PrefSrc.String())
	}
	if r.MTU != 0 {
		fmt.Fprintf(&b, " mtu %d", r.MTU)
	}
	if r.Flags&kernel.FlagOnlink != 0 {
		b.WriteString(" onlink")
	}
	hops := slices.Clone(r.NextHops)
	slices.SortFunc(hops, func(a, b kernel.NextHop) int { return a.Gateway.Compare(b.Gateway) })
	for _, h := range hops {
		fmt.Fprintf(&b, " nexthop via %v dev %s weight %d", h.Gateway, names[h.OIF], int(h.Weight)+1)
		if h.Flags&kernel.FlagOnlink != 0 {
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

	mu      sync.Mutex
	writes  int
	dumps   int
	rescans int // interface dumps
	// nbrWrites and ctDeletes count neighbour operations and conntrack
	// deletion calls: with writes, every write the Table makes.
	nbrWrites, ctDeletes int
	log                  []string
	fault                failure // injected by the recorder itself (kernel env)
	faultHit             bool
}

func (r *recorder) DumpRoutes(ctx context.Context, fam kernel.Family, table uint32, fn func(*kernel.Route) error, reset func()) error {
	r.mu.Lock()
	r.dumps++
	r.mu.Unlock()
	return r.dump(func(fn func(*kernel.Route) error, reset func()) error {
		return r.k.DumpRoutes(ctx, fam, table, fn, reset)
	}, fn, reset)
}

func (r *recorder) DumpInterfaceRoutes(ctx context.Context, fam kernel.Family, table uint32, oif int, fn func(*kernel.Route) error, reset func()) error {
	r.mu.Lock()
	r.rescans++
	r.mu.Unlock()
	return r.dump(func(fn func(*kernel.Route) error, reset func()) error {
		return r.k.DumpInterfaceRoutes(ctx, fam, table, oif, fn, reset)
	}, fn, reset)
}

// dump runs one dump of the kernel, with the armed dump fault if any.
func (r *recorder) dump(dump func(fn func(*kernel.Route) error, reset func()) error, fn func(*kernel.Route) error, reset func()) error {
	r.mu.Lock()
	f := r.takeFault(failInterrupted, failDumpError)
	r.mu.Unlock()
	if f == "" {
		return dump(fn, reset)
	}
	// Report half the routes, then fail or start over.
	var all []kernel.Route
	if err := dump(func(kr *kernel.Route) error {
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

func (r *recorder) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
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
		first = slices.IndexFunc(ops, func(op kernel.RouteOp) bool { return op.Kind == kernel.OpDelete })
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

func (r *recorder) Links(ctx context.Context) ([]kernel.Link, error) {
	r.mu.Lock()
	f := r.takeFault(failLinks)
	r.mu.Unlock()
	if f != "" {
		return nil, fmt.Errorf("injected: %w", syscall.EIO)
	}
	return r.k.Links(ctx)
}

func (r *recorder) LinkByName(ctx context.Context, name string) (kernel.Link, error) {
	return r.k.LinkByName(ctx, name)
}

func (r *recorder) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	return r.k.AddLink(ctx, l)
}

func (r *recorder) DeleteLink(ctx context.Context, index int) error {
	return r.k.DeleteLink(ctx, index)
}

func (r *recorder) SetLinkUp(ctx context.Context, index int, up bool) error {
	return r.k.SetLinkUp(ctx, index, up)
}

func (r *recorder) SetLinkMTU(ctx context.Context, index, mtu int) error {
	return r.k.SetLinkMTU(ctx, index, mtu)
}

func (r *recorder) SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error {
	return r.k.SetLinkMAC(ctx, index, mac)
}

func (r *recorder) Neighbors(ctx context.Context, fam kernel.Family, linkIndex int) ([]kernel.Neighbor, error) {
	return r.k.Neighbors(ctx, fam, linkIndex)
}

func (r *recorder) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	r.mu.Lock()
	r.nbrWrites += len(ops)
	r.mu.Unlock()
	return r.k.ApplyNeighbors(ctx, ops)
}

func (r *recorder) DeleteConntrack(ctx context.Context, fam kernel.Family, addrs []netip.Addr) (int, error) {
	r.mu.Lock()
	f := r.takeFault(failConntrack)
	r.ctDeletes++
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
	r.writes, r.dumps, r.rescans, r.nbrWrites, r.ctDeletes, r.log = 0, 0, 0, 0, 0, nil
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

// allWrites counts every write: route and neighbour operations and
// conntrack deletions.
func (r *recorder) allWrites() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes + r.nbrWrites + r.ctDeletes
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

// tell tells tbl about a link of the env as the interface monitor would.
func (e *env) tell(t *testing.T, tbl *routetable.Table, name string, state kernel.LinkState) {
	t.Helper()
	idx := 0
	if state != kernel.LinkGone {
		idx = e.index(t, name)
	}
	tbl.OnIfaceStateChanged(name, idx, state)
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
