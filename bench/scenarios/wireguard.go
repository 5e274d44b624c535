//go:build linux

package scenarios

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/benchutil"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/wireguard"
)

// The wireguard scenarios run the userspace device (this machine's kernel
// has no WireGuard module), each trial in a fresh namespace with a device
// of its own name, its control socket in /var/run/wireguard.
//
//   - wireguard/peers-initial/N: N nodes' keys, endpoints and pod CIDRs
//     reach a Manager whose device exists with no peers: ours is
//     OnUpdate for each, then one Apply (the peers in chunks of
//     wireguard.DefaultPeerChunk, plus N routes in the table and the
//     rule). The floor is one wgctrl ConfigureDevice with all N peers,
//     through the control socket; a second floor reaches the same state as
//     ours by hand (that call, the N routes in one netlink batch, the
//     rule); the peer is one `wg set` exec per peer (capped at 1k).
//   - wireguard/change-one/N: with N peers configured and in sync, one
//     node's CIDRs change: ours writes that peer alone (and its route).
//     The floor is one ConfigureDevice of that peer; the peer is the
//     naive replace-all (ReplacePeers with all N), which blips every
//     tunnel. Compare ours across sizes.
//   - wireguard/heap/N: the heap a Manager keeps per peer once N peers are
//     applied: its intent alone (after OnUpdate), and everything (intent,
//     device view, route table and the userspace device's own peers).
//   - wireguard/tcp-throughput/MB: one TCP stream of MB megabytes between
//     two namespaces, through the userspace tunnel (ours) and over the
//     plain veth under it (floor), so users know what the fallback costs;
//     "MB/s" is reported.
//
// A userspace device lives in this process and the harness has no
// teardown, so what a trial leaves (devices, Managers, the second
// namespace) is closed at the next wireguard Setup, unmeasured, and by
// the last one's process exit.
func init() {
	harness.Register(wgInitial(100), wgInitial(1_000), wgChangeOne(10), wgChangeOne(1_000), wgHeap(1_000), wgThroughput(256))
}

var (
	// wgLeft is what the wireguard trials left open, closed by the next
	// wgCleanup.
	wgLeft    closers
	wgCounter atomic.Int32
)

// wgCleanup closes what earlier trials left, newest first, then gives the
// kernel time to free their namespaces: it does that asynchronously, under
// the rtnl lock that every route and link write of the next trial takes.
func wgCleanup() {
	wgSweepOnce.Do(wgSweep)
	wgLeft.run()
	time.Sleep(300 * time.Millisecond)
}

// wgOpen cleans up after earlier trials (wgCleanup) and opens the trial's
// namespace.
func wgOpen(env *harness.Env) (*kernel.Namespace, error) {
	wgCleanup()
	return kernel.Open(env.NS.Path())
}

// wgOptions are a userspace Manager's options on k, its key in keyFile.
func wgOptions(k *kernel.Namespace, keyFile string) wireguard.Options {
	return wireguard.Options{Family: ipfamily.IPv4, Kernel: k, InterfaceName: wgName(), FirewallMark: wgMark,
		Table: wgTable, HostMTU: 1500, KeyFile: keyFile, Mode: wireguard.ModeUserspace}
}

var wgSweepOnce sync.Once

// wgSweep removes the control sockets that earlier bench processes left
// (their last trial's devices lived until the process exited): only this
// command's names, wgb<pid>-<n>, and only when that process is gone.
func wgSweep() {
	paths, _ := filepath.Glob("/var/run/wireguard/wgb*-*.sock")
	for _, p := range paths {
		pid, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(filepath.Base(p), "-", 2)[0], "wgb"))
		if err != nil || pid == os.Getpid()%100000 {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			continue // still running (or a wrapped pid that is: keep it)
		}
		_ = os.Remove(p)
	}
}

func wgName() string { return fmt.Sprintf("wgb%d-%d", os.Getpid()%100000, wgCounter.Add(1)) }

const (
	wgTable = 100
	wgMark  = 0x100000
)

// wgPeer is what the control plane says of one node, for the benchmark:
// sendTo gives it to a Manager as a cluster.Node and a cluster.Block per
// CIDR. The endpoint's port is the Manager's ListenPort.
type wgPeer struct {
	Node      string
	PublicKey wireguard.PublicKey
	Endpoint  netip.AddrPort
	CIDRs     []netip.Prefix
}

