//go:build linux

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/bpf/maps"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// proxyRig is two hosts with three pods each; host 1 runs a Proxy on its
// underlay (eth0) and its pod veths (veth1…), and every pod runs a
// "whoami" server on port 8080 that answers each connection with its name.
type proxyRig struct {
	topo   *kerneltest.Topology
	ns     *kernel.Namespace
	pinDir string
	names  map[netip.Addr]string // pod address → pod name
	attach AttachMode            // the Proxy's Options.Attach
}

const (
	whoamiPort = 8080
	echoPort   = 8081
	masqMark   = 0x40000
)

func newProxyRig(t *testing.T) *proxyRig {
	t.Helper()
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 3})
	require.NoError(t, topo.AddPodRoutesViaUnderlay())
	ns, err := kernel.Open(topo.Hosts[0].NS.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	r := &proxyRig{topo: topo, ns: ns, pinDir: bpftest.Dir(t), names: map[netip.Addr]string{}}
	for _, p := range topo.Pods() {
		serveWhoami(t, p.NS, p.Name)
		p.NS.ListenTCP(t, netip.AddrPortFrom(netip.Addr{}, echoPort))
		for _, a := range p.Addrs() {
			r.names[a] = p.Name
		}
	}
	masqueradeMarked(t, topo.Hosts[0].NS)
	return r
}

// masqueradeMarked makes ns masquerade what the programs mark with
// masqMark (NodePort traffic sent to another node), as an agent does with
// MasqueradeRule.
func masqueradeMarked(t *testing.T, ns *kerneltest.NS) {
	t.Helper()
	for _, cmd := range []string{"iptables", "ip6tables"} {
		out, err := ns.Exec(context.Background(), cmd, "-w", "5", "-t", "nat", "-A", "POSTROUTING",
			"-m", "mark", "--mark", fmt.Sprintf("%#x/%#x", masqMark, masqMark), "-j", "MASQUERADE")
		require.NoError(t, err, "%s", out)
	}
}

// nodeProxy is a Proxy of host h (o's Kernel, PinDir, interfaces and
// masquerade mark filled in, like the rig's), told h's interfaces and
// addresses, cleaned up when the test ends.
func nodeProxy(t *testing.T, h *kerneltest.Host, o Options) *Proxy {
	t.Helper()
	ns, err := kernel.Open(h.NS.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	o.Kernel, o.PinDir, o.HostInterfaces, o.PodInterfacePrefixes = ns, bpftest.Dir(t), []string{"eth0"}, []string{"veth"}
	o.MasqueradeMark, o.MasqueradeMask = masqMark, masqMark
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	links, err := ns.Links(context.Background())
	require.NoError(t, err)
	for _, l := range links {
		p.OnLink(l, l.State())
	}
	p.OnUpdate(cluster.NodeAddrs{Addrs: h.UnderlayAddrs()})
	return p
}

// serveInNS opens a listener in ns with listen and runs serve on it in a
// goroutine; when the test ends the listener is closed and serve, which
// returns once its reads fail, is waited for.
func serveInNS[L io.Closer](t *testing.T, ns *kerneltest.NS, listen func() (L, error), serve func(L)) {
	t.Helper()
	var l L
	require.NoError(t, ns.Do(func() error {
		var err error
		l, err = listen()
		return err
	}))
	var wg sync.WaitGroup
	wg.Go(func() { serve(l) })
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
}

// serveWhoami answers every TCP connection to port whoamiPort in ns with
// name, then closes it.
func serveWhoami(t *testing.T, ns *kerneltest.NS, name string) {
	listen := func() (net.Listener, error) { return net.Listen("tcp", fmt.Sprintf(":%d", whoamiPort)) }
	serveInNS(t, ns, listen, func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, name)
			_ = c.Close()
		}
	})
}

// whoami connects from ns to to and returns the name the server sent.
func whoami(ns *kerneltest.NS, to netip.AddrPort) (string, error) {
	return whoamiFrom(ns, netip.AddrPort{}, to)
}

// proxy is a Proxy of host 1 that knows its interfaces and addresses,
// cleaned up when the test ends.
func (r *proxyRig) proxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(r.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	return p
}

// dial opens a TCP connection from ns to to.
func dial(t *testing.T, ns *kerneltest.NS, to netip.AddrPort) net.Conn {
	t.Helper()
	var c net.Conn
	require.NoError(t, ns.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", to.String(), 3*time.Second)
		return err
	}))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// exchange sends a token on c and reads it back (from an echo server).
