package ifacemonitor

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

var (
	epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	bg    = context.Background()
)

// barrierName is a link every harness creates and hides from the monitor:
// changing its MTU puts a known event at the end of the fake's queue, so a
// test can wait until the monitor has applied everything before it.
const barrierName = "np-barrier"

// testKernel is a kernelfake namespace whose event stream the test
// controls: pause holds the stream back (events queue in the fake, where
// Overflow drops them, as a socket's buffer does), inject adds events of
// the test's own, and each listing call can take cost on a fake clock.
// With scripted set, the stream is script, which the test fills (and which
// is closed when the subscription's context ends: nothing may be sent
// then), and addrs (if set) replaces the fake's address listing:
// benchmarks measure the monitor, not the fake.
type testKernel struct {
	*kernelfake.Namespace
	scripted bool
	addrs    atomic.Pointer[[2][]kernel.Addr] // by family: IPv4, IPv6

	pauseC, resumeC chan struct{}
	inject          chan kernel.Event

	costMu sync.Mutex
	cost   time.Duration
	clk    *clock.Fake

	mu        sync.Mutex
	forwarded uint64         // link, address and route events delivered
	barriers  map[int]uint64 // barrier MTU → forwarded once its event was delivered
	subscribe int            // Subscribe calls
	script    chan kernel.Event
}

func newTestKernel(ns *kernelfake.Namespace) *testKernel {
	return &testKernel{
		Namespace: ns,
		pauseC:    make(chan struct{}),
		resumeC:   make(chan struct{}),
		inject:    make(chan kernel.Event),
		barriers:  map[int]uint64{},
	}
}

// Subscribe forwards the fake's stream (or, scripted, the injected events
// alone, without barriers) through the test's gate.
func (k *testKernel) Subscribe(ctx context.Context, kinds kernel.EventKinds, opts ...kernel.SubscribeOptions) (<-chan kernel.Event, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.subscribe++
	if k.scripted {
		ch := make(chan kernel.Event, 4096)
		k.script = ch
		go func() {
			<-ctx.Done()
			close(ch)
		}()
		return ch, nil
	}
	in, err := k.Namespace.Subscribe(ctx, kinds, opts...)
	if err != nil {
		return nil, err
	}
	out := make(chan kernel.Event)
	go k.forward(ctx, in, out)
	return out, nil
}

// stream returns the scripted stream once Subscribe has made it.
func (k *testKernel) stream() chan<- kernel.Event {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.script
}

