package wireguard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
	"github.com/nodeplane/nodeplane/routetable"
)

// Route classes of the Manager's table.
const (
	classPeers     routetable.RouteClass = 10
	classThrow     routetable.RouteClass = 20
	classFailClose routetable.RouteClass = 30
	classEscape    routetable.RouteClass = 40
)

// FailClosedMetric is the metric of the blackhole routes that keep a
// peer's prefixes from falling back to the main table when the device is
// gone (Options.FailOpen): above the metric of the routes through the
// device (0, and 1024 for IPv6), so that those win while they exist.
const FailClosedMetric = 4096

// Manager keeps one family's WireGuard encryption in step with the cluster:
// the device, its key and peers, and what it declares on its two other
// drivers, the routing table and the rule. It is a dataplane.Manager
// (OnUpdate, CompleteDeferredWork) and a dataplane.Driver of the device
// (Apply, QueueResync, Phase): register it with AddManager, and it and
// the table and rule drivers (Drivers) with AddDriver. See the package
// documentation.
type Manager struct {
	cfg     config
	table   *routetable.Table
	rules   *routerule.Rules
	rule    routerule.Rule
	ruleDrv *ruleDriver

	mu     sync.Mutex
	closed bool
	in     *intent
	// nodes are the remote nodes' messages; blocks the owner of each
	// block of the family, and blocksOf each owner's blocks.
	nodes    map[string]cluster.Node
	blocks   map[netip.Prefix]string
	blocksOf map[string][]netip.Prefix
	enabled  bool
	rotate   bool
	// redeclare says the table must be told every route again (at start,
	// after a disable); otherwise only the intent's dirty prefixes.
	redeclare bool
	// endpoints are the nodes' endpoint addresses the routes were last
	// declared with (failClosed spares the prefixes that hold one).
	endpoints []netip.Addr
	// fullDiff says the device was re-read: compare every peer, not only
	// the intent's dirty keys.
	fullDiff bool

	dev        Device
	told       kernel.Link // the device's link as the table last heard of it
	mode       Mode
	modeReason string
	linkIndex  int
	cache      *devCache
	resync     bool

	key       PrivateKey
	pub       PublicKey // key's
	published PublicKey
	toPublish *PublicKey // to hand to OnPublicKey once Apply lets go of the lock
	// devOK says the latest Apply left the device configured, with the
	// routes declared: the rule may follow once they are written.
	devOK    bool
	ruleSet  bool
	ruleUp   bool
	sysctlOK bool
	// self is this node's tunnel address of the family (its cluster.Node
	// message's TunnelV4 or TunnelV6), the device's address; addrDue says
	// the device's addresses are to be checked against it.
	self    netip.Addr
	addrDue bool

	// failed are the peers the device refused, by public key.
	failed *dataplane.Ledger[PublicKey]
	// writes counts the device driver's kernel writes (Stats).
	writes uint64
}

// New validates opts and returns a Manager. It does no I/O and starts no
// goroutine: the first Apply reads the kernel and makes the device.
func New(opts Options) (*Manager, error) {
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	if cfg.KernelProvider == nil {
		cfg.KernelProvider = NewKernelProvider(KernelProviderOptions{Links: cfg.Kernel, WireGuard: cfg.Kernel})
	}
	if cfg.UserspaceProvider == nil {
		cfg.UserspaceProvider = NewUserspaceProvider(UserspaceProviderOptions{Links: cfg.Kernel, Doer: cfg.Kernel, Logger: cfg.Logger})
	}
	fam := routetable.IPv4
	if cfg.Family == ipfamily.IPv6 {
		fam = routetable.IPv6
	}
	tbl, err := routetable.New(routetable.Options{Kernel: cfg.Kernel, Family: fam, Table: cfg.Table,
		Ownership: routetable.ExclusivePolicy{}, NoConntrackCleanup: true, GracePeriod: -1,
		Logger: cfg.Logger, Clock: cfg.Clock})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	rules, err := routerule.New(routerule.Options{Family: fam, Kernel: cfg.Kernel,
		Priorities: []uint32{cfg.RulePriority}, Tables: []uint32{cfg.Table}, Logger: cfg.Logger, Clock: cfg.Clock,
		Name: "wireguard-rule-" + fam.String()})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m := &Manager{
		cfg: cfg, table: tbl, rules: rules,
		rule: routerule.Rule{Priority: cfg.RulePriority, Mark: cfg.FirewallMark, Mask: cfg.FirewallMark, Invert: true,
			Action: routerule.ActionLookup{Table: cfg.Table}},
		enabled: !cfg.Disabled, redeclare: true, failed: dataplane.NewLedger[PublicKey](dataplane.Backoff{}, cfg.Clock),
		nodes: map[string]cluster.Node{}, blocks: map[netip.Prefix]string{}, blocksOf: map[string][]netip.Prefix{},
	}
	m.in = newIntent(&m.cfg)
	m.ruleDrv = &ruleDriver{m: m}
	return m, nil
}