func exchange(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo %q", buf)
	}
	return nil
}

// options is the Proxy of host 1.
func (r *proxyRig) options() Options {
	return Options{Kernel: r.ns, PinDir: r.pinDir, HostInterfaces: []string{"eth0"},
		PodInterfacePrefixes: []string{"veth"}, MasqueradeMark: masqMark, MasqueradeMask: masqMark, Attach: r.attach}
}

// feed gives p the interfaces of host 1, as an interface monitor would.
func (r *proxyRig) feed(t *testing.T, p *Proxy) {
	links, err := r.ns.Links(context.Background())
	require.NoError(t, err)
	for _, l := range links {
		p.OnLink(l, l.State())
	}
	p.OnUpdate(cluster.NodeAddrs{Addrs: r.topo.Hosts[0].UnderlayAddrs()})
}

// backends are host1-pod2 (local), host2-pod1 and host2-pod2 (remote), of
// family v4 or v6.
func (r *proxyRig) backends(v6 bool) []cluster.Backend {
	pick := func(p *kerneltest.Pod) netip.Addr {
		if v6 {
			return p.IPv6
		}
		return p.IPv4
	}
	h1, h2 := r.topo.Hosts[0], r.topo.Hosts[1]
	return []cluster.Backend{
		{Addr: netip.AddrPortFrom(pick(h1.Pods[1]), whoamiPort), Local: true},
		{Addr: netip.AddrPortFrom(pick(h2.Pods[0]), whoamiPort)},
		{Addr: netip.AddrPortFrom(pick(h2.Pods[1]), whoamiPort)},
	}
}

// backendsAt are the backends of family v6 (backends) with their port
// changed to port: the same pods' other servers.
func (r *proxyRig) backendsAt(v6 bool, port uint16) []cluster.Backend {
	bs := r.backends(v6)
	for i := range bs {
		bs[i].Addr = netip.AddrPortFrom(bs[i].Addr.Addr(), port)
	}
	return bs
}

func apply(t *testing.T, p *Proxy) {
	t.Helper()
	require.NoError(t, p.CompleteDeferredWork(context.Background()))
	_, err := p.Apply(context.Background())
	require.NoError(t, err)
}

// spread connects n times to to from the namespace from and counts the
// answers per backend name.
func spread(t *testing.T, from *kerneltest.NS, to netip.AddrPort, n int) map[string]int {
	t.Helper()
	return countAnswers(t, n, fmt.Sprintf("connect %v from %s", to, from), func() (string, error) { return whoami(from, to) })
}

// countAnswers asks n times and counts the answers; a failed ask fails the
// test, named by what.
func countAnswers(t *testing.T, n int, what string, ask func() (string, error)) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := range n {
		name, err := ask()
		require.NoError(t, err, "%s (%d of %d)", what, i+1, n)
		got[name]++
	}
	return got
}

var (
	clusterV4 = netip.MustParseAddr("10.96.0.10")
	clusterV6 = netip.MustParseAddr("fd00:96::10")
)

func TestKernelProxyClusterIPAndNodePort(t *testing.T) {
	attachModes(t, testKernelProxyClusterIPAndNodePort)
}

