package ifacemonitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

func TestNewValidates(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	tests := []struct {
		name string
		opts Options
		want string // substring of the error; empty means valid
	}{
		{name: "valid", opts: Options{Kernel: ns}},
		{name: "valid with everything", opts: Options{Kernel: ns, Include: []string{"^eth"}, Exclude: []string{"^kube-ipvs0$"},
			WatchRoutes: true, ResyncInterval: -1, FlapDampingWindow: time.Second}},
		{name: "no kernel", opts: Options{}, want: "Kernel is required"},
		{name: "nil namespace", opts: Options{Kernel: (*kernel.Namespace)(nil)}, want: "Kernel is required"},
		{name: "nil fake", opts: Options{Kernel: (*kernelfake.Namespace)(nil)}, want: "Kernel is required"},
		{name: "bad include", opts: Options{Kernel: ns, Include: []string{"eth("}}, want: `Include pattern "eth("`},
		{name: "bad exclude", opts: Options{Kernel: ns, Exclude: []string{"ok", "[z-a]"}}, want: `Exclude pattern "[z-a]"`},
		{name: "negative damping", opts: Options{Kernel: ns, FlapDampingWindow: -time.Second}, want: "negative FlapDampingWindow -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "ifacemonitor: invalid options: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "ifacemonitor: "), "one package prefix: %q", err)
			assert.Nil(t, m)
		})
	}
	assert.Zero(t, ns.Calls(kernelfake.OpLinks)+ns.Calls(kernelfake.OpSubscribe), "New does no I/O")
}

func TestMatches(t *testing.T) {
	tests := []struct {
		include, exclude []string
		name             string
		want             bool
	}{
		{name: "eth0", want: true},
		{include: []string{"^eth"}, name: "eth0", want: true},
		{include: []string{"^eth"}, name: "veth0", want: false},
		{include: []string{"^eth", "^ens"}, name: "ens3", want: true},
		{exclude: []string{"^kube-ipvs0$"}, name: "kube-ipvs0", want: false},
		{exclude: []string{"^kube-ipvs0$"}, name: "kube-ipvs00", want: true},
		{include: []string{"^eth"}, exclude: []string{"^eth1$"}, name: "eth1", want: false},
		{include: []string{}, exclude: []string{}, name: "lo", want: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v-%v-%s", tc.include, tc.exclude, tc.name), func(t *testing.T) {
			m, err := New(Options{Kernel: kernelfake.New(kernelfake.Options{}), Include: tc.include, Exclude: tc.exclude})
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.Matches(tc.name))
		})
	}
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	err := h.mon.Run(bg)
	assert.ErrorIs(t, err, ErrAlreadyStarted)
	assert.Equal(t, "ifacemonitor: already started", err.Error())
}

// fillBasic adds eth0 (admin up, no carrier) and kube-ipvs0 (up) to the
// fake, which has lo already.
func fillBasic(h *harness) {
	h.addVeth("eth0", 1500, true, false)
	h.addAddr("eth0", "fd00::2/64")
	h.addAddr("eth0", "10.0.0.2/24")
	br, err := h.admin.AddLink(bg, kernel.Link{Name: "kube-ipvs0", Kind: kernel.KindBridge})
	require.NoError(h.t, err)
	require.NoError(h.t, h.admin.SetLinkUp(bg, br.Index, true))
	h.addAddr("kube-ipvs0", "10.96.0.1/32")
}

func TestInitialListingThenInSync(t *testing.T) {
	h := newHarness(t, Options{Exclude: []string{"^kube-ipvs0$"}})
	fillBasic(h)
	h.start()
	eth0 := h.index("eth0")
	assert.Equal(t, []string{
		fmt.Sprintf("link eth0 #%d down mtu=1500 veth", eth0),
		"addrs eth0 [10.0.0.2/24 fd00::2/64]",
		"link lo #1 up mtu=65536 device",
		"addrs lo [127.0.0.1/8 ::1/128]",
		"in-sync",
	}, h.rec.take())
	h.requireConverged()
	s := h.mon.Stats()
	assert.True(t, s.InSync)
	assert.Equal(t, uint64(1), s.Resyncs)
	assert.Equal(t, uint64(1), s.Relists)
	assert.Zero(t, s.Overflows)
	assert.Equal(t, 1, h.ns.Calls(kernelfake.OpSubscribe))
	assert.Equal(t, 1, h.ns.Calls(kernelfake.OpLinks))
	assert.Equal(t, 2, h.ns.Calls(kernelfake.OpAddrs), "one listing per family")
	assert.Zero(t, h.ns.Calls(kernelfake.OpDumpRoutes), "no routes without WatchRoutes")
	assert.Zero(t, h.ns.Writes(), "the monitor only reads")
}

// step is one change of a scripted test and the lines it reports.
type step struct {
	name string
	do   func(h *harness)
	want []string
}

