//go:build linux

package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Netlink wire layout (host byte order throughout), shared by the route,
// neighbour, FDB and rule codecs.
const (
	hdrLen     = unix.SizeofNlMsghdr  // struct nlmsghdr
	rtmsgLen   = unix.SizeofRtMsg     // struct rtmsg
	rtnhLen    = unix.SizeofRtNexthop // struct rtnexthop
	ndmsgLen   = unix.SizeofNdMsg     // struct ndmsg
	fibRuleLen = 12                   // struct fib_rule_hdr
	attrHdrLen = 4                    // struct rtattr / nlattr
	errMsgLen  = 4 + hdrLen           // struct nlmsgerr
)

var ne = binary.NativeEndian

func align4(n int) int { return (n + 3) &^ 3 }

// appendHeader appends an nlmsghdr whose length finishMsg fills in.
func appendHeader(b []byte, typ, flags uint16, seq uint32) []byte {
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	return ne.AppendUint32(b, 0) // port ID: the kernel fills it in
}

// appendWriteHeader appends the nlmsghdr of a write of kind: a message of
// type typ, or delTyp for OpDelete.
func appendWriteHeader(b []byte, kind OpKind, typ, delTyp, flags uint16, seq uint32) []byte {
	if kind == OpDelete {
		typ = delTyp
	}
	return appendHeader(b, typ, flags, seq)
}