func (k *testKernel) forward(ctx context.Context, in <-chan kernel.Event, out chan<- kernel.Event) {
	defer close(out)
	defer func() {
		for range in { // closed once the fake's stream has stopped
		}
	}()
	for {
		var ev kernel.Event
		select {
		case <-ctx.Done():
			return
		case e, ok := <-in:
			if !ok {
				return
			}
			ev = e
		case ev = <-k.inject:
		case <-k.pauseC:
			select {
			case <-k.resumeC:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- ev:
		case <-ctx.Done():
			return
		}
		if ev.Link != nil || ev.Addr != nil || ev.Route != nil {
			k.mu.Lock()
			k.forwarded++
			if ev.Link != nil && ev.Link.Link.Name == barrierName {
				k.barriers[ev.Link.Link.MTU] = k.forwarded
			}
			k.mu.Unlock()
		}
	}
}

// pause returns once the stream is held back: nothing more is delivered
// until resume.
func (k *testKernel) pause(t *testing.T) {
	t.Helper()
	select {
	case k.pauseC <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not pause")
	}
}

func (k *testKernel) resume(t *testing.T) {
	t.Helper()
	select {
	case k.resumeC <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not resume")
	}
}

// send injects ev into the stream.
func (k *testKernel) send(t *testing.T, ev kernel.Event) {
	t.Helper()
	select {
	case k.inject <- ev:
	case <-time.After(10 * time.Second):
		t.Fatalf("the stream did not take %+v", ev)
	}
}

func (k *testKernel) setCost(clk *clock.Fake, cost time.Duration) {
	k.costMu.Lock()
	defer k.costMu.Unlock()
	k.clk, k.cost = clk, cost
}

func (k *testKernel) spend() {
	k.costMu.Lock()
	defer k.costMu.Unlock()
	if k.clk != nil {
		k.clk.Advance(k.cost)
	}
}

func (k *testKernel) Links(ctx context.Context) ([]kernel.Link, error) {
	k.spend()
	return k.Namespace.Links(ctx)
}

func (k *testKernel) Addrs(ctx context.Context, family kernel.Family) ([]kernel.Addr, error) {
	k.spend()
	if as := k.addrs.Load(); as != nil {
		if family == kernel.IPv4 {
			return as[0], nil
		}
		return as[1], nil
	}
	return k.Namespace.Addrs(ctx, family)
}

func (k *testKernel) DumpRoutes(ctx context.Context, family kernel.Family, table uint32, fn func(*kernel.Route) error, reset func()) error {
	k.spend()
	return k.Namespace.DumpRoutes(ctx, family, table, fn, reset)
}

// newFake returns a fake namespace set up as the tests want it: no
// automatic IPv6 link-local addresses, and IPv6 addresses kept while a
// link is down, so the addresses a test sees are the ones it added.
func newFake(t testing.TB) *kernelfake.Namespace {
	t.Helper()
	ns := kernelfake.New(kernelfake.Options{})
	a := ns.Admin()
	for _, kv := range [][2]string{
		{"net.ipv6.conf.default.addr_gen_mode", "1"},
		{"net.ipv6.conf.all.keep_addr_on_down", "1"},
		{"net.ipv6.conf.default.keep_addr_on_down", "1"},
	} {
		require.NoError(t, a.SetSysctl(bg, kv[0], kv[1]))
	}
	return ns
}

// harness runs a Monitor on a testKernel with a fake clock and records the
// callbacks.
type harness struct {
	t       *testing.T
	ns      *kernelfake.Namespace // the fake, for inspection
	admin   *kernelfake.Namespace // its admin view, for changes
	peer    *kernelfake.Namespace // a second namespace, for veth peers
	k       *testKernel
	clk     *clock.Fake
	mon     *Monitor
	rec     *recorder
	barrier int // index of the barrier link
	seq     int // last barrier MTU
	stop    context.CancelFunc
	errc    chan error
}

// newHarness builds the monitor; opts' callbacks are replaced by the
// recorder's, and the barrier link is excluded. Fill the fake through
// h.admin, then call start.
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	ns := newFake(t)
	h := &harness{t: t, ns: ns, admin: ns.Admin(), peer: ns.NewNamespace(kernelfake.Options{Name: "peer"}),
		k: newTestKernel(ns), clk: clock.NewFake(epoch), rec: newRecorder(), seq: 1000}
	br, err := h.admin.AddLink(bg, kernel.Link{Name: barrierName, Kind: kernel.KindBridge})
	require.NoError(t, err)
	h.barrier = br.Index
	if opts.Clock == nil {
		opts.Clock = h.clk
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1 // tests that want it set it
	}
	opts.Exclude = append(slices.Clone(opts.Exclude), "^"+barrierName+"$")
	opts.Kernel = h.k
	h.rec.hook(&opts)
	h.mon, err = New(opts)
	require.NoError(t, err)
	return h
}

// start runs the monitor and waits for in-sync.
func (h *harness) start() {
	h.t.Helper()
	h.startNoSync()
	h.waitInSync()
}

func (h *harness) startNoSync() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(bg)
	h.stop = cancel
	h.errc = make(chan error, 1)
	go func() { h.errc <- h.mon.Run(ctx) }()
	h.t.Cleanup(func() {
		h.stop()
		select {
		case err := <-h.errc:
			assert.NoError(h.t, err, "Run's result")
		case <-time.After(10 * time.Second):
			h.t.Error("Run did not return")
		}
		requireNoLeaks(h.t)
	})
}

