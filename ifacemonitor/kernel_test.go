//go:build linux

package ifacemonitor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel tests: each runs in a fresh network namespace from kerneltest and
// touches nothing outside it.

// kernelRig is a Monitor running on a test namespace with a recorder.
type kernelRig struct {
	t   *testing.T
	ns  *kerneltest.NS
	h   *netlink.Handle // the monitor's, for listing
	w   *netlink.Handle // the test's own, for changes
	mon *Monitor
	rec *recorder
}

// startKernelRig starts a monitor on a fresh namespace; wrap, if not nil,
// may wrap the recorder's callbacks.
func startKernelRig(t *testing.T, opts Options, wrap func(*Options)) *kernelRig {
	t.Helper()
	ns := kerneltest.NewNS(t)
	// No automatic IPv6 link-local addresses on new links, and IPv6
	// addresses kept while a link is down, so the addresses a test sees are
	// the ones it added.
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.default.addr_gen_mode", "1"))
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.keep_addr_on_down", "1"))
	rec := newRecorder()
	rec.hook(&opts)
	if wrap != nil {
		wrap(&opts)
	}
	opts.Handle, opts.Namespace = ns.Handle(), ns.NsHandle()
	w, err := netlink.NewHandleAt(ns.NsHandle())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	mon, err := New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, mon.Start(ctx))
	t.Cleanup(func() {
		cancel()
		select {
		case <-mon.Done():
		case <-time.After(10 * time.Second):
			t.Error("monitor did not stop")
		}
		requireNoLeaks(t)
	})
	require.Eventually(t, rec.inSync, 10*time.Second, time.Millisecond, "OnInSync")
	assert.True(t, mon.Stats().InSync)
	return &kernelRig{t: t, ns: ns, h: ns.Handle(), w: w, mon: mon, rec: rec}
}

// kernelIfaces lists the namespace as the monitor should report it.
func (k *kernelRig) kernelIfaces() map[string]Interface {
	k.t.Helper()
	ctx := context.Background()
	links, err := nlutil.LinkList(ctx, k.h)
	require.NoError(k.t, err)
	addrs, err := nlutil.AddrList(ctx, k.h, nil, netlink.FAMILY_ALL)
	require.NoError(k.t, err)
	out := map[string]Interface{}
	byIdx := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		if !k.mon.Matches(a.Name) {
			continue
		}
		st := StateDown
		if a.Flags&net.FlagUp != 0 && a.Flags&net.FlagRunning != 0 {
			st = StateUp
		}
		out[a.Name] = Interface{Name: a.Name, Index: a.Index, State: st, MTU: a.MTU, Type: l.Type()}
		byIdx[a.Index] = a.Name
	}
	for _, a := range addrs {
		name, ok := byIdx[a.LinkIndex]
		if !ok {
			continue
		}
		p, ok := netip.AddrFromSlice(a.IP)
		require.True(k.t, ok)
		ones, bits := a.Mask.Size()
		if bits == 32 {
			p = p.Unmap()
		}
		i := out[name]
		i.Addrs = append(i.Addrs, netip.PrefixFrom(p, ones))
		out[name] = i
	}
	for n, i := range out {
		SortPrefixes(i.Addrs)
		out[n] = i
	}
	return out
}

// kernelRoutes lists every route of both families.
func (k *kernelRig) kernelRoutes() map[RouteKey]Route {
	k.t.Helper()
	out := map[RouteKey]Route{}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nlutil.RouteListFiltered(context.Background(), k.h, family, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		require.NoError(k.t, err)
		for _, r := range rs {
			if rt, ok := routeFrom(r); ok {
				out[rt.Key()] = rt
			}
		}
	}
	return out
}

// requireConverged waits until the consumer's view and the Snapshot equal
// the kernel's (and the routes too, with routes), and returns how long that
// took.
func (k *kernelRig) requireConverged(routes bool) time.Duration {
	k.t.Helper()
	return k.requireConvergedWhen(routes, nil)
}

