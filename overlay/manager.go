package overlay

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/vxlan"
)

// Manager is a dataplane.Manager that turns cluster.Node, cluster.Block
// and mtu.Result messages into the routes of the blocks (through
// Options.Routes), the node-address set (through Options.Sets) and the
// device of its encapsulation (through its Driver: a vxlan.Driver, with
// the neighbour and FDB entry of every remote node, or an ipip.Driver;
// none for None). It is a dataplane.InterfaceObserver: the loop it is
// registered with tells it of the host's links and addresses. See the
// package documentation.
//
// OnUpdate, CompleteDeferredWork, OnLink and OnAddrs are called from the
// loop's goroutine; QueueResync from any.
type Manager struct {
	o    Options // validated, defaults filled in
	mode routeMode
	eng  *engine
	vx   *vxlan.Driver // for VXLAN
	ip   *ipip.Driver  // for IPIP

	local    *cluster.Node // this node's
	rejected int
	lastRej  error
}

// New returns a Manager and its Driver (Manager.Driver). It validates
// opts, returning an error wrapping ErrInvalidOptions, and does no I/O.
func New(opts Options) (*Manager, error) {
	o := opts
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	m := &Manager{o: o, mode: o.routeMode()}
	notify := func(name string, index int, state kernel.LinkState) {
		if o.Routes != nil {
			o.Routes.OnIfaceStateChanged(name, index, state)
		}
	}
	device := ""
	switch e := o.Encap.(type) {
	case VXLAN:
		d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: o.Kernel, Family: o.Family, Name: e.Device,
			OnDevice: notify, OnResync: m.QueueResync, Clock: o.Clock, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		m.vx, device = d, d.Device()
	case IPIP:
		d, err := ipip.NewDriver(ipip.DriverOptions{Kernel: o.Kernel, Name: e.Device,
			OnDevice: notify, OnResync: m.QueueResync, Clock: o.Clock, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
		}
		m.ip, device = d, d.Device()
	}
	_, _, overhead := o.Encap.defaults()
	eo := engineOptions{
		Family: o.Family, NodeName: o.NodeName, Kernel: o.Kernel, Classes: o.Classes, Mode: m.mode,
		NoBlackholes: o.NoBlackholes, Device: device, Encap: overhead, MTU: o.MTU,
		SetName: o.SetName, Extra: append([]netip.Prefix(nil), o.ExtraCIDRs...), Logger: o.Logger,
	}
	if o.Routes != nil {
		eo.Routes = o.Routes
	}
	if o.Sets != nil {
		eo.Sets = o.Sets
	}
	m.eng = newEngine(eo)
	return m, nil
}

// Name returns "overlay-", the encapsulation and the family
// ("overlay-vxlan-ipv4"), for the loop's logs.
func (m *Manager) Name() string { return "overlay-" + m.o.Encap.String() + "-" + m.o.Family.String() }

// Driver returns the driver of the device, to register with the loop
// beside the Manager: a *vxlan.Driver for VXLAN, an *ipip.Driver for IPIP,
// nil for None.
func (m *Manager) Driver() dataplane.Driver {
	switch {
	case m.vx != nil:
		return m.vx
	case m.ip != nil:
		return m.ip
	}
	return nil
}

// Device returns the name of the device; empty for None.
func (m *Manager) Device() string {
	switch {
	case m.vx != nil:
		return m.vx.Device()
	case m.ip != nil:
		return m.ip.Device()
	}
	return ""
}

// OnLink implements dataplane.InterfaceObserver. A change of the device
// makes its Driver check it; a change of an interface holding a subnet or
// this node's underlay address makes the next pass read the host again.
// It does no I/O.
func (m *Manager) OnLink(link kernel.Link, state kernel.LinkState) {
	switch {
	case m.vx != nil:
		m.vx.OnLinkState(link.Name, link.Index, state)
	case m.ip != nil:
		m.ip.OnLinkState(link.Name, link.Index, state)
	}
	m.eng.OnLinkState(link.Name, link.Index, state, link.MTU)
}

// OnAddrs implements dataplane.InterfaceObserver: a change of an
// interface's subnets, or of whether it holds this node's underlay
// address, makes the next pass read the host again and route same-subnet
// nodes accordingly. It does no I/O.
func (m *Manager) OnAddrs(name string, addrs []netip.Prefix) { m.eng.OnAddrs(name, addrs) }

// QueueResync implements dataplane.Resyncer: the next CompleteDeferredWork
// reads the host's links and addresses again. The Driver's resync calls
// it too.
func (m *Manager) QueueResync() { m.eng.MarkHostDirty() }

// OnUpdate implements dataplane.Manager: it records cluster.Node,
// cluster.NodeRemove, cluster.Block, cluster.BlockRemove and mtu.Result
// messages (values or non-nil pointers) and ignores the rest, and
// everything when Disabled. Every message carries both families; the
// Manager takes its own. An invalid message is rejected (counted in Stats,
// logged) and changes nothing. It does no I/O.
func (m *Manager) OnUpdate(msg any) {
	if m.o.Disabled {
		return
	}
	switch v := msg.(type) {
	case cluster.Node:
		m.onNode(&v)
	case *cluster.Node:
		if v != nil {
			m.onNode(v)
		}
	case cluster.NodeRemove:
		m.onNodeRemove(&v)
	case *cluster.NodeRemove:
		if v != nil {
			m.onNodeRemove(v)
		}
	case cluster.Block:
		m.onBlock(&v)
	case *cluster.Block:
		if v != nil {
			m.onBlock(v)
		}
	case cluster.BlockRemove:
		m.onBlockRemove(&v)
	case *cluster.BlockRemove:
		if v != nil {
			m.onBlockRemove(v)
		}
	case mtu.Result:
		m.eng.SetHostMTU(v.Host.MTU)
	case *mtu.Result:
		if v != nil {
			m.eng.SetHostMTU(v.Host.MTU)
		}
	}
}

// reject counts and logs a message refused as invalid.
func (m *Manager) reject(err error) {
	m.rejected++
	m.lastRej = err
	m.o.Logger.Warn("overlay: message rejected", "encap", m.o.Encap.String(), "err", err)
}

// onNode records a node's underlay address and the next hop of its
// blocks through the tunnel: its tunnel address with VXLAN (when it has a
// VXLAN MAC too, which its FDB entry names), its underlay address with
// IPIP, none with None. This node's configures the device.
func (m *Manager) onNode(n *cluster.Node) {
	if err := n.Validate(); err != nil {
		m.reject(err)
		return
	}
	if n.Name == m.o.NodeName {
		c := *n
		m.local = &c
	}
	f := m.o.Family
	underlay := n.Underlay(f)
	if !underlay.IsValid() {
		m.removeNode(n.Name)
		return
	}
	info := nodeInfo{Underlay: underlay}
	switch {
	case m.vx != nil:
		if tunnel, mac := n.Tunnel(f), n.VXLANMAC(f); tunnel.IsValid() && !mac.IsZero() {
			info.Gateway = tunnel
		}
	case m.ip != nil:
		info.Gateway = underlay
	}
	m.eng.SetNode(n.Name, info)
	if m.vx == nil || n.Name == m.o.NodeName {
		return
	}
	if info.Gateway.IsValid() {
		// Validated above: SetRemote cannot refuse it.
		_ = m.vx.SetRemote(n.Name, vxlan.Remote{TunnelIP: info.Gateway, MAC: n.VXLANMAC(f).HardwareAddr(), Underlay: underlay})
	} else {
		m.vx.RemoveRemote(n.Name)
	}
}

func (m *Manager) removeNode(node string) {
	m.eng.RemoveNode(node)
	if m.vx != nil {
		m.vx.RemoveRemote(node)
	}
}

func (m *Manager) onNodeRemove(r *cluster.NodeRemove) {
	if err := r.Validate(); err != nil {
		m.reject(err)
		return
	}
	if r.Name == m.o.NodeName {
		m.local = nil
	}
	m.removeNode(r.Name)
}

// onBlock records a block of the family, unless invalid; a block of
// another family is ignored.
func (m *Manager) onBlock(b *cluster.Block) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	if m.o.Family.ContainsPrefix(b.CIDR) {
		m.eng.routes.SetBlock(b.CIDR, b.Node)
	}
}

