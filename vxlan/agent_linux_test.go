//go:build linux

package vxlan_test

import (
	"context"
	"errors"
	"github.com/nodeplane/nodeplane/cluster"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

// kresync is the agents' refresh interval in the kernel tests: what an
// external deletion waits for at most before it is repaired.
const kresync = 300 * time.Millisecond

// agent is one host's node agent: a dataplane.Loop with a vxlan Manager,
// its Driver, a main-table routetable.Table and an ipset driver per
// family, fed by an ifacemonitor, on the host's namespace behind a
// counting wrapper.
type agent struct {
	t      *testing.T
	host   *kerneltest.Host
	k      *kernel.Namespace
	count  *overlaytest.Counting
	loop   *dataplane.Loop
	mgrs   map[vxlan.Family]*overlay.Manager
	tables map[vxlan.Family]*routetable.Table
	inSync chan struct{}
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// kernelVTEP returns host h's VTEP: its underlay addresses, tunnel
// addresses .250 (::fa) of its pod CIDRs, and fixed MACs.
func kernelVTEP(h *kerneltest.Host) cluster.Node {
	v := cluster.Node{Name: h.Name, UnderlayV4: h.UnderlayIPv4.Addr(), UnderlayV6: h.UnderlayIPv6.Addr()}
	if h.PodCIDRv4.IsValid() {
		a := h.PodCIDRv4.Addr().As4()
		a[3] = 250
		v.TunnelV4, v.VXLANMACV4 = netip.AddrFrom4(a), cluster.MAC(net.HardwareAddr{0x02, 0xbb, 4, 0, 0, byte(h.Number)})
	}
	if h.PodCIDRv6.IsValid() {
		a := h.PodCIDRv6.Addr().As16()
		a[15] = 0xfa
		v.TunnelV6, v.VXLANMACV6 = netip.AddrFrom16(a), cluster.MAC(net.HardwareAddr{0x02, 0xbb, 6, 0, 0, byte(h.Number)})
	}
	return v
}

// clusterMsgs are the messages every agent of the topology gets: every
// host's VTEP and blocks.
func clusterMsgs(tp *kerneltest.Topology) []any {
	var msgs []any
	for _, h := range tp.Hosts {
		msgs = append(msgs, kernelVTEP(h))
		for _, c := range []netip.Prefix{h.PodCIDRv4, h.PodCIDRv6} {
			if c.IsValid() {
				msgs = append(msgs, cluster.Block{CIDR: c, Node: h.Name})
			}
		}
	}
	return msgs
}

// startAgent starts host's agent for fams with mode and sends it msgs
// before the in-sync markers; it stops when the test ends.
func startAgent(t *testing.T, host *kerneltest.Host, crossSubnet bool, fams []vxlan.Family, msgs []any) *agent {
	t.Helper()
	k, err := kernel.Open(host.NS.Path())
	require.NoError(t, err)
	a := &agent{t: t, host: host, k: k, count: overlaytest.Wrap(k), inSync: make(chan struct{}),
		mgrs: map[vxlan.Family]*overlay.Manager{}, tables: map[vxlan.Family]*routetable.Table{}}
	var once sync.Once
	a.loop, err = dataplane.New(dataplane.Options{ResyncInterval: kresync, OnInSync: func() { once.Do(func() { close(a.inSync) }) }})
	require.NoError(t, err)
	for _, fam := range fams {
		tbl, err := routetable.New(routetable.Options{Kernel: a.count, Family: fam, Table: kernel.TableMain})
		require.NoError(t, err)
		prefix := "np4-"
		if fam == vxlan.IPv6 {
			prefix = "np6-"
		}
		sets, err := ipsets.New(ipsets.Options{Family: fam, Prefix: prefix, Kernel: a.count})
		require.NoError(t, err)
		m, err := overlay.New(overlay.Options{Family: fam, NodeName: host.Name, Kernel: a.count, Routes: tbl, Sets: sets,
			Encap: overlay.VXLAN{}, CrossSubnet: crossSubnet})
		require.NoError(t, err)
		require.NoError(t, a.loop.AddManager(m))
		require.NoError(t, a.loop.AddDriver(m.Driver()))
		require.NoError(t, a.loop.AddDriver(tbl))
		require.NoError(t, a.loop.AddDriver(sets))
		a.mgrs[fam], a.tables[fam] = m, tbl
	}
	mon, err := ifacemonitor.New(ifacemonitor.Options{
		Kernel: k,
		// The loop hands every update to the route tables and the
		// managers, its interface observers.
		OnLinkState: func(u ifacemonitor.LinkUpdate) { a.loop.OnLink(u.Link(), u.State) },
		OnAddrs:     a.loop.OnAddrs,
		OnInSync:    a.loop.InterfacesInSync,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	for _, msg := range msgs {
		require.NoError(t, a.loop.Send(ctx, msg))
	}
	a.loop.DatastoreInSync()
	a.done.Add(2)
	go func() { defer a.done.Done(); _ = a.loop.Run(ctx) }()
	go func() { defer a.done.Done(); _ = mon.Run(ctx) }()
	t.Cleanup(a.stop)
	select {
	case <-a.inSync:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: agent not in sync after 30 s: %+v", host.Name, a.loop.Health())
	}
	return a
}

// stop stops the agent and closes its namespace handle; the kernel keeps
// what it programmed.
func (a *agent) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.done.Wait()
	a.cancel = nil
	_ = a.k.Close()
}

func (a *agent) send(msgs ...any) {
	for _, m := range msgs {
		require.NoError(a.t, a.loop.Send(context.Background(), m))
	}
}

// txPackets returns the transmitted-packet counter of the host's link
// called name.
func txPackets(t *testing.T, h *kerneltest.Host, name string) uint64 {
	t.Helper()
	l, err := h.NS.Handle().LinkByName(name)
	require.NoError(t, err)
	return l.Attrs().Statistics.TxPackets
}

// eventually waits until cond holds, failing with msg after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var pingStats = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)

// pingLoss parses ping's summary.
func pingLoss(out []byte) (sent, lost int, err error) {
	m := pingStats.FindSubmatch(out)
	if m == nil {
		return 0, 0, errors.New("no summary in ping's output")
	}
	s, _ := strconv.Atoi(string(m[1]))
	r, _ := strconv.Atoi(string(m[2]))
	return s, s - r, nil
}
