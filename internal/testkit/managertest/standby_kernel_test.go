//go:build linux

package managertest_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/serviceloop"
	"github.com/nodeplane/nodeplane/sysctls"
)

// converge bounds every wait; a bound on a hung test, not a timing
// assertion.
const converge = 30 * time.Second

// writeCounter is a kernel.Namespace whose netlink and sysctl writes are
// counted.
type writeCounter struct {
	*kernel.Namespace
	mu     sync.Mutex
	writes []string
}

func (w *writeCounter) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, fmt.Sprintf(format, args...))
}

func (w *writeCounter) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func (w *writeCounter) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	w.note("routes %d", len(ops))
	return w.Namespace.ApplyRoutes(ctx, ops)
}

func (w *writeCounter) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	w.note("neighbours %d", len(ops))
	return w.Namespace.ApplyNeighbors(ctx, ops)
}

func (w *writeCounter) SetSysctl(ctx context.Context, key, value string) error {
	w.note("sysctl %s=%s", key, value)
	return w.Namespace.SetSysctl(ctx, key, value)
}

func (w *writeCounter) DeleteConntrack(ctx context.Context, f kernel.Family, addrs []netip.Addr) (int, error) {
	w.note("conntrack %v", addrs)
	return w.Namespace.DeleteConntrack(ctx, f, addrs)
}

// passWatch is the test's Metrics: it counts standby and apply passes and
// driver applies.
type passWatch struct {
	dataplane.NopMetrics
	mu      sync.Mutex
	standby int
	active  int
	applies []string
}

func (p *passWatch) PassCompleted(s dataplane.PassStats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.Active {
		p.active++
	} else {
		p.standby++
	}
}

func (p *passWatch) DriverApplied(a dataplane.DriverApply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applies = append(p.applies, a.Driver+" "+a.Outcome.String())
}

func (p *passWatch) counts() (standby, active int, applies []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.standby, p.active, append([]string(nil), p.applies...)
}

