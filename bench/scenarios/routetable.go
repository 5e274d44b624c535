//go:build linux

package scenarios

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
)

// The routetable scenarios measure the route driver end to end: N IPv4 /32
// device routes (`10.x.y.z/32 dev np-a table 1000 proto 78 scope link`) on
// a veth np-a (peer np-b, both up, with carrier) created by Setup in the
// trial's namespace. Ours always starts from a new Table (New, SetRoutes,
// Apply), so its figures include reading the links and dumping the table.
//
//   - routetable/initial/N: program N routes into an empty table. The peer
//     is one vishvananda/netlink RouteReplace per route in process (what
//     Felix does); the floor is one hand-written `ip -batch` of `route
//     replace` lines; peer2 is one `ip route replace` exec per route
//     (capped at 1k).
//   - routetable/change-one/N: with N routes programmed and in sync, change
//     one (its MTU) and apply. The floor is one netlink RouteReplace.
//     Compare ours across sizes.
//   - routetable/noop-resync/N: with N routes programmed, QueueResync and
//     Apply: one dump, no writes (reported as "writes"). The floor is `ip
//     route show table 1000`; the peer is netlink RouteListFiltered.
//   - routetable/heap/N: the heap a Table keeps per route once N routes
//     are applied (declared candidates, winners and kernel view).
//   - routetable/iface-up/N: N routes on np-a and rtblUpRoutes on a second
//     veth np-c, whose carrier went away and came back (the kernel kept
//     its routes). Ours is the Apply after np-c is reported up: one read
//     of np-c's routes, which the kernel filters, and no writes. The floor
//     is `ip route show table 1000 dev np-c` (also filtered in the
//     kernel); the peer is netlink RouteListFiltered by link index, which
//     reads the whole table and filters in userspace, as Felix re-reads an
//     interface that comes up. Ours re-reading the whole table instead
//     (QueueResync) is shown too: the ratio sets maxRescans.
const (
	rtblTable = 1000
	rtblLink  = "np-a"
	rtblPeer  = "np-b"
	// rtblUpLink (peer rtblUpPeer) is the link that comes up in
	// routetable/iface-up, with rtblUpRoutes routes.
	rtblUpLink   = "np-c"
	rtblUpPeer   = "np-d"
	rtblUpRoutes = 10
)

func init() {
	for _, n := range []int{100, 1_000, 10_000, 100_000} {
		harness.Register(rtblInitial(n))
	}
	harness.Register(rtblChangeOne(100), rtblChangeOne(100_000), rtblNoopResync(100_000), rtblHeap(100_000),
		rtblIfaceUp(1_000), rtblIfaceUp(100_000))
}

func rtblTargets(n int) []routetable.Target {
	out := make([]routetable.Target, n)
	for i := range out {
		out[i] = routetable.Target{CIDR: routeDst(i)}
	}
	return out
}

// rtblSetupLink creates the veth pair, waits for carrier, then waits for
// the kernel to finish freeing earlier trials' namespaces (their routes go
// asynchronously, under the rtnl lock every route write takes), so that
// work is not billed to this trial. It returns np-a's index.
func rtblSetupLink(ctx context.Context, env *harness.Env, n int) (int, error) {
	idx, err := setupVeth(env, rtblLink, rtblPeer)
	if err != nil {
		return 0, err
	}
	if err := pause(ctx, 200*time.Millisecond+time.Duration(n)*5*time.Microsecond); err != nil {
		return 0, err
	}
	return idx, nil
}

// rtblState is what ours keeps between Setup and Run.
type rtblState struct {
	kernel  *kernel.Namespace
	table   *routetable.Table
	targets []routetable.Target
	// up is np-c's index (routetable/iface-up).
	up int
}

// rtblLoader prepares a trial's namespace with a Table, which it returns.
type rtblLoader func(ctx context.Context, env *harness.Env) (*rtblState, error)

// closed is a Setup for peers and floors: it loads the same kernel state
// and closes the Table's namespace.
func (load rtblLoader) closed(ctx context.Context, env *harness.Env) error {
	st, err := load(ctx, env)
	if st != nil {
		st.kernel.Close()
	}
	return err
}

// rtblLoad opens the namespace (kernel.Open) and applies targets with a
// new Table.
func rtblLoad(ctx context.Context, env *harness.Env, targets []routetable.Target) (*rtblState, error) {
	k, err := kernel.Open(env.NS.Path())
	if err != nil {
		return nil, err
	}
	st := &rtblState{kernel: k, targets: targets}
	st.table, err = routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: rtblTable,
		InterfacePatterns: []string{"^np-"}})
	if err == nil {
		err = st.table.SetRoutes(1, rtblLink, targets)
	}
	if err == nil {
		_, err = st.table.Apply(ctx)
	}
	if err != nil {
		k.Close()
		return nil, err
	}
	if s := st.table.Counters(); s.InKernel != len(targets) {
		k.Close()
		return nil, fmt.Errorf("%d routes in the kernel, want %d", s.InKernel, len(targets))
	}
	return st, nil
}

