package nftables

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/nfnl"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
)

// KeyType is the type of one field of a set's key.
type KeyType uint8

// The key types. A set's key is one of them or a concatenation of up to
// MaxKeyFields of them (such as TypeAddr, TypeProto, TypePort: a
// destination address, protocol and port).
const (
	// TypeAddr is an address of the Table's family (ipv4_addr, ipv6_addr);
	// in an interval set, a prefix.
	TypeAddr KeyType = iota + 1
	// TypeProto is an IP protocol number (inet_proto).
	TypeProto
	// TypePort is a TCP, UDP or SCTP port (inet_service); in an interval
	// set, a range of ports.
	TypePort
	// TypeMark is a packet mark (mark).
	TypeMark
	// TypeIface is an interface name (ifname).
	TypeIface
)

// MaxKeyFields is the most fields a set's key concatenates.
const MaxKeyFields = 5

// String returns nft's name of the type, such as "ipv4_addr" (for an
// address, "addr").
func (t KeyType) String() string {
	switch t {
	case TypeAddr:
		return "addr"
	case TypeProto:
		return "inet_proto"
	case TypePort:
		return "inet_service"
	case TypeMark:
		return "mark"
	case TypeIface:
		return "ifname"
	}
	return "KeyType(" + strconv.Itoa(int(t)) + ")"
}

// valid reports whether t is a key type.
func (t KeyType) valid() bool { return t >= TypeAddr && t <= TypeIface }

// sided reports whether a field of type t is taken from one side of the
// packet (source or destination), and so needs a direction in a rule.
func (t KeyType) sided() bool { return t == TypeAddr || t == TypePort || t == TypeIface }

// Value is one field of an element's key. Build it with Addr, Prefix,
// Proto, Port, PortRange, Mark or Iface; the zero Value is invalid.
type Value struct {
	t      KeyType
	addr   netip.Addr
	bits   int
	lo, hi uint32
	name   string
}

// Addr returns an address value (TypeAddr).
func Addr(a netip.Addr) Value { return Value{t: TypeAddr, addr: a, bits: -1} }

// Prefix returns a prefix value (TypeAddr): in an interval set the
// addresses of p, elsewhere p must be a single address (/32, /128).
func Prefix(p netip.Prefix) Value { return Value{t: TypeAddr, addr: p.Addr(), bits: p.Bits()} }

// Proto returns a protocol value (TypeProto).
func Proto(p netfilter.Proto) Value { return Value{t: TypeProto, lo: uint32(p), hi: uint32(p)} }

// Port returns a port value (TypePort).
func Port(p uint16) Value { return Value{t: TypePort, lo: uint32(p), hi: uint32(p)} }

// PortRange returns a range of ports (TypePort), First to Last included;
// only an interval set takes more than one port.
func PortRange(r netfilter.PortRange) Value {
	return Value{t: TypePort, lo: uint32(r.First), hi: uint32(r.Last)}
}

// Mark returns a packet mark value (TypeMark).
func Mark(m uint32) Value { return Value{t: TypeMark, lo: m, hi: m} }

// Iface returns an interface name value (TypeIface).
func Iface(name string) Value { return Value{t: TypeIface, name: name} }

// Type returns the value's key type (0 for the zero Value).
func (v Value) Type() KeyType { return v.t }

// String formats v as nft prints it.
func (v Value) String() string {
	switch v.t {
	case TypeAddr:
		if v.bits >= 0 && v.bits != v.addr.BitLen() {
			return netip.PrefixFrom(v.addr, v.bits).String()
		}
		return v.addr.String()
	case TypeProto:
		return netfilter.Proto(v.lo).String()
	case TypePort:
		if v.lo != v.hi {
			return fmt.Sprintf("%d-%d", v.lo, v.hi)
		}
		return strconv.Itoa(int(v.lo))
	case TypeMark:
		return fmt.Sprintf("0x%08x", v.lo)
	case TypeIface:
		return strconv.Quote(v.name)
	}
	return "(invalid)"
}

// Element is one element of a set: a key with one value per field of the
// set's key and, in a verdict map, the verdict its packets get.
type Element struct {
	// Key has one value per field of the set's key, in order.
	Key []Value
	// Verdict is the verdict of a verdict map's element: netfilter's
	// Accept, Drop, Return, Jump or Goto (a jump or goto to a chain the
	// Table declares). Nil in a plain set.
	Verdict netfilter.Action
}

