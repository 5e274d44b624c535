package proxy

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/netfilter"
)

// These tests need no kernel: they cover what the Proxy does before it
// touches a map (validation, the entries a service turns into, the
// messages it records).

var (
	mustAddr = netip.MustParseAddr
	mustAP   = netip.MustParseAddrPort
)

// noKernel is a Kernel for a Proxy that never applies.
type noKernel struct{}

func (noKernel) Do(func() error) error { return errors.New("no kernel in unit tests") }

func validService() cluster.Service {
	return cluster.Service{
		Name:       "default/web:http",
		Port:       80,
		ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")},
		Backends:   []cluster.Backend{{Addr: mustAP("10.244.1.7:8080")}},
	}
}

// The Proxy refuses what cluster.Service.Validate refuses, under its own
// prefix.
func TestServiceValidate(t *testing.T) {
	badAddrs := map[string]netip.Addr{
		"invalid":             {},
		"zone":                mustAddr("fe80::1%eth0"),
		"unspecified v4":      mustAddr("0.0.0.0"),
		"unspecified v6":      mustAddr("::"),
		"multicast v4":        mustAddr("224.0.0.1"),
		"multicast v6":        mustAddr("ff02::1"),
		"v4-mapped v6 (4in6)": mustAddr("::ffff:10.96.0.10"),
	}
	type tc struct {
		name string
		mod  func(*cluster.Service)
		want string // a substring of the error; "" means valid
	}
	cases := []tc{
		{"valid", func(*cluster.Service) {}, ""},
		{"valid UDP", func(s *cluster.Service) { s.Protocol = cluster.UDP }, ""},
		{"valid explicit TCP", func(s *cluster.Service) { s.Protocol = cluster.TCP }, ""},
		{"valid without cluster IPs or backends", func(s *cluster.Service) { s.ClusterIPs, s.Backends = nil, nil }, ""},
		{"valid dual stack with external IPs and node port", func(s *cluster.Service) {
			s.ClusterIPs = append(s.ClusterIPs, mustAddr("fd00:96::10"))
			s.ExternalIPs = []netip.Addr{mustAddr("192.0.2.1"), mustAddr("2001:db8::1")}
			s.NodePort = 30080
			s.Backends = append(s.Backends, cluster.Backend{Addr: mustAP("[fd00:244::7]:8080"), Local: true})
		}, ""},
		{"empty name", func(s *cluster.Service) { s.Name = "" }, "empty name"},
		{"SCTP", func(s *cluster.Service) { s.Protocol = 132 }, "protocol 132 is neither TCP nor UDP"},
		{"ICMP", func(s *cluster.Service) { s.Protocol = 1 }, "protocol 1 is neither TCP nor UDP"},
		{"port 0", func(s *cluster.Service) { s.Port = 0 }, "port 0"},
		{"backend without address", func(s *cluster.Service) { s.Backends = []cluster.Backend{{}} }, "no address or port 0"},
		{"backend without port", func(s *cluster.Service) {
			s.Backends = []cluster.Backend{{Addr: netip.AddrPortFrom(mustAddr("10.244.1.7"), 0)}}
		}, "no address or port 0"},
	}
	for what, a := range badAddrs {
		cases = append(cases,
			tc{"cluster IP " + what, func(s *cluster.Service) { s.ClusterIPs = append(s.ClusterIPs, a) }, "frontend address"},
			tc{"external IP " + what, func(s *cluster.Service) { s.ExternalIPs = []netip.Addr{a} }, "frontend address"},
		)
		if a.IsValid() {
			cases = append(cases, tc{"backend " + what, func(s *cluster.Service) {
				s.Backends = append(s.Backends, cluster.Backend{Addr: netip.AddrPortFrom(a, 8080)})
			}, "not a unicast address without zone"})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validService()
			c.mod(&s)
			p := newTestProxy(t)
			p.OnUpdate(s)
			err := p.CompleteDeferredWork(context.Background())
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidService)
			assert.ErrorIs(t, err, cluster.ErrInvalid)
			assert.Contains(t, err.Error(), c.want)
			if s.Name != "" {
				assert.Contains(t, err.Error(), s.Name, "the error names the service")
			}
			assert.Equal(t, 1, strings.Count(err.Error(), "proxy:"), "the prefix once: %v", err)
		})
	}
}