// onBlockRemove forgets a block of the family, unless invalid; a block of
// another family is ignored.
func (m *Manager) onBlockRemove(b *cluster.BlockRemove) {
	if err := b.Validate(); err != nil {
		m.reject(err)
		return
	}
	if m.o.Family.ContainsPrefix(b.CIDR) {
		m.eng.routes.RemoveBlock(b.CIDR)
	}
}

// CompleteDeferredWork implements dataplane.Manager. When Disabled it
// declares no device (the Driver removes it). Otherwise it reads the
// host's links and addresses when they may have changed (first call,
// QueueResync, OnLink, OnAddrs, the Driver's resync), declares the device
// this node's cluster.Node asks for on the Driver, and declares the routes
// and set members whose inputs changed. Failing to read the host is an
// error wrapping ErrRead (the loop calls it again); nothing is declared
// then.
func (m *Manager) CompleteDeferredWork(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if m.o.Disabled {
		m.declare(nil)
		return nil
	}
	if err := m.eng.Sync(ctx, func(l localInfo) bool { return m.declare(&l) }); err != nil {
		return fmt.Errorf("%w: %w", ErrRead, err)
	}
	return nil
}

// declare declares on the Driver the device this node's message asks for
// given l (none when l is nil or the message gives too little), and
// reports whether tunnel routes can be declared: there is a device, the
// Driver took it, and no link of another kind holds its name (the Driver
// leaves such a link alone, and a route through it would send the pods'
// traffic out of it unencapsulated).
func (m *Manager) declare(l *localInfo) bool {
	var err error
	kind := ""
	switch {
	case m.vx != nil:
		dev := m.wantVXLAN(l)
		if err = m.vx.SetDevice(dev); dev == nil {
			return false
		}
		kind = kernel.KindVXLAN
	case m.ip != nil:
		dev := m.wantIPIP(l)
		if err = m.ip.SetDevice(dev); dev == nil {
			return false
		}
		kind = kernel.KindIPIP
	default:
		return false
	}
	if err != nil {
		m.o.Logger.Warn("overlay: device refused", "encap", m.o.Encap.String(), "err", err)
		return false
	}
	if have, ok := l.hostView.Link(m.Device()); ok && have.Kind != kind {
		m.o.Logger.Warn("overlay: a link of another kind holds the device's name: no route through it",
			"device", m.Device(), "kind", have.Kind, "index", have.Index)
		return false
	}
	return true
}