func testKernelProxyClusterIPAndNodePort(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	for _, v6 := range []bool{false, true} {
		cip := clusterV4
		if v6 {
			cip = clusterV6
		}
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/web-v6=%v:http", v6), Port: 80, ClusterIPs: []netip.Addr{cip},
			NodePort: 30080, Backends: r.backends(v6)})
	}
	apply(t, p)
	st := p.Status()
	assert.Equal(t, 2, st.Services)
	assert.Empty(t, st.Errors)
	assert.Contains(t, st.Interfaces, "eth0")
	assert.Contains(t, st.Interfaces, "veth1")

	for _, cip := range []netip.Addr{clusterV4, clusterV6} {
		got := spread(t, client.NS, netip.AddrPortFrom(cip, 80), 30)
		t.Logf("ClusterIP %v from %s: %v", cip, client.Name, got)
		assert.Len(t, got, 3, "every backend (local and on host 2) answers")
	}
	// A NodePort from host 2 (another node): to a local backend directly,
	// to host 2's own pods masqueraded through host 1.
	h2 := r.topo.Hosts[1]
	for _, a := range r.topo.Hosts[0].UnderlayAddrs() {
		got := spread(t, h2.NS, netip.AddrPortFrom(a, 30080), 30)
		t.Logf("NodePort %v from host 2: %v", a, got)
		assert.Len(t, got, 3)
	}
	// A second Apply with nothing new writes nothing; nor does a resync
	// (which reads the maps and the attachments again).
	k := p.k
	before := k.feSync.Counters().Syscalls + k.beSync.Counters().Syscalls
	apply(t, p)
	assert.Equal(t, before, k.feSync.Counters().Syscalls+k.beSync.Counters().Syscalls)
	links := k.linkWrites
	updated := k.feSync.Counters().Updated + k.beSync.Counters().Updated + k.feSync.Counters().Deleted + k.beSync.Counters().Deleted
	stats := p.Stats()
	assert.Positive(t, stats.Desired)
	assert.Equal(t, stats.Desired, stats.InKernel, "every entry and attachment is in the kernel: %+v", stats)
	assert.Zero(t, stats.Failing)
	assert.Equal(t, uint64(updated+links), stats.Writes, "the entries written and deleted and the attachments made")
	p.QueueResync()
	apply(t, p)
	assert.Equal(t, links, k.linkWrites, "no attachment made or replaced on a resync")
	assert.Equal(t, updated, k.feSync.Counters().Updated+k.beSync.Counters().Updated+k.feSync.Counters().Deleted+k.beSync.Counters().Deleted)
	assert.Equal(t, stats, p.Stats(), "a resync that writes nothing leaves the DriverStats as they were")
	assert.Len(t, spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
}

func TestKernelProxyExternalTrafficLocal(t *testing.T) {
	attachModes(t, testKernelProxyExternalTrafficLocal)
}

func testKernelProxyExternalTrafficLocal(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	p.OnUpdate(cluster.Service{Name: "default/local:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4},
		NodePort: 30081, ExternalTrafficLocal: true, Backends: r.backends(false)})
	apply(t, p)
	got := spread(t, r.topo.Hosts[1].NS, netip.AddrPortFrom(r.topo.Hosts[0].UnderlayIPv4.Addr(), 30081), 12)
	assert.Equal(t, map[string]int{r.topo.Hosts[0].Pods[1].Name: 12}, got, "only the local backend")
	// From a pod, the ClusterIP still spreads over all.
	got = spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30)
	assert.Len(t, got, 3)
}

func TestKernelProxyChangesAndRemoval(t *testing.T) { attachModes(t, testKernelProxyChangesAndRemoval) }

func testKernelProxyChangesAndRemoval(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0].NS
	svc := cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	assert.Len(t, spread(t, client, netip.AddrPortFrom(clusterV4, 80), 30), 3)

	// One backend left: every connection goes there.
	svc.Backends = svc.Backends[2:]
	p.OnUpdate(svc)
	apply(t, p)
	assert.Equal(t, map[string]int{r.topo.Hosts[1].Pods[1].Name: 10}, spread(t, client, netip.AddrPortFrom(clusterV4, 80), 10))

	// No backend: new connections are dropped (the connect times out).
	svc.Backends = nil
	p.OnUpdate(svc)
	apply(t, p)
	_, err := whoami(client, netip.AddrPortFrom(clusterV4, 80))
	require.Error(t, err)

	// Removed: the address is no service any more (nothing answers it).
	p.OnUpdate(cluster.ServiceRemove{Name: svc.Name})
	apply(t, p)
	assert.Equal(t, 0, p.Status().Services)
	fes, err := p.k.feSync.Kernel(context.Background())
	require.NoError(t, err)
	assert.Empty(t, fes)
}

func TestKernelProxyRestartKeepsConnections(t *testing.T) {
	attachModes(t, testKernelProxyRestartKeepsConnections)
}