// fe is the frontend build should make for a at port.
func fe(a string, port uint16, proto cluster.Protocol, flags uint32) frontend {
	ad := mustAddr(a)
	return frontend{key: feKey{Addr: addr16(ad), Port: port16(port), Proto: uint8(proto)}, fam: famIndex(ad), flags: flags}
}

// sortedFes sorts frontends as build does, for comparisons.
func sortedFes(fes ...frontend) []frontend {
	slices.SortFunc(fes, func(a, b frontend) int { return compareFeKey(a.key, b.key) })
	return fes
}

func be(ap string) beVal {
	a := mustAP(ap)
	return beVal{Addr: addr16(a.Addr()), Port: port16(a.Port())}
}

func TestBuildFrontends(t *testing.T) {
	nodeAddrs := []netip.Addr{mustAddr("192.0.2.10"), mustAddr("198.51.100.10"), mustAddr("2001:db8::10")}
	cases := []struct {
		name string
		s    cluster.Service
		want []frontend
	}{
		{
			name: "cluster IPs of both families",
			s:    cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("fd00:96::10"), mustAddr("10.96.0.10")}},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0), fe("fd00:96::10", 80, cluster.TCP, 0)),
		},
		{
			name: "UDP",
			s:    cluster.Service{Name: "s", Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{mustAddr("10.96.0.53")}},
			want: sortedFes(fe("10.96.0.53", 53, cluster.UDP, 0)),
		},
		{
			name: "external IPs without ExternalTrafficLocal",
			s: cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")},
				ExternalIPs: []netip.Addr{mustAddr("203.0.113.5")}},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0), fe("203.0.113.5", 80, cluster.TCP, 0)),
		},
		{
			name: "external IPs with ExternalTrafficLocal: the cluster IP keeps no flag",
			s: cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")},
				ExternalIPs: []netip.Addr{mustAddr("203.0.113.5")}, ExternalTrafficLocal: true},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0), fe("203.0.113.5", 80, cluster.TCP, feExternalLocal)),
		},
		{
			name: "NodePort of a v4-only service: v4 node addresses only",
			s:    cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")}, NodePort: 30080},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0),
				fe("192.0.2.10", 30080, cluster.TCP, feNodePort), fe("198.51.100.10", 30080, cluster.TCP, feNodePort)),
		},
		{
			name: "NodePort of a dual-stack service with ExternalTrafficLocal",
			s: cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10"), mustAddr("fd00:96::10")},
				NodePort: 30080, ExternalTrafficLocal: true},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0), fe("fd00:96::10", 80, cluster.TCP, 0),
				fe("192.0.2.10", 30080, cluster.TCP, feNodePort|feExternalLocal),
				fe("198.51.100.10", 30080, cluster.TCP, feNodePort|feExternalLocal),
				fe("2001:db8::10", 30080, cluster.TCP, feNodePort|feExternalLocal)),
		},
		{
			name: "NodePort without cluster IPs: the families of the backends",
			s: cluster.Service{Name: "s", Port: 80, NodePort: 30080,
				Backends: []cluster.Backend{{Addr: mustAP("[fd00:244::7]:8080")}}},
			want: sortedFes(fe("2001:db8::10", 30080, cluster.TCP, feNodePort)),
		},
		{
			name: "NodePort without cluster IPs: the families of external IPs and backends",
			s: cluster.Service{Name: "s", Port: 80, NodePort: 30080, ExternalIPs: []netip.Addr{mustAddr("203.0.113.5")},
				Backends: []cluster.Backend{{Addr: mustAP("[fd00:244::7]:8080")}}},
			want: sortedFes(fe("203.0.113.5", 80, cluster.TCP, 0), fe("192.0.2.10", 30080, cluster.TCP, feNodePort),
				fe("198.51.100.10", 30080, cluster.TCP, feNodePort), fe("2001:db8::10", 30080, cluster.TCP, feNodePort)),
		},
		{
			name: "NodePort without any family: none",
			s:    cluster.Service{Name: "s", Port: 80, NodePort: 30080},
			want: nil,
		},
		{
			name: "duplicates removed",
			s: cluster.Service{Name: "s", Port: 80, NodePort: 30080,
				ClusterIPs:  []netip.Addr{mustAddr("10.96.0.10"), mustAddr("10.96.0.10")},
				ExternalIPs: []netip.Addr{mustAddr("203.0.113.5"), mustAddr("203.0.113.5")}},
			want: sortedFes(fe("10.96.0.10", 80, cluster.TCP, 0), fe("203.0.113.5", 80, cluster.TCP, 0),
				fe("192.0.2.10", 30080, cluster.TCP, feNodePort), fe("198.51.100.10", 30080, cluster.TCP, feNodePort)),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, c.s.Validate())
			addrs := nodeAddrs
			if c.name == "duplicates removed" {
				addrs = append(slices.Clone(nodeAddrs), nodeAddrs...)
			}
			assert.Equal(t, c.want, build(c.s, addrs).frontends)
		})
	}
}

