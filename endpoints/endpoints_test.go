package endpoints_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/sysctls"
)

var (
	ctx    = context.Background()
	epoch  = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	podMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 5}
)

// rig is one family's Manager with its route table and sysctls driver on
// a fake namespace.
type rig struct {
	t        *testing.T
	ns       *kernelfake.Namespace
	f        ipfamily.Family
	clk      *clock.Fake
	routes   *routetable.Table
	sys      *sysctls.Driver
	m        *endpoints.Manager
	statuses []endpoints.Status
	// sysErr is the sysctls driver's error in the last pass.
	sysErr error
}

func newRig(t *testing.T, f ipfamily.Family, mutate func(*endpoints.Options)) *rig {
	t.Helper()
	r := &rig{t: t, ns: kernelfake.New(kernelfake.Options{}), f: f, clk: clock.NewFake(epoch)}
	r.build(mutate)
	return r
}

// build makes the rig's drivers and Manager on its namespace.
func (r *rig) build(mutate func(*endpoints.Options)) {
	t := r.t
	t.Helper()
	var err error
	r.routes, err = routetable.New(routetable.Options{Kernel: r.ns, Family: r.f, Table: kernel.TableMain,
		InterfacePatterns: []string{`^np`}, Clock: r.clk})
	require.NoError(t, err)
	r.sys, err = sysctls.New(sysctls.Options{Kernel: r.ns, Clock: r.clk, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	opts := endpoints.Options{Family: r.f, Kernel: r.ns, Routes: r.routes, SysctlDriver: r.sys, StaticNeighbors: true,
		OnStatus: func(s endpoints.Status) { r.statuses = append(r.statuses, s) }}
	if mutate != nil {
		mutate(&opts)
	}
	r.m, err = endpoints.New(opts)
	require.NoError(t, err)
}

// pass runs the Manager, the sysctls driver and the route driver as one
// loop pass does, and returns the statuses reported during it, the
// earliest retry the drivers ask for, and the errors of the Manager and
// the route driver (the sysctls driver's is in sysErr).
func (r *rig) pass(msgs ...any) ([]endpoints.Status, dataplane.ApplyResult, error) {
	r.t.Helper()
	for _, msg := range msgs {
		if lm, ok := msg.(linkMsg); ok {
			r.m.OnLink(lm.link, lm.state) // as the loop delivers it
			continue
		}
		r.m.OnUpdate(msg)
	}
	r.statuses = nil
	err := r.m.CompleteDeferredWork(ctx)
	sres, serr := r.sys.Apply(ctx)
	r.sysErr = serr
	res, aerr := r.m.RouteDriver().Apply(ctx)
	if sres.RetryAfter > 0 && (res.RetryAfter <= 0 || sres.RetryAfter < res.RetryAfter) {
		res.RetryAfter = sres.RetryAfter
	}
	return r.statuses, res, errors.Join(err, aerr)
}

// veth makes a veth pair name/name+"p" in the namespace, both ends up
// (a veth runs while both are), as a CNI plugin would.
func (r *rig) veth(name string) kernel.Link {
	r.t.Helper()
	adm := r.ns.Admin()
	l, err := adm.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: name + "p"}})
	require.NoError(r.t, err)
	p, err := adm.LinkByName(ctx, name+"p")
	require.NoError(r.t, err)
	require.NoError(r.t, adm.SetLinkUp(ctx, p.Index, true))
	require.NoError(r.t, adm.SetLinkUp(ctx, l.Index, true))
	l, err = adm.LinkByName(ctx, name)
	require.NoError(r.t, err)
	return l
}

// linkMsg is a link update, which pass gives the Manager's OnLink.
type linkMsg struct {
	link  kernel.Link
	state kernel.LinkState
}

func (r *rig) linkUpdate(name string) linkMsg {
	l, ok := r.ns.Link(name)
	if !ok {
		return linkMsg{kernel.Link{Name: name}, kernel.LinkGone}
	}
	return linkMsg{l, l.State()}
}

