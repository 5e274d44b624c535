//go:build linux

package ifacemonitor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// Kernel tests: each runs in a fresh network namespace from kerneltest and
// touches nothing outside it. The monitor gets its own kernel.Namespace;
// the test changes the namespace through another one (and through
// kerneltest's netlink handle for what package kernel does not do, such as
// renames and bridge ports).

// kernelRig is a Monitor running on a test namespace with a recorder.
type kernelRig struct {
	t    *testing.T
	kns  *kerneltest.NS
	mine *kernel.Namespace // the monitor's
	w    *kernel.Namespace // the test's, for changes and listings
	mon  *Monitor
	rec  *recorder
	errc chan error
	stop context.CancelFunc
}

// startKernelRig starts a monitor on a fresh namespace; wrap, if not nil,
// may wrap the recorder's callbacks.
func startKernelRig(t *testing.T, opts Options, wrap func(*Options)) *kernelRig {
	t.Helper()
	kns := kerneltest.NewNS(t)
	// No automatic IPv6 link-local addresses on new links, no duplicate
	// address detection, and IPv6 addresses kept while a link is down, so
	// the addresses a test sees are the ones it added.
	for _, kv := range [][2]string{
		{"net.ipv6.conf.default.addr_gen_mode", "1"},
		{"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.all.accept_dad", "0"},
		{"net.ipv6.conf.all.keep_addr_on_down", "1"},
		{"net.ipv6.conf.default.keep_addr_on_down", "1"},
	} {
		require.NoError(t, kns.SetSysctl(kv[0], kv[1]))
	}
	mine, err := kernel.Open(kns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = mine.Close() })
	w, err := kernel.OpenFD(int(kns.NsHandle()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })

	rec := newRecorder()
	rec.hook(&opts)
	if wrap != nil {
		wrap(&opts)
	}
	opts.Kernel = mine
	mon, err := New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	k := &kernelRig{t: t, kns: kns, mine: mine, w: w, mon: mon, rec: rec, errc: make(chan error, 1), stop: cancel}
	go func() { k.errc <- mon.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-k.errc:
			assert.NoError(t, err, "Run's result")
		case <-time.After(30 * time.Second):
			t.Error("monitor did not stop")
		}
		requireNoLeaks(t)
	})
	require.Eventually(t, rec.inSync, 30*time.Second, time.Millisecond, "OnInSync")
	assert.True(t, mon.Stats().InSync)
	return k
}

// requireConverged waits until the consumer's view and the Snapshot equal
// the kernel's (and the routes too, with routes).
func (k *kernelRig) requireConverged(routes bool) {
	k.t.Helper()
	k.requireConvergedWhen(routes, nil)
}

// requireConvergedWhen is requireConverged once ready (if not nil) says
// that the kernel has reached the state a step expects: carrier changes,
// for one, reach the link flags asynchronously.
func (k *kernelRig) requireConvergedWhen(routes bool, ready func() bool) {
	k.t.Helper()
	var want map[string]Interface
	ok := assert.Eventually(k.t, func() bool {
		if ready != nil && !ready() {
			return false
		}
		want = kernelView(k.t, k.w, k.mon)
		if !assert.ObjectsAreEqual(want, k.rec.view()) || !assert.ObjectsAreEqual(want, viewMap(k.mon.Snapshot())) {
			return false
		}
		if routes {
			wantR := kernelRoutes(k.t, k.w)
			return assert.ObjectsAreEqual(wantR, k.rec.routeView()) && assert.ObjectsAreEqual(wantR, snapshotRoutes(k.mon))
		}
		return true
	}, 60*time.Second, 2*time.Millisecond)
	if !ok {
		assert.Equal(k.t, want, k.rec.view(), "consumer's view")
		assert.Equal(k.t, want, viewMap(k.mon.Snapshot()), "Snapshot")
		if routes {
			assert.Equal(k.t, kernelRoutes(k.t, k.w), k.rec.routeView(), "consumer's routes")
		}
		k.t.FailNow()
	}
	assert.Empty(k.t, k.rec.contractErrors())
}