// Elem returns the element of a plain set whose key is vals.
func Elem(vals ...Value) Element { return Element{Key: vals} }

// Set is a named nftables set, or verdict map, in the Table's table.
// Rules use a set with netfilter.MatchSet (netfilter.IPSet, SourceIPSet,
// DestIPSet) and a verdict map with netfilter.ActionVerdictMap, whose Dims
// give a side of the packet for each field of the key that has one
// (addresses, ports, interfaces; protocols and marks have none): a set of
// TypeAddr, TypeProto, TypePort matched with netfilter.IPSet(name,
// netfilter.Dst, netfilter.Dst) looks up the packet's destination address,
// protocol and destination port.
type Set struct {
	// Name is the set's name, with the rules of netfilter.MatchSet's Name
	// (1 to 31 printable characters).
	Name string
	// Key is the type of each field of the key, 1 to MaxKeyFields of them
	// and at most 64 bytes in all.
	Key []KeyType
	// Interval makes the elements ranges: prefixes of addresses and ranges
	// of ports (the other fields stay single values). In a set of one
	// field, overlapping and adjacent elements merge into one range, as
	// nft's auto-merge does; with several fields, elements must not
	// overlap. A single field must be an address or a port.
	Interval bool
	// Verdict makes the set a verdict map: every element has a Verdict.
	Verdict bool
	// Elements are the set's elements, in any order; duplicates merge.
	Elements []Element
}

// setSpec is a set's shape as the Table writes it.
type setSpec struct {
	fields   []KeyType
	flens    []int // byte lengths of the fields, unpadded
	v6       bool
	interval bool
	verdict  bool
	klen     int // the key's length in the kernel
}

// fieldLen is the length of one field of type t in family f.
func fieldLen(t KeyType, v6 bool) int {
	switch t {
	case TypeAddr:
		if v6 {
			return 16
		}
		return 4
	case TypeProto:
		return 1
	case TypePort:
		return 2
	case TypeMark:
		return 4
	case TypeIface:
		return 16
	}
	return 0
}

// padded rounds a concatenation field's length up to a register.
func padded(n int) int { return (n + nfnl.RegSize - 1) &^ (nfnl.RegSize - 1) }

// newSpec validates a set's shape for family f.
func newSpec(s *Set, f ipfamily.Family) (setSpec, error) {
	if err := validateSetName(s.Name); err != nil {
		return setSpec{}, err
	}
	if len(s.Key) == 0 || len(s.Key) > MaxKeyFields {
		return setSpec{}, fmt.Errorf("%w %s: %d key fields, want 1 to %d", ErrInvalidSet, s.Name, len(s.Key), MaxKeyFields)
	}
	sp := setSpec{fields: slices.Clone(s.Key), v6: f == ipfamily.IPv6, interval: s.Interval, verdict: s.Verdict}
	for i, t := range s.Key {
		if !t.valid() {
			return setSpec{}, fmt.Errorf("%w %s: key field %d has unknown type %d", ErrInvalidSet, s.Name, i, t)
		}
		n := fieldLen(t, sp.v6)
		sp.flens = append(sp.flens, n)
		if len(s.Key) > 1 {
			n = padded(n)
		}
		sp.klen += n
	}
	if sp.klen > nfnl.MaxKeyLen {
		return setSpec{}, fmt.Errorf("%w %s: key of %d bytes, longer than %d", ErrInvalidSet, s.Name, sp.klen, nfnl.MaxKeyLen)
	}
	if s.Interval && len(s.Key) == 1 && s.Key[0] != TypeAddr && s.Key[0] != TypePort {
		return setSpec{}, fmt.Errorf("%w %s: an interval set of one field takes addresses or ports, not %v", ErrInvalidSet, s.Name, s.Key[0])
	}
	return sp, nil
}

// validateSetName checks a set's name as netfilter checks a MatchSet's.
func validateSetName(name string) error {
	r := netfilter.Rule{Matches: []netfilter.Match{netfilter.IPSet(name, netfilter.Src)}, Action: netfilter.Accept()}
	if err := r.Validate(ipfamily.IPv4); err != nil {
		return fmt.Errorf("%w: name %q: want 1 to %d printable characters without blanks, quotes or backslashes, not starting with \"-\" or \"!\"",
			ErrInvalidSet, name, netfilter.MaxIPSetNameLength)
	}
	return nil
}

