package endpoints

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// EndpointUpdate declares one local workload endpoint, or changes it: the
// host side of a pod's interface (a veth, say) and the pod's addresses.
type EndpointUpdate struct {
	// ID names the endpoint (such as "namespace/pod"); required. A later
	// update with the same ID replaces the endpoint.
	ID string
	// Iface is the host-side interface's name; required.
	Iface string
	// Addrs are the endpoint's addresses, both families, as networks:
	// usually one host prefix per family (10.244.1.5/32,
	// fd00:10:244:1::5/128). Each Manager takes its own family's; an
	// endpoint with none of a family is not that family's Manager's.
	Addrs []netip.Prefix
	// MAC is the workload's link-layer address, for the static neighbour
	// entries of Options.StaticNeighbors; optional.
	MAC net.HardwareAddr
}

// Validate reports whether u is well formed: an ID, an interface name the
// kernel takes, valid network prefixes (10.244.1.5/32, not 10.244.1.5/24)
// and, if set, a 6-byte unicast MAC. The error wraps ErrInvalidEndpoint.
func (u EndpointUpdate) Validate() error {
	if u.ID == "" {
		return fmt.Errorf("%w: empty ID", ErrInvalidEndpoint)
	}
	if err := ifname.Valid(u.Iface); err != nil {
		return fmt.Errorf("%w: endpoint %q: %v", ErrInvalidEndpoint, u.ID, err)
	}
	for _, p := range u.Addrs {
		f := ipfamily.Of(p.Addr())
		if !p.IsValid() || !f.Valid() {
			return fmt.Errorf("%w: endpoint %q: invalid address %v", ErrInvalidEndpoint, u.ID, p)
		}
		if err := f.CheckNet(p); err != nil {
			return errs.Also(fmt.Errorf("%w: endpoint %q: %s has host bits set (the network is %s)",
				ErrInvalidEndpoint, u.ID, p, p.Masked()), err)
		}
	}
	if len(u.MAC) != 0 && (len(u.MAC) != 6 || u.MAC[0]&1 != 0 || [6]byte(u.MAC) == [6]byte{}) {
		return fmt.Errorf("%w: endpoint %q: MAC %v is not a 6-byte unicast address", ErrInvalidEndpoint, u.ID, u.MAC)
	}
	return nil
}

// EndpointRemove withdraws the endpoint with ID: its routes and static
// neighbours go; its interface's sysctls are left as they are (the
// interface usually goes with the pod).
type EndpointRemove struct {
	// ID names the endpoint; required.
	ID string
}

// State is what a Status says of an endpoint.
type State uint8

const (
	// StateProgrammed: the interface is up, its sysctls hold their values
	// and the route table wrote the endpoint's routes (and static
	// neighbours) without error.
	StateProgrammed State = iota + 1
	// StateInterfaceMissing: no interface has the endpoint's name (yet,
	// or any more). Its routes are held and written when it appears.
	StateInterfaceMissing
	// StateInterfaceDown: the interface exists but is not up (down, or
	// without carrier). Its sysctls are set; its routes are held and
	// written when it comes up.
	StateInterfaceDown
	// StateError: the endpoint is invalid, a sysctl could not be applied
	// or a route could not be written; Status.Err says which. Failed writes
	// are retried on their own backoff.
	StateError
)

// String returns "programmed", "interface-missing", "interface-down" or
// "error".
func (s State) String() string {
	switch s {
	case StateProgrammed:
		return "programmed"
	case StateInterfaceMissing:
		return "interface-missing"
	case StateInterfaceDown:
		return "interface-down"
	case StateError:
		return "error"
	}
	return "unknown"
}

// Status reports the state of one endpoint for one IP family.
type Status struct {
	// ID and Iface are the endpoint's.
	ID, Iface string
	// Family is the reporting Manager's.
	Family ipfamily.Family
	// State is the endpoint's state.
	State State
	// Err says why, for StateError: it wraps ErrInvalidEndpoint, ErrSysctl
	// or ErrRoute and the cause.
	Err error
}

// String describes the status in one line.
func (s Status) String() string {
	if s.Err != nil {
		return fmt.Sprintf("%s (%s, %v): %s: %v", s.ID, s.Iface, s.Family, s.State, s.Err)
	}
	return fmt.Sprintf("%s (%s, %v): %s", s.ID, s.Iface, s.Family, s.State)
}

// Sysctl is one per-interface sysctl and its value: the key
// net/ipv4/<Dir>/<interface>/<Name> (net/ipv6/… for an IPv6 Manager).
type Sysctl struct {
	// Dir is the directory of per-interface directories: "conf" (the
	// empty string means "conf") or "neigh".
	Dir string
	// Name is the leaf, such as "proxy_arp".
	Name string
	// Value is the value it must hold.
	Value string
}

// key returns the sysctl's key for interface name in family f.
func (s Sysctl) key(f ipfamily.Family, name string) string {
	dir := s.Dir
	if dir == "" {
		dir = "conf"
	}
	fam := "ipv4"
	if f == ipfamily.IPv6 {
		fam = "ipv6"
	}
	return "net/" + fam + "/" + dir + "/" + name + "/" + s.Name
}

// DefaultSysctls returns the per-interface sysctls a workload interface
// needs, for family f:
//
//   - IPv4: forwarding 1; rp_filter 1 (strict: the pod may only send from
//     addresses routed back to it, which stops spoofing — the kernel
//     applies the larger of this and conf/all's); proxy_arp 1 and
//     proxy_delay 0 (the host answers the pod's ARP for any address, such
//     as its gateway, at once).
//   - IPv6: forwarding 1; proxy_ndp 1; accept_ra 0 (the host never takes a
//     route from a router advertisement a pod sends).
func DefaultSysctls(f ipfamily.Family) []Sysctl {
	if f == ipfamily.IPv6 {
		return []Sysctl{{Name: "forwarding", Value: "1"}, {Name: "proxy_ndp", Value: "1"}, {Name: "accept_ra", Value: "0"}}
	}
	return []Sysctl{
		{Name: "forwarding", Value: "1"}, {Name: "rp_filter", Value: "1"}, {Name: "proxy_arp", Value: "1"},
		{Dir: "neigh", Name: "proxy_delay", Value: "0"},
	}
}
