//go:build linux

package proxy

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
)

// internalTrafficPolicy Local: connections from pods to the cluster IP go
// to this node's backend only, in both families; with no local backend
// they are dropped.
func TestKernelProxyInternalTrafficLocal(t *testing.T) {
	r := newProxyRig(t)
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	for _, v6 := range []bool{false, true} {
		ip := clusterV4
		if v6 {
			ip = clusterV6
		}
		svc := cluster.Service{Name: "default/local:http", Port: 80, ClusterIPs: []netip.Addr{ip}, InternalTrafficLocal: true,
			Backends: r.backends(v6)}
		p.OnUpdate(svc)
		apply(t, p)
		got := spread(t, client.NS, netip.AddrPortFrom(ip, 80), 20)
		assert.Equal(t, map[string]int{"host1-pod2": 20}, got, "v6=%v: the local backend only", v6)

		svc.Backends = svc.Backends[1:] // the remote ones
		p.OnUpdate(svc)
		apply(t, p)
		err := client.NS.Do(func() error {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(ip, 80).String(), 500*time.Millisecond)
			if err == nil {
				_ = c.Close()
			}
			return err
		})
		assert.Error(t, err, "v6=%v: no local backend: dropped", v6)
		p.OnUpdate(cluster.ServiceRemove{Name: svc.Name})
		apply(t, p)
	}
}

// sessionAffinity ClientIP: every new connection of a client goes to the
// backend its first went to, for as long as the timeout runs from its
// last; another client is not bound by it; a backend that leaves frees
// its clients to pick again.
func TestKernelProxySessionAffinity(t *testing.T) {
	r := newProxyRig(t)
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
		}
	}
	assert.Equal(t, 1, n, "one affinity for the client (the plain service keeps none)")
}
