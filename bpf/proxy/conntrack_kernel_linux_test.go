//go:build linux

package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// ctEntriesFrom counts the connection entries whose forward key starts at
// addr (the client's) and the reverse ones that lead back to it.
func ctEntriesFrom(t *testing.T, p *Proxy, addr netip.Addr) int {
	t.Helper()
	var (
		k ctKey
		v ctVal
		n int
	)
	a := addr16(addr)
	for it := p.k.ct.Iterate(); it.Next(&k, &v); {
		if (v.Flags&ctReverse == 0 && k.Src == a) || (v.Flags&ctReverse != 0 && k.Dst == a) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or a generous deadline passes (the
// deadline is no assertion on time: a condition that never holds fails).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Connections that close are removed by the programs: after a FIN each way
// (whoami's server closes after answering) and after a RST (a backend port
// nobody listens on) no entry is left, and the programs counted them. A
// TCP connection whose backend leaves the service keeps it to the end.
func TestKernelConntrackClosedConnectionsLeave(t *testing.T) {
	attachModes(t, testKernelConntrackClosedConnectionsLeave)
}

func testKernelConntrackClosedConnectionsLeave(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	backends := r.backends(false)
	svc := cluster.Service{Name: "default/whoami:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends}
	refused := cluster.Service{Name: "default/refused:x", Port: 81, ClusterIPs: []netip.Addr{clusterV4},
		Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(backends[1].Addr.Addr(), 9)}}}
	p.OnUpdate(svc)
	p.OnUpdate(refused)
	apply(t, p)
	client := r.topo.Hosts[0].Pods[0]

	got := spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 30)
	assert.Len(t, got, 3, "every backend answered: %v", got)
	for range 5 {
		err := tcpConnect(client.NS, netip.AddrPortFrom(clusterV4, 81), 3*time.Second)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "a backend port nobody listens on")
	}
	waitFor(t, "every closed connection's entries removed", func() bool { return ctEntriesFrom(t, p, client.IPv4) == 0 })
	var per []uint64
	require.NoError(t, p.k.counters.Lookup(uint32(statClosed), &per))
	var closed uint64
	for _, n := range per {
		closed += n
	}
	assert.GreaterOrEqual(t, closed, uint64(35), "30 closed by FINs, 5 refused by a RST")

	// An open connection whose backend leaves the service keeps it.
	echo := cluster.Service{Name: "default/echo:tcp", Port: 82, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, echoPort)}
	p.OnUpdate(echo)
	apply(t, p)
	c := dial(t, client.NS, netip.AddrPortFrom(clusterV4, 82))
	require.NoError(t, exchange(c))
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	key := ctKey{Src: addr16(local.Addr().Unmap()), Dst: addr16(clusterV4), Sport: port16(local.Port()), Dport: port16(82), Proto: protoTCP}
	var v ctVal
	require.NoError(t, p.k.ct.Lookup(&key, &v))
	chosen := netip.AddrPortFrom(fromAddr16(v.Addr), fromPort16(v.Port))
	var others []cluster.Backend
	for _, b := range echo.Backends {
		if b.Addr != chosen {
			others = append(others, b)
		}
	}
	echo.Backends = others
	p.OnUpdate(echo)
	apply(t, p)
	for range 3 {
		require.NoError(t, exchange(c), "the connection to %v, which left the service", chosen)
	}
	require.NoError(t, p.k.ct.Lookup(&key, &v))
	assert.Equal(t, chosen, netip.AddrPortFrom(fromAddr16(v.Addr), fromPort16(v.Port)))
}

// longEchoPort is served by serveLongEcho.
const longEchoPort = 8082

// serveLongEcho echoes every TCP connection to longEchoPort in ns for as
// long as its client keeps it open (kerneltest's echo server closes them
// after a while); the connections end with the test.
func serveLongEcho(t *testing.T, ns *kerneltest.NS) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	listen := func() (net.Listener, error) { return net.Listen("tcp", fmt.Sprintf(":%d", longEchoPort)) }
	serveInNS(t, ns, listen, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// The connection map evicts nothing: an idle long-lived connection
// survives a churn of short connections through the same service many
// times the map's size; when live connections fill the map, new ones are
// dropped and counted (Status().Conntrack.Full) while the live ones go on.
func TestKernelConntrackIdleSurvivesChurn(t *testing.T) {
	attachModes(t, testKernelConntrackIdleSurvivesChurn)
}

func testKernelConntrackIdleSurvivesChurn(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	opts := r.options()
	opts.Connections = 256
	opts.Conntrack.ScanInterval = 20 * time.Millisecond
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	backends := r.backends(false)
	whoamiSvc := cluster.Service{Name: "default/whoami:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends}
	echo := cluster.Service{Name: "default/echo:tcp", Port: 82, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, longEchoPort)}
	for _, pod := range r.topo.Pods() {
		serveLongEcho(t, pod.NS)
	}
	p.OnUpdate(whoamiSvc)
	p.OnUpdate(echo)
	apply(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	client := r.topo.Hosts[0].Pods[0]
	idle := dial(t, client.NS, netip.AddrPortFrom(clusterV4, 82))
	require.NoError(t, exchange(idle))
	churn := 4 * int(opts.Connections) // 8× the map's entries
	got := spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), churn)
	t.Logf("%d short connections through a map of %d entries: %v", churn, opts.Connections, got)
	require.NoError(t, exchange(idle), "the idle connection after the churn")

	// Fill the map with live connections: 128 connections take all 256
	// entries, one of which the idle connection holds.
	var live []net.Conn
	refused := 0
	for range 140 {
		var c net.Conn
		err := client.NS.Do(func() (err error) {
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(clusterV4, 82).String(), 300*time.Millisecond)
			return err
		})
		if err != nil {
			refused++
			continue
		}
		t.Cleanup(func() { _ = c.Close() })
		live = append(live, c)
	}
	assert.Equal(t, 127, len(live), "the connections that fit beside the idle one")
	assert.Equal(t, 13, refused)
	require.NoError(t, exchange(idle), "the idle connection with the map full")
	for _, c := range live[:10] {
		require.NoError(t, exchange(c))
	}
	waitFor(t, "the scanner reports the full map", func() bool {
		st := p.Status().Conntrack
		return st.Full >= 13 && st.Entries == int(opts.Connections) && st.Passes > 0
	})
	st := p.Status().Conntrack
	assert.Equal(t, 1.0, st.FillLevel())
	assert.Equal(t, int(opts.Connections), st.Capacity)
	t.Logf("conntrack status: %+v", st)
}

