//go:build linux

package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// dsrPeerPort serves, over TCP, a line "<client address> <pod name>" and
// then echoes; over UDP, the same line for every datagram.
const dsrPeerPort = 8083

// serveDSRPeer runs dsrPeerPort's servers in pod ns, named name.
func serveDSRPeer(t *testing.T, ns *kerneltest.NS, name string) {
	listen := func() (net.Listener, error) { return net.Listen("tcp", fmt.Sprintf(":%d", dsrPeerPort)) }
	serveInNS(t, ns, listen, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = fmt.Fprintf(c, "%s %s\n", c.RemoteAddr(), name)
				_, _ = io.Copy(c, c)
			}()
		}
	})
	listenUDP := func() (net.PacketConn, error) { return net.ListenPacket("udp", fmt.Sprintf(":%d", dsrPeerPort)) }
	serveInNS(t, ns, listenUDP, func(c net.PacketConn) {
		buf := make([]byte, 256)
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(writerTo{c, from}, "%s %s\n", from, name)
		}
	})
}

type writerTo struct {
	c  net.PacketConn
	to net.Addr
}

func (w writerTo) Write(b []byte) (int, error) { return w.c.WriteTo(b, w.to) }

// dsrAsk connects from ns to to over network ("tcp" or "udp") and returns
// the client address and the pod name the backend saw. Over TCP it also
// echoes a few lines (packets without the option that the node in front
// sends on by its connection entry); over UDP it asks three times on one
// connected socket, which takes answers from to alone.
func dsrAsk(ns *kerneltest.NS, network string, to netip.AddrPort) (netip.Addr, string, error) {
	var line string
	err := ns.Do(func() error {
		c, err := net.DialTimeout(network, to.String(), 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		r := bufio.NewReader(c)
		if network == "udp" {
			for i := range 3 {
				if _, err := fmt.Fprintf(c, "q%d", i); err != nil {
					return err
				}
				if line, err = r.ReadString('\n'); err != nil {
					return err
				}
			}
			return nil
		}
		if line, err = r.ReadString('\n'); err != nil {
			return err
		}
		for i := range 3 {
			msg := fmt.Sprintf("echo %d\n", i)
			if _, err := io.WriteString(c, msg); err != nil {
				return err
			}
			back, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if back != msg {
				return fmt.Errorf("echo %q, want %q", back, msg)
			}
		}
		return nil
	})
	if err != nil {
		return netip.Addr{}, "", err
	}
	peer, name, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return netip.Addr{}, "", fmt.Errorf("backend said %q", line)
	}
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return netip.Addr{}, "", err
	}
	return ap.Addr().Unmap(), name, nil
}

// ctEntries reads p's connection entries.
func ctEntries(t *testing.T, p *Proxy) map[ctKey]ctVal {
	t.Helper()
	out := map[ctKey]ctVal{}
	var k ctKey
	var v ctVal
	it := p.k.ct.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	require.NoError(t, it.Err())
	return out
}

// TestKernelProxyDSR: node 1 serves a NodePort (TCP and UDP) whose
// backends are the pods of node 2; both Proxies have DSR on; a client on
// a third host connects to node 1. The backend sees the client's own
// address (nothing masqueraded), the replies come from node 2 straight to
// the client with node 1's address and node port as their source (the
// client's connected sockets take them), node 1 keeps only forward
// entries and node 2 the pair the option made. Then node 2's Proxy is
// closed with its programs left in place and DSR still works; with DSR
// off on node 1, the same service is masqueraded through node 1.
func TestKernelProxyDSR(t *testing.T) { attachModes(t, testKernelProxyDSR) }

