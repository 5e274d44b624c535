//go:build linux

package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// internalTrafficPolicy Local: connections from pods to the cluster IP go
// to this node's backend only, in both families; with no local backend
// they are dropped.
func TestKernelProxyInternalTrafficLocal(t *testing.T) {
	attachModes(t, testKernelProxyInternalTrafficLocal)
}

func testKernelProxyInternalTrafficLocal(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	for _, v6 := range []bool{false, true} {
		ip := clusterIP(v6)
		svc := cluster.Service{Name: "default/local:http", Port: 80, ClusterIPs: []netip.Addr{ip}, InternalTrafficLocal: true,
			Backends: r.backends(v6)}
		p.OnUpdate(svc)
		apply(t, p)
		got := spread(t, client.NS, netip.AddrPortFrom(ip, 80), 20)
		assert.Equal(t, map[string]int{"host1-pod2": 20}, got, "v6=%v: the local backend only", v6)

		svc.Backends = svc.Backends[1:] // the remote ones
		p.OnUpdate(svc)
		apply(t, p)
		assert.Error(t, tcpConnect(client.NS, netip.AddrPortFrom(ip, 80), 500*time.Millisecond), "v6=%v: no local backend: dropped", v6)
		p.OnUpdate(cluster.ServiceRemove{Name: svc.Name})
		apply(t, p)
	}
}

// sessionAffinity ClientIP: every new connection of a client goes to the
// backend its first went to, for as long as the timeout runs from its
// last; another client is not bound by it; a backend that leaves frees
// its clients to pick again.
func TestKernelProxySessionAffinity(t *testing.T) { attachModes(t, testKernelProxySessionAffinity) }

