package ipip

import (
	"net/netip"
)

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
