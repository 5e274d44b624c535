//go:build linux

package proxy

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// With Options.ConnectTimePods a pod's sockets in the cgroup are
// translated at connect(): every backend answers, the pod sees the service
// as its peer, and the tc programs translate none of its packets (the
// service's packet counter stays at zero while its connections count);
// the same pod outside the cgroup goes through the tc programs. What needs
// the client's address (session affinity) or an answer (no backend: a
// reset, where the node's own socket gets EPERM) stays with the tc
// programs. In both attach modes, as the tc programs take part.
func TestKernelProxyConnectTimePods(t *testing.T) {
	attachModes(t, testKernelProxyConnectTimePods)
}

func testKernelProxyConnectTimePods(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	backends := r.backendsAt(false, udpPort)
	names := map[string]bool{}
	for _, pod := range []*kerneltest.Pod{r.topo.Hosts[0].Pods[1], r.topo.Hosts[1].Pods[0], r.topo.Hosts[1].Pods[1]} {
		serveUDPName(t, pod.NS, pod.Name)
		names[pod.Name] = true
	}
	p := r.cgroupProxyWith(t, cg, func(o *Options) {
		o.ConnectTimePods = true
		o.RejectMark, o.RejectMask = 0x80000, 0x80000
	})
	r.refuseMarked(t, p)
	for _, svc := range []cluster.Service{
		{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4, clusterV6},
			Backends: append(r.backends(false), r.backends(true)...)},
		{Name: "kube-system/dns:dns", Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends},
		{Name: "default/empty:http", Port: 81, ClusterIPs: []netip.Addr{clusterV4, clusterV6}},
		{Name: "default/sticky:http", Port: 82, ClusterIPs: []netip.Addr{clusterV4}, AffinityTimeout: time.Hour,
			Backends: r.backendsAt(false, whoamiPort)},
	} {
		p.OnUpdate(svc)
	}
	apply(t, p)
	assert.Contains(t, p.Status().Interfaces, "cgroup:"+cg.path)
	assert.Empty(t, p.Status().Errors)
	pod := r.topo.Hosts[0].Pods[0]

	// TCP, both families: translated at connect().
	cgReachAll(t, cg, pod.NS, 80)
	web := p.Counters()["default/web:http"]
	assert.GreaterOrEqual(t, web.Connections, uint64(62), "%+v", web)
	assert.Zero(t, web.Packets, "no packet of these connections was translated by the tc programs: %+v", web)
	assert.Zero(t, ctEntriesFrom(t, p, pod.IPv4)+ctEntriesFrom(t, p, pod.IPv6), "nothing tracked for them")

	// The same pod outside the cgroup: translated per packet.
	assert.Len(t, spread(t, pod.NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
	assert.NotZero(t, p.Counters()["default/web:http"].Packets, "outside the cgroup the tc programs translate")

	// UDP, unconnected and connected: the replies come from the service.
	cgAskUDP(t, cg, pod.NS, netip.AddrPortFrom(clusterV4, 53), 15, names)
	dns := p.Counters()["kube-system/dns:dns"]
	assert.GreaterOrEqual(t, dns.Connections, uint64(20), "%+v", dns)
	assert.Zero(t, dns.Packets, "%+v", dns)

	// No backend: the pod's connection is left to the tc programs, whose
	// mark gets it a reset; the node's own socket in the same cgroup is
	// refused by the program (EPERM).
	for _, cip := range []netip.Addr{clusterV4, clusterV6} {
		_, err := cg.whoamiBash(pod.NS, netip.AddrPortFrom(cip, 81))
		assert.ErrorContains(t, err, "Connection refused", "a pod gets a reset (%v)", cip)
		_, err = cg.whoamiBash(r.topo.Hosts[0].NS, netip.AddrPortFrom(cip, 81))
		assert.ErrorContains(t, err, "Operation not permitted", "the node's socket gets EPERM (%v)", cip)
	}
	empty := p.Counters()["default/empty:http"]
	assert.GreaterOrEqual(t, empty.Rejects, uint64(4), "both kinds of refusal count: %+v", empty)

	// Session affinity keys on the pod's address: left to the tc
	// programs, which keep the pod on one backend.
	sticky := cgSpread(t, cg, pod.NS, netip.AddrPortFrom(clusterV4, 82), 10)
	assert.Len(t, sticky, 1, "one backend for the affine client: %v", sticky)
	assert.NotZero(t, p.Counters()["default/sticky:http"].Packets, "translated per packet")
	var (
		ak  affKey
		av  affVal
		hit bool
	)
	for it := p.k.aff.Iterate(); it.Next(&ak, &av); {
		hit = hit || ak.Client == addr16(pod.IPv4)
	}
	assert.True(t, hit, "the affinity is the pod's address")
}

// ConnectTimePods needs a Cgroup.
func TestNewConnectTimePodsNeedsCgroup(t *testing.T) {
	_, err := New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", ConnectTimePods: true})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", Cgroup: "/sys/fs/cgroup/unified/kubepods", ConnectTimePods: true})
	assert.NoError(t, err)
}