func (r *rig) addr(n int) netip.Prefix {
	if r.f == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 2, 0x44, 0, 1, 15: byte(n)}), 128)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(n)}), 32)
}

// route returns our route to p, if the kernel has one.
func (r *rig) route(p netip.Prefix) (kernel.Route, bool) {
	for _, rt := range r.ns.Routes(r.f, kernel.TableMain) {
		if rt.Dst == p && rt.Protocol == routetable.DefaultProtocol {
			return rt, true
		}
	}
	return kernel.Route{}, false
}

func (r *rig) neighbor(ip netip.Addr) (kernel.Neighbor, bool) {
	ns, err := r.ns.Admin().Neighbors(ctx, r.f, 0)
	require.NoError(r.t, err)
	for _, n := range ns {
		if n.IP == ip {
			return n, true
		}
	}
	return kernel.Neighbor{}, false
}

func (r *rig) sysctl(iface, leaf string) string {
	dir := "net/ipv4/conf/"
	if r.f == ipfamily.IPv6 {
		dir = "net/ipv6/conf/"
	}
	if leaf == "proxy_delay" {
		dir = "net/ipv4/neigh/"
	}
	v, err := r.ns.Admin().Sysctl(ctx, dir+iface+"/"+leaf)
	require.NoError(r.t, err)
	return v
}

func states(sts []endpoints.Status) []string {
	var out []string
	for _, s := range sts {
		out = append(out, s.ID+" "+s.State.String())
	}
	return out
}

func TestProgramsRoutesNeighboursAndSysctls(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			l := r.veth("np1")
			p := r.addr(5)
			sts, _, err := r.pass(cluster.Endpoint{ID: "pod5", Iface: "np1", Addrs: []netip.Prefix{p, r.other()}, MAC: podMAC})
			require.NoError(t, err)
			assert.Equal(t, []string{"pod5 programmed"}, states(sts))
			assert.Equal(t, f, sts[0].Family)
			rt, ok := r.route(p)
			require.True(t, ok, r.ns.Dump())
			assert.Equal(t, l.Index, rt.OIF)
			n, ok := r.neighbor(p.Addr())
			require.True(t, ok, "static neighbour")
			assert.Equal(t, podMAC, n.MAC)
			assert.Equal(t, kernel.NUDPermanent, n.State)
			for _, s := range endpoints.DefaultSysctls(f) {
				assert.Equal(t, s.Value, r.sysctl("np1", s.Name), s.Name)
			}

			// A second pass with nothing new writes nothing and reports
			// nothing.
			writes := r.ns.Writes()
			sts, _, err = r.pass()
			require.NoError(t, err)
			assert.Empty(t, sts)
			assert.Equal(t, writes, r.ns.Writes())
			assert.Equal(t, []string{"pod5 programmed"}, states(r.m.Statuses()))
		})
	}
}

// other returns an address of the other family, which the Manager ignores.
func (r *rig) other() netip.Prefix {
	if r.f == ipfamily.IPv6 {
		return netip.MustParsePrefix("10.244.1.99/32")
	}
	return netip.MustParsePrefix("fd00::99/128")
}

