package vxlan

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
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/routetable"
)

// DefaultSetName is the name (before the Sets' own prefix) of the set of
// node underlay addresses when Options.SetName is empty.
const DefaultSetName = "vxlan-nodes"

// Kernel is what a Manager needs of one network namespace: what its
// Driver needs (links, addresses, neighbours, FDB). A *kernel.Namespace
// and a kernelfake.Namespace implement it.
type Kernel = DriverKernel

// RouteTable is where a Manager declares its routes: a *routetable.Table
// of the Manager's family (usually the main table), which the agent
// registers with its dataplane.Loop.
type RouteTable interface {
	// Family is the table's family.
	Family() Family
	// RouteUpdate and RouteRemove declare and withdraw one route of a
	// (class, interface) pair.
	RouteUpdate(class routetable.RouteClass, iface string, target routetable.Target) error
	RouteRemove(class routetable.RouteClass, iface string, key routetable.RouteKey) error
	// OnIfaceStateChanged tells the table the device's index and state.
	OnIfaceStateChanged(name string, index int, state kernel.LinkState)
}

// Options configure a Manager.
type Options struct {
	// Family is the Manager's family: of its device, its underlay and its
	// blocks. Run one Manager per family. Required.
	Family Family
	// NodeName is this node's name: the VTEP message of that node
	// configures the device, and its blocks get blackholes. Required.
	NodeName string
	// Kernel is the network namespace. Required.
	Kernel Kernel
	// Routes is the route table the routes are declared on. Required
	// unless Disabled.
	Routes RouteTable
	// Mode says how remote blocks are routed; the zero value is Always.
	Mode Mode
	// Device is the device's name; empty means DefaultDeviceV4 or
	// DefaultDeviceV6.
	Device string
	// VNI and Port are the device's; 0 means DefaultVNI and DefaultPort.
	VNI  uint32
	Port uint16
	// MTU fixes the device MTU (and the MTU of the routes through it).
	// Zero derives it: the host MTU of the last mtu.Result message less
	// the VXLAN overhead (mtu.VXLAN: 50, 70 over IPv6), or before any such
	// message the parent's MTU less it.
	MTU int
	// Classes are the route classes; the zero value means DefaultClasses.
	Classes Classes
	// Sets, when set, gets one hash:net set (SetName) of every node's
	// underlay address of the family plus ExtraCIDRs, for rules that
	// accept VXLAN only from known nodes. Its family must be the
	// Manager's. Register it with the loop as usual.
	Sets ipsets.Sets
	// SetName is the set's name; empty means DefaultSetName.
	SetName string
	// ExtraCIDRs are added to the set (nodes outside the cluster's
	// records that may send VXLAN).
	ExtraCIDRs []netip.Prefix
	// Disabled makes a Manager that only removes the device (left by an
	// earlier run with VXLAN on): it declares no routes, entries or set.
	Disabled bool
	// Clock paces the Driver's retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Stats are a Manager's counters and sizes.
type Stats struct {
	// Nodes is the number of nodes with a VTEP of the family.
	Nodes int
	// Blocks is the number of blocks of the family.
	Blocks int
	// TunnelRoutes, DirectRoutes and Blackholes count the blocks routed
	// each way; Unrouted counts the blocks without a route (their node is
	// unknown, or in Never mode on another subnet).
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

// Manager is a dataplane.Manager that turns VTEP and block messages into
// the VXLAN device, its neighbour and FDB entries (through its Driver), the
// routes of the blocks (through Options.Routes) and the node-address set
// (through Options.Sets). See the package documentation.
type Manager struct {
	opts   Options
	core   *overlay.Core
	driver *Driver
	log    *slog.Logger

	local    *VTEP // this node's VTEP
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
	if !opts.Family.Valid() {
		return nil, fmt.Errorf("%w: family %v", ErrInvalidOptions, opts.Family)
	}
	if opts.Mode > Never {
		return nil, fmt.Errorf("%w: mode %v", ErrInvalidOptions, opts.Mode)
	}
	if !opts.Disabled {
		if opts.Routes == nil {
			return nil, fmt.Errorf("%w: no Routes", ErrInvalidOptions)
		}
		if opts.Routes.Family() != opts.Family {
			return nil, fmt.Errorf("%w: an %v route table for an %v manager", ErrInvalidOptions, opts.Routes.Family(), opts.Family)
		}
	}
	if opts.VNI > MaxVNI {
		return nil, fmt.Errorf("%w: VNI %d above %d", ErrInvalidOptions, opts.VNI, MaxVNI)
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
	if opts.Sets != nil && opts.Sets.Family() != opts.Family {
		return nil, fmt.Errorf("%w: an %v set backend for an %v manager", ErrInvalidOptions, opts.Sets.Family(), opts.Family)
	}
	for _, p := range opts.ExtraCIDRs {
		if err := opts.Family.CheckNet(p); err != nil {
			return nil, fmt.Errorf("%w: extra CIDR: %w", ErrInvalidOptions, err)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, log: log}
	var err error
	m.driver, err = NewDriver(DriverOptions{Kernel: opts.Kernel, Family: opts.Family, Name: opts.Device,
		OnDevice: m.onDevice, Clock: opts.Clock, Logger: log})
	if err != nil {
		return nil, err
	}
	m.opts.Device = m.driver.Device()
	co := overlay.CoreOptions{
		Family: opts.Family, NodeName: opts.NodeName, Kernel: opts.Kernel, Routes: opts.Routes,
		Classes: overlay.Classes{Tunnel: opts.Classes.Tunnel, Direct: opts.Classes.Direct, Blackhole: opts.Classes.Blackhole},
		Mode:    opts.Mode.overlay(), Device: m.opts.Device, Encap: mtu.VXLAN, MTU: opts.MTU,
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

// Name returns "vxlan-manager-" and the family, for the loop's logs.
func (m *Manager) Name() string { return "vxlan-manager-" + m.opts.Family.String() }

func (m *Manager) onDevice(name string, index int, state kernel.LinkState) {
	if m.opts.Routes != nil {
		m.opts.Routes.OnIfaceStateChanged(name, index, state)
	}
}

// OnLinkUpdate tells the Manager about a link, as ifacemonitor reports it
// (wire Options.OnLinkState to it). A change of the device makes the
// Driver check it; a change of an interface holding a subnet or the local
// address makes the next pass read the host's addresses again. It never
// waits and may be called from any goroutine.
func (m *Manager) OnLinkUpdate(u ifacemonitor.LinkUpdate) {
	m.driver.OnLinkState(u.Name, u.Index, u.State)
	if m.core.OnLinkState(u.Name, u.Index, u.State, u.MTU) {
		m.driver.wakeLoop()
	}
}

// OnAddrs tells the Manager an interface's addresses, as ifacemonitor
// reports them (wire Options.OnAddrs to it): a change of its subnets, or of
// whether it holds this node's underlay address, makes the next pass read
// the host again and route same-subnet nodes accordingly. It never waits
// and may be called from any goroutine.
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
	m.log.Warn("vxlan: message rejected", "err", err)
}

// OnUpdate implements dataplane.Manager: it records VTEP, VTEPRemove,
// BlockUpdate, BlockRemove and mtu.Result messages (values or pointers)
// and ignores the rest. An invalid message is rejected (counted in Stats,
// logged) and changes nothing. It does no I/O.
func (m *Manager) OnUpdate(msg any) {
	if m.opts.Disabled {
		return
	}
	switch v := msg.(type) {
	case VTEP:
		m.onVTEP(&v)
	case *VTEP:
		if v != nil {
			m.onVTEP(v)
		}
	case VTEPRemove:
		m.onVTEPRemove(&v)
	case *VTEPRemove:
		if v != nil {
			m.onVTEPRemove(v)
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

// family returns the fields of v of the Manager's family.
func (m *Manager) family(v *VTEP) (underlay, tunnel netip.Addr, mac []byte) {
	if m.opts.Family == IPv6 {
		return v.UnderlayV6, v.TunnelV6, v.MACV6
	}
	return v.UnderlayV4, v.TunnelV4, v.MACV4
}

func (m *Manager) onVTEP(v *VTEP) {
	if err := v.Validate(); err != nil {
		m.reject(err)
		return
	}
	c := *v
	c.MACV4, c.MACV6 = slices.Clone(v.MACV4), slices.Clone(v.MACV6)
	if v.Node == m.opts.NodeName {
		m.local = &c
	}
	underlay, tunnel, mac := m.family(&c)
	if !underlay.IsValid() {
		m.removeNode(v.Node)
		return
	}
	n := overlay.Node{Underlay: underlay}
	if tunnel.IsValid() && mac != nil {
		n.Gateway = tunnel
	}
	m.core.SetNode(v.Node, n)
	if v.Node == m.opts.NodeName {
		return
	}
	if n.Gateway.IsValid() && m.opts.Mode != Never {
		// Validated above: SetRemote cannot refuse it.
		_ = m.driver.SetRemote(v.Node, Remote{TunnelIP: tunnel, MAC: mac, Underlay: underlay})
	} else {
		m.driver.RemoveRemote(v.Node)
	}
}

func (m *Manager) removeNode(node string) {
	m.core.RemoveNode(node)
	m.driver.RemoveRemote(node)
}

func (m *Manager) onVTEPRemove(r *VTEPRemove) {
	if err := r.Validate(); err != nil {
		m.reject(err)
		return
	}
	if r.Node == m.opts.NodeName {
		m.local = nil
	}
	m.removeNode(r.Node)
}

func (m *Manager) onBlock(b *BlockUpdate) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	if m.opts.Family.ContainsPrefix(b.CIDR) {
		m.core.Routes().SetBlock(b.CIDR, b.Node)
	}
}

func (m *Manager) onBlockRemove(b *BlockRemove) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	if m.opts.Family.ContainsPrefix(b.CIDR) {
		m.core.Routes().RemoveBlock(b.CIDR)
	}
}

// CompleteDeferredWork implements dataplane.Manager: it reads the host's
// links and addresses when they may have changed (first call, QueueResync,
// OnLinkUpdate, OnAddrs), declares the device on the Driver, and declares
// the routes and set members whose inputs changed. Failing to read the
// host is an error wrapping ErrRead (the loop calls it again); nothing is
// declared then.
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if m.opts.Disabled {
		return m.driver.SetDevice(nil)
	}
	err := m.core.Sync(ctx, m.device)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRead, err)
	}
	return nil
}

// device declares the device from this node's VTEP and reports whether
// tunnel routes can be declared.
func (m *Manager) device(l overlay.Local) bool {
	if m.local == nil || m.opts.Mode == Never {
		_ = m.driver.SetDevice(nil)
		return false
	}
	underlay, tunnel, mac := m.family(m.local)
	if !underlay.IsValid() || !tunnel.IsValid() || mac == nil {
		_ = m.driver.SetDevice(nil)
		return false
	}
	err := m.driver.SetDevice(&Device{VNI: m.opts.VNI, Port: m.opts.Port, Local: underlay, MAC: mac, Address: tunnel, MTU: l.MTU})
	if err != nil {
		m.log.Warn("vxlan: device refused", "err", err)
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
