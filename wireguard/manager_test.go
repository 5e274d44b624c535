package wireguard_test

import (
	"bytes"
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

const (
	testTable = 7
	testMark  = 0x100000
)

var pfx = netip.MustParsePrefix

// env is one fake node: a namespace, its userspace WireGuard and a key
// file.
type env struct {
	t       *testing.T
	ns      *kernelfake.Namespace
	k       *wgLog // ns, as the Manager is given it
	us      *wireguardfake.Userspace
	keyFile string
	mu      sync.Mutex
	pubs    []wireguard.PublicKey
}

// wgLog is a namespace that logs the WireGuard configurations written.
type wgLog struct {
	*kernelfake.Namespace
	mu  sync.Mutex
	log []kernel.WireGuardConfig
}

func (k *wgLog) ConfigureWireGuard(ctx context.Context, name string, cfg kernel.WireGuardConfig) error {
	err := k.Namespace.ConfigureWireGuard(ctx, name, cfg)
	if err == nil {
		k.mu.Lock()
		k.log = append(k.log, cfg)
		k.mu.Unlock()
	}
	return err
}

// Log returns the configurations written, in order.
func (k *wgLog) Log() []kernel.WireGuardConfig {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.log)
}

// ResetLog forgets them.
func (k *wgLog) ResetLog() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = nil
}

// newEnv makes a fake node; withKernelWG gives its kernel the wireguard
// link kind (else only the userspace provider works, as on this project's
// machines).
func newEnv(t *testing.T, withKernelWG bool) *env {
	kinds := kernelfake.DefaultKinds()
	if withKernelWG {
		kinds = append(kinds, kernel.KindWireGuard)
	}
	ns := kernelfake.New(kernelfake.Options{Kinds: kinds})
	return &env{t: t, ns: ns, k: &wgLog{Namespace: ns}, us: wireguardfake.New(ns), keyFile: filepath.Join(t.TempDir(), "wg.key")}
}

// state reads the kernel device called name (behind the Manager's back),
// and false if there is none.
func (e *env) state(name string) (wireguard.DeviceState, bool) {
	e.t.Helper()
	if l, ok := e.ns.Link(name); !ok || l.Kind != kernel.KindWireGuard {
		return wireguard.DeviceState{}, false
	}
	admin := e.ns.Admin()
	dev, err := wireguard.NewKernelProvider(wireguard.KernelProviderOptions{Links: admin, WireGuard: admin}).
		Open(context.Background(), wireguard.DeviceSpec{Name: name})
	require.NoError(e.t, err)
	st, err := dev.State(context.Background())
	require.NoError(e.t, err)
	return st, true
}

func (e *env) options(family ipfamily.Family) wireguard.Options {
	return wireguard.Options{
		Family: family, Kernel: e.k, FirewallMark: testMark, Table: testTable, HostMTU: 1500, KeyFile: e.keyFile,
		UserspaceProvider: e.us.Provider(),
		OnPublicKey: func(k wireguard.PublicKey) {
			e.mu.Lock()
			e.pubs = append(e.pubs, k)
			e.mu.Unlock()
		},
		NodeName: "self",
	}
}

func (e *env) manager(o wireguard.Options) *wireguard.Manager {
	m, err := wireguard.New(o)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = m.Close() })
	return m
}

func (e *env) apply(m *wireguard.Manager) {
	e.t.Helper()
	_, err := pass(m)
	require.NoError(e.t, err, "%s", e.ns.Dump())
}

func pubKey(t *testing.T) wireguard.PublicKey {
	k, err := wireguard.GeneratePrivateKey()
	require.NoError(t, err)
	return k.Public()
}

// testPeer is what the control plane says of a node, in the fields a test
// changes: it becomes a cluster.Node and a cluster.Block per CIDR.
type testPeer struct {
	Node       string
	PublicKey  wireguard.PublicKey
	Endpoint   netip.AddrPort // its address is the node's underlay address; the port is not sent
	CIDRs      []netip.Prefix
	TunnelAddr netip.Addr
}

// msgs returns p's messages: the node, then its blocks.
func (p testPeer) msgs() []any {
	// The key goes with the endpoint's family; a node without an endpoint
	// offers it in both.
	n := cluster.Node{Name: p.Node, WireGuardKeyV4: cluster.WireGuardKey(p.PublicKey), WireGuardKeyV6: cluster.WireGuardKey(p.PublicKey)}
	if a := p.Endpoint.Addr(); a.Is4() {
		n.UnderlayV4, n.WireGuardKeyV6 = a, cluster.WireGuardKey{}
	} else if a.Is6() {
		n.UnderlayV6, n.WireGuardKeyV4 = a, cluster.WireGuardKey{}
	}
	if p.TunnelAddr.Is4() {
		n.TunnelV4 = p.TunnelAddr
	} else if p.TunnelAddr.Is6() {
		n.TunnelV6 = p.TunnelAddr
	}
	out := []any{n}
	for _, c := range p.CIDRs {
		out = append(out, cluster.Block{CIDR: c, Node: p.Node})
	}
	return out
}

// send gives m p's messages.
func send(m interface{ OnUpdate(any) }, p testPeer) {
	for _, msg := range p.msgs() {
		m.OnUpdate(msg)
	}
}

func node(i int, key wireguard.PublicKey) testPeer {
	return testPeer{
		Node: "node" + string(rune('a'+i%26)) + itoa(i), PublicKey: key,
		Endpoint: netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 0),
		CIDRs:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)},
	}
}

func itoa(i int) string {
	s := ""
	for {
		s = string(rune('0'+i%10)) + s
		if i /= 10; i == 0 {
			return s
		}
	}
}

// routes returns the table's routes but the fail-closed blackholes
// (holes), by destination.
func (e *env) routes() map[netip.Prefix]uint8 {
	out := map[netip.Prefix]uint8{}
	for _, r := range e.ns.Routes(kernel.IPv4, testTable) {
		if r.Priority != wireguard.FailClosedMetric {
			out[r.Dst] = r.Type
		}
	}
	return out
}

// holes returns the destinations of the table's fail-closed blackholes.
func (e *env) holes(f kernel.Family) []netip.Prefix { return e.failClosed(f, kernel.RTNBlackhole) }

