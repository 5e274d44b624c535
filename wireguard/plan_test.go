package wireguard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// writeLog is a namespace that logs the device driver's writes as a
// Plan's lines name them: "+ device NAME", "~ link NAME", "~ device NAME",
// "+ peer KEY", "~ peer KEY", "- peer KEY", "~ sysctl KEY".
type writeLog struct {
	wireguard.Kernel
	mu  sync.Mutex
	log []string
}

func (k *writeLog) note(s ...string) {
	k.mu.Lock()
	k.log = append(k.log, s...)
	k.mu.Unlock()
}

// take returns the writes logged and forgets them.
func (k *writeLog) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.log
	k.log = nil
	return out
}

func (k *writeLog) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	k.note("+ device " + l.Name)
	return k.Kernel.AddLink(ctx, l)
}

func (k *writeLog) SetLinkMTU(ctx context.Context, index, mtu int) error {
	k.note(fmt.Sprintf("~ link %d", index))
	return k.Kernel.SetLinkMTU(ctx, index, mtu)
}

func (k *writeLog) SetLinkUp(ctx context.Context, index int, up bool) error {
	k.note(fmt.Sprintf("~ link %d", index))
	return k.Kernel.SetLinkUp(ctx, index, up)
}

func (k *writeLog) SetSysctl(ctx context.Context, key, value string) error {
	k.note("~ sysctl " + key)
	return k.Kernel.SetSysctl(ctx, key, value)
}

func (k *writeLog) ConfigureWireGuard(ctx context.Context, name string, cfg kernel.WireGuardConfig) error {
	if cfg.PrivateKey != nil || cfg.ListenPort != nil || cfg.FirewallMark != nil {
		k.note("~ device " + name)
	}
	for _, p := range cfg.Peers {
		op := "+"
		switch {
		case p.Remove:
			op = "-"
		case p.UpdateOnly:
			op = "~"
		}
		k.note(op + " peer " + p.PublicKey.String())
	}
	return k.Kernel.ConfigureWireGuard(ctx, name, cfg)
}

// planLines names p's writes as writeLog logs them (a link by index).
func planLines(t *testing.T, p dataplane.Plan, index int) []string {
	t.Helper()
	var out []string
	for _, w := range p.Writes {
		obj := strings.Fields(w.Object)[0]
		if w.Kind == "link" {
			obj = fmt.Sprint(index)
		}
		out = append(out, strings.Fields(w.String())[0]+" "+string(w.Kind)+" "+obj)
	}
	return out
}

// planWorld is the random cluster of a property run: nodes drawn from
// pools of keys, endpoints and blocks, so that blocks move between nodes
// (and allowed IPs between peers) and keys collide.
type planWorld struct {
	r      *rand.Rand
	fam    ipfamily.Family
	keys   []wireguard.PublicKey
	blocks []netip.Prefix
}

func newPlanWorld(t *testing.T, r *rand.Rand, fam ipfamily.Family) *planWorld {
	w := &planWorld{r: r, fam: fam}
	for range 12 {
		w.keys = append(w.keys, pubKey(t))
	}
	for i := range 16 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
		if fam == ipfamily.IPv6 {
			p = netip.MustParsePrefix(fmt.Sprintf("fd00:244:%x::/64", i))
		}
		w.blocks = append(w.blocks, p)
	}
	return w
}

// endpoint is node i's underlay address, or one of a few others.
func (w *planWorld) endpoint() netip.Addr {
	i := byte(w.r.IntN(8) + 1)
	if w.fam == ipfamily.IPv6 {
		return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: i})
	}
	return netip.AddrFrom4([4]byte{198, 18, 0, i})
}

// change sends m a few random changes of the cluster.
func (w *planWorld) change(m *wireguard.Manager) {
	for range 1 + w.r.IntN(10) {
		name := fmt.Sprintf("n%d", w.r.IntN(10))
		switch w.r.IntN(6) {
		case 0:
			m.OnUpdate(cluster.NodeRemove{Name: name})
		case 1:
			m.OnUpdate(cluster.BlockRemove{CIDR: w.blocks[w.r.IntN(len(w.blocks))]})
		case 2, 3:
			m.OnUpdate(cluster.Block{CIDR: w.blocks[w.r.IntN(len(w.blocks))], Node: name})
		default:
			n := cluster.Node{Name: name}
			var k cluster.WireGuardKey
			if w.r.IntN(6) > 0 {
				k = cluster.WireGuardKey(w.keys[w.r.IntN(len(w.keys))])
			}
			if w.fam == ipfamily.IPv6 {
				n.UnderlayV6, n.WireGuardKeyV6 = w.endpoint(), k
			} else {
				n.UnderlayV4, n.WireGuardKeyV4 = w.endpoint(), k
			}
			m.OnUpdate(n)
		}
	}
	if w.r.IntN(10) == 0 {
		m.OnUpdate(wireguard.RotateKey{})
	}
}

