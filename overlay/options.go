package overlay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

var (
	// ErrInvalidOptions reports an Options value out of range; New
	// returns no Manager then.
	ErrInvalidOptions = errors.New("overlay: invalid options")
	// ErrRead reports a failed read of the host's links and addresses:
	// CompleteDeferredWork fails, declares nothing, and reads again at the
	// next pass.
	ErrRead = errors.New("overlay: kernel read failed")
)

// Kernel is what a Manager needs of one network namespace: links and
// addresses, and for VXLAN neighbour and FDB entries. A *kernel.Namespace
// and a kernelfake.Namespace implement it.
type Kernel = vxlan.DriverKernel

// RouteTable is where a Manager declares its routes: a *routetable.Table
// of the Manager's family (usually the main table), which the agent
// registers with its dataplane.Loop.
type RouteTable interface {
	// Family is the table's family.
	Family() ipfamily.Family
	// RouteUpdate and RouteRemove declare and withdraw one route of a
	// (class, interface) pair.
	RouteUpdate(class routetable.RouteClass, iface string, target routetable.Target) error
	RouteRemove(class routetable.RouteClass, iface string, key routetable.RouteKey) error
	// OnIfaceStateChanged tells the table the device's index and state.
	OnIfaceStateChanged(name string, index int, state kernel.LinkState)
}

// Encap is an overlay's encapsulation: VXLAN, IPIP or None. No other
// type implements it.
type Encap interface {
	// String returns "vxlan", "ipip" or "none".
	String() string
	// defaults returns the encapsulation's default route classes and set
	// name, and its overhead.
	defaults() (Classes, string, mtu.Encap)
}

// VXLAN encapsulates in VXLAN: a device of the family (through a
// vxlan.Driver), with a permanent neighbour and FDB entry per remote node
// that has a tunnel address and a VXLAN MAC of the family.
type VXLAN struct {
	// VNI and Port are the device's; 0 means vxlan.DefaultVNI and
	// vxlan.DefaultPort.
	VNI  uint32
	Port uint16
	// Device is the device's name; empty means vxlan.DefaultDeviceV4 or
	// vxlan.DefaultDeviceV6.
	Device string
}

// IPIP encapsulates in IP-in-IP: an IPv4 device (through an ipip.Driver),
// the next hop of a remote block being its node's underlay address. IPIP
// is IPv4 only.
type IPIP struct {
	// Device is the device's name; empty means ipip.DefaultDevice (tunl0).
	Device string
}

// None encapsulates nothing: no device; the blocks of nodes on one of
// this host's subnets are routed directly, via the node's underlay
// address, and the others not at all (a flat L2 network).
type None struct{}

// String returns "vxlan".
func (VXLAN) String() string { return "vxlan" }

// String returns "ipip".
func (IPIP) String() string { return "ipip" }

// String returns "none".
func (None) String() string { return "none" }

func (VXLAN) defaults() (Classes, string, mtu.Encap) {
	return Classes{Tunnel: 40, Direct: 41, Blackhole: 190}, "vxlan-nodes", mtu.VXLAN
}

func (IPIP) defaults() (Classes, string, mtu.Encap) {
	return Classes{Tunnel: 50, Direct: 51, Blackhole: 191}, "ipip-nodes", mtu.IPIP
}

// None's classes are VXLAN's: a flat network is VXLAN's direct routes
// without the tunnel.
func (None) defaults() (Classes, string, mtu.Encap) {
	return Classes{Tunnel: 40, Direct: 41, Blackhole: 190}, "overlay-nodes", mtu.Encap{Name: "none"}
}

// DefaultClasses returns the route classes of a Manager of encapsulation
// e whose Options.Classes is zero: VXLAN's and IPIP's are distinct, so
// both can share a table (None's are VXLAN's).
func DefaultClasses(e Encap) Classes {
	c, _, _ := e.defaults()
	return c
}

// DefaultSetName returns the name (before the Sets' own prefix) of the set
// of node underlay addresses of a Manager of encapsulation e whose
// Options.SetName is empty: "vxlan-nodes", "ipip-nodes" or "overlay-nodes".
func DefaultSetName(e Encap) string {
	_, s, _ := e.defaults()
	return s
}

// Classes are the route classes a Manager declares its routes under (see
// routetable.RouteClass); give each producer sharing a Table its own. The
// zero value means DefaultClasses.
type Classes struct {
	// Tunnel is the class of remote blocks through the device.
	Tunnel routetable.RouteClass
	// Direct is the class of remote blocks routed directly, via a
	// same-subnet node's underlay address.
	Direct routetable.RouteClass
	// Blackhole is the class of the blackholes of this node's blocks.
	Blackhole routetable.RouteClass
}