func testKernelProxyRestartKeepsConnections(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p, err := New(r.options())
	require.NoError(t, err)
	r.feed(t, p)
	backends := r.backendsAt(false, echoPort)
	svcs := []cluster.Service{
		{Name: "default/echo:tcp", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends},
		{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, NodePort: 30080, Backends: r.backends(false)},
	}
	for _, s := range svcs {
		p.OnUpdate(s)
	}
	apply(t, p)

	// An established connection through the service.
	client := r.topo.Hosts[0].Pods[0].NS
	conn := dial(t, client, netip.AddrPortFrom(clusterV4, 81))
	require.NoError(t, exchange(conn))

	// The agent goes away: the pins keep the dataplane working.
	require.NoError(t, p.Close())
	require.NoError(t, exchange(conn))
	assert.Len(t, spread(t, client, netip.AddrPortFrom(clusterV4, 80), 30), 3)

	// A new Proxy on the same pins, with the same services, adopts them
	// (IDs included) and writes no map entry.
	p2, err := New(r.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(context.Background()) })
	r.feed(t, p2)
	for _, s := range svcs {
		p2.OnUpdate(s)
	}
	apply(t, p2)
	assert.Equal(t, 0, p2.k.feSync.Counters().Updated+p2.k.beSync.Counters().Updated, "nothing rewritten")
	assert.Equal(t, 0, p2.k.feSync.Counters().Deleted+p2.k.beSync.Counters().Deleted)
	require.NoError(t, exchange(conn))

	// Cleanup detaches everything and removes the pins.
	require.NoError(t, p2.Cleanup(context.Background()))
	entries, err := os.ReadDir(r.pinDir)
	require.NoError(t, err)
	for _, e := range entries {
		// A fresh bpffs shows the kernel's maps.debug and progs.debug.
		assert.True(t, strings.HasSuffix(e.Name(), ".debug"), "pin left: %s", e.Name())
	}
	// The kernel detaches a link whose last reference went in a worker,
	// shortly after.
	require.Eventually(t, func() bool {
		_, err := whoami(client, netip.AddrPortFrom(clusterV4, 80))
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "no translation after Cleanup")
}

func TestKernelProxyInterfacesComeAndGo(t *testing.T) {
	attachModes(t, testKernelProxyInterfacesComeAndGo)
}

func testKernelProxyInterfacesComeAndGo(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p, err := New(r.options())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
	// No interface known yet: the maps are written, nothing is attached.
	apply(t, p)
	assert.Empty(t, p.Status().Interfaces)
	client := r.topo.Hosts[0].Pods[0]
	_, err = whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
	require.Error(t, err)

	r.feed(t, p)
	apply(t, p)
	name, err := whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
	require.NoError(t, err)
	assert.NotEmpty(t, name)
	// np_ifs holds every interface the programs are on, with its kind:
	// what arrives on the host's comes from outside the node, what arrives
	// on a pod's veth from a pod.
	kinds := map[uint32]uint32{}
	for _, n := range rigInterfaces {
		l, err := r.ns.LinkByName(context.Background(), n)
		require.NoError(t, err)
		kinds[uint32(l.Index)] = ifPod
		if n == "eth0" {
			kinds[uint32(l.Index)] = ifHost
		}
	}
	assert.Equal(t, kinds, ifKinds(t, p))
	eth0, err := r.ns.LinkByName(context.Background(), "eth0")
	require.NoError(t, err)

	// The monitor says the client's veth is gone: its attachments and pins
	// go, and the client's connections are no longer translated.
	l, err := r.ns.LinkByName(context.Background(), client.HostVeth)
	require.NoError(t, err)
	p.OnLink(kernel.Link{Name: client.HostVeth, Index: l.Index}, kernel.LinkGone)
	apply(t, p)
	assert.NotContains(t, p.Status().Interfaces, client.HostVeth)
	assert.NotContains(t, ifKinds(t, p), uint32(l.Index), "a gone interface leaves np_ifs")
	_, err = os.Stat(filepath.Join(r.pinDir, linksDir, "ingress_"+client.HostVeth))
	assert.True(t, errors.Is(err, os.ErrNotExist), "the pin of a gone interface is removed: %v", err)
	require.Eventually(t, func() bool {
		_, err := whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "no translation on a gone interface")

	// It is back: attached again, translated again.
	p.OnLink(kernel.Link{Name: client.HostVeth, Index: l.Index}, kernel.LinkUp)
	apply(t, p)
	assert.Contains(t, p.Status().Interfaces, client.HostVeth)
	name, err = whoami(client.NS, netip.AddrPortFrom(clusterV4, 80))
	require.NoError(t, err)
	assert.NotEmpty(t, name)

	// An attachment that fails (an interface index that does not exist) is
	// reported for that interface alone and retried.
	p.OnLink(kernel.Link{Name: "veth9", Index: 99999}, kernel.LinkUp)
	_, err = p.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, ErrAttach)
	assert.True(t, strings.Contains(err.Error(), "veth9"), "%v", err)
	st := p.Status()
	assert.Contains(t, st.Interfaces, "eth0")
	assert.NotEmpty(t, st.Errors)
	// The failure is the interface's ObjectError in the Proxy's ledger:
	// tried again at the next Apply, its attempts counted; gone with the
	// interface.
	var oe *dataplane.ObjectError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, []any{"attach", dataplane.ObjectKind("interface"), "veth9", 1}, []any{oe.Op, oe.Kind, oe.Name, oe.Attempts})
	assert.Equal(t, 1, p.Stats().Failing)
	_, err = p.Apply(context.Background())
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, 2, oe.Attempts)
	p.OnLink(kernel.Link{Name: "veth9", Index: 99999}, kernel.LinkGone)
	apply(t, p)
	assert.Zero(t, p.Stats().Failing)

	// The host interface gone, its index leaves np_ifs (another interface
	// may get it); back, it is there again.
	p.OnLink(kernel.Link{Name: "eth0", Index: eth0.Index}, kernel.LinkGone)
	apply(t, p)
	assert.NotContains(t, ifKinds(t, p), uint32(eth0.Index))
	p.OnLink(kernel.Link{Name: "eth0", Index: eth0.Index}, kernel.LinkUp)
	apply(t, p)
	assert.Equal(t, ifHost, ifKinds(t, p)[uint32(eth0.Index)])
}