// Drivers returns the Manager's three drivers, for the loop's AddDriver,
// in the order of their phases: the Manager itself (the device, its key
// and peers; PhaseTunnelL2), the rule (RuleDriver, PhaseTunnelL2, whose
// ApplyDeletions follows the routes), and the routing table (a
// routetable.Table; PhaseRoutes). Each is resynced and retried by the loop
// on its own.
func (m *Manager) Drivers() []dataplane.Driver {
	return []dataplane.Driver{m, m.ruleDrv, m.table}
}

// Table returns the routing table the Manager declares its routes on, a
// driver of its own (register it with the loop: see Drivers).
func (m *Manager) Table() *routetable.Table { return m.table }

// RuleDriver returns the driver of the Manager's rule (register it with
// the loop: see Drivers), a dataplane.DeletionApplier whose two halves
// stand around the routes of a pass. Enabled, it adds the rule only after
// the device is configured and every route is in the table (its
// ApplyDeletions, after the routes), so the rule never sends traffic to a
// table without them, and keeps it (a rule an earlier run left is adopted,
// never removed while the routes are written). Disabled, it removes the
// rule, then withdraws the routes (its Apply, before the table's), and
// deletes the device once both are gone (ApplyDeletions).
func (m *Manager) RuleDriver() dataplane.Driver { return m.ruleDrv }

// Name returns "wireguard-IPv4" or "wireguard-IPv6", for the loop's logs
// and the device driver's Plan and State.
func (m *Manager) Name() string { return "wireguard-" + m.cfg.Family.String() }

// Phase implements dataplane.Driver: the device and its peers are written
// in dataplane.PhaseTunnelL2, before the routes through it (the table's,
// in PhaseRoutes) and the rule (RuleDriver, after them).
func (m *Manager) Phase() dataplane.Phase { return dataplane.PhaseTunnelL2 }

// OnUpdate records a message: cluster.Node, cluster.NodeRemove,
// cluster.Block, cluster.BlockRemove, RotateKey or SetEnabled (also by
// pointer); it ignores every other type. It does no I/O. A node offers
// its WireGuard key of the Manager's family, its underlay address of the Manager's family as the
// endpoint (on Options.ListenPort) and its tunnel address of the family;
// the blocks it owns are its allowed IPs and routes. This node's own
// messages are ignored (its key is the Manager's). An invalid message
// (its Validate) is logged and dropped, and the node's earlier state
// stays.
func (m *Manager) OnUpdate(msg any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch u := msg.(type) {
	case cluster.Node:
		m.onNode(&u)
	case *cluster.Node:
		if u != nil {
			m.onNode(u)
		}
	case cluster.NodeRemove:
		m.onNodeRemove(&u)
	case *cluster.NodeRemove:
		if u != nil {
			m.onNodeRemove(u)
		}
	case cluster.Block:
		m.onBlock(&u)
	case *cluster.Block:
		if u != nil {
			m.onBlock(u)
		}
	case cluster.BlockRemove:
		m.onBlockRemove(&u)
	case *cluster.BlockRemove:
		if u != nil {
			m.onBlockRemove(u)
		}
	case RotateKey, *RotateKey:
		m.rotate = true
	case SetEnabled:
		m.setEnabled(u.Enabled)
	case *SetEnabled:
		if u != nil {
			m.setEnabled(u.Enabled)
		}
	}
}

