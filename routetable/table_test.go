package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	rt "github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/routetable/routetablefake"
)

func mustP(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustA(s string) netip.Addr   { return netip.MustParseAddr(s) }

// newFake returns a fake kernel with up links named names, and a Table of
// family fam on it (table 254, pattern ^np-, fake clock).
func newFake(t *testing.T, fam rt.Family, names ...string) (*routetablefake.Kernel, *rt.Table, *clock.Fake) {
	t.Helper()
	k := routetablefake.New()
	for _, n := range names {
		_, err := k.AddLink(n)
		require.NoError(t, err)
		require.NoError(t, k.SetLinkUp(n, true))
	}
	clk := clock.NewFake(t0)
	tbl, err := rt.New(rt.Options{Kernel: k, Family: fam, Table: rt.TableMain, InterfacePatterns: []string{`^np-`}, Clock: clk})
	require.NoError(t, err)
	return k, tbl, clk
}

func TestNewValidatesOptions(t *testing.T) {
	k := routetablefake.New()
	tests := []struct {
		name string
		opts rt.Options
	}{
		{"no kernel", rt.Options{Family: rt.IPv4}},
		{"no family", rt.Options{Kernel: k}},
		{"bad family", rt.Options{Kernel: k, Family: 7}},
		{"kernel protocol", rt.Options{Kernel: k, Family: rt.IPv4, Protocol: rt.ProtoKernel}},
		{"bad pattern", rt.Options{Kernel: k, Family: rt.IPv4, InterfacePatterns: []string{"np-("}}},
		{"patterns with a policy", rt.Options{Kernel: k, Family: rt.IPv4, InterfacePatterns: []string{"x"}, Ownership: rt.ExclusivePolicy{}}},
		{"negative batch", rt.Options{Kernel: k, Family: rt.IPv4, BatchSize: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tbl, err := rt.New(tc.opts)
			require.ErrorIs(t, err, rt.ErrInvalidOptions)
			assert.Nil(t, tbl)
		})
	}
	tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: rt.TableMain})
	require.NoError(t, err)
	assert.Equal(t, rt.TableMain, tbl.Index())
	assert.Zero(t, k.Calls(routetablefake.CallDump)+k.Calls(routetablefake.CallLinks), "New does no I/O")
}

