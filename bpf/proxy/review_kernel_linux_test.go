//go:build linux

package proxy

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/idalloc"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

// foreignPins pins a map under each of names in PinDir/links: objects
// whose names look like the Proxy's attachment pins but are not ones it
// makes.
func foreignPins(t *testing.T, dir string, names ...string) {
	t.Helper()
	links := filepath.Join(dir, linksDir)
	require.NoError(t, os.MkdirAll(links, 0o700))
	for _, n := range names {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		require.NoError(t, err)
		require.NoError(t, m.Pin(filepath.Join(links, n)))
		require.NoError(t, m.Close())
	}
}

// The stale-pin sweep and Cleanup remove only the names the Proxy makes:
// ingress_<interface>, egress_<interface> with a valid interface name, and
// cgroup_<hook> for its hooks. A pin that merely starts like one is
// foreign and stays.
func TestKernelReviewForeignPinsSurvive(t *testing.T) {
	dir := bpftest.Dir(t)
	foreign := []string{"cgroup_foreign", "ingress_", "egress_longer-than-fifteen-bytes"}
	foreignPins(t, dir, foreign...)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir})
	require.NoError(t, err)
	_, err = p.Apply(context.Background())
	require.NoError(t, err)
	for _, n := range foreign {
		require.FileExists(t, filepath.Join(dir, linksDir, n), "after the sweep")
	}
	require.NoError(t, p.Cleanup(context.Background()))
	for _, n := range foreign {
		require.FileExists(t, filepath.Join(dir, linksDir, n), "after Cleanup")
	}
}

// recount is Status's service figures computed from every service, as
// Status did before it kept a tally.
func recount(p *Proxy) (services, frontends, backends int, refused []string) {
	for n, s := range p.services {
		if e, ok := p.refused.Get(n); ok {
			refused = append(refused, e.Error())
			continue
		}
		if len(s.fes) > 0 || len(s.bes) > 0 {
			services++
		}
		frontends += len(s.fes)
		backends += len(s.bes)
	}
	slices.Sort(refused)
	return
}

// Status's tally stays equal to a count over every service through
// updates, a conflict and its resolution, removals and a Cleanup.
func TestKernelReviewStatusTally(t *testing.T) {
	dir := bpftest.Dir(t)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	be := func(s string) cluster.Backend { return cluster.Backend{Addr: netip.MustParseAddrPort(s)} }
	check := func(what string) {
		t.Helper()
		_, err := p.Apply(ctx)
		s, f, b, refused := recount(p)
		if len(refused) == 0 {
			require.NoError(t, err, what)
		} else {
			require.ErrorIs(t, err, ErrFrontendConflict, what)
		}
		st := p.Status()
		require.Equal(t, []int{s, f, b}, []int{st.Services, st.Frontends, st.Backends}, what)
		require.ElementsMatch(t, refused, slices.DeleteFunc(slices.Clone(st.Errors), func(e string) bool {
			return !strings.Contains(e, "frontend held")
		}), what)
	}
	a := cluster.Service{Name: "a", Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		Backends: []cluster.Backend{be("10.0.0.1:8080"), be("10.0.0.2:8080")}}
	b := cluster.Service{Name: "b", Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		Backends: []cluster.Backend{be("10.0.0.3:8080")}}
	c := cluster.Service{Name: "c", Port: 53, Protocol: cluster.UDP, NodePort: 30053,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::10")},
		Backends:   []cluster.Backend{be("10.0.0.4:53"), be("[fd00::4]:53")}}
	p.OnUpdate(a)
	check("a")
	p.OnUpdate(b)
	p.OnUpdate(c)
	check("b conflicts, c written")
	require.Equal(t, 2, p.Status().Services)
	require.Len(t, serviceErrors(p.Status()), 1)
	p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("fd01::1")}})
	check("node addresses")
	p.OnUpdate(cluster.ServiceRemove{Name: "a"})
	check("a removed, b takes the frontend")
	require.Empty(t, serviceErrors(p.Status()))
	c.Backends = c.Backends[:1]
	p.OnUpdate(c)
	check("c loses a backend")
	require.NoError(t, p.Cleanup(ctx))
	check("after Cleanup")
	p.OnUpdate(cluster.ServiceRemove{Name: "b"})
	p.OnUpdate(cluster.ServiceRemove{Name: "c"})
	check("all removed")
	require.Zero(t, p.Status().Frontends)
}

// serviceErrors returns the errors of Status that are about a service.
func serviceErrors(st Status) []string {
	return slices.DeleteFunc(slices.Clone(st.Errors), func(e string) bool { return !strings.HasPrefix(e, "proxy: write service ") })
}