func TestBuildFrontendsWithoutNodeAddrs(t *testing.T) {
	s := cluster.Service{Name: "s", Port: 80, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")}, NodePort: 30080}
	assert.Equal(t, []frontend{fe("10.96.0.10", 80, cluster.TCP, 0)}, build(s, nil).frontends)
}

func TestBuildBackends(t *testing.T) {
	s := cluster.Service{Name: "s", Port: 80, Backends: []cluster.Backend{
		{Addr: mustAP("10.244.2.3:8080")},
		{Addr: mustAP("10.244.1.9:8080"), Local: true},
		{Addr: mustAP("[fd00:244:2::3]:8080")},
		{Addr: mustAP("10.244.2.1:8080")},
		{Addr: mustAP("10.244.1.2:8080"), Local: true},
		{Addr: mustAP("[fd00:244:1::2]:8080"), Local: true},
		{Addr: mustAP("10.244.2.1:8080")},              // a duplicate
		{Addr: mustAP("10.244.2.1:9090")},              // another port: another backend
		{Addr: mustAP("10.244.1.2:8080"), Local: true}, // a duplicate
	}}
	require.NoError(t, s.Validate())
	e := build(s, nil)
	assert.Equal(t, [2][]beVal{
		{be("10.244.1.2:8080"), be("10.244.1.9:8080"), be("10.244.2.1:8080"), be("10.244.2.1:9090"), be("10.244.2.3:8080")},
		{be("[fd00:244:1::2]:8080"), be("[fd00:244:2::3]:8080")},
	}, e.backends, "per family, local first, then by address and port, without duplicates")
	assert.Equal(t, [2]uint32{2, 1}, e.local)

	// A family without local backends has no local count.
	s.Backends = []cluster.Backend{{Addr: mustAP("10.244.2.3:8080")}}
	e = build(s, nil)
	assert.Equal(t, [2][]beVal{{be("10.244.2.3:8080")}}, e.backends)
	assert.Zero(t, e.local[0])
	assert.Empty(t, e.backends[1])

	// One address listed as local and as remote is one backend, local.
	s.Backends = []cluster.Backend{{Addr: mustAP("10.0.0.1:80"), Local: true}, {Addr: mustAP("10.0.0.2:80"), Local: true}, {Addr: mustAP("10.0.0.1:80")}}
	e = build(s, nil)
	assert.Equal(t, [2][]beVal{{be("10.0.0.1:80"), be("10.0.0.2:80")}}, e.backends)
	assert.Equal(t, uint32(2), e.local[0])

	// Local-only backends come first and are counted; an address listed
	// local only and also as serving all traffic (local, or not) serves
	// all traffic.
	s.Backends = []cluster.Backend{
		{Addr: mustAP("10.0.0.9:80"), Local: true, LocalOnly: true},
		{Addr: mustAP("10.0.0.1:80"), Local: true},
		{Addr: mustAP("10.0.0.5:80"), Local: true, LocalOnly: true},
		{Addr: mustAP("10.0.0.3:80"), Local: true, LocalOnly: true},
		{Addr: mustAP("10.0.0.3:80")},
		{Addr: mustAP("10.0.0.4:80"), Local: true, LocalOnly: true},
		{Addr: mustAP("10.0.0.4:80"), Local: true},
		{Addr: mustAP("10.0.0.2:80")},
		{Addr: mustAP("[fd00::7]:80"), Local: true, LocalOnly: true},
	}
	require.NoError(t, s.Validate())
	e = build(s, nil)
	assert.Equal(t, [2][]beVal{
		{be("10.0.0.5:80"), be("10.0.0.9:80"), be("10.0.0.1:80"), be("10.0.0.3:80"), be("10.0.0.4:80"), be("10.0.0.2:80")},
		{be("[fd00::7]:80")},
	}, e.backends)
	assert.Equal(t, [2]uint32{5, 1}, e.local)
	assert.Equal(t, [2]uint32{2, 1}, e.localOnly)
}

// The maps hold ports in network byte order and addresses in 16 bytes, an
// IPv4 address as ::ffff:a.b.c.d, as the program reads them from packets.
func TestBuildByteOrder(t *testing.T) {
	s := cluster.Service{Name: "s", Protocol: cluster.UDP, Port: 0x1234, NodePort: 30080, ClusterIPs: []netip.Addr{mustAddr("10.96.0.10")},
		Backends: []cluster.Backend{{Addr: mustAP("10.244.1.7:8080")}}}
	e := build(s, []netip.Addr{mustAddr("192.0.2.10")})
	require.Len(t, e.frontends, 2)
	k := e.frontends[0].key
	assert.Equal(t, [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 96, 14: 0, 15: 10}, k.Addr)
	assert.Equal(t, [2]byte{0x12, 0x34}, k.Port)
	assert.Equal(t, uint8(17), k.Proto)
	assert.Equal(t, [2]byte{30080 >> 8, 30080 & 0xff}, e.frontends[1].key.Port)
	b := e.backends[0][0]
	assert.Equal(t, [16]byte{10: 0xff, 11: 0xff, 12: 10, 13: 244, 14: 1, 15: 7}, b.Addr)
	assert.Equal(t, [2]byte{0x1f, 0x90}, b.Port, "8080")
	assert.Equal(t, uint16(8080), fromPort16(b.Port))
	assert.Equal(t, mustAddr("10.244.1.7"), fromAddr16(b.Addr))
	assert.Equal(t, "10.96.0.10:4660/UDP", k.String())
	v6 := mustAddr("fd00:96::10")
	assert.Equal(t, v6.As16(), addr16(v6))
	assert.Equal(t, v6, fromAddr16(addr16(v6)))
}

func TestNewOptions(t *testing.T) {
	good := func() Options { return Options{Kernel: noKernel{}, PinDir: "/sys/fs/bpf/np"} }
	bad := []struct {
		name string
		mod  func(*Options)
	}{
		{"no Kernel", func(o *Options) { o.Kernel = nil }},
		{"no PinDir", func(o *Options) { o.PinDir = "" }},
		{"relative PinDir", func(o *Options) { o.PinDir = "sys/fs/bpf/np" }},
		{"empty host interface", func(o *Options) { o.HostInterfaces = []string{"eth0", ""} }},
		{"host interface too long", func(o *Options) { o.HostInterfaces = []string{"abcdefghijklmnop"} }},
		{"host interface with a slash", func(o *Options) { o.HostInterfaces = []string{"eth/0"} }},
		{"host interface with a space", func(o *Options) { o.HostInterfaces = []string{"eth 0"} }},
		{"empty pod prefix", func(o *Options) { o.PodInterfacePrefixes = []string{""} }},
		{"pod prefix too long", func(o *Options) { o.PodInterfacePrefixes = []string{"abcdefghijklmnop"} }},
		{"pod prefix with a colon", func(o *Options) { o.PodInterfacePrefixes = []string{"veth:"} }},
		{"mark without mask", func(o *Options) { o.MasqueradeMark = 0x4000 }},
		{"mask without mark", func(o *Options) { o.MasqueradeMask = 0x4000 }},
		{"mark outside mask", func(o *Options) { o.MasqueradeMark, o.MasqueradeMask = 0x8000, 0x4000 }},
		{"mark partly outside mask", func(o *Options) { o.MasqueradeMark, o.MasqueradeMask = 0xc000, 0x4000 }},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			o := good()
			c.mod(&o)
			p, err := New(o)
			assert.Nil(t, p)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidOptions)
		})
	}

	t.Run("defaults", func(t *testing.T) {
		o := good()
		o.PinDir = "/sys/fs/bpf/np/"
		p, err := New(o)
		require.NoError(t, err)
		assert.Equal(t, "bpf-proxy", p.Name())
		assert.Equal(t, "/sys/fs/bpf/np", p.o.PinDir, "cleaned")
		assert.Equal(t, uint32(DefaultFrontends), p.o.Frontends)
		assert.Equal(t, uint32(DefaultBackends), p.o.Backends)
		assert.Equal(t, uint32(DefaultConnections), p.o.Connections)
		assert.NotNil(t, p.o.Clock)
		assert.NotNil(t, p.log)
		_, ok := p.MasqueradeRule()
		assert.False(t, ok, "no mark, no rule")
		assert.Equal(t, Status{}, p.Status())
		assert.NoError(t, p.CompleteDeferredWork(context.Background()))
	})

	t.Run("explicit values kept", func(t *testing.T) {
		o := good()
		o.Name, o.Frontends, o.Backends, o.Connections = "svc", 10, 20, 30
		o.HostInterfaces, o.PodInterfacePrefixes = []string{"eth0", "bond0.100"}, []string{"cali", "veth"}
		o.MasqueradeMark, o.MasqueradeMask = 0x4000, 0xc000
		p, err := New(o)
		require.NoError(t, err)
		assert.Equal(t, "svc", p.Name())
		assert.Equal(t, [3]uint32{10, 20, 30}, [3]uint32{p.o.Frontends, p.o.Backends, p.o.Connections})
		r, ok := p.MasqueradeRule()
		require.True(t, ok)
		assert.Equal(t, netfilter.Masquerade(), r.Action)
		assert.Equal(t, []netfilter.Match{netfilter.Mark(0x4000, 0xc000)}, r.Matches, "the mark under its mask")
	})
}

func newTestProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(Options{Kernel: noKernel{}, PinDir: "/sys/fs/bpf/np",
		HostInterfaces: []string{"eth0", "bond0"}, PodInterfacePrefixes: []string{"veth", "cali"}})
	require.NoError(t, err)
	return p
}

func TestOnUpdateInvalidServiceChangesNothing(t *testing.T) {
	p := newTestProxy(t)
	ctx := context.Background()
	good := validService()
	p.OnUpdate(good)
	require.NoError(t, p.CompleteDeferredWork(ctx))
	clear(p.dirty)

	bad := good
	bad.Port = 0
	bad.Backends = nil
	p.OnUpdate(bad)
	assert.Empty(t, p.dirty, "nothing to apply")
	require.Contains(t, p.services, good.Name)
	assert.Equal(t, good, p.services[good.Name].s, "the valid version stays")
	st := p.Status()
	require.Len(t, st.Errors, 1)
	assert.Contains(t, st.Errors[0], good.Name)

	err := p.CompleteDeferredWork(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidService)
	assert.Contains(t, err.Error(), "port 0")
	assert.NoError(t, p.CompleteDeferredWork(ctx), "reported once")

	// A valid update of the name ends the error.
	p.OnUpdate(good)
	assert.NoError(t, p.CompleteDeferredWork(ctx))
	assert.Empty(t, p.Status().Errors)
	assert.True(t, p.dirty[good.Name])

	// Without a name: reported, nothing recorded.
	p.OnUpdate(cluster.Service{Port: 80})
	assert.Len(t, p.services, 1)
	assert.Empty(t, p.invalid)
	assert.ErrorIs(t, p.CompleteDeferredWork(ctx), ErrInvalidService)

	// Several invalid messages are all reported by one call.
	p.OnUpdate(cluster.Service{Name: "a"})
	p.OnUpdate(cluster.Service{Name: "b", Port: 1, Protocol: 132})
	err = p.CompleteDeferredWork(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a"`)
	assert.Contains(t, err.Error(), `"b"`)
	assert.Len(t, p.Status().Errors, 2)

	// Removing an invalid name forgets its error.
	p.OnUpdate(cluster.ServiceRemove{Name: "a"})
	assert.Len(t, p.Status().Errors, 1)
}

func TestOnUpdateKeepsItsOwnCopy(t *testing.T) {
	p := newTestProxy(t)
	s := validService()
	s.ExternalIPs = []netip.Addr{mustAddr("203.0.113.5")}
	p.OnUpdate(s)
	s.ClusterIPs[0] = mustAddr("10.96.0.99")
	s.ExternalIPs[0] = mustAddr("203.0.113.99")
	s.Backends[0].Addr = mustAP("10.244.9.9:1")
	got := p.services[s.Name].s
	assert.Equal(t, mustAddr("10.96.0.10"), got.ClusterIPs[0])
	assert.Equal(t, mustAddr("203.0.113.5"), got.ExternalIPs[0])
	assert.Equal(t, mustAP("10.244.1.7:8080"), got.Backends[0].Addr)
}

func TestOnUpdateServiceRemove(t *testing.T) {
	p := newTestProxy(t)
	ctx := context.Background()
	p.OnUpdate(cluster.ServiceRemove{Name: "default/nothing:http"})
	assert.NoError(t, p.CompleteDeferredWork(ctx), "an unknown name is no error")
	assert.Empty(t, p.dirty)
	assert.Empty(t, p.services)

	s := validService()
	p.OnUpdate(s)
	clear(p.dirty)
	p.OnUpdate(cluster.ServiceRemove{Name: s.Name})
	assert.True(t, p.dirty[s.Name])
	assert.True(t, p.services[s.Name].removed, "withdrawn by the next Apply")
	// Declared again before that Apply: it stays.
	p.OnUpdate(s)
	assert.False(t, p.services[s.Name].removed)

	p.OnUpdate(cluster.ServiceRemove{})
	assert.ErrorIs(t, p.CompleteDeferredWork(ctx), ErrInvalidService, "an empty name is reported")
}

func TestOnUpdateNodeAddrs(t *testing.T) {
	p := newTestProxy(t)
	ctx := context.Background()
	withNodePort := validService()
	withNodePort.NodePort = 30080
	other := validService()
	other.Name = "default/other:http"
	other.ClusterIPs = []netip.Addr{mustAddr("10.96.0.11")}
	p.OnUpdate(withNodePort)
	p.OnUpdate(other)
	clear(p.dirty)

	p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{mustAddr("2001:db8::10"), mustAddr("192.0.2.10"), mustAddr("192.0.2.10")}})
	assert.Equal(t, []netip.Addr{mustAddr("192.0.2.10"), mustAddr("2001:db8::10")}, p.nodeAddrs, "sorted, without duplicates")
	assert.Equal(t, map[string]bool{withNodePort.Name: true}, p.dirty, "only the services with a NodePort")
	assert.NoError(t, p.CompleteDeferredWork(ctx))

	clear(p.dirty)
	p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{mustAddr("192.0.2.10"), mustAddr("2001:db8::10")}})
	assert.Empty(t, p.dirty, "the same addresses change nothing")

	for _, a := range []netip.Addr{{}, mustAddr("fe80::1%eth0"), mustAddr("224.0.0.1"), mustAddr("0.0.0.0"), mustAddr("::ffff:192.0.2.11")} {
		p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{mustAddr("192.0.2.12"), a}})
		assert.Equal(t, []netip.Addr{mustAddr("192.0.2.10"), mustAddr("2001:db8::10")}, p.nodeAddrs, "%v: nothing changes", a)
		assert.Empty(t, p.dirty)
		err := p.CompleteDeferredWork(ctx)
		assert.ErrorIs(t, err, ErrInvalidService, "%v is reported", a)
		assert.ErrorContains(t, err, "node address")
	}

	p.OnUpdate(cluster.NodeAddrs{})
	assert.Empty(t, p.nodeAddrs)
	assert.True(t, p.dirty[withNodePort.Name])
}

