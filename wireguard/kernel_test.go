//go:build linux

package wireguard_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/leakcheck"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/wireguard"
)

// Kernel tests run the real providers in namespaces of their own. This
// machine's kernel has no WireGuard module: the kernel provider's test says
// so, and the Manager falls back to the embedded userspace device.
//
// Userspace devices serve their control socket in /var/run/wireguard, one
// directory for every namespace of the machine, so every device gets a
// name of its own: "wgt", the process ID, a counter.

var devCounter atomic.Int32

func uniqueName(t *testing.T) string {
	n := fmt.Sprintf("wgt%d-%d", os.Getpid()%100000, devCounter.Add(1))
	require.LessOrEqual(t, len(n), 15)
	return n
}

func TestKernelKernelProviderDetectsTheMissingModule(t *testing.T) {
	host := kerneltest.NewNS(t)
	k, err := kernel.Open(host.Path())
	require.NoError(t, err)
	defer k.Close()
	p := wireguard.NewKernelProvider(wireguard.KernelProviderOptions{Links: k, WireGuard: k})
	dev, err := p.Open(context.Background(), wireguard.DeviceSpec{Name: "wg-np", MTU: 1420})
	if errors.Is(err, wireguard.ErrNotSupported) {
		t.Logf("this kernel has no WireGuard module (%v): the kernel provider is covered on fakes; the userspace provider runs below", err)
		assert.ErrorIs(t, err, kernel.ErrNotSupported)
		_, lerr := k.LinkByName(context.Background(), "wg-np")
		assert.ErrorIs(t, lerr, kernel.ErrNotFound, "a refused device leaves no link")
		return
	}
	require.NoError(t, err)
	t.Log("this kernel has WireGuard: the kernel provider made a device")
	st, err := dev.State(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "wg-np", st.Name)
	require.NoError(t, dev.Delete(context.Background()))
}

// wgNode is one host of the test cluster with its Managers.
type wgNode struct {
	c       *wgCluster
	host    *kerneltest.Host
	k       *kernel.Namespace
	keyFile string
	names   map[ipfamily.Family]string
	mgr     map[ipfamily.Family]*wireguard.Manager
	mu      sync.Mutex
	pub     map[ipfamily.Family]wireguard.PublicKey
}

type wgCluster struct {
	t     *testing.T
	topo  *kerneltest.Topology
	nodes []*wgNode
	// tune, when set, changes every Manager's options.
	tune func(*wireguard.Options)
}

const kTable, kMark = 100, 0x100000

// newWGCluster builds hosts with pods, opens each host's namespace and
// starts an IPv4 and an IPv6 Manager on each, every host knowing every
// other's key.
func newWGCluster(t *testing.T, hosts int) *wgCluster { return newWGClusterTuned(t, hosts, nil) }

// newWGClusterTuned is newWGCluster with tune changing every Manager's
// options.
func newWGClusterTuned(t *testing.T, hosts int, tune func(*wireguard.Options)) *wgCluster {
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: hosts, PodsPerHost: 1})
	c := &wgCluster{t: t, topo: topo, tune: tune}
	// Registered before the Managers' Close, so it runs after them.
	t.Cleanup(func() {
		leakcheck.NoGoroutines(t, 10*time.Second, "golang.zx2c4.com/wireguard/device.", "golang.zx2c4.com/wireguard/tun.",
			"golang.zx2c4.com/wireguard/ipc.", "wireguard.(*userDevice)")
		matches, _ := filepath.Glob("/var/run/wireguard/wgt*")
		for _, m := range matches {
			for _, n := range c.nodes {
				for _, name := range n.names {
					assert.NotEqual(t, "/var/run/wireguard/"+name+".sock", m, "control socket left behind")
				}
			}
		}
	})
	for _, h := range topo.Hosts {
		k, err := kernel.Open(h.NS.Path())
		require.NoError(t, err)
		t.Cleanup(func() { _ = k.Close() })
		n := &wgNode{c: c, host: h, k: k, keyFile: filepath.Join(t.TempDir(), "wg.key"),
			names: map[ipfamily.Family]string{ipfamily.IPv4: uniqueName(t), ipfamily.IPv6: uniqueName(t)},
			mgr:   map[ipfamily.Family]*wireguard.Manager{}, pub: map[ipfamily.Family]wireguard.PublicKey{}}
		c.nodes = append(c.nodes, n)
		for _, f := range ipfamily.All {
			n.start(f)
		}
	}
	c.mesh()
	return c
}

