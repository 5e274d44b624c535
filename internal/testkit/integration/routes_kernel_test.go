//go:build linux

package integration_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/routetable"
)

// plan holds the addresses of one family's run.
type plan struct {
	fam       ipfamily.Family
	linkAddr  netip.Prefix // np-a's address
	unreached netip.Addr   // a gateway on no link
	bad, good netip.Prefix // a route the kernel refuses, and valid ones
	later     netip.Prefix
}

var plans = []plan{
	{
		fam: ipfamily.IPv4, linkAddr: netip.MustParsePrefix("10.99.1.1/24"), unreached: netip.MustParseAddr("203.0.113.1"),
		bad: netip.MustParsePrefix("10.50.0.0/24"), good: netip.MustParsePrefix("10.51.0.0/24"), later: netip.MustParsePrefix("10.52.0.0/24"),
	},
	{
		fam: ipfamily.IPv6, linkAddr: netip.MustParsePrefix("fd00:99:1::1/64"), unreached: netip.MustParseAddr("2001:db8:ff::1"),
		bad: netip.MustParsePrefix("fd00:50::/64"), good: netip.MustParsePrefix("fd00:51::/64"), later: netip.MustParsePrefix("fd00:52::/64"),
	},
}

// addVeth creates the veth pair name/name-p in ns with addr on name, both
// up, and waits until name has carrier. It returns name's index.
func addVeth(t *testing.T, ns *kerneltest.NS, name string, addr netip.Prefix) int {
	t.Helper()
	h := ns.Handle()
	require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "-p"}))
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.Addr().AsSlice(), Mask: net.CIDRMask(addr.Bits(), addr.Addr().BitLen())}}
	if addr.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	require.NoError(t, h.AddrAdd(l, a))
	peer, err := h.LinkByName(name + "-p")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetUp(peer))
	require.NoError(t, h.LinkSetUp(l))
	require.Eventually(t, func() bool {
		l, err := h.LinkByName(name)
		return err == nil && l.Attrs().Flags&net.FlagRunning != 0
	}, waitFor, time.Millisecond, "%s never got its carrier", name)
	return l.Attrs().Index
}

// hasRoute reports whether table holds a route to dst in ns.
func hasRoute(t *testing.T, ns *kerneltest.NS, fam ipfamily.Family, table int, dst netip.Prefix) bool {
	routes, err := ns.Handle().RouteListFiltered(fam.AF(), &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Errorf("list routes: %v", err)
		return false
	}
	return slices.ContainsFunc(routes, func(r netlink.Route) bool { return r.Dst != nil && r.Dst.String() == dst.String() })
}

// hasRule reports whether ns holds a rule of fam with priority prio and
// fwmark mark.
func hasRule(t *testing.T, ns *kerneltest.NS, fam ipfamily.Family, prio int, mark uint32) bool {
	rules, err := ns.Handle().RuleList(fam.AF())
	if err != nil {
		t.Errorf("list rules: %v", err)
		return false
	}
	return slices.ContainsFunc(rules, func(r netlink.Rule) bool { return r.Priority == prio && r.Mark == mark })
}

// change is a message for changer: a change to make to the drivers.
type change func() error

// changer is a manager that makes the changes it is sent and counts its
// passes, so that a test can tell which pass made a change.
type changer struct {
	passes int

	mu      sync.Mutex
	pending []change
	madeIn  []int // the pass of each change, in the order sent
}

func (c *changer) OnUpdate(msg any) {
	if f, ok := msg.(change); ok {
		c.pending = append(c.pending, f)
	}
}

func (c *changer) CompleteDeferredWork(context.Context) error {
	c.passes++
	for _, f := range c.pending {
		if err := f(); err != nil {
			return err
		}
		c.mu.Lock()
		c.madeIn = append(c.madeIn, c.passes)
		c.mu.Unlock()
	}
	c.pending = nil
	return nil
}

// made returns the pass that made change i, or 0 before it is made.
func (c *changer) made(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < len(c.madeIn) {
		return c.madeIn[i]
	}
	return 0
}

// countingKernel counts the route writes per destination.
type countingKernel struct {
	routetable.Kernel

	mu     sync.Mutex
	writes map[netip.Prefix]int
}

func (k *countingKernel) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	k.mu.Lock()
	for _, op := range ops {
		k.writes[op.Route.Dst]++
	}
	k.mu.Unlock()
	return k.Kernel.ApplyRoutes(ctx, ops)
}

