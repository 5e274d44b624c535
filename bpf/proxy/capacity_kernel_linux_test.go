//go:build linux

package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

// capSvc is service name with n backends of one family (IPv6 when v6) at
// cluster IP number ip of that family.
func capSvc(name string, ip int, n int, v6 bool) cluster.Service {
	s := cluster.Service{Name: name, Port: 80}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, 1, byte(ip), byte(i + 1)})
		if v6 {
			a = netip.AddrFrom16([16]byte{0xfd, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(ip), byte(i + 1)})
		}
		s.Backends = append(s.Backends, cluster.Backend{Addr: netip.AddrPortFrom(a, 8080)})
	}
	if v6 {
		s.ClusterIPs = []netip.Addr{netip.AddrFrom16([16]byte{0xfd, 0, 0x96, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(ip)})}
	} else {
		s.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(ip)})}
	}
	return s
}

// served returns the services whose frontends are all in the map, each
// with all of its backends (a frontend's count is the service's backend
// count, and every one of them is in the backend map), by name. It fails
// the test on a frontend that counts a missing backend or fewer backends
// than its service has, and on a service written in part.
func served(t *testing.T, p *Proxy) []string {
	t.Helper()
	inFe := map[feKey]feVal{}
	var key feKey
	var val feVal
	it := p.k.fe.Iterate()
	for it.Next(&key, &val) {
		inFe[key] = val
	}
	require.NoError(t, it.Err())
	var names []string
	for name, s := range p.services {
		e := build(s.s, p.nodeAddrs)
		in := 0
		for _, f := range e.frontends {
			v, ok := inFe[f.key]
			if !ok {
				continue
			}
			in++
			require.Equal(t, uint32(len(e.backends[f.fam])), v.Count, "%s: %v counts %d backends", name, f.key, v.Count)
			for i := range v.Count {
				var bv beVal
				require.NoError(t, p.k.be.Lookup(&beKey{SvcID: v.SvcID, Ordinal: i}, &bv), "%s: %v counts backend %d", name, f.key, i)
				require.Equal(t, e.backends[f.fam][i], bv)
			}
		}
		require.True(t, in == 0 || in == len(e.frontends), "%s: %d of %d frontends written", name, in, len(e.frontends))
		if in > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// applyRefused applies and returns the PartialError, which must hold one
// ErrMapFull *dataplane.ObjectError per service it counts (the entries of
// the Proxy's ledger of refused services).
func applyRefused(t *testing.T, p *Proxy) *dataplane.PartialError {
	t.Helper()
	res, err := p.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrMapFull)
	for _, e := range pe.Errs {
		var oe *dataplane.ObjectError
		require.ErrorAs(t, e, &oe)
		require.ErrorIs(t, e, ErrMapFull, "only the map is full")
		require.Equal(t, []any{"proxy", "write", kindService}, []any{oe.Driver, oe.Op, oe.Kind})
	}
	require.Len(t, pe.Errs, pe.Failed+pe.Waiting, "one error per service that waits: %v", err)
	require.Zero(t, res.RetryAfter, "nothing to retry on a timer: room is made by an Apply")
	require.Equal(t, pe.Failed+pe.Waiting, p.Stats().Failing, "DriverStats count the services that wait")
	return pe
}

// A backend map too small for every service: the services are admitted
// whole, in name order, as long as they fit (a smaller one after one that
// does not fit still gets in); the others are reported, in Status one by
// one and in Apply's error one error each, and not tried again by Applies that
// make no room (no map syscall); a new service does not take the room of
// one that is served; removing one makes room that the waiting services,
// in name order, take in the same Apply; a restarted Proxy admits the
// services that were served and writes nothing. IPv4 and IPv6.
func TestKernelProxyBackendMapCapacity(t *testing.T) {
	dir := bpftest.Dir(t)
	opts := Options{Kernel: doHere{}, PinDir: dir, Backends: 10}
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	svcs := []cluster.Service{
		capSvc("s0", 1, 3, false), capSvc("s1", 2, 3, true), capSvc("s2", 3, 3, false),
		capSvc("s3", 4, 3, true), capSvc("s4", 5, 3, false), capSvc("s5", 6, 1, true),
	}
	for _, s := range slices.Backward(svcs) { // the order of the messages does not matter
		p.OnUpdate(s)
	}
	pe := applyRefused(t, p)
	require.Equal(t, []string{"s0", "s1", "s2", "s5"}, served(t, p), "3+3+3 backends, then s5's one fits")
	require.Equal(t, []int{2, 0}, []int{pe.Failed, pe.Waiting})
	require.Equal(t, []string{"s3", "s4"}, refusedNames(pe))
	st := p.Status()
	require.Equal(t, []int{4, 4, 10}, []int{st.Services, st.Frontends, st.Backends})
	errs := serviceErrors(st)
	require.Len(t, errs, 2)
	for i, n := range []string{"s3", "s4"} {
		require.Contains(t, errs[i], "write service "+n+": ")
		require.Contains(t, errs[i], "map full")
		// Said when it was refused, before s5 took the last entry.
		require.Contains(t, errs[i], "backend map np_be (10 entries) has room for 1 more, the service needs 3")
	}

	// Nothing changed: the waiting services are not tried again.
	calls := p.mapSyscalls()
	pe = applyRefused(t, p)
	require.Equal(t, []int{0, 2}, []int{pe.Failed, pe.Waiting})
	require.Equal(t, calls, p.mapSyscalls(), "no map syscall")

	// A new service does not take the room of one that is served, even one
	// that sorts first.
	p.OnUpdate(capSvc("a", 7, 1, false))
	p.OnUpdate(capSvc("s0", 1, 3, false)) // declared again with it
	pe = applyRefused(t, p)
	require.Equal(t, []int{1, 2}, []int{pe.Failed, pe.Waiting})
	require.Equal(t, []string{"s0", "s1", "s2", "s5"}, served(t, p))

	// s1 goes: its 3 entries are room that the waiting services take, in
	// the same Apply and in name order: a (1), then s3 (3) no longer fits.
	p.OnUpdate(cluster.ServiceRemove{Name: "s1"})
	pe = applyRefused(t, p)
	require.Equal(t, []string{"a", "s0", "s2", "s5"}, served(t, p))
	require.Equal(t, 2, pe.Failed+pe.Waiting, "s3 and s4 wait")
	require.Len(t, serviceErrors(p.Status()), 2)

	// A restarted Proxy, given the services in any order, admits the ones
	// that were served and writes nothing (in name order alone s3 would
	// have taken s5's room).
	require.NoError(t, p.Close())
	p2, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(context.Background()) })
	for _, s := range []cluster.Service{capSvc("s3", 4, 3, true), capSvc("s5", 6, 1, true), capSvc("a", 7, 1, false),
		capSvc("s4", 5, 3, false), capSvc("s2", 3, 3, false), capSvc("s0", 1, 3, false)} {
		p2.OnUpdate(s)
	}
	pe = applyRefused(t, p2)
	require.Equal(t, []string{"a", "s0", "s2", "s5"}, served(t, p2))
	require.Equal(t, 2, pe.Failed)
	fs, bs := p2.k.feSync.Counters(), p2.k.beSync.Counters()
	require.Equal(t, []int{0, 0, 0, 0}, []int{fs.Updated, fs.Deleted, bs.Updated, bs.Deleted}, "the restart wrote nothing")

	// A served service that grows beyond the room left is withdrawn whole,
	// not written in part, and the room it let go goes to the first waiting
	// service that fits.
	p2.OnUpdate(capSvc("s5", 6, 4, true))
	applyRefused(t, p2)
	require.Equal(t, []string{"a", "s0", "s2", "s3"}, served(t, p2))
	require.Len(t, serviceErrors(p2.Status()), 2, "s4 and s5 wait")

	// Room for everything again: no error at all.
	p2.OnUpdate(cluster.ServiceRemove{Name: "s0"})
	p2.OnUpdate(cluster.ServiceRemove{Name: "s2"})
	p2.OnUpdate(cluster.ServiceRemove{Name: "s4"})
	_, err = p2.Apply(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"a", "s3", "s5"}, served(t, p2))
	require.Empty(t, serviceErrors(p2.Status()))
}