func (p wgPeer) sendTo(m *wireguard.Manager) {
	m.OnUpdate(cluster.Node{Name: p.Node, UnderlayV4: p.Endpoint.Addr(), WireGuardKeyV4: cluster.WireGuardKey(p.PublicKey)})
	for _, c := range p.CIDRs {
		m.OnUpdate(cluster.Block{CIDR: c, Node: p.Node})
	}
}

// wgNodes returns n nodes with random keys, each with a /24 and an endpoint.
func wgNodes(n int) []wgPeer {
	out := make([]wgPeer, n)
	for i := range out {
		var k wireguard.PublicKey
		_, _ = rand.Read(k[:])
		out[i] = wgPeer{
			Node: "node-" + strconv.Itoa(i), PublicKey: k,
			Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 51820),
			CIDRs:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)},
		}
	}
	return out
}

func wgPeerConfig(u wgPeer) wgtypes.PeerConfig {
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(u.PublicKey), Endpoint: net.UDPAddrFromAddrPort(u.Endpoint), ReplaceAllowedIPs: true}
	for _, c := range u.CIDRs {
		pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: c.Addr().AsSlice(), Mask: net.CIDRMask(c.Bits(), 32)})
	}
	return pc
}

// wgPeerConfigs returns the peers' configs.
func wgPeerConfigs(peers []wgPeer) []wgtypes.PeerConfig {
	var out []wgtypes.PeerConfig
	for _, u := range peers {
		out = append(out, wgPeerConfig(u))
	}
	return out
}

// wgManagerState is ours' state: a Manager on the trial's namespace.
type wgManagerState struct {
	k     *kernel.Namespace
	m     *wireguard.Manager
	nodes []wgPeer
}

// wgManager opens the trial's namespace and applies a Manager with the
// given nodes.
func wgManager(ctx context.Context, env *harness.Env, nodes []wgPeer) (*wgManagerState, error) {
	k, err := wgOpen(env)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "wgbench")
	if err != nil {
		k.Close()
		return nil, err
	}
	m, err := wireguard.New(wgOptions(k, dir+"/wg.key"))
	if err != nil {
		k.Close()
		return nil, err
	}
	wgLeft.add(func() { m.Close(); k.Close(); os.RemoveAll(dir) })
	for _, u := range nodes {
		u.sendTo(m)
	}
	if err := wgApply(ctx, m); err != nil {
		return nil, err
	}
	return &wgManagerState{k: k, m: m, nodes: nodes}, nil
}

// wgManagerSetup is ours' Setup: a Manager applied with nodes.
func wgManagerSetup(nodes []wgPeer) setupFunc {
	return keep(func(ctx context.Context, env *harness.Env) (*wgManagerState, error) {
		return wgManager(ctx, env, nodes)
	})
}