func TestOnUpdateLinks(t *testing.T) {
	p := newTestProxy(t)
	for i, n := range []string{"eth0", "bond0", "veth1a2b", "cali123", "eth1", "lo", "vet", "bond0.100", "xveth1", "tunl0"} {
		p.OnLink(kernel.Link{Name: n, Index: i + 1}, kernel.LinkUp)
	}
	assert.Equal(t, map[string]iface{
		"eth0":     {index: 1, host: true},
		"bond0":    {index: 2, host: true},
		"veth1a2b": {index: 3},
		"cali123":  {index: 4},
	}, p.links, "host interfaces by name, pod interfaces by prefix, nothing else")

	// A down interface keeps its programs; a gone one loses them; a name
	// back with a new index is followed.
	p.OnLink(kernel.Link{Name: "veth1a2b", Index: 3}, kernel.LinkDown)
	p.OnLink(kernel.Link{Name: "cali123", Index: 4}, kernel.LinkGone)
	p.OnLink(kernel.Link{Name: "eth0", Index: 1}, kernel.LinkGone)
	p.OnLink(kernel.Link{Name: "eth0", Index: 42}, kernel.LinkUp)
	p.OnLink(kernel.Link{Name: "lo", Index: 6}, kernel.LinkGone)
	assert.Equal(t, map[string]iface{
		"eth0":     {index: 42, host: true},
		"bond0":    {index: 2, host: true},
		"veth1a2b": {index: 3},
	}, p.links)
	assert.Empty(t, p.dirty, "interfaces make no service dirty")
	assert.NoError(t, p.CompleteDeferredWork(context.Background()))
}

