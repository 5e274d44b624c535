package ipsets

import (
	"fmt"
	"math"
	"strconv"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

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

// SetType is the kind of a set, spelled as ipset spells it.
type SetType string

// The set types the package supports.
const (
	// HashIP holds single addresses ("10.0.0.1").
	HashIP SetType = "hash:ip"
	// HashNet holds prefixes ("10.0.0.0/8"); a full-length prefix is stored
	// and shown as the bare address.
	HashNet SetType = "hash:net"
	// HashIPPort holds address, protocol and port triples
	// ("10.0.0.1,tcp:80").
	HashIPPort SetType = "hash:ip,port"
	// HashNetNet holds pairs of prefixes ("10.0.0.0/8,192.168.0.0/16").
	// Not every kernel has it (CONFIG_IP_SET_HASH_NETNET).
	HashNetNet SetType = "hash:net,net"
	// BitmapPort holds ports of a fixed range ("80"); it has no address
	// family.
	BitmapPort SetType = "bitmap:port"
)

// Valid reports whether t is one of the supported types.
func (t SetType) Valid() bool {
	switch t {
	case HashIP, HashNet, HashIPPort, HashNetNet, BitmapPort:
		return true
	}
	return false
}

// hasFamily reports whether sets of type t are created with a family.
func (t SetType) hasFamily() bool { return t != BitmapPort }

// DefaultMaxSize is the maximum number of members (ipset's maxelem) of a
// hash set whose SetMetadata.MaxSize is zero. The kernel allocates hash
// buckets as members arrive, not up front, so a large limit costs nothing
// until it is used; the kernel's own default (65536) is too small for
// large policies.
const DefaultMaxSize = 1 << 20

// PortRange is the inclusive range of ports a bitmap:port set can hold.
// The zero PortRange means the full range 0-65535.
type PortRange struct {
	// First is the lowest port of the range.
	First uint16
	// Last is the highest port of the range; it must not be below First.
	Last uint16
}

// String returns the range as ipset spells it, such as "1000-2000".
func (r PortRange) String() string {
	return strconv.Itoa(int(r.First)) + "-" + strconv.Itoa(int(r.Last))
}

// Contains reports whether port lies in the range. The zero PortRange
// contains every port.
func (r PortRange) Contains(port uint16) bool {
	r = r.normal()
	return port >= r.First && port <= r.Last
}

// normal returns r with the zero value replaced by the full range.
func (r PortRange) normal() PortRange {
	if r == (PortRange{}) {
		return PortRange{0, math.MaxUint16}
	}
	return r
}

// SetMetadata describes a set. The driver's family and name prefix apply
// to every set it owns.
type SetMetadata struct {
	// Name is the set's name without the driver's prefix. It is made of
	// ASCII letters, digits and "_.:-", and the prefixed name (the kernel
	// name) is at most MaxNameLength bytes long.
	Name string
	// Type is the set type.
	Type SetType
	// Family is the set's address family. Zero means the driver's family;
	// any other value must equal it.
	Family Family
	// MaxSize is the maximum number of members of a hash set (ipset's
	// maxelem); zero means DefaultMaxSize. It must be zero for bitmap:port,
	// whose size is its Range. Changing it on an existing set swaps in a
	// new set.
	MaxSize int
	// Range is the port range of a bitmap:port set (the zero value is the
	// full range); it must be zero for other types. Changing it on an
	// existing set swaps in a new set.
	Range PortRange
}

// MaxNameLength is the longest set name the kernel accepts, in bytes,
// prefix included.
const MaxNameLength = 31

// validName reports whether s is a non-empty name of allowed characters.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// normalize validates m for a driver of family f with name prefix prefix
// and returns it with defaults filled in: Family set, MaxSize set for hash
// types, Range set for bitmap:port.
func (m SetMetadata) normalize(f Family, prefix string) (SetMetadata, error) {
	if err := checkName(m.Name, prefix); err != nil {
		return m, err
	}
	if !m.Type.Valid() {
		return m, fmt.Errorf("%w: %q (set %q)", ErrUnknownType, string(m.Type), m.Name)
	}
	if m.Family == 0 {
		m.Family = f
	}
	if m.Family != f {
		return m, errs.Also(fmt.Errorf("%w: set %q is %v, the driver is %v", ErrWrongFamily, m.Name, m.Family, f), ipfamily.ErrWrongFamily)
	}
	if m.Type == BitmapPort {
		if m.MaxSize != 0 {
			return m, fmt.Errorf("%w: set %q: MaxSize must be zero for bitmap:port (its size is its Range)", ErrInvalidMetadata, m.Name)
		}
		if m.Range.First > m.Range.Last {
			return m, fmt.Errorf("%w: set %q: port range %v is empty", ErrInvalidMetadata, m.Name, m.Range)
		}
		m.Range = m.Range.normal()
		return m, nil
	}
	if m.Range != (PortRange{}) {
		return m, fmt.Errorf("%w: set %q: Range applies to bitmap:port only", ErrInvalidMetadata, m.Name)
	}
	switch {
	case m.MaxSize == 0:
		m.MaxSize = DefaultMaxSize
	case m.MaxSize < 0 || uint64(m.MaxSize) > math.MaxUint32:
		return m, fmt.Errorf("%w: set %q: MaxSize %d out of range 1-%d", ErrInvalidMetadata, m.Name, m.MaxSize, uint64(math.MaxUint32))
	}
	return m, nil
}

// Normalize validates m as IPSets.AddOrReplaceSet does, for a backend of
// family f whose set names start with prefix, and returns it with the
// defaults filled in (Family, MaxSize for hash types, Range for
// bitmap:port). Another backend of Sets calls it to refuse what IPSets
// refuses, with the same sentinels.
func (m SetMetadata) Normalize(f Family, prefix string) (SetMetadata, error) {
	return m.normalize(f, prefix)
}

// CheckMember reports whether member may be a member of a set of m, as
// normalized by Normalize, as IPSets does. The error wraps
// ErrInvalidMember, or ErrWrongFamily and ipfamily.ErrWrongFamily.
func (m SetMetadata) CheckMember(member Member) error { return check(&m, member) }

// checkName validates an unprefixed set name against the prefix.
func checkName(name, prefix string) error {
	if !validName(name) {
		return fmt.Errorf("%w: %q (use ASCII letters, digits and \"_.:-\")", ErrInvalidName, name)
	}
	if n := len(prefix) + len(name); n > MaxNameLength {
		return fmt.Errorf("%w: %q is %d bytes with prefix %q, the kernel allows %d", ErrNameTooLong, prefix+name, n, prefix, MaxNameLength)
	}
	return nil
}