// ifKinds returns what np_ifs holds: interface index to kind.
func ifKinds(t *testing.T, p *Proxy) map[uint32]uint32 {
	t.Helper()
	var key, v uint32
	out := map[uint32]uint32{}
	it := p.k.ifs.Iterate()
	for it.Next(&key, &v) {
		out[key] = v
	}
	require.NoError(t, it.Err())
	return out
}

// A backend removed from a service renumbers the ones after it; their
// established connections keep their backend.
func TestKernelProxyRemovedBackendKeepsOthersConnections(t *testing.T) {
	attachModes(t, testKernelProxyRemovedBackendKeepsOthersConnections)
}

func testKernelProxyRemovedBackendKeepsOthersConnections(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	backends := r.backendsAt(false, echoPort)
	svc := cluster.Service{Name: "default/echo:tcp", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends}
	p.OnUpdate(svc)
	apply(t, p)

	client := r.topo.Hosts[0].Pods[0]
	type tracked struct {
		conn    net.Conn
		backend netip.AddrPort
	}
	var conns []tracked
	for range 24 {
		c := dial(t, client.NS, netip.AddrPortFrom(clusterV4, 81))
		// The program's forward entry says which backend it chose.
		local := c.LocalAddr().(*net.TCPAddr).AddrPort()
		key := ctKey{Src: addr16(local.Addr().Unmap()), Dst: addr16(clusterV4), Sport: port16(local.Port()), Dport: port16(81), Proto: 6}
		var v ctVal
		require.NoError(t, p.k.ct.Lookup(&key, &v))
		conns = append(conns, tracked{c, netip.AddrPortFrom(fromAddr16(v.Addr), fromPort16(v.Port))})
	}
	for _, c := range conns {
		require.NoError(t, exchange(c.conn))
	}
	// The first backend (ordinal 0) goes; the others move down by one.
	removed := svc.Backends[0].Addr
	svc.Backends = svc.Backends[1:]
	p.OnUpdate(svc)
	apply(t, p)
	kept := 0
	for _, c := range conns {
		if c.backend == removed {
			continue
		}
		kept++
		assert.NoError(t, exchange(c.conn), "connection to %v", c.backend)
	}
	assert.NotZero(t, kept)
}

// A pod that is one of its service's backends reaches the service through
// the other backends.
func TestKernelProxyPodReachesItsOwnService(t *testing.T) {
	attachModes(t, testKernelProxyPodReachesItsOwnService)
}

func testKernelProxyPodReachesItsOwnService(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	backends := append([]cluster.Backend{{Addr: netip.AddrPortFrom(client.IPv4, whoamiPort), Local: true}}, r.backends(false)...)
	p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: backends})
	apply(t, p)
	got := spread(t, client.NS, netip.AddrPortFrom(clusterV4, 80), 30)
	assert.NotContains(t, got, client.Name)
	assert.Len(t, got, 3)
}

// A pod that is its service's only backend reaches itself through the
// cluster IP (hairpin), on both families: whoami answers with its own name,
// and an echo connection on another service port carries several round
// trips.
func TestKernelProxyPodReachesItselfAsOnlyBackend(t *testing.T) {
	attachModes(t, testKernelProxyPodReachesItselfAsOnlyBackend)
}

