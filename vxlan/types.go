package vxlan

import (
	"errors"
	"fmt"
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

// VTEP is a message: a node's VXLAN tunnel endpoint was added or changed.
// It carries both families; a Manager uses the fields of its own family and
// treats a node without them as having no endpoint of that family. The
// message for this node (Options.NodeName) configures the device: its
// local underlay address, MAC and tunnel address.
type VTEP struct {
	// Node is the node's name. Required.
	Node string
	// UnderlayV4 and UnderlayV6 are the node's underlay addresses: where
	// its encapsulated packets go.
	UnderlayV4, UnderlayV6 netip.Addr
	// TunnelV4 and TunnelV6 are the addresses of the node's VXLAN devices:
	// the next hop of its blocks.
	TunnelV4, TunnelV6 netip.Addr
	// MACV4 and MACV6 are the MACs of the node's VXLAN devices.
	MACV4, MACV6 net.HardwareAddr
}

// VTEPRemove is a message: the node is gone; its neighbour and FDB entries,
// routes and set member go.
type VTEPRemove struct {
	// Node is the node's name.
	Node string
}

// BlockUpdate is a message: the pod block CIDR belongs to Node. A block of
// this node (Options.NodeName) gets a blackhole route, so unallocated
// addresses of it are dropped rather than sent back out; a block of another
// node is routed to that node.
type BlockUpdate struct {
	// CIDR is the block, without host bits. Its family selects the
	// Manager that uses it.
	CIDR netip.Prefix
	// Node owns the block.
	Node string
}

// BlockRemove is a message: the block is gone, and so is its route.
type BlockRemove struct {
	// CIDR is the block.
	CIDR netip.Prefix
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInput}, args...)...)
}

// Validate reports, with an error wrapping ErrInvalidInput, what is wrong
// with v: no node name, an address of the wrong family or that is not a
// unicast host address, a MAC that is not a 6-byte unicast address.
func (v *VTEP) Validate() error {
	if v == nil {
		return invalidf("nil VTEP")
	}
	if err := overlay.CheckName(v.Node); err != nil {
		return invalidf("VTEP: %v", err)
	}
	var problems []error
	for _, a := range []struct {
		what string
		f    Family
		addr netip.Addr
	}{{"IPv4 underlay", IPv4, v.UnderlayV4}, {"IPv6 underlay", IPv6, v.UnderlayV6}, {"IPv4 tunnel address", IPv4, v.TunnelV4}, {"IPv6 tunnel address", IPv6, v.TunnelV6}} {
		if a.addr.IsValid() {
			if err := overlay.CheckHost(a.f, a.addr); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", a.what, err))
			}
		}
	}
	for _, m := range []struct {
		what string
		mac  net.HardwareAddr
	}{{"IPv4 MAC", v.MACV4}, {"IPv6 MAC", v.MACV6}} {
		if m.mac != nil {
			if err := overlay.CheckMAC(m.mac); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", m.what, err))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: VTEP of node %q: %w", ErrInvalidInput, v.Node, errors.Join(problems...))
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, an empty node
// name.
func (r *VTEPRemove) Validate() error {
	if r == nil || r.Node == "" {
		return invalidf("VTEP removal without a node name")
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, a CIDR that is
// not a network prefix (host bits set: the error names the network) or a
// block without a node.
func (b *BlockUpdate) Validate() error {
	if b == nil {
		return invalidf("nil block")
	}
	if err := overlay.CheckBlockUpdate(ipfamily.Of(b.CIDR.Addr()), b.CIDR, b.Node); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, a CIDR that is
// not a network prefix.
func (b *BlockRemove) Validate() error {
	if b == nil || !b.CIDR.IsValid() {
		return invalidf("block removal without a CIDR")
	}
	if err := ipfamily.Of(b.CIDR.Addr()).CheckNet(b.CIDR); err != nil {
		return invalidf("block %s: %v", b.CIDR, err)
	}
	return nil
}

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