// wgApply applies m as a loop's pass does: its drivers in the order of
// their phases, then their ApplyDeletions.
func wgApply(ctx context.Context, m *wireguard.Manager) error {
	if err := m.CompleteDeferredWork(ctx); err != nil {
		return err
	}
	for _, d := range m.Drivers() {
		if _, err := d.Apply(ctx); err != nil {
			return err
		}
	}
	for _, d := range m.Drivers() {
		if da, ok := d.(dataplane.DeletionApplier); ok {
			if _, err := da.ApplyDeletions(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// wgDeviceState is the floor's and peer's state: a bare userspace device
// serving its control socket, and a wgctrl client.
type wgDeviceState struct {
	name   string
	client *wgctrl.Client
	k      *kernel.Namespace
	index  int
}

// wgDevice makes a userspace device with a key and port, up, and opens a
// wgctrl client; peers, if any, are configured in one call.
func wgDevice(ctx context.Context, env *harness.Env, peers []wgPeer) (*wgDeviceState, error) {
	k, err := wgOpen(env)
	if err != nil {
		return nil, err
	}
	name := wgName()
	dev, err := wireguard.NewUserspaceProvider(wireguard.UserspaceProviderOptions{Links: k, Doer: k}).Open(ctx, wireguard.DeviceSpec{Name: name, MTU: 1440})
	if err != nil {
		k.Close()
		return nil, err
	}
	var client *wgctrl.Client
	wgLeft.add(func() {
		if client != nil {
			client.Close()
		}
		dev.Close()
		k.Close()
	})
	priv, err := wireguard.GeneratePrivateKey()
	if err != nil {
		return nil, err
	}
	port, mark := 51820, uint32(wgMark)
	if err := dev.Configure(ctx, wireguard.DeviceConfig{PrivateKey: &priv, ListenPort: &port, FirewallMark: &mark}); err != nil {
		return nil, err
	}
	l, err := k.LinkByName(ctx, name)
	if err == nil {
		err = k.SetLinkUp(ctx, l.Index, true)
	}
	if err != nil {
		return nil, err
	}
	if err := env.NS.Do(func() (err error) { client, err = wgctrl.New(); return err }); err != nil {
		return nil, err
	}
	st := &wgDeviceState{name: name, client: client, k: k, index: l.Index}
	if len(peers) > 0 {
		if err := client.ConfigureDevice(name, wgtypes.Config{Peers: wgPeerConfigs(peers)}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// wgDeviceSetup is the floors' and peers' Setup: a device with peers.
func wgDeviceSetup(peers []wgPeer) setupFunc {
	return keep(func(ctx context.Context, env *harness.Env) (*wgDeviceState, error) { return wgDevice(ctx, env, peers) })
}

var wgToolsOnce sync.Once
var wgToolsErr error

// wgTools makes sure `wg` is there, installing wireguard-tools without its
// recommendations (which would pull a kernel image) when it is missing.
func wgTools() error {
	wgToolsOnce.Do(func() {
		if _, err := exec.LookPath("wg"); err == nil {
			return
		}
		out, err := exec.Command("sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wireguard-tools || "+
			"(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wireguard-tools)").CombinedOutput()
		if err != nil {
			wgToolsErr = fmt.Errorf("installing wireguard-tools: %w: %s", err, out)
		}
	})
	return wgToolsErr
}

func wgInitial(n int) harness.Scenario {
	nodes := wgNodes(n)
	variants := []harness.Variant{
		{
			Name: "nodeplane wireguard", Role: harness.Ours,
			Setup: wgManagerSetup(nil),
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*wgManagerState)
				for _, u := range nodes {
					u.sendTo(st.m)
				}
				if err := wgApply(ctx, st.m); err != nil {
					return err
				}
				if p := st.m.Status().Peers; p != n {
					return fmt.Errorf("%d peers, want %d", p, n)
				}
				return nil
			},
		},
		{
			Name: "wgctrl ConfigureDevice (all peers, one call)", Role: harness.Floor,
			Setup: wgDeviceSetup(nil),
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*wgDeviceState)
				return st.client.ConfigureDevice(st.name, wgtypes.Config{Peers: wgPeerConfigs(nodes)})
			},
		},
	}
	variants = append(variants, harness.Variant{
		Name: "ConfigureDevice + routes in one netlink batch + rule", Role: harness.Floor,
		Setup: wgDeviceSetup(nil),
		Run: func(ctx context.Context, env *harness.Env) error {
			st := env.State.(*wgDeviceState)
			cfg := wgtypes.Config{}
			ops := make([]kernel.RouteOp, 0, len(nodes))
			for _, u := range nodes {
				cfg.Peers = append(cfg.Peers, wgPeerConfig(u))
				ops = append(ops, kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Table: wgTable,
					Dst: u.CIDRs[0], Type: kernel.RTNUnicast, Protocol: 0x4e, Scope: kernel.ScopeLink, OIF: st.index}})
			}
			if err := st.client.ConfigureDevice(st.name, cfg); err != nil {
				return err
			}
			if err := errors.Join(st.k.ApplyRoutes(ctx, ops)...); err != nil {
				return err
			}
			return st.k.AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: wireguard.DefaultRulePriority, Action: kernel.RuleLookup,
				Table: wgTable, Invert: true, Mark: wgMark, Mask: wgMark})
		},
	})
	note := "ours also writes N routes to its table and the rule: the first floor only configures the device (the issue's floor), the second reaches the same state by hand"
	if n <= 1_000 {
		variants = append(variants, harness.Variant{
			Name: "wg set per peer (exec)", Role: harness.Peer,
			Setup: func(ctx context.Context, env *harness.Env) error {
				if err := wgTools(); err != nil {
					return err
				}
				return wgDeviceSetup(nil)(ctx, env)
			},
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*wgDeviceState)
				for _, u := range nodes {
					if _, err := env.NS.Exec(ctx, "wg", "set", st.name, "peer", u.PublicKey.String(), "endpoint", u.Endpoint.String(),
						"allowed-ips", u.CIDRs[0].String()); err != nil {
						return err
					}
				}
				return nil
			},
		})
	}
	return harness.Scenario{Name: "wireguard/peers-initial/" + strconv.Itoa(n), Size: n, Note: note, Variants: variants}
}