func rtblNetlinkRoute(oif int, dst netip.Prefix, mtu int) *netlink.Route {
	return &netlink.Route{
		LinkIndex: oif, Table: rtblTable, Protocol: netlink.RouteProtocol(routetable.DefaultProtocol),
		Scope: netlink.SCOPE_LINK, MTU: mtu, Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 32)},
	}
}

// rtblApplyRun is a Run of ours on the Table that Setup kept: prep, then
// Apply; it reports the route writes ("writes"), then done (when set)
// reports and checks more from the Table's stats before and after. It
// closes the namespace.
func rtblApplyRun(prep func(st *rtblState) error, done func(env *harness.Env, before, after routetable.Counters) error) func(context.Context, *harness.Env) error {
	return func(ctx context.Context, env *harness.Env) error {
		st := env.State.(*rtblState)
		defer st.kernel.Close()
		before := st.table.Counters()
		if err := prep(st); err != nil {
			return err
		}
		if _, err := st.table.Apply(ctx); err != nil {
			return err
		}
		after := st.table.Counters()
		env.Report("writes", float64(after.RouteWrites-before.RouteWrites))
		if done == nil {
			return nil
		}
		return done(env, before, after)
	}
}

// rtblEmpty is a Setup for ours that writes into an empty table: np-a and
// the n targets to program.
func rtblEmpty(n int) func(ctx context.Context, env *harness.Env) error {
	return func(ctx context.Context, env *harness.Env) error {
		_, err := rtblSetupLink(ctx, env, n)
		env.State = rtblTargets(n)
		return err
	}
}

func rtblInitial(n int) harness.Scenario {
	w := routeWrite{n: n, link: rtblLink, table: rtblTable, proto: int(routetable.DefaultProtocol),
		setup: func(ctx context.Context, env *harness.Env) (int, error) { return rtblSetupLink(ctx, env, n) }}
	peers, note := w.peers()
	return harness.Scenario{
		Name: "routetable/initial/" + strconv.Itoa(n),
		Size: n,
		Note: "ours includes New, SetRoutes, the link list and the initial dump; " + note,
		Variants: append([]harness.Variant{{
			Name: "nodeplane routetable", Role: harness.Ours,
			Setup: rtblEmpty(n),
			Run: func(ctx context.Context, env *harness.Env) error {
				st, err := rtblLoad(ctx, env, env.State.([]routetable.Target))
				if err != nil {
					return err
				}
				return st.kernel.Close()
			},
		}}, peers...),
	}
}

// rtblInSync returns a loader that programs n routes with a Table and lets
// the kernel settle.
func rtblInSync(n int) rtblLoader {
	return func(ctx context.Context, env *harness.Env) (*rtblState, error) {
		if _, err := rtblSetupLink(ctx, env, n); err != nil {
			return nil, err
		}
		st, err := rtblLoad(ctx, env, rtblTargets(n))
		if err != nil {
			return nil, err
		}
		return st, settle(ctx)
	}
}

func rtblChangeOne(n int) harness.Scenario {
	load := rtblInSync(n)
	return harness.Scenario{
		Name: "routetable/change-one/" + strconv.Itoa(n),
		Size: 1,
		Note: "one route's MTU changed with " + strconv.Itoa(n) + " routes in sync; compare ours across sizes (the floor is one netlink call)",
		Variants: []harness.Variant{
			{
				Name: "nodeplane routetable", Role: harness.Ours, Setup: keep(load),
				Run: rtblApplyRun(func(st *rtblState) error {
					tg := st.targets[n/2]
					tg.MTU = 1400
					return st.table.RouteUpdate(1, rtblLink, tg)
				}, nil),
			},
			{
				Name: "netlink RouteReplace (one call)", Role: harness.Floor,
				Setup: func(ctx context.Context, env *harness.Env) error {
					if err := load.closed(ctx, env); err != nil {
						return err
					}
					l, err := env.NS.Handle().LinkByName(rtblLink)
					if err != nil {
						return err
					}
					env.State = rtblNetlinkRoute(l.Attrs().Index, routeDst(n/2), 1400)
					return nil
				},
				Run: func(_ context.Context, env *harness.Env) error {
					return env.NS.Handle().RouteReplace(env.State.(*netlink.Route))
				},
			},
		},
	}
}

func rtblNoopResync(n int) harness.Scenario {
	load := rtblInSync(n)
	check := routeCountCheck(n)
	return harness.Scenario{
		Name: "routetable/noop-resync/" + strconv.Itoa(n),
		Size: n,
		Note: "QueueResync + Apply with the kernel already in sync: one link list, one table dump, no writes",
		Variants: []harness.Variant{
			{
				Name: "nodeplane routetable", Role: harness.Ours, Setup: keep(load),
				Run: rtblApplyRun(func(st *rtblState) error {
					st.table.QueueResync()
					return nil
				}, func(env *harness.Env, before, after routetable.Counters) error {
					env.Report("dumps", float64(after.Resyncs-before.Resyncs))
					return check("resync", after.InKernel)
				}),
			},
			ipRouteShowFloor(rtblTable, "", load.closed, check),
			routeListPeer(rtblTable, "", load.closed, check),
		},
	}
}

