//go:build linux

package mtu_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
	"github.com/nodeplane/nodeplane/mtu"
)

// waitFor bounds the waits of the kernel tests; it is never asserted on.
const waitFor = 10 * time.Second

// addVeth creates the veth pair name/peer with the given MTU on both ends
// in the namespace of h. The peer is always up, so name has a carrier when
// it is up.
func addVeth(t *testing.T, h *netlink.Handle, name, peer string, mtuValue int, up bool) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtuValue}, PeerName: peer, PeerMTU: uint32(mtuValue)}
	require.NoError(t, h.LinkAdd(veth))
	p, err := h.LinkByName(peer)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(p))
	if up {
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, h.LinkSetUp(l))
		waitRunning(t, h, name)
	}
}

// waitRunning waits until the kernel reports name as running: the carrier
// of a freshly set-up link is reported asynchronously.
func waitRunning(t *testing.T, h *netlink.Handle, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := h.LinkByName(name)
		return err == nil && l.Attrs().Flags&net.FlagRunning != 0
	}, waitFor, time.Millisecond, "%s never became operational", name)
}

// addBridge creates a bridge with no ports (this kernel has no dummy
// interfaces), up, with the given MTU.
func addBridge(t *testing.T, h *netlink.Handle, name string, mtuValue int) {
	t.Helper()
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtuValue}}))
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(l))
	waitRunning(t, h, name)
}

func setMTU(t *testing.T, h *netlink.Handle, name string, mtuValue int) {
	t.Helper()
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMTU(l, mtuValue))
}

func TestKernelNetlinkLister(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	addVeth(t, h, "eth1", "veth1", 9000, true)
	addVeth(t, h, "eth3", "veth3", 1300, false)
	addBridge(t, h, "br-np", 1400)

	links, err := mtu.NetlinkLister{Handle: h}.Links(context.Background())
	require.NoError(t, err)
	byName := map[string]mtu.Link{}
	for _, l := range links {
		byName[l.Name] = l
	}
	require.Len(t, byName, 6, "lo, two veth pairs and the bridge: %v", links)
	assert.Equal(t, mtu.Link{Name: "lo", Index: byName["lo"].Index, MTU: 65536, Up: true, Type: "device"}, byName["lo"])
	assert.Equal(t, mtu.Link{Name: "eth1", Index: byName["eth1"].Index, MTU: 9000, Up: true, Type: "veth"}, byName["eth1"])
	assert.Equal(t, mtu.Link{Name: "eth3", Index: byName["eth3"].Index, MTU: 1300, Up: false, Type: "veth"}, byName["eth3"])
	assert.Equal(t, mtu.Link{Name: "br-np", Index: byName["br-np"].Index, MTU: 1400, Up: true, Type: "bridge"}, byName["br-np"],
		"an empty bridge has no carrier to lose and counts as up")
	for _, l := range links {
		assert.Positive(t, l.Index, l.Name)
	}

	_, err = mtu.NetlinkLister{}.Links(context.Background())
	require.ErrorIs(t, err, mtu.ErrInvalid, "no silent fallback to the caller's namespace")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = mtu.NetlinkLister{Handle: h}.Links(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestKernelDetect(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	addVeth(t, h, "eth1", "veth1", 9000, true)
	addVeth(t, h, "eth2", "veth2", 1500, true)
	addVeth(t, h, "eth3", "veth3", 1300, false) // administratively down
	addBridge(t, h, "br-np", 1400)              // excluded by default (^br-)

	// eth4 is up but its peer is down: no carrier, not running.
	require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth4", MTU: 1200}, PeerName: "veth4", PeerMTU: 1200}))
	eth4, err := h.LinkByName("eth4")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(eth4))

	tests := []struct {
		name string
		opts mtu.DetectorOptions
		want mtu.HostMTU
	}{
		{"defaults: the smallest up uplink", mtu.DetectorOptions{}, mtu.HostMTU{MTU: 1500, Interface: "eth2"}},
		{"include one", mtu.DetectorOptions{Include: []string{"^eth1$"}}, mtu.HostMTU{MTU: 9000, Interface: "eth1"}},
		{"exclude one", mtu.DetectorOptions{Exclude: append(mtu.DefaultExclude(), "^eth2$")}, mtu.HostMTU{MTU: 9000, Interface: "eth1"}},
		{"bridge no longer excluded", mtu.DetectorOptions{Exclude: []string{"^lo$", "^veth"}}, mtu.HostMTU{MTU: 1400, Interface: "br-np"}},
		{"down links included", mtu.DetectorOptions{IncludeDown: true}, mtu.HostMTU{MTU: 1200, Interface: "eth4"}},
		{"nothing matches", mtu.DetectorOptions{Include: []string{"^bond"}}, mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true}},
		{"only excluded links", mtu.DetectorOptions{Include: []string{"^veth", "^lo$"}}, mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Lister = mtu.NetlinkLister{Handle: h}
			d, err := mtu.NewDetector(tc.opts)
			require.NoError(t, err)
			got, err := d.Detect(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// recorder collects OnChange calls.
type recorder struct {
	mu      sync.Mutex
	changes [][2]mtu.Result
}

func (r *recorder) onChange(old, cur mtu.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, [2]mtu.Result{old, cur})
}

func (r *recorder) all() [][2]mtu.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]mtu.Result(nil), r.changes...)
}

