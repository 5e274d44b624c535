package netfilter

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// parseMemberProto parses the protocol of a hash:ip,port member as ipset
// writes it.
func parseMemberProto(s string) (Proto, bool) {
	switch s {
	case "tcp":
		return ProtoTCP, true
	case "udp":
		return ProtoUDP, true
	case "sctp":
		return ProtoSCTP, true
	}
	return 0, false
}

// Member is one element of a set, in canonical form: a full-length prefix
// equals the bare address (NetMember of 10.0.0.1/32 == IPMember of
// 10.0.0.1). A prefix with host bits set (10.0.0.1/24) is not silently
// masked: it makes an invalid Member. Members are comparable and can be
// map keys.
//
// Build one with IPMember, NetMember, IPPortMember, NetNetMember,
// PortMember or ParseMember. A constructor given bad input returns an
// invalid Member (Valid is false, Err says why); the driver rejects it.
// The zero Member is invalid.
//
// A Member is 38 bytes with no pointers, so a set of 100k members costs the
// garbage collector nothing to scan.
type Member struct {
	a, b  [16]byte // first and second address; IPv4 in the first 4 bytes
	bitsA uint8    // prefix length of a; the reason code when invalid
	bitsB uint8    // prefix length of b; of the prefix in a when invalid
	proto Proto    // protocol of an address-and-port member
	flags uint8
	port  uint16
}

const (
	flagAddr    uint8 = 1 << iota // a is set
	flagV6                        // the addresses are IPv6
	flagSecond                    // b is set (hash:net,net)
	flagPort                      // port is set (with proto for hash:ip,port)
	flagInvalid                   // bad input; bitsA holds the reason
)

// Reasons a constructor returns an invalid Member.
const (
	reasonZero uint8 = iota
	reasonAddr
	reasonZone
	reasonPrefix
	reasonMixed
	reasonProtocol
	reasonSyntax
	reasonHostBits // a and bitsB hold the prefix
)

var reasonText = [...]string{
	reasonZero:     "zero Member",
	reasonAddr:     "invalid address",
	reasonZone:     "address has a zone",
	reasonPrefix:   "invalid prefix",
	reasonMixed:    "prefixes of different families",
	reasonProtocol: "protocol must be tcp, udp or sctp",
	reasonSyntax:   "syntax error",
	reasonHostBits: "prefix has host bits set",
}

func invalid(reason uint8) Member { return Member{flags: flagInvalid, bitsA: reason} }

// setAddr stores addr in a (second=false) or b with prefix length bits.
func (m *Member) setAddr(second bool, addr netip.Addr, bits int) {
	dst, db := &m.a, &m.bitsA
	if second {
		dst, db = &m.b, &m.bitsB
	}
	if addr.Is4() {
		a4 := addr.As4()
		copy(dst[:4], a4[:])
	} else {
		*dst = addr.As16()
		m.flags |= flagV6
	}
	*db = uint8(bits)
}

func checkAddr(addr netip.Addr) uint8 {
	switch {
	case !addr.IsValid():
		return reasonAddr
	case addr.Zone() != "":
		return reasonZone
	}
	return 0
}

// IPMember returns the member for a single address (hash:ip, hash:net).
func IPMember(addr netip.Addr) Member {
	if r := checkAddr(addr); r != 0 {
		return invalid(r)
	}
	m := Member{flags: flagAddr}
	m.setAddr(false, addr, addr.BitLen())
	return m
}

// prefixMember stores p in m (a when second is false, else b). It
// returns the reason p is refused, or 0; a prefix with host bits set is
// stored in m's invalid form, which names it.
func prefixMember(m *Member, second bool, p netip.Prefix) uint8 {
	if r := checkAddr(p.Addr()); r != 0 {
		return r
	}
	if !p.IsValid() {
		return reasonPrefix
	}
	if errors.Is(ipfamily.Of(p.Addr()).CheckNet(p), ipfamily.ErrHostBits) {
		*m = Member{}
		m.setAddr(false, p.Addr(), p.Bits())
		m.flags |= flagInvalid
		m.bitsA, m.bitsB = reasonHostBits, m.bitsA
		return reasonHostBits
	}
	m.setAddr(second, p.Addr(), p.Bits())
	return 0
}

// prefixOnly returns m, or the invalid member of reason r when m does not
// already hold it.
func prefixOnly(m Member, r uint8) Member {
	if r == reasonHostBits {
		return m
	}
	return invalid(r)
}

// NetMember returns the member for a prefix (hash:net); a full-length
// prefix is the same member as its address. A prefix with host bits set
// (10.0.0.1/24) gives an invalid member whose error names it and wraps
// ipfamily.ErrHostBits.
func NetMember(p netip.Prefix) Member {
	m := Member{flags: flagAddr}
	if r := prefixMember(&m, false, p); r != 0 {
		return prefixOnly(m, r)
	}
	return m
}