func TestLinkAndAddressEvents(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.rec.take()
	var v int
	steps := []step{
		{"new veth", func(h *harness) { v = h.addVeth("veth0", 1500, false, false) }, []string{"link veth0 #V down mtu=1500 veth"}},
		{"admin up without carrier is still down", func(h *harness) { h.setUp("veth0", true) }, nil},
		{"carrier makes it up", func(h *harness) { h.setPeerUp("veth0", true) }, []string{"link veth0 #V up mtu=1500 veth"}},
		{"repeated state", func(h *harness) { h.setUp("veth0", true) }, nil},
		{"MTU change", func(h *harness) { h.setMTU("veth0", 9000) }, []string{"link veth0 #V up mtu=9000 veth"}},
		{"IPv4 address", func(h *harness) { h.addAddr("veth0", "10.1.0.1/24") }, []string{"addrs veth0 [10.1.0.1/24]"}},
		{"IPv6 address", func(h *harness) { h.addAddr("veth0", "fd00:1::1/64") }, []string{"addrs veth0 [10.1.0.1/24 fd00:1::1/64]"}},
		{"same address, other prefix length", func(h *harness) { h.addAddr("veth0", "10.1.0.1/32") },
			[]string{"addrs veth0 [10.1.0.1/24 10.1.0.1/32 fd00:1::1/64]"}},
		{"remove one prefix length", func(h *harness) { h.delAddr("veth0", "10.1.0.1/24") },
			[]string{"addrs veth0 [10.1.0.1/32 fd00:1::1/64]"}},
		{"remove the other", func(h *harness) { h.delAddr("veth0", "10.1.0.1/32") }, []string{"addrs veth0 [fd00:1::1/64]"}},
		{"admin down", func(h *harness) { h.setUp("veth0", false) }, []string{"link veth0 #V down mtu=9000 veth"}},
		{"delete", func(h *harness) { h.delLink("veth0") }, []string{"addrs veth0 []", "link veth0 #V gone mtu=9000 veth"}},
	}
	for _, s := range steps {
		s.do(h)
		h.sync()
		var want []string
		for _, l := range s.want {
			want = append(want, strings.ReplaceAll(l, "#V", fmt.Sprintf("#%d", v)))
		}
		assert.Equal(t, want, h.rec.take(), "step %q", s.name)
		h.requireConverged()
	}
	assert.Empty(t, h.rec.contractErrors())
	assert.Zero(t, h.mon.Stats().Overflows)
	assert.Equal(t, 1, h.ns.Calls(kernelfake.OpLinks), "events alone, no re-list")
}

func TestDeleteAndRecreateSameName(t *testing.T) {
	h := newHarness(t, Options{})
	old := h.addVeth("veth0", 1500, true, true)
	h.start()
	h.rec.take()

	h.delLink("veth0")
	recreated := h.addVeth("veth0", 1400, false, false)
	h.sync()
	// Deleting a veth first takes it down (its peer goes with it): when
	// the monitor applies that event apart from the deletion, it reports
	// the old link down on its way out, which is true and allowed; the
	// deletion and the new link must follow.
	got := slices.DeleteFunc(h.rec.take(), func(l string) bool {
		return l == fmt.Sprintf("link veth0 #%d down mtu=1500 veth", old)
	})
	assert.Equal(t, []string{
		fmt.Sprintf("link veth0 #%d gone mtu=1500 veth", old),
		fmt.Sprintf("link veth0 #%d down mtu=1400 veth", recreated),
	}, got)
	h.requireConverged()

	// Both changes unseen: the re-list finds them.
	var third int
	h.lose(func() {
		h.delLink("veth0")
		third = h.addVeth("veth0", 1400, false, false)
	})
	assert.Equal(t, []string{
		fmt.Sprintf("link veth0 #%d gone mtu=1400 veth", recreated),
		fmt.Sprintf("link veth0 #%d down mtu=1400 veth", third),
	}, h.rec.take())
	h.requireConverged()
	assert.Empty(t, h.rec.contractErrors())
}

func TestResyncReportsOnlyTheDifferences(t *testing.T) {
	h := newHarness(t, Options{})
	fillBasic(h)
	veth1 := h.addVeth("veth1", 1500, false, false)
	h.start()
	h.rec.take()

	var veth2 int
	h.lose(func() {
		h.delAddr("eth0", "fd00::2/64")
		h.addAddr("eth0", "fd00::3/64")
		h.delLink("veth1")
		veth2 = h.addVeth("veth2", 1500, false, false)
		h.setMTU("lo", 1280)
	})
	assert.Equal(t, []string{
		fmt.Sprintf("link veth1 #%d gone mtu=1500 veth", veth1),
		"addrs eth0 [10.0.0.2/24 fd00::3/64]",
		"link lo #1 up mtu=1280 device",
		fmt.Sprintf("link veth2 #%d down mtu=1500 veth", veth2),
	}, h.rec.take())
	h.requireConverged()

	// A subscription lost for another reason than an overflow.
	before := h.mon.Stats().Relists
	h.k.send(t, kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventLinks | kernel.EventAddrs, Reason: errors.New("socket closed")}})
	h.waitStats("re-listed", func(s Stats) bool { return s.Relists > before })
	h.sync()
	assert.Empty(t, h.rec.take(), "nothing changed")
	s := h.mon.Stats()
	assert.Equal(t, uint64(3), s.Resyncs)
	assert.Equal(t, uint64(2), s.SubscriptionLosses)
	assert.Equal(t, uint64(1), s.Overflows)
	assert.Equal(t, uint64(3), s.Relists)
}

