package netfilter

import (
	"fmt"
	"math"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

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

// HasFamily reports whether sets of type t are created with an address
// family: every type but bitmap:port.
func (t SetType) HasFamily() bool { return t != BitmapPort }

// DefaultMaxSize is the maximum number of members (ipset's maxelem) of a
// hash set whose SetMetadata.MaxSize is zero. The kernel allocates hash
// buckets as members arrive, not up front, so a large limit costs nothing
// until it is used; the kernel's own default (65536) is too small for
// large policies.
const DefaultMaxSize = 1 << 20

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
	Family ipfamily.Family
	// MaxSize is the maximum number of members of a hash set (ipset's
	// maxelem); zero means DefaultMaxSize. It must be zero for bitmap:port,
	// whose size is its Range. Changing it on an existing set swaps in a
	// new set.
	MaxSize int
	// Range is the port range of a bitmap:port set (the zero value is the
	// full range 0-65535); it must be zero for other types. Changing it on an
	// existing set swaps in a new set.
	Range PortRange
}

// MaxNameLength is the longest set name the kernel accepts, in bytes,
// prefix included.
const MaxNameLength = 31

// ValidSetName reports whether s is a non-empty string of the characters
// a set name may hold: ASCII letters, digits and "_.:-".
func ValidSetName(s string) bool {
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

// Normalize validates m for a set backend of family f whose set names
// start with prefix, and returns it with the defaults filled in (Family,
// MaxSize for hash types, Range for bitmap:port). Every backend of Sets
// calls it, so that they refuse the same metadata with the same
// sentinels: ErrInvalidSetName, ErrSetNameTooLong, ErrUnknownSetType,
// ErrWrongFamily (with ipfamily.ErrWrongFamily) or ErrInvalidSetMetadata.
func (m SetMetadata) Normalize(f ipfamily.Family, prefix string) (SetMetadata, error) {
	if err := ValidateSetName(m.Name, prefix); err != nil {
		return m, err
	}
	if !m.Type.Valid() {
		return m, fmt.Errorf("%w: %q (set %q)", ErrUnknownSetType, string(m.Type), m.Name)
	}
	if m.Family == 0 {
		m.Family = f
	}
	if m.Family != f {
		return m, errs.Also(fmt.Errorf("%w: set %q is %v, the backend is %v", ErrWrongFamily, m.Name, m.Family, f), ipfamily.ErrWrongFamily)
	}
	if m.Type == BitmapPort {
		if m.MaxSize != 0 {
			return m, fmt.Errorf("%w: set %q: MaxSize must be zero for bitmap:port (its size is its Range)", ErrInvalidSetMetadata, m.Name)
		}
		if m.Range.First > m.Range.Last {
			return m, fmt.Errorf("%w: set %q: port range %v is empty", ErrInvalidSetMetadata, m.Name, m.Range)
		}
		if m.Range == (PortRange{}) {
			m.Range = Ports(0, math.MaxUint16)
		}
		return m, nil
	}
	if m.Range != (PortRange{}) {
		return m, fmt.Errorf("%w: set %q: Range applies to bitmap:port only", ErrInvalidSetMetadata, m.Name)
	}
	switch {
	case m.MaxSize == 0:
		m.MaxSize = DefaultMaxSize
	case m.MaxSize < 0 || uint64(m.MaxSize) > math.MaxUint32:
		return m, fmt.Errorf("%w: set %q: MaxSize %d out of range 1-%d", ErrInvalidSetMetadata, m.Name, m.MaxSize, uint64(math.MaxUint32))
	}
	return m, nil
}

// CheckMember reports whether member may be a member of a set of m, as
// normalized by Normalize. The error wraps ErrInvalidMember, or
// ErrWrongFamily and ipfamily.ErrWrongFamily.
func (m *SetMetadata) CheckMember(member Member) error { return check(m, member) }

// ValidateSetName validates an unprefixed set name for a backend whose set
// names start with prefix: it must be ValidSetName, and at most
// MaxNameLength bytes once prefixed. The error wraps ErrInvalidSetName or
// ErrSetNameTooLong.
func ValidateSetName(name, prefix string) error {
	if !ValidSetName(name) {
		return fmt.Errorf("%w: %q (use ASCII letters, digits and \"_.:-\")", ErrInvalidSetName, name)
	}
	if n := len(prefix) + len(name); n > MaxNameLength {
		return fmt.Errorf("%w: %q is %d bytes with prefix %q, the kernel allows %d", ErrSetNameTooLong, prefix+name, n, prefix, MaxNameLength)
	}
	return nil
}
