package vxlan

import (
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/overlay"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/routetable"
)

// Family is an IP family: ipfamily.Family, shared by every nodeplane
// package.
type Family = ipfamily.Family

// The families.
const (
	IPv4 = ipfamily.IPv4
	IPv6 = ipfamily.IPv6
)

// Mode says how a Manager routes remote blocks.
type Mode uint8

const (
	// Always routes every remote block through the VXLAN device: via the
	// owner's tunnel address, onlink. It is the zero value.
	Always Mode = iota
	// CrossSubnet routes the blocks of nodes on one of this host's
	// subnets directly, via the node's underlay address on that subnet's
	// interface, and the others through the VXLAN device. A node moving
	// between subnets switches its routes in one replace each.
	CrossSubnet
	// Never encapsulates nothing: no device; the blocks of nodes on one
	// of this host's subnets are routed directly and the others not at all
	// (direct routing on a flat L2 network).
	Never
)

// String returns "always", "cross-subnet" or "never".
func (m Mode) String() string { return overlay.Mode(m).OptionName() }

// Device is the VXLAN device a Driver keeps: one per family.
type Device struct {
	// VNI is the VXLAN network identifier, 1 to 2^24-1; 0 means DefaultVNI.
	// A change re-creates the device.
	VNI uint32
	// Port is the UDP destination port; 0 means DefaultPort. A change
	// re-creates the device.
	Port uint16
	// Local is this node's underlay address: the source of encapsulated
	// packets. The interface that holds it is the device's parent; a
	// change of either re-creates the device. Required.
	Local netip.Addr
	// MAC is the device's MAC, which the other nodes' FDB entries name;
	// nil keeps the one the kernel chose. Changed in place.
	MAC net.HardwareAddr
	// Address is the device's tunnel address, assigned as a /32 (/128);
	// unset for none. Other addresses of the family are removed
	// (link-local ones aside). Changed in place.
	Address netip.Addr
	// MTU is the device MTU; 0 keeps the kernel's (the parent's less 50,
	// 70 over IPv6). Changed in place.
	MTU int
}

// Remote is a remote VTEP as a Driver programs it: a permanent neighbour
// entry TunnelIP → MAC and an FDB entry MAC → Underlay on the device.
type Remote struct {
	// TunnelIP is the remote device's address.
	TunnelIP netip.Addr
	// MAC is the remote device's MAC.
	MAC net.HardwareAddr
	// Underlay is the remote node's underlay address.
	Underlay netip.Addr
}

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
// zero.
var DefaultClasses = Classes{Tunnel: 40, Direct: 41, Blackhole: 190}