// waitConverged lists the quiet kernel once and waits until the consumer's
// view equals it, polling cheaply (counts first) so that the polling does
// not slow the monitor down; it returns how long that took, for the log.
func (k *kernelRig) waitConverged(name string, routes bool) time.Duration {
	k.t.Helper()
	start := time.Now()
	want := kernelView(k.t, k.w, k.mon)
	var wantR map[routeKey]kernel.Route
	if routes {
		wantR = kernelRoutes(k.t, k.w)
	}
	for time.Since(start) < 120*time.Second {
		if k.rec.addrCount(name) == len(want[name].Addrs) && (!routes || k.rec.routeCount() == len(wantR)) &&
			assert.ObjectsAreEqual(want, k.rec.view()) && (!routes || assert.ObjectsAreEqual(wantR, k.rec.routeView())) {
			return time.Since(start)
		}
		time.Sleep(2 * time.Millisecond)
	}
	k.t.Fatalf("not converged after %v", time.Since(start))
	return 0
}

func (k *kernelRig) link(name string) kernel.Link {
	k.t.Helper()
	l, err := k.w.LinkByName(bg, name)
	require.NoError(k.t, err)
	return l
}

func (k *kernelRig) addVeth(name, peer string) kernel.Link {
	k.t.Helper()
	l, err := k.w.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: peer}})
	require.NoError(k.t, err)
	return l
}

func (k *kernelRig) addr(name, p string) kernel.Addr {
	return kernel.Addr{LinkIndex: k.link(name).Index, Prefix: netip.MustParsePrefix(p)}
}

// nl is kerneltest's netlink handle, for renames and bridge ports.
func (k *kernelRig) nl(name string) netlink.Link {
	k.t.Helper()
	l, err := k.kns.Handle().LinkByName(name)
	require.NoError(k.t, err)
	return l
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
				if k.link(n).Running != want {
					return false
				}
			}
			return true
		}
	}
	ctx := bg
	steps := []struct {
		name  string
		do    func() error
		ready func() bool          // the kernel has reached the step's state
		check func(lines []string) // on the lines recorded by the step
	}{
		{"veth add", func() error { k.addVeth("np-a", "np-b"); return nil }, nil, func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d down mtu=1500 veth", k.link("np-a").Index))
		}},
		{"one end up: no carrier yet", func() error { return k.w.SetLinkUp(ctx, k.link("np-a").Index, true) }, nil, func(lines []string) {
			assert.Equal(t, -1, indexOf(lines, "link np-a"), "still down: %v", lines)
		}},
		{"both ends up", func() error { return k.w.SetLinkUp(ctx, k.link("np-b").Index, true) }, running(true, "np-a", "np-b"), func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d up mtu=1500 veth", k.link("np-a").Index))
		}},
		{"IPv4 and IPv6 addresses", func() error {
			for _, p := range []string{"10.10.0.1/24", "10.10.0.2/32", "fd00:10::1/64"} {
				if err := k.w.AddAddr(ctx, k.addr("np-a", p)); err != nil {
					return err
				}
			}
			return nil
		}, nil, func(lines []string) {
			assert.Contains(t, lines, "addrs np-a [10.10.0.1/24 10.10.0.2/32 fd00:10::1/64]")
		}},
		{"address delete", func() error { return k.w.DeleteAddr(ctx, k.addr("np-a", "10.10.0.1/24")) }, nil, func(lines []string) {
			assert.Equal(t, []string{"addrs np-a [10.10.0.2/32 fd00:10::1/64]"}, lines)
		}},
		{"MTU change", func() error { return k.w.SetLinkMTU(ctx, k.link("np-a").Index, 1400) }, nil, func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d up mtu=1400 veth", k.link("np-a").Index))
		}},
		{"peer down: carrier lost", func() error { return k.w.SetLinkUp(ctx, k.link("np-b").Index, false) }, running(false, "np-a", "np-b"), func(lines []string) {
			assert.Contains(t, lines, fmt.Sprintf("link np-a #%d down mtu=1400 veth", k.link("np-a").Index))
		}},
		{"rename", func() error {
			if err := k.w.SetLinkUp(ctx, k.link("np-a").Index, false); err != nil {
				return err
			}
			return k.kns.Handle().LinkSetName(k.nl("np-a"), "np-c")
		}, nil, func(lines []string) {
			idx := k.link("np-c").Index
			gone, renamed := indexOf(lines, fmt.Sprintf("link np-a #%d gone", idx)), indexOf(lines, fmt.Sprintf("link np-c #%d down mtu=1400 veth from=np-a", idx))
			require.True(t, gone >= 0 && renamed > gone, "gone, then renamed: %v", lines)
			assert.Less(t, indexOf(lines, "addrs np-a []"), gone, "old name's addresses cleared first")
			require.Greater(t, len(lines), renamed+1, "addresses follow the rename: %v", lines)
			assert.Equal(t, "addrs np-c [10.10.0.2/32 fd00:10::1/64]", lines[renamed+1])
		}},
		{"excluded link", func() error {
			_, err := k.w.AddLink(ctx, kernel.Link{Name: "np-ignored0", Kind: kernel.KindBridge})
			return err
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
		old := k.link("np-c").Index
		require.NoError(t, k.w.DeleteLink(ctx, old))
		k.addVeth("np-c", "np-d")
		k.requireConverged(false)
		lines := k.rec.take()
		cur := k.link("np-c").Index
		require.NotEqual(t, old, cur)
		gone, created := indexOf(lines, fmt.Sprintf("link np-c #%d gone", old)), indexOf(lines, fmt.Sprintf("link np-c #%d down", cur))
		assert.True(t, gone >= 0 && created > gone, "old index gone, then the new one: %v", lines)
		assert.Contains(t, lines, "addrs np-c []")
	})
	assert.Zero(t, k.mon.Stats().Overflows)
}