func TestTargetValidation(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	longMAC, _ := net.ParseMAC("02:00:00:00:00:00:00:01")
	type tc struct {
		name   string
		fam    rt.Family
		iface  string
		target rt.Target
		ok     bool
	}
	tests := []tc{
		{"device route", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24")}, true},
		{"host bits", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.7/24")}, false},
		{"host bits v6", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::1/64")}, false},
		{"largest MTU", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), MTU: rt.MaxMTU}, true},
		{"MTU the kernel caps", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), MTU: rt.MaxMTU + 1}, false},
		{"unspecified gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), Gateway: mustA("0.0.0.0")}, false},
		{"unspecified source", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/64"), Src: mustA("::")}, false},
		{"unspecified hop gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: mustA("0.0.0.0")}}}, false},
		{"gateway", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/64"), Gateway: mustA("fd00:1::1")}, true},
		{"local", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), Type: rt.TargetLocal}, true},
		{"blackhole", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole}, true},
		{"throw v6", rt.IPv6, rt.InterfaceNone, rt.Target{CIDR: mustP("fd00::/8"), Type: rt.TargetThrow}, true},
		{"dest mac", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}, true},
		{"multipath v4 device hops", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"),
			NextHops: []rt.NextHop{{Iface: "np-a"}, {Iface: "np-b", Weight: 2}}}, true},
		{"invalid cidr", rt.IPv4, "np-a", rt.Target{}, false},
		{"wrong family", rt.IPv4, "np-a", rt.Target{CIDR: mustP("fd00::/64")}, false},
		{"mapped address", rt.IPv6, "np-a", rt.Target{CIDR: mustP("::ffff:10.0.0.0/120")}, false},
		{"unknown type", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: 99}, false},
		{"gateway of the other family", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Gateway: mustA("fd00::1")}, false},
		{"source of the other family", rt.IPv6, "np-a", rt.Target{CIDR: mustP("fd00::/8"), Src: mustA("10.0.0.1")}, false},
		{"onlink without gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetOnlink}, false},
		{"local with gateway", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), Type: rt.TargetLocal, Gateway: mustA("10.0.0.2")}, false},
		{"unicast without interface", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8")}, false},
		{"blackhole with interface", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole}, false},
		{"blackhole with gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetBlackhole, Gateway: mustA("10.0.0.1")}, false},
		{"multipath under an interface", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath with a gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Gateway: mustA("10.0.0.1"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath local", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), Type: rt.TargetLocal, NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath bad hop iface", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "a:b"}}}, false},
		{"multipath v6 without gateway", rt.IPv6, rt.InterfaceNone, rt.Target{CIDR: mustP("fd00::/8"), NextHops: []rt.NextHop{{Iface: "np-a"}}}, false},
		{"multipath hop of the other family", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: mustA("fd00::1")}}}, false},
		{"multipath onlink without gateway", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a", Onlink: true}}}, false},
		{"multipath duplicate hop", rt.IPv4, rt.InterfaceNone, rt.Target{CIDR: mustP("10.0.0.0/8"), NextHops: []rt.NextHop{{Iface: "np-a"}, {Iface: "np-a", Weight: 3}}}, false},
		{"dest mac on a network", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.0/24"), DestMAC: mac}, false},
		{"dest mac too long", rt.IPv4, "np-a", rt.Target{CIDR: mustP("10.0.0.1/32"), DestMAC: longMAC}, false},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			k, tbl, _ := newFake(t, c.fam, "np-a", "np-b")
			err := tbl.SetRoutes(1, c.iface, []rt.Target{c.target})
			if !c.ok {
				require.ErrorIs(t, err, rt.ErrInvalidTarget)
				assert.Zero(t, tbl.Stats().Declared, "nothing recorded")
				require.ErrorIs(t, tbl.RouteUpdate(1, c.iface, c.target), rt.ErrInvalidTarget)
				_, err := tbl.Apply(context.Background())
				require.NoError(t, err)
				assert.Zero(t, k.Writes(), "nothing written")
				return
			}
			require.NoError(t, err)
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err)
			assert.Equal(t, 1, k.Writes())
		})
	}
}

func TestInterfaceNameValidation(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv4)
	for _, name := range []string{"", "a/b", "a:b", "a b", ".", "..", "a-very-long-name0"} {
		require.ErrorIs(t, tbl.SetRoutes(1, name, nil), rt.ErrInvalidInterface, "%q", name)
		require.ErrorIs(t, tbl.RouteUpdate(1, name, rt.Target{CIDR: mustP("10.0.0.0/8")}), rt.ErrInvalidInterface, "%q", name)
		require.ErrorIs(t, tbl.RouteRemove(1, name, rt.RouteKey{CIDR: mustP("10.0.0.0/8")}), rt.ErrInvalidInterface, "%q", name)
	}
	require.ErrorIs(t, tbl.RouteRemove(1, "np-a", rt.RouteKey{CIDR: mustP("fd00::/8")}), rt.ErrInvalidTarget)
	require.ErrorIs(t, tbl.RouteRemove(1, "np-a", rt.RouteKey{}), rt.ErrInvalidTarget)
}

func TestDuplicateKeysRejected(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv6, "np-a")
	err := tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("fd00::/64")}, {CIDR: mustP("fd00::/64"), Metric: 1024}})
	require.ErrorIs(t, err, rt.ErrDuplicateRoute, "metric 0 is 1024")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("fd00::/64")}, {CIDR: mustP("fd00::/64"), Metric: 1}}))
	assert.Equal(t, 2, tbl.Stats().Declared)
}