// escapes returns the destinations of the throws that let endpoint
// addresses out of the blackholes.
func (e *env) escapes(f kernel.Family) []netip.Prefix { return e.failClosed(f, kernel.RTNThrow) }

func (e *env) failClosed(f kernel.Family, typ uint8) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range e.ns.Routes(f, testTable) {
		if r.Priority == wireguard.FailClosedMetric {
			require.Contains(e.t, []uint8{kernel.RTNBlackhole, kernel.RTNThrow}, r.Type, "%v", r)
			if r.Type == typ {
				out = append(out, r.Dst)
			}
		}
	}
	return out
}

func (e *env) rules(family kernel.Family) []kernel.Rule {
	rs, err := e.ns.Admin().Rules(context.Background(), family)
	require.NoError(e.t, err)
	var out []kernel.Rule
	for _, r := range rs {
		if r.Table == testTable {
			out = append(out, r)
		}
	}
	return out
}

func TestManagerKernelProviderOnFakes(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	k1, k2 := pubKey(t), pubKey(t)
	send(m, node(1, k1))
	send(m, testPeer{Node: "b", PublicKey: k2, Endpoint: netip.MustParseAddrPort("198.18.0.9:0"),
		CIDRs: []netip.Prefix{pfx("10.9.0.0/24"), pfx("fd00::/64")}, TunnelAddr: netip.MustParseAddr("10.99.0.9")})
	e.apply(m)

	st := m.Status()
	assert.Equal(t, wireguard.ModeKernel, st.Mode)
	assert.Equal(t, "wg-np", st.Device)
	assert.Equal(t, 2, st.Peers)
	assert.True(t, st.RuleInstalled)

	l, ok := e.ns.Link("wg-np")
	require.True(t, ok)
	assert.Equal(t, kernel.KindWireGuard, l.Kind)
	assert.Equal(t, 1440, l.MTU)
	assert.True(t, l.AdminUp)

	// The key: made, kept 0600, published once, on the device.
	fi, err := os.Stat(e.keyFile)
	require.NoError(t, err)
	assert.Equal(t, wireguard.KeyFileMode, fi.Mode().Perm())
	priv, err := wireguard.ReadKeyFile(e.keyFile)
	require.NoError(t, err)
	assert.Equal(t, []wireguard.PublicKey{priv.Public()}, e.pubs)
	assert.Equal(t, priv.Public(), st.PublicKey)
	dev, ok := e.state("wg-np")
	require.True(t, ok)
	assert.Equal(t, priv, dev.PrivateKey)
	assert.Equal(t, wireguard.DefaultListenPort, dev.ListenPort)
	assert.Equal(t, uint32(testMark), dev.FirewallMark)
	require.Len(t, dev.Peers, 2)
	for _, p := range dev.Peers {
		if p.PublicKey == k2 {
			assert.Equal(t, netip.MustParseAddrPort("198.18.0.9:51820"), p.Endpoint)
			assert.ElementsMatch(t, []netip.Prefix{pfx("10.9.0.0/24"), pfx("10.99.0.9/32")}, p.AllowedIPs)
		} else {
			assert.Equal(t, netip.MustParseAddrPort("198.18.0.1:51820"), p.Endpoint)
		}
	}
	assert.Equal(t, map[netip.Prefix]uint8{pfx("10.0.1.0/24"): kernel.RTNUnicast, pfx("10.9.0.0/24"): kernel.RTNUnicast,
		pfx("10.99.0.9/32"): kernel.RTNUnicast}, e.routes())
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.9.0.0/24"), pfx("10.99.0.9/32")}, e.holes(kernel.IPv4),
		"fail-closed: a blackhole behind every route through the device")
	rs := e.rules(kernel.IPv4)
	require.Len(t, rs, 1)
	assert.Equal(t, kernel.Rule{Family: kernel.IPv4, Priority: wireguard.DefaultRulePriority, Action: kernel.RuleLookup,
		Table: testTable, Invert: true, Mark: testMark, Mask: testMark, Protocol: routerule.Protocol}, rs[0])

	// Nothing changed: nothing written, to the device or the kernel.
	e.k.ResetLog()
	e.ns.ResetCounts()
	e.apply(m)
	m.QueueResync()
	e.apply(m)
	assert.Empty(t, e.k.Log())
	assert.Zero(t, e.ns.Writes())
}

func TestManagerFallsBackToUserspaceAndSaysWhy(t *testing.T) {
	e := newEnv(t, false) // this project's machines: no wireguard module
	m := e.manager(e.options(ipfamily.IPv4))
	e.apply(m)
	st := m.Status()
	assert.Equal(t, wireguard.ModeUserspace, st.Mode)
	assert.Contains(t, st.ModeReason, "not supported")
	l, ok := e.ns.Link("wg-np")
	require.True(t, ok)
	assert.Equal(t, kernel.KindTUN, l.Kind)
	assert.Equal(t, kernel.LinkUp, l.State())

	// The userspace device lives as long as its Manager.
	require.NoError(t, m.Close())
	_, ok = e.ns.Link("wg-np")
	assert.False(t, ok)
	_, err := pass(m)
	assert.ErrorIs(t, err, wireguard.ErrClosed)
}

func TestManagerModeOverride(t *testing.T) {
	e := newEnv(t, true)
	o := e.options(ipfamily.IPv4)
	o.Mode = wireguard.ModeUserspace
	m := e.manager(o)
	e.apply(m)
	assert.Equal(t, wireguard.ModeUserspace, m.Status().Mode)

	e2 := newEnv(t, false)
	o = e2.options(ipfamily.IPv4)
	o.Mode = wireguard.ModeKernel
	m = e2.manager(o)
	_, err := pass(m)
	assert.ErrorIs(t, err, wireguard.ErrNotSupported)
	_, ok := e2.ns.Link("wg-np")
	assert.False(t, ok)
	assert.Empty(t, e2.rules(kernel.IPv4))
}