// requireConvergedWhen is requireConverged once ready (if not nil) says
// that the kernel has reached the state a step expects: carrier changes,
// for one, reach the link flags asynchronously.
func (k *kernelRig) requireConvergedWhen(routes bool, ready func() bool) time.Duration {
	k.t.Helper()
	start := time.Now()
	var want map[string]Interface
	ok := assert.Eventually(k.t, func() bool {
		if ready != nil && !ready() {
			return false
		}
		want = k.kernelIfaces()
		if !assert.ObjectsAreEqual(want, k.rec.view()) || !assert.ObjectsAreEqual(want, viewMap(k.mon.Snapshot())) {
			return false
		}
		if routes {
			wantR := k.kernelRoutes()
			got := map[RouteKey]Route{}
			for _, r := range k.mon.Snapshot().Routes {
				got[r.Key()] = r
			}
			return assert.ObjectsAreEqual(wantR, k.rec.routeView()) && assert.ObjectsAreEqual(wantR, got)
		}
		return true
	}, 60*time.Second, 2*time.Millisecond)
	took := time.Since(start)
	if !ok {
		assert.Equal(k.t, want, k.rec.view(), "consumer's view")
		assert.Equal(k.t, want, viewMap(k.mon.Snapshot()), "Snapshot")
		k.t.FailNow()
	}
	assert.Empty(k.t, k.rec.contractErrors())
	return took
}

// waitConverged lists the quiet kernel once and returns how long the
// consumer's view took to equal it, polling cheaply (counts first) so that
// the measurement does not slow the monitor down.
func (k *kernelRig) waitConverged(name string, routes bool) time.Duration {
	k.t.Helper()
	start := time.Now()
	want := k.kernelIfaces()
	var wantR map[RouteKey]Route
	if routes {
		wantR = k.kernelRoutes()
	}
	for time.Since(start) < 60*time.Second {
		if k.rec.addrCount(name) == len(want[name].Addrs) && (!routes || k.rec.routeCount() == len(wantR)) &&
			assert.ObjectsAreEqual(want, k.rec.view()) && (!routes || assert.ObjectsAreEqual(wantR, k.rec.routeView())) {
			return time.Since(start)
		}
		time.Sleep(time.Millisecond)
	}
	k.t.Fatalf("not converged after %v", time.Since(start))
	return 0
}

func (k *kernelRig) link(name string) netlink.Link {
	k.t.Helper()
	l, err := k.w.LinkByName(name)
	require.NoError(k.t, err)
	return l
}