func TestOnIfaceStateChangedIgnoresBadInput(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	tbl.OnIfaceStateChanged("", 2, rt.IfaceDown)
	tbl.OnIfaceStateChanged("np-a", -1, rt.IfaceDown)
	tbl.OnIfaceStateChanged("np-a", 2, 9)
	tbl.OnIfaceStateChanged("np-a", 1<<40, rt.IfaceUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Len(t, k.Routes(rt.IPv4, 0), 1, "ignored: the route stays")
}

func TestRefreshAndRetryAfter(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	ctx := context.Background()
	res, err := tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, rt.DefaultRefreshInterval, res.RetryAfter)
	require.Equal(t, 1, k.Calls(routetablefake.CallDump))

	clk.Advance(rt.DefaultRefreshInterval - time.Second)
	res, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, time.Second, res.RetryAfter)
	assert.Equal(t, 1, k.Calls(routetablefake.CallDump), "not yet")

	clk.Advance(time.Second)
	_, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, k.Calls(routetablefake.CallDump), "refreshed")

	// Without a refresh interval, nothing is asked for.
	k2 := routetablefake.New()
	tbl2, err := rt.New(rt.Options{Kernel: k2, Family: rt.IPv4, Table: rt.TableMain, RefreshInterval: -1, Clock: clk})
	require.NoError(t, err)
	res, err = tbl2.Apply(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.RetryAfter)
	clk.Advance(time.Hour)
	_, err = tbl2.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, k2.Calls(routetablefake.CallDump))
}

func TestGracePeriodOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		kept  bool
	}{{"default", 0, true}, {"none", -1, false}, {"custom", time.Minute, true}} {
		t.Run(tc.name, func(t *testing.T) {
			k := routetablefake.New()
			idx, _ := k.AddLink("np-a")
			require.NoError(t, k.SetLinkUp("np-a", true))
			require.NoError(t, k.AddRoute(rt.KernelRoute{Family: rt.IPv4, Dst: mustP("10.0.0.1/32"), Type: rt.RTNUnicast, Protocol: 3, Scope: rt.ScopeLink, OIF: idx}))
			clk := clock.NewFake(t0)
			tbl, err := rt.New(rt.Options{Kernel: k, Family: rt.IPv4, Table: rt.TableMain, InterfacePatterns: []string{`^np-`}, GracePeriod: tc.grace, Clock: clk})
			require.NoError(t, err)
			res, err := tbl.Apply(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.kept, len(k.Routes(rt.IPv4, 0)) == 1)
			if tc.grace > 0 {
				assert.Equal(t, tc.grace, res.RetryAfter)
			}
		})
	}
}

func TestDumpFailuresWriteNothing(t *testing.T) {
	for _, call := range []routetablefake.Call{routetablefake.CallDump, routetablefake.CallLinks, routetablefake.CallNeighbors} {
		t.Run(call.String(), func(t *testing.T) {
			k, tbl, _ := newFake(t, rt.IPv4, "np-a")
			mac, _ := net.ParseMAC("02:00:00:00:00:01")
			require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}}))
			k.Inject(routetablefake.Fault{Call: call})
			_, err := tbl.Apply(context.Background())
			require.ErrorIs(t, err, rt.ErrDump)
			assert.Zero(t, k.Writes())
			_, err = tbl.Apply(context.Background())
			require.NoError(t, err, "the next Apply reads again and writes")
			assert.Equal(t, 1, k.Writes())
		})
	}
}

func TestApplyErrors(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	var targets []rt.Target
	for i := range 40 {
		targets = append(targets, rt.Target{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)})
	}
	require.NoError(t, tbl.SetRoutes(1, "np-a", targets))
	k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Err: syscall.EINVAL, Times: 5})
	k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Err: syscall.ENODEV, Times: 30})
	res, err := tbl.Apply(context.Background())
	var ae *rt.ApplyError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 35, ae.Failed)
	assert.Len(t, ae.Errors, rt.MaxReportedErrors)
	assert.ErrorIs(t, err, dataplane.ErrPartial, "the rest was written")
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe, "a dataplane.Loop counts the failed routes")
	assert.Equal(t, 35, pe.Failed)
	assert.ErrorIs(t, err, rt.ErrRouteFailed)
	assert.ErrorIs(t, err, syscall.EINVAL)
	assert.ErrorIs(t, err, rt.ErrIfaceGone)
	assert.ErrorIs(t, err, syscall.ENODEV)
	assert.Contains(t, err.Error(), "routetable: 35 object(s) failed")
	var re *rt.RouteError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, rt.OpReplace, re.Op)
	assert.Equal(t, "np-a", re.Iface)
	assert.Contains(t, re.Error(), "dev np-a")
	assert.Equal(t, 5, tbl.Stats().InKernel)
	assert.Equal(t, 35, tbl.Stats().PendingUpdates)
	assert.Equal(t, 100*time.Millisecond, res.RetryAfter, "the failed routes' first retry")

	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err, "retried")
	assert.Equal(t, 40, tbl.Stats().InKernel)
	assert.Len(t, k.Routes(rt.IPv4, 0), 40)
}

