//go:build linux

package proxy

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// TestKernelProxyMaglev runs two nodes, each with a Proxy with Maglev
// tables, in front of the same NodePort service whose backends are the
// pods of both (each node lists its own first), and a client on a third
// host. A client port reaches the same backend through either node — the
// one the Go side's table and hash predict, so the program's hash is the
// Go side's — and a backend removed moves only its own clients.
func TestKernelProxyMaglev(t *testing.T) { attachModes(t, testKernelProxyMaglev) }

func testKernelProxyMaglev(t *testing.T, mode AttachMode) {
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 2})
	require.NoError(t, topo.AddPodRoutesViaUnderlay())
	names := map[netip.Addr]string{}
	for _, h := range topo.Hosts[:2] {
		for _, p := range h.Pods {
			serveWhoami(t, p.NS, p.Name)
			for _, a := range p.Addrs() {
				names[a] = p.Name
			}
		}
	}
	const size = 251
	client := topo.Hosts[2]
	nodes := topo.Hosts[:2]
	proxies := make([]*Proxy, len(nodes))
	for i, h := range nodes {
		masqueradeMarked(t, h.NS)
		proxies[i] = nodeProxy(t, h, Options{Attach: mode, Maglev: MaglevOptions{Enabled: true, TableSize: size}})
	}
	// service gives node i the service with the pods of hosts 1 and 2 of
	// family v6 as backends, but for those named in without.
	service := func(i int, v6 bool, without map[string]bool) {
		var bs []cluster.Backend
		for j, h := range nodes {
			for _, pod := range h.Pods {
				a := pod.IPv4
				if v6 {
					a = pod.IPv6
				}
				if !without[pod.Name] {
					bs = append(bs, cluster.Backend{Addr: netip.AddrPortFrom(a, whoamiPort), Local: i == j})
				}
			}
		}
		proxies[i].OnUpdate(cluster.Service{Name: fmt.Sprintf("default/web-v6=%v:http", v6), Port: 80,
			ClusterIPs: []netip.Addr{map[bool]netip.Addr{false: clusterV4, true: clusterV6}[v6]}, NodePort: 30080, Backends: bs})
	}
	applyAll := func() {
		for _, p := range proxies {
			apply(t, p)
			require.Empty(t, p.Status().Errors)
		}
	}
	for i := range nodes {
		service(i, false, nil)
		service(i, true, nil)
	}
	applyAll()

	for _, v6 := range []bool{false, true} {
		pick := func(h *kerneltest.Host) netip.Addr {
			for _, a := range h.UnderlayAddrs() {
				if a.Is6() == v6 {
					return a
				}
			}
			t.Fatalf("host %s has no address of family v6=%v", h.Name, v6)
			return netip.Addr{}
		}
		from := pick(client)
		// The table the Go side computes (node 1's: its pods first).
		fam := famIndex(from)
		predictor := func() func(port uint16) string {
			e := build(proxies[0].services[fmt.Sprintf("default/web-v6=%v:http", v6)].s, nil)
			table := maglevTable(e.backends[fam], e.local[fam], size)
			return func(port uint16) string {
				return names[fromAddr16(table[maglevHash(addr16(from), port16(port), 6)%size].Addr)]
			}
		}
		predict := predictor()
		seen := map[string]int{}
		first := map[uint16]string{}
		for port := uint16(41000); port < 41040; port++ {
			var got [2]string
			for i, n := range nodes {
				name, err := whoamiFrom(client.NS, netip.AddrPortFrom(from, port), netip.AddrPortFrom(pick(n), 30080))
				require.NoError(t, err, "client port %d through %s", port, n.Name)
				got[i] = name
			}
			assert.Equal(t, got[0], got[1], "client port %d: the same backend through either node", port)
			assert.Equal(t, predict(port), got[0], "client port %d: the backend the table names", port)
			seen[got[0]]++
			first[port] = got[0]
		}
		t.Logf("v6=%v: 40 client ports through both nodes: %v", v6, seen)
		assert.GreaterOrEqual(t, len(seen), 3, "the clients spread over the backends")

		// A backend goes on both nodes: its clients move, and of the
		// others only those the new table moves (TestMaglevTableDisruption
		// bounds how many).
		gone := slices.Sorted(maps.Keys(seen))[0]
		for i := range nodes {
			service(i, v6, map[string]bool{gone: true})
		}
		applyAll()
		predict = predictor()
		moved := 0
		for port := uint16(41000); port < 41040; port++ {
			name, err := whoamiFrom(client.NS, netip.AddrPortFrom(from, port), netip.AddrPortFrom(pick(nodes[1]), 30080))
			require.NoError(t, err)
			assert.NotEqual(t, gone, name)
			assert.Equal(t, predict(port), name, "client port %d after %s went", port, gone)
			if first[port] != gone && name != first[port] {
				moved++
			}
		}
		t.Logf("v6=%v: %s removed: its %d clients moved, and %d of the other %d", v6, gone, seen[gone], moved, 40-seen[gone])
	}
}

// whoamiFrom connects from ns, bound to local address from when it is
// valid, to to and returns the name the server sent. A bound local port is
// reused (SO_REUSEADDR) while an earlier connection from it waits in
// TIME_WAIT.
func whoamiFrom(ns *kerneltest.NS, from, to netip.AddrPort) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var c net.Conn
	if err := ns.Do(func() error {
		var d net.Dialer
		if from.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(from)
			d.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
				}); err != nil {
					return err
				}
				return serr
			}
		}
		var err error
		c, err = d.DialContext(ctx, "tcp", to.String())
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

// The Maglev map full: a service whose tables do not fit waits, whole,
// with one error, and the others are served; when room is made it gets
// in.
func TestKernelProxyMaglevMapCapacity(t *testing.T) {
	p, err := New(Options{Kernel: doHere{}, PinDir: bpftest.Dir(t), Maglev: MaglevOptions{Enabled: true, TableSize: 251, Entries: 600}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	nodePort := func(name string, ip int) cluster.Service {
		s := capSvc(name, ip, 3, false)
		s.NodePort = uint16(30000 + ip)
		return s
	}
	p.OnUpdate(cluster.NodeAddrs{Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	p.OnUpdate(nodePort("a", 1))
	p.OnUpdate(nodePort("b", 2))
	p.OnUpdate(nodePort("c", 3))         // no room: 3 × 251 > 600
	p.OnUpdate(capSvc("d", 4, 2, false)) // no node port: no table
	pe := applyRefused(t, p)
	require.Equal(t, []string{"a", "b", "d"}, served(t, p))
	require.Equal(t, 1, pe.Failed)
	errs := serviceErrors(p.Status())
	require.Len(t, errs, 1)
	require.Equal(t, `proxy: write service c: map full: the Maglev map np_maglev (600 entries) has room for 98 more, the service needs 251`, errs[0])
	p.OnUpdate(cluster.ServiceRemove{Name: "a"})
	_, err = p.Apply(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c", "d"}, served(t, p))
	n := 0
	var k mgKey
	var v beVal
	for it := p.k.mg.Iterate(); it.Next(&k, &v); {
		n++
	}
	require.Equal(t, 2*251, n, "the tables of b and c, none of a")
}