func testKernelProxyPodReachesItselfAsOnlyBackend(t *testing.T, mode AttachMode) {
	r := newProxyRig(t)
	r.attach = mode
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0]
	for _, v6 := range []bool{false, true} {
		cip, addr := clusterV4, client.IPv4
		if v6 {
			cip, addr = clusterV6, client.IPv6
		}
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/self-v6=%v:http", v6), Port: 80, ClusterIPs: []netip.Addr{cip},
			Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(addr, whoamiPort), Local: true}}})
		p.OnUpdate(cluster.Service{Name: fmt.Sprintf("default/self-v6=%v:echo", v6), Port: 81, ClusterIPs: []netip.Addr{cip},
			Backends: []cluster.Backend{{Addr: netip.AddrPortFrom(addr, echoPort), Local: true}}})
	}
	apply(t, p)
	require.Empty(t, p.Status().Errors)

	for _, cip := range []netip.Addr{clusterV4, clusterV6} {
		got := spread(t, client.NS, netip.AddrPortFrom(cip, 80), 5)
		assert.Equal(t, map[string]int{client.Name: 5}, got, "whoami through %v", cip)

		echo := fmt.Sprintf("default/self-v6=%v:echo", cip.Is6())
		before := p.Counters()[echo]
		c := dial(t, client.NS, netip.AddrPortFrom(cip, 81))
		assert.Equal(t, netip.AddrPortFrom(cip, 81).String(), c.RemoteAddr().String())
		for i := range 5 {
			require.NoError(t, exchange(c), "echo round trip %d through %v", i, cip)
		}
		// Both ways counted: the client sent at most 12 packets (SYN,
		// ACK, five requests, five ACKs), the server at least 6 (SYN-ACK,
		// five answers).
		after := p.Counters()[echo]
		assert.Equal(t, before.Connections+1, after.Connections, "through %v", cip)
		assert.GreaterOrEqual(t, after.Packets-before.Packets, uint64(13), "the server's answers are counted through %v: %+v", cip, after)
		// The hairpin reverse entry says the server answered (the
		// scanner keeps the connection for the established timeout).
		replied := false
		var k ctKey
		var v ctVal
		for it := p.k.ct.Iterate(); it.Next(&k, &v); {
			if v.Flags&(ctReverse|ctHairpin) == ctReverse|ctHairpin && v.Flags&ctReplied != 0 {
				replied = true
			}
		}
		assert.True(t, replied, "a hairpin reverse entry marked answered through %v", cip)
		require.NoError(t, c.Close())
	}
	// Another pod of the node reaches the same service as usual.
	other := r.topo.Hosts[0].Pods[1]
	for _, cip := range []netip.Addr{clusterV4, clusterV6} {
		assert.Equal(t, map[string]int{client.Name: 3}, spread(t, other.NS, netip.AddrPortFrom(cip, 80), 3))
	}
}

// Cleanup removes PinDir when it holds nothing else, and leaves it, with
// what someone else put there, when it does.
func TestKernelProxyCleanupRemovesEmptyPinDir(t *testing.T) {
	r := newProxyRig(t)
	for _, foreign := range []bool{false, true} {
		o := r.options()
		o.PinDir = filepath.Join(r.pinDir, fmt.Sprintf("agent-%v", foreign))
		p, err := New(o)
		require.NoError(t, err)
		r.feed(t, p)
		p.OnUpdate(cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)})
		apply(t, p)
		if foreign {
			require.NoError(t, os.Mkdir(filepath.Join(o.PinDir, "theirs"), 0o700))
		}
		require.NoError(t, p.Cleanup(context.Background()))
		entries, err := os.ReadDir(o.PinDir)
		if !foreign {
			require.ErrorIs(t, err, os.ErrNotExist, "PinDir holds %v", entries)
			continue
		}
		require.NoError(t, err)
		require.Len(t, entries, 1)
		assert.Equal(t, "theirs", entries[0].Name())
	}
}