func (n *wgNode) options(f ipfamily.Family) wireguard.Options {
	o := wireguard.Options{Family: f, Kernel: n.k, InterfaceName: n.names[f], FirewallMark: kMark, Table: kTable,
		HostMTU: 1500, KeyFile: n.keyFile, NodeName: n.host.Name,
		OnPublicKey: func(k wireguard.PublicKey) {
			n.mu.Lock()
			n.pub[f] = k
			n.mu.Unlock()
		}}
	if n.c.tune != nil {
		n.c.tune(&o)
	}
	return o
}

// start makes (or remakes) the host's Manager of family f and applies it.
func (n *wgNode) start(f ipfamily.Family) {
	t := n.c.t
	m, err := wireguard.New(n.options(f))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	n.mgr[f] = m
	n.apply(f)
	st := m.Status()
	require.Equal(t, wireguard.ModeUserspace, st.Mode, "this machine has no WireGuard module")
	t.Logf("%s %s: provider %s (%s)", n.host.Name, f, st.Mode, st.ModeReason)
}

func (n *wgNode) apply(f ipfamily.Family) {
	t := n.c.t
	t.Helper()
	m := n.mgr[f]
	_, err := pass(m)
	require.NoError(t, err)
}

func (n *wgNode) publicKey(f ipfamily.Family) wireguard.PublicKey {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pub[f]
}

// update is what the control plane tells the others about n, for the
// Manager of family f: its node (underlay addresses, the key of f) and
// its block of f.
func (n *wgNode) update(f ipfamily.Family) testPeer {
	u := testPeer{Node: n.host.Name, PublicKey: n.publicKey(f)}
	if f == ipfamily.IPv4 {
		u.Endpoint = netip.AddrPortFrom(n.host.UnderlayIPv4.Addr(), 0)
		u.CIDRs = []netip.Prefix{n.host.PodCIDRv4}
	} else {
		u.Endpoint = netip.AddrPortFrom(n.host.UnderlayIPv6.Addr(), 0)
		u.CIDRs = []netip.Prefix{n.host.PodCIDRv6}
	}
	return u
}

// mesh tells every node about every other and applies.
func (c *wgCluster) mesh() {
	for _, n := range c.nodes {
		for _, f := range ipfamily.All {
			for _, o := range c.nodes {
				if o != n {
					send(n.mgr[f], o.update(f))
				}
			}
			n.apply(f)
		}
	}
}

func pod(n *wgNode) *kerneltest.Pod { return n.host.Pods[0] }

// deviceViaControlSocket reads a device the way `wg show` does: wgctrl
// through /var/run/wireguard/NAME.sock.
func deviceViaControlSocket(t *testing.T, name string) (peers int, port int) {
	c, err := wgctrl.New()
	require.NoError(t, err)
	defer c.Close()
	d, err := c.Device(name)
	require.NoError(t, err)
	return len(d.Peers), d.ListenPort
}

// capture reads every frame on an interface of a namespace through an
// AF_PACKET socket made inside it, until stop is called.
type capture struct {
	fd       int
	mu       sync.Mutex
	frames   [][]byte
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

func startCapture(t *testing.T, ns *kerneltest.NS, ifname string) *capture {
	c := &capture{quit: make(chan struct{}), done: make(chan struct{})}
	proto := int(htons(unix.ETH_P_ALL))
	require.NoError(t, ns.Do(func() error {
		l, err := ns.Handle().LinkByName(ifname)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: l.Attrs().Index}); err != nil {
			unix.Close(fd)
			return err
		}
		tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			unix.Close(fd)
			return err
		}
		c.fd = fd
		return nil
	}))
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for {
			select {
			case <-c.quit:
				return
			default:
			}
			n, _, err := unix.Recvfrom(c.fd, buf, 0)
			if err != nil {
				continue
			}
			c.mu.Lock()
			c.frames = append(c.frames, bytes.Clone(buf[:n]))
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.stop)
	return c
}