func (k *countingKernel) count(dst netip.Prefix) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes[dst]
}

// afterPass is what the test sees right after a pass: the loop's health
// and whether the routes and the rule it looks for are in the kernel.
type afterPass struct {
	at                     time.Time
	health                 dataplane.Health
	good, later, laterRule bool
}

// TestKernelRefusedRouteDoesNotHoldTheLoop drives a real routetable Table
// and a real routerule instance through one dataplane.Loop in a fresh
// namespace, with a route the kernel refuses for good (its gateway is on
// no link). The Table is never backed off: after the refused route failed
// several times, a valid route declared next (and a rule, on the other
// driver) is in the kernel right after the very pass that declared it;
// Health reports the refused route as a failing object; withdrawing it
// takes it out of the failing set in the pass that withdraws it.
func TestKernelRefusedRouteDoesNotHoldTheLoop(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, p := range plans {
		t.Run(p.fam.String(), func(t *testing.T) {
			t.Parallel() // each waits out the refused route's backoff
			testRefusedRoute(t, p)
		})
	}
}

func testRefusedRoute(t *testing.T, p plan) {
	ns := kerneltest.NewNS(t)
	require.NoError(t, ns.SetSysctl("net.ipv6.conf.all.keep_addr_on_down", "1"))
	addVeth(t, ns, "np-a", p.linkAddr)
	// One kernel.Namespace serves both drivers.
	kns, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, kns.Close()) })
	k := &countingKernel{Kernel: kns, writes: map[netip.Prefix]int{}}
	tbl, err := routetable.New(routetable.Options{Kernel: k, Family: p.fam, Table: routeTable, InterfacePatterns: []string{`^np-`}})
	require.NoError(t, err)
	rules, err := routerule.New(routerule.Options{Family: p.fam, Kernel: kns, Priorities: []uint32{100}, Tables: []uint32{routeTable}})
	require.NoError(t, err)

	c := &changer{}
	var mu sync.Mutex
	seen := map[uint64]afterPass{} // by pass, right after it
	loop, err := dataplane.New(dataplane.Options{
		ResyncInterval: time.Hour, HealthInterval: -1,
		OnHealth: func(h dataplane.Health) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := seen[h.Applies]; ok || h.Applies == 0 {
				return // not the report that ends a pass
			}
			seen[h.Applies] = afterPass{
				at: time.Now(), health: h,
				good: hasRoute(t, ns, p.fam, routeTable, p.good), later: hasRoute(t, ns, p.fam, routeTable, p.later),
				laterRule: hasRule(t, ns, p.fam, 100, 0x8),
			}
		},
	})
	require.NoError(t, err)
	require.NoError(t, loop.AddManager(c))
	require.NoError(t, loop.AddDriver(tbl))
	require.NoError(t, loop.AddDriver(rules))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	loop.DatastoreInSync()
	loop.InterfacesInSync()

	sent := 0
	// send sends a change and returns what the test saw right after the
	// pass that made it, and when it was sent.
	send := func(f change) (afterPass, time.Time) {
		t.Helper()
		start := time.Now()
		require.NoError(t, loop.Send(ctx, f))
		sent++
		var after afterPass
		require.Eventually(t, func() bool {
			pass := c.made(sent - 1)
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			after, ok = seen[uint64(pass)]
			return pass > 0 && ok
		}, waitFor, time.Millisecond, "the pass that makes the change never ends")
		return after, start
	}

	bad := routetable.Target{CIDR: p.bad, Gateway: p.unreached}
	after, _ := send(func() error {
		return tbl.SetRoutes(routeClass, "np-a", []routetable.Target{bad, {CIDR: p.good}})
	})
	assert.True(t, after.good, "the valid route is written beside the refused one")
	h := after.health
	assert.Empty(t, h.FailingDrivers, "a refused route does not fail the Table")
	assert.Equal(t, 1, h.FailingObjects)
	assert.ErrorIs(t, h.LastError, dataplane.ErrPartial)
	assert.ErrorIs(t, h.LastError, routetable.ErrRouteFailed)
	assert.Contains(t, h.LastError.Error(), p.bad.String())

	// Let the kernel refuse it six times (its backoff grows meanwhile),
	// then declare a valid route and a rule on the other driver.
	require.Eventually(t, func() bool { return k.count(p.bad) >= 6 }, waitFor, 10*time.Millisecond)
	after, start := send(func() error {
		if err := tbl.RouteUpdate(routeClass, "np-a", routetable.Target{CIDR: p.later}); err != nil {
			return err
		}
		return rules.SetRule(routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: routeTable}})
	})
	t.Logf("%v: a route and a rule declared beside a route refused %d times were in the kernel %v after they were sent",
		p.fam, k.count(p.bad), after.at.Sub(start))
	assert.True(t, after.later, "the valid route is in the kernel right after the pass that declared it")
	assert.True(t, after.laterRule, "so is the other driver's rule")
	assert.Empty(t, after.health.FailingDrivers)
	assert.Equal(t, 1, after.health.FailingObjects, "the refused route is still reported")

	tries := k.count(p.bad)
	after, _ = send(func() error { return tbl.RouteRemove(routeClass, "np-a", bad.Key()) })
	assert.Zero(t, after.health.FailingObjects, "withdrawn: out of the failing set in the pass that withdraws it")
	assert.Equal(t, tries, k.count(p.bad), "not tried again")
	assert.True(t, after.later && after.good)
}

