package ipip

import (
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/overlay"
	"github.com/nodeplane/nodeplane/routetable"
)

// Mode says how a Manager routes remote blocks.
type Mode uint8

const (
	// Always routes every remote block through the IPIP device: via the
	// owner's underlay address, onlink. It is the zero value.
	Always Mode = iota
	// CrossSubnet routes the blocks of nodes on one of this host's
	// subnets directly and the others through the device.
	CrossSubnet
	// Never encapsulates nothing: no device; the blocks of nodes on one
	// of this host's subnets are routed directly and the others not at
	// all.
	Never
)

// String returns "always", "cross-subnet" or "never".
func (m Mode) String() string { return overlay.Mode(m).OptionName() }

// Classes are the route classes a Manager declares its routes under (see
// routetable.RouteClass); give each producer sharing a Table its own. The
// zero value means DefaultClasses.
type Classes struct {
	// Tunnel is the class of remote blocks through the device.
	Tunnel routetable.RouteClass
	// Direct is the class of remote blocks routed directly.
	Direct routetable.RouteClass
	// Blackhole is the class of the blackholes of this node's blocks.
	Blackhole routetable.RouteClass
}

// DefaultClasses are the classes of a Manager whose Options.Classes is
// zero: distinct from vxlan.DefaultClasses, so both managers can share a
// table.
var DefaultClasses = Classes{Tunnel: 50, Direct: 51, Blackhole: 191}

// Device is the IPIP device a Driver keeps.
type Device struct {
	// Local is this node's underlay address. A device named tunl0 is the
	// kernel's catch-all tunnel and keeps no local address (the kernel
	// creates it with the ipip module); any other name is created with
	// Local as its local end. Required.
	Local netip.Addr
	// Address is the device's tunnel address, assigned as a /32; unset for
	// none. Other IPv4 addresses of the device are removed.
	Address netip.Addr
	// MTU is the device MTU; 0 keeps the kernel's.
	MTU int
}