// The interface comes after the endpoint; goes down (carrier) and up; is
// deleted and re-created with the kernel's default sysctls: each time the
// status follows, and routes and sysctls come back.
func TestInterfaceLifecycle(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			p := r.addr(7)
			ep := cluster.Endpoint{ID: "pod7", Iface: "np7", Addrs: []netip.Prefix{p}, MAC: podMAC}
			sts, _, err := r.pass(ep)
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 interface-missing"}, states(sts))
			_, ok := r.route(p)
			assert.False(t, ok)

			r.veth("np7")
			sts, _, err = r.pass(r.linkUpdate("np7"))
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 programmed"}, states(sts))
			_, ok = r.route(p)
			assert.True(t, ok)

			// The pod's end goes down: no carrier.
			peer, _ := r.ns.Link("np7p")
			require.NoError(t, r.ns.Admin().SetLinkUp(ctx, peer.Index, false))
			sts, _, err = r.pass(r.linkUpdate("np7"))
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 interface-down"}, states(sts))
			require.NoError(t, r.ns.Admin().SetLinkUp(ctx, peer.Index, true))
			sts, _, err = r.pass(r.linkUpdate("np7"))
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 programmed"}, states(sts))

			// Deleted: missing. Re-created with another index and the
			// kernel's defaults: programmed again.
			old, _ := r.ns.Link("np7")
			require.NoError(t, r.ns.Admin().DeleteLink(ctx, old.Index))
			sts, _, err = r.pass(r.linkUpdate("np7"))
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 interface-missing"}, states(sts))
			_, ok = r.route(p)
			assert.False(t, ok)
			l := r.veth("np7")
			require.NotEqual(t, old.Index, l.Index)
			for _, s := range endpoints.DefaultSysctls(f) {
				if s.Name == "forwarding" {
					continue // follows the namespace's forwarding
				}
				require.NotEqual(t, s.Value, r.sysctl("np7", s.Name), "a new interface has the kernel's default %s", s.Name)
			}
			sts, _, err = r.pass(r.linkUpdate("np7"))
			require.NoError(t, err)
			assert.Equal(t, []string{"pod7 programmed"}, states(sts))
			rt, ok := r.route(p)
			require.True(t, ok)
			assert.Equal(t, l.Index, rt.OIF)
			for _, s := range endpoints.DefaultSysctls(f) {
				assert.Equal(t, s.Value, r.sysctl("np7", s.Name), s.Name)
			}
			_, ok = r.neighbor(p.Addr())
			assert.True(t, ok)
		})
	}
}

// Interfaces that exist before the Manager starts are found by its first
// listing, without any link message.
func TestFirstPassListsInterfaces(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.veth("np1")
	sts, _, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}})
	require.NoError(t, err)
	assert.Equal(t, []string{"a programmed"}, states(sts))
	_, ok := r.neighbor(r.addr(1).Addr())
	assert.False(t, ok, "no MAC, no neighbour")

	// A listing that fails fails the Manager; the loop resyncs and retries.
	r.ns.Fail(kernelfake.OpLinks, 1, nil)
	r.m.QueueResync()
	_, _, err = r.pass()
	require.ErrorIs(t, err, endpoints.ErrLinks)
	require.ErrorIs(t, err, kernelfake.ErrInjected)
	_, _, err = r.pass()
	require.NoError(t, err)
}

func TestRemoveAndMove(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.veth("np1")
	r.veth("np2")
	p := r.addr(1)
	_, _, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}, MAC: podMAC})
	require.NoError(t, err)

	// Moved to np2: the route follows.
	sts, _, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np2", Addrs: []netip.Prefix{p}, MAC: podMAC})
	require.NoError(t, err)
	assert.Equal(t, []string{"a programmed"}, states(sts))
	assert.Equal(t, "np2", sts[0].Iface)
	np2, _ := r.ns.Link("np2")
	rt, ok := r.route(p)
	require.True(t, ok)
	assert.Equal(t, np2.Index, rt.OIF)

	sts, _, err = r.pass(cluster.EndpointRemove{ID: "a"}, cluster.EndpointRemove{ID: "never"})
	require.NoError(t, err)
	assert.Empty(t, sts)
	_, ok = r.route(p)
	assert.False(t, ok)
	_, ok = r.neighbor(p.Addr())
	assert.False(t, ok)
	assert.Empty(t, r.m.Statuses())
	assert.Equal(t, "1", r.sysctl("np2", "proxy_arp"), "sysctls stay with the interface")

	// An endpoint of the other family only is not this Manager's.
	sts, _, err = r.pass(cluster.Endpoint{ID: "v6", Iface: "np1", Addrs: []netip.Prefix{netip.MustParsePrefix("fd00::1/128")}})
	require.NoError(t, err)
	assert.Empty(t, sts)
}