// Options configure a Manager.
type Options struct {
	// Family is the Manager's family: of its device, its underlay and its
	// blocks. Run one Manager per family. Required.
	Family ipfamily.Family
	// NodeName is this node's name: that node's cluster.Node configures
	// the device, and its blocks get blackholes. Required.
	NodeName string
	// Kernel is the network namespace. Required.
	Kernel Kernel
	// Routes is the route table the routes are declared on. Required
	// unless Disabled.
	Routes RouteTable
	// Encap is the encapsulation: VXLAN{…}, IPIP{…} or None{}. Required.
	Encap Encap
	// CrossSubnet routes the blocks of nodes on one of this host's
	// subnets directly, via the node's underlay address on that subnet's
	// interface, and only the others through the device; a node moving
	// between subnets switches its routes in one replace each. Without
	// it every remote block goes through the device. With None, blocks
	// are always routed directly, and CrossSubnet changes nothing.
	CrossSubnet bool
	// MTU fixes the device MTU (and the MTU of the routes through it): 0,
	// or 68 (1280 for IPv6) to 65535. Zero derives it: the host MTU of the
	// last mtu.Result message less the encapsulation's overhead
	// (mtu.VXLAN, mtu.IPIP), or before any such message the parent's MTU
	// less it. A derived MTU below the family's least is refused as a set
	// one would be: the device stays as it was and no route goes through
	// it until the MTU allows.
	MTU int
	// Classes are the route classes; the zero value means
	// DefaultClasses(Encap).
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
	// accept the encapsulated traffic only from known nodes. Its family
	// must be the Manager's. Register it with the loop as usual.
	Sets netfilter.Sets
	// SetName is the set's name; empty means DefaultSetName(Encap).
	SetName string
	// ExtraCIDRs are added to the set (nodes outside the cluster's
	// records that may send encapsulated traffic), network prefixes of
	// the family.
	ExtraCIDRs []netip.Prefix
	// Disabled makes a Manager that only removes the device of Encap (left
	// by an earlier run; for IPIP's tunl0, which the kernel does not
	// delete, its address): it declares no routes, entries or set.
	Disabled bool
	// Clock paces the device driver's retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// validate checks o in the order the fields are documented and fills in
// the defaults (Classes, SetName, Logger).
func (o *Options) validate() error {
	switch {
	case o.NodeName == "":
		return errors.New("no NodeName")
	case o.Kernel == nil:
		return errors.New("no Kernel")
	case !o.Family.Valid():
		return fmt.Errorf("family %v", o.Family)
	case o.Encap == nil:
		return errors.New("no Encap: VXLAN{…}, IPIP{…} or None{}")
	case !o.Disabled && o.Routes == nil:
		return errors.New("no Routes")
	case !o.Disabled && o.Routes.Family() != o.Family:
		return fmt.Errorf("an %v route table for an %v manager", o.Routes.Family(), o.Family)
	}
	switch e := o.Encap.(type) {
	case VXLAN:
		if e.VNI > vxlan.MaxVNI {
			return fmt.Errorf("VNI %d above %d", e.VNI, vxlan.MaxVNI)
		}
	case IPIP:
		if o.Family != ipfamily.IPv4 {
			return fmt.Errorf("IPIP for an %v manager (IPIP is IPv4 only)", o.Family)
		}
	}
	if !tunnel.ValidMTU(o.MTU, o.Family) {
		return fmt.Errorf("MTU %d (%v needs 68 to 65535, IPv6 1280 to 65535)", o.MTU, o.Family)
	}
	if o.Classes == (Classes{}) {
		o.Classes = DefaultClasses(o.Encap)
	}
	if c := o.Classes; c.Tunnel == c.Direct || c.Tunnel == c.Blackhole || c.Direct == c.Blackhole {
		return fmt.Errorf("classes %+v are not distinct", c)
	}
	if o.SetName == "" {
		o.SetName = DefaultSetName(o.Encap)
	}
	if o.Sets != nil && o.Sets.Family() != o.Family {
		return fmt.Errorf("an %v set backend for an %v manager", o.Sets.Family(), o.Family)
	}
	for _, p := range o.ExtraCIDRs {
		if err := o.Family.CheckNet(p); err != nil {
			return fmt.Errorf("extra CIDR: %w", err)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// routeMode returns how the blocks of o are routed.
func (o *Options) routeMode() routeMode {
	switch {
	case o.Encap == None{}:
		return modeDirect
	case o.CrossSubnet:
		return modeCrossSubnet
	}
	return modeTunnel
}

var (
	_ Encap = VXLAN{}
	_ Encap = IPIP{}
	_ Encap = None{}
)
