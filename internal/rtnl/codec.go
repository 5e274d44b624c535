//go:build linux

package rtnl

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Netlink wire layout (host byte order throughout).
const (
	hdrLen     = unix.SizeofNlMsghdr  // struct nlmsghdr
	rtmsgLen   = unix.SizeofRtMsg     // struct rtmsg
	rtnhLen    = unix.SizeofRtNexthop // struct rtnexthop
	attrHdrLen = 4                    // struct rtattr / nlattr
	errMsgLen  = 4 + hdrLen           // struct nlmsgerr
	maxAttrLen = 0xffff
)

var ne = binary.NativeEndian

func align4(n int) int { return (n + 3) &^ 3 }

// appendHeader appends an nlmsghdr whose length appendRouteMsg fixes later.
func appendHeader(b []byte, typ, flags uint16, seq uint32) []byte {
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, typ)
	b = ne.AppendUint16(b, flags)
	b = ne.AppendUint32(b, seq)
	return ne.AppendUint32(b, 0) // port ID: the kernel fills it in
}

func appendAttrHeader(b []byte, typ uint16, payload int) []byte {
	b = ne.AppendUint16(b, uint16(attrHdrLen+payload))
	return ne.AppendUint16(b, typ)
}

func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	return ne.AppendUint32(appendAttrHeader(b, typ, 4), v)
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

// appendGateway appends RTA_GATEWAY, or RTA_VIA for an IPv6 next hop of an
// IPv4 route.
func appendGateway(b []byte, v4 bool, gw netip.Addr) []byte {
	if !gw.IsValid() {
		return b
	}
	if v4 && gw.Is6() {
		v := gw.As16()
		b = appendAttrHeader(b, unix.RTA_VIA, 2+16)
		b = ne.AppendUint16(b, unix.AF_INET6)
		b = append(b, v[:]...)
		return append(b, 0, 0) // pad 22 to 24
	}
	return appendAttrAddr(b, unix.RTA_GATEWAY, gw)
}

// opHeader returns the netlink message type and flags of an operation.
func opHeader(kind OpKind) (typ, flags uint16) {
	switch kind {
	case OpAdd:
		return unix.RTM_NEWROUTE, unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_EXCL
	case OpDelete:
		return unix.RTM_DELROUTE, unix.NLM_F_REQUEST | unix.NLM_F_ACK
	default:
		return unix.RTM_NEWROUTE, unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	}
}