// A removed service's connection outlives it (TCP keeps its backend) and
// its packets are counted under its old ID: a service made afterwards, by
// this agent or by the next one, gets another ID and counts only its own
// traffic; the stale counters go at the next resync.
func TestKernelProxyRemovedServiceCountsIntoNoOther(t *testing.T) {
	r := newProxyRig(t)
	p := r.proxy(t)
	client := r.topo.Hosts[0].Pods[0].NS
	old := cluster.Service{Name: "default/old:echo", Port: 81, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, echoPort)}
	p.OnUpdate(old)
	apply(t, p)
	oldID := p.services[old.Name].ids[0]
	c := dial(t, client, netip.AddrPortFrom(clusterV4, 81))
	require.NoError(t, exchange(c))
	p.OnUpdate(cluster.ServiceRemove{Name: old.Name})
	apply(t, p)
	require.NoError(t, exchange(c), "the removed service's connection goes on")

	zero := ServiceCounters{}
	for i, name := range []string{"default/new:echo", "default/after-restart:echo"} {
		if i == 1 { // the next agent on the same pins
			require.NoError(t, p.Close())
			var err error
			p, err = New(r.options())
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
			r.feed(t, p)
			p.OnUpdate(cluster.Service{Name: "default/new:echo", Port: 82, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, echoPort)})
		}
		s := cluster.Service{Name: name, Port: uint16(83 + i), ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backendsAt(false, echoPort)}
		p.OnUpdate(s)
		apply(t, p)
		assert.NotEqual(t, oldID, p.services[name].ids[0], "%s: the removed service's ID is not handed out again", name)
		assert.Equal(t, zero, p.Counters()[name], "%s starts from nothing", name)
		for range 3 {
			require.NoError(t, exchange(c))
		}
		assert.Equal(t, zero, p.Counters()[name], "%s does not count the removed service's connection", name)
	}
	var per []svcStats
	require.NoError(t, p.k.svcStats.Lookup(&oldID, &per), "the programs count the old connection under its ID")
	p.QueueResync()
	apply(t, p)
	require.ErrorIs(t, p.k.svcStats.Lookup(&oldID, &per), ebpf.ErrKeyNotExist, "a resync sweeps the counters of an ID no service holds")
	require.NoError(t, exchange(c))
	require.NoError(t, c.Close())
}

// What someone else does to the maps is repaired at the next resync; a
// foreign program on the same interface and a foreign pin in PinDir
// survive, also Cleanup; a frontend two services want stays the first's.
func TestKernelProxyDriftForeignAndConflicts(t *testing.T) {
	r := newProxyRig(t)
	// A foreign TCX program on a pod veth, and a foreign pin.
	foreign, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	require.NoError(t, err)
	defer foreign.Close()
	veth := r.topo.Hosts[0].Pods[0].HostVeth
	l, err := r.ns.LinkByName(context.Background(), veth)
	require.NoError(t, err)
	var foreignLink link.Link
	require.NoError(t, r.ns.Do(func() error {
		var err error
		foreignLink, err = link.AttachTCX(link.TCXOptions{Interface: l.Index, Program: foreign, Attach: ebpf.AttachTCXIngress})
		return err
	}))
	defer foreignLink.Close()
	require.NoError(t, foreign.Pin(filepath.Join(r.pinDir, "someone-elses")))

	p, err := New(r.options())
	require.NoError(t, err)
	r.feed(t, p)
	svc := cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	p.OnUpdate(cluster.Service{Name: "other/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)[:1]})
	require.NoError(t, p.CompleteDeferredWork(context.Background()))
	res, err := p.Apply(context.Background())
	// The conflict is what Apply reports, as an object that failed; it is
	// tried again when the frontend is let go, not on a timer.
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrFrontendConflict)
	assert.Equal(t, 1, pe.Failed)
	assert.Contains(t, err.Error(), "other/web:http")
	assert.Zero(t, res.RetryAfter)
	st := p.Status()
	require.Len(t, st.Errors, 1)
	assert.Contains(t, st.Errors[0], "other/web:http")
	assert.Contains(t, st.Errors[0], "proxy: write service other/web:http: frontend held by another service: ")
	// An Apply that does not try it again counts it as waiting.
	_, err = p.Apply(context.Background())
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrFrontendConflict)
	assert.Equal(t, []int{0, 1}, []int{pe.Failed, pe.Waiting})
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3, "the first service keeps the frontend")

	// Someone deletes the frontend and overwrites a backend.
	key := feKey{Addr: addr16(clusterV4), Port: port16(80), Proto: 6}
	require.NoError(t, p.k.fe.Delete(&key))
	require.NoError(t, p.k.be.Put(&beKey{SvcID: 1, Ordinal: 0}, &beVal{Addr: addr16(netip.MustParseAddr("192.0.2.1")), Port: port16(1)}))
	p.QueueResync()
	_, err = p.Apply(context.Background())
	require.ErrorIs(t, err, ErrFrontendConflict, "still waiting")
	var fv feVal
	require.NoError(t, p.k.fe.Lookup(&key, &fv))
	assert.Equal(t, uint32(3), fv.Count)
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3, "repaired")

	// The first service goes: the second takes the frontend.
	p.OnUpdate(cluster.ServiceRemove{Name: svc.Name})
	apply(t, p)
	assert.Empty(t, p.Status().Errors)
	assert.Equal(t, map[string]int{r.topo.Hosts[0].Pods[1].Name: 10}, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 10))

	require.NoError(t, p.Cleanup(context.Background()))
	_, err = os.Stat(filepath.Join(r.pinDir, "someone-elses"))
	assert.NoError(t, err, "a foreign pin survives Cleanup")
	info, err := foreignLink.Info()
	require.NoError(t, err)
	assert.Equal(t, uint32(l.Index), info.TCX().Ifindex, "the foreign attachment is still there")
	// And it still runs: the pod reaches a backend directly.
	name, err := whoami(r.topo.Hosts[0].Pods[0].NS, r.backends(false)[1].Addr)
	require.NoError(t, err)
	assert.NotEmpty(t, name)
}

