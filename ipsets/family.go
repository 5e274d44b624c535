package ipsets

import "github.com/nodeplane/nodeplane/ipfamily"

// Family is the address family of a set and of the driver that owns it:
// one driver per family. It is ipfamily.Family, shared by every nodeplane
// package.
type Family = ipfamily.Family

// The address families.
const (
	// IPv4 is the inet family.
	IPv4 = ipfamily.IPv4
	// IPv6 is the inet6 family.
	IPv6 = ipfamily.IPv6
)

// FamilyName returns the family as ipset spells it: "inet" or "inet6" (and
// f.String() for an invalid family).
func FamilyName(f Family) string {
	switch f {
	case IPv4:
		return "inet"
	case IPv6:
		return "inet6"
	}
	return f.String()
}