func wgChangeOne(n int) harness.Scenario {
	nodes := wgNodes(n)
	changed := nodes[n/2]
	changed.CIDRs = append(append([]netip.Prefix(nil), changed.CIDRs...), netip.MustParsePrefix("10.250.0.0/24"))
	return harness.Scenario{
		Name: "wireguard/change-one/" + strconv.Itoa(n), Size: n,
		Note: "one node's CIDRs change with N peers in sync; ours also replaces its route",
		Variants: []harness.Variant{
			{
				Name: "nodeplane wireguard", Role: harness.Ours,
				Setup: wgManagerSetup(nodes),
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*wgManagerState)
					changed.sendTo(st.m)
					return wgApply(ctx, st.m)
				},
			},
			{
				Name: "wgctrl ConfigureDevice (the changed peer)", Role: harness.Floor,
				Setup: wgDeviceSetup(nodes),
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*wgDeviceState)
					pc := wgPeerConfig(changed)
					pc.UpdateOnly = true
					return st.client.ConfigureDevice(st.name, wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}})
				},
			},
			{
				Name: "wgctrl ReplacePeers (all peers)", Role: harness.Peer,
				Setup: wgDeviceSetup(nodes),
				Run: func(ctx context.Context, env *harness.Env) error {
					st := env.State.(*wgDeviceState)
					cfg := wgtypes.Config{ReplacePeers: true}
					for i, u := range nodes {
						if i == n/2 {
							u = changed
						}
						cfg.Peers = append(cfg.Peers, wgPeerConfig(u))
					}
					return st.client.ConfigureDevice(st.name, cfg)
				},
			},
		},
	}
}

func wgHeap(n int) harness.Scenario {
	nodes := wgNodes(n)
	return harness.Scenario{
		Name: "wireguard/heap/" + strconv.Itoa(n), Size: n,
		Note: "heap per peer: the Manager's intent, and all of it with the userspace device's own peers",
		Variants: []harness.Variant{{
			Name: "nodeplane wireguard", Role: harness.Ours,
			Setup: wgManagerSetup(nil),
			Run: func(ctx context.Context, env *harness.Env) error {
				st := env.State.(*wgManagerState)
				h0 := benchutil.HeapInUse()
				for _, u := range nodes {
					u.sendTo(st.m)
				}
				h1 := benchutil.HeapInUse()
				if err := wgApply(ctx, st.m); err != nil {
					return err
				}
				h2 := benchutil.HeapInUse()
				env.Report("intent B/peer", float64(h1-h0)/float64(n))
				env.Report("total B/peer", float64(h2-h0)/float64(n))
				return nil
			},
		}},
	}
}

// wgPair is the throughput scenario's state: the trial's namespace (a) and
// a second one (b), joined by a veth, with the server's address in b.
type wgPair struct {
	a, b     *kerneltest.NS
	src, dst netip.Addr
	received chan int64
	ln       net.Listener
}

const wgPortTCP = 5201