func TestPeriodicResync(t *testing.T) {
	h := newHarness(t, Options{ResyncInterval: 90 * time.Second})
	fillBasic(h)
	h.start()
	h.rec.take()
	next, ok := h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, 90*time.Second, next.Sub(h.clk.Now()))

	// The event is held back; the periodic re-list finds the change
	// first, and the late event changes nothing.
	h.k.pause(t)
	h.addAddr("eth0", "10.0.0.3/24")
	h.clk.Advance(90 * time.Second)
	h.waitStats("periodic re-list", func(s Stats) bool { return s.PeriodicRelists == 1 && s.Relists == 2 })
	assert.Equal(t, []string{"addrs eth0 [10.0.0.2/24 10.0.0.3/24 fd00::2/64]"}, h.rec.take())
	h.requireConverged()
	next, ok = h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, 90*time.Second, next.Sub(h.clk.Now()), "re-armed after the re-list")
	h.k.resume(t)
	h.sync()
	assert.Empty(t, h.rec.take())

	// A Resync-driven full re-list postpones the periodic one.
	h.clk.Advance(30 * time.Second)
	h.lose(func() {})
	next, ok = h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, 90*time.Second, next.Sub(h.clk.Now()))
}

func TestRelistRetriesWithBackoff(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		waits []time.Duration
	}{
		{"other errors back off", nil, []time.Duration{relistBackoffMin, 2 * relistBackoffMin, 4 * relistBackoffMin}},
		{"interrupted dumps retry soon", fmt.Errorf("list links: %w", kernel.ErrDumpInterrupted),
			[]time.Duration{relistBackoffMin, relistBackoffMin, relistBackoffMin}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			fillBasic(h)
			h.ns.Fail(kernelfake.OpLinks, len(tc.waits), tc.err)
			h.startNoSync()
			for i, wait := range tc.waits {
				h.waitStats("failed re-list", func(s Stats) bool { return s.RelistErrors == uint64(i+1) })
				assert.False(t, h.mon.Stats().InSync)
				assert.Empty(t, h.rec.view(), "nothing reported before the links are listed")
				require.NoError(t, h.clk.BlockUntil(context.Background(), 1))
				next, ok := h.clk.NextDeadline()
				require.True(t, ok)
				assert.Equal(t, wait, next.Sub(h.clk.Now()), "wait %d", i)
				h.clk.Advance(wait)
			}
			h.waitInSync()
			assert.Equal(t, len(tc.waits)+1, h.ns.Calls(kernelfake.OpLinks))
			assert.Equal(t, 2, h.ns.Calls(kernelfake.OpAddrs), "the address listings succeeded the first time")
			lines := h.rec.take()
			require.NotEmpty(t, lines)
			assert.Equal(t, "in-sync", lines[len(lines)-1])
			h.requireConverged()
		})
	}
}

// Back-to-back re-lists (an overflow storm) are spaced by twice the time
// the last one took, at most maxRelistSpacing.
func TestRelistSpacing(t *testing.T) {
	tests := []struct {
		name string
		cost time.Duration // per listing call; a full re-list makes three
		wait time.Duration
	}{
		{"twice the duration", 100 * time.Millisecond, relistSpacing * 3 * 100 * time.Millisecond},
		{"capped", 2 * time.Second, maxRelistSpacing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			fillBasic(h)
			h.k.setCost(h.clk, tc.cost)
			h.start()
			h.rec.take()

			h.k.pause(t)
			h.addAddr("eth0", "10.0.0.9/24")
			h.ns.Overflow()
			h.k.resume(t)
			h.waitStats("resync seen", func(s Stats) bool { return s.Overflows == 1 })
			require.NoError(t, h.clk.BlockUntil(context.Background(), 1))
			next, ok := h.clk.NextDeadline()
			require.True(t, ok)
			assert.Equal(t, tc.wait, next.Sub(h.clk.Now()), "deferred")
			assert.Equal(t, uint64(1), h.mon.Stats().Relists)
			assert.Empty(t, h.rec.take())

			h.clk.Advance(tc.wait)
			h.waitStats("re-listed", func(s Stats) bool { return s.Relists == 2 })
			assert.Equal(t, []string{"addrs eth0 [10.0.0.2/24 10.0.0.9/24 fd00::2/64]"}, h.rec.take())
			h.requireConverged()
		})
	}
}