// The scanner removes UDP flows whose backend left the service, flows
// idle past their timeout, and reverse entries without their forward one,
// and reports its passes.
func TestKernelConntrackScanner(t *testing.T) { attachModes(t, testKernelConntrackScanner) }

func testKernelConntrackScanner(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	opts := r.options()
	opts.Conntrack = ConntrackOptions{UDP: 2 * time.Second, ScanInterval: 20 * time.Millisecond, ScanBatch: 64}
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	const udpPort = 5353
	for _, pod := range r.topo.Pods() {
		name := pod.Name
		serveInNS(t, pod.NS, func() (net.PacketConn, error) { return net.ListenPacket("udp", fmt.Sprintf(":%d", udpPort)) },
			func(pc net.PacketConn) {
				buf := make([]byte, 64)
				for {
					_, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					_, _ = pc.WriteTo([]byte(name), from)
				}
			})
	}
	svc := cluster.Service{Name: "default/dns:udp", Protocol: cluster.UDP, Port: 53, ClusterIPs: []netip.Addr{clusterV4},
		Backends: r.backendsAt(false, udpPort)}
	p.OnUpdate(svc)
	apply(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	client := r.topo.Hosts[0].Pods[0]
	var conn net.Conn
	require.NoError(t, client.NS.Do(func() (err error) {
		conn, err = net.Dial("udp", netip.AddrPortFrom(clusterV4, 53).String())
		return err
	}))
	t.Cleanup(func() { _ = conn.Close() })
	ask := func() string {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		_, err := conn.Write([]byte("who"))
		require.NoError(t, err)
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		require.NoError(t, err)
		return string(buf[:n])
	}
	first := ask()
	require.Equal(t, first, ask(), "a flow keeps its backend")
	require.Equal(t, 2, ctEntriesFrom(t, p, client.IPv4))

	// Its backend leaves: the scanner removes the flow's entries.
	var kept []cluster.Backend
	for _, b := range svc.Backends {
		if r.names[b.Addr.Addr()] != first {
			kept = append(kept, b)
		}
	}
	require.Len(t, kept, 2)
	svc.Backends = kept
	p.OnUpdate(svc)
	apply(t, p)
	waitFor(t, "the scanner removes the flow to the backend that left", func() bool {
		return ctEntriesFrom(t, p, client.IPv4) == 0 && p.Status().Conntrack.Stale >= 2
	})
	second := ask()
	assert.NotEqual(t, first, second, "the flow picked another backend")

	// Idle past the UDP timeout: removed.
	waitFor(t, "the idle flow expires", func() bool {
		return ctEntriesFrom(t, p, client.IPv4) == 0 && p.Status().Conntrack.Expired >= 2
	})

	// A reverse entry without its forward one is an orphan.
	orphan := ctKey{Src: addr16(netip.MustParseAddr("10.244.9.9")), Dst: addr16(client.IPv4), Sport: port16(53), Dport: port16(4444), Proto: protoUDP}
	require.NoError(t, p.k.ct.Update(&orphan, &ctVal{Addr: addr16(clusterV4), Port: port16(53), Flags: ctReverse, LastSeen: monotonicNow()}, ebpf.UpdateNoExist))
	waitFor(t, "the orphan is removed", func() bool {
		var v ctVal
		return p.k.ct.Lookup(&orphan, &v) != nil && p.Status().Conntrack.Orphans >= 1
	})
	st := p.Status().Conntrack
	assert.NotZero(t, st.Passes)
	assert.NotZero(t, st.LastPass)
	assert.Equal(t, DefaultConnections, st.Capacity)
	t.Logf("conntrack status: %+v", st)
}
