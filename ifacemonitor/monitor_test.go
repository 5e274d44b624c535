//go:build linux

package ifacemonitor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func TestNewValidates(t *testing.T) {
	self, err := netns.Get()
	require.NoError(t, err)
	defer self.Close()
	valid := func() Options { return Options{Handle: &netlink.Handle{}, Namespace: self} }
	tests := []struct {
		name   string
		modify func(*Options)
		want   string // substring of the error; empty means valid
	}{
		{name: "valid", modify: func(*Options) {}},
		{name: "valid with everything", modify: func(o *Options) {
			o.Include, o.Exclude = []string{"^eth"}, []string{"^kube-ipvs0$"}
			o.WatchRoutes, o.ResyncInterval, o.FlapDampingWindow, o.ReceiveBufferSize = true, -1, time.Second, 1<<20
		}},
		{name: "nil handle", modify: func(o *Options) { o.Handle = nil }, want: "Handle is required"},
		{name: "zero namespace", modify: func(o *Options) { o.Namespace = 0 }, want: "Namespace is required"},
		{name: "closed namespace", modify: func(o *Options) { o.Namespace = netns.None() }, want: "Namespace is required"},
		{name: "bad include", modify: func(o *Options) { o.Include = []string{"eth("} }, want: `Include pattern "eth("`},
		{name: "bad exclude", modify: func(o *Options) { o.Exclude = []string{"ok", "[z-a]"} }, want: `Exclude pattern "[z-a]"`},
		{name: "negative damping", modify: func(o *Options) { o.FlapDampingWindow = -time.Second }, want: "FlapDampingWindow"},
		{name: "negative buffer", modify: func(o *Options) { o.ReceiveBufferSize = -1 }, want: "ReceiveBufferSize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.modify(&o)
			m, err := New(o)
			if tc.want == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.ErrorIs(t, err, ErrInvalidOptions)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, m)
		})
	}
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
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v-%v-%s", tc.include, tc.exclude, tc.name), func(t *testing.T) {
			m, err := newMonitor(Options{Include: tc.include, Exclude: tc.exclude}, nlutil.Links)
			require.NoError(t, err)
			assert.Equal(t, tc.want, m.Matches(tc.name))
		})
	}
}

func TestStartTwice(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	assert.ErrorIs(t, h.mon.Start(context.Background()), ErrAlreadyStarted)
}

// loopback, eth0 (admin up, no carrier) and an excluded link.
func fillBasic(h *harness) {
	h.setLink(fakeLink{index: 1, name: "lo", adminUp: true, carrier: true, mtu: 65536, kind: "device"}, false)
	h.addAddr(1, "127.0.0.1/8", false)
	h.addAddr(1, "::1/128", false)
	h.setLink(fakeLink{index: 2, name: "eth0", adminUp: true, mtu: 1500, kind: "veth"}, false)
	h.addAddr(2, "fd00::2/64", false)
	h.addAddr(2, "10.0.0.2/24", false)
	h.setLink(fakeLink{index: 3, name: "kube-ipvs0", adminUp: true, carrier: true, mtu: 1500, kind: "bridge"}, false)
	h.addAddr(3, "10.96.0.1/32", false)
}

func TestInitialListingThenInSync(t *testing.T) {
	h := newHarness(t, Options{Exclude: []string{"^kube-ipvs0$"}})
	fillBasic(h)
	h.start()
	assert.Equal(t, []string{
		"link eth0 #2 down mtu=1500 veth",
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
}

// In-sync needs every kind subscribed and listed; nothing is listed before
// its subscription exists.
func TestInSyncWaitsForEverySubscription(t *testing.T) {
	h := newHarness(t, Options{})
	fillBasic(h)
	h.startNoSync()
	h.send(nlutil.Event{Err: fmt.Errorf("%w: addrs: EPERM", nlutil.ErrSubscribe)})
	h.waitStats("subscribe error counted", func(s Stats) bool { return s.SubscribeErrors == 1 })
	assert.Zero(t, h.src.listCount("links"))
	assert.Zero(t, h.src.listCount("addrs"))

	h.send(nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Links}})
	h.waitStats("links listed", func(s Stats) bool { return s.Relists == 1 })
	assert.Equal(t, 1, h.src.listCount("links"))
	assert.Zero(t, h.src.listCount("addrs"))
	assert.False(t, h.mon.Stats().InSync)
	assert.NotContains(t, h.rec.take(), "in-sync")

	h.send(nlutil.Event{Resync: &nlutil.Resync{Kinds: nlutil.Addrs}})
	h.waitInSync()
	lines := h.rec.take()
	require.NotEmpty(t, lines)
	assert.Equal(t, "in-sync", lines[len(lines)-1])
	h.requireConverged()
}