// The frontend map has the same rule: a service whose frontends do not
// all fit is not written at all, one with fewer frontends after it is.
func TestKernelProxyFrontendMapCapacity(t *testing.T) {
	dir := bpftest.Dir(t)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir, Frontends: 5})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	dual := func(name string, ip int) cluster.Service {
		s := capSvc(name, ip, 1, false)
		s6 := capSvc(name, ip, 1, true)
		s.ClusterIPs = append(s.ClusterIPs, s6.ClusterIPs...)
		s.Backends = append(s.Backends, s6.Backends...)
		return s
	}
	p.OnUpdate(dual("a", 1))
	p.OnUpdate(dual("b", 2))
	p.OnUpdate(dual("c", 3))
	p.OnUpdate(capSvc("d", 4, 2, true))
	pe := applyRefused(t, p)
	require.Equal(t, []string{"a", "b", "d"}, served(t, p))
	require.Equal(t, 1, pe.Failed)
	errs := serviceErrors(p.Status())
	require.Len(t, errs, 1)
	require.Equal(t, `proxy: write service c: map full: the frontend map np_fe (5 entries) has room for 1 more, the service needs 2`, errs[0])
	p.OnUpdate(cluster.ServiceRemove{Name: "a"})
	_, err = p.Apply(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c", "d"}, served(t, p))
}

// The scale: 100,000 backends (20,000 services of 5) for a
// 65,536-entry backend map. The services that fit are served whole, the
// others wait, one error each, and an Apply that changes nothing makes no map
// syscall. It logs how long the Applies took (it asserts no time).
func TestKernelProxyCapacityAtScale(t *testing.T) {
	dir := bpftest.Dir(t)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir, Backends: 65536})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	const services, per = 20000, 5
	for i := range services {
		s := cluster.Service{Name: fmt.Sprintf("ns/svc-%05d:http", i), Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
		for j := range per {
			s.Backends = append(s.Backends, cluster.Backend{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(j), byte(i >> 8), byte(i)}), 8080)})
		}
		p.OnUpdate(s)
	}
	start := time.Now()
	pe := applyRefused(t, p)
	first := time.Since(start)
	fit := 65536 / per
	require.Equal(t, []int{services - fit, 0}, []int{pe.Failed, pe.Waiting})
	st := p.Status()
	require.Equal(t, []int{fit, fit, fit * per}, []int{st.Services, st.Frontends, st.Backends})
	require.Len(t, serviceErrors(st), services-fit)
	require.Len(t, served(t, p), fit)
	calls := p.mapSyscalls()
	start = time.Now()
	pe = applyRefused(t, p)
	again := time.Since(start)
	require.Equal(t, []int{0, services - fit}, []int{pe.Failed, pe.Waiting})
	require.Equal(t, calls, p.mapSyscalls(), "no map syscall")
	t.Logf("%d services of %d backends, backend map of 65536: first Apply %v (%d map syscalls), next Apply %v (none)",
		services, per, first, calls, again)
}

// refusedNames returns the names of the services pe says wait, sorted.
func refusedNames(pe *dataplane.PartialError) []string {
	var names []string
	for _, e := range pe.Objects() {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return names
}