func addr(t *testing.T, s string) *netlink.Addr {
	t.Helper()
	p := netip.MustParsePrefix(s)
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

// indexOf returns the position of the first line that starts with prefix,
// or -1.
func indexOf(lines []string, prefix string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func TestKernelLifecycle(t *testing.T) {
	k := startKernelRig(t, Options{Exclude: []string{"^np-ignored"}}, nil)
	lines := k.rec.take()
	assert.Equal(t, "in-sync", lines[len(lines)-1])
	assert.Contains(t, lines, "link lo #1 up mtu=65536 device")
	assert.Contains(t, lines, "addrs lo [127.0.0.1/8 ::1/128]")
	k.requireConverged(false)

	running := func(want bool, names ...string) func() bool {
		return func() bool {
			for _, n := range names {
				if (k.link(n).Attrs().Flags&net.FlagRunning != 0) != want {
					return false
				}
			}
			return true
		}
	}
	steps := []struct {
		name  string
		do    func() error
		ready func() bool          // the kernel has reached the step's state
		check func(lines []string) // on the lines recorded by the step
	}{
		{"veth add", func() error {
			return k.w.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "np-a", MTU: 1500}, PeerName: "np-b"})
		}, nil, func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d down mtu=1500 veth", k.link("np-a").Attrs().Index))
		}},
		{"one end up: no carrier yet", func() error { return k.w.LinkSetUp(k.link("np-a")) }, nil, func(lines []string) {
			assert.Equal(t, -1, indexOf(lines, "link np-a"), "still down: %v", lines)
		}},
		{"both ends up", func() error { return k.w.LinkSetUp(k.link("np-b")) }, running(true, "np-a", "np-b"), func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d up mtu=1500 veth", k.link("np-a").Attrs().Index))
		}},
		{"IPv4 and IPv6 addresses", func() error {
			if err := k.w.AddrAdd(k.link("np-a"), addr(t, "10.10.0.1/24")); err != nil {
				return err
			}
			if err := k.w.AddrAdd(k.link("np-a"), addr(t, "10.10.0.2/32")); err != nil {
				return err
			}
			return k.w.AddrAdd(k.link("np-a"), addr(t, "fd00:10::1/64"))
		}, nil, func(lines []string) {
			assert.Contains(t, lines, "addrs np-a [10.10.0.1/24 10.10.0.2/32 fd00:10::1/64]")
		}},
		{"address delete", func() error { return k.w.AddrDel(k.link("np-a"), addr(t, "10.10.0.1/24")) }, nil, func(lines []string) {
			assert.Equal(t, []string{"addrs np-a [10.10.0.2/32 fd00:10::1/64]"}, lines)
		}},
		{"MTU change", func() error { return k.w.LinkSetMTU(k.link("np-a"), 1400) }, nil, func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d up mtu=1400 veth", k.link("np-a").Attrs().Index))
		}},
		{"peer down: carrier lost", func() error { return k.w.LinkSetDown(k.link("np-b")) }, running(false, "np-a", "np-b"), func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d down mtu=1400 veth", k.link("np-a").Attrs().Index))
		}},
		{"rename", func() error {
			if err := k.w.LinkSetDown(k.link("np-a")); err != nil {
				return err
			}
			return k.w.LinkSetName(k.link("np-a"), "np-c")
		}, nil, func(lines []string) {
			idx := k.link("np-c").Attrs().Index
			gone, renamed := indexOf(lines, fmt.Sprintf("link np-a #%d gone", idx)), indexOf(lines, fmt.Sprintf("link np-c #%d down mtu=1400 veth from=np-a", idx))
			require.True(t, gone >= 0 && renamed > gone, "gone, then renamed: %v", lines)
			assert.Less(t, indexOf(lines, "addrs np-a []"), gone, "old name's addresses cleared first")
			require.Greater(t, len(lines), renamed+1, "addresses follow the rename: %v", lines)
			assert.Equal(t, "addrs np-c [10.10.0.2/32 fd00:10::1/64]", lines[renamed+1])
		}},
		{"excluded link", func() error {
			return k.w.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "np-ignored0"}})
		}, nil, func(lines []string) {
			assert.Equal(t, -1, indexOf(lines, "link np-ignored0"))
		}},
	}
	for _, s := range steps {
		k.rec.take()
		require.NoError(t, s.do(), s.name)
		k.requireConvergedWhen(false, s.ready)
		s.check(k.rec.take())
	}

	t.Run("delete and recreate the same name", func(t *testing.T) {
		old := k.link("np-c").Attrs().Index
		require.NoError(t, k.w.LinkDel(k.link("np-c")))
		require.NoError(t, k.w.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "np-c"}, PeerName: "np-d"}))
		k.requireConverged(false)
		lines := k.rec.take()
		cur := k.link("np-c").Attrs().Index
		require.NotEqual(t, old, cur)
		gone, created := indexOf(lines, fmt.Sprintf("link np-c #%d gone", old)), indexOf(lines, fmt.Sprintf("link np-c #%d down", cur))
		assert.True(t, gone >= 0 && created > gone, "old index gone, then the new one: %v", lines)
		assert.Contains(t, lines, "addrs np-c []")
	})
}

func TestKernelRoutes(t *testing.T) {
	k := startKernelRig(t, Options{WatchRoutes: true}, nil)
	k.requireConverged(true)
	require.NoError(t, k.w.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "np-r0"}, PeerName: "np-r1"}))
	for _, n := range []string{"np-r0", "np-r1"} {
		require.NoError(t, k.w.LinkSetUp(k.link(n)))
	}
	r0, r1 := k.link("np-r0").Attrs().Index, k.link("np-r1").Attrs().Index
	require.NoError(t, k.w.AddrAdd(k.link("np-r0"), addr(t, "10.20.0.1/24")))
	require.NoError(t, k.w.AddrAdd(k.link("np-r0"), addr(t, "fd00:20::1/64")))
	k.requireConverged(true)

	route := func(dst string, dev int) *netlink.Route {
		p := netip.MustParsePrefix(dst)
		return &netlink.Route{Table: 100, Dst: ipNet(p), LinkIndex: dev, Scope: netlink.SCOPE_LINK}
	}
	k.rec.take()
	require.NoError(t, k.w.RouteAdd(route("10.30.0.0/16", r0)))
	require.NoError(t, k.w.RouteAdd(route("fd00:30::/64", r0)))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route + table=100 10.30.0.0/16 dev=%d", r0))

	require.NoError(t, k.w.RouteReplace(route("10.30.0.0/16", r1)))
	k.requireConverged(true)
	lines := k.rec.take()
	assert.Contains(t, lines, fmt.Sprintf("route - table=100 10.30.0.0/16 dev=%d", r0), "replace moves the route")
	assert.Contains(t, lines, fmt.Sprintf("route + table=100 10.30.0.0/16 dev=%d", r1))

	require.NoError(t, k.w.RouteDel(route("fd00:30::/64", r0)))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route - table=100 fd00:30::/64 dev=%d", r0))

	// Admin down drops the IPv4 routes through a link without a
	// notification; the monitor re-lists the routes when a link goes down.
	relists := k.mon.Stats().Relists
	require.NoError(t, k.w.LinkSetDown(k.link("np-r1")))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route - table=100 10.30.0.0/16 dev=%d", r1))
	// The view may converge first through a deletion event; the re-list
	// can then still be waiting out its spacing after the previous one.
	assert.Eventually(t, func() bool { return k.mon.Stats().Relists > relists }, 10*time.Second, 2*time.Millisecond,
		"a link going down triggers a route re-list")
	require.NoError(t, k.w.LinkSetDown(k.link("np-r0")))
	k.requireConverged(true)
	require.NoError(t, k.w.LinkDel(k.link("np-r0")))
	k.requireConverged(true)
}