func TestNeighborFailures(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.1/32"), DestMAC: mac}}))
	k.Inject(routetablefake.Fault{Call: routetablefake.CallSetNeighbor})
	res, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Empty(t, k.NeighborList(rt.IPv4))
	_, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor, "still failing: waits for its retry")
	assert.Equal(t, 1, k.Calls(routetablefake.CallSetNeighbor))
	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	require.Len(t, k.NeighborList(rt.IPv4), 1)

	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	k.Inject(routetablefake.Fault{Call: routetablefake.CallDeleteNeighbor})
	res, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrNeighbor)
	assert.Len(t, k.NeighborList(rt.IPv4), 1)
	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, k.NeighborList(rt.IPv4))
}

func TestConntrackFailureHoldsTheMove(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a", "np-b")
	host := rt.Target{CIDR: mustP("10.0.0.7/32")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{host}))
	require.NoError(t, tbl.SetRoutes(2, "np-b", []rt.Target{host, {CIDR: mustP("10.0.1.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	k.AddFlow(routetablefake.Flow{Family: rt.IPv4, Src: mustA("10.9.9.9"), Dst: mustA("10.0.0.7")})

	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	require.NoError(t, tbl.RouteUpdate(2, "np-b", rt.Target{CIDR: mustP("10.0.2.0/24")}))
	k.Inject(routetablefake.Fault{Call: routetablefake.CallConntrack})
	res, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, rt.ErrConntrack)
	a, _ := k.LinkIndex("np-a")
	r, ok := k.Route(rt.IPv4, 0, host.CIDR, 0)
	require.True(t, ok)
	assert.Equal(t, a, r.OIF, "the moved route waits for its flows to go")
	_, ok = k.Route(rt.IPv4, 0, mustP("10.0.2.0/24"), 0)
	assert.True(t, ok, "other routes are written")
	assert.Len(t, k.Flows(), 1)

	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, _ = k.Route(rt.IPv4, 0, host.CIDR, 0)
	b, _ := k.LinkIndex("np-b")
	assert.Equal(t, b, r.OIF)
	assert.Empty(t, k.Flows())

	// Without conntrack cleanup nothing is deleted.
	k2 := routetablefake.New()
	tbl2, err := rt.New(rt.Options{Kernel: k2, Family: rt.IPv4, Table: rt.TableMain, NoConntrackCleanup: true})
	require.NoError(t, err)
	_, _ = k2.AddLink("np-a")
	require.NoError(t, k2.SetLinkUp("np-a", true))
	require.NoError(t, tbl2.SetRoutes(1, "np-a", []rt.Target{host}))
	_, err = tbl2.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, tbl2.SetRoutes(1, "np-a", nil))
	_, err = tbl2.Apply(context.Background())
	require.NoError(t, err)
	assert.Zero(t, k2.Calls(routetablefake.CallConntrack))
}

// A conntrack deletion that fails is tried again on its own backoff, not
// on every Apply; the route deletion that needed it is not held up.
func TestFailedConntrackFlushBacksOff(t *testing.T) {
	k, tbl, clk := newFake(t, rt.IPv4, "np-a")
	host := rt.Target{CIDR: mustP("10.0.0.7/32")}
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{host}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	k.AddFlow(routetablefake.Flow{Family: rt.IPv4, Src: mustA("10.9.9.9"), Dst: mustA("10.0.0.7")})

	// The deletion leaves a flush pending; it fails, waits 100 ms, fails
	// again, waits 200 ms.
	require.NoError(t, tbl.SetRoutes(1, "np-a", nil))
	k.Inject(routetablefake.Fault{Call: routetablefake.CallConntrack, Times: 2})
	for _, step := range []struct {
		advance time.Duration
		calls   int
	}{{0, 1}, {0, 0}, {100 * time.Millisecond, 1}, {199 * time.Millisecond, 0}} {
		clk.Advance(step.advance)
		before := k.Calls(routetablefake.CallConntrack)
		res, err := tbl.Apply(context.Background())
		require.ErrorIs(t, err, rt.ErrConntrack)
		require.ErrorIs(t, err, dataplane.ErrPartial)
		assert.Equal(t, step.calls, k.Calls(routetablefake.CallConntrack)-before, "after %v", step.advance)
		assert.Positive(t, res.RetryAfter)
		assert.LessOrEqual(t, res.RetryAfter, 200*time.Millisecond)
		assert.Len(t, k.Flows(), 1)
	}
	_, ok := k.Route(rt.IPv4, 0, host.CIDR, 0)
	assert.False(t, ok, "the route is deleted even though its flows are not")

	clk.Advance(time.Millisecond)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, k.Flows())
}

// Interfaces that come up have their routes re-read one by one, up to a
// limit past which one read of the whole table is cheaper; a failed
// re-read writes nothing and makes the next Apply read the whole table.
func TestRescanOfInterfacesThatComeUp(t *testing.T) {
	for _, n := range []int{1, 4, 5, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var names []string
			for i := range n {
				names = append(names, fmt.Sprintf("np-%d", i))
			}
			k, tbl, _ := newFake(t, rt.IPv4, names...)
			ctx := context.Background()
			for i, name := range names {
				require.NoError(t, tbl.SetRoutes(1, name, []rt.Target{{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i), 0}), 24)}}))
			}
			_, err := tbl.Apply(ctx)
			require.NoError(t, err)
			for _, name := range names {
				idx, _ := k.LinkIndex(name)
				require.NoError(t, k.SetLinkCarrier(name, false))
				tbl.OnIfaceStateChanged(name, idx, rt.IfaceDown)
			}
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			k.ResetCalls()
			for _, name := range names {
				idx, _ := k.LinkIndex(name)
				require.NoError(t, k.SetLinkCarrier(name, true))
				tbl.OnIfaceStateChanged(name, idx, rt.IfaceUp)
			}
			_, err = tbl.Apply(ctx)
			require.NoError(t, err)
			if n <= 4 {
				assert.Equal(t, n, k.Calls(routetablefake.CallDumpInterface))
				assert.Zero(t, k.Calls(routetablefake.CallDump))
			} else {
				assert.Zero(t, k.Calls(routetablefake.CallDumpInterface))
				assert.Equal(t, 1, k.Calls(routetablefake.CallDump), "one read of the table instead")
			}
			assert.Zero(t, k.Writes(), "the kernel kept every route")
			assert.Len(t, k.Routes(rt.IPv4, 0), n)
		})
	}

	t.Run("failure", func(t *testing.T) {
		k, tbl, _ := newFake(t, rt.IPv4, "np-a")
		ctx := context.Background()
		require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
		_, err := tbl.Apply(ctx)
		require.NoError(t, err)
		idx, _ := k.LinkIndex("np-a")
		require.NoError(t, k.SetLinkUp("np-a", false)) // routes flushed
		tbl.OnIfaceStateChanged("np-a", idx, rt.IfaceDown)
		_, err = tbl.Apply(ctx)
		require.NoError(t, err)
		require.NoError(t, k.SetLinkUp("np-a", true))
		tbl.OnIfaceStateChanged("np-a", idx, rt.IfaceUp)
		k.ResetCalls()
		k.Inject(routetablefake.Fault{Call: routetablefake.CallDumpInterface})
		_, err = tbl.Apply(ctx)
		require.ErrorIs(t, err, rt.ErrDump)
		assert.Zero(t, k.Writes())
		_, err = tbl.Apply(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, k.Calls(routetablefake.CallDump), "the whole table read after the failure")
		assert.Equal(t, 1, k.Writes())
		assert.Len(t, k.Routes(rt.IPv4, 0), 1)
		assert.Equal(t, uint64(1), tbl.Stats().Rescans)
	})
}