// A port that leaves its bridge makes the kernel send an RTM_DELLINK of
// the AF_BRIDGE family, which is about the port, not the link: the link
// is never reported gone. (The subscription leaves those messages out:
// nlutil's TestKernelWatchLeavesOutBridgePortMessages shows it; this is
// the same end to end.)
func TestKernelBridgePortIsNotDeleted(t *testing.T) {
	k := startKernelRig(t, Options{}, nil)
	br, err := k.w.AddLink(bg, kernel.Link{Name: "np-br", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.NoError(t, k.w.SetLinkUp(bg, br.Index, true))
	port := k.addVeth("np-port", "np-peer")
	require.NoError(t, k.w.SetLinkUp(bg, port.Index, true))
	k.requireConverged(false)
	k.rec.take()

	h := k.kns.Handle()
	require.NoError(t, h.LinkSetMaster(k.nl("np-port"), k.nl("np-br")))
	require.Eventually(t, func() bool { return k.link("np-port").MasterIndex == br.Index }, 10*time.Second, time.Millisecond)
	require.NoError(t, h.LinkSetNoMaster(k.nl("np-port")))
	require.Eventually(t, func() bool { return k.link("np-port").MasterIndex == 0 }, 10*time.Second, time.Millisecond)
	// Events of one socket arrive in order: once the marker is reported,
	// the port's events have been applied.
	_, err = k.w.AddLink(bg, kernel.Link{Name: "np-marker", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := k.mon.Snapshot().Interface("np-marker"); return ok }, 30*time.Second, time.Millisecond)
	k.requireConverged(false)
	lines := k.rec.take()
	assert.Equal(t, -1, indexOf(lines, fmt.Sprintf("link np-port #%d gone", port.Index)), "%v", lines)
}

func TestKernelRoutes(t *testing.T) {
	k := startKernelRig(t, Options{WatchRoutes: true}, nil)
	k.requireConverged(true)
	k.addVeth("np-r0", "np-r1")
	for _, n := range []string{"np-r0", "np-r1"} {
		require.NoError(t, k.w.SetLinkUp(bg, k.link(n).Index, true))
	}
	r0, r1 := k.link("np-r0").Index, k.link("np-r1").Index
	require.NoError(t, k.w.AddAddr(bg, k.addr("np-r0", "10.20.0.1/24")))
	require.NoError(t, k.w.AddAddr(bg, k.addr("np-r0", "fd00:20::1/64")))
	require.NoError(t, k.w.AddAddr(bg, k.addr("np-r1", "10.21.0.1/24")))
	k.requireConverged(true)

	apply := func(ops ...kernel.RouteOp) {
		t.Helper()
		for i, err := range k.w.ApplyRoutes(bg, ops) {
			require.NoError(t, err, "op %d", i)
		}
	}
	k.rec.take()
	apply(replace(route4(100, "10.30.0.0/16", r0)), replace(route6(100, "fd00:30::/64", r0)))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route + table=100 10.30.0.0/16 dev=%d", r0))

	// The kernel announces the new route only; the monitor re-lists.
	apply(replace(route4(100, "10.30.0.0/16", r1)))
	k.requireConverged(true)
	lines := k.rec.take()
	assert.Contains(t, lines, fmt.Sprintf("route - table=100 10.30.0.0/16 dev=%d", r0), "replace moves the route")
	assert.Contains(t, lines, fmt.Sprintf("route + table=100 10.30.0.0/16 dev=%d", r1))

	apply(del(route6(100, "fd00:30::/64", r0)))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route - table=100 fd00:30::/64 dev=%d", r0))

	// Admin down drops the IPv4 routes through a link without a
	// notification; the monitor re-lists the routes when a link goes down.
	relists := k.mon.Stats().Relists
	require.NoError(t, k.w.SetLinkUp(bg, r1, false))
	k.requireConverged(true)
	assert.Contains(t, k.rec.take(), fmt.Sprintf("route - table=100 10.30.0.0/16 dev=%d", r1))
	// The view may converge first through a deletion event; the re-list
	// can then still be waiting out its spacing after the previous one.
	assert.Eventually(t, func() bool { return k.mon.Stats().Relists > relists }, 10*time.Second, 2*time.Millisecond,
		"a link going down triggers a route re-list")

	// An IPv6 multipath route, one of whose links goes away.
	require.NoError(t, k.w.SetLinkUp(bg, r1, true))
	require.NoError(t, k.w.AddAddr(bg, k.addr("np-r1", "fd00:21::1/64")))
	mp := route6(100, "fd00:99::/64", 0)
	mp.NextHops = []kernel.NextHop{{OIF: r0, Gateway: netip.MustParseAddr("fd00:20::2")}, {OIF: r1, Gateway: netip.MustParseAddr("fd00:21::2")}}
	apply(replace(mp))
	k.requireConverged(true)
	require.NoError(t, k.w.SetLinkUp(bg, r0, false))
	k.requireConverged(true)
	require.NoError(t, k.w.DeleteLink(bg, r0))
	k.requireConverged(true)
}

// netlinkDrops sums the Drops column of the namespace's NETLINK_ROUTE
// sockets (/proc/net/netlink as a thread inside it sees it): how many
// messages the kernel dropped because a receive buffer was full.
func netlinkDrops(t *testing.T, ns *kernel.Namespace) uint64 {
	t.Helper()
	var data []byte
	require.NoError(t, ns.Do(func() error {
		var err error
		data, err = os.ReadFile("/proc/thread-self/net/netlink")
		return err
	}))
	var total uint64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan() // the header: sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[1] != "0" {
			continue
		}
		n, err := strconv.ParseUint(f[8], 10, 64)
		require.NoError(t, err)
		total += n
	}
	return total
}