func (c *capture) stop() {
	c.quitOnce.Do(func() {
		close(c.quit)
		<-c.done
		unix.Close(c.fd)
	})
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// packet is the IP layer of a captured frame.
type packet struct {
	src, dst         netip.Addr
	proto            uint8
	srcPort, dstPort uint16
	payload          []byte
}

func (c *capture) packets() []packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []packet
	for _, f := range c.frames {
		if len(f) < 14 {
			continue
		}
		var p packet
		ip := f[14:]
		switch binary.BigEndian.Uint16(f[12:14]) {
		case unix.ETH_P_IP:
			if len(ip) < 20 {
				continue
			}
			hl := int(ip[0]&0xf) * 4
			p.src, p.dst, p.proto = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), ip[9]
			p.payload = ip[min(hl, len(ip)):]
		case unix.ETH_P_IPV6:
			if len(ip) < 40 {
				continue
			}
			p.src, p.dst, p.proto = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), ip[6]
			p.payload = ip[40:]
		default:
			continue
		}
		if p.proto == unix.IPPROTO_UDP && len(p.payload) >= 8 {
			p.srcPort, p.dstPort = binary.BigEndian.Uint16(p.payload[0:2]), binary.BigEndian.Uint16(p.payload[2:4])
		}
		out = append(out, p)
	}
	return out
}

var podNets = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}

func isPodAddr(a netip.Addr) bool {
	for _, p := range podNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// pingPattern is put in every echo request of pingWithPattern, so a
// plaintext copy on the underlay would show.
const pingPattern = "c0ffee15dec0de42"

func pingWithPattern(ctx context.Context, from *kerneltest.NS, to netip.Addr) error {
	_, err := from.Exec(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-p", pingPattern, to.String())
	return err
}

func TestKernelUserspaceTunnelEncryptsPodTraffic(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	c := newWGCluster(t, 3)
	ctx := context.Background()
	h1, h2, h3 := c.nodes[0], c.nodes[1], c.nodes[2]

	// The device answers on its control socket, as `wg show` needs.
	peers, port := deviceViaControlSocket(t, h1.names[ipfamily.IPv4])
	assert.Equal(t, 2, peers)
	assert.Equal(t, wireguard.DefaultListenPort, port)

	// The rule is in place, with the table.
	rules, err := h1.k.Rules(ctx, kernel.IPv4)
	require.NoError(t, err)
	found := false
	for _, r := range rules {
		found = found || r.Table == kTable && r.Invert && r.Mark == kMark && r.Priority == wireguard.DefaultRulePriority
	}
	assert.True(t, found, "rule not fwmark %#x lookup %d", kMark, kTable)

	// The device's UDP sockets live in the host's namespace, whichever
	// goroutine brought the device up.
	require.NoError(t, h1.host.NS.Do(func() error {
		for _, f := range []string{"/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			assert.Contains(t, string(b), fmt.Sprintf(":%04X ", wireguard.DefaultListenPort), f)
		}
		return nil
	}))

	cap := startCapture(t, h1.host.NS, kerneltest.UnderlayIf)
	pattern, _ := hexDecode(pingPattern)
	for _, dst := range []*wgNode{h2, h3} {
		for _, a := range pod(dst).Addrs() {
			kerneltest.Eventually(t, 15*time.Second, kerneltest.Check{
				Name: fmt.Sprintf("%s -> %s", pod(h1).Name, a),
				Run:  func(ctx context.Context) error { return pingWithPattern(ctx, pod(h1).NS, a) },
			})
		}
	}
	// And the other way, from host 2's pod to host 1's and host 3's.
	for _, a := range append(pod(h1).Addrs(), pod(h3).Addrs()...) {
		kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h2).NS, a))
	}
	cap.stop()

	var udp, plain int
	for _, p := range cap.packets() {
		if isPodAddr(p.src) || isPodAddr(p.dst) {
			plain++
			t.Errorf("plaintext pod packet on the underlay: %s -> %s proto %d", p.src, p.dst, p.proto)
		}
		if bytes.Contains(p.payload, pattern) {
			t.Errorf("the ping payload crossed the underlay in clear: %s -> %s", p.src, p.dst)
		}
		if p.proto == unix.IPPROTO_UDP && (p.dstPort == wireguard.DefaultListenPort || p.srcPort == wireguard.DefaultListenPort ||
			p.dstPort == wireguard.DefaultListenPortV6 || p.srcPort == wireguard.DefaultListenPortV6) {
			udp++
		}
	}
	t.Logf("underlay of %s: %d WireGuard UDP packets, %d plaintext pod packets", h1.host.Name, udp, plain)
	assert.Positive(t, udp)

	// Per-peer counters.
	stats, err := h1.mgr[ipfamily.IPv4].PeerStats(ctx)
	require.NoError(t, err)
	require.Len(t, stats, 2)
	for _, s := range stats {
		assert.False(t, s.LastHandshake.IsZero(), "%s", s.Node)
		assert.Positive(t, s.TransmitBytes)
		assert.Positive(t, s.ReceiveBytes)
	}
	assert.Equal(t, []string{h2.host.Name, h3.host.Name}, []string{stats[0].Node, stats[1].Node})
}