func TestManagerPeersAreDiffedAndChunked(t *testing.T) {
	e := newEnv(t, true)
	o := e.options(ipfamily.IPv4)
	o.PeerChunk = 100
	m := e.manager(o)
	keys := make([]wireguard.PublicKey, 250)
	for i := range keys {
		keys[i] = pubKey(t)
		send(m, node(i+1, keys[i]))
	}
	e.apply(m)
	var peerWrites []int
	for _, w := range e.k.Log() {
		assert.False(t, w.ReplacePeers)
		if len(w.Peers) > 0 {
			peerWrites = append(peerWrites, len(w.Peers))
		}
	}
	assert.Equal(t, []int{100, 100, 50}, peerWrites)

	// One node's CIDRs change: one write, one peer, only its allowed IPs.
	e.k.ResetLog()
	u := node(7, keys[6])
	u.CIDRs = append(u.CIDRs, pfx("10.200.0.0/16"))
	send(m, u)
	e.apply(m)
	log := e.k.Log()
	require.Len(t, log, 1)
	require.Len(t, log[0].Peers, 1)
	p := log[0].Peers[0]
	assert.Equal(t, kernel.WireGuardKey(keys[6]), p.PublicKey)
	assert.True(t, p.UpdateOnly && p.ReplaceAllowedIPs)
	assert.False(t, p.Endpoint.IsValid())
	assert.Contains(t, e.routes(), pfx("10.200.0.0/16"))

	// An endpoint moves: only the endpoint.
	e.k.ResetLog()
	u.Endpoint = netip.MustParseAddrPort("198.18.99.1:51820")
	send(m, u)
	e.apply(m)
	log = e.k.Log()
	require.Len(t, log, 1)
	require.Len(t, log[0].Peers, 1)
	assert.Equal(t, u.Endpoint, log[0].Peers[0].Endpoint)
	assert.Empty(t, log[0].Peers[0].AllowedIPs)

	// A node goes: one removal, its routes go.
	e.k.ResetLog()
	m.OnUpdate(cluster.NodeRemove{Name: u.Node})
	e.apply(m)
	log = e.k.Log()
	require.Len(t, log, 1)
	assert.Equal(t, []kernel.WireGuardPeerConfig{{PublicKey: kernel.WireGuardKey(keys[6]), Remove: true}}, log[0].Peers)
	assert.NotContains(t, e.routes(), pfx("10.200.0.0/16"))
	assert.Equal(t, 249, m.Status().Peers)
}

func TestManagerDuplicateKeysAndMissingKeysMakeNoPeer(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	shared, k3 := pubKey(t), pubKey(t)
	send(m, node(1, shared))
	send(m, node(2, shared))
	send(m, node(3, k3))
	send(m, node(4, wireguard.PublicKey{})) // no key yet
	noEndpoint := node(5, pubKey(t))
	noEndpoint.Endpoint = netip.AddrPort{}
	send(m, noEndpoint)
	e.apply(m)

	st := m.Status()
	assert.Equal(t, 1, st.Peers)
	assert.Equal(t, []string{node(1, shared).Node, node(2, shared).Node, node(4, shared).Node, noEndpoint.Node}, st.NotPeers)
	require.Len(t, st.Conflicts, 1)
	assert.Equal(t, shared, st.Conflicts[0].PublicKey)
	assert.Equal(t, []string{node(1, shared).Node, node(2, shared).Node}, st.Conflicts[0].Nodes)
	dev, _ := e.state("wg-np")
	require.Len(t, dev.Peers, 1)
	assert.Equal(t, k3, dev.Peers[0].PublicKey)
	// Not-peers' traffic falls back to the main table.
	assert.Equal(t, map[netip.Prefix]uint8{pfx("10.0.1.0/24"): kernel.RTNThrow, pfx("10.0.2.0/24"): kernel.RTNThrow,
		pfx("10.0.3.0/24"): kernel.RTNUnicast, pfx("10.0.4.0/24"): kernel.RTNThrow, pfx("10.0.5.0/24"): kernel.RTNThrow}, e.routes())
	assert.Equal(t, []netip.Prefix{pfx("10.0.3.0/24")}, e.holes(kernel.IPv4), "not-peers get no blackhole")

	// Our own key claimed by a node: that node gets no peer.
	priv, err := wireguard.ReadKeyFile(e.keyFile)
	require.NoError(t, err)
	send(m, node(6, priv.Public()))
	// The conflict resolves: node 2 gets a key of its own.
	send(m, node(2, pubKey(t)))
	e.apply(m)
	st = m.Status()
	assert.Equal(t, 3, st.Peers)
	require.Len(t, st.Conflicts, 1)
	assert.Equal(t, []string{"", node(6, shared).Node}, st.Conflicts[0].Nodes)
	assert.Equal(t, kernel.RTNUnicast, e.routes()[pfx("10.0.2.0/24")])
	assert.Equal(t, kernel.RTNThrow, e.routes()[pfx("10.0.6.0/24")])
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.0.2.0/24"), pfx("10.0.3.0/24")}, e.holes(kernel.IPv4))
}

func TestManagerAddsTheRuleOnlyOnceDeviceAndRoutesAreReady(t *testing.T) {
	e := newEnv(t, true)
	clk := clock.NewFake(testTime)
	o := e.options(ipfamily.IPv4)
	o.Clock = clk
	m := e.manager(o)
	send(m, node(1, pubKey(t)))

	// The device refuses its configuration: no routes, no rule.
	e.ns.Fail(kernelfake.OpConfigureWireGuard, 1, nil)
	_, err := pass(m)
	assert.ErrorIs(t, err, wireguard.ErrDevice)
	assert.Empty(t, e.routes())
	assert.Empty(t, e.rules(kernel.IPv4))

	// A route is refused: the others are written, the rule is not.
	e.ns.Fail(kernelfake.OpApplyRoutes, 1, nil)
	_, err = pass(m)
	require.Error(t, err)
	assert.Empty(t, e.rules(kernel.IPv4))

	// Everything ready (the route's retry is due): the rule comes.
	clk.Advance(time.Minute)
	e.apply(m)
	assert.Len(t, e.routes(), 1)
	assert.Len(t, e.rules(kernel.IPv4), 1)
}

// orderKernel records the order of the removals a disable makes.
type orderKernel struct {
	*wgLog
	mu  sync.Mutex
	ops []string
}

func (k *orderKernel) note(s string) {
	k.mu.Lock()
	k.ops = append(k.ops, s)
	k.mu.Unlock()
}