// A consumer that stalls while tens of thousands of changes are made: the
// kernel drops events (the test makes changes until it has), and the
// monitor's view still ends equal to the kernel's. The time from the end
// of the burst to convergence is logged.
func TestKernelOverflowConverges(t *testing.T) {
	const step, limit = 500, 400000
	tests := []struct {
		name   string
		routes bool
		change func(k *kernelRig, link int, from, to int, add bool)
	}{
		{
			name: "addresses",
			change: func(k *kernelRig, link int, from, to int, add bool) {
				for i := from; i < to; i++ {
					a := kernel.Addr{LinkIndex: link, Prefix: burstNet(i)}
					if add {
						require.NoError(k.t, k.w.AddAddr(bg, a))
					} else if i%4 == 0 {
						require.NoError(k.t, k.w.DeleteAddr(bg, a))
					}
				}
			},
		},
		{
			name:   "routes",
			routes: true,
			change: func(k *kernelRig, link int, from, to int, add bool) {
				var ops []kernel.RouteOp
				for i := from; i < to; i++ {
					r := route4(100, burstNet(i).String(), link)
					if add {
						ops = append(ops, replace(r))
					} else if i%4 == 0 {
						ops = append(ops, del(r))
					}
				}
				for i, err := range k.w.ApplyRoutes(bg, ops) {
					require.NoError(k.t, err, "op %d", i)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A consumer that stalls through the burst makes the overflow
			// certain, however fast the monitor is.
			var stall atomic.Pointer[chan struct{}]
			wait := func() {
				if c := stall.Load(); c != nil {
					<-*c
				}
			}
			k := startKernelRig(t, Options{
				WatchRoutes:    tc.routes,
				ResyncInterval: -1, // recovery must come from the overflow's Resync
			}, func(o *Options) {
				onAddrs, onRoute := o.OnAddrs, o.OnRoute
				o.OnAddrs = func(name string, addrs []netip.Prefix) { wait(); onAddrs(name, addrs) }
				o.OnRoute = func(u RouteUpdate) { wait(); onRoute(u) }
			})
			br, err := k.w.AddLink(bg, kernel.Link{Name: "np-burst", Kind: kernel.KindBridge})
			require.NoError(t, err)
			require.NoError(t, k.w.SetLinkUp(bg, br.Index, true))
			k.requireConverged(tc.routes)

			gate := make(chan struct{})
			stall.Store(&gate)
			released := false
			release := func() {
				if !released {
					released = true
					close(gate)
				}
			}
			t.Cleanup(release)
			start := time.Now()
			drops0 := netlinkDrops(t, k.w)
			n := 0
			for n < limit && netlinkDrops(t, k.w) == drops0 {
				tc.change(k, br.Index, n, n+step, true)
				n += step
			}
			require.Greater(t, netlinkDrops(t, k.w), drops0, "no overflow after %d changes", n)
			tc.change(k, br.Index, 0, n, false)
			burst := time.Since(start)
			release()
			took := k.waitConverged(br.Name, tc.routes)
			k.requireConverged(tc.routes)
			// Stats are published after the callbacks that made the view
			// converge: wait for the re-list to show.
			var s Stats
			assert.Eventually(t, func() bool { s = k.mon.Stats(); return s.Overflows > 0 && s.Relists > 1 }, 10*time.Second, 2*time.Millisecond)
			t.Logf("%d adds + %d deletes in %v; converged %v after the burst; stats %+v", n, n/4, burst.Round(time.Millisecond), took.Round(time.Millisecond), s)
			assert.NotZero(t, s.Overflows, "the burst overflowed the receive buffer")
			assert.Greater(t, s.Relists, uint64(1), "re-listed after the overflow")

			// Still listening after the storm.
			require.NoError(t, k.w.AddAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: netip.MustParsePrefix("fd00:99::1/64")}))
			k.requireConverged(tc.routes)
		})
	}
}