func TestFlapDamping(t *testing.T) {
	const window = 5 * time.Second
	tests := []struct {
		name  string
		run   func(h *harness) // after the start with veth0 up
		final []string         // lines after the window has passed
	}{
		{
			name: "a short flap reports nothing",
			run: func(h *harness) {
				h.setPeerUp("veth0", false)
				h.sync()
				h.clk.Advance(window / 2)
				h.setPeerUp("veth0", true)
				h.sync()
			},
		},
		{
			name: "a down that lasts is reported when the window ends",
			run: func(h *harness) {
				h.setPeerUp("veth0", false)
				h.sync()
			},
			final: []string{"link veth0 #V down mtu=1500 veth"},
		},
		{
			name: "gone is not delayed",
			run: func(h *harness) {
				h.setPeerUp("veth0", false)
				h.delLink("veth0")
				h.sync()
				assert.Equal(h.t, []string{fmt.Sprintf("link veth0 #%d gone mtu=1500 veth", h.barrier+1)}, h.rec.take())
			},
		},
		{
			name: "other changes are reported at once, as up",
			run: func(h *harness) {
				h.setPeerUp("veth0", false)
				h.setMTU("veth0", 9000)
				h.sync()
				assert.Equal(h.t, []string{fmt.Sprintf("link veth0 #%d up mtu=9000 veth", h.barrier+1)}, h.rec.take())
			},
			final: []string{"link veth0 #V down mtu=9000 veth"},
		},
		{
			name: "a second down restarts the window",
			run: func(h *harness) {
				h.setPeerUp("veth0", false)
				h.sync()
				h.clk.Advance(window - time.Second)
				h.setPeerUp("veth0", true)
				h.setPeerUp("veth0", false)
				h.sync()
				h.clk.Advance(time.Second) // the first window's end
				h.sync()
			},
			final: []string{"link veth0 #V down mtu=1500 veth"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{FlapDampingWindow: window})
			v := h.addVeth("veth0", 1500, true, true)
			require.Equal(t, h.barrier+1, v)
			h.start()
			h.rec.take()
			tc.run(h)
			assert.Empty(t, h.rec.take(), "nothing reported within the window")
			before := h.mon.Stats().Batches
			h.clk.Advance(window)
			if len(tc.final) > 0 {
				h.waitStats("held-back report", func(s Stats) bool { return s.Batches > before })
			}
			h.sync()
			var final []string
			for _, l := range tc.final {
				final = append(final, strings.ReplaceAll(l, "#V", fmt.Sprintf("#%d", v)))
			}
			assert.Equal(t, final, h.rec.take())
			h.requireConverged()
			assert.Zero(t, h.clk.Waiters(), "no timer left")
		})
	}
}

// Up is reported at once even with damping, and a link first seen down is
// reported down at once.
func TestFlapDampingNeverDelaysUpOrNew(t *testing.T) {
	h := newHarness(t, Options{FlapDampingWindow: time.Minute})
	h.start()
	h.rec.take()
	v := h.addVeth("veth0", 1500, false, false)
	h.sync()
	assert.Equal(t, []string{fmt.Sprintf("link veth0 #%d down mtu=1500 veth", v)}, h.rec.take())
	h.setPeerUp("veth0", true)
	h.setUp("veth0", true)
	h.sync()
	assert.Equal(t, []string{fmt.Sprintf("link veth0 #%d up mtu=1500 veth", v)}, h.rec.take())
	h.requireConverged()
}

func route4(table uint32, dst string, oif int) kernel.Route {
	return kernel.Route{Family: kernel.IPv4, Table: table, Dst: netip.MustParsePrefix(dst), Type: kernel.RTNUnicast,
		Protocol: 99, Scope: kernel.ScopeLink, OIF: oif}
}

func route6(table uint32, dst string, oif int) kernel.Route {
	return kernel.Route{Family: kernel.IPv6, Table: table, Dst: netip.MustParsePrefix(dst), Type: kernel.RTNUnicast,
		Protocol: 99, OIF: oif, Priority: 1024}
}

func (h *harness) routes(ops ...kernel.RouteOp) {
	h.t.Helper()
	for i, err := range h.admin.ApplyRoutes(bg, ops) {
		require.NoError(h.t, err, "op %d: %+v", i, ops[i])
	}
}

func replace(r kernel.Route) kernel.RouteOp { return kernel.RouteOp{Kind: kernel.OpReplace, Route: r} }
func del(r kernel.Route) kernel.RouteOp     { return kernel.RouteOp{Kind: kernel.OpDelete, Route: r} }