// drift changes the device behind the Manager's back, as an administrator
// would.
func (w *planWorld) drift(t *testing.T, ns *kernelfake.Namespace, name string) {
	ctx, admin := context.Background(), ns.Admin()
	d, err := admin.WireGuardDevice(ctx, name)
	require.NoError(t, err)
	var cfg kernel.WireGuardConfig
	for _, p := range d.Peers {
		switch w.r.IntN(5) {
		case 0:
			cfg.Peers = append(cfg.Peers, kernel.WireGuardPeerConfig{PublicKey: p.PublicKey, Remove: true})
		case 1:
			cfg.Peers = append(cfg.Peers, kernel.WireGuardPeerConfig{PublicKey: p.PublicKey,
				Endpoint: netip.AddrPortFrom(w.endpoint(), 4000)})
		case 2:
			cfg.Peers = append(cfg.Peers, kernel.WireGuardPeerConfig{PublicKey: p.PublicKey,
				AllowedIPs: []netip.Prefix{w.blocks[w.r.IntN(len(w.blocks))]}})
		}
	}
	if w.r.IntN(3) == 0 {
		cfg.Peers = append(cfg.Peers, kernel.WireGuardPeerConfig{PublicKey: kernel.WireGuardKey(pubKey(t))}) // foreign
	}
	if w.r.IntN(4) == 0 {
		port := 4242
		cfg.ListenPort = &port
	}
	require.NoError(t, admin.ConfigureWireGuard(ctx, name, cfg))
	l, ok := ns.Link(name)
	require.True(t, ok)
	if w.r.IntN(4) == 0 {
		require.NoError(t, admin.SetLinkMTU(ctx, l.Index, 1300))
	}
	if w.r.IntN(4) == 0 {
		require.NoError(t, admin.SetLinkUp(ctx, l.Index, false))
	}
}

// TestPlanProperties checks the device driver on kernelfake, IPv4 and
// IPv6, over many seeds of random clusters and random drift of the device
// made behind its back: Plan writes nothing; the Apply after it makes
// exactly the Plan's writes, in its order (and as many as the namespace
// counts, and Stats); after it Plan is empty, an Apply writes nothing, and State is
// in sync.
func TestPlanProperties(t *testing.T) {
	for seed := range uint64(24) {
		fam := ipfamily.IPv4
		if seed%2 == 1 {
			fam = ipfamily.IPv6
		}
		t.Run(fmt.Sprintf("%d-%s", seed, fam), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 21))
			e := newEnv(t, true)
			rec := &writeLog{Kernel: e.k}
			o := e.options(fam)
			o.Kernel, o.Clock = rec, clock.NewFake(testTime)
			o.EncryptHostTraffic = r.IntN(2) == 0
			o.PersistentKeepalive = time.Duration(r.IntN(2)*25) * time.Second
			o.PeerChunk = 1 + r.IntN(4)
			m := e.manager(o)
			w := newPlanWorld(t, r, fam)
			name := wireguard.DefaultInterfaceName
			if fam == ipfamily.IPv6 {
				name = wireguard.DefaultInterfaceNameV6
			}
			ctx := context.Background()
			planned := map[dataplane.ObjectKind]int{}
			for round := range 10 {
				what := fmt.Sprintf("seed %d, round %d", seed, round)
				if round > 0 {
					w.change(m)
					if r.IntN(2) == 0 {
						w.drift(t, e.ns, name)
						m.QueueResync()
					}
				}
				before := e.ns.Writes()
				plan, err := m.Plan(ctx)
				require.NoError(t, err, what)
				require.Equal(t, before, e.ns.Writes(), "%s: Plan wrote", what)
				require.Empty(t, rec.take(), "%s: Plan wrote", what)

				statsBefore := m.Stats().Writes
				_, err = m.Apply(ctx)
				require.NoError(t, err, what)
				require.Equal(t, uint64(len(plan.Writes)), m.Stats().Writes-statsBefore, "%s: Stats counts the writes", what)
				l, _ := e.ns.Link(name)
				require.Equal(t, planLines(t, plan, l.Index), rec.take(), "%s: Apply made other writes than its Plan:\n%v", what, plan)
				require.Equal(t, before+len(plan.Writes), e.ns.Writes(), "%s: the namespace's count", what)
				for _, w := range plan.Writes {
					planned[w.Kind]++
				}

				after, err := m.Plan(ctx)
				require.NoError(t, err, what)
				require.True(t, after.Empty(), "%s: %v", what, after)
				before = e.ns.Writes()
				_, err = m.Apply(ctx)
				require.NoError(t, err, what)
				require.Equal(t, before, e.ns.Writes(), "%s: an Apply whose Plan is empty wrote", what)

				st, err := m.State(ctx)
				require.NoError(t, err, what)
				assert.True(t, st.InSync(), "%s: %v", what, st)
				stats := m.Stats()
				assert.Equal(t, stats.Desired, stats.InKernel, what)
				assert.Equal(t, m.Status().Peers, stats.Desired, what)
			}
			t.Logf("seed %d: writes planned by kind: %v", seed, planned)
		})
	}
}

