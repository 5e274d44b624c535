package proxy

import (
	"encoding/binary"
	"net/netip"
)

// The Go mirrors of the map entries in c/nat.h. Field order and sizes are
// the C structs' exactly (checked against the program's BTF by
// TestKernelProgLayout); ports are kept in network byte order as the
// program reads them from packets, which is why they are [2]byte here.

// feKey is a frontend: an address, a port and a protocol.
type feKey struct {
	Addr  [16]byte
	Port  [2]byte
	Proto uint8
	Pad   uint8
}

// Frontend flags (np_fe_val.flags).
const (
	feExternalLocal uint32 = 0x1
	feNodePort      uint32 = 0x2
	feInternalLocal uint32 = 0x4
	feSourceRanges  uint32 = 0x8
	feMaglev        uint32 = 0x10
	feDSR           uint32 = 0x20
	feSourceNode    uint32 = 0x40
)

// feLocalOnlyShift places, in the upper 16 bits of a frontend's flags, how
// many of its first backends serve the traffic kept on this node alone
// (cluster.Backend.LocalOnly; NP_FE_LOCAL_ONLY_SHIFT).
const (
	feLocalOnlyShift = 16
	maxLocalOnly     = 1<<(32-feLocalOnlyShift) - 1
)

// feVal leads a frontend to its service's backends: 0..LocalCount-1 run on
// this node, LocalCount..Count-1 elsewhere; the first Flags>>feLocalOnlyShift
// of the local ones serve the traffic kept on this node alone.
type feVal struct {
	SvcID      uint32
	Count      uint32
	LocalCount uint32
	Flags      uint32
	Affinity   uint32 // session affinity timeout, seconds; 0: none
}

// srcKey is a service's source range in the LPM trie np_src: the service
// ID (big-endian, the first 32 bits of the prefix) and the range's
// address as the maps hold it.
type srcKey struct {
	Prefixlen uint32 // 32 + the range's length within the 16-byte address
	SvcID     [4]byte
	Addr      [16]byte
}

// srcVal marks a range as present.
type srcVal struct{ V uint8 }

// svcID32 is id in network byte order, as srcKey holds it.
func svcID32(id uint32) [4]byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], id)
	return b
}

// srcKeyOf is the key of range p, service ID not yet set.
func srcKeyOf(p netip.Prefix) srcKey {
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	return srcKey{Prefixlen: 32 + uint32(bits), Addr: addr16(p.Masked().Addr())}
}

// svcStats are a service's counters on one CPU (np_svc_stats).
type svcStats struct {
	Conns, Packets, Bytes, Rejects uint64
}

// affKey and affVal are the affinity map's entries (np_aff): which backend
// a client's last new connection to a service went to, and when. The
// programs alone write them.
type affKey struct {
	SvcID  uint32
	Client [16]byte
}

type affVal struct {
	Addr    [16]byte
	Port    [2]byte
	Pad     uint16
	Ordinal uint32
	Last    uint64
}

// beKey is backend number Ordinal of service SvcID.
type beKey struct {
	SvcID   uint32
	Ordinal uint32
}

// beVal is a backend's address and port.
type beVal struct {
	Addr  [16]byte
	Port  [2]byte
	Flags uint16 // in a Maglev table only: beLocal
}

// ctKey and ctVal are the program's connection tracking entries; the Go
// side only reads and deletes them.
type ctKey struct {
	Src   [16]byte
	Dst   [16]byte
	Sport [2]byte
	Dport [2]byte
	Proto uint8
	Pad   [3]uint8
}

type ctVal struct {
	Addr     [16]byte
	Port     [2]byte
	Pad      uint16
	SvcID    uint32
	Ordinal  uint32 // UDP forward: the backend's ordinal; TCP with ctFin: the acknowledgement of its FIN
	Flags    uint32
	LastSeen uint64
}

// Connection tracking flags (np_ct_val.flags).
const (
	ctReverse  uint32 = 0x1
	ctMasq     uint32 = 0x2
	ctHairpin  uint32 = 0x4
	ctFin      uint32 = 0x8  // a TCP FIN was seen in the entry's direction
	ctReplied  uint32 = 0x10 // reverse: the backend answered; DSR forward: the client acknowledged
	ctDSR      uint32 = 0x20 // direct server return
	ctNode     uint32 = 0x40 // the node's own connection, translated at an egress
	ctFinAcked uint32 = 0x80 // the other direction acknowledged this direction's FIN
)

// The programs' counters, indexes of np_stats (NP_STAT_* in c/nat.h).
const (
	statCTFull = 0 // new connections dropped: np_ct had no room
	statClosed = 1 // connections removed by the programs as they closed
	statCount  = 2
)

// The socket reverse map of the connect-time programs (c/sock.c): socket
// cookie and backend → the frontend the socket asked for. The programs
// alone write it; the Go side sizes it, and reads it in tests.

// skKey is a translated socket (its cookie) and the backend it talks to.
type skKey struct {
	Cookie uint64
	Addr   [16]byte
	Port   [2]byte
	Pad    uint16
	Pad2   uint32
}

// skVal is the frontend the socket asked for.
type skVal struct {
	Addr [16]byte
	Port [2]byte
	Pad  uint16
}

// Sizes of the C structs, in bytes.
const (
	feKeySize    = 20
	feValSize    = 20
	beKeySize    = 8
	beValSize    = 20
	ctKeySize    = 40
	ctValSize    = 40
	skKeySize    = 32
	skValSize    = 20
	affKeySize   = 20
	svcStatsSize = 32
	srcKeySize   = 24
	affValSize   = 32
	mgKeySize    = 8
)

// boolWord is 1 for true, 0 for false: a load-time flag of the programs.
func boolWord(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// addr16 is a as the maps hold it: IPv6 as it is, IPv4 mapped into IPv6.
func addr16(a netip.Addr) [16]byte {
	return a.As16() // for an IPv4 address, the IPv4-mapped form
}

// fromAddr16 reverses addr16.
func fromAddr16(b [16]byte) netip.Addr { return netip.AddrFrom16(b).Unmap() }

// port16 is port in network byte order.
func port16(p uint16) [2]byte {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return b
}

// fromPort16 reverses port16.
func fromPort16(b [2]byte) uint16 { return binary.BigEndian.Uint16(b[:]) }
