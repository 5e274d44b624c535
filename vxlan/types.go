package vxlan

import (
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Family is an IP family: ipfamily.Family, shared by every nodeplane
// package.
type Family = ipfamily.Family

// The families.
const (
	IPv4 = ipfamily.IPv4
	IPv6 = ipfamily.IPv6
)

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
	// MTU is the device MTU: 68 to 65535 (1280 up for an IPv6 Driver,
	// whose device carries IPv6); 0 keeps the kernel's (the parent's less
	// 50, 70 over IPv6). Changed in place.
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
