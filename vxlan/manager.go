package vxlan

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/overlay"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/netfilter"
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
	// NoBlackholes gives this node's blocks no blackhole route. By default
	// each gets one, so that traffic to an unallocated pod address is
	// dropped rather than sent back out; turn it off where another
	// component routes the blocks (a bridge CNI whose bridge has the
	// block's gateway address). A block that a connected subnet of a host
	// interface holds gets none anyway: its connected route holds the
	// block's key (or a more specific blackhole would swallow the local
	// pods' traffic), so the block is reported once, in a warning and in
	// Stats.BlackholeConflicts, rather than failed and retried forever.
	NoBlackholes bool
	// Sets, when set, gets one hash:net set (SetName) of every node's
	// underlay address of the family plus ExtraCIDRs, for rules that
	// accept VXLAN only from known nodes. Its family must be the
	// Manager's. Register it with the loop as usual.
	Sets netfilter.Sets
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
	// each way; Unrouted counts the blocks without a route (this node's
	// without a blackhole, or another whose node is unknown, or in Never
	// mode on another subnet).
	TunnelRoutes, DirectRoutes, Blackholes, Unrouted int
	// BlackholeConflicts counts this node's blocks that get no blackhole
	// because a connected subnet of a host interface holds them (see
	// Options.NoBlackholes); they count as Unrouted too.
	BlackholeConflicts int
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
	base   *overlay.Manager[Device]
	driver *Driver

	local *cluster.Node // this node's
}

