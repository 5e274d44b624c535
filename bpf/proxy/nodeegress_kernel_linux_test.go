//go:build linux

package proxy

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// routeServices gives host 1 of r routes for the tests' cluster IPs
// through host 2, as a node's default route would: the node's own packets
// to a service then leave by its host interface, where the Proxy meets
// them.
func routeServices(t *testing.T, r *proxyRig) {
	t.Helper()
	for _, v6 := range []bool{false, true} {
		var via netip.Addr
		for _, a := range r.topo.Hosts[1].UnderlayAddrs() {
			if a.Is6() == v6 {
				via = a
			}
		}
		dst := netip.PrefixFrom(clusterIP(v6), 16)
		if v6 {
			dst = netip.PrefixFrom(clusterIP(v6), 64)
		}
		args := []string{"route", "add", dst.Masked().String(), "via", via.String()}
		if v6 {
			args = append([]string{"-6"}, args...)
		}
		out, err := r.topo.Hosts[0].NS.Exec(context.Background(), "ip", args...)
		require.NoError(t, err, "%s", out)
	}
}

// udpService sends p the UDP service of family v6 whose backends are the
// rig's, at udpPort, less those named in without.
func udpService(r *proxyRig, p *Proxy, v6 bool, without map[string]bool) {
	bs := slices.DeleteFunc(r.backendsAt(v6, udpPort), func(b cluster.Backend) bool { return without[r.names[b.Addr.Addr()]] })
	p.OnUpdate(cluster.Service{Name: "kube-system/dns-v6=" + map[bool]string{false: "no", true: "yes"}[v6] + ":dns",
		Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{clusterIP(v6)}, Backends: bs})
}

// udpConn is a connected UDP socket of namespace ns.
func udpConn(t *testing.T, ns *kerneltest.NS, to netip.AddrPort) net.Conn {
	t.Helper()
	var c net.Conn
	require.NoError(t, ns.Do(func() error {
		var err error
		c, err = net.Dial("udp", to.String())
		return err
	}))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// udpName asks on c and returns the answer (a backend's name).
func udpName(c net.Conn) (string, error) {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("q")); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// ctByFlag counts p's connection entries with flag set, by protocol.
func ctByFlag(t *testing.T, p *Proxy, flag uint32) map[uint8]int {
	t.Helper()
	n := map[uint8]int{}
	for k, v := range ctEntries(t, p) {
		if v.Flags&flag != 0 {
			n[k.Proto]++
		}
	}
	return n
}

// TestKernelProxyNodeEgress: without connect-time programs, the node's own
// connections to a service are translated at the egress of the host
// interface their route leaves by and sent where the backend is routed (a
// local pod's veth, the other host), TCP and UDP, IPv4 and IPv6; the
// replies get the frontend back at the ingress. A connected UDP socket
// whose backend goes reaches another one with its next datagram. The pod
// veths filter reverse paths strictly, as package endpoints sets them: a
// local backend's reply, the frontend its source, reaches the node's
// socket all the same (through loopback).
func TestKernelProxyNodeEgress(t *testing.T) { attachModes(t, testKernelProxyNodeEgress) }

func testKernelProxyNodeEgress(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	routeServices(t, r)
	for _, pod := range []*kerneltest.Pod{r.topo.Hosts[0].Pods[1], r.topo.Hosts[1].Pods[0], r.topo.Hosts[1].Pods[1]} {
		serveUDPName(t, pod.NS, pod.Name)
	}
	p := r.proxy(t)
	h1 := r.topo.Hosts[0]
	for _, pod := range h1.Pods {
		require.NoError(t, h1.NS.SetSysctl("net.ipv4.conf."+pod.HostVeth+".rp_filter", "1"))
	}
	for _, v6 := range []bool{false, true} {
		p.OnUpdate(cluster.Service{Name: "default/web-v6=" + map[bool]string{false: "no", true: "yes"}[v6] + ":http", Port: 80,
			ClusterIPs: []netip.Addr{clusterIP(v6)}, Backends: r.backends(v6)})
		udpService(r, p, v6, nil)
	}
	apply(t, p)
	require.Empty(t, p.Status().Errors)

	for _, v6 := range []bool{false, true} {
		got := spread(t, h1.NS, netip.AddrPortFrom(clusterIP(v6), 80), 30)
		t.Logf("TCP from the node to %v: %v", clusterIP(v6), got)
		assert.Len(t, got, 3, "every backend answers, the local one and those on host 2")

		svc := netip.AddrPortFrom(clusterIP(v6), 53)
		c := udpConn(t, h1.NS, svc)
		first, err := udpName(c)
		require.NoError(t, err, "UDP to %v", svc)
		again, err := udpName(c)
		require.NoError(t, err)
		assert.Equal(t, first, again, "a flow keeps its backend")
		udpService(r, p, v6, map[string]bool{first: true})
		apply(t, p)
		next, err := udpName(c)
		require.NoError(t, err, "UDP to %v after %s went", svc, first)
		assert.NotEqual(t, first, next, "the connected socket reaches another backend")
		assert.NotEmpty(t, next)
		t.Logf("UDP from the node to %v: %s, then %s once %s went", svc, first, next, first)
	}
	// An open TCP connection of the node's is tracked as such (closed
	// ones are gone already).
	p.OnUpdate(cluster.Service{Name: "default/echo:tcp", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, echoPort)})
	apply(t, p)
	c := dial(t, h1.NS, netip.AddrPortFrom(clusterV4, 81))
	require.NoError(t, exchange(c))
	n := ctByFlag(t, p, ctNode)
	assert.Equal(t, 2, n[protoTCP], "the open connection's pair of entries")
	assert.NotZero(t, n[protoUDP])
	cs := runScanPass(t, p)
	assert.GreaterOrEqual(t, cs.Orphans, uint64(2), "the reverse entries of the backends left behind go: %+v", cs)
}