func (k *orderKernel) DeleteRule(ctx context.Context, r kernel.Rule) error {
	k.note("rule")
	return k.wgLog.DeleteRule(ctx, r)
}

func (k *orderKernel) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	for _, op := range ops {
		if op.Kind == kernel.OpDelete {
			k.note("route")
		}
	}
	return k.wgLog.ApplyRoutes(ctx, ops)
}

func (k *orderKernel) DeleteLink(ctx context.Context, index int) error {
	k.note("device")
	return k.wgLog.DeleteLink(ctx, index)
}

func TestManagerDisableRemovesRuleThenRoutesThenDevice(t *testing.T) {
	e := newEnv(t, true)
	ok := &orderKernel{wgLog: e.k}
	o := e.options(ipfamily.IPv4)
	o.Kernel = ok
	m := e.manager(o)
	send(m, node(1, pubKey(t)))
	send(m, node(2, wireguard.PublicKey{}))
	e.apply(m)
	require.Len(t, e.routes(), 2)
	require.Empty(t, ok.ops)

	m.OnUpdate(wireguard.SetEnabled{Enabled: false})
	e.apply(m)
	assert.Equal(t, []string{"rule", "route", "route", "route", "device"}, ok.ops, "the rule, the route, the throw and the blackhole, the device")
	assert.Empty(t, e.ns.Routes(kernel.IPv4, testTable), "routes, throws and blackholes")
	assert.Empty(t, e.rules(kernel.IPv4))
	_, found := e.ns.Link("wg-np")
	assert.False(t, found)
	assert.False(t, m.Status().Enabled)

	// A new Manager that starts disabled removes what an earlier run left.
	m2 := e.manager(e.options(ipfamily.IPv4))
	e.apply(m2)
	require.Len(t, e.rules(kernel.IPv4), 1)
	o = e.options(ipfamily.IPv4)
	o.Disabled = true
	m3 := e.manager(o)
	e.apply(m3)
	assert.Empty(t, e.rules(kernel.IPv4))
	_, found = e.ns.Link("wg-np")
	assert.False(t, found)
}

func TestManagerRestartAdoptsAndWritesNothing(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	for i := 1; i <= 20; i++ {
		send(m, node(i, pubKey(t)))
	}
	send(m, node(21, wireguard.PublicKey{}))
	e.apply(m)
	pub := m.Status().PublicKey
	require.NoError(t, m.Close())
	_, ok := e.ns.Link("wg-np")
	require.True(t, ok, "a kernel device outlives its Manager")

	e.k.ResetLog()
	e.ns.ResetCounts()
	m2 := e.manager(e.options(ipfamily.IPv4))
	// The same updates, as the agent's control plane replays them.
	dev, _ := e.state("wg-np")
	for i := 1; i <= 21; i++ {
		u := node(i, wireguard.PublicKey{})
		for _, p := range dev.Peers {
			if p.Endpoint.Addr() == u.Endpoint.Addr() {
				u.PublicKey = p.PublicKey
			}
		}
		send(m2, u)
	}
	plan, err := m2.Plan(context.Background())
	require.NoError(t, err)
	assert.True(t, plan.Empty(), "a restarted Manager plans no write: %v", plan)
	e.apply(m2)
	assert.Equal(t, pub, m2.Status().PublicKey)
	assert.Empty(t, e.k.Log())
	assert.Zero(t, e.ns.Writes())
	assert.True(t, m2.Status().RuleInstalled)

	// A key file lost while the device kept its key: the device's key is
	// kept and written back to the file.
	require.NoError(t, m2.Close())
	require.NoError(t, os.Remove(e.keyFile))
	m3 := e.manager(e.options(ipfamily.IPv4))
	e.apply(m3)
	assert.Equal(t, pub, m3.Status().PublicKey)
	priv, err := wireguard.ReadKeyFile(e.keyFile)
	require.NoError(t, err)
	assert.Equal(t, pub, priv.Public())
}

func TestManagerRotatesTheKey(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	e.apply(m)
	old := m.Status().PublicKey
	m.OnUpdate(wireguard.RotateKey{})
	e.apply(m)
	cur := m.Status().PublicKey
	assert.NotEqual(t, old, cur)
	assert.Equal(t, []wireguard.PublicKey{old, cur}, e.pubs)
	priv, err := wireguard.ReadKeyFile(e.keyFile)
	require.NoError(t, err)
	assert.Equal(t, cur, priv.Public())
	dev, _ := e.state("wg-np")
	assert.Equal(t, priv, dev.PrivateKey)
}

func TestManagerTightensAKeyFileReadableByOthers(t *testing.T) {
	e := newEnv(t, true)
	k, err := wireguard.GeneratePrivateKey()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(e.keyFile, []byte(k.Base64()+"\n"), 0o644))
	m := e.manager(e.options(ipfamily.IPv4))
	e.apply(m)
	fi, err := os.Stat(e.keyFile)
	require.NoError(t, err)
	assert.Equal(t, wireguard.KeyFileMode, fi.Mode().Perm())
	assert.Equal(t, k.Public(), m.Status().PublicKey)

	require.NoError(t, os.WriteFile(e.keyFile, []byte("garbage"), 0o600))
	m2 := e.manager(e.options(ipfamily.IPv4))
	_, err = pass(m2)
	assert.ErrorIs(t, err, wireguard.ErrKeyFile)
	assert.ErrorIs(t, err, wireguard.ErrInvalidKey)
}

func TestManagerNeverLogsThePrivateKey(t *testing.T) {
	e := newEnv(t, false)
	var buf bytes.Buffer
	o := e.options(ipfamily.IPv4)
	o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := e.manager(o)
	send(m, node(1, pubKey(t)))
	e.apply(m)
	m.OnUpdate(wireguard.RotateKey{})
	e.apply(m)
	priv, err := wireguard.ReadKeyFile(e.keyFile)
	require.NoError(t, err)
	require.NotEmpty(t, buf.String())
	assert.NotContains(t, buf.String(), priv.Base64())
	assert.Contains(t, buf.String(), priv.Public().String())
	for _, s := range []string{priv.String(), strings.TrimSpace(sprint(priv))} {
		assert.Equal(t, "(redacted)", s)
	}
	// Nor inside a struct, with any verb.
	st := wireguard.DeviceState{PrivateKey: priv}
	for _, f := range []string{"%v", "%+v", "%#v", "%x", "%s"} {
		out := fmt.Sprintf(f, st)
		assert.NotContains(t, out, priv.Base64(), f)
		assert.NotContains(t, out, fmt.Sprintf("%x", [32]byte(priv)), f)
	}
}

