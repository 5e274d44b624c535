package routetable

import (
	"fmt"
	"regexp"

	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/kernel"
)

// OwnershipPolicy decides which routes found in the Table's kernel table
// belong to it. Routes that are not its own are never changed or deleted,
// and a desired route whose key one of them holds is not written (see
// ErrForeignRoute).
type OwnershipPolicy interface {
	// RouteIsOurs reports whether r, a route found in the table, belongs
	// to the Table. iface is the name of r's output interface ("" when it
	// has none or is unknown; for multipath routes, the first next hop's).
	RouteIsOurs(r *kernel.Route, iface string) bool
	// IfaceHasGracePeriod reports whether a route of ours on iface that
	// nobody wants is left in place for the grace period before it is
	// deleted (another component, such as a CNI plugin, may have added it
	// just before the Table learnt about it).
	IfaceHasGracePeriod(iface string) bool
}

// DefaultPolicy owns the routes that carry its protocol, and the routes on
// interfaces whose names match its patterns (whatever their protocol,
// except the kernel's own address routes, RTPROT_KERNEL). Unwanted routes
// on matching interfaces get the grace period.
type DefaultPolicy struct {
	// Protocol is the route protocol that marks a route as ours.
	Protocol uint8
	// Interfaces match the names of interfaces whose routes are ours.
	Interfaces []*regexp.Regexp
}

// NewDefaultPolicy builds a DefaultPolicy from regular expressions.
func NewDefaultPolicy(protocol uint8, patterns []string) (*DefaultPolicy, error) {
	res, err := ifname.Compile("interface", patterns)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return &DefaultPolicy{Protocol: protocol, Interfaces: res}, nil
}

// RouteIsOurs implements OwnershipPolicy.
func (p *DefaultPolicy) RouteIsOurs(r *kernel.Route, iface string) bool {
	if r.Protocol == p.Protocol {
		return true
	}
	return r.Protocol != kernel.ProtoKernel && p.matches(iface)
}

// IfaceHasGracePeriod implements OwnershipPolicy.
func (p *DefaultPolicy) IfaceHasGracePeriod(iface string) bool { return p.matches(iface) }

func (p *DefaultPolicy) matches(iface string) bool {
	if iface == "" {
		return false
	}
	return ifname.MatchAny(p.Interfaces, iface)
}

// ExclusivePolicy owns every route in the table: for a table dedicated to
// the Table (a WireGuard or per-tenant table). No grace period applies.
type ExclusivePolicy struct{}

// RouteIsOurs implements OwnershipPolicy: every route is ours.
func (ExclusivePolicy) RouteIsOurs(*kernel.Route, string) bool { return true }

// IfaceHasGracePeriod implements OwnershipPolicy: never.
func (ExclusivePolicy) IfaceHasGracePeriod(string) bool { return false }

// ownsSystemRoutes reports whether p claims routes the Table did not write
// and that the host needs: the kernel's address routes (RTPROT_KERNEL) and
// routes added at boot or by hand (RTPROT_BOOT), on an interface outside
// any pattern. ExclusivePolicy does; DefaultPolicy does not (unless its
// protocol is RTPROT_BOOT).
func ownsSystemRoutes(p OwnershipPolicy) bool {
	for _, proto := range []uint8{kernel.ProtoKernel, kernel.ProtoBoot} {
		if p.RouteIsOurs(&kernel.Route{Type: kernel.RTNUnicast, Protocol: proto}, "") {
			return true
		}
	}
	return false
}
