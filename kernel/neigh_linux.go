//go:build linux

package kernel

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Neighbour and FDB entries travel in the same messages (RTM_NEWNEIGH,
// RTM_DELNEIGH: a struct ndmsg and NDA_* attributes); an FDB entry is a
// neighbour of family AF_BRIDGE.

// ndaProtocol is NDA_PROTOCOL (Linux 5.0), which golang.org/x/sys/unix
// lacks: a u8, who installed the entry. The kernel reports it in dumps
// when it is not 0, and a write without it keeps an entry's protocol.
const ndaProtocol = 12

// neighborCodec is how applyOps writes neighbours: NDA_PROTOCOL is sent
// when Protocol is set (not on a delete, which keys on the address).
var neighborCodec = &opCodec[NeighborOp]{
	check: func(op *NeighborOp) error {
		if err := checkKind(op.Kind); err != nil {
			return err
		}
		return op.Neighbor.check(op.Kind)
	},
	encode: func(b []byte, seq uint32, op *NeighborOp) []byte {
		n := &op.Neighbor
		var state uint16
		var proto uint8
		if op.Kind != OpDelete {
			state, proto = n.state(), n.Protocol
		}
		return appendNeighMsg(b, op.Kind, writeFlags(op.Kind), seq, uint8(ipfamily.Of(n.IP).AF()), n.LinkIndex, state, 0, n.IP, n.MAC, proto)
	},
	describe: func(op *NeighborOp) (string, string) {
		return op.Kind.String() + " neighbor", fmt.Sprintf("%s dev %d", op.Neighbor.IP, op.Neighbor.LinkIndex)
	},
}

// fdbCodec is how applyOps writes FDB entries: into the device's own FDB
// (NTF_SELF), as `bridge fdb … self` does. OpReplace of a unicast MAC
// replaces its remote (NLM_F_REPLACE); OpReplace of the all-zeros or a
// multicast MAC adds Dst to the remotes that get the flooded frames
// (NLM_F_APPEND), because a VXLAN device keeps a list of remotes for those
// and refuses to replace one.
var fdbCodec = &opCodec[FDBOp]{
	check: func(op *FDBOp) error {
		if err := checkKind(op.Kind); err != nil {
			return err
		}
		return op.Entry.Validate()
	},
	encode: func(b []byte, seq uint32, op *FDBOp) []byte {
		e := &op.Entry
		flags := writeFlags(op.Kind)
		if op.Kind == OpReplace && e.floods() {
			flags = unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_APPEND
		}
		var state uint16
		switch {
		case op.Kind == OpDelete:
		case e.Permanent:
			state = NUDPermanent
		default:
			state = NUDReachable
		}
		return appendNeighMsg(b, op.Kind, flags, seq, unix.AF_BRIDGE, e.LinkIndex, state, unix.NTF_SELF, e.Dst, e.MAC, 0)
	},
	describe: func(op *FDBOp) (string, string) {
		e := &op.Entry
		obj := fmt.Sprintf("%s dev %d", e.MAC, e.LinkIndex)
		if e.Dst.IsValid() {
			obj += " dst " + e.Dst.String()
		}
		return op.Kind.String() + " fdb entry", obj
	},
}

// appendNeighMsg appends one RTM_NEWNEIGH (RTM_DELNEIGH for OpDelete)
// request: NDA_DST when dst is valid, NDA_LLADDR when lladdr is set and
// the op is not a delete of a neighbour (an FDB delete keys on it),
// NDA_PROTOCOL when proto is not 0.
func appendNeighMsg(b []byte, kind OpKind, flags uint16, seq uint32, family uint8, ifindex int, state uint16, ntf uint8, dst netip.Addr, lladdr []byte, proto uint8) []byte {
	start := len(b)
	b = appendWriteHeader(b, kind, unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH, flags, seq)
	b = append(b, family, 0, 0, 0)
	b = ne.AppendUint32(b, uint32(int32(ifindex)))
	b = ne.AppendUint16(b, state)
	b = append(b, ntf, 0) // ndm_flags, ndm_type
	if dst.IsValid() {
		b = appendAttrAddr(b, unix.NDA_DST, dst)
	}
	if len(lladdr) > 0 && (kind != OpDelete || family == unix.AF_BRIDGE) {
		b = appendAttrBytes(b, unix.NDA_LLADDR, lladdr)
	}
	if proto != 0 {
		b = appendAttrU8(b, ndaProtocol, proto)
	}
	return finishMsg(b, start)
}

// appendNeighDumpRequest appends an RTM_GETNEIGH dump request of family.
// With filter and ifindex > 0 it asks the kernel for that interface's
// entries only: NDA_IFINDEX for neighbours, ndm_ifindex for AF_BRIDGE
// (the header field the kernel reads for FDB dumps).
func appendNeighDumpRequest(b []byte, seq uint32, family uint8, ifindex int, filter bool) []byte {
	start := len(b)
	b = appendHeader(b, unix.RTM_GETNEIGH, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
	hdrIndex := uint32(0)
	if filter && ifindex > 0 && family == unix.AF_BRIDGE {
		hdrIndex = uint32(ifindex)
	}
	b = append(b, family, 0, 0, 0)
	b = ne.AppendUint32(b, hdrIndex)
	b = append(b, 0, 0, 0, 0) // state, flags, type
	if filter && ifindex > 0 && family != unix.AF_BRIDGE {
		b = appendAttrU32(b, unix.NDA_IFINDEX, uint32(ifindex))
	}
	return finishMsg(b, start)
}

// neighMsg is a decoded RTM_NEWNEIGH. lladdr points into the message.
type neighMsg struct {
	family  uint8
	ifindex int
	state   uint16
	flags   uint8
	dst     netip.Addr
	lladdr  []byte
	proto   uint8 // NDA_PROTOCOL, 0 when absent
}

// decodeNeigh parses an RTM_NEWNEIGH payload (ndmsg and attributes) into
// m, overwriting every field.
func decodeNeigh(payload []byte, m *neighMsg) error {
	if len(payload) < ndmsgLen {
		return errMalformed("neighbour message of %d bytes", len(payload))
	}
	*m = neighMsg{
		family:  payload[0],
		ifindex: int(int32(ne.Uint32(payload[4:]))),
		state:   ne.Uint16(payload[8:]),
		flags:   payload[10],
	}
	for attrs := payload[ndmsgLen:]; len(attrs) > 0; {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return errMalformed("attribute %d in %d bytes", t, len(attrs))
		}
		attrs = rest
		switch t {
		case unix.NDA_DST:
			a, ok := anyAddr(v)
			if !ok {
				return errMalformed("NDA_DST of %d bytes", len(v))
			}
			m.dst = a
		case unix.NDA_LLADDR:
			if len(v) > maxLinkAddrLen {
				return errMalformed("NDA_LLADDR of %d bytes", len(v))
			}
			m.lladdr = v
		case ndaProtocol:
			if len(v) < 1 {
				return errMalformed("NDA_PROTOCOL of %d bytes", len(v))
			}
			m.proto = v[0]
		}
	}
	return nil
}

// hwAddr copies a link-layer address out of a message (nil for none).
func hwAddr(b []byte) net.HardwareAddr {
	if len(b) == 0 {
		return nil
	}
	return net.HardwareAddr(bytes.Clone(b))
}

// applyNeighbors implements ApplyNeighbors on c.
func (c *conn) applyNeighbors(ctx context.Context, ops []NeighborOp) []error {
	return applyOps(c, ctx, ops, neighborCodec)
}

// applyFDB implements ApplyFDB on c.
func (c *conn) applyFDB(ctx context.Context, ops []FDBOp) []error {
	return applyOps(c, ctx, ops, fdbCodec)
}

// neighbors implements Neighbors on c: the kernel filters by family, and
// by interface under strict checking; userspace filters again.
func (c *conn) neighbors(ctx context.Context, f Family, linkIndex int) ([]Neighbor, error) {
	if !f.Valid() {
		return nil, invalid("neighbour dump: %v is neither IPv4 nor IPv6", f)
	}
	if linkIndex < 0 {
		return nil, invalid("neighbour dump: interface index %d", linkIndex)
	}
	var out []Neighbor
	err := c.dumpNeighs(ctx, fmt.Sprintf("%s neighbour dump", f), uint8(f.AF()), linkIndex, func(m *neighMsg) {
		if f.Contains(m.dst) {
			out = append(out, Neighbor{LinkIndex: m.ifindex, IP: m.dst, MAC: hwAddr(m.lladdr), State: m.state, Protocol: m.proto})
		}
	}, func() { out = out[:0] })
	return out, err
}

// fdb implements FDB on c: the device's own entries (NTF_SELF) with a
// 6-byte MAC, of the interface with index linkIndex (0: every interface).
// Under strict checking the kernel filters by interface; userspace filters
// again.
func (c *conn) fdb(ctx context.Context, linkIndex int) ([]FDBEntry, error) {
	if linkIndex < 0 {
		return nil, invalid("FDB dump: interface index %d", linkIndex)
	}
	var out []FDBEntry
	err := c.dumpNeighs(ctx, "FDB dump", unix.AF_BRIDGE, linkIndex, func(m *neighMsg) {
		if m.flags&unix.NTF_SELF != 0 && len(m.lladdr) == ethAddrLen {
			out = append(out, FDBEntry{LinkIndex: m.ifindex, MAC: hwAddr(m.lladdr), Dst: m.dst, Permanent: m.state&NUDPermanent != 0})
		}
	}, func() { out = out[:0] })
	return out, err
}

// dumpNeighs dumps the entries of family af (those of the interface with
// index linkIndex, 0: every interface) and calls fn with each; what names
// the dump in errors, and reset is dump's. m is reused: fn copies what it
// keeps.
func (c *conn) dumpNeighs(ctx context.Context, what string, af uint8, linkIndex int, fn func(m *neighMsg), reset func()) error {
	var m neighMsg
	return c.dump(ctx, &dumpRequest{
		what:  what,
		reply: unix.RTM_NEWNEIGH,
		encode: func(b []byte, seq uint32, strict bool) []byte {
			return appendNeighDumpRequest(b, seq, af, linkIndex, strict)
		},
	}, func(payload []byte) error {
		if err := decodeNeigh(payload, &m); err != nil {
			return err
		}
		if m.family == af && (linkIndex == 0 || m.ifindex == linkIndex) {
			fn(&m)
		}
		return nil
	}, reset)
}
