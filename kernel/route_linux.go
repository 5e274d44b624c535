//go:build linux

package kernel

import (
	"context"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// rtaNHID is RTA_NH_ID (linux/rtnetlink.h), which x/sys does not name: the
// nexthop object a route uses.
const rtaNHID = 30

// routeCodec is how applyOps writes routes.
var routeCodec = &opCodec[RouteOp]{
	check: func(op *RouteOp) error {
		if err := checkKind(op.Kind); err != nil {
			return err
		}
		return op.Route.check(op.Kind)
	},
	encode: func(b []byte, seq uint32, op *RouteOp) []byte { return appendRouteMsg(b, op.Kind, seq, &op.Route) },
	describe: func(op *RouteOp) (string, string) {
		return op.Kind.String() + " route", routeObject(&op.Route)
	},
}

// appendGateway appends RTA_GATEWAY, or RTA_VIA for an IPv6 next hop of an
// IPv4 route.
func appendGateway(b []byte, f Family, gw netip.Addr) []byte {
	if !gw.IsValid() {
		return b
	}
	if f == IPv4 && gw.Is6() {
		v := gw.As16()
		b = appendAttrHeader(b, unix.RTA_VIA, 2+16)
		b = ne.AppendUint16(b, unix.AF_INET6)
		b = append(b, v[:]...)
		return append(b, 0, 0) // pad 22 to 24
	}
	return appendAttrAddr(b, unix.RTA_GATEWAY, gw)
}

// appendRouteMsg appends one complete request for r (validated by the
// caller) with sequence number seq.
func appendRouteMsg(b []byte, kind OpKind, seq uint32, r *Route) []byte {
	start := len(b)
	b = appendWriteHeader(b, kind, unix.RTM_NEWROUTE, unix.RTM_DELROUTE, writeFlags(kind), seq)

	table := r.Table
	if table == 0 {
		table = TableMain
	}
	rtmTable := uint8(unix.RT_TABLE_UNSPEC)
	if table < 256 {
		rtmTable = uint8(table)
	}
	oif, gw := r.OIF, r.Gateway
	rflags := r.Flags & WritableFlags
	if len(r.NextHops) == 1 { // one next hop is a single path, as the kernel reports it
		h := r.NextHops[0]
		oif, gw = h.OIF, h.Gateway
		rflags |= h.Flags & WritableFlags
	}
	scope := r.Scope
	if kind == OpDelete && scope == ScopeUniverse {
		scope = ScopeNowhere // any scope, as `ip route del` does
	}
	b = append(b, uint8(r.Family.AF()), uint8(r.Dst.Bits()), 0, r.TOS, rtmTable, r.Protocol, scope, r.Type)
	b = ne.AppendUint32(b, rflags)

	b = appendAttrU32(b, unix.RTA_TABLE, table)
	if r.Dst.Bits() > 0 {
		b = appendAttrAddr(b, unix.RTA_DST, r.Dst.Addr())
	}
	if oif > 0 {
		b = appendAttrU32(b, unix.RTA_OIF, uint32(oif))
	}
	b = appendGateway(b, r.Family, gw)
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
		b = appendMultipath(b, r.Family, r.NextHops)
	}
	return finishMsg(b, start)
}

// appendMultipath appends RTA_MULTIPATH: one rtnexthop per hop, each
// followed by its gateway attribute.
func appendMultipath(b []byte, f Family, hops []NextHop) []byte {
	at := len(b)
	b = appendAttrHeader(b, unix.RTA_MULTIPATH, 0)
	for _, h := range hops {
		nh := len(b)
		b = ne.AppendUint16(b, 0)
		b = append(b, uint8(h.Flags&WritableFlags), h.Weight)
		b = ne.AppendUint32(b, uint32(h.OIF))
		b = appendGateway(b, f, h.Gateway)
		ne.PutUint16(b[nh:], uint16(len(b)-nh))
	}
	ne.PutUint16(b[at:], uint16(len(b)-at)) // ≤ MaxNextHops*32+4 < 64 KiB
	return b
}