// equal reports whether two specs are the same shape.
func (sp *setSpec) equal(o *setSpec) bool {
	return slices.Equal(sp.fields, o.fields) && sp.v6 == o.v6 && sp.interval == o.interval && sp.verdict == o.verdict
}

// concat reports whether the key concatenates fields.
func (sp *setSpec) concat() bool { return len(sp.fields) > 1 }

// keyType is the nft datatype of the key (concatenations shift each
// field's type in).
func (sp *setSpec) keyType() uint32 {
	var m uint32
	for _, t := range sp.fields {
		m = m<<nfnl.TypeBits | datatype(t, sp.v6)
	}
	return m
}

func datatype(t KeyType, v6 bool) uint32 {
	switch t {
	case TypeAddr:
		if v6 {
			return nfnl.DataTypeIPv6
		}
		return nfnl.DataTypeIPv4
	case TypeProto:
		return nfnl.DataTypeProto
	case TypePort:
		return nfnl.DataTypePort
	case TypeMark:
		return nfnl.DataTypeMark
	}
	return nfnl.DataTypeIfname
}

// flags are the set's NFT_SET_* flags.
func (sp *setSpec) flags() uint32 {
	var f uint32
	if sp.interval {
		f |= nfnl.SetInterval
	}
	if sp.concat() {
		f |= nfnl.SetConcat // the kernel wants it with the fields' lengths
	}
	if sp.verdict {
		f |= nfnl.SetMap
	}
	return f
}

// nl returns the set's kernel form.
func (sp *setSpec) nl(table, name string) nfnl.Set {
	s := nfnl.Set{Table: table, Name: name, Flags: sp.flags(), KeyType: sp.keyType(), KeyLen: uint32(sp.klen)}
	if sp.verdict {
		s.DataType = nfnl.DataVerdictType
	}
	if sp.concat() {
		for _, n := range sp.flens {
			s.Fields = append(s.Fields, uint32(n))
		}
	}
	return s
}

// setFlagMask are the flags a set's shape sets.
const setFlagMask = nfnl.SetInterval | nfnl.SetConcat | nfnl.SetMap | nfnl.SetAnonymous | nfnl.SetConstant |
	nfnl.SetTimeout | nfnl.SetEval | nfnl.SetObject

// matchesKernel reports whether the kernel's set k has sp's shape.
func (sp *setSpec) matchesKernel(k *nfnl.Set) bool {
	want := sp.nl("", "")
	if k.Flags&setFlagMask != want.Flags || k.KeyLen != want.KeyLen || k.KeyType != want.KeyType {
		return false
	}
	if sp.verdict && k.DataType != nfnl.DataVerdictType {
		return false
	}
	if sp.concat() && !slices.Equal(k.Fields, want.Fields) {
		return false
	}
	return true
}

// encodeKey validates an element's key for sp and returns its encoding:
// the key's bytes, or for an interval set its first and last keys (the
// last included), each klen bytes.
func (sp *setSpec) encodeKey(dst []byte, key []Value) ([]byte, error) {
	if len(key) != len(sp.fields) {
		return dst, fmt.Errorf("%d values for a key of %d fields", len(key), len(sp.fields))
	}
	start := len(dst)
	dst = append(dst, make([]byte, sp.klen)...)
	if sp.interval {
		dst = append(dst, make([]byte, sp.klen)...)
	}
	lo, hi := dst[start:start+sp.klen], []byte(nil)
	if sp.interval {
		hi = dst[start+sp.klen:]
	}
	off := 0
	for i, v := range key {
		t, n := sp.fields[i], sp.flens[i]
		if v.t != t {
			return dst[:start], fmt.Errorf("field %d: %s value %s for a %v field", i, v.t, v, t)
		}
		if err := v.put(lo[off:off+n], hi, off, n, sp.interval, sp.v6); err != nil {
			return dst[:start], fmt.Errorf("field %d: %w", i, err)
		}
		if sp.concat() {
			off += padded(n)
		} else {
			off += n
		}
	}
	return dst, nil
}