// NetMembers returns the hash:net members that cover p: NetMember(p), or,
// for every address of a family (a /0, which a hash:net set cannot hold:
// the kernel refuses it), the family's two halves (0.0.0.0/1 and
// 128.0.0.0/1, ::/1 and 8000::/1).
func NetMembers(p netip.Prefix) []Member {
	if !p.IsValid() || p.Bits() != 0 {
		return []Member{NetMember(p)}
	}
	upper := p.Addr().AsSlice()
	upper[0] = 0x80
	hi, _ := netip.AddrFromSlice(upper)
	return []Member{NetMember(netip.PrefixFrom(p.Addr(), 1)), NetMember(netip.PrefixFrom(hi, 1))}
}

// IPPortMember returns the member for an address, protocol and port
// (hash:ip,port).
func IPPortMember(addr netip.Addr, proto Proto, port uint16) Member {
	if r := checkAddr(addr); r != 0 {
		return invalid(r)
	}
	if !proto.hasPorts() {
		return invalid(reasonProtocol)
	}
	m := Member{flags: flagAddr | flagPort, proto: proto, port: port}
	m.setAddr(false, addr, addr.BitLen())
	return m
}

// NetNetMember returns the member for a pair of prefixes of one family
// (hash:net,net). A prefix with host bits set gives an invalid member, as
// with NetMember.
func NetNetMember(first, second netip.Prefix) Member {
	if first.Addr().Is4() != second.Addr().Is4() && first.IsValid() && second.IsValid() {
		return invalid(reasonMixed)
	}
	m := Member{flags: flagAddr | flagSecond}
	if r := prefixMember(&m, false, first); r != 0 {
		return prefixOnly(m, r)
	}
	if r := prefixMember(&m, true, second); r != 0 {
		return prefixOnly(m, r)
	}
	return m
}

// PortMember returns the member for a port (bitmap:port).
func PortMember(port uint16) Member { return Member{flags: flagPort, port: port} }

// Valid reports whether m was built from valid input.
func (m Member) Valid() bool { return m.flags != 0 && m.flags&flagInvalid == 0 }

// Err returns why m is invalid, wrapping ErrInvalidMember, or nil. For a
// prefix with host bits set it names the prefix and also wraps
// ipfamily.ErrHostBits.
func (m Member) Err() error {
	if m.Valid() {
		return nil
	}
	r := m.bitsA
	if m.flags == 0 || int(r) >= len(reasonText) {
		r = reasonZero
	}
	if r == reasonHostBits {
		p := netip.PrefixFrom(m.addr(false), int(m.bitsB))
		return errs.Also(fmt.Errorf("%w: %s has host bits set (the network is %s)", ErrInvalidMember, p, p.Masked()), ipfamily.ErrHostBits)
	}
	return fmt.Errorf("%w: %s", ErrInvalidMember, reasonText[r])
}

// Is6 reports whether m holds IPv6 addresses.
func (m Member) Is6() bool { return m.flags&flagV6 != 0 }

func (m Member) addr(second bool) netip.Addr {
	src := &m.a
	if second {
		src = &m.b
	}
	if m.flags&flagV6 != 0 {
		return netip.AddrFrom16(*src)
	}
	return netip.AddrFrom4([4]byte(src[:4]))
}

// Addr returns the member's (first) address, or the zero Addr when it has
// none (a port member).
func (m Member) Addr() netip.Addr {
	if !m.Valid() || m.flags&flagAddr == 0 {
		return netip.Addr{}
	}
	return m.addr(false)
}

// Prefix returns the member's (first) address as a prefix; a single
// address is a full-length prefix. It is the zero Prefix when the member
// has no address.
func (m Member) Prefix() netip.Prefix {
	if !m.Valid() || m.flags&flagAddr == 0 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(m.addr(false), int(m.bitsA))
}

// Second returns the second prefix of a hash:net,net member, or the zero
// Prefix.
func (m Member) Second() netip.Prefix {
	if !m.Valid() || m.flags&flagSecond == 0 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(m.addr(true), int(m.bitsB))
}

// Protocol returns the protocol of a hash:ip,port member, or zero.
func (m Member) Protocol() Proto { return m.proto }

// Port returns the port of a hash:ip,port or bitmap:port member, or zero.
func (m Member) Port() uint16 { return m.port }

// String returns the member as ipset writes it, such as "10.0.0.1",
// "10.0.0.0/8", "10.0.0.1,tcp:80", "10.0.0.0/8,10.1.0.0/16" or "80".
func (m Member) String() string {
	if !m.Valid() {
		return "invalid(" + strings.TrimPrefix(m.Err().Error(), ErrInvalidMember.Error()+": ") + ")"
	}
	var buf [96]byte
	return string(m.appendTo(buf[:0]))
}

