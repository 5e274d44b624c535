//go:build linux

package ifacemonitor

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/leakcheck"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeLink is a link of the fake kernel.
type fakeLink struct {
	index   int
	name    string
	adminUp bool
	carrier bool // with adminUp: IFF_RUNNING
	mtu     int
	kind    string // "veth", "bridge" or "device"
}

func (l fakeLink) netlink() netlink.Link {
	attrs := netlink.LinkAttrs{Index: l.index, Name: l.name, MTU: l.mtu}
	if l.adminUp {
		attrs.Flags |= net.FlagUp
		if l.carrier {
			attrs.Flags |= net.FlagRunning
		}
	}
	switch l.kind {
	case "veth":
		return &netlink.Veth{LinkAttrs: attrs}
	case "bridge":
		return &netlink.Bridge{LinkAttrs: attrs}
	}
	return &netlink.Device{LinkAttrs: attrs}
}

func (l fakeLink) up() bool { return l.adminUp && l.carrier }

// fakeSource is a scripted kernel: tests change its links, addresses and
// routes with or without sending the matching event (a lost event), send
// Resync notices, and make dumps fail.
type fakeSource struct {
	mu       sync.Mutex
	linkTab  map[int]fakeLink
	addrTab  map[int]map[netip.Prefix]struct{}
	routeTab map[RouteKey]netlink.Route
	failures map[string][]error // per kind ("links", "addrs", "routes"): errors for the next dumps
	lists    map[string]int
	in       chan nlutil.Event
	// cost, with clk, is how long each dump takes on the fake clock.
	cost time.Duration
	clk  *clock.Fake
}

func newFakeSource() *fakeSource {
	return &fakeSource{
		linkTab:  map[int]fakeLink{},
		addrTab:  map[int]map[netip.Prefix]struct{}{},
		routeTab: map[RouteKey]netlink.Route{},
		failures: map[string][]error{},
		lists:    map[string]int{},
		in:       make(chan nlutil.Event),
	}
}

func (f *fakeSource) subscribe(ctx context.Context) (<-chan nlutil.Event, error) {
	out := make(chan nlutil.Event)
	go f.forward(ctx, out)
	return out, nil
}

// forward passes the test's events on until ctx ends, then closes out.
func (f *fakeSource) forward(ctx context.Context, out chan<- nlutil.Event) {
	defer close(out)
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-f.in:
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (f *fakeSource) dump(kind string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clk != nil {
		f.clk.Advance(f.cost)
	}
	f.lists[kind]++
	if q := f.failures[kind]; len(q) > 0 {
		f.failures[kind] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fakeSource) linkList() []netlink.Link {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netlink.Link
	for _, idx := range slices.Sorted(maps.Keys(f.linkTab)) {
		out = append(out, f.linkTab[idx].netlink())
	}
	return out
}

func (f *fakeSource) links(context.Context) ([]netlink.Link, error) {
	if err := f.dump("links"); err != nil {
		return nil, err
	}
	return f.linkList(), nil
}

func (f *fakeSource) addrs(context.Context) ([]netlink.Addr, error) {
	if err := f.dump("addrs"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []netlink.Addr
	for idx, set := range f.addrTab {
		for p := range set {
			out = append(out, netlink.Addr{IPNet: ipNet(p), LinkIndex: idx})
		}
	}
	return out, nil
}

func (f *fakeSource) routes(context.Context) ([]netlink.Route, error) {
	if err := f.dump("routes"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.routeTab)), nil
}

func (f *fakeSource) failNext(kind string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[kind] = append(f.failures[kind], errs...)
}

func (f *fakeSource) listCount(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[kind]
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}

func linkEvent(l fakeLink, typ uint16) nlutil.Event {
	return nlutil.Event{Link: &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: typ}, Link: l.netlink()}}
}

func addrEvent(idx int, p netip.Prefix, add bool) nlutil.Event {
	return nlutil.Event{Addr: &netlink.AddrUpdate{LinkAddress: *ipNet(p), LinkIndex: idx, NewAddr: add}}
}