func TestIfaceIndexChanges(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)

	// Re-created between two monitor reports: only "up with a new index"
	// is seen.
	require.NoError(t, k.DeleteLink("np-a"))
	idx, _ := k.AddLink("np-a")
	require.NoError(t, k.SetLinkUp("np-a", true))
	tbl.OnIfaceStateChanged("np-a", idx, rt.IfaceUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, ok := k.Route(rt.IPv4, 0, mustP("10.0.0.0/24"), 0)
	require.True(t, ok)
	assert.Equal(t, idx, r.OIF)

	// A rename reported new name first: the index moves to the new name.
	require.NoError(t, k.SetLinkUp("np-a", false))
	require.NoError(t, k.RenameLink("np-a", "np-z"))
	require.NoError(t, k.SetLinkUp("np-z", true))
	tbl.OnIfaceStateChanged("np-z", idx, rt.IfaceUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	assert.Empty(t, k.Routes(rt.IPv4, 0), "np-a is gone: its route is held")
}

func TestPolicies(t *testing.T) {
	p, err := rt.NewDefaultPolicy(90, []string{`^np-`, `^tunl0$`})
	require.NoError(t, err)
	tests := []struct {
		proto uint8
		iface string
		ours  bool
		grace bool
	}{
		{90, "", true, false},
		{90, "eth0", true, false},
		{3, "np-1", true, true},
		{4, "tunl0", true, true},
		{rt.ProtoKernel, "np-1", false, true},
		{3, "eth0", false, false},
		{3, "", false, false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.ours, p.RouteIsOurs(&rt.KernelRoute{Protocol: tc.proto}, tc.iface), "%d %q", tc.proto, tc.iface)
		assert.Equal(t, tc.grace, p.IfaceHasGracePeriod(tc.iface), "%q", tc.iface)
	}
	_, err = rt.NewDefaultPolicy(90, []string{"("})
	require.ErrorIs(t, err, rt.ErrInvalidOptions)
	var ex rt.ExclusivePolicy
	assert.True(t, ex.RouteIsOurs(&rt.KernelRoute{Protocol: rt.ProtoKernel}, "eth0"))
	assert.False(t, ex.IfaceHasGracePeriod("np-1"))
	p2 := &rt.DefaultPolicy{Protocol: 5, Interfaces: []*regexp.Regexp{regexp.MustCompile("x")}}
	assert.True(t, p2.RouteIsOurs(&rt.KernelRoute{Protocol: 1}, "x"))
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "IPv4", rt.IPv4.String())
	assert.Equal(t, "IPv6", rt.IPv6.String())
	assert.Equal(t, "Family(3)", rt.Family(3).String())
	assert.Equal(t, "throw", rt.TargetThrow.String())
	assert.Equal(t, "TargetType(42)", rt.TargetType(42).String())
	for s, want := range map[rt.IfaceState]string{rt.IfaceGone: "gone", rt.IfaceDown: "down", rt.IfaceUp: "up", 7: "IfaceState(7)"} {
		assert.Equal(t, want, s.String())
	}
	for k, want := range map[rt.OpKind]string{rt.OpReplace: "replace", rt.OpAdd: "add", rt.OpDelete: "delete", 9: "OpKind(9)"} {
		assert.Equal(t, want, k.String())
	}
	assert.Equal(t, "10.0.0.0/8", rt.RouteKey{CIDR: mustP("10.0.0.0/8")}.String())
	assert.Equal(t, "replace", routetablefake.CallReplace.String())
	assert.Equal(t, "Call(99)", routetablefake.Call(99).String())
}

