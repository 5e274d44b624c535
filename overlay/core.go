package overlay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
)

// engineOptions configure an engine; New makes them from validated
// Options.
type engineOptions struct {
	// Family is the family of the underlay, the tunnel and the blocks.
	Family ipfamily.Family
	// NodeName is this node's name: its blocks get blackholes, its
	// underlay address makes the tunnel's local end.
	NodeName string
	// Kernel lists the host's links and addresses.
	Kernel hostKernel
	// Routes receives the routes.
	Routes routeSink
	// Classes are the route classes.
	Classes Classes
	// routeMode says how remote blocks are routed.
	Mode routeMode
	// NoBlackholes gives this node's blocks no blackhole.
	NoBlackholes bool
	// Device is the tunnel device's name.
	Device string
	// Encap is the encapsulation, for the device MTU.
	Encap mtu.Encap
	// MTU fixes the device MTU; 0 derives it from the host MTU.
	MTU int
	// Sets, SetName and Extra make the node-address set; nil Sets for
	// none.
	Sets    setSink
	SetName string
	Extra   []netip.Prefix
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// localInfo is what Sync knows of this node when it asks for the device.
type localInfo struct {
	// Underlay is this node's underlay address (invalid when unknown).
	Underlay netip.Addr
	// Parent is the link holding Underlay (Index 0 when none does).
	Parent kernel.Link
	// MTU is the device MTU: engineOptions.MTU, or the host MTU less the
	// overhead, or the parent's MTU less it, and never more than the
	// parent's MTU less it; 0 when none is known.
	MTU int
	// hostView is the host view Sync read.
	hostView *hostView
}

// engine is a Manager's state whatever its encapsulation: nodes, blocks,
// the host view, the route calculation and the node-address set. Its
// methods are called from the loop's goroutine, but MarkHostDirty, which
// the Driver's resync calls, from any.
type engine struct {
	opts    engineOptions
	routes  *routeCalc
	members *memberSet
	log     *slog.Logger

	underlay map[string]netip.Addr
	hostMTU  int

	mu        sync.Mutex // guards the fields below, which notifications read
	host      *hostView
	hostDirty bool
	local     netip.Addr
	parent    string
}

// newEngine returns an engine; it does no I/O.
func newEngine(o engineOptions) *engine {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &engine{
		opts:      o,
		routes:    newRouteCalc(o.Routes, o.Classes, o.Mode, o.NodeName, o.Device, o.NoBlackholes),
		members:   newMemberSet(o.Sets, o.SetName, o.Extra),
		log:       log,
		underlay:  map[string]netip.Addr{},
		hostDirty: true,
	}
}

// SetNode records a node's underlay address and tunnel gateway.
func (c *engine) SetNode(name string, n nodeInfo) {
	if old, ok := c.underlay[name]; !ok || old != n.Underlay {
		if ok {
			c.members.Remove(old)
		}
		c.members.Add(n.Underlay)
		c.underlay[name] = n.Underlay
	}
	if name == c.opts.NodeName {
		c.mu.Lock()
		if c.local != n.Underlay {
			c.local = n.Underlay
		}
		c.mu.Unlock()
		return
	}
	c.routes.SetNode(name, n)
}

// RemoveNode forgets a node.
func (c *engine) RemoveNode(name string) {
	if old, ok := c.underlay[name]; ok {
		c.members.Remove(old)
		delete(c.underlay, name)
	}
	if name == c.opts.NodeName {
		c.mu.Lock()
		c.local = netip.Addr{}
		c.mu.Unlock()
		return
	}
	c.routes.RemoveNode(name)
}

// Nodes returns the number of nodes with an underlay address.
func (c *engine) Nodes() int { return len(c.underlay) }

// SetHostMTU records the host MTU a monitor reported.
func (c *engine) SetHostMTU(m int) { c.hostMTU = m }

// MarkHostDirty makes the next Sync read the host's links and addresses
// again.
func (c *engine) MarkHostDirty() {
	c.mu.Lock()
	c.hostDirty = true
	c.mu.Unlock()
}

// OnLinkState marks the host dirty when a link change can change the host
// view: a link holding a subnet or this node's address goes away or
// changes index, or the parent changes MTU.
func (c *engine) OnLinkState(name string, index int, state kernel.LinkState, mtu int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hostDirty || c.host == nil {
		return
	}
	l, known := c.host.Link(name)
	if name != c.parent && len(c.host.SubnetsOf(name)) == 0 {
		return
	}
	if !known || state == kernel.LinkGone || l.Index != index || (name == c.parent && l.MTU != mtu) {
		c.hostDirty = true
	}
}

// OnAddrs marks the host dirty when an interface's new addresses can
// change the host view (its subnets, or whether it holds this node's
// underlay address).
func (c *engine) OnAddrs(name string, addrs []netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hostDirty || c.host == nil || name == c.opts.Device {
		return
	}
	holds := false
	for _, p := range addrs {
		holds = holds || (c.local.IsValid() && p.Addr() == c.local)
	}
	if !slices.Equal(ifaceSubnets(c.opts.Family, addrs), c.host.SubnetsOf(name)) || holds != (name == c.parent) {
		c.hostDirty = true
	}
}

// Sync reads the host view when it is dirty, works out this node's tunnel
// end and asks device for the device (device returns whether the tunnel
// is up for routes), then declares the routes and set members whose
// inputs changed. A failed read of the host is returned and read again at
// the next Sync; nothing is declared then.
func (c *engine) Sync(ctx context.Context, device func(localInfo) bool) error {
	c.mu.Lock()
	dirty, host, local := c.hostDirty, c.host, c.local
	c.mu.Unlock()
	if dirty {
		h, err := readHost(ctx, c.opts.Kernel, c.opts.Family, func(name string) bool { return name == c.opts.Device })
		if err != nil {
			return err
		}
		host = h
	}
	l := localInfo{Underlay: local, hostView: host}
	if p, ok := host.Holder(local); ok {
		l.Parent = p
	}
	overhead := c.opts.Encap.Overhead(c.opts.Family == ipfamily.IPv6)
	switch {
	case c.opts.MTU > 0:
		l.MTU = c.opts.MTU
	case c.hostMTU > 0:
		l.MTU = c.hostMTU - overhead
	case l.Parent.MTU > 0:
		l.MTU = l.Parent.MTU - overhead
	}
	if most := l.Parent.MTU - overhead; l.Parent.MTU > 0 && l.MTU > most {
		// The kernel refuses a VXLAN MTU above this, and an IPIP packet
		// this large would not leave the parent unfragmented.
		c.log.Debug("overlay: device MTU capped by the parent's", "mtu", l.MTU, "parent", l.Parent.Name, "cap", most)
		l.MTU = most
	}
	c.mu.Lock()
	c.host, c.parent = host, l.Parent.Name
	if dirty {
		c.hostDirty = false
	}
	c.mu.Unlock()
	up := device(l)
	mtu := uint32(0)
	if up && l.MTU > 0 {
		mtu = uint32(l.MTU)
	}
	c.routes.SetHost(host)
	c.routes.SetTunnel(up, mtu)
	var errs []error
	if err := c.routes.Flush(); err != nil {
		errs = append(errs, err)
	}
	if err := c.members.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("node address set: %w", err))
	}
	for _, bc := range c.routes.NewConflicts() {
		if bc.Underlay {
			c.log.Warn("overlay: no route for a block: it holds a node's underlay address or overlaps the underlay's subnet",
				"block", bc.Block, "underlay", bc.Subnet)
			continue
		}
		c.log.Warn("overlay: no blackhole for this node's block: a connected subnet of a host interface holds it",
			"block", bc.Block, "subnet", bc.Subnet, "interface", bc.Iface)
	}
	if c.routes.Count(kindNone) > 0 {
		c.log.Debug("overlay: blocks without a route", "count", c.routes.Count(kindNone), "mode", c.opts.Mode.String())
	}
	return errors.Join(errs...)
}