func TestOnUpdateIgnoresOtherMessages(t *testing.T) {
	p := newTestProxy(t)
	p.OnUpdate("hello")
	s := validService()
	p.OnUpdate(&s) // a pointer is another type
	p.OnUpdate(nil)
	assert.Empty(t, p.services)
	assert.Empty(t, p.dirty)
	assert.NoError(t, p.CompleteDeferredWork(context.Background()))
}

// The flags and sizes of layout.go are those of c/nat.h (the kernel test
// TestKernelProgLayout checks the sizes against the program's BTF; this one
// needs no kernel).
func TestLayoutMatchesHeader(t *testing.T) {
	h, err := os.ReadFile(filepath.Join("c", "nat.h"))
	require.NoError(t, err)
	defines := map[string]uint32{}
	for _, m := range regexp.MustCompile(`(?m)^#define (NP_\w+) (0x[0-9a-fA-F]+)`).FindAllStringSubmatch(string(h), -1) {
		v, err := strconv.ParseUint(m[2], 0, 32)
		require.NoError(t, err)
		defines[m[1]] = uint32(v)
	}
	assert.Equal(t, map[string]uint32{
		"NP_FE_EXTERNAL_LOCAL": feExternalLocal,
		"NP_FE_NODEPORT":       feNodePort,
		"NP_FE_INTERNAL_LOCAL": feInternalLocal,
		"NP_FE_SOURCE_RANGES":  feSourceRanges,
		"NP_FE_MAGLEV":         feMaglev,
		"NP_FE_DSR":            feDSR,
		"NP_FE_SOURCE_NODE":    feSourceNode,
		"NP_CT_DSR":            ctDSR,
		"NP_CT_NODE":           ctNode,
		"NP_CT_FIN_ACKED":      ctFinAcked,
		"NP_DSR_OPT4":          0x9e,
		"NP_DSR_OPT6":          0x1e,
		"NP_BE_LOCAL":          uint32(beLocal),
		"NP_CT_REVERSE":        ctReverse,
		"NP_CT_FIN":            ctFin,
		"NP_CT_REPLIED":        ctReplied,
		"NP_STAT_CT_FULL":      statCTFull,
		"NP_STAT_CLOSED":       statClosed,
		"NP_STAT_COUNT":        statCount,
		"NP_CT_MASQ":           ctMasq,
		"NP_CT_HAIRPIN":        ctHairpin,
	}, defines)
	sizes := map[string]int{}
	for _, m := range regexp.MustCompile(`\}; // (\d+) bytes`).FindAllStringSubmatchIndex(string(h), -1) {
		name := regexp.MustCompile(`struct (np_\w+) \{`).FindAllStringSubmatch(string(h[:m[0]]), -1)
		require.NotEmpty(t, name)
		n, err := strconv.Atoi(string(h[m[2]:m[3]]))
		require.NoError(t, err)
		sizes[name[len(name)-1][1]] = n
	}
	assert.Equal(t, map[string]int{
		"np_fe_key": feKeySize, "np_fe_val": feValSize, "np_be_key": beKeySize,
		"np_be_val": beValSize, "np_ct_key": ctKeySize, "np_ct_val": ctValSize,
		"np_sk_key": skKeySize, "np_sk_val": skValSize, "np_aff_key": affKeySize, "np_aff_val": affValSize, "np_svc_stats": svcStatsSize, "np_src_key": srcKeySize,
		"np_maglev_key": mgKeySize,
	}, sizes)
	assert.Equal(t, []uintptr{feKeySize, feValSize, beKeySize, beValSize, ctKeySize, ctValSize, skKeySize, skValSize, affKeySize, affValSize, svcStatsSize, srcKeySize, mgKeySize},
		[]uintptr{unsafe.Sizeof(feKey{}), unsafe.Sizeof(feVal{}), unsafe.Sizeof(beKey{}),
			unsafe.Sizeof(beVal{}), unsafe.Sizeof(ctKey{}), unsafe.Sizeof(ctVal{}), unsafe.Sizeof(skKey{}), unsafe.Sizeof(skVal{}),
			unsafe.Sizeof(affKey{}), unsafe.Sizeof(affVal{}), unsafe.Sizeof(svcStats{}), unsafe.Sizeof(srcKey{}), unsafe.Sizeof(mgKey{})})
}

// An address that is two frontends of one service (a cluster IP that is
// also an external IP, an external IP that is also a node address with
// Port == NodePort) is one entry with the flags of both, whatever the
// order.
func TestBuildMergesSharedFrontends(t *testing.T) {
	var addrs []netip.Addr
	for i := range 20 {
		addrs = append(addrs, netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)}))
	}
	s := cluster.Service{Name: "s", Port: 80, NodePort: 80, ClusterIPs: addrs, ExternalIPs: addrs, ExternalTrafficLocal: true}
	e := build(s, addrs[:5])
	require.Len(t, e.frontends, 20)
	for i, f := range e.frontends {
		want := feExternalLocal
		if i < 5 {
			want |= feNodePort
		}
		assert.Equal(t, want, f.flags, "%v", f.key)
	}
}
