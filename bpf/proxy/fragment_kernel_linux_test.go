//go:build linux

package proxy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// bigEchoPort is where the fragment tests' pods echo datagrams back.
const bigEchoPort = 9054

// bigDatagram is larger than the rig's MTU (1500) in both families: it
// crosses every link in three fragments.
const bigDatagram = 4000

// serveUDPEcho sends every datagram to port bigEchoPort in ns back to its
// sender.
func serveUDPEcho(t *testing.T, ns *kerneltest.NS) {
	serveUDP(t, ns, bigEchoPort, func(in []byte) []byte { return in })
}

// udpEchoBig sends a bigDatagram-byte datagram from ns to to on a
// connected socket (which takes answers from to only) and reads it back,
// up to five times (a datagram lost on a busy machine is no failure of the
// programs: there, a sender moved to another CPU between two fragments
// can have the later one overtake the first, which the programs then
// cannot translate). It returns the last attempt's error.
func udpEchoBig(ns *kerneltest.NS, to netip.AddrPort) error {
	return ns.Do(func() error {
		c, err := net.Dial("udp", to.String())
		if err != nil {
			return err
		}
		defer c.Close()
		out := make([]byte, bigDatagram)
		for i := range out {
			out[i] = byte(i * 7)
		}
		in := make([]byte, bigDatagram+1)
		for range 5 {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err = c.Write(out); err != nil {
				return err
			}
			var n int
			if n, err = c.Read(in); err != nil {
				continue
			}
			if !bytes.Equal(in[:n], out) {
				return fmt.Errorf("echo of %d bytes differs from the %d sent", n, len(out))
			}
			return nil
		}
		return err
	})
}

// A datagram larger than the MTU crosses a service in fragments, and its
// echo comes back in fragments: every fragment is translated, both ways,
// in both families, for a local and a remote backend, from a pod and from
// the node itself to a cluster IP, from another node to a node port
// (masqueraded to the remote backends), and from a pod that is its
// service's only backend (hairpin); with Options.LocalRedirect too.
// Without fragment tracking only the first fragment of each datagram was
// translated and no datagram got through.
func TestKernelProxyFragmentedDatagrams(t *testing.T) {
	attachModes(t, func(t *testing.T, mode AttachMode) {
		for _, redirect := range []bool{false, true} {
			t.Run(fmt.Sprintf("local-redirect=%v", redirect), func(t *testing.T) {
				testKernelProxyFragmentedDatagrams(t, mode, redirect)
			})
		}
	})
}

func testKernelProxyFragmentedDatagrams(t *testing.T, mode AttachMode, redirect bool) {
	r := newProxyRig(t)
	r.attach = mode
	routeServices(t, r)
	o := r.options()
	o.LocalRedirect = redirect
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	for _, pod := range r.topo.Pods() {
		serveUDPEcho(t, pod.NS)
	}
	h1, h2 := r.topo.Hosts[0], r.topo.Hosts[1]
	type target struct {
		name string
		from *kerneltest.NS
		to   netip.AddrPort
	}
	var targets []target
	for _, v6 := range []bool{false, true} {
		var node netip.Addr
		for _, a := range h1.UnderlayAddrs() {
			if a.Is6() == v6 {
				node = a
			}
		}
		for i, b := range r.backends(v6) {
			port, nodePort := uint16(5400+i), uint16(30400+i)
			p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/big-v6=%v-%d:udp", v6, i), Protocol: cluster.UDP,
				Port: port, ClusterIPs: []netip.Addr{clusterIP(v6)}, NodePort: nodePort,
				Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(b.Addr.Addr(), bigEchoPort), Local: b.Local}}})
			what := fmt.Sprintf("backend %s (local %v)", r.names[b.Addr.Addr()], b.Local)
			targets = append(targets,
				target{"pod to cluster IP, " + what, h1.Pods[0].NS, netip.AddrPortFrom(clusterIP(v6), port)},
				target{"node to cluster IP, " + what, h1.NS, netip.AddrPortFrom(clusterIP(v6), port)},
				target{"other node to node port, " + what, h2.NS, netip.AddrPortFrom(node, nodePort)})
		}
		self := h1.Pods[0].IPv4
		if v6 {
			self = h1.Pods[0].IPv6
		}
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/big-self-v6=%v:udp", v6), Protocol: cluster.UDP,
			Port: 5499, ClusterIPs: []netip.Addr{clusterIP(v6)},
			Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(self, bigEchoPort), Local: true}}})
		targets = append(targets, target{"pod to its own service (hairpin)", h1.Pods[0].NS, netip.AddrPortFrom(clusterIP(v6), 5499)})
	}
	apply(t, p)
	for _, tg := range targets {
		assert.NoError(t, udpEchoBig(tg.from, tg.to), "%s: %v", tg.name, tg.to)
	}
}