// harness runs a Monitor on a fakeSource with a fake clock and records the
// callbacks.
type harness struct {
	t    *testing.T
	src  *fakeSource
	clk  *clock.Fake
	mon  *Monitor
	rec  *recorder
	sent uint64 // link/addr/route events sent
	ctx  context.Context
	stop context.CancelFunc
}

// newHarness builds the monitor; opts' callbacks are replaced by the
// recorder's. The fake kernel starts empty; call start after filling it.
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	clk := clock.NewFake(epoch)
	if opts.Clock == nil {
		opts.Clock = clk
	}
	if opts.ResyncInterval == 0 {
		opts.ResyncInterval = -1 // tests that want it set it
	}
	rec := newRecorder()
	rec.hook(&opts)
	kinds := nlutil.Links | nlutil.Addrs
	if opts.WatchRoutes {
		kinds |= nlutil.Routes
	}
	mon, err := newMonitor(opts, kinds)
	require.NoError(t, err)
	src := newFakeSource()
	mon.src = src
	return &harness{t: t, src: src, clk: clk, mon: mon, rec: rec}
}

// start starts the monitor, sends the first Resync and waits for in-sync.
func (h *harness) start() {
	h.t.Helper()
	h.startNoSync()
	h.resync(nil)
	h.waitInSync()
}

// waitInSync waits until OnInSync has been called and has returned.
func (h *harness) waitInSync() {
	h.t.Helper()
	require.Eventually(h.t, h.rec.inSync, 10*time.Second, time.Millisecond, "OnInSync")
}

func (h *harness) startNoSync() {
	h.t.Helper()
	h.ctx, h.stop = context.WithCancel(context.Background())
	require.NoError(h.t, h.mon.Start(h.ctx))
	h.t.Cleanup(func() {
		h.stop()
		<-h.mon.Done()
		requireNoLeaks(h.t)
	})
}

func (h *harness) send(ev nlutil.Event) {
	h.t.Helper()
	if ev.Link != nil || ev.Addr != nil || ev.Route != nil {
		h.sent++
	}
	select {
	case h.src.in <- ev:
	case <-time.After(10 * time.Second):
		h.t.Fatalf("monitor did not take event %+v", ev)
	}
}

// resync sends a Resync for every watched kind and waits until the
// monitor has re-listed.
func (h *harness) resync(reason error) {
	h.t.Helper()
	before := h.mon.Stats().Relists
	h.send(nlutil.Event{Resync: &nlutil.Resync{Kinds: h.mon.kinds, Reason: reason}})
	h.waitStats("re-listed", func(s Stats) bool { return s.Relists > before })
}

// sync waits until the monitor has applied and reported every event sent.
func (h *harness) sync() {
	h.t.Helper()
	h.waitStats(fmt.Sprintf("%d events applied", h.sent), func(s Stats) bool { return s.Events >= h.sent })
}

func (h *harness) waitStats(what string, ok func(Stats) bool) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return ok(h.mon.Stats()) }, 10*time.Second, time.Millisecond, "waiting for: %s; stats %+v", what, h.mon.Stats())
}

// setLink changes a link of the fake kernel, sending the event if emit.
func (h *harness) setLink(l fakeLink, emit bool) {
	h.src.mu.Lock()
	h.src.linkTab[l.index] = l
	h.src.mu.Unlock()
	if emit {
		h.send(linkEvent(l, unix.RTM_NEWLINK))
	}
}

// delLink deletes a link and its addresses from the fake kernel.
func (h *harness) delLink(idx int, emit bool) {
	h.src.mu.Lock()
	l := h.src.linkTab[idx]
	delete(h.src.linkTab, idx)
	addrs := h.src.addrTab[idx]
	delete(h.src.addrTab, idx)
	h.src.mu.Unlock()
	if emit {
		for p := range addrs {
			h.send(addrEvent(idx, p, false))
		}
		h.send(linkEvent(l, unix.RTM_DELLINK))
	}
}