// requireChanges waits until the recorder holds exactly want.
func (r *recorder) requireChanges(t *testing.T, want ...[2]mtu.Result) {
	t.Helper()
	require.Eventually(t, func() bool { return len(r.all()) >= len(want) }, waitFor, 5*time.Millisecond,
		"want %d changes, have %v", len(want), r.all())
	assert.Equal(t, want, r.all())
}

func result(host int, iface string, pod int) mtu.Result {
	return mtu.Result{Host: mtu.HostMTU{MTU: host, Interface: iface}, PodMTU: pod}
}

func startMonitor(t *testing.T, m *mtu.Monitor) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(waitFor):
			t.Error("Monitor.Run did not return after cancel")
		}
	})
}

// TestKernelMonitorLinkEvents wires the Monitor as an agent would: a link
// subscription in the namespace calls Trigger on every link event (the job
// of ifacemonitor), and the poll is too slow to matter.
func TestKernelMonitorLinkEvents(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	addVeth(t, h, "eth1", "veth1", 9000, true)
	addVeth(t, h, "eth2", "veth2", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{Handle: h}})
	require.NoError(t, err)
	var rec recorder
	m, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector:     det,
		PodMTU:       mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.VXLAN}},
		PollInterval: time.Hour,
		OnChange:     rec.onChange,
	})
	require.NoError(t, err)

	updates := make(chan netlink.LinkUpdate, 64)
	stop := make(chan struct{})
	nsh := ns.NsHandle()
	require.NoError(t, netlink.LinkSubscribeWithOptions(updates, stop, netlink.LinkSubscribeOptions{Namespace: &nsh}))
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for range updates {
			m.Trigger()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		// The subscription's reader wakes up on the next event and sees its
		// socket closed; make one.
		_ = h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-wake"}})
		select {
		case <-forwarded:
		case <-time.After(waitFor):
			t.Error("link subscription did not stop")
		}
	})
	startMonitor(t, m)

	initial := result(1500, "eth2", 1450)
	rec.requireChanges(t, [2]mtu.Result{{}, initial})

	setMTU(t, h, "eth2", 1450)
	lowered := result(1450, "eth2", 1400)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered})

	// eth1 drops below eth2.
	setMTU(t, h, "eth1", 1400)
	viaEth1 := result(1400, "eth1", 1350)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered}, [2]mtu.Result{lowered, viaEth1})

	// eth1 goes down: eth2 is the minimum again.
	eth1, err := h.LinkByName("eth1")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetDown(eth1))
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered}, [2]mtu.Result{lowered, viaEth1},
		[2]mtu.Result{viaEth1, lowered})

	// A new uplink appears with a smaller MTU.
	addVeth(t, h, "eth5", "veth5", 1300, true)
	viaEth5 := result(1300, "eth5", 1250)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered}, [2]mtu.Result{lowered, viaEth1},
		[2]mtu.Result{viaEth1, lowered}, [2]mtu.Result{lowered, viaEth5})

	cur, ok := m.Current()
	require.True(t, ok)
	assert.Equal(t, viaEth5, cur)
}

// TestKernelMonitorPollAndTrigger changes MTUs while the Monitor runs and
// relies on an explicit Trigger, then on the poll alone.
func TestKernelMonitorPollAndTrigger(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	addVeth(t, h, "eth1", "veth1", 9000, true)
	addVeth(t, h, "eth2", "veth2", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{Handle: h}})
	require.NoError(t, err)
	var rec recorder
	m, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector:     det,
		PodMTU:       mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.WireGuard}, PodIPv6: true},
		PollInterval: 20 * time.Millisecond,
		OnChange:     rec.onChange,
	})
	require.NoError(t, err)
	startMonitor(t, m)

	initial := result(1500, "eth2", 1440)
	rec.requireChanges(t, [2]mtu.Result{{}, initial})

	// Found by the poll.
	setMTU(t, h, "eth2", 9000)
	jumbo := result(9000, "eth1", 8940)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, jumbo})

	// Found at once or by the poll, whichever comes first.
	setMTU(t, h, "eth1", 1500)
	m.Trigger()
	back := result(1500, "eth1", 1440)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, jumbo}, [2]mtu.Result{jumbo, back})
}

// TestKernelMonitorNamespaceGone removes the namespace under a running
// Monitor: detections fail, the last values stay, nothing is reported.
func TestKernelMonitorNamespaceGone(t *testing.T) {
	ns := kerneltest.NewNS(t)
	h := ns.Handle()
	addVeth(t, h, "eth1", "veth1", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{Handle: h}})
	require.NoError(t, err)
	var rec recorder
	var logs syncLog
	m, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector:      det,
		PollInterval:  time.Hour,
		RetryInterval: 10 * time.Millisecond,
		OnChange:      rec.onChange,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	startMonitor(t, m)
	first := result(1500, "eth1", 1500)
	rec.requireChanges(t, [2]mtu.Result{{}, first})

	require.NoError(t, ns.Close())
	m.Trigger()
	require.Eventually(t, func() bool { return bytes.Count(logs.bytes(), []byte("detection failed")) >= 2 }, waitFor, 5*time.Millisecond,
		"failures are logged and retried")
	cur, ok := m.Current()
	require.True(t, ok)
	assert.Equal(t, first, cur)
	assert.Len(t, rec.all(), 1)
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