// burstNet is the i-th /32 of 10.128.0.0/9.
func burstNet(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>16), byte(i >> 8), byte(i)}), 32)
}

// A random history of link and address changes, renames included, on the
// real kernel: the consumer's view ends equal to the kernel's, and the name
// contract holds throughout.
func TestKernelRandomHistory(t *testing.T) {
	k := startKernelRig(t, Options{Exclude: []string{"^np-hidden"}}, nil)
	rnd := rand.New(rand.NewPCG(7, 42))
	names := []string{"np-a", "np-b", "np-c", "np-d", "np-hidden0", "np-hidden1"}
	exists := func(name string) bool { _, err := k.w.LinkByName(bg, name); return err == nil }
	peer := 0
	for range 200 {
		n := names[rnd.IntN(len(names))]
		if !exists(n) {
			if rnd.IntN(2) == 0 {
				peer++
				k.addVeth(n, fmt.Sprintf("np-p%d", peer))
			} else {
				_, err := k.w.AddLink(bg, kernel.Link{Name: n, Kind: kernel.KindBridge})
				require.NoError(t, err)
			}
			continue
		}
		idx := k.link(n).Index
		switch rnd.IntN(6) {
		case 0:
			require.NoError(t, k.w.DeleteLink(bg, idx))
		case 1:
			if to := names[rnd.IntN(len(names))]; !exists(to) {
				require.NoError(t, k.w.SetLinkUp(bg, idx, false))
				require.NoError(t, k.kns.Handle().LinkSetName(k.nl(n), to))
			}
		case 2:
			require.NoError(t, k.w.SetLinkUp(bg, idx, rnd.IntN(2) == 0))
		case 3:
			require.NoError(t, k.w.SetLinkMTU(bg, idx, 1400+rnd.IntN(3)*100))
		default:
			p := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.%d/24", idx%256, 1+rnd.IntN(3)))
			a := kernel.Addr{LinkIndex: idx, Prefix: p}
			if err := k.w.AddAddr(bg, a); err != nil {
				require.ErrorIs(t, err, kernel.ErrExists)
				require.NoError(t, k.w.DeleteAddr(bg, a))
			}
		}
	}
	k.requireConverged(false)
}

// Closing the namespace under a running monitor ends its stream: Run
// returns an error wrapping ErrSubscribe.
func TestKernelNamespaceClosed(t *testing.T) {
	kns := kerneltest.NewNS(t)
	ns, err := kernel.Open(kns.Path())
	require.NoError(t, err)
	inSync := make(chan struct{})
	m, err := New(Options{Kernel: ns, OnInSync: func() { close(inSync) }})
	require.NoError(t, err)
	errc := make(chan error, 1)
	go func() { errc <- m.Run(bg) }()
	select {
	case <-inSync:
	case err := <-errc:
		t.Fatalf("Run returned before the first listing: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not in sync")
	}
	require.NoError(t, ns.Close())
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, ErrSubscribe)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the namespace was closed")
	}
	requireNoLeaks(t)
}

