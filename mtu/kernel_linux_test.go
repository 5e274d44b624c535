//go:build linux

package mtu_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
)

// waitFor bounds the waits of the kernel tests; it is never asserted on.
const waitFor = 10 * time.Second

// Kernel tests: each runs in a fresh network namespace from kerneltest,
// opened with kernel.Open, and touches nothing outside it.

// node opens a fresh test namespace.
func node(t *testing.T) *kernel.Namespace {
	t.Helper()
	kns := kerneltest.NewNS(t)
	ns, err := kernel.Open(kns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// addVeth creates the veth pair name/peer with the given MTU on name in
// ns. The peer is always up, so name has a carrier when it is up.
func addVeth(t *testing.T, ns *kernel.Namespace, name, peer string, mtuValue int, up bool) {
	t.Helper()
	ctx := context.Background()
	_, err := ns.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, MTU: mtuValue, Veth: &kernel.Veth{PeerName: peer}})
	require.NoError(t, err)
	setUp(t, ns, peer, true)
	if up {
		setUp(t, ns, name, true)
		waitRunning(t, ns, name)
	}
}

// waitRunning waits until the kernel reports name as running: the carrier
// of a freshly set-up link is reported asynchronously.
func waitRunning(t *testing.T, ns *kernel.Namespace, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		l, err := ns.LinkByName(context.Background(), name)
		return err == nil && l.Running
	}, waitFor, time.Millisecond, "%s never became operational", name)
}

// addBridge creates a bridge with no ports (this kernel has no dummy
// interfaces), up, with the given MTU.
func addBridge(t *testing.T, ns *kernel.Namespace, name string, mtuValue int) {
	t.Helper()
	_, err := ns.AddLink(context.Background(), kernel.Link{Name: name, Kind: kernel.KindBridge, MTU: mtuValue})
	require.NoError(t, err)
	setUp(t, ns, name, true)
	waitRunning(t, ns, name)
}

func index(t *testing.T, ns *kernel.Namespace, name string) int {
	t.Helper()
	l, err := ns.LinkByName(context.Background(), name)
	require.NoError(t, err)
	return l.Index
}

func setUp(t *testing.T, ns *kernel.Namespace, name string, up bool) {
	t.Helper()
	require.NoError(t, ns.SetLinkUp(context.Background(), index(t, ns, name), up))
}

func setMTU(t *testing.T, ns *kernel.Namespace, name string, mtuValue int) {
	t.Helper()
	require.NoError(t, ns.SetLinkMTU(context.Background(), index(t, ns, name), mtuValue))
}

func TestKernelDetectorListsLinks(t *testing.T) {
	ns := node(t)
	addVeth(t, ns, "eth1", "veth1", 9000, true)
	addVeth(t, ns, "eth3", "veth3", 1300, false)
	addBridge(t, ns, "br-np", 1400)

	links, err := ns.Links(context.Background())
	require.NoError(t, err)
	byName := map[string]kernel.Link{}
	for _, l := range links {
		byName[l.Name] = l
	}
	require.Len(t, byName, 6, "lo, two veth pairs and the bridge: %v", links)
	for name, want := range map[string]struct {
		mtu  int
		up   kernel.LinkState
		kind string
	}{
		"lo":    {65536, kernel.LinkUp, kernel.KindDevice},
		"eth1":  {9000, kernel.LinkUp, kernel.KindVeth},
		"eth3":  {1300, kernel.LinkDown, kernel.KindVeth},
		"br-np": {1400, kernel.LinkUp, kernel.KindBridge}, // an empty bridge has no carrier to lose
	} {
		l := byName[name]
		assert.Equal(t, want.mtu, l.MTU, name)
		assert.Equal(t, want.up, l.State(), name)
		assert.Equal(t, want.kind, l.Kind, name)
	}

	// What the Detector makes of them.
	d, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth", "^br-"}})
	require.NoError(t, err)
	got, err := d.Detect(context.Background())
	require.NoError(t, err)
	assert.Equal(t, mtu.HostMTU{MTU: 1400, Interface: "br-np"}, got)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = d.Detect(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, mtu.ErrListLinks)

	require.NoError(t, ns.Close())
	_, err = d.Detect(context.Background())
	require.ErrorIs(t, err, kernel.ErrClosed, "no silent fallback to the caller's namespace")
	require.ErrorIs(t, err, mtu.ErrListLinks)
}