func TestInvalidEndpoint(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.veth("np1")
	p := r.addr(1)
	_, _, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}})
	require.NoError(t, err)
	for _, bad := range []cluster.Endpoint{
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.1/24")}},
		{ID: "a", Iface: "this-name-is-too-long", Addrs: []netip.Prefix{p}},
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}, MAC: net.HardwareAddr{1, 2, 3}},
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}, MAC: net.HardwareAddr{1, 0, 0, 0, 0, 1}},
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{{}}},
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p, netip.MustParsePrefix("::ffff:10.244.1.7/128")}}, // the IPv6 Manager's kind of address, refused by both
		{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}, FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"), Internal: netip.MustParseAddr("fd00::1")}}},
	} {
		sts, _, err := r.pass(bad)
		require.ErrorIs(t, err, endpoints.ErrInvalidEndpoint, "%+v", bad)
		require.ErrorIs(t, err, cluster.ErrInvalid, "%+v", bad)
		assert.Equal(t, 1, strings.Count(err.Error(), "endpoints: "), err.Error())
		assert.Equal(t, 0, strings.Count(err.Error(), "cluster: "), err.Error())
		require.Len(t, sts, 1)
		assert.Equal(t, endpoints.StateError, sts[0].State)
		require.ErrorIs(t, sts[0].Err, endpoints.ErrInvalidEndpoint)
		_, ok := r.route(p)
		assert.True(t, ok, "the last valid declaration stands")
		_, _, err = r.pass()
		require.NoError(t, err, "reported once")
		// A valid update clears the error.
		sts, _, err = r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}})
		require.NoError(t, err)
		assert.Equal(t, []string{"a programmed"}, states(sts))
	}
	_, _, err = r.pass(cluster.Endpoint{Iface: "np1"}, cluster.EndpointRemove{})
	require.ErrorIs(t, err, endpoints.ErrInvalidEndpoint)
}

// A sysctl the kernel refuses is the endpoint's error, retried by the
// sysctls driver on its own backoff, which it asks the loop to come back
// for.
func TestSysctlFailureRetries(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.veth("np1")
	refused := errors.New("read-only file system")
	r.ns.Refuse(func(op kernelfake.Op, obj any) error {
		if s, ok := obj.(kernelfake.Sysctl); ok && strings.HasSuffix(s.Key, "/proxy_arp") {
			return refused
		}
		return nil
	})
	sts, res, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}})
	require.NoError(t, err, "per-object failures are statuses, not the Manager's error")
	require.ErrorIs(t, r.sysErr, dataplane.ErrPartial, "the sysctls driver's object failure")
	require.Len(t, sts, 1)
	assert.Equal(t, endpoints.StateError, sts[0].State)
	require.ErrorIs(t, sts[0].Err, endpoints.ErrSysctl)
	require.ErrorIs(t, sts[0].Err, refused)
	assert.Contains(t, sts[0].Err.Error(), "net/ipv4/conf/np1/proxy_arp")
	assert.Equal(t, dataplane.DefaultBackoffInitial, res.RetryAfter)
	assert.Equal(t, 1, r.sys.Stats().Failing)

	// Not due: not tried.
	r.ns.Refuse(nil)
	sts, _, err = r.pass()
	require.NoError(t, err)
	assert.Empty(t, sts)
	assert.Equal(t, "0", r.sysctl("np1", "proxy_arp"))
	r.clk.Advance(res.RetryAfter)
	sts, res, err = r.pass()
	require.NoError(t, err)
	assert.Equal(t, []string{"a programmed"}, states(sts))
	assert.Zero(t, res.RetryAfter)
	assert.Equal(t, "1", r.sysctl("np1", "proxy_arp"))
}