func testKernelProxyDSR(t *testing.T, mode AttachMode) {
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 2})
	require.NoError(t, topo.AddPodRoutesViaUnderlay())
	front, back, client := topo.Hosts[0], topo.Hosts[1], topo.Hosts[2]
	for _, p := range back.Pods {
		serveDSRPeer(t, p.NS, p.Name)
	}
	masqueradeMarked(t, front.NS)
	masqueradeMarked(t, back.NS)
	newProxy := func(h *kerneltest.Host, dsr bool) *Proxy { return nodeProxy(t, h, Options{Attach: mode, DSR: dsr}) }
	pf, pb := newProxy(front, true), newProxy(back, true)
	// The node port; the last phase takes another one, so that none of its
	// datagrams falls in a UDP flow node 1's conntrack still holds from an
	// earlier phase (a reused client port), whose address translation
	// netfilter decided then, unmasqueraded.
	nodePort := uint16(30080)
	services := func(p *Proxy) {
		for _, v6 := range []bool{false, true} {
			for _, proto := range []cluster.Protocol{cluster.TCP, cluster.UDP} {
				var bs []cluster.Backend
				for _, pod := range back.Pods {
					a := pod.IPv4
					if v6 {
						a = pod.IPv6
					}
					bs = append(bs, cluster.Backend{Addr: netip.AddrPortFrom(a, dsrPeerPort)})
				}
				p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/peer-v6=%v:%v", v6, proto), Protocol: proto, Port: 80,
					ClusterIPs: []netip.Addr{clusterIP(v6)}, NodePort: nodePort, Backends: bs})
			}
		}
		apply(t, p)
		require.Empty(t, p.Status().Errors)
	}
	services(pf)
	apply(t, pb) // no services: it only takes what DSR brings
	require.Empty(t, pb.Status().Errors)

	addrOf := func(h *kerneltest.Host, v6 bool) netip.Addr {
		for _, a := range h.UnderlayAddrs() {
			if a.Is6() == v6 {
				return a
			}
		}
		t.Fatalf("%s has no address with v6=%v", h.Name, v6)
		return netip.Addr{}
	}
	check := func(what string, wantPeer func(v6 bool) netip.Addr) {
		t.Helper()
		for _, v6 := range []bool{false, true} {
			to := netip.AddrPortFrom(addrOf(front, v6), nodePort)
			for _, network := range []string{"tcp", "udp"} {
				seen := map[string]bool{}
				for range 6 {
					peer, name, err := dsrAsk(client.NS, network, to)
					require.NoError(t, err, "%s: %s to %v", what, network, to)
					assert.Equal(t, wantPeer(v6), peer, "%s: %s to %v: the client address the backend sees", what, network, to)
					seen[name] = true
				}
				assert.NotEmpty(t, seen)
				t.Logf("%s: %s to %v answered by %v", what, network, to, seen)
			}
		}
	}
	check("DSR", func(v6 bool) netip.Addr { return addrOf(client, v6) })

	// Node 1 has forward entries alone, marked DSR; node 2 the pairs.
	fwd, rev := 0, 0
	for k, v := range ctEntries(t, pf) {
		require.Zero(t, v.Flags&ctReverse, "node 1 keeps no reverse entry: %v", k)
		if v.Flags&ctDSR != 0 {
			fwd++
		}
	}
	for _, v := range ctEntries(t, pb) {
		if v.Flags&ctDSR != 0 && v.Flags&ctReverse != 0 {
			rev++
		}
	}
	t.Logf("connection entries: node 1 %d DSR forward, node 2 %d DSR reverse", fwd, rev)
	// One per connection and flow (2 families × TCP, UDP × 6), less any
	// that an ephemeral port reused for a second one made one.
	for _, n := range []int{fwd, rev} {
		assert.LessOrEqual(t, n, 4*6)
		assert.GreaterOrEqual(t, n, 4*6-2)
	}

	// The scanner keeps them: they are answered and recent.
	cs := runScanPass(t, pb)
	assert.Zero(t, cs.Expired+cs.Stale+cs.Orphans, "node 2's scanner: %+v", cs)
	cs = runScanPass(t, pf)
	assert.Zero(t, cs.Expired+cs.Stale+cs.Orphans, "node 1's scanner: %+v", cs)

	// Node 2's agent stops: the pinned programs go on.
	require.NoError(t, pb.Close())
	check("DSR with node 2's Proxy closed", func(v6 bool) netip.Addr { return addrOf(client, v6) })

	// Without DSR on node 1, the same connections are masqueraded through it.
	require.NoError(t, pf.Cleanup(context.Background()))
	pf2 := newProxy(front, false)
	nodePort = 30081
	services(pf2)
	check("masqueraded", func(v6 bool) netip.Addr { return addrOf(front, v6) })
}

// runScanPass runs one whole pass of p's connection scanner and returns
// what it counted.
func runScanPass(t *testing.T, p *Proxy) ConntrackStatus {
	t.Helper()
	sc := &scanner{p: p, o: p.o.Conntrack}
	defer sc.close()
	for sc.passes == 0 {
		require.NoError(t, sc.step())
	}
	return p.Status().Conntrack
}