func (h *harness) addAddr(idx int, s string, emit bool) {
	p := netip.MustParsePrefix(s)
	h.src.mu.Lock()
	if h.src.addrTab[idx] == nil {
		h.src.addrTab[idx] = map[netip.Prefix]struct{}{}
	}
	h.src.addrTab[idx][p] = struct{}{}
	h.src.mu.Unlock()
	if emit {
		h.send(addrEvent(idx, p, true))
	}
}

func (h *harness) delAddr(idx int, s string, emit bool) {
	p := netip.MustParsePrefix(s)
	h.src.mu.Lock()
	delete(h.src.addrTab[idx], p)
	h.src.mu.Unlock()
	if emit {
		h.send(addrEvent(idx, p, false))
	}
}

// kernelView is what the fake kernel holds, as a View would show it.
func (h *harness) kernelView() map[string]Interface {
	h.src.mu.Lock()
	defer h.src.mu.Unlock()
	out := map[string]Interface{}
	for idx, l := range h.src.linkTab {
		if !h.mon.Matches(l.name) {
			continue
		}
		st := StateDown
		if l.up() {
			st = StateUp
		}
		var addrs []netip.Prefix
		for p := range h.src.addrTab[idx] {
			addrs = append(addrs, p)
		}
		SortPrefixes(addrs)
		out[l.name] = Interface{Name: l.name, Index: idx, State: st, MTU: l.mtu, Type: l.netlink().Type(), Addrs: addrs}
	}
	return out
}

// requireConverged checks that the recorder's view, the monitor's Snapshot
// and the fake kernel agree.
func (h *harness) requireConverged() {
	h.t.Helper()
	want := h.kernelView()
	assert.Equal(h.t, want, h.rec.view(), "consumer's view")
	assert.Equal(h.t, want, viewMap(h.mon.Snapshot()), "Snapshot")
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
	routes map[RouteKey]Route
	errs   []string
	synced bool // OnInSync has returned
}

func (r *recorder) inSync() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

func newRecorder() *recorder {
	return &recorder{ifaces: map[string]Interface{}, routes: map[RouteKey]Route{}}
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
	s := fmt.Sprintf("link %s #%d %s mtu=%d %s", u.Name, u.Index, u.State, u.MTU, u.Type)
	if u.OldName != "" {
		s += " from=" + u.OldName
	}
	return s
}

func addrsLine(name string, addrs []netip.Prefix) string {
	return fmt.Sprintf("addrs %s %v", name, addrs)
}

func (r *recorder) onLink(u LinkUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, linkLine(u))
	cur, had := r.ifaces[u.Name]
	if u.State == StateGone {
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
	cur.Name, cur.Index, cur.State, cur.MTU, cur.Type = u.Name, u.Index, u.State, u.MTU, u.Type
	r.ifaces[u.Name] = cur
}

func (r *recorder) onAddrs(name string, addrs []netip.Prefix) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, addrsLine(name, addrs))
	cur, ok := r.ifaces[name]
	if !ok {
		r.errs = append(r.errs, "addresses for unknown "+name)
		return
	}
	if !slices.IsSortedFunc(addrs, ComparePrefixes) {
		r.errs = append(r.errs, "unsorted addresses for "+name)
	}
	cur.Addrs = addrs
	r.ifaces[name] = cur
}

func (r *recorder) onRoute(u RouteUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sign := "+"
	if u.Gone {
		sign = "-"
		delete(r.routes, u.Route.Key())
	} else {
		r.routes[u.Route.Key()] = u.Route
	}
	r.lines = append(r.lines, fmt.Sprintf("route %s table=%d %s dev=%d", sign, u.Route.Table, u.Route.Dst, u.Route.LinkIndex))
}

// take returns the lines recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
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

func (r *recorder) routeView() map[RouteKey]Route {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.routes)
}

func (r *recorder) contractErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// requireNoLeaks checks that no goroutine of the monitor, the watcher, the
// netlink library or the fake source is left.
func requireNoLeaks(t *testing.T) {
	t.Helper()
	leakcheck.NoGoroutines(t, 10*time.Second, "ifacemonitor.(*run)", "ifacemonitor.(*fakeSource).forward", "nlutil.(*run)",
		"nlutil.forward", "vishvananda/netlink.")
}
