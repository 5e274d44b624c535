package ipfamily

import (
	"fmt"
	"net/netip"
)

// Family is IPv4 or IPv6. Its values are the IP version numbers, so that
// Family(4) and Family(6) read naturally; the zero value is invalid, which
// makes a forgotten option field an error rather than a silent IPv4.
type Family uint8

// The two families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// All lists both families, IPv4 first, for code that builds one instance
// per family.
var All = [...]Family{IPv4, IPv6}

// String returns "IPv4", "IPv6" or "Family(N)" for an invalid value.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("Family(%d)", uint8(f))
}

// Valid reports whether f is IPv4 or IPv6.
func (f Family) Valid() bool { return f == IPv4 || f == IPv6 }

// Bits is the address length in bits: 32 or 128 (0 when invalid).
func (f Family) Bits() int {
	switch f {
	case IPv4:
		return 32
	case IPv6:
		return 128
	}
	return 0
}

// AF is the kernel's address-family number (AF_INET 2, AF_INET6 10), as
// netlink messages carry it; 0 (AF_UNSPEC) when f is invalid.
func (f Family) AF() int {
	switch f {
	case IPv4:
		return 2
	case IPv6:
		return 10
	}
	return 0
}

// FromAF returns the Family of a kernel address-family number, and false
// for anything but AF_INET and AF_INET6.
func FromAF(af int) (Family, bool) {
	switch af {
	case 2:
		return IPv4, true
	case 10:
		return IPv6, true
	}
	return 0, false
}

// Of returns the family of a valid address. An IPv4-mapped IPv6 address
// (::ffff:a.b.c.d) is IPv6: nodeplane never unmaps silently, because the
// kernel treats the two forms differently. Of returns 0 for an invalid
// address.
func Of(a netip.Addr) Family {
	switch {
	case !a.IsValid():
		return 0
	case a.Is4():
		return IPv4
	}
	return IPv6
}

// Contains reports whether a is a valid address of family f.
func (f Family) Contains(a netip.Addr) bool { return f.Valid() && Of(a) == f }

// ContainsPrefix reports whether p is a valid prefix of family f.
func (f Family) ContainsPrefix(p netip.Prefix) bool { return p.IsValid() && f.Contains(p.Addr()) }

// Check returns nil when a is a valid address of family f, and otherwise an
// error that says what is wrong with it, wrapping ErrWrongFamily when the
// address is of the other family. An address with a zone (fe80::1%eth0)
// is invalid: the kernel objects nodeplane writes name their interface
// apart, never in an address.
func (f Family) Check(a netip.Addr) error {
	switch {
	case !f.Valid():
		return fmt.Errorf("%w: %v", ErrInvalidFamily, f)
	case !a.IsValid():
		return fmt.Errorf("%w: invalid address", ErrInvalidAddress)
	case Of(a) != f:
		return fmt.Errorf("%w: %s is not an %s address", ErrWrongFamily, a, f)
	case a.Zone() != "":
		return fmt.Errorf("%w: %s has a zone", ErrInvalidAddress, a)
	}
	return nil
}

// CheckPrefix is Check for a prefix.
func (f Family) CheckPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		if f.Valid() {
			return fmt.Errorf("%w: invalid prefix", ErrInvalidAddress)
		}
		return fmt.Errorf("%w: %v", ErrInvalidFamily, f)
	}
	if err := f.Check(p.Addr()); err != nil {
		return fmt.Errorf("prefix %s: %w", p, err)
	}
	return nil
}

// CheckNet is CheckPrefix for a network prefix, such as a route
// destination or a pool CIDR: besides the family, it refuses host bits set
// after the prefix length (10.0.0.1/24, where the network is 10.0.0.0/24),
// which the kernel would otherwise mask or store as written. The error
// names the prefix and the network it stands for.
func (f Family) CheckNet(p netip.Prefix) error {
	if err := f.CheckPrefix(p); err != nil {
		return err
	}
	if m := p.Masked(); m != p {
		return fmt.Errorf("%w: %s (the network is %s)", ErrHostBits, p, m)
	}
	return nil
}