// waitInSync waits until OnInSync has been called and has returned.
func (h *harness) waitInSync() {
	h.t.Helper()
	require.Eventually(h.t, h.rec.inSync, 10*time.Second, time.Millisecond, "OnInSync")
}

// sync waits until the monitor has applied and reported every event the
// fake has queued so far: it changes the barrier's MTU and waits for the
// monitor to have applied that event.
func (h *harness) sync() {
	h.t.Helper()
	h.seq++
	require.NoError(h.t, h.admin.SetLinkMTU(bg, h.barrier, h.seq))
	var n uint64
	require.Eventually(h.t, func() bool {
		h.k.mu.Lock()
		defer h.k.mu.Unlock()
		var ok bool
		n, ok = h.k.barriers[h.seq]
		return ok
	}, 10*time.Second, time.Millisecond, "barrier %d delivered", h.seq)
	h.waitStats(fmt.Sprintf("%d events applied or dropped as stale", n), func(s Stats) bool { return s.Events+s.StaleEvents >= n })
}

// lose makes the changes of do while the stream is held back, then drops
// their events with an overflow, and waits until the monitor has re-listed
// and reported.
func (h *harness) lose(do func()) {
	h.t.Helper()
	before := h.mon.Stats()
	h.k.pause(h.t)
	do()
	h.ns.Overflow()
	h.k.resume(h.t)
	h.waitStats("re-listed after the overflow", func(s Stats) bool {
		return s.Overflows > before.Overflows && s.Relists > before.Relists
	})
	h.sync()
}

func (h *harness) waitStats(what string, ok func(Stats) bool) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return ok(h.mon.Stats()) }, 10*time.Second, time.Millisecond,
		"waiting for: %s; stats %+v", what, h.mon.Stats())
}

// addVeth creates name, a veth whose peer (called name+"p") is in h.peer so
// that the monitor does not see it; name runs once it and its peer are
// both up.
func (h *harness) addVeth(name string, mtu int, up, peerUp bool) int {
	h.t.Helper()
	l, err := h.admin.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindVeth, MTU: mtu,
		Veth: &kernel.Veth{PeerName: name + "p", PeerNamespaceFD: h.peer.FD()}})
	require.NoError(h.t, err)
	if peerUp {
		h.setPeerUp(name, true)
	}
	if up {
		require.NoError(h.t, h.admin.SetLinkUp(bg, l.Index, true))
	}
	return l.Index
}

// setPeerUp sets the peer of the veth name up or down: the carrier of name.
func (h *harness) setPeerUp(name string, up bool) {
	h.t.Helper()
	p, ok := h.peer.Link(name + "p")
	require.True(h.t, ok, "peer of %s", name)
	require.NoError(h.t, h.peer.Admin().SetLinkUp(bg, p.Index, up))
}

func (h *harness) index(name string) int {
	h.t.Helper()
	l, ok := h.ns.Link(name)
	require.True(h.t, ok, "link %s", name)
	return l.Index
}

func (h *harness) setUp(name string, up bool) {
	h.t.Helper()
	require.NoError(h.t, h.admin.SetLinkUp(bg, h.index(name), up))
}

func (h *harness) setMTU(name string, mtu int) {
	h.t.Helper()
	require.NoError(h.t, h.admin.SetLinkMTU(bg, h.index(name), mtu))
}

func (h *harness) delLink(name string) {
	h.t.Helper()
	require.NoError(h.t, h.admin.DeleteLink(bg, h.index(name)))
}

func (h *harness) addAddr(name, p string) {
	h.t.Helper()
	require.NoError(h.t, h.admin.AddAddr(bg, kernel.Addr{LinkIndex: h.index(name), Prefix: netip.MustParsePrefix(p)}))
}

func (h *harness) delAddr(name, p string) {
	h.t.Helper()
	require.NoError(h.t, h.admin.DeleteAddr(bg, kernel.Addr{LinkIndex: h.index(name), Prefix: netip.MustParsePrefix(p)}))
}