// A route the kernel refuses is the endpoint's error; the table retries
// it, and the status follows.
func TestRouteFailure(t *testing.T) {
	r := newRig(t, ipfamily.IPv4, nil)
	r.veth("np1")
	r.veth("np2")
	bad := r.addr(9)
	r.ns.Refuse(func(op kernelfake.Op, obj any) error {
		if o, ok := obj.(kernel.RouteOp); ok && o.Route.Dst == bad {
			return errors.New("refused")
		}
		return nil
	})
	sts, res, err := r.pass(
		cluster.Endpoint{ID: "good", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}},
		cluster.Endpoint{ID: "bad", Iface: "np2", Addrs: []netip.Prefix{bad}},
	)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, []string{"bad error", "good programmed"}, states(sts))
	require.ErrorIs(t, sts[0].Err, endpoints.ErrRoute)
	require.ErrorIs(t, sts[0].Err, routetable.ErrRouteFailed)
	assert.Equal(t, 1, strings.Count(sts[0].Err.Error(), "endpoints: "), sts[0].Err.Error())
	require.Positive(t, res.RetryAfter)

	r.ns.Refuse(nil)
	r.clk.Advance(res.RetryAfter)
	sts, _, err = r.pass()
	require.NoError(t, err)
	assert.Equal(t, []string{"bad programmed"}, states(sts))
}

func TestCustomSysctlsAndNoNeighbours(t *testing.T) {
	r := newRig(t, ipfamily.IPv6, func(o *endpoints.Options) {
		o.Sysctls = []endpoints.Sysctl{{Name: "accept_ra", Value: "0"}}
		o.StaticNeighbors = false
	})
	r.veth("np1")
	p := r.addr(3)
	sts, _, err := r.pass(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{p}, MAC: podMAC})
	require.NoError(t, err)
	assert.Equal(t, []string{"a programmed"}, states(sts))
	assert.Equal(t, "0", r.sysctl("np1", "accept_ra"))
	assert.Equal(t, "0", r.sysctl("np1", "proxy_ndp"), "not asked for")
	_, ok := r.neighbor(p.Addr())
	assert.False(t, ok)
	assert.Equal(t, "endpoints-v6", r.m.Name())
	assert.Equal(t, r.routes.Name(), r.m.RouteDriver().(dataplane.Named).Name())
	assert.Equal(t, dataplane.PhaseRoutes, r.m.RouteDriver().Phase())
}

func TestOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	routes, err := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	require.NoError(t, err)
	sys, err := sysctls.New(sysctls.Options{Kernel: ns})
	require.NoError(t, err)
	good := endpoints.Options{Family: ipfamily.IPv4, Kernel: ns, Routes: routes, SysctlDriver: sys}
	var nilNS *kernelfake.Namespace
	for name, mutate := range map[string]func(*endpoints.Options){
		"no family":     func(o *endpoints.Options) { o.Family = 0 },
		"no kernel":     func(o *endpoints.Options) { o.Kernel = nil },
		"nil kernel":    func(o *endpoints.Options) { o.Kernel = nilNS },
		"no routes":     func(o *endpoints.Options) { o.Routes = nil },
		"routes family": func(o *endpoints.Options) { o.Family = ipfamily.IPv6 },
		"bad sysctl":    func(o *endpoints.Options) { o.Sysctls = []endpoints.Sysctl{{Name: "a/b", Value: "1"}} },
		"empty value":   func(o *endpoints.Options) { o.Sysctls = []endpoints.Sysctl{{Name: "rp_filter"}} },
		"bad dir":       func(o *endpoints.Options) { o.Sysctls = []endpoints.Sysctl{{Dir: "x", Name: "a", Value: "1"}} },
		"no sysctls":    func(o *endpoints.Options) { o.SysctlDriver = nil },
	} {
		o := good
		mutate(&o)
		_, err := endpoints.New(o)
		require.ErrorIs(t, err, endpoints.ErrInvalidOptions, name)
		assert.Equal(t, 1, strings.Count(err.Error(), "endpoints: "), err.Error())
	}
}