func TestManagerHostEncryptionAndIPv6(t *testing.T) {
	e := newEnv(t, true)
	o := e.options(ipfamily.IPv6)
	o.EncryptHostTraffic = true
	m := e.manager(o)
	k := pubKey(t)
	send(m, testPeer{Node: "b", PublicKey: k, Endpoint: netip.MustParseAddrPort("[fd00:198:18::2]:0"),
		CIDRs: []netip.Prefix{pfx("10.0.2.0/24"), pfx("fd00:10:244:2::/64")}})
	send(m, testPeer{Node: "c", Endpoint: netip.MustParseAddrPort("[fd00:198:18::3]:0"),
		CIDRs: []netip.Prefix{pfx("fd00:10:244:3::/64")}})
	e.apply(m)
	assert.Equal(t, "wg-np-v6", m.Status().Device)
	l, _ := e.ns.Link("wg-np-v6")
	assert.Equal(t, 1420, l.MTU)
	dev, _ := e.state("wg-np-v6")
	assert.Equal(t, wireguard.DefaultListenPortV6, dev.ListenPort)
	require.Len(t, dev.Peers, 1)
	assert.Equal(t, netip.MustParseAddrPort("[fd00:198:18::2]:51821"), dev.Peers[0].Endpoint)
	assert.ElementsMatch(t, []netip.Prefix{pfx("fd00:10:244:2::/64"), pfx("fd00:198:18::2/128")}, dev.Peers[0].AllowedIPs)
	got := map[netip.Prefix]uint8{}
	for _, r := range e.ns.Routes(kernel.IPv6, testTable) {
		if r.Priority != wireguard.FailClosedMetric {
			got[r.Dst] = r.Type
		}
	}
	assert.Equal(t, map[netip.Prefix]uint8{pfx("fd00:10:244:2::/64"): kernel.RTNUnicast, pfx("fd00:198:18::2/128"): kernel.RTNUnicast,
		pfx("fd00:10:244:3::/64"): kernel.RTNThrow, pfx("fd00:198:18::3/128"): kernel.RTNThrow}, got)
	assert.Equal(t, []netip.Prefix{pfx("fd00:10:244:2::/64")}, e.holes(kernel.IPv6),
		"fail-closed: the pod CIDR, not the endpoint (the host must reach its control plane)")
	assert.Len(t, e.rules(kernel.IPv6), 1)
	assert.Empty(t, e.rules(kernel.IPv4))

	// IPv4 host encryption asks for src_valid_mark.
	o4 := e.options(ipfamily.IPv4)
	o4.EncryptHostTraffic = true
	m4 := e.manager(o4)
	e.apply(m4)
	v, err := e.ns.Sysctl(context.Background(), "net.ipv4.conf.all.src_valid_mark")
	require.NoError(t, err)
	assert.Equal(t, "1", v)
}

type metrics struct{ got []wireguard.PeerStats }

func (m *metrics) ObservePeer(s wireguard.PeerStats) { m.got = append(m.got, s) }

func TestManagerPeerStatsFeedMetrics(t *testing.T) {
	e := newEnv(t, true)
	var ms metrics
	o := e.options(ipfamily.IPv4)
	o.Metrics = &ms
	m := e.manager(o)
	st, err := m.PeerStats(context.Background())
	require.NoError(t, err)
	assert.Empty(t, st)
	k := pubKey(t)
	send(m, node(1, k))
	e.apply(m)
	require.True(t, e.ns.SetWireGuardPeerStats("wg-np", kernel.WireGuardKey(k), testTime, 100, 200))
	st, err = m.PeerStats(context.Background())
	require.NoError(t, err)
	want := []wireguard.PeerStats{{Node: node(1, k).Node, PublicKey: k, LastHandshake: testTime, ReceiveBytes: 100, TransmitBytes: 200}}
	assert.Equal(t, want, st)
	assert.Equal(t, want, ms.got)
}

func TestManagerRecreatesADeviceDeletedBehindItsBack(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	send(m, node(1, pubKey(t)))
	e.apply(m)
	l, _ := e.ns.Link("wg-np")
	require.NoError(t, e.ns.Admin().DeleteLink(context.Background(), l.Index))
	m.QueueResync()
	e.apply(m)
	dev, ok := e.state("wg-np")
	require.True(t, ok)
	assert.Len(t, dev.Peers, 1)
	assert.Len(t, e.routes(), 1)
}

func TestManagerDropsInvalidUpdates(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	for _, u := range []interface{ Validate() error }{
		&cluster.Node{},
		&cluster.Block{CIDR: pfx("10.0.0.1/24"), Node: "x"},
		&cluster.Node{Name: "x", UnderlayV4: netip.MustParseAddr("0.0.0.0")},
		&cluster.NodeRemove{},
		&cluster.BlockRemove{},
	} {
		assert.ErrorIs(t, u.Validate(), cluster.ErrInvalid)
		m.OnUpdate(u)
	}
	m.OnUpdate("a message of another package")
	send(m, node(1, pubKey(t)))
	e.apply(m)
	assert.Equal(t, 1, m.Status().Peers)
	assert.Empty(t, m.Status().NotPeers)
}