// wantVXLAN returns the device this node's message asks for: none until
// it has an underlay address, a tunnel address and a VXLAN MAC of the
// family.
func (m *Manager) wantVXLAN(l *localInfo) *vxlan.Device {
	if l == nil || m.local == nil {
		return nil
	}
	f := m.o.Family
	underlay, tunnel, mac := m.local.Underlay(f), m.local.Tunnel(f), m.local.VXLANMAC(f)
	if !underlay.IsValid() || !tunnel.IsValid() || mac.IsZero() {
		return nil
	}
	e := m.o.Encap.(VXLAN)
	return &vxlan.Device{VNI: e.VNI, Port: e.Port, Local: underlay, MAC: mac.HardwareAddr(), Address: tunnel, MTU: l.MTU}
}

// wantIPIP returns the device this node's message asks for: none until it
// has an IPv4 underlay address.
func (m *Manager) wantIPIP(l *localInfo) *ipip.Device {
	if l == nil || m.local == nil || !m.local.UnderlayV4.IsValid() {
		return nil
	}
	return &ipip.Device{Local: m.local.UnderlayV4, Address: m.local.TunnelV4, MTU: l.MTU}
}

// Stats are a Manager's counters and sizes. The Driver has its own.
type Stats struct {
	// Nodes is the number of nodes with an underlay address of the
	// family; Blocks the number of blocks of the family.
	Nodes, Blocks int
	// TunnelRoutes, DirectRoutes and Blackholes count the blocks routed
	// each way; Unrouted counts the blocks without a route (this node's
	// without a blackhole, or another whose node is unknown, or without
	// a tunnel on another subnet).
	TunnelRoutes, DirectRoutes, Blackholes, Unrouted int
	// BlackholeConflicts counts this node's blocks that get no blackhole
	// because a connected subnet of a host interface holds them (see
	// Options.NoBlackholes); they count as Unrouted too.
	BlackholeConflicts int
	// UnderlayConflicts counts the blocks (this node's or another's) that
	// get no route because they hold a node's underlay address or overlap
	// a connected subnet of the host that holds one: routed into the
	// tunnel, or blackholed, they would take the tunnel's own packets (or
	// the underlay's) with them. They count as Unrouted too.
	UnderlayConflicts int
	// SetMembers is the size of the node-address set.
	SetMembers int
	// Rejected counts messages refused as invalid; LastRejected is the
	// last one's error.
	Rejected     int
	LastRejected error
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	r := m.eng.routes
	s := Stats{
		Nodes: m.eng.Nodes(), TunnelRoutes: r.Count(kindTunnel), DirectRoutes: r.Count(kindDirect),
		Blackholes: r.Count(kindBlackhole), Unrouted: r.Count(kindNone), BlackholeConflicts: r.Conflicts(), UnderlayConflicts: r.UnderlayConflicts(),
		SetMembers: m.eng.members.Len(), Rejected: m.rejected, LastRejected: m.lastRej,
	}
	s.Blocks = s.Unrouted + s.TunnelRoutes + s.DirectRoutes + s.Blackholes
	return s
}

var (
	_ dataplane.Manager           = (*Manager)(nil)
	_ dataplane.Resyncer          = (*Manager)(nil)
	_ dataplane.InterfaceObserver = (*Manager)(nil)
)