func TestRoutes(t *testing.T) {
	h := newHarness(t, Options{WatchRoutes: true})
	v0 := h.addVeth("veth0", 1500, true, true)
	v1 := h.addVeth("veth1", 1500, true, true)
	h.addAddr("veth0", "10.0.0.1/24")
	h.addAddr("veth1", "10.0.1.1/24")
	h.routes(replace(route4(100, "10.1.0.0/24", v0)), replace(route6(100, "fd00:1::/64", v0)))
	h.start()
	lines := h.rec.takeMatching("table=100")
	assert.Equal(t, []string{
		fmt.Sprintf("route + table=100 10.1.0.0/24 dev=%d", v0),
		fmt.Sprintf("route + table=100 fd00:1::/64 dev=%d", v0),
	}, lines)
	h.requireRoutesConverged()
	dumps := h.ns.Calls(kernelfake.OpDumpRoutes)
	assert.Equal(t, 2, dumps, "one dump per family")

	moved := route4(100, "10.2.0.0/16", v1)
	static := moved
	static.Protocol = 4
	steps := []struct {
		name   string
		do     func()
		want   []string
		relist bool // the step needs a route re-list
	}{
		{"add", func() { h.routes(replace(route4(100, "10.2.0.0/16", v0))) },
			[]string{fmt.Sprintf("route + table=100 10.2.0.0/16 dev=%d", v0)}, false},
		{"replace moves it to another link: the kernel announces only the new route", func() { h.routes(replace(moved)) },
			[]string{fmt.Sprintf("route - table=100 10.2.0.0/16 dev=%d", v0), fmt.Sprintf("route + table=100 10.2.0.0/16 dev=%d", v1)}, true},
		{"attribute change", func() { h.routes(replace(static)) },
			[]string{fmt.Sprintf("route + table=100 10.2.0.0/16 dev=%d", v1)}, false},
		{"delete", func() { h.routes(del(route6(100, "fd00:1::/64", v0))) },
			[]string{fmt.Sprintf("route - table=100 fd00:1::/64 dev=%d", v0)}, false},
		{"admin down drops IPv4 routes silently; a route re-list finds it", func() { h.setUp("veth0", false) },
			[]string{fmt.Sprintf("route - table=100 10.1.0.0/24 dev=%d", v0)}, true},
		{"losing the last IPv4 address drops them too", func() { h.delAddr("veth1", "10.0.1.1/24") },
			[]string{fmt.Sprintf("route - table=100 10.2.0.0/16 dev=%d", v1)}, true},
	}
	for _, s := range steps {
		s.do()
		h.sync()
		assert.Equal(t, s.want, h.rec.takeMatching("table=100"), "step %q", s.name)
		h.requireRoutesConverged()
		now := h.ns.Calls(kernelfake.OpDumpRoutes)
		if s.relist {
			assert.Equal(t, dumps+2, now, "step %q: one re-list", s.name)
		} else {
			assert.Equal(t, dumps, now, "step %q: no re-list", s.name)
		}
		dumps = now
	}
	h.requireConverged()
	assert.Empty(t, h.rec.contractErrors())
}

// An IPv6 multipath route that loses a path with its link: the kernel
// announces the deletion of that path alone, and the monitor re-lists to
// learn what is left.
func TestRoutesIPv6MultipathLosesAPath(t *testing.T) {
	h := newHarness(t, Options{WatchRoutes: true})
	v0 := h.addVeth("veth0", 1500, true, true)
	v1 := h.addVeth("veth1", 1500, true, true)
	h.addAddr("veth0", "fd00:a::1/64")
	h.addAddr("veth1", "fd00:b::1/64")
	mp := kernel.Route{Family: kernel.IPv6, Table: 100, Dst: netip.MustParsePrefix("fd99::/64"), Type: kernel.RTNUnicast,
		Protocol: 99, Priority: 1024, NextHops: []kernel.NextHop{
			{OIF: v0, Gateway: netip.MustParseAddr("fd00:a::2")},
			{OIF: v1, Gateway: netip.MustParseAddr("fd00:b::2")},
		}}
	h.start()
	h.rec.take()
	h.routes(replace(mp))
	h.sync()
	assert.Equal(t, []string{"route + table=100 fd99::/64 dev=0 hops=2"}, h.rec.takeMatching("table=100"))
	h.requireRoutesConverged()

	h.delLink("veth1")
	h.sync()
	assert.Equal(t, []string{
		"route - table=100 fd99::/64 dev=0 hops=2",
		fmt.Sprintf("route + table=100 fd99::/64 dev=%d via fd00:a::2", v0),
	}, h.rec.takeMatching("table=100"))
	h.requireRoutesConverged()
}

func TestCallbackPanicIsRecovered(t *testing.T) {
	h := newHarness(t, Options{})
	h.mon.opts.OnLinkState = func(u LinkUpdate) {
		if u.Name == "boom" {
			panic("consumer bug")
		}
		h.rec.onLink(u)
	}
	h.start()
	h.addVeth("boom", 1500, false, false)
	fine := h.addVeth("fine", 1500, false, false)
	h.sync()
	assert.Equal(t, []string{"link lo #1 up mtu=65536 device", "addrs lo [127.0.0.1/8 ::1/128]", "in-sync",
		fmt.Sprintf("link fine #%d down mtu=1500 veth", fine)}, h.rec.take())
	assert.Equal(t, uint64(1), h.mon.Stats().CallbackPanics)
	_, ok := h.mon.Snapshot().Interface("boom")
	assert.True(t, ok, "the monitor counts boom as reported")
}