func TestNewRefusesBadOptions(t *testing.T) {
	e := newEnv(t, true)
	good := e.options(ipfamily.IPv4)
	for name, f := range map[string]func(o *wireguard.Options){
		"family":    func(o *wireguard.Options) { o.Family = 0 },
		"kernel":    func(o *wireguard.Options) { o.Kernel = nil },
		"mark":      func(o *wireguard.Options) { o.FirewallMark = 0 },
		"table":     func(o *wireguard.Options) { o.Table = 0 },
		"main":      func(o *wireguard.Options) { o.Table = kernel.TableMain },
		"mtu":       func(o *wireguard.Options) { o.HostMTU = 0 },
		"small mtu": func(o *wireguard.Options) { o.MTU = 500 },
		"v6 mtu":    func(o *wireguard.Options) { o.Family, o.HostMTU = ipfamily.IPv6, 1300 },
		"key file":  func(o *wireguard.Options) { o.KeyFile = "" },
		"name":      func(o *wireguard.Options) { o.InterfaceName = "a/b" },
		"port":      func(o *wireguard.Options) { o.ListenPort = 70000 },
		"mode":      func(o *wireguard.Options) { o.Mode = 9 },
		"chunk":     func(o *wireguard.Options) { o.PeerChunk = -1 },
	} {
		o := good
		f(&o)
		_, err := wireguard.New(o)
		assert.ErrorIs(t, err, wireguard.ErrInvalidOptions, name)
	}
	_, err := wireguard.New(good)
	assert.NoError(t, err)
}

// Without providers the Manager builds the real ones on its Kernel's
// capabilities (kernel.Doer), found by name, not by a type assertion: on
// a fake namespace, which has no thread to run them on, neither can make a
// device, and Apply says so, having written nothing.
func TestManagerRealProvidersOnAFake(t *testing.T) {
	e := newEnv(t, false)
	o := e.options(ipfamily.IPv4)
	o.KernelProvider, o.UserspaceProvider = nil, nil
	m := e.manager(o)
	_, err := pass(m)
	require.ErrorIs(t, err, wireguard.ErrNotSupported)
	require.ErrorIs(t, err, kernel.ErrNotSupported)
	assert.Equal(t, 1, e.ns.Calls(kernelfake.OpDo), "the userspace provider asked for a thread in the namespace")
	_, found := e.ns.Link("wg-np")
	assert.False(t, found)
	assert.Empty(t, e.ns.Routes(kernel.IPv4, testTable))
	assert.Empty(t, e.rules(kernel.IPv4))
}