// TestKernelInterfaceMonitorWakesTheLoop wires ifacemonitor, a routetable
// Table and a dataplane.Loop exactly as the routetable documentation shows
// (the monitor's OnLinkState calls OnIfaceStateChanged; the Table is
// registered with the loop), in a fresh namespace, with the periodic
// resync an hour away. Deleting and re-creating the interface brings its
// routes back as soon as the monitor reports it up: the Table wakes the
// loop.
func TestKernelInterfaceMonitorWakesTheLoop(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, p := range plans {
		t.Run(p.fam.String(), func(t *testing.T) { testMonitorWiring(t, p) })
	}
}

func testMonitorWiring(t *testing.T, p plan) {
	ns := kerneltest.NewNS(t)
	addVeth(t, ns, "np-a", p.linkAddr)
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, k.Close()) })
	tbl, err := routetable.New(routetable.Options{Kernel: k, Family: p.fam, Table: routeTable, InterfacePatterns: []string{`^np-`}})
	require.NoError(t, err)
	require.NoError(t, tbl.SetRoutes(routeClass, "np-a", []routetable.Target{{CIDR: p.good}}))

	loop, err := dataplane.New(dataplane.Options{ResyncInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, loop.AddDriver(tbl))

	var mu sync.Mutex
	var upAt time.Time // when the monitor last reported np-a up
	mon, err := ifacemonitor.New(ifacemonitor.Options{
		Kernel: k,
		OnLinkState: func(u ifacemonitor.LinkUpdate) {
			if u.Name == "np-a" && u.State == kernel.LinkUp {
				mu.Lock()
				upAt = time.Now()
				mu.Unlock()
			}
			tbl.OnIfaceStateChanged(u.Name, u.Index, u.State)
		},
		OnInSync: loop.InterfacesInSync,
	})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	monDone := make(chan error, 1)
	go func() { monDone <- mon.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
		<-monDone
	})
	loop.DatastoreInSync()
	routed := func() bool { return hasRoute(t, ns, p.fam, routeTable, p.good) }
	require.Eventually(t, routed, waitFor, time.Millisecond, "the route is written at the start")

	l, err := ns.Handle().LinkByName("np-a")
	require.NoError(t, err)
	require.NoError(t, ns.Handle().LinkDel(l))
	require.Eventually(t, func() bool { return !routed() }, waitFor, time.Millisecond, "the kernel removes it with its link")
	mu.Lock()
	upAt = time.Time{}
	mu.Unlock()

	addVeth(t, ns, "np-a", p.linkAddr)
	// Bounded well below the resync interval (an hour): only a wake-up of
	// the loop can bring the route back in time.
	var back time.Time
	require.Eventually(t, func() bool {
		if !routed() {
			return false
		}
		back = time.Now()
		return true
	}, 5*time.Second, time.Millisecond, "the route comes back when the monitor reports the new interface up")
	mu.Lock()
	up := upAt
	mu.Unlock()
	require.False(t, up.IsZero(), "the monitor reported np-a up")
	t.Logf("%v: route back %v after the monitor reported the re-created interface up", p.fam, back.Sub(up))
	assert.Positive(t, loop.Health().Applies)
}