// wgSetupPair joins the trial's namespace to a new one with a veth
// (198.18.0.1/24 – 198.18.0.2/24); with tunnel, each side also runs a
// Manager and owns a /32 on lo (10.99.1.1, 10.99.2.1) that the other
// routes through the tunnel.
func wgSetupPair(ctx context.Context, env *harness.Env, tunnel bool) (*wgPair, error) {
	wgCleanup()
	b, err := kerneltest.Open()
	if err != nil {
		return nil, err
	}
	wgLeft.add(func() { b.Close() })
	ka, err := kernel.Open(env.NS.Path())
	if err != nil {
		return nil, err
	}
	wgLeft.add(func() { ka.Close() })
	kb, err := kernel.Open(b.Path())
	if err != nil {
		return nil, err
	}
	wgLeft.add(func() { kb.Close() })
	if _, err := ka.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "eth0", PeerNamespaceFD: kb.FD()}}); err != nil {
		return nil, err
	}
	under := [2]netip.Prefix{netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("198.18.0.2/24")}
	loops := [2]netip.Prefix{netip.MustParsePrefix("10.99.1.1/32"), netip.MustParsePrefix("10.99.2.1/32")}
	for i, k := range []*kernel.Namespace{ka, kb} {
		l, err := k.LinkByName(ctx, "eth0")
		if err != nil {
			return nil, err
		}
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: under[i]}); err != nil {
			return nil, err
		}
		if err := k.SetLinkUp(ctx, l.Index, true); err != nil {
			return nil, err
		}
		if tunnel {
			lo, err := k.LinkByName(ctx, "lo")
			if err != nil {
				return nil, err
			}
			if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: lo.Index, Prefix: loops[i]}); err != nil {
				return nil, err
			}
		}
	}
	p := &wgPair{a: env.NS, b: b, src: under[0].Addr(), dst: under[1].Addr(), received: make(chan int64, 1)}
	if tunnel {
		p.src, p.dst = loops[0].Addr(), loops[1].Addr()
		dir, err := os.MkdirTemp("", "wgbench")
		if err != nil {
			return nil, err
		}
		wgLeft.add(func() { os.RemoveAll(dir) })
		var ms [2]*wireguard.Manager
		var pubs [2]wireguard.PublicKey
		for i, k := range []*kernel.Namespace{ka, kb} {
			o := wgOptions(k, fmt.Sprintf("%s/%d.key", dir, i))
			o.OnPublicKey = func(pk wireguard.PublicKey) { pubs[i] = pk }
			m, err := wireguard.New(o)
			if err != nil {
				return nil, err
			}
			wgLeft.add(func() { m.Close() })
			if err := wgApply(ctx, m); err != nil {
				return nil, err
			}
			ms[i] = m
		}
		for i, m := range ms {
			o := 1 - i
			wgPeer{Node: "n" + strconv.Itoa(o), PublicKey: pubs[o], Endpoint: netip.AddrPortFrom(under[o].Addr(), 0),
				CIDRs: []netip.Prefix{loops[o].Masked()}}.sendTo(m)
			if err := wgApply(ctx, m); err != nil {
				return nil, err
			}
		}
	}
	// The server: accept one connection, count what it reads, answer one
	// byte at EOF.
	if err := b.Do(func() (err error) {
		p.ln, err = net.Listen("tcp4", netip.AddrPortFrom(p.dst, wgPortTCP).String())
		return err
	}); err != nil {
		return nil, err
	}
	wgLeft.add(func() { p.ln.Close() })
	go func() {
		c, err := p.ln.Accept()
		if err != nil {
			p.received <- -1
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		_, _ = c.Write([]byte{1})
		p.received <- n
	}()
	// Warm up the path (neighbour resolution, the tunnel's handshake).
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := env.NS.Do(func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.src.AsSlice()}, Timeout: time.Second}
			c, err := d.DialContext(ctx, "tcp4", netip.AddrPortFrom(p.dst, 9).String())
			if c != nil {
				c.Close()
			}
			return err
		})
		if errors.Is(err, syscall.ECONNREFUSED) || err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("path %s -> %s never came up: %w", p.src, p.dst, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p, nil
}

// send streams mb megabytes from a to b over one TCP connection.
func (p *wgPair) send(ctx context.Context, env *harness.Env, mb int) error {
	var c net.Conn
	if err := p.a.Do(func() (err error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: p.src.AsSlice()}, Timeout: 5 * time.Second}
		c, err = d.DialContext(ctx, "tcp4", netip.AddrPortFrom(p.dst, wgPortTCP).String())
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 128<<10)
	_, _ = rand.Read(buf)
	t0 := time.Now()
	total := int64(mb) << 20
	for sent := int64(0); sent < total; sent += int64(len(buf)) {
		if _, err := c.Write(buf); err != nil {
			return err
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return err
	}
	if got := <-p.received; got != total {
		return fmt.Errorf("server read %d bytes, want %d", got, total)
	}
	env.Report("MB/s", float64(mb)/time.Since(t0).Seconds())
	return nil
}

func wgThroughput(mb int) harness.Scenario {
	// stream sends mb megabytes over a pair set up with or without the
	// tunnel.
	stream := func(name string, role harness.Role, tunnel bool) harness.Variant {
		return harness.Variant{
			Name: name, Role: role,
			Setup: keep(func(ctx context.Context, env *harness.Env) (*wgPair, error) { return wgSetupPair(ctx, env, tunnel) }),
			Run:   func(ctx context.Context, env *harness.Env) error { return env.State.(*wgPair).send(ctx, env, mb) },
		}
	}
	return harness.Scenario{
		Name: "wireguard/tcp-throughput/" + strconv.Itoa(mb), Size: mb,
		Note:     "one TCP stream of N MB between two namespaces; ratio = what the userspace tunnel costs against the bare veth",
		Variants: []harness.Variant{stream("userspace WireGuard tunnel", harness.Ours, true), stream("plain veth", harness.Floor, false)},
	}
}
