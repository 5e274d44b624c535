//go:build linux

package proxy

import (
	"context"
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/serviceloop"
)

// A service without a ready backend is refused at once, as with
// kube-proxy: the program passes the connection on with Options.RejectMark
// and serviceloop's chain, given the Proxy's mark, answers TCP with a
// reset and UDP with port unreachable, in both families. Without the mark
// the packets are dropped (the client waits for its timeout).
func TestKernelProxyRejectsServiceWithoutBackends(t *testing.T) {
	attachModes(t, testKernelProxyRejectsServiceWithoutBackends)
}

func testKernelProxyRejectsServiceWithoutBackends(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	opts := r.options()
	opts.RejectMark, opts.RejectMask = 0x80000, 0x80000
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	r.refuseMarked(t, p)
	for _, svc := range []cluster.Service{
		{Name: "default/empty:tcp", Port: 80, ClusterIPs: []netip.Addr{clusterV4, clusterV6}},
		{Name: "default/empty:udp", Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{clusterV4, clusterV6}},
	} {
		p.OnUpdate(svc)
	}
	apply(t, p)
	client := r.topo.Hosts[0].Pods[0]
	for _, ip := range []netip.Addr{clusterV4, clusterV6} {
		err := tcpConnect(client.NS, netip.AddrPortFrom(ip, 80), 5*time.Second)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "TCP to %v: %v, want a reset", ip, err)
		err = udpAsk(client.NS, netip.AddrPortFrom(ip, 53), 5*time.Second)
		assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "UDP to %v: %v, want port unreachable", ip, err)
	}
	assert.Empty(t, p.Status().Errors)
	counters := p.Counters()
	assert.GreaterOrEqual(t, counters["default/empty:tcp"].Rejects, uint64(2), "%+v", counters)
	assert.GreaterOrEqual(t, counters["default/empty:udp"].Rejects, uint64(2), "%+v", counters)
	assert.Zero(t, counters["default/empty:tcp"].Connections)
}

// refuseMarked installs, in host 1, serviceloop's chain that answers
// what p marks with its reject mark (a reset for TCP, port unreachable for
// UDP), as an agent does, and routes the service ranges out of the node
// so that the untranslated packets reach FORWARD.
func (r *proxyRig) refuseMarked(t *testing.T, p *Proxy) {
	t.Helper()
	mark, ok := p.RejectMark()
	require.True(t, ok)
	ctx := context.Background()
	for _, f := range ipfamily.All {
		filter, err := iptables.New(iptables.Options{Table: "filter", Family: f, Backend: iptables.BackendNFT, ChainPrefix: "npr-", Kernel: r.ns})
		require.NoError(t, err)
		loop, err := serviceloop.New(serviceloop.Options{Family: f, Table: filter, Chain: "npr-svc-loop", RejectMarks: []netfilter.MatchMark{mark}})
		require.NoError(t, err)
		require.NoError(t, loop.CompleteDeferredWork(ctx))
		_, err = filter.Apply(ctx)
		require.NoError(t, err)
	}
	// The untranslated packets need a route out of the node to reach
	// FORWARD.
	for _, route := range [][]string{{"route", "add", "10.96.0.0/16", "dev", "eth0"}, {"-6", "route", "add", "fd00:96::/64", "dev", "eth0"}} {
		out, err := r.topo.Hosts[0].NS.Exec(ctx, "ip", route...)
		require.NoError(t, err, "%s", out)
	}
}