// appendRouteDumpRequest appends an RTM_GETROUTE dump request. With
// filter, it carries RTA_TABLE (and RTA_OIF when oif is not 0) so that a
// kernel in strict-check mode sends only that table's routes (through oif).
func appendRouteDumpRequest(b []byte, seq uint32, f Family, table uint32, oif int, filter bool) []byte {
	start := len(b)
	b = appendHeader(b, unix.RTM_GETROUTE, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
	rtmTable := uint8(0)
	if filter && table < 256 {
		rtmTable = uint8(table)
	}
	b = append(b, uint8(f.AF()), 0, 0, 0, rtmTable, 0, 0, 0)
	b = ne.AppendUint32(b, 0)
	if filter && table != 0 {
		b = appendAttrU32(b, unix.RTA_TABLE, table)
	}
	if filter && oif != 0 {
		b = appendAttrU32(b, unix.RTA_OIF, uint32(oif))
	}
	return finishMsg(b, start)
}

// gateway decodes a next hop's RTA_GATEWAY (an address of the route's
// family) or RTA_VIA (struct rtvia, any family).
func gateway(f Family, typ uint16, v []byte) (netip.Addr, error) {
	if typ == unix.RTA_VIA {
		if a, ok := viaAddr(v); ok {
			return a, nil
		}
		return netip.Addr{}, errMalformed("RTA_VIA of %d bytes", len(v))
	}
	if a, ok := addrOf(f, v); ok {
		return a, nil
	}
	return netip.Addr{}, errMalformed("RTA_GATEWAY of %d bytes", len(v))
}

// decodeRoute parses an RTM_NEWROUTE payload (rtmsg and attributes) into r,
// overwriting every field. Only a multipath route allocates (its NextHops).
// ok is false, with a nil error, for a family other than IPv4 and IPv6.
func decodeRoute(payload []byte, r *Route) (ok bool, err error) {
	f, ok, err := headerFamily(payload, rtmsgLen, "route")
	if !ok {
		return false, err
	}
	*r = Route{
		Family:   f,
		SrcLen:   payload[2],
		TOS:      payload[3],
		Table:    uint32(payload[4]),
		Protocol: payload[5],
		Scope:    payload[6],
		Type:     payload[7],
		Flags:    ne.Uint32(payload[8:]),
	}
	dstLen := int(payload[1])
	if dstLen > f.Bits() {
		return false, errMalformed("prefix length %d", dstLen)
	}
	dst := zeroAddr(f)
	for attrs := payload[rtmsgLen:]; len(attrs) > 0; {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return false, errMalformed("attribute %d in %d bytes", t, len(attrs))
		}
		attrs = rest
		switch t {
		case unix.RTA_DST:
			a, ok := addrOf(f, v)
			if !ok {
				return false, errMalformed("RTA_DST of %d bytes", len(v))
			}
			dst = a
		case unix.RTA_TABLE:
			if r.Table, err = attrU32("RTA_TABLE", v); err != nil {
				return false, err
			}
		case rtaNHID:
			if r.NexthopID, err = attrU32("RTA_NH_ID", v); err != nil {
				return false, err
			}
		case unix.RTA_OIF:
			oif, err := attrU32("RTA_OIF", v)
			if err != nil {
				return false, err
			}
			r.OIF = int(int32(oif))
		case unix.RTA_GATEWAY, unix.RTA_VIA:
			if r.Gateway, err = gateway(f, t, v); err != nil {
				return false, err
			}
		case unix.RTA_PREFSRC:
			a, ok := addrOf(f, v)
			if !ok {
				return false, errMalformed("RTA_PREFSRC of %d bytes", len(v))
			}
			r.PrefSrc = a
		case unix.RTA_PRIORITY:
			if r.Priority, err = attrU32("RTA_PRIORITY", v); err != nil {
				return false, err
			}
		case unix.RTA_METRICS:
			r.MTU = metricMTU(v)
		case unix.RTA_MULTIPATH:
			if r.NextHops, err = decodeMultipath(f, v); err != nil {
				return false, err
			}
		}
	}
	r.Dst = netip.PrefixFrom(dst, dstLen).Masked()
	return true, nil
}

// viaAddr parses a struct rtvia (family, then address).
func viaAddr(v []byte) (netip.Addr, bool) {
	if len(v) < 2 {
		return netip.Addr{}, false
	}
	switch ne.Uint16(v) {
	case unix.AF_INET:
		return addrOf(IPv4, v[2:])
	case unix.AF_INET6:
		return addrOf(IPv6, v[2:])
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
func decodeMultipath(f Family, v []byte) ([]NextHop, error) {
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
		h := NextHop{Flags: uint32(rec[2]), Weight: rec[3], OIF: int(int32(ne.Uint32(rec[4:])))}
		for attrs := rec[rtnhLen:]; len(attrs) > 0; {
			t, av, more, ok := nextAttr(attrs)
			if !ok {
				return nil, errMalformed("next-hop attribute %d in %d bytes", t, len(attrs))
			}
			attrs = more
			if t == unix.RTA_GATEWAY || t == unix.RTA_VIA {
				var err error
				if h.Gateway, err = gateway(f, t, av); err != nil {
					return nil, fmt.Errorf("next hop: %w", err)
				}
			}
		}
		hops = append(hops, h)
		v = rest
	}
	return hops, nil
}

// applyRoutes implements ApplyRoutes on c.
func (c *conn) applyRoutes(ctx context.Context, ops []RouteOp) []error {
	return applyOps(c, ctx, ops, routeCodec)
}

// dumpRoutes implements DumpRoutes (oif 0) and DumpInterfaceRoutes on c.
// The table (and interface) is filtered in the kernel where it can (strict
// dump checking with RTA_TABLE and RTA_OIF, Linux ≥ 4.20) and in userspace
// in any case; a table that does not exist is empty, not an error. Cloned
// routes (RTM_F_CLONED) are never reported.
func (c *conn) dumpRoutes(ctx context.Context, f Family, table uint32, oif int, fn func(*Route) error, reset func()) error {
	switch {
	case !f.Valid():
		return invalid("route dump: %v is neither IPv4 nor IPv6", f)
	case fn == nil:
		return invalid("route dump: nil callback")
	case oif < 0:
		return invalid("route dump: interface index %d", oif)
	}
	what := fmt.Sprintf("%s route dump", f)
	if table != 0 {
		what += fmt.Sprintf(" of table %d", table)
	}
	req := &dumpRequest{
		what:          what,
		reply:         unix.RTM_NEWROUTE,
		emptyOnENOENT: table != 0,
		encode: func(b []byte, seq uint32, strict bool) []byte {
			return appendRouteDumpRequest(b, seq, f, table, oif, strict)
		},
	}
	r := &c.route
	return c.dump(ctx, req, func(payload []byte) error {
		ok, err := decodeRoute(payload, r)
		if err != nil || !ok || r.Family != f || (table != 0 && r.Table != table) ||
			r.Flags&unix.RTM_F_CLONED != 0 || (oif != 0 && !r.Uses(oif)) {
			return err
		}
		return fn(r)
	}, reset)
}
