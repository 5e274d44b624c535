package ipip

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/overlay"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/routetable"
)

// DefaultSetName is the name (before the Sets' own prefix) of the set of
// node underlay addresses when Options.SetName is empty.
const DefaultSetName = "ipip-nodes"

// Kernel is what a Manager needs of one network namespace: its links and
// addresses. A *kernel.Namespace and a kernelfake.Namespace implement it.
type Kernel = DriverKernel

// RouteTable is where a Manager declares its routes: an IPv4
// *routetable.Table (usually the main table), which the agent registers
// with its dataplane.Loop.
type RouteTable interface {
	// Family is the table's family; it must be IPv4.
	Family() ipfamily.Family
	// RouteUpdate and RouteRemove declare and withdraw one route of a
	// (class, interface) pair.
	RouteUpdate(class routetable.RouteClass, iface string, target routetable.Target) error
	RouteRemove(class routetable.RouteClass, iface string, key routetable.RouteKey) error
	// OnIfaceStateChanged tells the table the device's index and state.
	OnIfaceStateChanged(name string, index int, state kernel.LinkState)
}

// Options configure a Manager. IPIP is IPv4 only.
type Options struct {
	// NodeName is this node's name: its Node message configures the
	// device, and its blocks get blackholes. Required.
	NodeName string
	// Kernel is the network namespace. Required.
	Kernel Kernel
	// Routes is the IPv4 route table the routes are declared on. Required
	// unless Disabled.
	Routes RouteTable
	// Mode says how remote blocks are routed; the zero value is Always.
	Mode Mode
	// Device is the device's name; empty means DefaultDevice (tunl0).
	Device string
	// MTU fixes the device MTU (and the MTU of the routes through it).
	// Zero derives it: the host MTU of the last mtu.Result message less
	// the IPIP overhead (mtu.IPIP: 20), or before any such message the
	// parent's MTU less it.
	MTU int
	// Classes are the route classes; the zero value means DefaultClasses.
	Classes Classes
	// Sets, when set, gets one hash:net set (SetName) of every node's
	// underlay address plus ExtraCIDRs, for rules that accept IPIP only
	// from known nodes. It must be an IPv4 backend.
	Sets ipsets.Sets
	// SetName is the set's name; empty means DefaultSetName.
	SetName string
	// ExtraCIDRs are added to the set.
	ExtraCIDRs []netip.Prefix
	// Disabled makes a Manager that only removes the device (or, for
	// tunl0, its address): it declares no routes or set.
	Disabled bool
	// Clock paces the Driver's retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Stats are a Manager's counters and sizes.
type Stats struct {
	// Nodes is the number of nodes with an underlay address.
	Nodes int
	// Blocks is the number of blocks.
	Blocks int
	// TunnelRoutes, DirectRoutes and Blackholes count the blocks routed
	// each way; Unrouted counts the blocks without a route.
	TunnelRoutes, DirectRoutes, Blackholes, Unrouted int
	// SetMembers is the size of the node-address set.
	SetMembers int
	// Rejected counts messages refused as invalid; LastRejected is the
	// last one's error.
	Rejected     int
	LastRejected error
	// Driver is the Driver's.
	Driver DriverStats
}

// Manager is a dataplane.Manager that turns Node and block messages into
// the IPIP device (through its Driver), the routes of the blocks (through
// Options.Routes) and the node-address set (through Options.Sets). See the
// package documentation.
type Manager struct {
	opts   Options
	core   *overlay.Core
	driver *Driver
	log    *slog.Logger

	local    *Node // this node's
	rejected int
	lastRej  error
}

// New returns a Manager and its Driver. It validates opts and does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.NodeName == "" {
		return nil, fmt.Errorf("%w: no NodeName", ErrInvalidOptions)
	}
	if opts.Kernel == nil {
		return nil, fmt.Errorf("%w: no Kernel", ErrInvalidOptions)
	}
	if opts.Mode > Never {
		return nil, fmt.Errorf("%w: mode %v", ErrInvalidOptions, opts.Mode)
	}
	if !opts.Disabled {
		if opts.Routes == nil {
			return nil, fmt.Errorf("%w: no Routes", ErrInvalidOptions)
		}
		if opts.Routes.Family() != ipfamily.IPv4 {
			return nil, fmt.Errorf("%w: an %v route table (IPIP is IPv4 only)", ErrInvalidOptions, opts.Routes.Family())
		}
	}
	if opts.MTU < 0 || (opts.MTU > 0 && opts.MTU < 68) || opts.MTU > 65535 {
		return nil, fmt.Errorf("%w: MTU %d", ErrInvalidOptions, opts.MTU)
	}
	if opts.Classes == (Classes{}) {
		opts.Classes = DefaultClasses
	}
	if c := opts.Classes; c.Tunnel == c.Direct || c.Tunnel == c.Blackhole || c.Direct == c.Blackhole {
		return nil, fmt.Errorf("%w: classes %+v are not distinct", ErrInvalidOptions, c)
	}
	if opts.SetName == "" {
		opts.SetName = DefaultSetName
	}
	if opts.Sets != nil && opts.Sets.Family() != ipfamily.IPv4 {
		return nil, fmt.Errorf("%w: an %v set backend (IPIP is IPv4 only)", ErrInvalidOptions, opts.Sets.Family())
	}
	for _, p := range opts.ExtraCIDRs {
		if err := ipfamily.IPv4.CheckNet(p); err != nil {
			return nil, fmt.Errorf("%w: extra CIDR: %w", ErrInvalidOptions, err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, log: log}
	var err error
	m.driver, err = NewDriver(DriverOptions{Kernel: opts.Kernel, Name: opts.Device, OnDevice: m.onDevice, Clock: opts.Clock, Logger: log})
	if err != nil {
		return nil, err
	}
	m.opts.Device = m.driver.Device()
	co := overlay.CoreOptions{
		Family: ipfamily.IPv4, NodeName: opts.NodeName, Kernel: opts.Kernel, Routes: opts.Routes,
		Classes: overlay.Classes{Tunnel: opts.Classes.Tunnel, Direct: opts.Classes.Direct, Blackhole: opts.Classes.Blackhole},
		Mode:    opts.Mode.overlay(), Device: m.opts.Device, Encap: mtu.IPIP, MTU: opts.MTU,
		SetName: opts.SetName, Extra: slices.Clone(opts.ExtraCIDRs), Logger: log,
	}
	if opts.Sets != nil {
		co.Sets = opts.Sets
	}
	m.core = overlay.NewCore(co)
	m.driver.onSync = m.core.MarkHostDirty
	return m, nil
}

// Driver returns the Manager's Driver, to register with the loop beside the
// Manager.
func (m *Manager) Driver() *Driver { return m.driver }

// Name returns "ipip-manager", for the loop's logs.
func (m *Manager) Name() string { return "ipip-manager" }

func (m *Manager) onDevice(name string, index int, state kernel.LinkState) {
	if m.opts.Routes != nil {
		m.opts.Routes.OnIfaceStateChanged(name, index, state)
	}
}

// OnLinkUpdate tells the Manager about a link, as ifacemonitor reports it
// (wire Options.OnLinkState to it): a change of the device makes the
// Driver check it; a change of an interface holding a subnet or the local
// address makes the next pass read the host again. It never waits and may
// be called from any goroutine.
func (m *Manager) OnLinkUpdate(u ifacemonitor.LinkUpdate) {
	m.driver.OnLinkState(u.Name, u.Index, u.State)
	if m.core.OnLinkState(u.Name, u.Index, u.State, u.MTU) {
		m.driver.wakeLoop()
	}
}

// OnAddrs tells the Manager an interface's addresses, as ifacemonitor
// reports them (wire Options.OnAddrs to it). It never waits and may be
// called from any goroutine.
func (m *Manager) OnAddrs(name string, addrs []netip.Prefix) {
	if m.core.OnAddrs(name, addrs) {
		m.driver.wakeLoop()
	}
}

// QueueResync implements dataplane.Resyncer: the next CompleteDeferredWork
// reads the host's links and addresses again.
func (m *Manager) QueueResync() { m.core.MarkHostDirty() }

func (m *Manager) reject(err error) {
	m.rejected++
	m.lastRej = err
	m.log.Warn("ipip: message rejected", "err", err)
}

// OnUpdate implements dataplane.Manager: it records Node, NodeRemove,
// BlockUpdate, BlockRemove and mtu.Result messages (values or pointers)
// and ignores the rest. An invalid message is rejected (counted in Stats,
// logged) and changes nothing. It does no I/O.
func (m *Manager) OnUpdate(msg any) {
	if m.opts.Disabled {
		return
	}
	switch v := msg.(type) {
	case Node:
		m.onNode(&v)
	case *Node:
		if v != nil {
			m.onNode(v)
		}
	case NodeRemove:
		m.onNodeRemove(&v)
	case *NodeRemove:
		if v != nil {
			m.onNodeRemove(v)
		}
	case BlockUpdate:
		m.onBlock(&v)
	case *BlockUpdate:
		if v != nil {
			m.onBlock(v)
		}
	case BlockRemove:
		m.onBlockRemove(&v)
	case *BlockRemove:
		if v != nil {
			m.onBlockRemove(v)
		}
	case mtu.Result:
		m.core.SetHostMTU(v.Host.MTU)
	case *mtu.Result:
		if v != nil {
			m.core.SetHostMTU(v.Host.MTU)
		}
	}
}

func (m *Manager) onNode(n *Node) {
	if err := n.Validate(); err != nil {
		m.reject(err)
		return
	}
	if n.Name == m.opts.NodeName {
		c := *n
		m.local = &c
	}
	if !n.Underlay.IsValid() {
		m.core.RemoveNode(n.Name)
		return
	}
	// IPIP's next hop is the node's underlay address itself.
	m.core.SetNode(n.Name, overlay.Node{Underlay: n.Underlay, Gateway: n.Underlay})
}

func (m *Manager) onNodeRemove(r *NodeRemove) {
	if err := r.Validate(); err != nil {
		m.reject(err)
		return
	}
	if r.Name == m.opts.NodeName {
		m.local = nil
	}
	m.core.RemoveNode(r.Name)
}

func (m *Manager) onBlock(b *BlockUpdate) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	m.core.Routes().SetBlock(b.CIDR, b.Node)
}