// finishMsg writes the length of the message that starts at b[start:].
func finishMsg(b []byte, start int) []byte {
	ne.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

func appendAttrHeader(b []byte, typ uint16, payload int) []byte {
	b = ne.AppendUint16(b, uint16(attrHdrLen+payload))
	return ne.AppendUint16(b, typ)
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	return ne.AppendUint32(appendAttrHeader(b, typ, 4), v)
}

// appendAttrU8 appends a one-byte attribute, padded to four bytes.
func appendAttrU8(b []byte, typ uint16, v uint8) []byte {
	return append(appendAttrHeader(b, typ, 1), v, 0, 0, 0)
}

// appendAttrBytes appends an attribute holding v, padded to four bytes.
func appendAttrBytes(b []byte, typ uint16, v []byte) []byte {
	b = append(appendAttrHeader(b, typ, len(v)), v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendAttrString appends a NUL-terminated string attribute.
func appendAttrString(b []byte, typ uint16, s string) []byte {
	b = appendAttrHeader(b, typ, len(s)+1)
	b = append(append(b, s...), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// appendAttrAddr appends an address attribute (4 or 16 bytes).
func appendAttrAddr(b []byte, typ uint16, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(appendAttrHeader(b, typ, 4), v[:]...)
	}
	v := a.As16()
	return append(appendAttrHeader(b, typ, 16), v[:]...)
}

// writeFlags returns the netlink flags of a write of kind: every request
// asks for an acknowledgement.
func writeFlags(kind OpKind) uint16 {
	switch kind {
	case OpAdd:
		return unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL
	case OpDelete:
		return unix.NLM_F_REQUEST | unix.NLM_F_ACK
	}
	return unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_REPLACE
}

// header is a parsed nlmsghdr.
type header struct {
	len   uint32
	typ   uint16
	flags uint16
	seq   uint32
}

// nextMessage splits the first netlink message off buf. ok is false when
// buf holds no complete message (the rest of a datagram is then ignored).
func nextMessage(buf []byte) (h header, payload, rest []byte, ok bool) {
	if len(buf) < hdrLen {
		return h, nil, nil, false
	}
	h = header{len: ne.Uint32(buf), typ: ne.Uint16(buf[4:]), flags: ne.Uint16(buf[6:]), seq: ne.Uint32(buf[8:])}
	if h.len < hdrLen || uint64(h.len) > uint64(len(buf)) {
		return h, nil, nil, false
	}
	payload = buf[hdrLen:h.len]
	next := align4(int(h.len))
	if next >= len(buf) {
		return h, payload, nil, true
	}
	return h, payload, buf[next:], true
}

// parseError parses an NLMSG_ERROR payload (or the error code that ends a
// dump, NLMSG_DONE): the code (0 for an ack, else a negative errno) and,
// with extended acks, the kernel's message. The message is only extracted
// (and allocated) for a non-zero code.
func parseError(h header, payload []byte) (code int32, msg string, ok bool) {
	if len(payload) < 4 {
		return 0, "", false
	}
	code = int32(ne.Uint32(payload))
	if code == 0 || h.flags&unix.NLM_F_ACK_TLVS == 0 {
		return code, "", true
	}
	off := 4 // NLMSG_DONE: the attributes follow the code
	if h.typ == unix.NLMSG_ERROR {
		off = errMsgLen
		if h.flags&unix.NLM_F_CAPPED == 0 && len(payload) >= errMsgLen {
			off = 4 + align4(int(ne.Uint32(payload[4:]))) // the request is echoed
		}
	}
	if off > len(payload) {
		return code, "", true
	}
	return code, extackMessage(payload[off:]), true
}

// extackMessage returns NLMSGERR_ATTR_MSG from extended-ack attributes.
func extackMessage(attrs []byte) string {
	for len(attrs) > 0 {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return ""
		}
		if t == unix.NLMSGERR_ATTR_MSG {
			if i := bytes.IndexByte(v, 0); i >= 0 {
				v = v[:i]
			}
			return string(v)
		}
		attrs = rest
	}
	return ""
}

// nextAttr splits the first attribute (struct rtattr or nlattr) off b: its
// type without the nested and byte-order flags, its value, and the
// attributes after it (nil at the end). ok is false when b does not start
// with a whole attribute.
func nextAttr(b []byte) (typ uint16, v, rest []byte, ok bool) {
	rec, rest, ok := nextRecord(b, attrHdrLen)
	if len(b) >= attrHdrLen {
		typ = ne.Uint16(b[2:]) & 0x3fff
	}
	if !ok {
		return typ, nil, nil, false
	}
	return typ, rec[attrHdrLen:], rest, true
}

// nextRecord splits the first record off b, a run of 4-byte aligned records
// that each start with their 16-bit length (attributes, rtnexthops) and
// have a header of hdrLen bytes. ok is false when b does not start with a
// whole record.
func nextRecord(b []byte, hdrLen int) (rec, rest []byte, ok bool) {
	if len(b) < hdrLen {
		return nil, nil, false
	}
	l := int(ne.Uint16(b))
	if l < hdrLen || l > len(b) {
		return nil, nil, false
	}
	if next := align4(l); next < len(b) {
		rest = b[next:]
	}
	return b[:l], rest, true
}

// attrU32 decodes a 32-bit attribute value.
func attrU32(name string, v []byte) (uint32, error) {
	if len(v) < 4 {
		return 0, errMalformed("%s of %d bytes", name, len(v))
	}
	return ne.Uint32(v), nil
}

// errMalformed returns an error wrapping ErrMalformed.
func errMalformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// headerFamily checks that a message payload (what names the message)
// holds its hdrLen-byte header, whose first byte is the address family
// (struct rtmsg, fib_rule_hdr), and returns the family; ok is false, with
// a nil error, for a family other than IPv4 and IPv6.
func headerFamily(payload []byte, hdrLen int, what string) (f Family, ok bool, err error) {
	if len(payload) < hdrLen {
		return 0, false, errMalformed("%s message of %d bytes", what, len(payload))
	}
	f, ok = familyOfAF(payload[0])
	return f, ok, nil
}

// familyOfAF returns the Family of an address-family byte.
func familyOfAF(af uint8) (Family, bool) {
	switch af {
	case unix.AF_INET:
		return IPv4, true
	case unix.AF_INET6:
		return IPv6, true
	}
	return 0, false
}

func zeroAddr(f Family) netip.Addr {
	if f == IPv4 {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// addrOf parses a 4- or 16-byte address of family f.
func addrOf(f Family, v []byte) (netip.Addr, bool) {
	if f == IPv4 && len(v) == 4 {
		return netip.AddrFrom4([4]byte(v)), true
	}
	if f == IPv6 && len(v) == 16 {
		return netip.AddrFrom16([16]byte(v)), true
	}
	return netip.Addr{}, false
}

// anyAddr parses a 4-byte (IPv4) or 16-byte (IPv6) address.
func anyAddr(v []byte) (netip.Addr, bool) {
	switch len(v) {
	case 4:
		return netip.AddrFrom4([4]byte(v)), true
	case 16:
		return netip.AddrFrom16([16]byte(v)), true
	}
	return netip.Addr{}, false
}

// errnoOf turns a netlink error code (a negative errno) into a unix.Errno.
func errnoOf(code int32) unix.Errno {
	if code < 0 {
		code = -code
	}
	return unix.Errno(code)
}