// A tiny receive buffer and a burst of tens of thousands of changes: the
// kernel drops events, and the monitor's view still ends equal to the
// kernel's. The time from the end of the burst to convergence is logged.
func TestKernelOverflowConverges(t *testing.T) {
	const n = 20000
	tests := []struct {
		name   string
		routes bool
		add    func(h *netlink.Handle, link netlink.Link, i int) error
		del    func(h *netlink.Handle, link netlink.Link, i int) error
	}{
		{
			name: "addresses",
			add: func(h *netlink.Handle, l netlink.Link, i int) error {
				return h.AddrAdd(l, &netlink.Addr{IPNet: burstNet(i)})
			},
			del: func(h *netlink.Handle, l netlink.Link, i int) error {
				return h.AddrDel(l, &netlink.Addr{IPNet: burstNet(i)})
			},
		},
		{
			name:   "routes",
			routes: true,
			add: func(h *netlink.Handle, l netlink.Link, i int) error {
				return h.RouteAdd(&netlink.Route{Table: 100, Dst: burstNet(i), LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK})
			},
			del: func(h *netlink.Handle, l netlink.Link, i int) error {
				return h.RouteDel(&netlink.Route{Table: 100, Dst: burstNet(i), LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK})
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A consumer that stalls for the start of the burst makes the
			// overflow certain, however fast the monitor is.
			var stall atomic.Pointer[chan struct{}]
			wait := func() {
				if c := stall.Load(); c != nil {
					<-*c
				}
			}
			k := startKernelRig(t, Options{
				WatchRoutes:       tc.routes,
				ReceiveBufferSize: 4096, // forced: a few KiB
				ResyncInterval:    -1,   // recovery must come from the overflow's Resync
			}, func(o *Options) {
				onAddrs, onRoute := o.OnAddrs, o.OnRoute
				o.OnAddrs = func(name string, addrs []netip.Prefix) { wait(); onAddrs(name, addrs) }
				o.OnRoute = func(u RouteUpdate) { wait(); onRoute(u) }
			})
			require.NoError(t, k.w.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "np-burst"}}))
			br := k.link("np-burst")
			require.NoError(t, k.w.LinkSetUp(br))
			k.requireConverged(tc.routes)

			gate := make(chan struct{})
			stall.Store(&gate)
			start := time.Now()
			for i := range n {
				require.NoError(t, tc.add(k.w, br, i))
				if i == n/10 {
					close(gate)
				}
			}
			for i := 0; i < n; i += 4 {
				require.NoError(t, tc.del(k.w, br, i))
			}
			burst := time.Since(start)
			took := k.waitConverged(br.Attrs().Name, tc.routes)
			k.requireConverged(tc.routes)
			// Stats are published after the callbacks that made the view
			// converge: wait for the re-list to show.
			var s Stats
			assert.Eventually(t, func() bool { s = k.mon.Stats(); return s.Overflows > 0 && s.Relists > 1 }, 10*time.Second, 2*time.Millisecond)
			t.Logf("%d adds + %d deletes in %v; converged %v after the burst; stats %+v", n, n/4, burst.Round(time.Millisecond), took.Round(time.Millisecond), s)
			assert.NotZero(t, s.Overflows, "the burst overflowed the receive buffer")
			assert.Greater(t, s.Relists, uint64(1), "re-listed after the overflow")

			// Still listening after the storm.
			require.NoError(t, k.w.AddrAdd(br, addr(t, "fd00:99::1/64")))
			k.requireConverged(tc.routes)
		})
	}
}

// burstNet is the i-th /32 of 10.128.0.0/9.
func burstNet(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, byte(128+i>>16), byte(i>>8), byte(i)).To4(), Mask: net.CIDRMask(32, 32)}
}