func TestKernelUserspacePeerRemovalDuplicateKeysAndRotation(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	c := newWGCluster(t, 3)
	h1, h2, h3 := c.nodes[0], c.nodes[1], c.nodes[2]
	v4 := ipfamily.IPv4
	p1 := pod(h1).NS
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h2).IPv4))
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h3).IPv4))

	// A removed peer's traffic stops; the others' goes on.
	h1.mgr[v4].OnUpdate(cluster.NodeRemove{Name: h3.host.Name})
	h1.apply(v4)
	kerneltest.Eventually(t, 10*time.Second, kerneltest.Not(kerneltest.PingCheck(p1, pod(h3).IPv4)))
	kerneltest.Require(t, kerneltest.PingCheck(p1, pod(h2).IPv4))
	peers, _ := deviceViaControlSocket(t, h1.names[v4])
	assert.Equal(t, 1, peers)
	send(h1.mgr[v4], h3.update(v4))
	h1.apply(v4)
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h3).IPv4))

	// Two nodes claim one key: neither is a peer.
	dup := h2.update(v4)
	dup.PublicKey = h3.publicKey(v4)
	send(h1.mgr[v4], dup)
	h1.apply(v4)
	st := h1.mgr[v4].Status()
	require.Len(t, st.Conflicts, 1)
	assert.Equal(t, []string{h2.host.Name, h3.host.Name}, st.Conflicts[0].Nodes)
	peers, _ = deviceViaControlSocket(t, h1.names[v4])
	assert.Zero(t, peers)
	kerneltest.Eventually(t, 10*time.Second, kerneltest.Not(kerneltest.PingCheck(p1, pod(h2).IPv4)))
	kerneltest.Eventually(t, 10*time.Second, kerneltest.Not(kerneltest.PingCheck(p1, pod(h3).IPv4)))
	send(h1.mgr[v4], h2.update(v4))
	h1.apply(v4)
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h2).IPv4))
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h3).IPv4))

	// Key rotation: a new key, published; once the others have it,
	// traffic flows again.
	old := h1.publicKey(v4)
	h1.mgr[v4].OnUpdate(wireguard.RotateKey{})
	h1.apply(v4)
	cur := h1.publicKey(v4)
	require.NotEqual(t, old, cur)
	for _, o := range []*wgNode{h2, h3} {
		send(o.mgr[v4], h1.update(v4))
		o.apply(v4)
	}
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(p1, pod(h2).IPv4))
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h3).NS, pod(h1).IPv4))
}