func TestStopsOnCancel(t *testing.T) {
	h := newHarness(t, Options{ResyncInterval: time.Minute, FlapDampingWindow: time.Second})
	h.addVeth("veth0", 1500, true, true)
	h.start()
	h.setPeerUp("veth0", false)
	h.sync()
	require.Equal(t, 2, h.clk.Waiters(), "resync and damping timers armed")
	h.stop()
	select {
	case err := <-h.errc:
		require.NoError(t, err)
		h.errc <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not stop")
	}
	assert.Zero(t, h.clk.Waiters(), "timers stopped")
	requireNoLeaks(t)
}

// A failed attempt to subscribe, which the Kernel retries, is counted and
// logged; the monitor goes on.
func TestSubscribeErrorEventIsCounted(t *testing.T) {
	h := newHarness(t, Options{})
	h.ns.Fail(kernelfake.OpSubscribe, 1, syscall.EPERM)
	h.start()
	assert.Equal(t, uint64(1), h.mon.Stats().SubscribeErrors)
	h.requireConverged()
}

// A random history of changes, a fifth of them made while the stream is
// held back and then lost to an overflow: after a final overflow the
// consumer's view equals the kernel's, and the name contract held
// throughout. (The fake has no renames: TestKernelRandomHistory and the
// model tests cover them.)
func TestRandomHistoryConverges(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		for _, damping := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("seed=%d/damping=%v", seed, damping), func(t *testing.T) {
				h := newHarness(t, Options{Exclude: []string{"^hidden"}, FlapDampingWindow: damping, WatchRoutes: seed%2 == 0})
				h.start()
				rnd := rand.New(rand.NewPCG(seed, 42))
				names := []string{"a", "b", "c", "d", "hidden0", "hidden1"}
				exists := func(name string) bool { _, ok := h.ns.Link(name); return ok }
				some := func() (string, bool) {
					var ns []string
					for _, n := range names {
						if exists(n) {
							ns = append(ns, n)
						}
					}
					if len(ns) == 0 {
						return "", false
					}
					return ns[rnd.IntN(len(ns))], true
				}
				change := func() {
					switch op := rnd.IntN(8); {
					case op == 0:
						if n := names[rnd.IntN(len(names))]; !exists(n) {
							h.addVeth(n, 1500, rnd.IntN(2) == 0, rnd.IntN(2) == 0)
						}
					case op == 1:
						if n, ok := some(); ok {
							h.delLink(n)
						}
					case op == 2:
						if n, ok := some(); ok {
							h.setUp(n, rnd.IntN(2) == 0)
						}
					case op == 3:
						if n, ok := some(); ok {
							h.setPeerUp(n, rnd.IntN(2) == 0)
						}
					case op == 4:
						if n, ok := some(); ok {
							h.setMTU(n, 1400+rnd.IntN(3)*100)
						}
					case op == 5 || op == 6:
						if n, ok := some(); ok {
							p := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.%d/24", h.index(n)%256, rnd.IntN(2), 1+rnd.IntN(3)))
							if rnd.IntN(2) == 0 {
								p = netip.MustParsePrefix(fmt.Sprintf("fd00:%x::%x/64", h.index(n), 1+rnd.IntN(3)))
							}
							a := kernel.Addr{LinkIndex: h.index(n), Prefix: p}
							if op == 5 {
								_ = h.admin.AddAddr(bg, a) // may exist already
							} else {
								_ = h.admin.DeleteAddr(bg, a) // may be missing
							}
						}
					case op == 7:
						if n, ok := some(); ok {
							r := route4(100, fmt.Sprintf("10.200.%d.0/24", rnd.IntN(4)), h.index(n))
							if rnd.IntN(2) == 0 {
								_ = h.admin.ApplyRoutes(bg, []kernel.RouteOp{replace(r)}) // refused on a down link
							} else {
								_ = h.admin.ApplyRoutes(bg, []kernel.RouteOp{del(r)})
							}
						}
					}
				}
				for range 80 {
					if rnd.IntN(5) == 0 {
						h.lose(func() {
							for range 1 + rnd.IntN(5) {
								change()
							}
						})
					} else {
						change()
					}
					if damping > 0 && rnd.IntN(10) == 0 {
						h.sync()
						h.clk.Advance(time.Duration(rnd.IntN(1500)) * time.Millisecond)
					}
				}
				h.lose(func() {})
				if damping > 0 {
					h.clk.Advance(damping)
					require.Eventually(t, func() bool {
						want := kernelView(t, h.ns.Admin(), h.mon)
						return assert.ObjectsAreEqual(want, viewMap(h.mon.Snapshot())) && assert.ObjectsAreEqual(want, h.rec.view())
					}, 10*time.Second, time.Millisecond, "held-back reports made")
				}
				h.requireConverged()
				if h.mon.opts.WatchRoutes {
					h.requireRoutesConverged()
				}
			})
		}
	}
}