// AppendText appends String's text to b. It implements
// encoding.TextAppender; an invalid member is an error.
func (m Member) AppendText(b []byte) ([]byte, error) {
	if err := m.Err(); err != nil {
		return b, err
	}
	return m.appendTo(b), nil
}

// MarshalText returns String's text. It implements encoding.TextMarshaler;
// an invalid member is an error.
func (m Member) MarshalText() ([]byte, error) { return m.AppendText(nil) }

func (m Member) appendPrefix(b []byte, second bool) []byte {
	bits, full := m.bitsA, uint8(32)
	if second {
		bits = m.bitsB
	}
	if m.flags&flagV6 != 0 {
		full = 128
	}
	b = m.addr(second).AppendTo(b)
	if bits != full {
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(bits), 10)
	}
	return b
}

// appendTo appends the ipset text of a valid member.
func (m Member) appendTo(b []byte) []byte {
	if m.flags&flagAddr == 0 {
		return strconv.AppendUint(b, uint64(m.port), 10)
	}
	b = m.appendPrefix(b, false)
	switch {
	case m.flags&flagSecond != 0:
		b = append(b, ',')
		b = m.appendPrefix(b, true)
	case m.flags&flagPort != 0:
		b = append(b, ',')
		b = append(b, m.proto.String()...)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(m.port), 10)
	}
	return b
}