var replyRE = regexp.MustCompile(`(?m)^\d+ bytes from `)

// countingKernel counts the rule and route writes a Manager makes.
type countingKernel struct {
	*kernel.Namespace
	mu                          sync.Mutex
	ruleWrites, adds, deletions int
}

func (k *countingKernel) AddRule(ctx context.Context, r kernel.Rule) error {
	k.mu.Lock()
	k.ruleWrites++
	k.mu.Unlock()
	return k.Namespace.AddRule(ctx, r)
}

func (k *countingKernel) DeleteRule(ctx context.Context, r kernel.Rule) error {
	k.mu.Lock()
	k.ruleWrites++
	k.mu.Unlock()
	return k.Namespace.DeleteRule(ctx, r)
}

func (k *countingKernel) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	k.mu.Lock()
	for _, op := range ops {
		if op.Kind == kernel.OpDelete {
			k.deletions++
		} else {
			k.adds++
		}
	}
	k.mu.Unlock()
	return k.Namespace.ApplyRoutes(ctx, ops)
}

func TestKernelUserspaceRestartKeepsKeyAndPingSurvives(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	c := newWGCluster(t, 2)
	h1, h2 := c.nodes[0], c.nodes[1]
	v4 := ipfamily.IPv4
	kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h1).NS, pod(h2).IPv4))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ping, err := pod(h1).NS.Start(ctx, "ping", "-i", "0.2", "-W", "1", pod(h2).IPv4.String())
	require.NoError(t, err)
	defer func() { _ = ping.Stop() }()
	replies := func() int { return len(replyRE.FindAll(ping.Stdout(), -1)) }
	waitReplies := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for replies() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d ping replies, want %d; ping says:\n%s%s", replies(), n, ping.Stdout(), ping.Stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReplies(3)

	// The agent restarts: its userspace device goes with it and comes back;
	// the rule and throw routes stay; the key is the same, so the other
	// node needs no change.
	pub := h1.publicKey(v4)
	require.NoError(t, h1.mgr[v4].Close())
	h1.pub[v4] = wireguard.PublicKey{}
	ck := &countingKernel{Namespace: h1.k}
	o := h1.options(v4)
	o.Kernel = ck
	m, err := wireguard.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	h1.mgr[v4] = m
	for _, o := range c.nodes[1:] {
		send(m, o.update(v4))
	}
	h1.apply(v4)
	// Written: the device (it died with the old Manager) and the one route
	// through it; the rule was adopted as it was.
	assert.Equal(t, wireguard.ModeUserspace, m.Status().Mode)
	assert.Zero(t, ck.ruleWrites, "rule writes")
	assert.Equal(t, 1, ck.adds, "route writes")
	assert.Zero(t, ck.deletions, "route deletions")
	assert.Equal(t, pub, h1.publicKey(v4))
	assert.Equal(t, pub, h1.mgr[v4].Status().PublicKey)
	before := replies()
	waitReplies(before + 5)
	select {
	case <-ping.Done():
		t.Fatalf("ping ended: %s", ping.Stderr())
	default:
	}
	t.Logf("ping: %d replies before the restart, %d after", before, replies()-before)
}

func hexDecode(s string) ([]byte, error) {
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		for _, ch := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case ch >= '0' && ch <= '9':
				v |= byte(ch - '0')
			case ch >= 'a' && ch <= 'f':
				v |= byte(ch - 'a' + 10)
			}
		}
		b[i] = v
	}
	return b, nil
}