type step struct {
	name string
	do   func(h *harness)
	want []string
}

func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for _, s := range steps {
		s.do(h)
		h.sync()
		assert.Equal(t, s.want, h.rec.take(), "step %q", s.name)
		h.requireConverged()
	}
	assert.Empty(t, h.rec.contractErrors())
}

func TestLinkAndAddressEvents(t *testing.T) {
	h := newHarness(t, Options{})
	h.start()
	h.rec.take()
	veth0 := fakeLink{index: 10, name: "veth0", mtu: 1500, kind: "veth"}
	veth1 := fakeLink{index: 11, name: "veth1", mtu: 1500, kind: "veth"}
	runSteps(t, h, []step{
		{"new veth", func(h *harness) { h.setLink(veth0, true) }, []string{"link veth0 #10 down mtu=1500 veth"}},
		{"admin up without carrier is still down", func(h *harness) {
			veth0.adminUp = true
			h.setLink(veth0, true)
		}, nil},
		{"carrier makes it up", func(h *harness) {
			veth0.carrier = true
			h.setLink(veth0, true)
		}, []string{"link veth0 #10 up mtu=1500 veth"}},
		{"repeated event", func(h *harness) { h.setLink(veth0, true) }, nil},
		{"MTU change", func(h *harness) {
			veth0.mtu = 9000
			h.setLink(veth0, true)
		}, []string{"link veth0 #10 up mtu=9000 veth"}},
		{"IPv4 address", func(h *harness) { h.addAddr(10, "10.1.0.1/24", true) }, []string{"addrs veth0 [10.1.0.1/24]"}},
		{"IPv6 address", func(h *harness) { h.addAddr(10, "fd00:1::1/64", true) }, []string{"addrs veth0 [10.1.0.1/24 fd00:1::1/64]"}},
		{"same address, other prefix length", func(h *harness) { h.addAddr(10, "10.1.0.1/32", true) },
			[]string{"addrs veth0 [10.1.0.1/24 10.1.0.1/32 fd00:1::1/64]"}},
		{"repeated address event", func(h *harness) { h.addAddr(10, "10.1.0.1/32", true) }, nil},
		{"remove one prefix length", func(h *harness) { h.delAddr(10, "10.1.0.1/24", true) },
			[]string{"addrs veth0 [10.1.0.1/32 fd00:1::1/64]"}},
		{"remove the other", func(h *harness) { h.delAddr(10, "10.1.0.1/32", true) }, []string{"addrs veth0 [fd00:1::1/64]"}},
		{"admin down", func(h *harness) {
			veth0.adminUp = false
			h.setLink(veth0, true)
		}, []string{"link veth0 #10 down mtu=9000 veth"}},
		{"address before its link", func(h *harness) {
			h.addAddr(11, "10.2.0.1/32", true)
			h.setLink(veth1, true)
		}, []string{"link veth1 #11 down mtu=1500 veth", "addrs veth1 [10.2.0.1/32]"}},
		{"bridge-port DELLINK is not a deletion", func(h *harness) {
			ev := linkEvent(veth1, unix.RTM_DELLINK)
			ev.Link.IfInfomsg = *nl.NewIfInfomsg(unix.AF_BRIDGE)
			h.send(ev)
		}, nil},
		{"delete", func(h *harness) { h.delLink(11, true) }, []string{"addrs veth1 []", "link veth1 #11 gone mtu=1500 veth"}},
		{"late address of a deleted link", func(h *harness) {
			h.send(addrEvent(11, netip.MustParsePrefix("10.2.0.1/32"), false))
		}, nil},
	})
}

