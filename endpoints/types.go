package endpoints

import (
	"fmt"

	"github.com/nodeplane/nodeplane/ipfamily"
)

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