// Map sizes other than the defaults are the maps' (and the program's); a
// restart with other sizes replaces the maps and writes the services again.
func TestKernelProxyMapSizes(t *testing.T) {
	r := newProxyRig(t)
	o := r.options()
	o.Frontends, o.Backends, o.Connections = 1000, 4000, 5000
	p, err := New(o)
	require.NoError(t, err)
	r.feed(t, p)
	svc := cluster.Service{Name: "default/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(svc)
	apply(t, p)
	assert.Equal(t, []uint32{1000, 4000, 5000}, []uint32{p.k.fe.MaxEntries(), p.k.be.MaxEntries(), p.k.ct.MaxEntries()})
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
	require.NoError(t, p.Close())

	o.Frontends = 2000
	p2, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p2.Cleanup(context.Background()) })
	r.feed(t, p2)
	p2.OnUpdate(svc)
	apply(t, p2)
	assert.Equal(t, uint32(2000), p2.k.fe.MaxEntries())
	assert.Len(t, spread(t, r.topo.Hosts[0].Pods[0].NS, netip.AddrPortFrom(clusterV4, 80), 30), 3)
}

// With a backend map too small for every service, a service that does not
// fit is not written at all (no frontend counting backends the map does
// not hold), the others are served whole, and the Apply that removes a
// service lets the waiting one in: traffic reaches all of its backends.
func TestKernelProxyBackendMapFull(t *testing.T) {
	r := newProxyRig(t)
	o := r.options()
	o.Backends = 4
	p, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Cleanup(context.Background()) })
	r.feed(t, p)
	client := r.topo.Hosts[0].Pods[0].NS
	a := cluster.Service{Name: "a/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterV4}, Backends: r.backends(false)}
	p.OnUpdate(a)
	apply(t, p)

	// b wants two backends; one entry is left.
	clusterB := netip.MustParseAddr("10.96.0.11")
	b := cluster.Service{Name: "b/web:http", Port: 80, ClusterIPs: []netip.Addr{clusterB}, Backends: r.backends(false)[1:]}
	p.OnUpdate(b)
	require.NoError(t, p.CompleteDeferredWork(context.Background()))
	_, err = p.Apply(context.Background())
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, ErrMapFull)
	require.NotErrorIs(t, err, maps.ErrEntry, "nothing was refused by the kernel")
	require.Equal(t, 1, pe.Failed)
	require.Equal(t, []string{a.Name}, served(t, p))
	assert.Len(t, spread(t, client, netip.AddrPortFrom(clusterV4, 80), 30), 3, "a is not held back")
	st := p.Status()
	require.Len(t, st.Errors, 1)
	assert.Contains(t, st.Errors[0], b.Name)
	assert.Contains(t, st.Errors[0], "map full: ")

	// a goes: b gets in in the same Apply.
	p.OnUpdate(cluster.ServiceRemove{Name: a.Name})
	apply(t, p)
	require.Equal(t, []string{b.Name}, served(t, p))
	assert.Empty(t, p.Status().Errors)
	assert.Len(t, spread(t, client, netip.AddrPortFrom(clusterB, 80), 30), 2)
}
