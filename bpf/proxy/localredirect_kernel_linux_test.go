//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
)

// Options.LocalRedirect: a pod's connections to a backend pod on the same
// node, and the replies, go between the two veths straight, past host 1's
// netfilter — which drops every packet forwarded between the two pods
// here, so that only a connection that never crosses it gets through. A
// direct connection between them is dropped; the service's connections
// answer, in both families, and their entries go as they close. Backends
// on host 2 take the usual way. Without the option, the same service's
// connections are dropped like the direct one.
func TestKernelProxyLocalRedirect(t *testing.T) {
	attachModes(t, testKernelProxyLocalRedirect)
}

func testKernelProxyLocalRedirect(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	h1 := r.topo.Hosts[0]
	client, backend := h1.Pods[0], h1.Pods[1]
	dropBetween(t, r, client.IPv4, backend.IPv4, client.IPv6, backend.IPv6)

	o := r.options()
	o.LocalRedirect = true
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	local := func(v6 bool) []cluster.Backend { return r.backends(v6)[:1] }
	remote := func(v6 bool) []cluster.Backend { return r.backends(v6)[1:] }
	for _, v6 := range []bool{false, true} {
		cip, rip := clusterV4, netip.MustParseAddr("10.96.0.11")
		if v6 {
			cip, rip = clusterV6, netip.MustParseAddr("fd00:10:96::11")
		}
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/local-v6=%v:http", v6), Port: 80, ClusterIPs: []netip.Addr{cip}, Backends: local(v6)})
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/remote-v6=%v:http", v6), Port: 80, ClusterIPs: []netip.Addr{rip}, Backends: remote(v6)})
	}
	apply(t, p)

	for _, v6 := range []bool{false, true} {
		cip, rip, direct := clusterV4, netip.MustParseAddr("10.96.0.11"), backend.IPv4
		if v6 {
			cip, rip, direct = clusterV6, netip.MustParseAddr("fd00:10:96::11"), backend.IPv6
		}
		_, err := whoami(client.NS, netip.AddrPortFrom(direct, whoamiPort))
		require.Error(t, err, "netfilter drops what is forwarded between the pods")
		got := spread(t, client.NS, netip.AddrPortFrom(cip, 80), 10)
		assert.Equal(t, map[string]int{backend.Name: 10}, got, "the local backend, past netfilter (v6=%v)", v6)
		// 30 connections between two backends: all on one by chance is
		// 2 in 2^30 (10 made it 1 in 512, and it happened).
		got = spread(t, client.NS, netip.AddrPortFrom(rip, 80), 30)
		assert.Len(t, got, 2, "backends on host 2 the usual way (v6=%v)", v6)
	}
	// The connections closed: their entries went with them, as on the
	// usual way.
	require.Eventually(t, func() bool { return clientEntries(t, p, client.IPv4, client.IPv6) == 0 },
		5*time.Second, 50*time.Millisecond, "entries of closed connections left")

	// Without the option (a new Proxy takes the dataplane over with
	// programs that leave the packets to netfilter), netfilter sees them.
	require.NoError(t, p.Close())
	p2, err := New(r.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(context.Background()) })
	r.feed(t, p2)
	for _, v6 := range []bool{false, true} {
		cip := clusterV4
		if v6 {
			cip = clusterV6
		}
		p2.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/local-v6=%v:http", v6), Port: 80, ClusterIPs: []netip.Addr{cip}, Backends: local(v6)})
	}
	apply(t, p2)
	_, err = whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
	assert.Error(t, err, "without LocalRedirect the FORWARD chain drops the service's packets too")
}

// dropBetween makes host 1's netfilter drop every packet forwarded between
// a and b (both directions; IPv4 a4/b4 and IPv6 a6/b6).
func dropBetween(t *testing.T, r *proxyRig, a4, b4, a6, b6 netip.Addr) {
	t.Helper()
	var rules bytes.Buffer
	fmt.Fprintf(&rules, "table inet np_test_fwd {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n")
	fmt.Fprintf(&rules, "    ip saddr %s ip daddr %s drop\n    ip saddr %s ip daddr %s drop\n", a4, b4, b4, a4)
	fmt.Fprintf(&rules, "    ip6 saddr %s ip6 daddr %s drop\n    ip6 saddr %s ip6 daddr %s drop\n  }\n}\n", a6, b6, b6, a6)
	nsLoad(t, r.topo.Hosts[0].NS, &rules, "nft", "-f", "-")
}

// clientEntries counts the connection entries of the client addresses.
func clientEntries(t *testing.T, p *Proxy, addrs ...netip.Addr) int {
	t.Helper()
	var (
		k ctKey
		v ctVal
		n int
	)
	of := map[[16]byte]bool{}
	for _, a := range addrs {
		of[a.As16()] = true
	}
	it := p.k.ct.Iterate()
	for it.Next(&k, &v) {
		if of[k.Src] || of[k.Dst] {
			n++
		}
	}
	require.NoError(t, it.Err())
	return n
}