func TestKernelDetect(t *testing.T) {
	ns := node(t)
	addVeth(t, ns, "eth1", "veth1", 9000, true)
	addVeth(t, ns, "eth2", "veth2", 1500, true)
	addVeth(t, ns, "eth3", "veth3", 1300, false) // administratively down
	addBridge(t, ns, "br-np", 1400)              // excluded by DefaultExclude (^br-)

	// eth4 is up but its peer is down: no carrier, not running.
	_, err := ns.AddLink(context.Background(), kernel.Link{Name: "eth4", Kind: kernel.KindVeth, MTU: 1200, Veth: &kernel.Veth{PeerName: "veth4"}})
	require.NoError(t, err)
	setUp(t, ns, "eth4", true)

	defaults := mtu.DefaultExclude()
	tests := []struct {
		name string
		opts mtu.DetectorOptions
		want mtu.HostMTU
	}{
		{"default excludes: the smallest up uplink", mtu.DetectorOptions{Exclude: defaults}, mtu.HostMTU{MTU: 1500, Interface: "eth2"}},
		{"no filter: the peers count too", mtu.DetectorOptions{}, mtu.HostMTU{MTU: 1400, Interface: "br-np"}},
		{"include one", mtu.DetectorOptions{Include: []string{"^eth1$"}}, mtu.HostMTU{MTU: 9000, Interface: "eth1"}},
		{"exclude one more", mtu.DetectorOptions{Exclude: append(mtu.DefaultExclude(), "^eth2$")}, mtu.HostMTU{MTU: 9000, Interface: "eth1"}},
		{"bridge no longer excluded", mtu.DetectorOptions{Exclude: []string{"^lo$", "^veth"}}, mtu.HostMTU{MTU: 1400, Interface: "br-np"}},
		{"down links included", mtu.DetectorOptions{Exclude: defaults, IncludeDown: true}, mtu.HostMTU{MTU: 1200, Interface: "eth4"}},
		{"nothing matches", mtu.DetectorOptions{Include: []string{"^bond"}}, mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true}},
		{"only excluded links", mtu.DetectorOptions{Include: []string{"^veth", "^lo$"}, Exclude: defaults}, mtu.HostMTU{MTU: mtu.FallbackMTU, FellBack: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Kernel = ns
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

// TestKernelMonitorLinkEvents wires the Monitor as an agent would: the
// namespace's link events call Trigger (the job of ifacemonitor), and the
// poll is too slow to matter.
func TestKernelMonitorLinkEvents(t *testing.T) {
	ns := node(t)
	addVeth(t, ns, "eth1", "veth1", 9000, true)
	addVeth(t, ns, "eth2", "veth2", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: mtu.DefaultExclude()})
	require.NoError(t, err)
	var rec recorder
	m, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector:     det,
		PodMTU:       mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.VXLAN}},
		PollInterval: time.Hour,
		OnChange:     rec.onChange,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	events, err := ns.Subscribe(ctx, kernel.EventLinks)
	require.NoError(t, err)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for ev := range events {
			if ev.Link != nil || ev.Resync != nil {
				m.Trigger()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-forwarded:
		case <-time.After(waitFor):
			t.Error("link subscription did not stop")
		}
	})
	startMonitor(t, m)

	initial := result(1500, "eth2", 1450)
	rec.requireChanges(t, [2]mtu.Result{{}, initial})

	setMTU(t, ns, "eth2", 1450)
	lowered := result(1450, "eth2", 1400)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered})

	// eth1 drops below eth2.
	setMTU(t, ns, "eth1", 1400)
	viaEth1 := result(1400, "eth1", 1350)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered}, [2]mtu.Result{lowered, viaEth1})

	// eth1 goes down: eth2 is the minimum again.
	setUp(t, ns, "eth1", false)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, lowered}, [2]mtu.Result{lowered, viaEth1},
		[2]mtu.Result{viaEth1, lowered})

	// A new uplink appears with a smaller MTU.
	addVeth(t, ns, "eth5", "veth5", 1300, true)
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
	ns := node(t)
	addVeth(t, ns, "eth1", "veth1", 9000, true)
	addVeth(t, ns, "eth2", "veth2", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth"}})
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
	setMTU(t, ns, "eth2", 9000)
	jumbo := result(9000, "eth1", 8940)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, jumbo})

	// Found at once or by the poll, whichever comes first.
	setMTU(t, ns, "eth1", 1500)
	m.Trigger()
	back := result(1500, "eth1", 1440)
	rec.requireChanges(t, [2]mtu.Result{{}, initial}, [2]mtu.Result{initial, jumbo}, [2]mtu.Result{jumbo, back})
}

// TestKernelMonitorNamespaceClosed closes the namespace under a running
// Monitor: detections fail (never falling back to the process's
// namespace), the last values stay, nothing is reported.
func TestKernelMonitorNamespaceClosed(t *testing.T) {
	ns := node(t)
	addVeth(t, ns, "eth1", "veth1", 1500, true)

	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Include: []string{"^eth"}})
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
	assert.Contains(t, string(logs.bytes()), "namespace closed")
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