// kernelView is what the fake holds, as the monitor should report it.
func kernelView(t testing.TB, k Kernel, m *Monitor) map[string]Interface {
	t.Helper()
	links, err := k.Links(bg)
	require.NoError(t, err)
	out := map[string]Interface{}
	byIdx := map[int]string{}
	for _, l := range links {
		if !m.Matches(l.Name) {
			continue
		}
		out[l.Name] = Interface{Name: l.Name, Index: l.Index, State: l.State(), MTU: l.MTU, Kind: l.Kind, Encap: l.Encap}
		byIdx[l.Index] = l.Name
	}
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		as, err := k.Addrs(bg, fam)
		require.NoError(t, err)
		for _, a := range as {
			if n, ok := byIdx[a.LinkIndex]; ok {
				i := out[n]
				i.Addrs = append(i.Addrs, a.Prefix)
				out[n] = i
			}
		}
	}
	for n, i := range out {
		slices.SortFunc(i.Addrs, comparePrefixes)
		out[n] = i
	}
	return out
}

// kernelRoutes lists every route of both families as the monitor should
// report them.
func kernelRoutes(t testing.TB, k Kernel) map[routeKey]kernel.Route {
	t.Helper()
	out := map[routeKey]kernel.Route{}
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		var rs []kernel.Route
		require.NoError(t, k.DumpRoutes(bg, fam, 0, func(r *kernel.Route) error { rs = append(rs, *r); return nil }, func() { rs = nil }))
		for i := range rs {
			if r, ok := normRoute(&rs[i]); ok {
				out[keyOf(&r)] = r
			}
		}
	}
	return out
}

func snapshotRoutes(m *Monitor) map[routeKey]kernel.Route {
	out := map[routeKey]kernel.Route{}
	for _, r := range m.Snapshot().Routes {
		out[keyOf(&r)] = r
	}
	return out
}

// requireConverged checks that the recorder's view, the monitor's Snapshot
// and the fake agree.
func (h *harness) requireConverged() {
	h.t.Helper()
	want := kernelView(h.t, h.ns.Admin(), h.mon)
	assert.Equal(h.t, want, h.rec.view(), "consumer's view")
	assert.Equal(h.t, want, viewMap(h.mon.Snapshot()), "Snapshot")
	assert.Empty(h.t, h.rec.contractErrors())
}

func (h *harness) requireRoutesConverged() {
	h.t.Helper()
	want := kernelRoutes(h.t, h.ns.Admin())
	assert.Equal(h.t, want, h.rec.routeView(), "consumer's routes")
	assert.Equal(h.t, want, snapshotRoutes(h.mon), "Snapshot routes")
}

func viewMap(v View) map[string]Interface {
	out := map[string]Interface{}
	for _, i := range v.Interfaces {
		out[i.Name] = i
	}
	return out
}

// recorder is a consumer: it logs every callback as a line and keeps its
// own view of the interfaces (by name) and routes, checking the contract
// as it goes (never two interfaces under one name, a rename's old name is
// gone first, addresses only for known interfaces).
type recorder struct {
	mu     sync.Mutex
	lines  []string
	ifaces map[string]Interface
	routes map[routeKey]kernel.Route
	errs   []string
	synced bool // OnInSync has returned
}

func newRecorder() *recorder {
	return &recorder{ifaces: map[string]Interface{}, routes: map[routeKey]kernel.Route{}}
}

func (r *recorder) inSync() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

func (r *recorder) hook(opts *Options) {
	opts.OnLinkState = r.onLink
	opts.OnAddrs = r.onAddrs
	opts.OnRoute = r.onRoute
	opts.OnInSync = func() {
		r.add("in-sync")
		r.mu.Lock()
		r.synced = true
		r.mu.Unlock()
	}
}

func (r *recorder) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
}