func TestMultipathWeightsAndHops(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a", "np-b")
	require.NoError(t, tbl.SetRoutes(1, rt.InterfaceNone, []rt.Target{{
		CIDR: mustP("10.0.0.0/8"),
		NextHops: []rt.NextHop{
			{Iface: "np-b", Gateway: mustA("10.1.0.1"), Weight: 3, Onlink: true},
			{Iface: "np-a", Gateway: mustA("10.2.0.1")},
			{Iface: "np-c", Gateway: mustA("10.3.0.1")}, // not there: left out
		},
	}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	r, ok := k.Route(rt.IPv4, 0, mustP("10.0.0.0/8"), 0)
	require.True(t, ok)
	require.Len(t, r.NextHops, 2)
	var got []string
	for _, h := range r.NextHops {
		got = append(got, fmt.Sprintf("%v w%d f%d", h.Gateway, h.Weight, h.Flags))
	}
	assert.ElementsMatch(t, []string{"10.1.0.1 w2 f4", "10.2.0.1 w0 f0"}, got)

	// np-c appears: the route gets its third path.
	idx, _ := k.AddLink("np-c")
	require.NoError(t, k.SetLinkUp("np-c", true))
	tbl.OnIfaceStateChanged("np-c", idx, rt.IfaceUp)
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	r, _ = k.Route(rt.IPv4, 0, mustP("10.0.0.0/8"), 0)
	assert.Len(t, r.NextHops, 3)
}

// TestConcurrentUse drives a Table from several goroutines at once, as an
// agent may (the monitor's callback, the loop, a metrics scraper); run
// with -race.
func TestConcurrentUse(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a", "np-b")
	a, _ := k.LinkIndex("np-a")
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(3)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tbl.OnIfaceStateChanged("np-a", a, rt.IfaceState(1+i%2))
			tbl.QueueResync()
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 200 {
			cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i), 0}), 24)
			_ = tbl.RouteUpdate(rt.RouteClass(i%3), []string{"np-a", "np-b"}[i%2], rt.Target{CIDR: cidr})
			_ = tbl.Stats()
		}
	}()
	go func() {
		defer wg.Done()
		for range 50 {
			_, _ = tbl.Apply(ctx)
		}
	}()
	time.Sleep(10 * time.Millisecond)
	close(stop)
	wg.Wait()
	tbl.OnIfaceStateChanged("np-a", a, rt.IfaceUp)
	_, err := tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 200, tbl.Stats().InKernel)
	assert.Len(t, k.Routes(rt.IPv4, 0), 200)
}