// Compare orders members: by shape, then family, first address, first
// prefix length, second address and length, protocol and port. It returns
// -1, 0 or +1.
func (m Member) Compare(o Member) int {
	if c := cmp.Compare(m.flags, o.flags); c != 0 {
		return c
	}
	if c := bytes.Compare(m.a[:], o.a[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(m.bitsA, o.bitsA); c != 0 {
		return c
	}
	if c := bytes.Compare(m.b[:], o.b[:]); c != 0 {
		return c
	}
	if c := cmp.Compare(m.bitsB, o.bitsB); c != 0 {
		return c
	}
	if c := cmp.Compare(m.proto, o.proto); c != 0 {
		return c
	}
	return cmp.Compare(m.port, o.port)
}

// check reports whether m may be a member of a set described by meta
// (normalized). The error wraps ErrInvalidMember, or ErrWrongFamily and
// ipfamily.ErrWrongFamily.
func check(meta *SetMetadata, m Member) error {
	if err := m.Err(); err != nil {
		return err
	}
	if meta.Type == BitmapPort {
		if m.flags != flagPort || m.proto != 0 {
			return fmt.Errorf("%w: %v is not a port (bitmap:port)", ErrInvalidMember, m)
		}
		if !meta.Range.Contains(m.port) {
			return fmt.Errorf("%w: port %d is outside the set's range %v", ErrInvalidMember, m.port, meta.Range)
		}
		return nil
	}
	if m.flags&flagAddr == 0 {
		return fmt.Errorf("%w: %v has no address (%s)", ErrInvalidMember, m, meta.Type)
	}
	if fam := familyOf(m); fam != meta.Family {
		return errs.Also(fmt.Errorf("%w: %v is %v, the set is %v", ErrWrongFamily, m, fam, meta.Family), ipfamily.ErrWrongFamily)
	}
	if (meta.Type == HashIP || meta.Type == HashIPPort) && m.Addr().IsUnspecified() {
		// The kernel refuses a null element in these types.
		return fmt.Errorf("%w: %v: the kernel cannot store the unspecified address in a %s set", ErrInvalidMember, m, meta.Type)
	}
	full := uint8(meta.Family.Bits())
	shape := m.flags &^ flagV6
	ok := false
	switch meta.Type {
	case HashIP:
		ok = shape == flagAddr && m.bitsA == full
	case HashNet:
		ok = shape == flagAddr && m.bitsA > 0
	case HashIPPort:
		ok = shape == flagAddr|flagPort && m.bitsA == full && m.proto.hasPorts()
	case HashNetNet:
		ok = shape == flagAddr|flagSecond && m.bitsA > 0 && m.bitsB > 0
	}
	if !ok {
		why := ""
		if (m.bitsA == 0 && shape&flagAddr != 0) || (m.bitsB == 0 && shape&flagSecond != 0) {
			why = " (the kernel rejects a /0 prefix: split it in two halves)"
		}
		return fmt.Errorf("%w: %v does not fit a %s set%s", ErrInvalidMember, m, meta.Type, why)
	}
	return nil
}

func familyOf(m Member) ipfamily.Family {
	if m.Is6() {
		return ipfamily.IPv6
	}
	return ipfamily.IPv4
}

// errSyntax is the cause of ParseMember's errors for malformed text.
var errSyntax = errors.New("malformed member")

// ParseMember parses s, in the syntax ipset uses for sets of type t, into
// a Member. It accepts what String produces and the kernel's shorthands:
// a full-length prefix for an address, and "addr,port" (TCP) for
// hash:ip,port. Errors wrap ErrInvalidMember or ErrUnknownSetType.
func ParseMember(t SetType, s string) (Member, error) {
	if !t.Valid() {
		return Member{}, fmt.Errorf("%w: %q", ErrUnknownSetType, string(t))
	}
	m, ok := parseMember[string](t, s)
	if !ok {
		return Member{}, fmt.Errorf("%w: %q is not a %s member: %w", ErrInvalidMember, s, t, errSyntax)
	}
	if err := m.Err(); err != nil {
		return Member{}, fmt.Errorf("%w (%q)", err, s)
	}
	meta := SetMetadata{Type: t, Family: familyOf(m)}
	if t == BitmapPort {
		meta.Range = Ports(0, math.MaxUint16)
	}
	if err := check(&meta, m); err != nil {
		return Member{}, err
	}
	return m, nil
}

// ParseMemberText parses b, a member as ipset writes it for sets of type
// t, without copying it, and reports whether it is a valid member of a set
// of meta (normalized): what a backend reading the kernel's sets calls on
// each element.
func ParseMemberText(meta *SetMetadata, b []byte) (Member, bool) {
	m, ok := parseMember(meta.Type, b)
	return m, ok && check(meta, m) == nil
}

// text is the input of the parsers: a string, or a line of ipset's output
// parsed in place without a copy.
type text interface{ ~string | ~[]byte }

func indexByte[T text](s T, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func lastIndexByte[T text](s T, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// parseMember parses s for type t without checking that the result fits
// t. It reports false for malformed text.
func parseMember[T text](t SetType, s T) (Member, bool) {
	switch t {
	case HashIP, HashNet:
		return parsePrefixMember(s)
	case HashIPPort:
		i := lastIndexByte(s, ',')
		if i < 0 {
			return Member{}, false
		}
		addr, ok := parseAddr(s[:i])
		if !ok {
			return Member{}, false
		}
		rest, proto := s[i+1:], ProtoTCP
		if j := indexByte(rest, ':'); j >= 0 {
			if proto, ok = parseMemberProto(string(rest[:j])); !ok {
				return invalid(reasonProtocol), true
			}
			rest = rest[j+1:]
		}
		port, ok := parsePort(rest)
		if !ok {
			return Member{}, false
		}
		return IPPortMember(addr, proto, port), true
	case HashNetNet:
		i := indexByte(s, ',')
		if i < 0 {
			return Member{}, false
		}
		a, ok1 := parsePrefixMember(s[:i])
		b, ok2 := parsePrefixMember(s[i+1:])
		if !ok1 || !ok2 {
			return Member{}, false
		}
		switch {
		case !a.Valid():
			return a, true
		case !b.Valid():
			return b, true
		}
		return NetNetMember(a.Prefix(), b.Prefix()), true
	case BitmapPort:
		port, ok := parsePort(s)
		if !ok {
			return Member{}, false
		}
		return PortMember(port), true
	}
	return Member{}, false
}

// parsePrefixMember parses "addr" or "addr/bits".
func parsePrefixMember[T text](s T) (Member, bool) {
	i := indexByte(s, '/')
	if i < 0 {
		addr, ok := parseAddr(s)
		if !ok {
			return Member{}, false
		}
		return IPMember(addr), true
	}
	addr, ok := parseAddr(s[:i])
	if !ok {
		return Member{}, false
	}
	bits, ok := parseDecimal(s[i+1:], uint64(addr.BitLen()))
	if !ok {
		return Member{}, false
	}
	return NetMember(netip.PrefixFrom(addr, int(bits))), true
}

// parseAddr parses an address without a zone. Dotted quads take a fast
// path that does not allocate.
func parseAddr[T text](s T) (netip.Addr, bool) {
	if a, ok := parseIPv4(s); ok {
		return a, true
	}
	if indexByte(s, ':') < 0 || indexByte(s, '%') >= 0 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(string(s))
	return a, err == nil
}

// parseIPv4 parses a canonical dotted quad (no leading zeros).
func parseIPv4[T text](s T) (netip.Addr, bool) {
	var out [4]byte
	field, n := 0, 0
	digits := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || field > 3 {
				return netip.Addr{}, false
			}
			out[field] = byte(n)
			field++
			n, digits = 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || (digits == 1 && n == 0) {
			return netip.Addr{}, false
		}
		n = n*10 + int(c-'0')
		digits++
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	if field != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(out), true
}

// parseDecimal parses a decimal number without sign or leading zeros, at
// most limit.
func parseDecimal[T text](s T, limit uint64) (uint64, bool) {
	if len(s) == 0 || len(s) > 5 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= limit
}

func parsePort[T text](s T) (uint16, bool) {
	n, ok := parseDecimal(s, 65535)
	return uint16(n), ok
}