func TestRenames(t *testing.T) {
	h := newHarness(t, Options{Exclude: []string{"^kube-ipvs0$"}})
	l := fakeLink{index: 10, name: "veth0", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	h.setLink(l, false)
	h.addAddr(10, "10.1.0.1/24", false)
	h.start()
	h.rec.take()
	runSteps(t, h, []step{
		{"down before the rename", func(h *harness) {
			l.adminUp = false
			h.setLink(l, true)
		}, []string{"link veth0 #10 down mtu=1500 veth"}},
		{"rename", func(h *harness) {
			l.name = "eth1"
			h.setLink(l, true)
		}, []string{
			"addrs veth0 []",
			"link veth0 #10 gone mtu=1500 veth",
			"link eth1 #10 down mtu=1500 veth from=veth0",
			"addrs eth1 [10.1.0.1/24]",
		}},
		{"rename to an excluded name", func(h *harness) {
			l.name = "kube-ipvs0"
			h.setLink(l, true)
		}, []string{"addrs eth1 []", "link eth1 #10 gone mtu=1500 veth"}},
		{"address change while excluded", func(h *harness) { h.addAddr(10, "10.1.0.2/24", true) }, nil},
		{"rename out of the exclusion", func(h *harness) {
			l.name = "eth2"
			h.setLink(l, true)
		}, []string{"link eth2 #10 down mtu=1500 veth", "addrs eth2 [10.1.0.1/24 10.1.0.2/24]"}},
	})
}

func TestDeleteAndRecreateSameName(t *testing.T) {
	h := newHarness(t, Options{})
	old := fakeLink{index: 10, name: "veth0", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	h.setLink(old, false)
	h.start()
	h.rec.take()
	recreated := fakeLink{index: 12, name: "veth0", mtu: 1400, kind: "veth"}
	runSteps(t, h, []step{
		{"delete and recreate", func(h *harness) {
			h.delLink(10, true)
			h.setLink(recreated, true)
		}, []string{"link veth0 #10 gone mtu=1500 veth", "link veth0 #12 down mtu=1400 veth"}},
		{"both unseen, then a resync", func(h *harness) {
			h.delLink(12, false)
			h.setLink(fakeLink{index: 13, name: "veth0", mtu: 1400, kind: "veth"}, false)
			h.resync(fmt.Errorf("lost: %w", nlutil.ErrSubscriptionLost))
		}, []string{"link veth0 #12 gone mtu=1400 veth", "link veth0 #13 down mtu=1400 veth"}},
	})
}

func TestResyncReportsOnlyTheDifferences(t *testing.T) {
	h := newHarness(t, Options{})
	fillBasic(h)
	h.setLink(fakeLink{index: 11, name: "veth1", mtu: 1500, kind: "veth"}, false)
	h.start()
	h.rec.take()

	// Changes whose events are lost.
	h.delAddr(2, "fd00::2/64", false)
	h.addAddr(2, "fd00::3/64", false)
	h.delLink(11, false)
	h.setLink(fakeLink{index: 12, name: "veth2", mtu: 1500, kind: "veth"}, false)
	h.setLink(fakeLink{index: 1, name: "lo", adminUp: true, carrier: true, mtu: 1280, kind: "device"}, false)

	overflow := fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow)
	h.resync(overflow)
	assert.Equal(t, []string{
		"link veth1 #11 gone mtu=1500 veth",
		"addrs eth0 [10.0.0.2/24 fd00::3/64]",
		"link lo #1 up mtu=1280 device",
		"link veth2 #12 down mtu=1500 veth",
	}, h.rec.take())
	h.requireConverged()

	h.resync(fmt.Errorf("closed: %w", nlutil.ErrSubscriptionLost))
	assert.Empty(t, h.rec.take(), "nothing changed")
	s := h.mon.Stats()
	assert.Equal(t, uint64(3), s.Resyncs)
	assert.Equal(t, uint64(2), s.SubscriptionLosses)
	assert.Equal(t, uint64(1), s.Overflows)
	assert.Equal(t, uint64(3), s.Relists)
}

// Two links swap names while events are lost: a consumer keyed by name
// sees both names released before either is taken again.
func TestResyncNameSwap(t *testing.T) {
	h := newHarness(t, Options{})
	a := fakeLink{index: 1, name: "a", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	b := fakeLink{index: 2, name: "b", mtu: 1500, kind: "veth"}
	h.setLink(a, false)
	h.setLink(b, false)
	h.addAddr(1, "10.0.0.1/32", false)
	h.start()
	h.rec.take()
	a.name, b.name = "b", "a"
	h.setLink(a, false)
	h.setLink(b, false)
	h.resync(nil)
	assert.Equal(t, []string{
		"addrs a []",
		"link a #1 gone mtu=1500 veth",
		"link b #2 gone mtu=1500 veth",
		"link a #2 down mtu=1500 veth from=b",
		"link b #1 up mtu=1500 veth from=a",
		"addrs b [10.0.0.1/32]",
	}, h.rec.take())
	h.requireConverged()
	assert.Empty(t, h.rec.contractErrors())
}

// After a re-list, events older than the listing replay; the consumer's
// view never holds two interfaces under one name and ends equal to the
// kernel's.
func TestStaleEventsAfterRelist(t *testing.T) {
	h := newHarness(t, Options{})
	five := fakeLink{index: 5, name: "y", mtu: 1500, kind: "veth"}
	six := fakeLink{index: 6, name: "x", mtu: 1500, kind: "veth"}
	h.setLink(five, false)
	h.setLink(six, false)
	h.start()
	h.rec.take()
	// The history the listing already shows: 5 was "x", was renamed
	// "y", then 6 was created as "x".
	staleFive := five
	staleFive.name = "x"
	h.send(linkEvent(staleFive, unix.RTM_NEWLINK))
	h.send(linkEvent(five, unix.RTM_NEWLINK))
	h.send(linkEvent(six, unix.RTM_NEWLINK))
	h.sync()
	h.requireConverged()
	assert.Empty(t, h.rec.contractErrors())
}

func TestPeriodicResync(t *testing.T) {
	h := newHarness(t, Options{ResyncInterval: 90 * time.Second})
	fillBasic(h)
	h.start()
	h.rec.take()
	next, ok := h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, 90*time.Second, next.Sub(h.clk.Now()))

	h.addAddr(2, "10.0.0.3/24", false) // lost
	h.clk.Advance(90 * time.Second)
	h.waitStats("periodic re-list", func(s Stats) bool { return s.PeriodicRelists == 1 && s.Relists == 2 })
	assert.Equal(t, []string{"addrs eth0 [10.0.0.2/24 10.0.0.3/24 fd00::2/64]"}, h.rec.take())
	h.requireConverged()
	next, ok = h.clk.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, 90*time.Second, next.Sub(h.clk.Now()), "re-armed after the re-list")

	// A Resync-driven full re-list postpones the periodic one.
	h.clk.Advance(30 * time.Second)
	h.resync(nil)
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
		{"other errors back off", errors.New("EBADF"), []time.Duration{relistBackoffMin, 2 * relistBackoffMin, 4 * relistBackoffMin}},
		{"interrupted dumps retry soon", fmt.Errorf("nlutil: list links: %w", netlink.ErrDumpInterrupted), []time.Duration{relistBackoffMin, relistBackoffMin, relistBackoffMin}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			fillBasic(h)
			for range tc.waits {
				h.src.failNext("links", tc.err)
			}
			h.startNoSync()
			h.send(nlutil.Event{Resync: &nlutil.Resync{Kinds: h.mon.kinds}})
			for i, wait := range tc.waits {
				h.waitStats("failed re-list", func(s Stats) bool { return s.RelistErrors == uint64(i+1) })
				assert.False(t, h.mon.Stats().InSync)
				require.NoError(t, h.clk.BlockUntil(context.Background(), 1))
				next, ok := h.clk.NextDeadline()
				require.True(t, ok)
				assert.Equal(t, wait, next.Sub(h.clk.Now()), "wait %d", i)
				h.clk.Advance(wait)
			}
			h.waitInSync()
			assert.Equal(t, len(tc.waits)+1, h.src.listCount("links"))
			assert.Equal(t, 1, h.src.listCount("addrs"), "the address dump succeeded the first time")
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
		cost time.Duration // per dump; a full re-list makes two
		wait time.Duration
	}{
		{"twice the duration", 100 * time.Millisecond, relistSpacing * 2 * 100 * time.Millisecond},
		{"capped", 2 * time.Second, maxRelistSpacing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			fillBasic(h)
			h.src.cost, h.src.clk = tc.cost, h.clk
			h.start()
			h.rec.take()

			h.addAddr(2, "10.0.0.9/24", false)
			overflow := fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow)
			h.send(nlutil.Event{Resync: &nlutil.Resync{Kinds: h.mon.kinds, Reason: overflow}})
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
	up := fakeLink{index: 10, name: "veth0", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	down := up
	down.carrier = false
	tests := []struct {
		name  string
		run   func(h *harness) // after the start with veth0 up
		final []string         // lines after the window has passed
	}{
		{
			name: "a short flap reports nothing",
			run: func(h *harness) {
				h.setLink(down, true)
				h.sync()
				h.clk.Advance(window / 2)
				h.setLink(up, true)
				h.sync()
			},
		},
		{
			name: "a down that lasts is reported when the window ends",
			run: func(h *harness) {
				h.setLink(down, true)
				h.sync()
			},
			final: []string{"link veth0 #10 down mtu=1500 veth"},
		},
		{
			name: "gone is not delayed",
			run: func(h *harness) {
				h.setLink(down, true)
				h.delLink(10, true)
				h.sync()
				assert.Equal(t, []string{"link veth0 #10 gone mtu=1500 veth"}, h.rec.take())
			},
		},
		{
			name: "other changes are reported at once, as up",
			run: func(h *harness) {
				d := down
				d.mtu = 9000
				h.setLink(d, true)
				h.sync()
				assert.Equal(t, []string{"link veth0 #10 up mtu=9000 veth"}, h.rec.take())
			},
			final: []string{"link veth0 #10 down mtu=9000 veth"},
		},
		{
			name: "a second down restarts the window",
			run: func(h *harness) {
				h.setLink(down, true)
				h.sync()
				h.clk.Advance(window - time.Second)
				h.setLink(up, true)
				h.setLink(down, true)
				h.sync()
				h.clk.Advance(time.Second) // the first window's end
				h.sync()
			},
			final: []string{"link veth0 #10 down mtu=1500 veth"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{FlapDampingWindow: window})
			h.setLink(up, false)
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
			assert.Equal(t, tc.final, h.rec.take())
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
	l := fakeLink{index: 10, name: "veth0", mtu: 1500, kind: "veth"}
	runSteps(t, h, []step{
		{"new and down", func(h *harness) { h.setLink(l, true) }, []string{"link veth0 #10 down mtu=1500 veth"}},
		{"up", func(h *harness) {
			l.adminUp, l.carrier = true, true
			h.setLink(l, true)
		}, []string{"link veth0 #10 up mtu=1500 veth"}},
	})
}

func routeEvent(r netlink.Route, typ uint16, flags uint16) nlutil.Event {
	return nlutil.Event{Route: &netlink.RouteUpdate{Type: typ, NlFlags: flags, Route: r}}
}

func nlRoute(table int, dst string, dev int) netlink.Route {
	p := netip.MustParsePrefix(dst)
	family := unix.AF_INET
	if p.Addr().Is6() {
		family = unix.AF_INET6
	}
	return netlink.Route{Family: family, Table: table, Dst: ipNet(p), LinkIndex: dev, Type: unix.RTN_UNICAST, Scope: netlink.SCOPE_LINK}
}

func (h *harness) setRoute(r netlink.Route, emit bool, flags uint16) {
	rt, ok := routeFrom(r)
	require.True(h.t, ok)
	h.src.mu.Lock()
	h.src.routeTab[rt.Key()] = r
	h.src.mu.Unlock()
	if emit {
		h.send(routeEvent(r, unix.RTM_NEWROUTE, flags))
	}
}

func (h *harness) delRoute(r netlink.Route, emit bool) {
	rt, ok := routeFrom(r)
	require.True(h.t, ok)
	h.src.mu.Lock()
	delete(h.src.routeTab, rt.Key())
	h.src.mu.Unlock()
	if emit {
		h.send(routeEvent(r, unix.RTM_DELROUTE, 0))
	}
}

func (h *harness) requireRoutesConverged() {
	h.t.Helper()
	h.src.mu.Lock()
	want := map[RouteKey]Route{}
	for _, r := range h.src.routeTab {
		rt, ok := routeFrom(r)
		require.True(h.t, ok)
		want[rt.Key()] = rt
	}
	h.src.mu.Unlock()
	assert.Equal(h.t, want, h.rec.routeView(), "consumer's routes")
	got := map[RouteKey]Route{}
	for _, r := range h.mon.Snapshot().Routes {
		got[r.Key()] = r
	}
	assert.Equal(h.t, want, got, "Snapshot routes")
}

func TestRoutes(t *testing.T) {
	h := newHarness(t, Options{WatchRoutes: true})
	veth := fakeLink{index: 10, name: "veth0", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}
	h.setLink(veth, false)
	h.setLink(fakeLink{index: 11, name: "veth1", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}, false)
	h.setRoute(nlRoute(unix.RT_TABLE_MAIN, "10.1.0.0/24", 10), false, 0)
	h.setRoute(nlRoute(unix.RT_TABLE_MAIN, "fd00:1::/64", 10), false, 0)
	h.start()
	assert.Equal(t, []string{
		"link veth0 #10 up mtu=1500 veth",
		"link veth1 #11 up mtu=1500 veth",
		"route + table=254 10.1.0.0/24 dev=10",
		"route + table=254 fd00:1::/64 dev=10",
		"in-sync",
	}, h.rec.take())
	h.requireRoutesConverged()

	routeSteps := []step{
		{"add", func(h *harness) { h.setRoute(nlRoute(100, "10.2.0.0/16", 10), true, unix.NLM_F_CREATE) },
			[]string{"route + table=100 10.2.0.0/16 dev=10"}},
		{"replace moves it to another link", func(h *harness) {
			h.delRoute(nlRoute(100, "10.2.0.0/16", 10), false)
			h.setRoute(nlRoute(100, "10.2.0.0/16", 11), true, unix.NLM_F_REPLACE)
		}, []string{"route - table=100 10.2.0.0/16 dev=10", "route + table=100 10.2.0.0/16 dev=11"}},
		{"attribute change", func(h *harness) {
			r := nlRoute(100, "10.2.0.0/16", 11)
			r.Protocol = unix.RTPROT_STATIC
			h.setRoute(r, true, unix.NLM_F_REPLACE)
		}, []string{"route + table=100 10.2.0.0/16 dev=11"}},
		{"cloned routes are ignored", func(h *harness) {
			r := nlRoute(unix.RT_TABLE_MAIN, "fd00:9::1/128", 10)
			r.Flags = unix.RTM_F_CLONED
			h.send(routeEvent(r, unix.RTM_NEWROUTE, 0))
		}, nil},
		{"delete", func(h *harness) { h.delRoute(nlRoute(unix.RT_TABLE_MAIN, "fd00:1::/64", 10), true) },
			[]string{"route - table=254 fd00:1::/64 dev=10"}},
		{"admin down flushes IPv4 routes silently; a route re-list finds it", func(h *harness) {
			h.delRoute(nlRoute(unix.RT_TABLE_MAIN, "10.1.0.0/24", 10), false)
			veth.adminUp = false
			h.setLink(veth, true)
		}, []string{"link veth0 #10 down mtu=1500 veth", "route - table=254 10.1.0.0/24 dev=10"}},
	}
	for _, s := range routeSteps {
		s.do(h)
		h.sync()
		assert.Equal(t, s.want, h.rec.take(), "step %q", s.name)
		h.requireRoutesConverged()
	}
	assert.Equal(t, 2, h.src.listCount("routes"), "one re-list after the admin down")
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
	h.setLink(fakeLink{index: 10, name: "boom", mtu: 1500, kind: "veth"}, true)
	h.setLink(fakeLink{index: 11, name: "fine", mtu: 1500, kind: "veth"}, true)
	h.sync()
	assert.Equal(t, []string{"in-sync", "link fine #11 down mtu=1500 veth"}, h.rec.take())
	assert.Equal(t, uint64(1), h.mon.Stats().CallbackPanics)
	_, ok := h.mon.Snapshot().Interface("boom")
	assert.True(t, ok, "the monitor counts boom as reported")
}

func TestStopsOnCancel(t *testing.T) {
	h := newHarness(t, Options{ResyncInterval: time.Minute, FlapDampingWindow: time.Second})
	h.setLink(fakeLink{index: 10, name: "veth0", adminUp: true, carrier: true, mtu: 1500, kind: "veth"}, false)
	h.start()
	h.setLink(fakeLink{index: 10, name: "veth0", mtu: 1500, kind: "veth"}, true)
	h.sync()
	require.Equal(t, 2, h.clk.Waiters(), "resync and damping timers armed")
	h.stop()
	select {
	case <-h.mon.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("monitor did not stop")
	}
	assert.Zero(t, h.clk.Waiters(), "timers stopped")
	requireNoLeaks(t)
}

// A random history of changes, a fifth of whose events are lost, with
// occasional overflows: after a final resync the consumer's view equals the
// kernel's, and the name contract held throughout.
func TestRandomHistoryConverges(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		for _, damping := range []time.Duration{0, time.Second} {
			t.Run(fmt.Sprintf("seed=%d/damping=%v", seed, damping), func(t *testing.T) {
				h := newHarness(t, Options{Exclude: []string{"^hidden"}, FlapDampingWindow: damping})
				h.start()
				rnd := rand.New(rand.NewPCG(seed, 42))
				names := []string{"a", "b", "c", "d", "hidden0", "hidden1"}
				nextIdx := 2
				used := func(name string) bool {
					h.src.mu.Lock()
					defer h.src.mu.Unlock()
					for _, l := range h.src.linkTab {
						if l.name == name {
							return true
						}
					}
					return false
				}
				someLink := func() (fakeLink, bool) {
					h.src.mu.Lock()
					defer h.src.mu.Unlock()
					for _, l := range h.src.linkTab { // random enough
						return l, true
					}
					return fakeLink{}, false
				}
				for range 400 {
					emit := rnd.IntN(5) != 0
					switch op := rnd.IntN(8); {
					case op == 0:
						if n := names[rnd.IntN(len(names))]; !used(n) {
							h.setLink(fakeLink{index: nextIdx, name: n, mtu: 1500, kind: "veth"}, emit)
							nextIdx++
						}
					case op == 1:
						if l, ok := someLink(); ok {
							h.delLink(l.index, emit)
						}
					case op == 2:
						if l, ok := someLink(); ok {
							if n := names[rnd.IntN(len(names))]; !used(n) {
								l.name = n
								h.setLink(l, emit)
							}
						}
					case op == 3:
						if l, ok := someLink(); ok {
							l.adminUp, l.carrier = rnd.IntN(2) == 0, rnd.IntN(2) == 0
							h.setLink(l, emit)
						}
					case op == 4:
						if l, ok := someLink(); ok {
							l.mtu = 1400 + rnd.IntN(3)*100
							h.setLink(l, emit)
						}
					case op == 5 || op == 6:
						if l, ok := someLink(); ok {
							a := fmt.Sprintf("10.0.%d.%d/24", l.index%256, rnd.IntN(4))
							if op == 5 {
								h.addAddr(l.index, a, emit)
							} else {
								h.delAddr(l.index, a, emit)
							}
						}
					case op == 7 && rnd.IntN(4) == 0:
						h.resync(fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow))
					}
					if damping > 0 && rnd.IntN(10) == 0 {
						h.sync()
						h.clk.Advance(time.Duration(rnd.IntN(1500)) * time.Millisecond)
					}
				}
				h.resync(fmt.Errorf("%w: %w", nlutil.ErrSubscriptionLost, nlutil.ErrOverflow))
				if damping > 0 {
					h.clk.Advance(damping)
					require.Eventually(t, func() bool {
						want := h.kernelView()
						return assert.ObjectsAreEqual(want, viewMap(h.mon.Snapshot())) && assert.ObjectsAreEqual(want, h.rec.view())
					}, 10*time.Second, time.Millisecond, "held-back reports made")
				}
				h.requireConverged()
				assert.Empty(t, h.rec.contractErrors())
			})
		}
	}
}
