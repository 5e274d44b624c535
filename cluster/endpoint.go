package cluster

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Endpoint is one local workload endpoint, declared or changed: the host
// side of a pod's interface, the pod's addresses and its floating IPs. A
// later Endpoint with the same ID replaces it. The endpoint manager takes
// its interface, addresses and MAC (routes, static neighbours, interface
// sysctls); the floating IP manager takes its FloatingIPs.
type Endpoint struct {
	// ID names the endpoint (such as "namespace/pod"); required.
	ID string
	// Iface is the host-side interface's name (a veth, say); required.
	Iface string
	// Addrs are the endpoint's addresses, both families, as networks:
	// usually one host prefix per family (10.244.1.5/32,
	// fd00:10:244:1::5/128).
	Addrs []netip.Prefix
	// MAC is the workload's link-layer address, a 6-byte unicast address;
	// optional.
	MAC net.HardwareAddr
	// FloatingIPs are the endpoint's floating IPs, of either family:
	// addresses the world uses for it, translated one to one to one of its
	// own addresses (each Internal is in one of Addrs).
	FloatingIPs []NAT
}

// NAT is one floating IP of an endpoint: traffic to Floating goes to
// Internal, and Internal's traffic leaves as Floating.
type NAT struct {
	// Floating is the address the world uses.
	Floating netip.Addr
	// Internal is the endpoint's own address, of the same family.
	Internal netip.Addr
}

// Validate reports whether e is well formed: an ID, an interface name the
// kernel takes, valid network prefixes (10.244.1.5/32, not
// 10.244.1.5/24) of unicast host addresses (CheckHostAddr: not loopback,
// multicast or link-local), if set a 6-byte unicast MAC, and floating IPs whose two
// addresses are unicast, of one family and different, and whose internal
// address is one of the endpoint's (in one of Addrs). The error names the
// endpoint and wraps ErrInvalid (and the ipfamily sentinel of a family
// mismatch or of host bits).
func (e Endpoint) Validate() error {
	if e.ID == "" {
		return fmt.Errorf("%w endpoint: empty ID", ErrInvalid)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w endpoint %q: %s", ErrInvalid, e.ID, fmt.Sprintf(format, args...))
	}
	if err := ifname.Valid(e.Iface); err != nil {
		return bad("%v", err)
	}
	for _, p := range e.Addrs {
		f := ipfamily.Of(p.Addr())
		if !p.IsValid() || !f.Valid() {
			return bad("invalid address %v", p)
		}
		if p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return bad("address %v: an IPv4 address mapped into IPv6, or one with a zone (give IPv4 as IPv4)", p)
		}
		if err := f.CheckNet(p); err != nil {
			return errs.Also(bad("%s has host bits set (the network is %s)", p, p.Masked()), err)
		}
		if err := CheckHostAddr(f, p.Addr()); err != nil {
			return bad("address %v: %v", p, err)
		}
	}
	if len(e.MAC) != 0 && (len(e.MAC) != 6 || e.MAC[0]&1 != 0 || [6]byte(e.MAC) == [6]byte{}) {
		return bad("MAC %v is not a 6-byte unicast address", e.MAC)
	}
	for _, n := range e.FloatingIPs {
		ff, fi := ipfamily.Of(n.Floating), ipfamily.Of(n.Internal)
		switch {
		case !ff.Valid() || !fi.Valid():
			return bad("invalid address in floating IP %v -> %v", n.Floating, n.Internal)
		case ff != fi:
			return errs.Also(bad("floating IP %v and %v are of different families", n.Floating, n.Internal), ipfamily.ErrWrongFamily)
		case n.Floating == n.Internal:
			return bad("floating IP %v is the internal address", n.Floating)
		case !serviceUnicast(n.Floating) || !serviceUnicast(n.Internal):
			return bad("floating IP %v -> %v: not a unicast address", n.Floating, n.Internal)
		case !slices.ContainsFunc(e.Addrs, func(p netip.Prefix) bool { return p.Contains(n.Internal) }):
			return bad("floating IP %v -> %v: %v is none of the endpoint's addresses", n.Floating, n.Internal, n.Internal)
		}
	}
	return nil
}

// EndpointRemove withdraws the endpoint with ID: its routes, static
// neighbours and floating IPs. Removing an endpoint that is not declared
// does nothing.
type EndpointRemove struct {
	// ID names the endpoint; required.
	ID string
}

// Validate reports whether r names an endpoint; the error wraps
// ErrInvalid.
func (r EndpointRemove) Validate() error {
	if r.ID == "" {
		return fmt.Errorf("%w endpoint remove: empty ID", ErrInvalid)
	}
	return nil
}