func testKernelProxySessionAffinity(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	svc := cluster.Service{Name: "default/sticky:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, AffinityTimeout: time.Hour,
		Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	to := netip.AddrPortFrom(clusterV4, 80)
	h1 := r.topo.Hosts[0]
	got := spread(t, h1.Pods[0].NS, to, 30)
	require.Len(t, got, 1, "one backend for one client: %v", got)
	c := p.Counters()[svc.Name]
	assert.Equal(t, uint64(30), c.Connections, "%+v", c)
	assert.Greater(t, c.Packets, 3*c.Connections, "a SYN, an ACK, a FIN each way at least: %+v", c)
	assert.Greater(t, c.Bytes, 40*c.Packets, "%+v", c)
	var first string
	for name := range got {
		first = name
	}
	// Without affinity, 30 connections over three backends reach more
	// than one (a check that the affinity, not chance, made the single
	// answer above: the odds of one backend 30 times are 3^-29).
	plain := svc
	plain.Name, plain.Port, plain.AffinityTimeout = "default/plain:http", 81, 0
	p.OnUpdate(plain)
	apply(t, p)
	assert.Greater(t, len(spread(t, h1.Pods[0].NS, netip.AddrPortFrom(clusterV4, 81), 30)), 1)

	// The chosen backend leaves: the client picks another, and sticks to it.
	var kept []cluster.Backend
	for _, b := range svc.Backends {
		if r.names[b.Addr.Addr()] != first {
			kept = append(kept, b)
		}
	}
	svc.Backends = kept
	p.OnUpdate(svc)
	apply(t, p)
	again := spread(t, h1.Pods[0].NS, to, 20)
	require.Len(t, again, 1, "%v", again)
	assert.NotContains(t, again, first)
	// The affinity is kept in np_aff, by service and client.
	var (
		k   affKey
		v   affVal
		n   int
		cur = map[netip.Addr]bool{}
	)
	for _, b := range kept {
		cur[b.Addr.Addr()] = true
	}
	for it := p.k.aff.Iterate(); it.Next(&k, &v); {
		if fromAddr16(k.Client) == h1.Pods[0].IPv4 {
			n++
			assert.True(t, cur[fromAddr16(v.Addr)], "remembered backend %v", fromAddr16(v.Addr))
			assert.InDelta(t, float64(monotonicNow()), float64(v.Last), float64(time.Minute), "remembered when, on the programs' clock")
		}
	}
	assert.Equal(t, 1, n, "one affinity for the client (the plain service keeps none)")

	// The backend comes back, listed as local: it takes ordinal 0 and
	// every other backend moves up one; then it goes again, and they move
	// back. The client keeps its backend each time, found at its new
	// ordinal, as kube-proxy keeps it by endpoint. (Picking afresh would
	// keep it by chance, one time in three a round.)
	var chosen string
	for name := range again {
		chosen = name
	}
	var back cluster.Backend
	for _, b := range r.backends(false) {
		if r.names[b.Addr.Addr()] == first {
			back, back.Local = b, true
		}
	}
	require.True(t, back.Addr.IsValid())
	for round := range 4 {
		svc.Backends = kept
		if round%2 == 0 {
			svc.Backends = append([]cluster.Backend{back}, kept...)
		}
		p.OnUpdate(svc)
		apply(t, p)
		renumbered := spread(t, h1.Pods[0].NS, to, 5)
		assert.Equal(t, map[string]int{chosen: 5}, renumbered, "round %d: the client stays with its backend after a renumbering", round)
	}
}

// loadBalancerSourceRanges: a load balancer IP takes connections only from
// the service's source ranges; its external IPs and cluster IPs are not
// guarded; a change of ranges applies to new connections.
func TestKernelProxySourceRanges(t *testing.T) { attachModes(t, testKernelProxySourceRanges) }

func testKernelProxySourceRanges(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	h1, h2 := r.topo.Hosts[0], r.topo.Hosts[1]
	var h1Addr, h2Addr netip.Addr
	for _, a := range h1.UnderlayAddrs() {
		if a.Is4() {
			h1Addr = a
		}
	}
	for _, a := range h2.UnderlayAddrs() {
		if a.Is4() {
			h2Addr = a
		}
	}
	lbIP := netip.MustParseAddr("203.0.113.10")
	out, err := h2.NS.Exec(t.Context(), "ip", "route", "add", lbIP.String()+"/32", "via", h1Addr.String())
	require.NoError(t, err, "%s", out)
	svc := cluster.Service{Name: "default/lb:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, LoadBalancerIPs: []netip.Addr{lbIP},
		SourceRanges: []netip.Prefix{netip.PrefixFrom(h2Addr, 32), netip.MustParsePrefix("fd00:1::/64")}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	to := netip.AddrPortFrom(lbIP, 80)
	reaches := func(from *kerneltest.NS) bool { return tcpConnect(from, to, 700*time.Millisecond) == nil }
	pod := h1.Pods[0]
	assert.True(t, reaches(h2.NS), "host2, in the ranges")
	assert.False(t, reaches(pod.NS), "a pod outside the ranges")
	got := spread(t, pod.NS, netip.AddrPortFrom(clusterV4, 80), 5)
	assert.NotEmpty(t, got, "the cluster IP is not guarded")

	svc.SourceRanges = []netip.Prefix{netip.PrefixFrom(pod.IPv4, 32)}
	p.OnUpdate(svc)
	apply(t, p)
	assert.False(t, reaches(h2.NS), "host2, no longer in the ranges")
	assert.True(t, reaches(pod.NS), "the pod, now in the ranges")

	svc.SourceRanges = nil
	p.OnUpdate(svc)
	apply(t, p)
	assert.True(t, reaches(h2.NS), "no ranges: everyone")
	var k srcKey
	var v srcVal
	assert.False(t, p.k.src.Iterate().Next(&k, &v), "no range left in np_src")
}

// ICMP errors about a translated connection reach the client translated
// back: a UDP client of a service whose backend port is closed gets the
// backend's port unreachable as ECONNREFUSED (its stack matches the error
// to its socket only once the quoted packet names the frontend), in both
// families, for local and remote backends.
func TestKernelProxyICMPErrorsTranslated(t *testing.T) {
	attachModes(t, testKernelProxyICMPErrorsTranslated)
}

func testKernelProxyICMPErrorsTranslated(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	for _, v6 := range []bool{false, true} {
		ip := clusterIP(v6)
		for i, b := range r.backends(v6) {
			svc := cluster.Service{Name: fmt.Sprintf("default/closed-%v-%d:udp", v6, i), Protocol: cluster.UDP, Port: uint16(5300 + i),
				ClusterIPs: []netip.Addr{ip}, Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(b.Addr.Addr(), 9999), Local: b.Local}}}
			p.OnUpdate(svc)
			apply(t, p)
			err := udpAsk(client.NS, netip.AddrPortFrom(ip, svc.Port), 3*time.Second)
			assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "%v via %v (local %v): %v, want the port unreachable as ECONNREFUSED", b.Addr, ip, b.Local, err)
		}
	}
}
