package overlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/netfilter"
)

// RouteTable is where a manager declares its routes: a *routetable.Table
// of the manager's family.
type RouteTable interface {
	RouteSink
	// Family is the table's family.
	Family() ipfamily.Family
	// OnIfaceStateChanged tells the table the device's index and state.
	OnIfaceStateChanged(name string, index int, state kernel.LinkState)
}

// ManagerOptions are the options vxlan.Options and ipip.Options share,
// with the words and sentinels of the package's errors and logs.
type ManagerOptions struct {
	// Name begins the logs: "vxlan", "ipip".
	Name string
	// ErrInvalidOptions is the sentinel Validate's errors wrap; ErrRead
	// the one a failed read of the host is wrapped in.
	ErrInvalidOptions, ErrRead error
	// Only, when set, says that the encapsulation carries Family alone
	// ("IPIP is IPv4 only"): a route table or set backend of another
	// family is refused with these words rather than as not the manager's.
	Only string

	// Family is the family of the device, the underlay and the blocks.
	// Required.
	Family ipfamily.Family
	// NodeName is this node's name. Required.
	NodeName string
	// Kernel is the namespace. Required.
	Kernel HostKernel
	// Routes is the route table; required unless Disabled.
	Routes RouteTable
	// Mode says how remote blocks are routed.
	Mode Mode
	// NoBlackholes gives this node's blocks no blackhole route.
	NoBlackholes bool
	// Check, when set, checks the package's own options: after NodeName,
	// Kernel, Family, Mode and Routes are checked, before the others.
	Check func() error
	// Encap is the encapsulation, for the device MTU.
	Encap mtu.Encap
	// MTU fixes the device MTU: 0, or 68 to 65535.
	MTU int
	// Classes are the route classes, distinct; zero means DefaultClasses.
	Classes, DefaultClasses Classes
	// Sets, when set, gets the node-address set SetName (empty means
	// DefaultSetName) of every node's underlay address plus Extra, network
	// prefixes of Family. Its family must be Family.
	Sets                    netfilter.Sets
	SetName, DefaultSetName string
	Extra                   []netip.Prefix
	// Disabled makes a manager that only removes the device.
	Disabled bool
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Validate checks o in the order the managers document, wrapping the
// first problem in ErrInvalidOptions, and fills in the defaults (Classes,
// SetName, Logger).
func (o *ManagerOptions) Validate() error {
	if err := o.validate(); err != nil {
		return fmt.Errorf("%w: %w", o.ErrInvalidOptions, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (o *ManagerOptions) validate() error {
	switch {
	case o.NodeName == "":
		return errors.New("no NodeName")
	case o.Kernel == nil:
		return errors.New("no Kernel")
	case !o.Family.Valid():
		return fmt.Errorf("family %v", o.Family)
	case !o.Mode.Valid():
		return fmt.Errorf("mode %v", o.Mode)
	case !o.Disabled && o.Routes == nil:
		return errors.New("no Routes")
	case !o.Disabled && o.Routes.Family() != o.Family:
		return o.otherFamily("route table", o.Routes.Family())
	}
	if o.Check != nil {
		if err := o.Check(); err != nil {
			return err
		}
	}
	if !ValidMTU(o.MTU) {
		return fmt.Errorf("MTU %d", o.MTU)
	}
	if o.Classes == (Classes{}) {
		o.Classes = o.DefaultClasses
	}
	if c := o.Classes; c.Tunnel == c.Direct || c.Tunnel == c.Blackhole || c.Direct == c.Blackhole {
		return fmt.Errorf("classes %+v are not distinct", c)
	}
	if o.SetName == "" {
		o.SetName = o.DefaultSetName
	}
	if o.Sets != nil && o.Sets.Family() != o.Family {
		return o.otherFamily("set backend", o.Sets.Family())
	}
	for _, p := range o.Extra {
		if err := CheckBlock(o.Family, p); err != nil {
			return fmt.Errorf("extra CIDR: %w", err)
		}
	}
	return nil
}

// otherFamily says that a backend (what) is of family f, not the manager's.
func (o *ManagerOptions) otherFamily(what string, f ipfamily.Family) error {
	if o.Only != "" {
		return fmt.Errorf("an %v %s (%s)", f, what, o.Only)
	}
	return fmt.Errorf("an %v %s for an %v manager", f, what, o.Family)
}

// DeviceNotifier returns the OnDevice a manager gives its driver: it tells
// rt the device's index and state, and tells nothing when rt is nil (a
// Disabled manager's).
func DeviceNotifier(rt RouteTable) func(name string, index int, state kernel.LinkState) {
	return func(name string, index int, state kernel.LinkState) {
		if rt != nil {
			rt.OnIfaceStateChanged(name, index, state)
		}
	}
}

// On returns a message handler for ManagerDriver.Handlers: given a T or a
// non-nil *T it calls fn and reports true, given a nil *T it reports true
// and does nothing, and given anything else it reports false.
func On[T any](fn func(*T)) func(msg any) bool {
	return func(msg any) bool {
		switch v := msg.(type) {
		case T:
			fn(&v)
		case *T:
			if v != nil {
				fn(v)
			}
		default:
			return false
		}
		return true
	}
}

// ManagerDriver is how a Manager reaches its package's Driver and
// messages; D is the package's Device.
type ManagerDriver[D any] struct {
	// Device is the Driver's device half: its notifications come through
	// the Manager (OnLinkUpdate), and its resyncs make the Manager read the
	// host again.
	Device *DeviceDriver[D]
	// Set declares the device on the Driver (nil for none); Want returns
	// the device this node's message asks for, given what Sync knows of
	// the node (nil for none).
	Set  func(dev *D) error
	Want func(l Local) *D
	// Handlers record the package's node messages (see On); the Manager
	// records the blocks itself.
	Handlers []func(msg any) bool
}

// Manager is what vxlan's and ipip's Managers share around a Core: the
// options, the message dispatch and rejections, the notifications, the
// device declared from this node's message, and the counters. Like Core,
// its message and pass methods are called from the loop's goroutine,
// OnLinkUpdate, OnAddrs and QueueResync from any.
type Manager[D any] struct {
	o        ManagerOptions
	d        ManagerDriver[D]
	core     *Core
	handlers []func(msg any) bool
	rejected int
	lastRej  error
}

// NewManager returns the Manager of o, which Validate accepted, and of
// the driver d. It does no I/O.
func NewManager[D any](o ManagerOptions, d ManagerDriver[D]) *Manager[D] {
	co := CoreOptions{
		Family: o.Family, NodeName: o.NodeName, Kernel: o.Kernel, Routes: o.Routes, Classes: o.Classes,
		Mode: o.Mode, NoBlackholes: o.NoBlackholes, Device: d.Device.Name, Encap: o.Encap, MTU: o.MTU,
		SetName: o.SetName, Extra: slices.Clone(o.Extra), Logger: o.Logger,
	}
	if o.Sets != nil {
		co.Sets = o.Sets
	}
	m := &Manager[D]{o: o, d: d, core: NewCore(co)}
	m.handlers = append(slices.Clip(d.Handlers), On(m.onBlock), On(m.onBlockRemove),
		On(func(r *mtu.Result) { m.core.SetHostMTU(r.Host.MTU) }))
	d.Device.OnResync = m.core.MarkHostDirty
	return m
}

// Core returns the Core.
func (m *Manager[D]) Core() *Core { return m.core }

// OnLinkUpdate passes a link update to the Driver's DeviceDriver and to
// the Core, and wakes the loop when the host view must be read again.
func (m *Manager[D]) OnLinkUpdate(u ifacemonitor.LinkUpdate) {
	m.d.Device.OnLinkState(u.Name, u.Index, u.State)
	if m.core.OnLinkState(u.Name, u.Index, u.State, u.MTU) {
		m.d.Device.Wake()
	}
}

// OnAddrs passes an interface's addresses to the Core, and wakes the loop
// when the host view must be read again.
func (m *Manager[D]) OnAddrs(name string, addrs []netip.Prefix) {
	if m.core.OnAddrs(name, addrs) {
		m.d.Device.Wake()
	}
}

// QueueResync makes the next CompleteDeferredWork read the host again.
func (m *Manager[D]) QueueResync() { m.core.MarkHostDirty() }

// Reject counts and logs a message refused as invalid.
func (m *Manager[D]) Reject(err error) {
	m.rejected++
	m.lastRej = err
	m.o.Logger.Warn(m.o.Name+": message rejected", "err", err)
}

// OnUpdate records msg with the first handler that takes it, the
// package's (its node messages) or the Manager's own (cluster.Block,
// cluster.BlockRemove, mtu.Result: the host MTU); anything else is
// ignored, and so is everything when the manager is Disabled.
func (m *Manager[D]) OnUpdate(msg any) {
	if m.o.Disabled {
		return
	}
	for _, h := range m.handlers {
		if h(msg) {
			return
		}
	}
}

// onBlock records a block of the family, unless invalid; a block of
// another family is ignored.
func (m *Manager[D]) onBlock(b *cluster.Block) {
	if err := b.Validate(); err != nil {
		m.Reject(err)
		return
	}
	if m.o.Family.ContainsPrefix(b.CIDR) {
		m.core.Routes().SetBlock(b.CIDR, b.Node)
	}
}

// onBlockRemove forgets a block of the family, unless invalid; a block of
// another family is ignored.
func (m *Manager[D]) onBlockRemove(b *cluster.BlockRemove) {
	if err := b.Validate(); err != nil {
		m.Reject(err)
		return
	}
	if m.o.Family.ContainsPrefix(b.CIDR) {
		m.core.Routes().RemoveBlock(b.CIDR)
	}
}

// CompleteDeferredWork declares no device when Disabled. Otherwise it runs
// the Core's Sync, declaring the device this node's message asks for
// (none in Direct mode); a failed read of the host is returned wrapping
// ErrRead.
func (m *Manager[D]) CompleteDeferredWork(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if m.o.Disabled {
		return m.d.Set(nil)
	}
	if err := m.core.Sync(ctx, m.device); err != nil {
		return fmt.Errorf("%w: %w", m.o.ErrRead, err)
	}
	return nil
}

// device declares the device wanted for l and reports whether tunnel
// routes can be declared: not when there is none, or the Driver refused
// it.
func (m *Manager[D]) device(l Local) bool {
	var want *D
	if m.o.Mode != Direct {
		want = m.d.Want(l)
	}
	if want == nil {
		_ = m.d.Set(nil)
		return false
	}
	if err := m.d.Set(want); err != nil {
		m.o.Logger.Warn(m.o.Name+": device refused", "err", err)
		return false
	}
	return true
}

// ManagerStats are the counters vxlan.Stats and ipip.Stats share.
type ManagerStats struct {
	// Nodes is the number of nodes with an underlay address; Blocks the
	// number of blocks of the family.
	Nodes, Blocks int
	// TunnelRoutes, DirectRoutes and Blackholes count the blocks routed
	// each way; Unrouted counts the blocks without a route.
	TunnelRoutes, DirectRoutes, Blackholes, Unrouted int
	// BlackholeConflicts counts this node's blocks without a blackhole
	// because a connected subnet of a host interface holds them.
	BlackholeConflicts int
	// SetMembers is the size of the node-address set.
	SetMembers int
	// Rejected counts messages refused as invalid; LastRejected is the
	// last one's error.
	Rejected     int
	LastRejected error
}

// Stats returns the Manager's counters.
func (m *Manager[D]) Stats() ManagerStats {
	r := m.core.Routes()
	s := ManagerStats{
		Nodes: m.core.Nodes(), TunnelRoutes: r.Count(TunnelRoute), DirectRoutes: r.Count(DirectRoute),
		Blackholes: r.Count(Blackhole), Unrouted: r.Count(NoRoute), BlackholeConflicts: r.Conflicts(),
		SetMembers: m.core.Members().Len(), Rejected: m.rejected, LastRejected: m.lastRej,
	}
	s.Blocks = s.Unrouted + s.TunnelRoutes + s.DirectRoutes + s.Blackholes
	return s
}