// put writes v's first key into lo and, for an interval set (hi not nil),
// its last into hi[off:off+n].
func (v Value) put(lo, hi []byte, off, n int, interval, v6 bool) error {
	last := func() []byte {
		if hi == nil {
			return nil
		}
		return hi[off : off+n]
	}()
	switch v.t {
	case TypeAddr:
		a := v.addr
		if !a.IsValid() || a.Zone() != "" {
			return fmt.Errorf("address %v is not a plain address", v)
		}
		if a.Is4In6() {
			return fmt.Errorf("address %v is IPv4-mapped", v)
		}
		if a.Is6() != v6 {
			return fmt.Errorf("%w: address %v in a set of the other family", netfilter.ErrWrongFamily, v)
		}
		bits := v.bits
		if bits < 0 {
			bits = a.BitLen()
		}
		p := netip.PrefixFrom(a, bits)
		if !p.IsValid() {
			return fmt.Errorf("prefix length %d out of range", bits)
		}
		if p.Masked() != p {
			return fmt.Errorf("prefix %v has host bits set (the network is %v)", p, p.Masked())
		}
		if !interval && bits != a.BitLen() {
			return fmt.Errorf("prefix %v in a set without intervals (only single addresses)", p)
		}
		b := a.AsSlice()
		copy(lo, b)
		if last != nil {
			copy(last, b)
			for i := bits; i < len(b)*8; i++ {
				last[i/8] |= 0x80 >> (i % 8)
			}
		}
	case TypeProto:
		lo[0] = byte(v.lo)
		if last != nil {
			last[0] = byte(v.lo)
		}
	case TypePort:
		if v.lo > v.hi {
			return fmt.Errorf("port range %s ends below its start", v)
		}
		if !interval && v.lo != v.hi {
			return fmt.Errorf("port range %s in a set without intervals", v)
		}
		binary.BigEndian.PutUint16(lo, uint16(v.lo))
		if last != nil {
			binary.BigEndian.PutUint16(last, uint16(v.hi))
		}
	case TypeMark:
		binary.NativeEndian.PutUint32(lo, v.lo)
		if last != nil {
			binary.NativeEndian.PutUint32(last, v.lo)
		}
	case TypeIface:
		if v.name == "" || len(v.name) > netfilter.MaxInterfaceNameLength || strings.ContainsAny(v.name, "/ \x00") || strings.HasSuffix(v.name, "+") {
			return fmt.Errorf("interface name %q is not 1 to %d characters of a name (no wildcard)", v.name, netfilter.MaxInterfaceNameLength)
		}
		copy(lo, v.name)
		if last != nil {
			copy(last, v.name)
		}
	default:
		return fmt.Errorf("invalid value")
	}
	return nil
}

// formatKey formats an encoded key for messages: "10.0.0.1 . tcp . 80".
func (sp *setSpec) formatKey(k string) string {
	var b strings.Builder
	lo, hi := k[:min(len(k), sp.klen)], ""
	if sp.interval && len(k) >= 2*sp.klen {
		hi = k[sp.klen : 2*sp.klen]
	}
	off := 0
	for i, t := range sp.fields {
		n := sp.flens[i]
		if off+n > len(lo) {
			break
		}
		if i > 0 {
			b.WriteString(" . ")
		}
		f := []byte(lo[off : off+n])
		var l []byte
		if hi != "" {
			l = []byte(hi[off : off+n])
		}
		b.WriteString(formatField(t, f, l))
		if sp.concat() {
			off += padded(n)
		} else {
			off += n
		}
	}
	return b.String()
}

// formatField formats one field, and its range's end when last is set.
func formatField(t KeyType, first, last []byte) string {
	one := func(b []byte) string {
		switch t {
		case TypeAddr:
			a, _ := netip.AddrFromSlice(b)
			return a.String()
		case TypeProto:
			return netfilter.Proto(b[0]).String()
		case TypePort:
			return strconv.Itoa(int(binary.BigEndian.Uint16(b)))
		case TypeMark:
			return fmt.Sprintf("0x%08x", binary.NativeEndian.Uint32(b))
		}
		return strconv.Quote(string(bytes.TrimRight(b, "\x00")))
	}
	if last == nil || bytes.Equal(first, last) {
		return one(first)
	}
	if t == TypeAddr {
		if p, ok := rangePrefix(first, last); ok {
			return p.String()
		}
	}
	return one(first) + "-" + one(last)
}

