package ipip

import (
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/overlay"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/routetable"
)

// Node is a message: a node was added or changed. IPIP is IPv4 only.
// The message for this node (Options.NodeName) configures the device: its
// underlay address finds the host's uplink and its tunnel address is the
// device's.
type Node struct {
	// Name is the node's name. Required.
	Name string
	// Underlay is the node's IPv4 underlay address: the next hop (onlink,
	// through the device) of its blocks. Unset means the node has none.
	Underlay netip.Addr
	// TunnelAddr is the address of the node's IPIP device; only this
	// node's is used (assigned to the device, so traffic the host itself
	// sends through the tunnel has a source the other nodes route back).
	TunnelAddr netip.Addr
}

// NodeRemove is a message: the node is gone; its routes and set member go.
type NodeRemove struct {
	// Name is the node's name.
	Name string
}

// BlockUpdate is a message: the IPv4 pod block CIDR belongs to Node. A
// block of this node gets a blackhole route; a block of another node is
// routed to it.
type BlockUpdate struct {
	// CIDR is the block, without host bits.
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
// with n: no name, or an address that is not an IPv4 unicast host address.
func (n *Node) Validate() error {
	if n == nil || n.Name == "" {
		return invalidf("node without a name")
	}
	if n.Underlay.IsValid() {
		if err := overlay.CheckHost(ipfamily.IPv4, n.Underlay); err != nil {
			return invalidf("node %q: underlay: %v", n.Name, err)
		}
	}
	if n.TunnelAddr.IsValid() {
		if err := overlay.CheckHost(ipfamily.IPv4, n.TunnelAddr); err != nil {
			return invalidf("node %q: tunnel address: %v", n.Name, err)
		}
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, an empty name.
func (r *NodeRemove) Validate() error {
	if r == nil || r.Name == "" {
		return invalidf("node removal without a name")
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, a CIDR that is
// not an IPv4 network prefix (host bits set: the error names the network)
// or a block without a node.
func (b *BlockUpdate) Validate() error {
	if b == nil {
		return invalidf("nil block")
	}
	if err := overlay.CheckBlockUpdate(ipfamily.IPv4, b.CIDR, b.Node); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalidInput, a CIDR that is
// not an IPv4 network prefix.
func (b *BlockRemove) Validate() error {
	if b == nil {
		return invalidf("nil block removal")
	}
	if err := ipfamily.IPv4.CheckNet(b.CIDR); err != nil {
		return invalidf("block %s: %v", b.CIDR, err)
	}
	return nil
}

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