func (m *Manager) onNode(n *cluster.Node) {
	if err := n.Validate(); err != nil {
		m.cfg.Logger.Warn("wireguard: dropping invalid node", "err", err)
		return
	}
	if n.Name == m.cfg.NodeName {
		m.setSelf(n)
		return
	}
	m.nodes[n.Name] = *n
	m.refreshNode(n.Name)
}

func (m *Manager) onNodeRemove(r *cluster.NodeRemove) {
	if err := r.Validate(); err != nil {
		m.cfg.Logger.Warn("wireguard: dropping invalid node removal", "err", err)
		return
	}
	if r.Name == m.cfg.NodeName {
		m.setSelf(nil)
		return
	}
	delete(m.nodes, r.Name)
	m.refreshNode(r.Name)
}

// setSelf takes this node's message (nil: removed): its tunnel address of
// the family becomes the device's address. Connections masqueraded as
// they leave through the device (a NodePort connection sent to another
// node's backend) take the device's address as their source; it is of
// this node's pod CIDR, which the peers accept from this node, where
// another of the node's addresses (the underlay's) would be dropped.
func (m *Manager) setSelf(n *cluster.Node) {
	var a netip.Addr
	if n != nil {
		a = n.TunnelV4
		if m.cfg.Family == ipfamily.IPv6 {
			a = n.TunnelV6
		}
	}
	if a != m.self {
		m.self, m.addrDue = a, true
	}
}

// selfPrefix is the device's address as a full-length prefix; invalid for
// none.
func (m *Manager) selfPrefix() netip.Prefix {
	if !m.self.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(m.self, m.self.BitLen())
}

func (m *Manager) onBlock(b *cluster.Block) {
	if err := b.Validate(); err != nil {
		m.cfg.Logger.Warn("wireguard: dropping invalid block", "err", err)
		return
	}
	if !m.cfg.Family.ContainsPrefix(b.CIDR) {
		return
	}
	old, had := m.blocks[b.CIDR]
	if had && old == b.Node {
		return
	}
	m.blocks[b.CIDR] = b.Node
	if had {
		m.blocksOf[old] = slices.DeleteFunc(m.blocksOf[old], func(p netip.Prefix) bool { return p == b.CIDR })
		m.refreshNode(old)
	}
	m.blocksOf[b.Node] = append(m.blocksOf[b.Node], b.CIDR)
	m.refreshNode(b.Node)
}

func (m *Manager) onBlockRemove(r *cluster.BlockRemove) {
	if err := r.Validate(); err != nil {
		m.cfg.Logger.Warn("wireguard: dropping invalid block removal", "err", err)
		return
	}
	old, had := m.blocks[r.CIDR]
	if !had {
		return
	}
	delete(m.blocks, r.CIDR)
	m.blocksOf[old] = slices.DeleteFunc(m.blocksOf[old], func(p netip.Prefix) bool { return p == r.CIDR })
	if len(m.blocksOf[old]) == 0 {
		delete(m.blocksOf, old)
	}
	m.refreshNode(old)
}

// refreshNode gives the intent what the Manager knows of node now: its
// peer from its cluster.Node and its blocks, or nothing when there is no
// cluster.Node of it (this node's included).
func (m *Manager) refreshNode(name string) {
	n, ok := m.nodes[name]
	if !ok {
		if _, known := m.in.nodes[name]; known {
			m.in.set(name, nil)
		}
		return
	}
	f := m.cfg.Family
	p := nodePeer{Node: name, PublicKey: PublicKey(n.WireGuardKey(f)), CIDRs: slices.Clone(m.blocksOf[name])}
	if u := n.Underlay(f); u.IsValid() {
		p.Endpoint = netip.AddrPortFrom(u, 0)
	}
	// The tunnel address is routed on its own unless a block of the node
	// holds it already.
	if t := n.Tunnel(f); t.IsValid() && !slices.ContainsFunc(p.CIDRs, func(b netip.Prefix) bool { return b.Contains(t) }) {
		p.TunnelAddr = t
	}
	m.in.set(name, &p)
}