// appendRouteMsg appends one complete request for r (validated by the
// caller) with sequence number seq.
func appendRouteMsg(b []byte, kind OpKind, seq uint32, r *Route) []byte {
	start := len(b)
	typ, flags := opHeader(kind)
	b = appendHeader(b, typ, flags, seq)

	v4 := r.Family == unix.AF_INET
	table := r.Table
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	rtmTable := uint8(unix.RT_TABLE_UNSPEC)
	if table < 256 {
		rtmTable = uint8(table)
	}
	oif, gw := r.OIF, r.Gateway
	rflags := r.Flags & WritableFlags
	single := len(r.NextHops) == 1
	if single {
		h := r.NextHops[0]
		oif, gw = h.OIF, h.Gateway
		rflags |= uint32(h.Flags) & WritableFlags
	}
	scope := r.Scope
	if kind == OpDelete && scope == unix.RT_SCOPE_UNIVERSE {
		scope = unix.RT_SCOPE_NOWHERE // any scope, as `ip route del` does
	}
	b = append(b, r.Family, uint8(r.Dst.Bits()), 0, r.TOS, rtmTable, r.Protocol, scope, r.Type)
	b = ne.AppendUint32(b, rflags)

	b = appendAttrU32(b, unix.RTA_TABLE, table)
	if r.Dst.Bits() > 0 {
		b = appendAttrAddr(b, unix.RTA_DST, r.Dst.Addr())
	}
	if oif > 0 {
		b = appendAttrU32(b, unix.RTA_OIF, uint32(oif))
	}
	b = appendGateway(b, v4, gw)
	if r.PrefSrc.IsValid() {
		b = appendAttrAddr(b, unix.RTA_PREFSRC, r.PrefSrc)
	}
	if r.Priority != 0 {
		b = appendAttrU32(b, unix.RTA_PRIORITY, r.Priority)
	}
	if r.MTU != 0 {
		b = appendAttrHeader(b, unix.RTA_METRICS, attrHdrLen+4)
		b = appendAttrU32(b, unix.RTAX_MTU, r.MTU)
	}
	if len(r.NextHops) > 1 {
		b = appendMultipath(b, v4, r.NextHops)
	}
	ne.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// appendMultipath appends RTA_MULTIPATH: one rtnexthop per hop, each
// followed by its gateway attribute.
func appendMultipath(b []byte, v4 bool, hops []NextHop) []byte {
	at := len(b)
	b = appendAttrHeader(b, unix.RTA_MULTIPATH, 0)
	for _, h := range hops {
		nh := len(b)
		b = ne.AppendUint16(b, 0)
		b = append(b, h.Flags&WritableFlags, h.Weight)
		b = ne.AppendUint32(b, uint32(h.OIF))
		b = appendGateway(b, v4, h.Gateway)
		ne.PutUint16(b[nh:], uint16(len(b)-nh))
	}
	ne.PutUint16(b[at:], uint16(len(b)-at)) // ≤ MaxNextHops*32+4 < 64 KiB
	return b
}

// appendDumpRequest appends an RTM_GETROUTE dump request. With filter, it
// carries RTA_TABLE (and RTA_OIF when oif is not 0) so that a kernel in
// strict-check mode sends only that table's routes (through oif).
func appendDumpRequest(b []byte, seq uint32, family uint8, table uint32, oif int32, filter bool) []byte {
	start := len(b)
	b = appendHeader(b, unix.RTM_GETROUTE, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
	rtmTable := uint8(0)
	if filter && table < 256 {
		rtmTable = uint8(table)
	}
	b = append(b, family, 0, 0, 0, rtmTable, 0, 0, 0)
	b = ne.AppendUint32(b, 0)
	if filter && table != 0 {
		b = appendAttrU32(b, unix.RTA_TABLE, table)
	}
	if filter && oif != 0 {
		b = appendAttrU32(b, unix.RTA_OIF, uint32(oif))
	}
	ne.PutUint32(b[start:], uint32(len(b)-start))
	return b
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

// gateway decodes a next hop's RTA_GATEWAY (an address of the route's
// family) or RTA_VIA (struct rtvia, any family).
func gateway(v4 bool, typ uint16, v []byte) (netip.Addr, error) {
	if typ == unix.RTA_VIA {
		if a, ok := viaAddr(v); ok {
			return a, nil
		}
		return netip.Addr{}, errMalformed("RTA_VIA of %d bytes", len(v))
	}
	if a, ok := addrOf(v4, v); ok {
		return a, nil
	}
	return netip.Addr{}, errMalformed("RTA_GATEWAY of %d bytes", len(v))
}

// errMalformed returns an error wrapping ErrMalformed.
func errMalformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// decodeRoute parses an RTM_NEWROUTE payload (rtmsg and attributes) into r,
// overwriting every field. Only a multipath route allocates (its NextHops).
// ok is false, with a nil error, for a family other than IPv4 and IPv6.
func decodeRoute(payload []byte, r *Route) (ok bool, err error) {
	if len(payload) < rtmsgLen {
		return false, errMalformed("route message of %d bytes", len(payload))
	}
	family := payload[0]
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return false, nil
	}
	*r = Route{
		Family:   family,
		TOS:      payload[3],
		Table:    uint32(payload[4]),
		Protocol: payload[5],
		Scope:    payload[6],
		Type:     payload[7],
		Flags:    ne.Uint32(payload[8:]),
	}
	v4 := family == unix.AF_INET
	dstLen := int(payload[1])
	if (v4 && dstLen > 32) || dstLen > 128 {
		return false, errMalformed("prefix length %d", dstLen)
	}
	dst := zeroAddr(v4)
	for attrs := payload[rtmsgLen:]; len(attrs) > 0; {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return false, errMalformed("attribute %d in %d bytes", t, len(attrs))
		}
		attrs = rest
		switch t {
		case unix.RTA_DST:
			a, ok := addrOf(v4, v)
			if !ok {
				return false, errMalformed("RTA_DST of %d bytes", len(v))
			}
			dst = a
		case unix.RTA_TABLE:
			if len(v) < 4 {
				return false, errMalformed("RTA_TABLE of %d bytes", len(v))
			}
			r.Table = ne.Uint32(v)
		case unix.RTA_OIF:
			if len(v) < 4 {
				return false, errMalformed("RTA_OIF of %d bytes", len(v))
			}
			r.OIF = int32(ne.Uint32(v))
		case unix.RTA_GATEWAY, unix.RTA_VIA:
			if r.Gateway, err = gateway(v4, t, v); err != nil {
				return false, err
			}
		case unix.RTA_PREFSRC:
			a, ok := addrOf(v4, v)
			if !ok {
				return false, errMalformed("RTA_PREFSRC of %d bytes", len(v))
			}
			r.PrefSrc = a
		case unix.RTA_PRIORITY:
			if len(v) < 4 {
				return false, errMalformed("RTA_PRIORITY of %d bytes", len(v))
			}
			r.Priority = ne.Uint32(v)
		case unix.RTA_METRICS:
			r.MTU = metricMTU(v)
		case unix.RTA_MULTIPATH:
			hops, err := decodeMultipath(v4, v)
			if err != nil {
				return false, err
			}
			r.NextHops = hops
		}
	}
	r.Dst = netip.PrefixFrom(dst, dstLen).Masked()
	return true, nil
}

func zeroAddr(v4 bool) netip.Addr {
	if v4 {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// addrOf parses a 4- or 16-byte address of the route's family.
func addrOf(v4 bool, v []byte) (netip.Addr, bool) {
	if v4 && len(v) == 4 {
		return netip.AddrFrom4([4]byte(v)), true
	}
	if !v4 && len(v) == 16 {
		return netip.AddrFrom16([16]byte(v)), true
	}
	return netip.Addr{}, false
}

// viaAddr parses a struct rtvia (family, then address).
func viaAddr(v []byte) (netip.Addr, bool) {
	if len(v) < 2 {
		return netip.Addr{}, false
	}
	switch ne.Uint16(v) {
	case unix.AF_INET:
		return addrOf(true, v[2:])
	case unix.AF_INET6:
		return addrOf(false, v[2:])
	}
	return netip.Addr{}, false
}

// metricMTU returns RTAX_MTU from a RTA_METRICS payload, 0 if absent.
func metricMTU(v []byte) uint32 {
	for len(v) > 0 {
		t, mv, rest, ok := nextAttr(v)
		if !ok {
			return 0
		}
		if t == unix.RTAX_MTU && len(mv) >= 4 {
			return ne.Uint32(mv)
		}
		v = rest
	}
	return 0
}

// decodeMultipath parses a RTA_MULTIPATH payload (struct rtnexthop
// records) into a new slice.
func decodeMultipath(v4 bool, v []byte) ([]NextHop, error) {
	n := 0
	for rest := v; len(rest) > 0; n++ {
		var ok bool
		if _, rest, ok = nextRecord(rest, rtnhLen); !ok {
			return nil, errMalformed("rtnexthop in %d bytes", len(rest))
		}
	}
	if n == 0 {
		return nil, nil
	}
	hops := make([]NextHop, 0, n)
	for len(v) > 0 {
		rec, rest, _ := nextRecord(v, rtnhLen) // checked above
		h := NextHop{Flags: rec[2], Weight: rec[3], OIF: int32(ne.Uint32(rec[4:]))}
		for attrs := rec[rtnhLen:]; len(attrs) > 0; {
			t, av, more, ok := nextAttr(attrs)
			if !ok {
				return nil, errMalformed("next-hop attribute %d in %d bytes", t, len(attrs))
			}
			attrs = more
			if t == unix.RTA_GATEWAY || t == unix.RTA_VIA {
				var err error
				if h.Gateway, err = gateway(v4, t, av); err != nil {
					return nil, fmt.Errorf("next hop: %w", err)
				}
			}
		}
		hops = append(hops, h)
		v = rest
	}
	return hops, nil
}