// TestKernelProxyConnectTimeTCPOnly: with ConnectTimeTCPOnly, a process in
// the cgroup has its TCP connections translated at connect() (no entry in
// the connection map) and its UDP, connected or not, per packet at the
// host interface's egress.
func TestKernelProxyConnectTimeTCPOnly(t *testing.T) {
	attachModes(t, testKernelProxyConnectTimeTCPOnly)
}

func testKernelProxyConnectTimeTCPOnly(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	routeServices(t, r)
	for _, pod := range []*kerneltest.Pod{r.topo.Hosts[0].Pods[1], r.topo.Hosts[1].Pods[0], r.topo.Hosts[1].Pods[1]} {
		serveUDPName(t, pod.NS, pod.Name)
	}
	o := r.options()
	o.Cgroup, o.ConnectTimeTCPOnly = cg.path, true
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	udpService(r, p, false, nil)
	apply(t, p)
	require.Empty(t, p.Status().Errors)
	h1 := r.topo.Hosts[0]
	got := cgSpread(t, cg, h1.NS, netip.AddrPortFrom(clusterV4, 80), 10)
	t.Logf("TCP from the cgroup: %v", got)
	assert.Zero(t, ctByFlag(t, p, ctNode)[protoTCP], "TCP is translated at connect()")
	svc := netip.AddrPortFrom(clusterV4, 53)
	for _, mode := range []string{"udp", "udp-connected"} {
		from, name, err := cg.helper(h1.NS, mode, svc)
		require.NoError(t, err, mode)
		assert.Equal(t, svc, from, "%s: the reply's source is the service", mode)
		assert.NotEmpty(t, name)
	}
	assert.Equal(t, 2, ctByFlag(t, p, ctNode)[protoUDP]/2, "the two UDP flows are translated at the egress (a pair of entries each)")
}

// TestKernelProxySourceRangesForTheNode: the node's own processes reach a
// load balancer IP with source ranges as kube-proxy lets them: when a
// range holds one of the node's addresses. At connect() (the cgroup
// programs, which see no source address yet) by that rule, and at the
// egress (no cgroup) by the packet's source, which is such an address.
func TestKernelProxySourceRangesForTheNode(t *testing.T) {
	attachModes(t, testKernelProxySourceRangesForTheNode)
}

func testKernelProxySourceRangesForTheNode(t *testing.T, mode AttachMode) {
	r, cg := newCgroupRig(t)
	r.attach = mode
	routeServices(t, r)
	h1 := r.topo.Hosts[0]
	var node netip.Addr
	for _, a := range h1.UnderlayAddrs() {
		if a.Is4() {
			node = a
		}
	}
	lbIP := netip.MustParseAddr("10.96.200.10") // routed out of eth0 by routeServices
	svc := cluster.Service{Name: "default/lb:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, LoadBalancerIPs: []netip.Addr{lbIP},
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, Backends: r.backends(false)}
	to := netip.AddrPortFrom(lbIP, 80)
	for _, withCgroup := range []bool{true, false} {
		o := r.options()
		o.PinDir = r.pinDir + map[bool]string{true: "/cg", false: "/egress"}[withCgroup]
		if withCgroup {
			o.Cgroup = cg.path
		}
		p, err := New(o)
		require.NoError(t, err)
		r.feed(t, p)
		reaches := func() bool {
			if withCgroup {
				_, _, err := cg.helper(h1.NS, "tcp", to)
				return err == nil
			}
			return tcpConnect(h1.NS, to, 700*time.Millisecond) == nil
		}
		svc.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
		p.OnUpdate(svc)
		apply(t, p)
		assert.False(t, reaches(), "cgroup=%v: no range holds the node's address", withCgroup)
		svc.SourceRanges = append(svc.SourceRanges, netip.PrefixFrom(node, 32))
		p.OnUpdate(svc)
		apply(t, p)
		assert.True(t, reaches(), "cgroup=%v: a range holds the node's address", withCgroup)
		require.NoError(t, p.Cleanup(context.Background()))
	}
}