// The Manager in a dataplane.Loop: registered as a manager, and its
// drivers (the device, the table, the rule), it programs the node once
// both in-sync markers have arrived.
func TestManagerInALoop(t *testing.T) {
	e := newEnv(t, false)
	m := e.manager(e.options(ipfamily.IPv4))
	inSync := make(chan struct{})
	loop, err := dataplane.New(dataplane.Options{OnInSync: func() { close(inSync) }})
	require.NoError(t, err)
	require.NoError(t, loop.AddManager(m))
	for _, d := range m.Drivers() {
		require.NoError(t, loop.AddDriver(d))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	for _, msg := range append(node(1, pubKey(t)).msgs(), node(2, wireguard.PublicKey{}).msgs()...) {
		require.NoError(t, loop.Send(ctx, msg))
	}
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	select {
	case <-inSync:
	case <-time.After(30 * time.Second):
		t.Fatalf("never in sync: %+v", loop.Health())
	}
	st := m.Status()
	assert.Equal(t, 1, st.Peers)
	assert.True(t, st.RuleInstalled)
	assert.Len(t, e.routes(), 2)
}

// Drift made behind the Manager's back is repaired at the next resync:
// a peer removed, a foreign peer added, the port and MTU changed, the
// rule deleted.
func TestManagerRepairsDrift(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	k1, k2 := pubKey(t), pubKey(t)
	send(m, node(1, k1))
	send(m, node(2, k2))
	e.apply(m)

	port := 4242
	foreign := pubKey(t)
	require.NoError(t, e.ns.Admin().ConfigureWireGuard(context.Background(), "wg-np", kernel.WireGuardConfig{ListenPort: &port,
		Peers: []kernel.WireGuardPeerConfig{{PublicKey: kernel.WireGuardKey(k1), Remove: true}, {PublicKey: kernel.WireGuardKey(foreign)}}}))
	l, _ := e.ns.Link("wg-np")
	require.NoError(t, e.ns.Admin().SetLinkMTU(context.Background(), l.Index, 1300))
	require.NoError(t, e.ns.Admin().DeleteRule(context.Background(), e.rules(kernel.IPv4)[0]))

	resync(m) // as the loop's resync does, driver by driver
	e.apply(m)
	dev, _ := e.state("wg-np")
	assert.Equal(t, wireguard.DefaultListenPort, dev.ListenPort)
	keys := []wireguard.PublicKey{}
	for _, p := range dev.Peers {
		keys = append(keys, p.PublicKey)
	}
	assert.ElementsMatch(t, []wireguard.PublicKey{k1, k2}, keys)
	l, _ = e.ns.Link("wg-np")
	assert.Equal(t, 1440, l.MTU)
	assert.Len(t, e.rules(kernel.IPv4), 1)
}

// TestManagerFailClosed: behind each route through the device the table
// holds a blackhole for the same prefix, which follows the node as it
// becomes a peer, stops being one (a throw instead) and goes. When the
// device is gone (here deleted behind the Manager's back; a userspace one
// also goes with its agent), its routes go and the blackhole remains.
// Disabling removes them; FailOpen makes none.
func TestManagerFailClosed(t *testing.T) {
	e := newEnv(t, false)
	m := e.manager(e.options(ipfamily.IPv4))
	k1 := pubKey(t)
	n1 := node(1, k1)
	send(m, n1)
	e.apply(m)
	assert.Equal(t, []netip.Prefix{pfx("10.0.1.0/24")}, e.holes(kernel.IPv4))

	n1.PublicKey = wireguard.PublicKey{}
	send(m, n1)
	e.apply(m)
	assert.Empty(t, e.holes(kernel.IPv4), "not a peer: a throw, no blackhole")
	assert.Equal(t, map[netip.Prefix]uint8{pfx("10.0.1.0/24"): kernel.RTNThrow}, e.routes())

	send(m, node(1, k1))
	e.apply(m)
	assert.Equal(t, []netip.Prefix{pfx("10.0.1.0/24")}, e.holes(kernel.IPv4))

	// The device goes: its route with it, the blackhole stays.
	l, ok := e.ns.Link("wg-np")
	require.True(t, ok)
	require.NoError(t, e.ns.Admin().DeleteLink(context.Background(), l.Index))
	assert.Empty(t, e.routes())
	assert.Equal(t, []netip.Prefix{pfx("10.0.1.0/24")}, e.holes(kernel.IPv4))
	m.QueueResync()
	e.apply(m)
	assert.Equal(t, map[netip.Prefix]uint8{pfx("10.0.1.0/24"): kernel.RTNUnicast}, e.routes())

	m.OnUpdate(cluster.NodeRemove{Name: n1.Node})
	e.apply(m)
	assert.Empty(t, e.holes(kernel.IPv4))
	send(m, node(1, k1))
	e.apply(m)
	m.OnUpdate(wireguard.SetEnabled{Enabled: false})
	e.apply(m)
	assert.Empty(t, e.ns.Routes(kernel.IPv4, testTable))

	// FailOpen: no blackholes, and a restarted Manager with it removes
	// those an earlier run left.
	m.OnUpdate(wireguard.SetEnabled{Enabled: true})
	e.apply(m)
	require.NoError(t, m.Close())
	require.Len(t, e.holes(kernel.IPv4), 1)
	o := e.options(ipfamily.IPv4)
	o.FailOpen = true
	m2 := e.manager(o)
	send(m2, node(1, k1))
	e.apply(m2)
	assert.Empty(t, e.holes(kernel.IPv4))
	assert.Equal(t, map[netip.Prefix]uint8{pfx("10.0.1.0/24"): kernel.RTNUnicast}, e.routes())
}

// TestManagerPeersFromNodesAndBlocks: a peer's allowed IPs are the blocks
// its node owns, whichever message comes first; a block that changes owner
// moves between peers, a removed block goes; the node's tunnel address is
// routed on its own only when none of its blocks holds it; the other
// family's underlay, key and blocks are not this Manager's; this node's
// own messages make no peer.
func TestManagerPeersFromNodesAndBlocks(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	ka, kb := pubKey(t), pubKey(t)
	allowed := func() map[string][]netip.Prefix {
		dev, ok := e.state("wg-np")
		require.True(t, ok)
		out := map[string][]netip.Prefix{}
		for _, p := range dev.Peers {
			name := map[wireguard.PublicKey]string{ka: "a", kb: "b"}[p.PublicKey]
			out[name] = append(out[name], p.AllowedIPs...)
			slices.SortFunc(out[name], func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		}
		return out
	}
	m.OnUpdate(cluster.Block{CIDR: pfx("10.1.0.0/24"), Node: "a"}) // before its node
	m.OnUpdate(cluster.Block{CIDR: pfx("fd00:1::/64"), Node: "a"})
	m.OnUpdate(cluster.Node{Name: "a", UnderlayV4: netip.MustParseAddr("198.18.0.1"), TunnelV4: netip.MustParseAddr("10.1.0.1"),
		WireGuardKeyV4: cluster.WireGuardKey(ka), WireGuardKeyV6: cluster.WireGuardKey(kb)})
	m.OnUpdate(cluster.Node{Name: "b", UnderlayV4: netip.MustParseAddr("198.18.0.2"), TunnelV4: netip.MustParseAddr("10.99.0.2"),
		WireGuardKeyV4: cluster.WireGuardKey(kb)})
	m.OnUpdate(cluster.Block{CIDR: pfx("10.2.0.0/24"), Node: "b"})
	m.OnUpdate(cluster.Node{Name: "self", UnderlayV4: netip.MustParseAddr("198.18.0.9"), WireGuardKeyV4: cluster.WireGuardKey(pubKey(t))})
	m.OnUpdate(cluster.Block{CIDR: pfx("10.9.0.0/24"), Node: "self"})
	e.apply(m)
	assert.Equal(t, map[string][]netip.Prefix{"a": {pfx("10.1.0.0/24")}, "b": {pfx("10.2.0.0/24"), pfx("10.99.0.2/32")}}, allowed())
	assert.Equal(t, 2, m.Status().Peers)
	assert.Empty(t, m.Status().NotPeers)

	// The block moves from a to b (a's tunnel address, no longer in a
	// block of a, is routed to a on its own), then goes.
	m.OnUpdate(cluster.Block{CIDR: pfx("10.1.0.0/24"), Node: "b"})
	e.apply(m)
	assert.Equal(t, map[string][]netip.Prefix{"a": {pfx("10.1.0.1/32")}, "b": {pfx("10.1.0.0/24"), pfx("10.2.0.0/24"), pfx("10.99.0.2/32")}}, allowed())
	m.OnUpdate(cluster.BlockRemove{CIDR: pfx("10.1.0.0/24")})
	e.apply(m)
	assert.Equal(t, map[string][]netip.Prefix{"a": {pfx("10.1.0.1/32")}, "b": {pfx("10.2.0.0/24"), pfx("10.99.0.2/32")}}, allowed())
	assert.NotContains(t, e.routes(), pfx("10.1.0.0/24"))

	// b's node goes: its block stays known and comes back with the node.
	m.OnUpdate(cluster.NodeRemove{Name: "b"})
	e.apply(m)
	assert.Equal(t, map[string][]netip.Prefix{"a": {pfx("10.1.0.1/32")}}, allowed())
	assert.NotContains(t, e.routes(), pfx("10.2.0.0/24"))
	m.OnUpdate(cluster.Node{Name: "b", UnderlayV4: netip.MustParseAddr("198.18.0.2"), WireGuardKeyV4: cluster.WireGuardKey(kb)})
	e.apply(m)
	assert.Equal(t, map[string][]netip.Prefix{"a": {pfx("10.1.0.1/32")}, "b": {pfx("10.2.0.0/24")}}, allowed())
}

// On a loop, the table and the rule are drivers like any other: a route,
// a blackhole and the rule deleted behind the Manager's back come back at
// the loop's periodic resync, with no call on the Manager.
func TestManagerDriversRepairedByLoopResync(t *testing.T) {
	e := newEnv(t, false)
	m := e.manager(e.options(ipfamily.IPv4))
	inSync := make(chan struct{})
	loop, err := dataplane.New(dataplane.Options{OnInSync: func() { close(inSync) }, ResyncInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, loop.AddManager(m))
	for _, d := range m.Drivers() {
		require.NoError(t, loop.AddDriver(d))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- loop.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	for _, msg := range node(1, pubKey(t)).msgs() {
		require.NoError(t, loop.Send(ctx, msg))
	}
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	select {
	case <-inSync:
	case <-time.After(30 * time.Second):
		t.Fatalf("never in sync: %+v", loop.Health())
	}
	want := e.ns.Routes(kernel.IPv4, testTable)
	require.Len(t, want, 2, "the route through the device and its blackhole")
	require.Len(t, e.rules(kernel.IPv4), 1)

	adm := e.ns.Admin()
	for _, r := range want {
		for _, err := range adm.ApplyRoutes(ctx, []kernel.RouteOp{{Kind: kernel.OpDelete, Route: r}}) {
			require.NoError(t, err)
		}
	}
	require.NoError(t, adm.DeleteRule(ctx, e.rules(kernel.IPv4)[0]))
	require.Empty(t, e.ns.Routes(kernel.IPv4, testTable))

	deadline := time.Now().Add(30 * time.Second)
	for len(e.ns.Routes(kernel.IPv4, testTable)) != 2 || len(e.rules(kernel.IPv4)) != 1 {
		require.True(t, time.Now().Before(deadline), "not repaired: routes %v, rules %v", e.ns.Routes(kernel.IPv4, testTable), e.rules(kernel.IPv4))
		time.Sleep(10 * time.Millisecond)
	}
	assert.ElementsMatch(t, want, e.ns.Routes(kernel.IPv4, testTable))
	assert.True(t, m.Status().RuleInstalled)
}

// The device takes this node's tunnel address of its family (its own
// cluster.Node message), as a /32 or /128 alone, so that connections
// masqueraded as they leave through it (a NodePort connection sent to
// another node's backend) carry an address its peers accept from this
// node. Plan names the write first; a change replaces the address; the
// node's removal takes it away.
func TestManagerDeviceTakesTheNodesTunnelAddress(t *testing.T) {
	for _, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			e := newEnv(t, true)
			m := e.manager(e.options(fam))
			dev := "wg-np"
			first, second := netip.MustParseAddr("10.244.1.0"), netip.MustParseAddr("10.244.7.0")
			if fam == ipfamily.IPv6 {
				dev = "wg-np-v6"
				first, second = netip.MustParseAddr("fd00:244:1::"), netip.MustParseAddr("fd00:244:7::")
			}
			self := testPeer{Node: "self", TunnelAddr: first}
			send(m, self)
			send(m, node(1, pubKey(t)))
			pl, err := m.Plan(context.Background())
			require.NoError(t, err)
			full := netip.PrefixFrom(first, first.BitLen())
			assert.Contains(t, fmt.Sprint(pl.Writes), dev+" addr add "+full.String())
			e.apply(m)
			assert.Equal(t, []netip.Prefix{full}, e.ns.LinkAddrs(dev))

			self.TunnelAddr = second
			send(m, self)
			e.apply(m)
			assert.Equal(t, []netip.Prefix{netip.PrefixFrom(second, second.BitLen())}, e.ns.LinkAddrs(dev))
			pl, err = m.Plan(context.Background())
			require.NoError(t, err)
			assert.Empty(t, pl.Writes, "nothing left to do")

			m.OnUpdate(cluster.NodeRemove{Name: "self"})
			e.apply(m)
			assert.Empty(t, e.ns.LinkAddrs(dev))
		})
	}
}

// A block that holds a node's endpoint address (one so wide it covers the
// underlay, which a cluster should not have) keeps its fail-closed
// blackhole, and each endpoint address in it gets a throw at
// FailClosedMetric, so that with the device gone the host still reaches
// the nodes and the rest of the block stays closed. The throws follow the
// endpoints as they move in and out of blocks, and a node's own endpoint
// routed through the device (host encryption) gets no blackhole.
func TestFailClosedLetsEndpointsOut(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	k1, k2 := pubKey(t), pubKey(t)
	wide := testPeer{Node: "wide", PublicKey: k2, Endpoint: netip.MustParseAddrPort("198.18.0.9:0"),
		CIDRs: []netip.Prefix{pfx("0.0.0.0/0"), pfx("10.9.0.0/24")}}
	send(m, node(1, k1))
	send(m, wide)
	e.apply(m)
	assert.ElementsMatch(t, []netip.Prefix{pfx("0.0.0.0/0"), pfx("10.0.1.0/24"), pfx("10.9.0.0/24")}, e.holes(kernel.IPv4))
	assert.ElementsMatch(t, []netip.Prefix{pfx("198.18.0.1/32"), pfx("198.18.0.9/32")}, e.escapes(kernel.IPv4),
		"both endpoints are let out of 0.0.0.0/0's blackhole")

	// Node 1 moves into 10.9.0.0/24: still one throw for it, held by two blocks.
	moved := node(1, k1)
	moved.Endpoint = netip.MustParseAddrPort("10.9.0.7:0")
	send(m, moved)
	e.apply(m)
	assert.ElementsMatch(t, []netip.Prefix{pfx("0.0.0.0/0"), pfx("10.0.1.0/24"), pfx("10.9.0.0/24")}, e.holes(kernel.IPv4))
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.9.0.7/32"), pfx("198.18.0.9/32")}, e.escapes(kernel.IPv4))

	// The wide block goes: no endpoint is in a blackhole any more.
	m.OnUpdate(cluster.BlockRemove{CIDR: pfx("0.0.0.0/0")})
	e.apply(m)
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.9.0.0/24")}, e.holes(kernel.IPv4))
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.9.0.7/32")}, e.escapes(kernel.IPv4))
	send(m, node(1, k1))
	e.apply(m)
	assert.Empty(t, e.escapes(kernel.IPv4))

	// A node's endpoint as a prefix of its own (host encryption): a route
	// through the device, no blackhole, and no throw while no block holds it.
	host := node(1, k1)
	host.CIDRs = append(host.CIDRs, pfx("198.18.0.1/32"))
	send(m, host)
	e.apply(m)
	assert.Equal(t, kernel.RTNUnicast, e.routes()[pfx("198.18.0.1/32")])
	assert.ElementsMatch(t, []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.9.0.0/24")}, e.holes(kernel.IPv4))
	assert.Empty(t, e.escapes(kernel.IPv4))
}