// TestPlanOfANewDevice: the first Plan makes the device, brings it up,
// sets its key (still to be made), port and mark, and adds the peers,
// without writing a key file.
func TestPlanOfANewDevice(t *testing.T) {
	e := newEnv(t, true)
	m := e.manager(e.options(ipfamily.IPv4))
	k := pubKey(t)
	send(m, testPeer{Node: "n1", PublicKey: k, Endpoint: netip.MustParseAddrPort("198.18.0.1:0"), CIDRs: []netip.Prefix{pfx("10.244.1.0/24")}})
	plan, err := m.Plan(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "wireguard-IPv4: 4 writes\n"+
		"+ device wg-np mtu 1440 (mode auto)\n"+
		"~ link wg-np up\n"+
		"~ device wg-np private-key (new) listen-port 51820 fwmark 0x100000 (was no private-key listen-port 0 fwmark 0x0)\n"+
		"+ peer "+k.String()+" endpoint 198.18.0.1:51820 allowed-ips 10.244.1.0/24", plan.String())
	assert.NoFileExists(t, e.keyFile)
	assert.Zero(t, e.ns.Writes())
	_, err = m.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, e.ns.Writes())
}

// TestOneRefusedPeerHoldsBackNoOther: the device refuses one peer; the
// others are written, the Apply's error is a *dataplane.PartialError
// naming that peer (ErrPeer), it is retried on its backoff and counted in
// Stats and State until it is written.
func TestOneRefusedPeerHoldsBackNoOther(t *testing.T) {
	e := newEnv(t, true)
	clk := clock.NewFake(testTime)
	o := e.options(ipfamily.IPv4)
	o.Clock, o.PeerChunk = clk, 10
	m := e.manager(o)
	keys := make([]wireguard.PublicKey, 5)
	for i := range keys {
		keys[i] = pubKey(t)
		send(m, node(i+1, keys[i]))
	}
	bad := kernel.WireGuardKey(keys[2])
	refused := fmt.Errorf("refused: %w", kernel.ErrInvalid)
	e.ns.Refuse(func(op kernelfake.Op, obj any) error {
		if pc, ok := obj.(kernel.WireGuardPeerConfig); ok && pc.PublicKey == bad {
			return refused
		}
		return nil
	})
	res, err := m.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, wireguard.ErrPeer)
	require.ErrorIs(t, err, kernel.ErrInvalid)
	var oe *dataplane.ObjectError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, keys[2].String(), oe.Name)
	assert.Equal(t, dataplane.ObjectKind("peer"), oe.Kind)
	assert.Positive(t, res.RetryAfter)
	dev, _ := e.state("wg-np")
	assert.Len(t, dev.Peers, 4, "the others are written")
	s := m.Stats()
	assert.Equal(t, dataplane.DriverStats{Desired: 5, InKernel: 4, Failing: 1, Writes: s.Writes}, s)
	st, err := m.State(context.Background())
	require.NoError(t, err)
	require.Len(t, st.Failing, 1)
	assert.Equal(t, []dataplane.Drift{{Kind: "peer", Name: keys[2].String(),
		Want: keys[2].String() + " endpoint 198.18.0.3:51820 allowed-ips 10.0.3.0/24"}}, st.Drift)

	// Not due yet: not tried, not planned.
	plan, err := m.Plan(context.Background())
	require.NoError(t, err)
	assert.True(t, plan.Empty(), "%v", plan)
	e.ns.ResetCounts()
	_, err = m.Apply(context.Background())
	require.ErrorIs(t, err, wireguard.ErrPeer)
	assert.Zero(t, e.ns.Writes())

	// Due, and no longer refused: written.
	e.ns.Refuse(nil)
	clk.Advance(time.Minute)
	plan, err = m.Plan(context.Background())
	require.NoError(t, err)
	require.Len(t, plan.Writes, 1)
	assert.Equal(t, "+ peer "+keys[2].String()+" endpoint 198.18.0.3:51820 allowed-ips 10.0.3.0/24", plan.Writes[0].String())
	_, err = m.Apply(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 0, m.Stats().Failing)
	dev, _ = e.state("wg-np")
	assert.Len(t, dev.Peers, 5)
}
