//go:build linux

package proxy

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nodeplane/nodeplane/cluster"
)

// cluster.Backend.LocalOnly: a service with externalTrafficPolicy Local
// whose local backend is terminating while host 2's are ready. Traffic
// from another node to the node port goes to the local backend alone;
// clients of the cluster IP — a pod, and the node itself through the
// connect-time programs — never reach it and spread over host 2's. The
// local one is also the only backend of a second service with
// internalTrafficPolicy Local, whose cluster IP reaches it. Both families.
// Before the field, the local backend took cluster traffic too.
func TestKernelProxyLocalOnlyBackends(t *testing.T) {
	attachModes(t, testKernelProxyLocalOnlyBackends)
}

func testKernelProxyLocalOnlyBackends(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	p := r.cgroupProxy(t, cg)
	h1, h2 := r.topo.Hosts[0], r.topo.Hosts[1]
	terminating := h1.Pods[1].Name
	internal := map[bool]netip.Addr{false: netip.MustParseAddr("10.96.0.12"), true: netip.MustParseAddr("fd00:10:96::12")}
	for _, v6 := range []bool{false, true} {
		bs := r.backends(v6)
		bs[0].LocalOnly = true
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/etp-local-v6=%v:http", v6), Port: 80,
			ClusterIPs: []netip.Addr{clusterIP(v6)}, NodePort: 30085, ExternalTrafficLocal: true, Backends: bs})
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/itp-local-v6=%v:http", v6), Port: 80,
			ClusterIPs: []netip.Addr{internal[v6]}, InternalTrafficLocal: true, Backends: bs[:1]})
	}
	apply(t, p)
	assert.Empty(t, p.Status().Errors)
	for _, v6 := range []bool{false, true} {
		cip := netip.AddrPortFrom(clusterIP(v6), 80)
		for what, got := range map[string]map[string]int{
			"a pod":                      spread(t, h1.Pods[0].NS, cip, 30),
			"the node (connect-time LB)": cgSpread(t, cg, h1.NS, cip, 20),
			"another pod":                spread(t, h1.Pods[2].NS, cip, 10),
		} {
			t.Logf("cluster IP %v from %s: %v", cip, what, got)
			assert.NotContains(t, got, terminating, "cluster IP %v from %s", cip, what)
			assert.Len(t, got, 2, "cluster IP %v from %s: both of host 2's backends", cip, what)
		}
		for _, a := range h1.UnderlayAddrs() {
			if a.Is6() != v6 {
				continue
			}
			got := spread(t, h2.NS, netip.AddrPortFrom(a, 30085), 10)
			t.Logf("node port %v from host 2: %v", a, got)
			assert.Equal(t, map[string]int{terminating: 10}, got, "node port %v from host 2", a)
		}
		got := spread(t, h1.Pods[0].NS, netip.AddrPortFrom(internal[v6], 80), 5)
		assert.Equal(t, map[string]int{terminating: 5}, got, "internalTrafficPolicy Local cluster IP %v", internal[v6])
	}
}