func (m *Manager) setEnabled(on bool) {
	if m.enabled != on {
		m.enabled = on
		m.redeclare = true
		m.ruleSet = false
	}
}

// CompleteDeferredWork implements dataplane.Manager. OnUpdate already
// keeps the peers, routes and throws up to date, one node at a time (a
// change costs what it touches), so there is nothing left to do: Apply
// writes them.
func (m *Manager) CompleteDeferredWork(context.Context) error { return nil }

// QueueResync implements dataplane.Driver: the next Apply re-reads the
// device and its link. The table and the rule are drivers of their own,
// resynced by the loop.
func (m *Manager) QueueResync() {
	m.mu.Lock()
	m.resync = true
	m.sysctlOK = false
	m.mu.Unlock()
}

// Apply implements dataplane.Driver. Enabled, it makes or adopts the device
// (choosing the provider), sets its MTU and brings it up, loads or creates
// the private key (publishing the public key), writes the device settings
// and the peers that differ (in chunks of Options.PeerChunk), and declares
// the routes and throws on the table, whose own Apply writes them. A peer
// the device refuses does not stop the others: it is retried on its own
// backoff and reported in the *dataplane.PartialError Apply returns (see
// the package documentation).
// Disabled, it does nothing: the rule driver removes the rule, the routes
// and the device, in that order. A nil ctx is context.Background().
func (m *Manager) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	res, err := m.apply(ctx)
	publish := m.toPublish
	m.toPublish = nil
	m.mu.Unlock()
	if publish != nil && m.cfg.OnPublicKey != nil {
		m.cfg.OnPublicKey(*publish) // outside the lock: it may call the Manager
	}
	return res, err
}

func (m *Manager) apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if m.closed {
		return dataplane.ApplyResult{}, ErrClosed
	}
	m.devOK = false
	m.failed.Begin()
	if !m.enabled {
		m.failed.Retain(func(PublicKey) bool { return false })
		return dataplane.ApplyResult{}, nil // the rule driver takes everything down, in order
	}
	if err := m.ensureDevice(ctx); err != nil {
		return dataplane.ApplyResult{}, err
	}
	if m.addrDue || m.resync {
		n, err := tunnel.SyncAddr(ctx, m.cfg.Kernel, m.cfg.InterfaceName, m.linkIndex, m.cfg.Family, m.selfPrefix(), nil)
		m.writes += uint64(n)
		if err != nil {
			return dataplane.ApplyResult{}, fmt.Errorf("%w: %w", ErrDevice, err)
		}
		m.addrDue = false
	}
	if err := m.ensureConfig(ctx); err != nil {
		m.resync = true
		return dataplane.ApplyResult{}, err
	}
	if m.sysctlDue() {
		if err := m.cfg.Kernel.SetSysctl(ctx, srcValidMark, "1"); err != nil {
			return dataplane.ApplyResult{}, fmt.Errorf("wireguard: src_valid_mark: %w", err)
		}
		m.writes++
		m.sysctlOK = true
	}
	if err := m.declareRoutes(); err != nil {
		return dataplane.ApplyResult{}, err
	}
	m.devOK = true
	return dataplane.ApplyResult{RetryAfter: m.failed.RetryAfter()}, m.failed.Err()
}

// srcValidMark is the sysctl host encryption needs: replies to encrypted
// host traffic come back through the device while the packets that left
// carried the mark, so the reverse-path check must take the mark into
// account.
const srcValidMark = "net.ipv4.conf.all.src_valid_mark"