func (m *Manager) onBlockRemove(b *BlockRemove) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	m.core.Routes().RemoveBlock(b.CIDR)
}

// CompleteDeferredWork implements dataplane.Manager: it reads the host's
// links and addresses when they may have changed, declares the device on
// the Driver, and declares the routes and set members whose inputs
// changed. Failing to read the host is an error wrapping ErrRead; nothing
// is declared then.
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if m.opts.Disabled {
		return m.driver.SetDevice(nil)
	}
	if err := m.core.Sync(ctx, m.device); err != nil {
		return fmt.Errorf("%w: %w", ErrRead, err)
	}
	return nil
}

func (m *Manager) device(l overlay.Local) bool {
	n := m.local
	if n == nil || m.opts.Mode == Never || !n.Underlay.IsValid() {
		_ = m.driver.SetDevice(nil)
		return false
	}
	if err := m.driver.SetDevice(&Device{Local: n.Underlay, Address: n.TunnelAddr, MTU: l.MTU}); err != nil {
		m.log.Warn("ipip: device refused", "err", err)
		return false
	}
	return true
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	r := m.core.Routes()
	return Stats{
		Nodes: m.core.Nodes(), Blocks: r.Count(overlay.NoRoute) + r.Count(overlay.TunnelRoute) + r.Count(overlay.DirectRoute) + r.Count(overlay.Blackhole),
		TunnelRoutes: r.Count(overlay.TunnelRoute), DirectRoutes: r.Count(overlay.DirectRoute),
		Blackholes: r.Count(overlay.Blackhole), Unrouted: r.Count(overlay.NoRoute),
		SetMembers: m.core.Members().Len(), Rejected: m.rejected, LastRejected: m.lastRej,
		Driver: m.driver.Stats(),
	}
}

var _ dataplane.Manager = (*Manager)(nil)
var _ dataplane.Driver = (*Driver)(nil)
var _ dataplane.Wakeable = (*Driver)(nil)