// A service refused for want of a free service ID is written once another
// service lets go of one, as a service refused for a frontend conflict is;
// it does not wait for an update of its own.
func TestKernelReviewNoFreeIDRetried(t *testing.T) {
	dir := bpftest.Dir(t)
	p, err := New(Options{Kernel: doHere{}, PinDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	_, err = p.Apply(ctx)
	require.NoError(t, err)
	p.k.ids, err = idalloc.NewIndexAllocator(idalloc.IndexOptions{Ranges: []idalloc.Range{{Min: 1, Max: 1}}, NoDefaultExclusions: true})
	require.NoError(t, err)
	svc := func(name, ip string) cluster.Service {
		return cluster.Service{Name: name, Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)},
			Backends: []cluster.Backend{{Addr: netip.MustParseAddrPort("10.0.0.1:8080")}}}
	}
	p.OnUpdate(svc("a", "10.96.0.1"))
	p.OnUpdate(svc("b", "10.96.0.2"))
	_, err = p.Apply(ctx)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Failed)
	require.ErrorContains(t, err, "no free service ID")
	st := p.Status()
	require.Equal(t, 1, st.Services)
	require.Len(t, serviceErrors(st), 1, "b has no ID")
	p.OnUpdate(cluster.ServiceRemove{Name: "a"})
	_, err = p.Apply(ctx)
	require.NoError(t, err)
	st = p.Status()
	require.Equal(t, 1, st.Services, "b took a's ID")
	require.Empty(t, serviceErrors(st))
	require.NotNil(t, p.services["b"])
	require.NotEmpty(t, p.services["b"].fes)
}

// Two services that want one frontend cannot both be served: the one that
// was keeps it across a restart, whatever the names say. A restarted
// Proxy that is given both finds, in the maps, which one held the
// frontend (its frontends and backends there whole) and admits it again,
// writing nothing; the other keeps waiting. Two shapes: the same cluster
// IP twice (the served one's name sorts last), and a service whose
// external IP is another's cluster IP (a tenant's claim on a victim's
// address, whose name sorts first).
func TestKernelReviewRestartKeepsContestedFrontend(t *testing.T) {
	be := func(s string) []cluster.Backend { return []cluster.Backend{{Addr: netip.MustParseAddrPort(s)}} }
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	for _, tc := range []struct {
		name           string
		served, second cluster.Service
	}{
		{"same cluster IP",
			cluster.Service{Name: "z/old", Port: 80, ClusterIPs: ip("10.96.0.20"), Backends: be("10.244.1.7:8080")},
			cluster.Service{Name: "a/new", Port: 80, ClusterIPs: ip("10.96.0.20"), Backends: be("10.244.1.8:8080")}},
		{"external IP on another's cluster IP",
			cluster.Service{Name: "web/svc", Port: 80, ClusterIPs: ip("10.96.0.30"), Backends: be("10.244.1.30:8080")},
			cluster.Service{Name: "a-evil/x", Port: 80, ClusterIPs: ip("10.96.0.31"), ExternalIPs: ip("10.96.0.30"),
				Backends: be("10.244.9.9:8080")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bpftest.Dir(t)
			ctx := context.Background()
			frontend := feKey{Addr: addr16(tc.served.ClusterIPs[0]), Port: port16(80), Proto: protoTCP}
			check := func(p *Proxy, what string) {
				t.Helper()
				_, err := p.Apply(ctx)
				require.ErrorIs(t, err, ErrFrontendConflict, what)
				errs := serviceErrors(p.Status())
				require.Len(t, errs, 1, what)
				assert.Contains(t, errs[0], "write service "+tc.second.Name+":", what)
				fes, err := p.k.feSync.Kernel(ctx)
				require.NoError(t, err)
				bes, err := p.k.beSync.Kernel(ctx)
				require.NoError(t, err)
				fe, ok := fes[frontend]
				require.True(t, ok, what)
				got := bes[beKey{SvcID: fe.SvcID}]
				assert.Equal(t, addr16(tc.served.Backends[0].Addr.Addr()), got.Addr, "%s: the frontend's backend", what)
			}
			p, err := New(Options{Kernel: doHere{}, PinDir: dir})
			require.NoError(t, err)
			p.OnUpdate(tc.served)
			_, err = p.Apply(ctx)
			require.NoError(t, err)
			p.OnUpdate(tc.second)
			check(p, "the second one waits")
			require.NoError(t, p.Close())

			p, err = New(Options{Kernel: doHere{}, PinDir: dir})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Cleanup(ctx) })
			p.OnUpdate(tc.second)
			p.OnUpdate(tc.served)
			check(p, "after a restart")
			c := p.k.feSync.Counters()
			b := p.k.beSync.Counters()
			assert.Zero(t, c.Updated+c.Deleted+b.Updated+b.Deleted, "a restart given the same services writes no entry")
		})
	}
}