// Issue 20 on the real kernel: a small receive buffer (the option lowered
// so that a burst really overflows it) and a consumer that stalls while
// routes are added through br-b, br-b goes down (its IPv4 routes go
// silently) and addresses come and go. After the overflow the view equals
// the kernel's (links, addresses, the 10 routes through br-a) without a
// periodic re-list; the time from the end of the burst to the correct view
// is logged.
func TestKernelBacklogAfterOverflowConverges(t *testing.T) {
	const step, limit = 200, 100000
	var stall atomic.Pointer[chan struct{}]
	wait := func() {
		if c := stall.Load(); c != nil {
			<-*c
		}
	}
	k := startKernelRig(t, Options{
		WatchRoutes:       true,
		ResyncInterval:    -1, // recovery must come from the overflow's Resync
		ReceiveBufferSize: 16 << 10,
	}, func(o *Options) {
		onAddrs, onRoute := o.OnAddrs, o.OnRoute
		o.OnAddrs = func(name string, addrs []netip.Prefix) { wait(); onAddrs(name, addrs) }
		o.OnRoute = func(u RouteUpdate) { wait(); onRoute(u) }
	})
	var brs []int
	for i, name := range []string{"np-a", "np-b"} {
		br, err := k.w.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindBridge})
		require.NoError(t, err)
		require.NoError(t, k.w.SetLinkUp(bg, br.Index, true))
		require.NoError(t, k.w.AddAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 1}), 24)}))
		brs = append(brs, br.Index)
	}
	var ops []kernel.RouteOp
	for i := range 10 {
		ops = append(ops, replace(route4(100, fmt.Sprintf("10.1.%d.0/24", i), brs[0])))
	}
	for i, err := range k.w.ApplyRoutes(bg, ops) {
		require.NoError(t, err, "op %d", i)
	}
	k.requireConverged(true)
	before := k.mon.Stats()

	gate := make(chan struct{})
	stall.Store(&gate)
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release)
	// Routes until the namespace's netlink sockets count drops. The count
	// is read once per step and kept: a socket's count goes with it when
	// the monitor renews it, so a second read may no longer show it (the
	// overflow itself is checked below, in the monitor's Stats).
	drops0 := netlinkDrops(t, k.w)
	n, dropped := 0, uint64(0)
	for n < limit {
		if d := netlinkDrops(t, k.w); d != drops0 {
			if d > drops0 {
				dropped = d - drops0
			}
			break
		}
		ops = ops[:0]
		for i := n; i < n+step; i++ {
			ops = append(ops, replace(route4(100, burstNet(i).String(), brs[1])))
		}
		for i, err := range k.w.ApplyRoutes(bg, ops) {
			require.NoError(t, err, "op %d", i)
		}
		n += step
	}
	require.Less(t, n, limit, "no netlink drop counted after %d routes", n)
	for i := range 50 { // addresses that come and go, and one that stays
		a := kernel.Addr{LinkIndex: brs[0], Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)}), 24)}
		require.NoError(t, k.w.AddAddr(bg, a))
		if i > 0 {
			require.NoError(t, k.w.DeleteAddr(bg, a))
		}
	}
	require.NoError(t, k.w.SetLinkUp(bg, brs[1], false)) // the n routes go silently
	end := time.Now()
	release()
	took := k.waitConverged("np-a", true)
	sinceEnd := time.Since(end)
	k.requireConverged(true)
	var s Stats
	assert.Eventually(t, func() bool { s = k.mon.Stats(); return s.Overflows > before.Overflows }, 10*time.Second, 2*time.Millisecond)
	assert.Zero(t, s.PeriodicRelists)
	assert.Len(t, k.rec.routeView(), len(kernelRoutes(t, k.w)))
	t.Logf("%d routes through np-b, then np-b down, with a %d-byte receive buffer: %d messages dropped; "+
		"correct view %v after the end of the burst (%v of it waiting for the view); stats %+v",
		n, 16<<10, dropped, sinceEnd.Round(time.Millisecond), took.Round(time.Millisecond), s)
}