// rangePrefix returns the prefix whose addresses are first to last, if
// there is one.
func rangePrefix(first, last []byte) (netip.Prefix, bool) {
	a, _ := netip.AddrFromSlice(first)
	for bits := 0; bits <= len(first)*8; bits++ {
		p := netip.PrefixFrom(a, bits)
		if p.Masked() != p {
			continue
		}
		end := make([]byte, len(first))
		copy(end, first)
		for i := bits; i < len(end)*8; i++ {
			end[i/8] |= 0x80 >> (i % 8)
		}
		if bytes.Equal(end, last) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// verdictData encodes a verdict map element's verdict, for comparing: the
// code (4 bytes) and the chain.
func verdictData(code int32, chain string) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	return string(b[:]) + chain
}

// decodeVerdict decodes verdictData.
func decodeVerdict(d string) nfnl.Verdict {
	if len(d) < 4 {
		return nfnl.Verdict{}
	}
	return nfnl.Verdict{Code: int32(binary.BigEndian.Uint32([]byte(d[:4]))), Chain: d[4:]}
}

// encodeVerdict validates a verdict map element's verdict.
func encodeVerdict(a netfilter.Action) (string, error) {
	switch a := a.(type) {
	case netfilter.ActionAccept:
		return verdictData(nfnl.VerdictAccept, ""), nil
	case netfilter.ActionDrop:
		return verdictData(nfnl.VerdictDrop, ""), nil
	case netfilter.ActionReturn:
		return verdictData(nfnl.VerdictReturn, ""), nil
	case netfilter.ActionJump:
		if err := netfilter.ValidateChainName(a.Chain); err != nil {
			return "", errs.Also(fmt.Errorf("jump to %s", strings.TrimPrefix(err.Error(), "netfilter: ")), netfilter.ErrInvalidChainName)
		}
		return verdictData(nfnl.VerdictJump, a.Chain), nil
	case netfilter.ActionGoto:
		if err := netfilter.ValidateChainName(a.Chain); err != nil {
			return "", errs.Also(fmt.Errorf("goto %s", strings.TrimPrefix(err.Error(), "netfilter: ")), netfilter.ErrInvalidChainName)
		}
		return verdictData(nfnl.VerdictGoto, a.Chain), nil
	case nil:
		return "", fmt.Errorf("a verdict map element needs a verdict")
	}
	return "", fmt.Errorf("verdict %T is not accept, drop, return, jump or goto", a)
}

// verdictChain returns the chain a verdict jumps or goes to, or "".
func verdictChain(d string) string {
	if len(d) > 4 {
		return d[4:]
	}
	return ""
}

// keyRange is one element of a one-field interval set: first and last
// keys (included) and the data.
type keyRange struct {
	lo, hi string
	data   string
}

// canonicalRanges merges the elements of a one-field interval set (keys
// first||last): overlapping and adjacent ranges of a set merge; those of
// a verdict map merge only when they overlap with the same verdict, and
// overlapping ones with different verdicts are an error.
func canonicalRanges(klen int, elems map[string]string, merge bool) (map[string]string, error) {
	rs := make([]keyRange, 0, len(elems))
	for k, d := range elems {
		rs = append(rs, keyRange{lo: k[:klen], hi: k[klen:], data: d})
	}
	slices.SortFunc(rs, func(a, b keyRange) int {
		return cmp.Or(strings.Compare(a.lo, b.lo), strings.Compare(a.hi, b.hi))
	})
	out := make(map[string]string, len(rs))
	var cur *keyRange
	flush := func() {
		if cur != nil {
			out[cur.lo+cur.hi] = cur.data
		}
	}
	for i := range rs {
		r := &rs[i]
		if cur != nil {
			overlap := r.lo <= cur.hi
			adjacent := !overlap && string(incremented(cur.hi)) == r.lo
			switch {
			case overlap && r.data != cur.data:
				return nil, fmt.Errorf("elements overlap with different verdicts")
			case overlap || adjacent && merge:
				if r.hi > cur.hi {
					cur.hi = r.hi
				}
				continue
			}
		}
		flush()
		c := *r
		cur = &c
	}
	flush()
	return out, nil
}

// incremented returns b+1 as a big-endian number (all ones wraps to
// zeros; callers compare with the next start, which cannot be zeros).
func incremented(s string) []byte {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			break
		}
	}
	return b
}

// isMax reports whether s is all ones.
func isMax(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != 0xff {
			return false
		}
	}
	return true
}