// With direct server return, a datagram larger than the MTU crosses a
// node port in fragments too: the node in front puts the frontend in the
// first fragment alone (IPv6: a destination options header before the
// fragment header), the backend's node takes the later ones by their
// first's ports, and the echo comes back from the backend's node
// straight, in fragments with the frontend as their source. The client's
// route to the node in front has an MTU of 1400 bytes: the path MTU leaves
// room for the option, as direct server return needs (an IPv4 router
// would fragment again; an IPv6 one cannot).
func TestKernelProxyFragmentedDatagramsDSR(t *testing.T) {
	attachModes(t, func(t *testing.T, mode AttachMode) {
		topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 1})
		require.NoError(t, topo.AddPodRoutesViaUnderlay())
		front, back, client := topo.Hosts[0], topo.Hosts[1], topo.Hosts[2]
		for _, a := range front.UnderlayAddrs() {
			out, err := client.NS.Exec(context.Background(), "ip", "route", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "eth0", "mtu", "1400")
			require.NoError(t, err, "%s", out)
		}
		serveUDPEcho(t, back.Pods[0].NS)
		masqueradeMarked(t, front.NS)
		masqueradeMarked(t, back.NS)
		pf := nodeProxy(t, front, Options{Attach: mode, DSR: true})
		pb := nodeProxy(t, back, Options{Attach: mode, DSR: true})
		for _, v6 := range []bool{false, true} {
			b := back.Pods[0].IPv4
			if v6 {
				b = back.Pods[0].IPv6
			}
			pf.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/big-v6=%v:udp", v6), Protocol: cluster.UDP, Port: 80,
				ClusterIPs: []netip.Addr{clusterIP(v6)}, NodePort: 30090,
				Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(b, bigEchoPort)}}})
		}
		apply(t, pf)
		apply(t, pb)
		for _, a := range front.UnderlayAddrs() {
			assert.NoError(t, udpEchoBig(client.NS, netip.AddrPortFrom(a, 30090)), "node port at %v", a)
		}
		// By direct server return: node 1 keeps no reverse entry.
		for k, v := range ctEntries(t, pf) {
			assert.Zero(t, v.Flags&ctReverse, "node 1 keeps no reverse entry: %v", k)
		}
	})
}

// BenchmarkKernelProgFragments reports what a fragment costs the ingress
// program (BPF_PROG_TEST_RUN, each run's fixed cost included) beside a
// whole datagram of the same known flow: a first fragment (the flow's
// packet plus the record of its ports) and a later one (the ports looked
// up, then the flow's way with its addresses alone rewritten).
func BenchmarkKernelProgFragments(b *testing.B) {
	objs := testObjs(b)
	svc := testService{id: 1, fe: testAddrPort("10.96.0.53:53"), proto: testProtoUDP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.31:5353"), testAddrPort("10.244.3.31:5353")}}
	testPutService(b, objs, svc)
	cl := testAddrPort("10.244.1.7:40000")
	whole := testPacket{src: cl, dst: svc.fe, proto: testProtoUDP, payload: []byte("q")}
	ret, out, _ := testRun(b, objs.NpIngress, whole.bytes(), 0) // the flow starts
	if ret != testActUnspec {
		b.Fatalf("whole datagram: ret %d", int32(ret))
	}
	be := testParse(b, out).dst
	kinds := []string{"whole", "first-fragment", "later-fragment"}
	var total [3]time.Duration
	run := func(kind int, pkt []byte) {
		ret, d, err := objs.NpIngress.Benchmark(pkt, 1, nil)
		if err != nil || ret != testActUnspec {
			b.Fatalf("%s: ret %d: %v", kinds[kind], int32(ret), err)
		}
		total[kind] += d
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := uint16(i%65535 + 1)
		first := testPacket{src: cl, dst: svc.fe, proto: testProtoUDP, payload: make([]byte, 64), moreFrags: true, fragID: id}
		later := testPacket{src: cl, dst: svc.fe, proto: testProtoUDP, payload: make([]byte, 64), fragOffset: 9, fragID: id}
		run(0, whole.bytes())
		run(1, first.bytes())
		run(2, later.bytes())
		if i == 0 { // the later fragment goes where its first went
			b.StopTimer()
			_, out, _ := testRun(b, objs.NpIngress, later.bytes(), 0)
			if got := netip.AddrFrom4([4]byte(out[30:34])); got != be.Addr() {
				b.Fatalf("later fragment to %v, want its datagram's backend %v", got, be.Addr())
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	for i, k := range kinds {
		b.ReportMetric(float64(total[i].Nanoseconds())/float64(b.N), k+"-ns/packet")
	}
}