func rtblHeap(n int) harness.Scenario {
	return harness.Scenario{
		Name: "routetable/heap/" + strconv.Itoa(n),
		Size: n,
		Note: "heapB/route: heap kept by a Table per applied route (candidates, winners, kernel view, netlink buffers); times include two forced GCs",
		Variants: []harness.Variant{{
			Name: "nodeplane routetable", Role: harness.Ours,
			Setup: rtblEmpty(n),
			Run: func(ctx context.Context, env *harness.Env) error {
				targets := env.State.([]routetable.Target)
				before := benchutil.HeapInUse()
				st, err := rtblLoad(ctx, env, targets)
				if err != nil {
					return err
				}
				env.Report("heapB/route", heapPer(before, n))
				runtime.KeepAlive(st)
				runtime.KeepAlive(targets)
				return st.kernel.Close()
			},
		}},
	}
}

func rtblIfaceUp(n int) harness.Scenario {
	// load programs both links' routes with a Table, takes np-c's carrier
	// away (telling the Table, which keeps the routes), and gives it back.
	load := rtblLoader(func(ctx context.Context, env *harness.Env) (*rtblState, error) {
		if _, err := rtblSetupLink(ctx, env, n); err != nil {
			return nil, err
		}
		up, err := setupVeth(env, rtblUpLink, rtblUpPeer)
		if err != nil {
			return nil, err
		}
		st, err := rtblLoad(ctx, env, rtblTargets(n))
		if err != nil {
			return nil, err
		}
		st.up = up
		if err := rtblFlapUpLink(ctx, env, st); err != nil {
			st.kernel.Close()
			return nil, err
		}
		return st, nil
	})
	// comesUp is ours' Run: np-c reported up, then Apply (after QueueResync
	// when whole).
	comesUp := func(whole bool) func(ctx context.Context, env *harness.Env) error {
		return rtblApplyRun(func(st *rtblState) error {
			st.table.OnIfaceStateChanged(rtblUpLink, st.up, kernel.LinkUp)
			if whole {
				st.table.QueueResync()
			}
			return nil
		}, func(env *harness.Env, before, after routetable.Counters) error {
			env.Report("rescans", float64(after.Rescans-before.Rescans))
			if after.InKernel != n+rtblUpRoutes || after.RouteWrites != before.RouteWrites ||
				(!whole && (after.Rescans != before.Rescans+1 || after.Resyncs != before.Resyncs)) {
				return fmt.Errorf("after np-c came up: %+v", after)
			}
			return nil
		})
	}
	check := routeCountCheck(rtblUpRoutes)
	return harness.Scenario{
		Name: "routetable/iface-up/" + strconv.Itoa(n),
		Size: rtblUpRoutes,
		Note: fmt.Sprintf("%d routes on np-a, %d on np-c, whose carrier came back: reading np-c's routes", n, rtblUpRoutes),
		Variants: []harness.Variant{
			{Name: "nodeplane routetable", Role: harness.Ours, Setup: keep(load), Run: comesUp(false)},
			{Name: "nodeplane routetable, whole table", Role: harness.Peer, Setup: keep(load), Run: comesUp(true)},
			ipRouteShowFloor(rtblTable, rtblUpLink, load.closed, check),
			routeListPeer(rtblTable, rtblUpLink, load.closed, check),
		},
	}
}

// rtblFlapUpLink gives st's Table rtblUpRoutes routes on np-c, takes np-c's
// carrier away (telling the Table, which keeps the routes) and gives it
// back, so that the next Apply finds np-c up again.
func rtblFlapUpLink(ctx context.Context, env *harness.Env, st *rtblState) error {
	h := env.NS.Handle()
	carrier := func(on bool) error {
		peer, err := h.LinkByName(rtblUpPeer)
		if err == nil && on {
			err = h.LinkSetUp(peer)
		} else if err == nil {
			err = h.LinkSetDown(peer)
		}
		if err == nil {
			_, err = waitCarrier(env, rtblUpLink, on)
		}
		return err
	}
	targets := make([]routetable.Target, rtblUpRoutes)
	for i := range targets {
		targets[i] = routetable.Target{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, 0, byte(i)}), 32)}
	}
	if err := st.table.SetRoutes(1, rtblUpLink, targets); err != nil {
		return err
	}
	if _, err := st.table.Apply(ctx); err != nil {
		return err
	}
	if err := carrier(false); err != nil {
		return err
	}
	st.table.OnIfaceStateChanged(rtblUpLink, st.up, kernel.LinkDown)
	if _, err := st.table.Apply(ctx); err != nil {
		return err
	}
	if err := carrier(true); err != nil {
		return err
	}
	return settle(ctx)
}