func TestKernelUserspaceHostToHostEncryption(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, Stack: kerneltest.IPv4Only})
	t.Cleanup(func() {
		leakcheck.NoGoroutines(t, 10*time.Second, "golang.zx2c4.com/wireguard/device.", "wireguard.(*userDevice)")
	})
	var mgrs []*wireguard.Manager
	pubs := make([]wireguard.PublicKey, 2)
	for i, h := range topo.Hosts {
		k, err := kernel.Open(h.NS.Path())
		require.NoError(t, err)
		t.Cleanup(func() { _ = k.Close() })
		m, err := wireguard.New(wireguard.Options{Family: ipfamily.IPv4, Kernel: k, InterfaceName: uniqueName(t), FirewallMark: kMark,
			Table: kTable, HostMTU: 1500, KeyFile: filepath.Join(t.TempDir(), "wg.key"), EncryptHostTraffic: true,
			OnPublicKey: func(pk wireguard.PublicKey) { pubs[i] = pk }})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		_, err = pass(m)
		require.NoError(t, err)
		mgrs = append(mgrs, m)
	}
	for i, m := range mgrs {
		o := topo.Hosts[1-i]
		send(m, testPeer{Node: o.Name, PublicKey: pubs[1-i], Endpoint: netip.AddrPortFrom(o.UnderlayIPv4.Addr(), 0)})
		_, err := pass(m)
		require.NoError(t, err)
	}
	v, err := topo.Hosts[0].NS.Sysctl("net.ipv4.conf.all.src_valid_mark")
	require.NoError(t, err)
	assert.Equal(t, "1", v)

	cap := startCapture(t, topo.Hosts[0].NS, kerneltest.UnderlayIf)
	pattern, _ := hexDecode(pingPattern)
	dst := topo.Hosts[1].UnderlayIPv4.Addr()
	kerneltest.Eventually(t, 15*time.Second, kerneltest.Check{Name: "host1 -> host2 underlay",
		Run: func(ctx context.Context) error { return pingWithPattern(ctx, topo.Hosts[0].NS, dst) }})
	cap.stop()
	udp := 0
	for _, p := range cap.packets() {
		if p.proto == unix.IPPROTO_ICMP {
			t.Errorf("host-to-host ICMP in clear: %s -> %s", p.src, p.dst)
		}
		if bytes.Contains(p.payload, pattern) {
			t.Errorf("the ping payload crossed the underlay in clear")
		}
		if p.proto == unix.IPPROTO_UDP && (p.dstPort == wireguard.DefaultListenPort || p.srcPort == wireguard.DefaultListenPort) {
			udp++
		}
	}
	assert.Positive(t, udp)
}

// TestKernelUserspaceFailClosed: the hosts' main tables also route the
// other hosts' pods via the underlay (a routed cluster). Host 1's agent
// stops: its userspace devices go, and with them their routes. Fail-closed
// (the default), the blackholes behind those routes remain, so host 1's
// pod's traffic to host 2's pod is dropped: captured on host 1's underlay,
// no packet of the pod flow leaves in plaintext. With FailOpen the same
// traffic does leave in plaintext (which shows the capture would see a
// leak). A restarted agent brings the tunnel back.
func TestKernelUserspaceFailClosed(t *testing.T) {
	kerneltest.RequireCommands(t, "ping")
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("FailOpen=%v", failOpen), func(t *testing.T) {
			c := newWGClusterTuned(t, 2, func(o *wireguard.Options) { o.FailOpen = failOpen })
			require.NoError(t, c.topo.AddPodRoutesViaUnderlay())
			h1, h2 := c.nodes[0], c.nodes[1]
			ctx := context.Background()
			for _, a := range pod(h2).Addrs() {
				kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h1).NS, a))
			}

			// The agent stops; its devices go.
			h1.stopAgent(t)
			for _, f := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
				holes := 0
				require.NoError(t, h1.k.DumpRoutes(ctx, f, kTable, func(r *kernel.Route) error {
					if r.Type == kernel.RTNBlackhole && r.Priority == wireguard.FailClosedMetric {
						holes++
					}
					return nil
				}, func() { holes = 0 }))
				if failOpen {
					assert.Zero(t, holes, "%v: FailOpen: no blackholes", f)
				} else {
					assert.Equal(t, 1, holes, "%v: the blackhole behind host 2's pod CIDR stays", f)
				}
			}

			cap := startCapture(t, h1.host.NS, kerneltest.UnderlayIf)
			pattern, _ := hexDecode(pingPattern)
			for _, a := range pod(h2).Addrs() {
				err := pingWithPattern(ctx, pod(h1).NS, a)
				assert.Error(t, err, "%s: no reply with host 1's device gone", a)
			}
			cap.stop()
			plain := 0
			for _, p := range cap.packets() {
				if isPodAddr(p.src) || isPodAddr(p.dst) || bytes.Contains(p.payload, pattern) {
					plain++
				}
			}
			if failOpen {
				t.Logf("FailOpen: %d plaintext pod packets left host 1", plain)
				assert.Positive(t, plain, "FailOpen: the pod traffic takes the main table in plaintext")
				return
			}
			assert.Zero(t, plain, "fail-closed: no plaintext pod packet leaves host 1")

			// The agent comes back: the tunnel carries the traffic again.
			for _, f := range ipfamily.All {
				h1.start(f)
				for _, o := range c.nodes[1:] {
					send(h1.mgr[f], o.update(f))
				}
				h1.apply(f)
			}
			for _, a := range pod(h2).Addrs() {
				kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h1).NS, a))
			}
		})
	}
}