// TestKernelInactiveLoopWritesNothing runs every node manager of both
// families on host1 of two hosts, as an agent would, on a loop that starts
// inactive (a standby instance). The managers get every message and run
// standby passes, but nothing is written — the firewall, sets and routes
// are as they were, no sysctl, route, neighbour or binary write happened,
// no driver was applied — and the pod's traffic is not masqueraded. Made
// active, without a restart, the loop converges: the pod's connection to
// host2 is masqueraded, the strict rp_filter is fixed, the endpoint is
// programmed, every manager's rules and sets are in place.
func TestKernelInactiveLoopWritesNothing(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		kerneltest.RequireCommands(t, "ipset", "conntrack", "nft", "iptables-legacy-save", "ip6tables-legacy-save")
		ctx := context.Background()
		topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth})
		host1, host2 := topo.Hosts[0], topo.Hosts[1]
		pod := host1.Pods[0]
		require.NoError(t, host1.NS.SetSysctl("net.ipv4.conf.all.rp_filter", "1")) // wrong: sysctls fixes it
		server, _ := host2.NS.ListenTCP(t, netip.AddrPortFrom(host2.UnderlayIPv4.Addr(), 0))
		toServer := kerneltest.TCPCheck(pod.NS, server)

		k := &writeCounter{Namespace: managertest.Open(t, host1.NS)}
		runs := &managertest.CountingCommands{Next: k.Namespace}
		var managers []dataplane.Manager
		// The namespace's own settings, and the endpoints' interfaces': with
		// no Host, the machine-wide key would fail (an object retried for
		// ever) and keep the loop's error.
		var nsSettings []sysctls.Setting
		for _, st := range sysctls.Defaults() {
			if strings.HasPrefix(st.Key, "net.") {
				nsSettings = append(nsSettings, st)
			}
		}
		sys, err := sysctls.New(sysctls.Options{Kernel: k, Settings: nsSettings})
		require.NoError(t, err)
		drivers := []dataplane.Driver{sys}
		statuses := make(chan endpoints.Status, 16)
		setNames := map[ipfamily.Family][]string{}
		for _, f := range ipfamily.All {
			masqNAT := b.NewTable(t, k.Namespace, "nat", f, "npm-")
			sets := b.Sets(t, runs, masqNAT, f, fmt.Sprintf("np%d-", f))
			fipNAT := b.NewTable(t, k.Namespace, "nat", f, "npf-")
			filter := b.NewTable(t, k.Namespace, "filter", f, "nps-")
			routes, err := routetable.New(routetable.Options{Kernel: k, Family: f, Table: kernel.TableMain, InterfacePatterns: []string{`^veth`}})
			require.NoError(t, err)
			// Two Tables both inserting at the top of POSTROUTING would keep
			// moving in front of each other: the floating IPs' SNAT goes
			// first, masquerade after every other rule.
			masq, err := masquerade.New(masquerade.Options{Family: f, Sets: sets, Table: masqNAT, Chain: "npm-masq", Jump: netfilter.JumpAppend})
			require.NoError(t, err)
			fip, err := floatingips.New(floatingips.Options{Family: f, Table: fipNAT, DNATChain: "npf-dnat", SNATChain: "npf-snat"})
			require.NoError(t, err)
			loopPrev, err := serviceloop.New(serviceloop.Options{Family: f, Table: filter, Chain: "nps-svc"})
			require.NoError(t, err)
			hips, err := hostips.New(hostips.Options{Family: f, Sets: sets})
			require.NoError(t, err)
			eps, err := endpoints.New(endpoints.Options{Family: f, Kernel: k, Routes: routes, SysctlDriver: sys, OnStatus: func(s endpoints.Status) { statuses <- s }})
			require.NoError(t, err)
			managers = append(managers, masq, fip, loopPrev, hips, eps)
			setNames[f] = []string{masq.AllPoolsSet(), masq.MasqPoolsSet(), hips.SetName()}
			drivers = append(drivers, sets, masqNAT, fipNAT, filter, eps.RouteDriver())
		}

		watch := &passWatch{}
		before := managertest.Snapshot(t, host1.NS)
		loop := managertest.StartLoop(t, dataplane.Options{Inactive: true, Metrics: watch}, managers, drivers...)
		mon, err := ifacemonitor.New(ifacemonitor.Options{
			Kernel:      k.Namespace,
			OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
			OnAddrs: func(name string, addrs []netip.Prefix) {
				loop.OnAddrs(name, addrs)
				_ = loop.Send(ctx, hostips.InterfaceAddrs{Name: name, Addrs: addrs})
			},
			OnInSync: loop.InterfacesInSync,
		})
		require.NoError(t, err)
		monCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mon.Run(monCtx) }()
		t.Cleanup(func() { stop(); <-done })

		managertest.Send(t, loop,
			cluster.Pool{ID: "host1-v4", CIDR: host1.PodCIDRv4, Masquerade: true},
			cluster.Pool{ID: "host1-v6", CIDR: host1.PodCIDRv6, Masquerade: true},
			serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:96::/112")}},
			cluster.Endpoint{ID: "pod1", Iface: pod.HostVeth, Addrs: []netip.Prefix{
				netip.PrefixFrom(pod.IPv4, 32), netip.PrefixFrom(pod.IPv6, 128)},
				FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: pod.IPv4}}},
		)
		loop.DatastoreInSync()

		// Wait for standby passes after both markers, then for the queue
		// to drain once more, so every message was seen.
		deadline := time.Now().Add(converge)
		for {
			h := loop.Health()
			standby, _, _ := watch.counts()
			if h.DatastoreInSync && h.InterfacesInSync && standby > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "no standby pass: %+v", h)
			time.Sleep(20 * time.Millisecond)
		}
		standbyThen, _, _ := watch.counts()
		managertest.Send(t, loop, "a message nobody knows, to wake the loop")
		for {
			if s, _, _ := watch.counts(); s > standbyThen {
				break
			}
			require.True(t, time.Now().Before(deadline), "no second standby pass")
			time.Sleep(20 * time.Millisecond)
		}
		kerneltest.Require(t, kerneltest.Not(toServer))

		standby, active, applies := watch.counts()
		t.Logf("inactive: %d standby passes, %d apply passes, driver applies %v, kernel writes %v, binaries run %v",
			standby, active, applies, k.list(), runs.Runs())
		assert.Zero(t, active)
		assert.Empty(t, applies, "no driver applied")
		assert.Empty(t, k.list(), "no route, neighbour, sysctl or conntrack write")
		assert.Empty(t, runs.Runs(), "no ipset run")
		assert.Equal(t, before, managertest.Snapshot(t, host1.NS), "firewall, sets and routes as they were")
		v, err := host1.NS.Sysctl("net.ipv4.conf.all.rp_filter")
		require.NoError(t, err)
		assert.Equal(t, "1", v)
		h := loop.Health()
		assert.False(t, h.Active)
		assert.False(t, h.Ready)
		assert.Empty(t, statuses, "the endpoints manager is not called while inactive")

		// Leadership: active, no restart.
		loop.SetActive(true)
		kerneltest.Eventually(t, converge, toServer)
		// The flows that were answered are masqueraded. (An attempt made
		// while inactive may still be listed unanswered, with the
		// translation netfilter decided then: none.)
		var replied []managertest.Flow
		for _, f := range managertest.Conntrack(t, host1.NS, ipfamily.IPv4, "-p", "tcp", "--orig-src", pod.IPv4.String(), "--orig-dst", server.Addr().String()) {
			if f.Replied() {
				replied = append(replied, f)
			}
		}
		require.NotEmpty(t, replied)
		for _, f := range replied {
			to, snat := f.SNAT()
			assert.True(t, snat && to == host1.UnderlayIPv4.Addr(), "masqueraded: %s", f.Line)
		}
		managertest.WaitReady(t, loop, converge)
		v, err = host1.NS.Sysctl("net.ipv4.conf.all.rp_filter")
		require.NoError(t, err)
		assert.Equal(t, "2", v)
		programmed := map[ipfamily.Family]bool{}
		for len(programmed) < 2 {
			select {
			case s := <-statuses:
				if s.State == endpoints.StateProgrammed {
					programmed[s.Family] = true
				}
			case <-time.After(converge):
				t.Fatalf("endpoint not programmed: %v", programmed)
			}
		}
		for _, f := range ipfamily.All {
			nat, filter := b.Dump(t, host1.NS, "nat", f), b.Dump(t, host1.NS, "filter", f)
			assert.Contains(t, nat, "npm-masq", f)
			assert.Contains(t, nat, "npf-snat", f)
			assert.Contains(t, filter, "nps-svc", f)
			out, err := host1.NS.Exec(ctx, "ipset", "list", "-name")
			require.NoError(t, err)
			for _, set := range setNames[f] {
				// An ip set, or a set of the nftables table.
				assert.True(t, strings.Contains(string(out), set) || strings.Contains(nat, "set "+set+" {"), "set %s", set)
			}
		}
		_, active, applies = watch.counts()
		t.Logf("active: %d apply passes, driver applies %d; kernel writes %d", active, len(applies), len(k.list()))
		assert.Positive(t, active)
		assert.Contains(t, strings.Join(applies, ","), "succeeded")
	})
}