// sysctlDue decides whether Apply writes srcValidMark: with host
// encryption (IPv4), once after each resync.
func (m *Manager) sysctlDue() bool {
	return m.cfg.EncryptHostTraffic && m.cfg.Family == ipfamily.IPv4 && !m.sysctlOK
}

// routesReady reports whether the table holds every route declared, none
// pending.
func (m *Manager) routesReady() bool {
	s := m.table.Counters()
	return s.PendingUpdates == 0 && s.PendingDeletions == 0 && s.Desired == s.Declared
}

// declareRoutes tells the table the routes that changed: a prefix won by
// a peer goes through the device (and, fail-closed, to a blackhole behind
// it), one only not-peers list is thrown back to the main table. After a
// start or a disable it declares them all; so it does when the endpoints
// changed or a changed prefix holds one, since the throws that let the
// endpoints out of the blackholes follow every prefix holding them.
func (m *Manager) declareRoutes() error {
	in := m.in
	if eps := m.endpointAddrs(); !slices.Equal(eps, m.endpoints) {
		m.endpoints, m.redeclare = eps, true
	}
	if !m.redeclare {
		for p := range in.dirtyPrefixes {
			if len(m.endpointsIn(p)) > 0 {
				m.redeclare = true
				break
			}
		}
	}
	if m.redeclare {
		var targets, throws, holes []routetable.Target
		escapes := map[netip.Addr]bool{}
		for p, w := range in.winner {
			switch {
			case w == "":
				throws = append(throws, routetable.Target{CIDR: p, Type: routetable.TargetThrow})
			default:
				targets = append(targets, routetable.Target{CIDR: p})
				if hole, escape := m.failClosed(p); hole {
					holes = append(holes, failClosedTarget(p))
					for _, a := range escape {
						escapes[a] = true
					}
				}
			}
		}
		var outs []routetable.Target
		for a := range escapes {
			outs = append(outs, escapeTarget(a))
		}
		for _, c := range []struct {
			class   routetable.RouteClass
			iface   string
			targets []routetable.Target
		}{{classPeers, m.cfg.InterfaceName, targets}, {classThrow, routetable.InterfaceNone, throws},
			{classFailClose, routetable.InterfaceNone, holes}, {classEscape, routetable.InterfaceNone, outs}} {
			if err := m.table.SetRoutes(c.class, c.iface, c.targets); err != nil {
				return err
			}
		}
		m.redeclare = false
		clear(in.dirtyPrefixes)
		return nil
	}
	// No changed prefix holds an endpoint: none has escapes to change.
	for p := range in.dirtyPrefixes {
		key := routetable.RouteKey{CIDR: p}
		hole := failClosedTarget(p)
		w, routed := in.winner[p]
		removeHole := func() error { return m.table.RouteRemove(classFailClose, routetable.InterfaceNone, hole.Key()) }
		var err error
		switch {
		case routed && w != "":
			err = errors.Join(m.table.RouteRemove(classThrow, routetable.InterfaceNone, key),
				m.table.RouteUpdate(classPeers, m.cfg.InterfaceName, routetable.Target{CIDR: p}))
			if closed, _ := m.failClosed(p); closed {
				err = errors.Join(err, m.table.RouteUpdate(classFailClose, routetable.InterfaceNone, hole))
			} else {
				err = errors.Join(err, removeHole())
			}
		case routed:
			err = errors.Join(m.table.RouteRemove(classPeers, m.cfg.InterfaceName, key), removeHole(),
				m.table.RouteUpdate(classThrow, routetable.InterfaceNone, routetable.Target{CIDR: p, Type: routetable.TargetThrow}))
		default:
			err = errors.Join(m.table.RouteRemove(classPeers, m.cfg.InterfaceName, key), removeHole(),
				m.table.RouteRemove(classThrow, routetable.InterfaceNone, key))
		}
		if err != nil {
			return err
		}
		delete(in.dirtyPrefixes, p)
	}
	return nil
}