// TestKernelFailClosedLetsEndpointsOut: host 2 also carries a block so
// wide it covers the underlay (a misconfigured cluster). Fail-closed, that
// block keeps its blackhole, and a throw lets each node's endpoint address
// out of it: with host 1's devices gone, host 1 still reaches host 2's
// underlay address, while host 2's pod and the rest of the wide block are
// closed.
func TestKernelFailClosedLetsEndpointsOut(t *testing.T) {
	kerneltest.RequireCommands(t, "ping", "ip")
	c := newWGClusterTuned(t, 2, nil)
	h1, h2 := c.nodes[0], c.nodes[1]
	ctx := context.Background()
	wide := map[ipfamily.Family]netip.Prefix{ipfamily.IPv4: h2.host.UnderlayIPv4.Masked(), ipfamily.IPv6: h2.host.UnderlayIPv6.Masked()}
	for _, f := range ipfamily.All {
		u := h2.update(f)
		u.CIDRs = append(u.CIDRs, wide[f])
		send(h1.mgr[f], u)
		h1.apply(f)
	}
	for _, a := range pod(h2).Addrs() {
		kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(pod(h1).NS, a))
	}
	for _, a := range []netip.Addr{h2.host.UnderlayIPv4.Addr(), h2.host.UnderlayIPv6.Addr()} {
		kerneltest.Eventually(t, 15*time.Second, kerneltest.PingCheck(h1.host.NS, a))
	}
	h1.stopAgent(t)
	for _, f := range ipfamily.All {
		ep := h2.host.UnderlayIPv4.Addr()
		if f == ipfamily.IPv6 {
			ep = h2.host.UnderlayIPv6.Addr()
		}
		kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(h1.host.NS, ep)) // host 2's endpoint stays reachable
		// An address of the wide block that is no endpoint meets the blackhole.
		other := wide[f].Addr().Next().Next().Next()
		for other == ep || other == h1.host.UnderlayIPv4.Addr() || other == h1.host.UnderlayIPv6.Addr() {
			other = other.Next()
		}
		out, err := h1.host.NS.Exec(ctx, "ip", "route", "get", other.String())
		assert.Error(t, err, "%v: %s is in the blackholed wide block: %s", f, other, out)
	}
	for _, a := range pod(h2).Addrs() {
		assert.Error(t, pingWithPattern(ctx, pod(h1).NS, a), "%s: no reply with host 1's device gone", a)
	}
}

// stopAgent closes n's Managers, as its agent stopping does, and waits
// until their userspace devices are gone.
func (n *wgNode) stopAgent(t *testing.T) {
	t.Helper()
	for _, f := range ipfamily.All {
		require.NoError(t, n.mgr[f].Close())
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := n.k.LinkByName(context.Background(), n.names[f])
			if errors.Is(err, kernel.ErrNotFound) {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s still there: %v", n.names[f], err)
			time.Sleep(20 * time.Millisecond)
		}
	}
}