// Malformed events are ignored or counted, never a panic.
func TestMalformedEvents(t *testing.T) {
	h := newHarness(t, Options{WatchRoutes: true})
	h.addVeth("eth0", 1500, false, false)
	h.start()
	bad := []kernel.Event{
		{},
		{Link: &kernel.LinkEvent{}},
		{Link: &kernel.LinkEvent{Deleted: true}},
		{Link: &kernel.LinkEvent{Link: kernel.Link{Index: -3, Name: "x"}}},
		{Addr: &kernel.AddrEvent{Addr: kernel.Addr{LinkIndex: 1}}},
		{Addr: &kernel.AddrEvent{Addr: kernel.Addr{LinkIndex: -1, Prefix: netip.MustParsePrefix("10.0.0.1/32")}}},
		{Route: &kernel.RouteEvent{}},
		{Route: &kernel.RouteEvent{Route: kernel.Route{Family: kernel.IPv4, Dst: netip.MustParsePrefix("fd00::/64")}}},
		{Route: &kernel.RouteEvent{Route: kernel.Route{Family: 7, Dst: netip.MustParsePrefix("10.0.0.0/8")}}},
		{Route: &kernel.RouteEvent{Deleted: true, Route: kernel.Route{Family: kernel.IPv6, Dst: netip.MustParsePrefix("fd00::/64")}}},
		{Err: errors.New("subscribe failed")},
		{Resync: &kernel.Resync{}},
	}
	for _, ev := range bad {
		h.k.send(t, ev)
	}
	h.sync()
	h.requireConverged()
	h.requireRoutesConverged()
	s := h.mon.Stats()
	assert.Equal(t, uint64(1), s.SubscribeErrors)
	assert.Zero(t, s.CallbackPanics)
	assert.Empty(t, h.rec.contractErrors())
}

// failingKernel is a fake whose Subscribe fails, or returns stream.
type failingKernel struct {
	*kernelfake.Namespace
	err    error
	stream chan kernel.Event
	ctx    chan context.Context
}

func (k *failingKernel) Subscribe(ctx context.Context, kinds kernel.EventKinds, _ ...kernel.SubscribeOptions) (<-chan kernel.Event, error) {
	if k.ctx != nil {
		k.ctx <- ctx
	}
	if k.err != nil {
		return nil, k.err
	}
	if k.stream == nil {
		return nil, nil // a broken Kernel
	}
	return k.stream, nil
}

// Run's errors name the package once and match the sentinels they speak
// of.
func TestRunErrors(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	for _, tc := range []struct {
		name string
		k    *failingKernel
		text string
		is   []error
	}{
		{"subscription refused", &failingKernel{Namespace: ns, err: fmt.Errorf("kernel: subscribe: %w", syscall.EPERM)},
			"ifacemonitor: subscribe failed: kernel: subscribe: operation not permitted", []error{ErrSubscribe, syscall.EPERM}},
		{"no stream", &failingKernel{Namespace: ns}, "ifacemonitor: subscribe failed: the Kernel returned no event stream", []error{ErrSubscribe}},
		{"stream ends", &failingKernel{Namespace: ns, stream: closedStream()},
			"ifacemonitor: subscribe failed: the event stream ended before the context", []error{ErrSubscribe}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Options{Kernel: tc.k})
			require.NoError(t, err)
			err = m.Run(bg)
			require.Error(t, err)
			assert.Equal(t, tc.text, err.Error())
			for _, s := range tc.is {
				assert.ErrorIs(t, err, s)
			}
			assert.False(t, errors.Is(err, ErrInvalidOptions))
			assert.ErrorIs(t, m.Run(bg), ErrAlreadyStarted)
		})
	}
}

func closedStream() chan kernel.Event {
	ch := make(chan kernel.Event, 1)
	ch <- kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventLinks | kernel.EventAddrs}}
	close(ch)
	return ch
}

// Run with a nil ctx runs as with context.Background(), without a panic.
func TestRunNilContext(t *testing.T) {
	ns := newFake(t)
	stream := make(chan kernel.Event)
	k := &failingKernel{Namespace: ns, stream: stream, ctx: make(chan context.Context, 1)}
	links := make(chan string, 4)
	m, err := New(Options{Kernel: k, OnLinkState: func(u LinkUpdate) { links <- u.Name }})
	require.NoError(t, err)
	errc := make(chan error, 1)
	//lint:ignore SA1012 a nil context is documented to mean Background
	go func() { errc <- m.Run(nil) }()
	select {
	case ctx := <-k.ctx:
		assert.NotNil(t, ctx, "the Kernel got a context")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not subscribe")
	}
	stream <- kernel.Event{Resync: &kernel.Resync{Kinds: kernel.EventLinks | kernel.EventAddrs}}
	select {
	case name := <-links:
		assert.Equal(t, "lo", name)
	case <-time.After(10 * time.Second):
		t.Fatal("the monitor reported nothing")
	}
	close(stream)
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, ErrSubscribe, "the stream ended, the context did not")
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when its stream ended")
	}
}