// withdrawRoutes withdraws every route from the table (the Manager is
// disabled); they are declared all again once it is enabled.
func (m *Manager) withdrawRoutes() error {
	for _, c := range []struct {
		class routetable.RouteClass
		iface string
	}{{classPeers, m.cfg.InterfaceName}, {classThrow, routetable.InterfaceNone}, {classFailClose, routetable.InterfaceNone},
		{classEscape, routetable.InterfaceNone}} {
		if err := m.table.SetRoutes(c.class, c.iface, nil); err != nil {
			return err
		}
	}
	m.redeclare = true
	return nil
}

// deleteDevice deletes the device, once the Manager is disabled and its
// rule and routes are gone: the Manager's own, or a kernel device an
// earlier run left (a userspace one died with its process).
func (m *Manager) deleteDevice(ctx context.Context) error {
	if m.dev != nil {
		if err := m.dev.Delete(ctx); err != nil {
			return fmt.Errorf("%w: deleting %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.writes++
		m.dev, m.cache = nil, nil
		return nil
	}
	l, err := m.cfg.Kernel.LinkByName(ctx, m.cfg.InterfaceName)
	switch {
	case errors.Is(err, kernel.ErrNotFound):
		return nil
	case err != nil:
		return err
	case l.Kind == kernel.KindWireGuard:
		if err := m.cfg.Kernel.DeleteLink(ctx, l.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
			return err
		}
		m.writes++
	}
	return nil
}

// Status returns what the Manager knows about itself.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Status{Enabled: m.enabled, Mode: m.mode, ModeReason: m.modeReason, Device: m.cfg.InterfaceName,
		PublicKey: m.published, RuleInstalled: m.ruleUp}
	s.Peers = len(m.in.peers)
	s.NotPeers = m.in.notPeers()
	s.Conflicts = m.in.conflicts()
	return s
}

// PeerStats reads the device's peers' counters, gives each to
// Options.Metrics (if set) and returns them, ordered by node name. A
// Manager without a device returns none.
func (m *Manager) PeerStats(ctx context.Context) ([]PeerStats, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	dev := m.dev
	nodeOf := make(map[PublicKey]string, len(m.in.peers))
	for k, p := range m.in.peers {
		nodeOf[k] = p.node
	}
	m.mu.Unlock()
	if dev == nil {
		return nil, nil
	}
	st, err := dev.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrDevice, m.cfg.InterfaceName, err)
	}
	out := make([]PeerStats, 0, len(st.Peers))
	for _, p := range st.Peers {
		ps := PeerStats{PublicKey: p.PublicKey, LastHandshake: p.LastHandshake, ReceiveBytes: p.ReceiveBytes, TransmitBytes: p.TransmitBytes}
		ps.Node = nodeOf[p.PublicKey]
		out = append(out, ps)
	}
	slices.SortFunc(out, func(a, b PeerStats) int {
		if a.Node != b.Node {
			if a.Node < b.Node {
				return -1
			}
			return 1
		}
		return compareKeys(a.PublicKey, b.PublicKey)
	})
	if m.cfg.Metrics != nil {
		for _, ps := range out {
			m.cfg.Metrics.ObservePeer(ps)
		}
	}
	return out, nil
}

// Close releases the device handle: a userspace device stops (its
// goroutines, TUN interface and control socket go), a kernel device stays
// for the next run to adopt. Routes and the rule stay too: a restarted
// Manager adopts them and writes only the difference (use SetEnabled to
// remove everything); meanwhile, fail-closed, the blackholes drop the
// traffic that went through a userspace device (Options.FailOpen). Close is idempotent; later calls of Apply fail with
// ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.dev == nil {
		return nil
	}
	err := m.dev.Close()
	m.dev = nil
	return err
}

// Run blocks until ctx ends, then closes the Manager (see Close), so the
// userspace device lives exactly as long as the agent's context.
func (m *Manager) Run(ctx context.Context) error {
	<-ctx.Done()
	return m.Close()
}