func TestNilContext(t *testing.T) {
	_, tbl, _ := newFake(t, rt.IPv4)
	//lint:ignore SA1012 a nil context is the input under test
	_, err := tbl.Apply(nil) //nolint:staticcheck
	require.NoError(t, err)
}

func TestApplyHonoursContext(t *testing.T) {
	k, tbl, _ := newFake(t, rt.IPv4, "np-a")
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.0.0/24")}}))
	_, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	require.NoError(t, tbl.SetRoutes(1, "np-a", []rt.Target{{CIDR: mustP("10.0.1.0/24")}}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, strings.Contains(err.Error(), "canceled"))
	_, err = tbl.Apply(context.Background())
	require.NoError(t, err)
	_, ok := k.Route(rt.IPv4, 0, mustP("10.0.1.0/24"), 0)
	assert.True(t, ok)
}

func TestErrorsWrapSentinels(t *testing.T) {
	err := &rt.RouteError{Key: rt.RouteKey{CIDR: mustP("10.0.0.0/8")}, Op: rt.OpDelete, Class: rt.ErrRouteFailed, Err: syscall.EBUSY}
	assert.ErrorIs(t, err, rt.ErrRouteFailed)
	assert.ErrorIs(t, err, syscall.EBUSY)
	assert.Equal(t, "routetable: delete 10.0.0.0/8: route write failed: device or resource busy", err.Error())
	ae := &rt.ApplyError{Failed: 1, Errors: []error{err, errors.New("b"), errors.New("c"), errors.New("d")}}
	assert.Contains(t, ae.Error(), "; …")
	assert.ErrorIs(t, ae, syscall.EBUSY)
}