// New returns a Manager and its Driver. It validates opts and does no I/O.
func New(opts Options) (*Manager, error) {
	o := overlay.ManagerOptions{
		Name: "vxlan", ErrInvalidOptions: ErrInvalidOptions, ErrRead: ErrRead,
		Family: opts.Family, NodeName: opts.NodeName, Kernel: opts.Kernel, Routes: opts.Routes, Mode: overlay.Mode(opts.Mode), NoBlackholes: opts.NoBlackholes,
		Check: func() error {
			if opts.VNI > MaxVNI {
				return fmt.Errorf("VNI %d above %d", opts.VNI, MaxVNI)
			}
			return nil
		},
		Encap: mtu.VXLAN, MTU: opts.MTU, Classes: overlay.Classes(opts.Classes), DefaultClasses: overlay.Classes(DefaultClasses),
		Sets: opts.Sets, SetName: opts.SetName, DefaultSetName: DefaultSetName, Extra: opts.ExtraCIDRs,
		Disabled: opts.Disabled, Logger: opts.Logger,
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{opts: opts}
	var err error
	m.driver, err = NewDriver(DriverOptions{Kernel: opts.Kernel, Family: opts.Family, Name: opts.Device,
		OnDevice: overlay.DeviceNotifier(o.Routes), Clock: opts.Clock, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	m.base = overlay.NewManager(o, overlay.ManagerDriver[Device]{
		Device: m.driver.dev, Set: m.driver.SetDevice, Want: m.wantDevice,
		Handlers: []func(any) bool{overlay.On(m.onNode), overlay.On(m.onNodeRemove)},
	})
	return m, nil
}

// Driver returns the Manager's Driver, to register with the loop beside the
// Manager.
func (m *Manager) Driver() *Driver { return m.driver }

// Name returns "vxlan-manager-" and the family, for the loop's logs.
func (m *Manager) Name() string { return "vxlan-manager-" + m.opts.Family.String() }

// OnLinkUpdate tells the Manager about a link, as ifacemonitor reports it
// (wire Options.OnLinkState to it). A change of the device makes the
// Driver check it; a change of an interface holding a subnet or the local
// address makes the next pass read the host's addresses again. It never
// waits and may be called from any goroutine.
func (m *Manager) OnLinkUpdate(u ifacemonitor.LinkUpdate) { m.base.OnLinkUpdate(u) }

// OnAddrs tells the Manager an interface's addresses, as ifacemonitor
// reports them (wire Options.OnAddrs to it): a change of its subnets, or of
// whether it holds this node's underlay address, makes the next pass read
// the host again and route same-subnet nodes accordingly. It never waits
// and may be called from any goroutine.
func (m *Manager) OnAddrs(name string, addrs []netip.Prefix) { m.base.OnAddrs(name, addrs) }

// QueueResync implements dataplane.Resyncer: the next CompleteDeferredWork
// reads the host's links and addresses again.
func (m *Manager) QueueResync() { m.base.QueueResync() }

// OnUpdate implements dataplane.Manager: it records cluster.Node,
// cluster.NodeRemove, cluster.Block, cluster.BlockRemove and mtu.Result
// messages (values or pointers)
// and ignores the rest. An invalid message is rejected (counted in Stats,
// logged) and changes nothing. It does no I/O.
func (m *Manager) OnUpdate(msg any) { m.base.OnUpdate(msg) }

func (m *Manager) onNode(n *cluster.Node) {
	if err := n.Validate(); err != nil {
		m.base.Reject(err)
		return
	}
	if n.Name == m.opts.NodeName {
		c := *n
		m.local = &c
	}
	f := m.opts.Family
	underlay, tunnel, mac := n.Underlay(f), n.Tunnel(f), n.VXLANMAC(f)
	if !underlay.IsValid() {
		m.removeNode(n.Name)
		return
	}
	o := overlay.Node{Underlay: underlay}
	if tunnel.IsValid() && !mac.IsZero() {
		o.Gateway = tunnel
	}
	m.base.Core().SetNode(n.Name, o)
	if n.Name == m.opts.NodeName {
		return
	}
	if o.Gateway.IsValid() && m.opts.Mode != Never {
		// Validated above: SetRemote cannot refuse it.
		_ = m.driver.SetRemote(n.Name, Remote{TunnelIP: tunnel, MAC: mac.HardwareAddr(), Underlay: underlay})
	} else {
		m.driver.RemoveRemote(n.Name)
	}
}

func (m *Manager) removeNode(node string) {
	m.base.Core().RemoveNode(node)
	m.driver.RemoveRemote(node)
}

func (m *Manager) onNodeRemove(r *cluster.NodeRemove) {
	if err := r.Validate(); err != nil {
		m.base.Reject(err)
		return
	}
	if r.Name == m.opts.NodeName {
		m.local = nil
	}
	m.removeNode(r.Name)
}

// CompleteDeferredWork implements dataplane.Manager: it reads the host's
// links and addresses when they may have changed (first call, QueueResync,
// OnLinkUpdate, OnAddrs), declares the device on the Driver, and declares
// the routes and set members whose inputs changed. Failing to read the
// host is an error wrapping ErrRead (the loop calls it again); nothing is
// declared then.
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	return m.base.CompleteDeferredWork(ctx)
}

// wantDevice returns the device this node's VTEP asks for: nil until it
// has an underlay address, a tunnel address and a MAC of the family.
func (m *Manager) wantDevice(l overlay.Local) *Device {
	if m.local == nil {
		return nil
	}
	f := m.opts.Family
	underlay, tunnel, mac := m.local.Underlay(f), m.local.Tunnel(f), m.local.VXLANMAC(f)
	if !underlay.IsValid() || !tunnel.IsValid() || mac.IsZero() {
		return nil
	}
	return &Device{VNI: m.opts.VNI, Port: m.opts.Port, Local: underlay, MAC: mac.HardwareAddr(), Address: tunnel, MTU: l.MTU}
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	s := m.base.Stats()
	return Stats{Nodes: s.Nodes, Blocks: s.Blocks, TunnelRoutes: s.TunnelRoutes, DirectRoutes: s.DirectRoutes,
		Blackholes: s.Blackholes, Unrouted: s.Unrouted, BlackholeConflicts: s.BlackholeConflicts, SetMembers: s.SetMembers, Rejected: s.Rejected,
		LastRejected: s.LastRejected, Driver: m.driver.Stats()}
}

var _ dataplane.Manager = (*Manager)(nil)
var _ dataplane.Driver = (*Driver)(nil)
var _ dataplane.Wakeable = (*Driver)(nil)