func linkLine(u LinkUpdate) string {
	s := fmt.Sprintf("link %s #%d %s mtu=%d %s", u.Name, u.Index, u.State, u.MTU, u.Kind)
	if u.OldName != "" {
		s += " from=" + u.OldName
	}
	return s
}

func (r *recorder) onLink(u LinkUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, linkLine(u))
	cur, had := r.ifaces[u.Name]
	if u.State == kernel.LinkGone {
		if !had || cur.Index != u.Index {
			r.errs = append(r.errs, fmt.Sprintf("gone for unknown %s #%d", u.Name, u.Index))
		}
		delete(r.ifaces, u.Name)
		return
	}
	if had && cur.Index != u.Index {
		r.errs = append(r.errs, fmt.Sprintf("%s #%d reported while #%d holds the name", u.Name, u.Index, cur.Index))
	}
	if u.OldName != "" {
		if old, still := r.ifaces[u.OldName]; still && old.Index == u.Index {
			r.errs = append(r.errs, fmt.Sprintf("rename %s -> %s before %s was gone", u.OldName, u.Name, u.OldName))
		}
	}
	for n, i := range r.ifaces {
		if i.Index == u.Index && n != u.Name {
			r.errs = append(r.errs, fmt.Sprintf("#%d reported as %s while still known as %s", u.Index, u.Name, n))
		}
	}
	cur.Name, cur.Index, cur.State, cur.MTU, cur.Kind, cur.Encap = u.Name, u.Index, u.State, u.MTU, u.Kind, u.Encap
	r.ifaces[u.Name] = cur
}

func (r *recorder) onAddrs(name string, addrs []netip.Prefix) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprintf("addrs %s %v", name, addrs))
	cur, ok := r.ifaces[name]
	if !ok {
		r.errs = append(r.errs, "addresses for unknown "+name)
		return
	}
	if !slices.IsSortedFunc(addrs, comparePrefixes) {
		r.errs = append(r.errs, "unsorted addresses for "+name)
	}
	cur.Addrs = addrs
	r.ifaces[name] = cur
}

func routeLine(u RouteUpdate) string {
	sign := "+"
	if u.Gone {
		sign = "-"
	}
	s := fmt.Sprintf("route %s table=%d %s dev=%d", sign, u.Route.Table, u.Route.Dst, u.Route.OIF)
	if u.Route.Gateway.IsValid() {
		s += " via " + u.Route.Gateway.String()
	}
	if n := len(u.Route.NextHops); n > 0 {
		s += fmt.Sprintf(" hops=%d", n)
	}
	return s
}

func (r *recorder) onRoute(u RouteUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.Gone {
		delete(r.routes, keyOf(&u.Route))
	} else {
		r.routes[keyOf(&u.Route)] = u.Route
	}
	r.lines = append(r.lines, routeLine(u))
}

// take returns the lines recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

// takeMatching returns the lines recorded since the last take that contain
// sub, and drops the others.
func (r *recorder) takeMatching(sub string) []string {
	var out []string
	for _, l := range r.take() {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func (r *recorder) view() map[string]Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Interface, len(r.ifaces))
	for n, i := range r.ifaces {
		i.Addrs = slices.Clone(i.Addrs)
		out[n] = i
	}
	return out
}

func (r *recorder) addrCount(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ifaces[name].Addrs)
}

func (r *recorder) routeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.routes)
}

func (r *recorder) routeView() map[routeKey]kernel.Route {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.routes)
}

func (r *recorder) contractErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// requireNoLeaks checks that no goroutine of the monitor, the test's
// stream, the fake or the kernel's subscription is left.
func requireNoLeaks(t testing.TB) {
	t.Helper()
	leakcheck.NoGoroutines(t, 10*time.Second, "ifacemonitor.(*Monitor).Run", "ifacemonitor.(*testKernel).forward",
		"kernelfake.(*Namespace).forward", "kernel.(*Namespace).Subscribe", "nlutil.(*run)", "nlutil.forward", "vishvananda/netlink.")
}