func TestStrings(t *testing.T) {
	for s, want := range map[endpoints.State]string{
		endpoints.StateProgrammed: "programmed", endpoints.StateInterfaceMissing: "interface-missing",
		endpoints.StateInterfaceDown: "interface-down", endpoints.StateError: "error", 0: "unknown",
	} {
		assert.Equal(t, want, s.String())
	}
	assert.Equal(t, "a (np1, IPv4): programmed", endpoints.Status{ID: "a", Iface: "np1", Family: ipfamily.IPv4, State: endpoints.StateProgrammed}.String())
	assert.Equal(t, "a (np1, IPv6): error: x", endpoints.Status{ID: "a", Iface: "np1", Family: ipfamily.IPv6, State: endpoints.StateError, Err: errors.New("x")}.String())
}

// A restarted agent — a new Manager and table on a programmed namespace —
// writes nothing and reports the endpoint programmed.
func TestRestartWritesNothing(t *testing.T) {
	for _, f := range ipfamily.All {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			r.veth("np1")
			ep := cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}, MAC: podMAC}
			_, _, err := r.pass(ep)
			require.NoError(t, err)
			writes := r.ns.Writes()

			again := &rig{t: t, ns: r.ns, f: f, clk: clock.NewFake(epoch)}
			again.build(nil)
			sts, _, err := again.pass(ep)
			require.NoError(t, err)
			assert.Equal(t, []string{"a programmed"}, states(sts))
			assert.Equal(t, writes, r.ns.Writes(), "routes, neighbours and sysctls adopted as they are")
		})
	}
}

// On a loop, a sysctl the kernel refuses once is retried by the loop's
// pass for the sysctls driver's RetryAfter, with nothing else happening:
// the status goes from error to programmed.
func TestLoopRetriesSysctl(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	r := &rig{t: t, ns: ns, f: ipfamily.IPv4}
	r.veth("np1")
	var refusals atomic.Int32
	ns.Refuse(func(op kernelfake.Op, obj any) error {
		if s, ok := obj.(kernelfake.Sysctl); ok && op == kernelfake.OpSetSysctl && strings.HasSuffix(s.Key, "/proxy_arp") && refusals.Add(1) == 1 {
			return errors.New("refused once")
		}
		return nil
	})
	routes, err := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np`}})
	require.NoError(t, err)
	sys, err := sysctls.New(sysctls.Options{Kernel: ns, Settings: []sysctls.Setting{}})
	require.NoError(t, err)
	statuses := make(chan endpoints.Status, 16)
	m, err := endpoints.New(endpoints.Options{Family: ipfamily.IPv4, Kernel: ns, Routes: routes, SysctlDriver: sys,
		OnStatus: func(s endpoints.Status) { statuses <- s }})
	require.NoError(t, err)
	loop := managertest.StartLoop(t, dataplane.Options{}, []dataplane.Manager{m}, m.RouteDriver(), sys)
	managertest.Send(t, loop, cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}})
	loop.DatastoreInSync()
	loop.InterfacesInSync()

	var seen []string
	for {
		select {
		case s := <-statuses:
			seen = append(seen, s.State.String())
			if s.State == endpoints.StateError {
				require.ErrorIs(t, s.Err, endpoints.ErrSysctl)
				assert.Contains(t, s.Err.Error(), "refused once")
			}
		case <-time.After(managertest.Converge):
			t.Fatalf("not programmed; statuses %v", seen)
		}
		if seen[len(seen)-1] == endpoints.StateProgrammed.String() {
			break
		}
	}
	assert.Equal(t, []string{"error", "programmed"}, seen)
	assert.Equal(t, "1", r.sysctl("np1", "proxy_arp"))
	assert.Equal(t, int32(2), refusals.Load(), "written twice: refused, then retried")
	assert.Zero(t, sys.Stats().Failing)
}