// Issue 20: after a backlog, events older than a re-list never overwrite
// it. While the stream is held back, routes are added through br-b and
// br-b goes down (its IPv4 routes go silently), an address comes and
// goes and a link's MTU changes and changes back; the periodic re-list finds the kernel's state first. The held
// events then arrive before the barrier the re-list placed: they are
// dropped, so the view keeps the kernel's 10 routes (not 30: the route
// additions applied on top of the listing, with the link already down in
// the model, asked for no re-list) and nothing is reported again.
func TestEventsOlderThanARelistAreDropped(t *testing.T) {
	h := newHarness(t, Options{WatchRoutes: true, ResyncInterval: 90 * time.Second})
	var brs []int
	for _, name := range []string{"br-a", "br-b"} {
		l, err := h.admin.AddLink(bg, kernel.Link{Name: name, Kind: kernel.KindBridge})
		require.NoError(t, err)
		brs = append(brs, l.Index)
		// IPv4 alone: the deletions of IPv6 routes that a link going down
		// announces would ask for a route re-list of their own.
		require.NoError(t, h.admin.SetSysctl(bg, "net.ipv6.conf."+name+".disable_ipv6", "1"))
		h.setUp(name, true)
	}
	h.addAddr("br-a", "10.0.0.1/24")
	h.addAddr("br-b", "10.0.1.1/24")
	var ops []kernel.RouteOp
	for i := range 10 {
		ops = append(ops, replace(route4(100, fmt.Sprintf("10.1.%d.0/24", i), brs[0])))
	}
	h.routes(ops...)
	h.start()
	h.rec.take()
	base := h.mon.Stats()

	h.k.pause(t)
	ops = ops[:0]
	for i := range 20 {
		ops = append(ops, replace(route4(100, fmt.Sprintf("10.2.%d.0/24", i), brs[1])))
	}
	h.routes(ops...)
	h.setUp("br-b", false)
	h.addAddr("br-a", "10.0.0.9/24")
	h.delAddr("br-a", "10.0.0.9/24")
	h.setMTU("br-a", 1400)
	h.setMTU("br-a", 1500)
	h.clk.Advance(90 * time.Second)
	h.waitStats("periodic re-list", func(s Stats) bool { return s.PeriodicRelists == 1 && s.Relists == base.Relists+1 })
	h.requireConverged()
	h.requireRoutesConverged()
	assert.Equal(t, []string{fmt.Sprintf("link br-b #%d down mtu=1500 bridge", brs[1])}, h.rec.takeMatching("link"), "the re-list's one report")
	h.rec.take()

	h.k.resume(t)
	h.sync()
	h.requireConverged()
	h.requireRoutesConverged()
	assert.Len(t, kernelRoutes(t, h.k), h.rec.routeCount())
	assert.Empty(t, h.rec.take(), "no held event is reported on top of the re-list")
	s := h.mon.Stats()
	assert.Greater(t, s.StaleEvents, base.StaleEvents+20, "the held events were dropped")
	assert.Empty(t, h.rec.contractErrors())
}

// Options.ReceiveBufferSize reaches the subscription, checked as the
// kernel checks it.
func TestReceiveBufferSizeIsPassedOn(t *testing.T) {
	var got []kernel.SubscribeOptions
	k := &optsKernel{Namespace: kernelfake.New(kernelfake.Options{}), got: &got}
	m, err := New(Options{Kernel: k, ReceiveBufferSize: 32 << 20})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	require.Eventually(t, func() bool { return m.Stats().InSync }, 10*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-errc)
	require.Len(t, got, 1)
	assert.Equal(t, 32<<20, got[0].ReceiveBufferSize)
	assert.NotNil(t, got[0].Barriers)

	for _, bad := range []int{-1, kernel.MaxReceiveBufferSize + 1} {
		_, err := New(Options{Kernel: k, ReceiveBufferSize: bad})
		assert.ErrorIs(t, err, ErrInvalidOptions)
		assert.ErrorIs(t, err, kernel.ErrInvalid)
	}
}

// optsKernel records the options of Subscribe.
type optsKernel struct {
	*kernelfake.Namespace
	got *[]kernel.SubscribeOptions
}

func (k *optsKernel) Subscribe(ctx context.Context, kinds kernel.EventKinds, opts ...kernel.SubscribeOptions) (<-chan kernel.Event, error) {
	*k.got = append(*k.got, opts...)
	return k.Namespace.Subscribe(ctx, kinds, opts...)
}
