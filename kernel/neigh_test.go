//go:build linux

package kernel

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// neighKey identifies an entry of neighStore: (family, interface, address)
// for a neighbour, plus the MAC for an FDB entry (one entry per remote).
type neighKey struct {
	family  uint8
	ifindex int
	dst     netip.Addr
	mac     string
}

// neighStore is an in-memory neighbour table and VXLAN FDB behind a
// fakeKernel, with the kernel's semantics for what the codecs send:
// neighbours are replaced, added (EEXIST) and deleted (ENOENT); an FDB
// MAC keeps a list of remotes, which NLM_F_REPLACE replaces (EOPNOTSUPP
// for the all-zeros and multicast MACs), NLM_F_APPEND extends (only for
// those), NLM_F_EXCL refuses (EEXIST) and a delete shrinks (ENOENT when
// the MAC has no entry; a remote it does not have is no error).
type neighStore struct {
	entries map[neighKey]neighMsg
	// intr is how many of the next dumps are marked interrupted.
	intr int
	// honorFilter makes dumps send only the requested interface.
	honorFilter bool
	// foreign is added to every FDB dump: an entry of the bridge master
	// (NTF_MASTER), which FDB must skip.
	foreign bool
	dumps   int
}

func newNeighStore() *neighStore { return &neighStore{entries: map[neighKey]neighMsg{}} }

func (s *neighStore) kernel() *fakeKernel { return &fakeKernel{onRequest: s.handle} }

func (s *neighStore) handle(h header, payload []byte) [][]byte {
	ack := func(errno unix.Errno) [][]byte { return [][]byte{ackMsg(h.seq, -int32(errno), "")} }
	if h.typ == unix.RTM_GETNEIGH {
		return s.dump(h, payload)
	}
	var m neighMsg
	if err := decodeNeigh(payload, &m); err != nil || m.ifindex <= 0 {
		return ack(unix.EINVAL)
	}
	m.lladdr = bytes.Clone(m.lladdr)
	key := neighKey{family: m.family, ifindex: m.ifindex, dst: m.dst}
	if m.family != unix.AF_BRIDGE {
		_, exists := s.entries[key]
		switch {
		case h.typ == unix.RTM_DELNEIGH && !exists:
			return ack(unix.ENOENT)
		case h.typ == unix.RTM_DELNEIGH:
			delete(s.entries, key)
		case exists && h.flags&unix.NLM_F_EXCL != 0:
			return ack(unix.EEXIST)
		case exists && h.flags&unix.NLM_F_REPLACE == 0:
			return ack(unix.EEXIST)
		default:
			if m.proto == 0 { // a write without NDA_PROTOCOL keeps it
				m.proto = s.entries[key].proto
			}
			s.entries[key] = m
		}
		return ack(0)
	}
	key.mac = string(m.lladdr)
	var same []neighKey // the remotes of this MAC
	for k := range s.entries {
		if k.family == unix.AF_BRIDGE && k.ifindex == m.ifindex && k.mac == key.mac {
			same = append(same, k)
		}
	}
	flood := (&FDBEntry{MAC: m.lladdr}).floods()
	switch {
	case h.typ == unix.RTM_DELNEIGH:
		if !m.dst.IsValid() && len(same) > 0 {
			for _, k := range same {
				delete(s.entries, k)
			}
			return ack(0)
		}
		if len(same) == 0 {
			return ack(unix.ENOENT)
		}
		delete(s.entries, key) // a remote the MAC does not have: no change, no error
	case len(same) > 0 && h.flags&unix.NLM_F_EXCL != 0:
		return ack(unix.EEXIST)
	case len(same) > 0 && h.flags&unix.NLM_F_REPLACE != 0 && flood:
		return ack(unix.EOPNOTSUPP)
	case len(same) > 0 && h.flags&unix.NLM_F_REPLACE != 0:
		for _, k := range same {
			delete(s.entries, k)
		}
		s.entries[key] = m
	case len(same) > 0 && h.flags&unix.NLM_F_APPEND != 0 && flood:
		s.entries[key] = m
	case len(same) > 0:
		return ack(unix.EEXIST)
	default:
		s.entries[key] = m
	}
	return ack(0)
}

func (s *neighStore) dump(h header, payload []byte) [][]byte {
	s.dumps++
	family := payload[0]
	ifindex := int(int32(ne.Uint32(payload[4:])))
	for a := payload[ndmsgLen:]; len(a) > 0; {
		t, v, rest, ok := nextAttr(a)
		if !ok || len(v) < 4 {
			return [][]byte{ackMsg(h.seq, -int32(unix.EINVAL), "bad dump request")}
		}
		if t == unix.NDA_IFINDEX {
			ifindex = int(ne.Uint32(v))
		}
		a = rest
	}
	var keys []neighKey
	for k := range s.entries {
		if k.family == family && (!s.honorFilter || ifindex == 0 || k.ifindex == ifindex) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b neighKey) int {
		return cmp.Or(cmp.Compare(a.ifindex, b.ifindex), cmp.Compare(a.mac, b.mac), a.dst.Compare(b.dst))
	})
	var flags uint16
	if s.intr > 0 {
		s.intr--
		flags = unix.NLM_F_DUMP_INTR
	}
	msg := func(m neighMsg, f uint16) []byte {
		b := appendNeighMsg(nil, OpReplace, 0, h.seq, m.family, m.ifindex, m.state, m.flags, m.dst, m.lladdr, m.proto)
		ne.PutUint16(b[6:], unix.NLM_F_MULTI|f)
		return b
	}
	var out [][]byte
	var cur []byte
	for i, k := range keys {
		f := uint16(0)
		if i == len(keys)/2 {
			f = flags
		}
		cur = append(cur, msg(s.entries[k], f)...)
		if (i+1)%3 == 0 {
			out, cur = append(out, cur), nil
		}
	}
	if family == unix.AF_BRIDGE && s.foreign {
		cur = append(cur, msg(neighMsg{family: unix.AF_BRIDGE, ifindex: 5, state: NUDPermanent, flags: unix.NTF_MASTER,
			lladdr: []byte{2, 0, 0, 0, 0, 9}}, 0)...)
	}
	return append(out, append(cur, doneMsg(h.seq, flags, 0, "")...))
}

func mac(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}
}

func neighbor(v4 bool, i, ifindex int) Neighbor {
	return Neighbor{LinkIndex: ifindex, IP: genDst(v4, i).Addr(), MAC: mac(i)}
}

func TestApplyNeighborsAndDump(t *testing.T) {
	for _, strict := range []bool{true, false} {
		for _, honor := range []bool{true, false} {
			s := newNeighStore()
			s.honorFilter = honor
			k := s.kernel()
			c := newConnOn(k, strict, true, minAckBudget) // 16 per batch
			var ops []NeighborOp
			for i := range 100 {
				ops = append(ops, NeighborOp{Kind: OpReplace, Neighbor: neighbor(true, i, 3+i%2)})
				ops = append(ops, NeighborOp{Kind: OpReplace, Neighbor: neighbor(false, i, 3+i%2)})
			}
			for i, err := range c.applyNeighbors(context.Background(), ops) {
				require.NoError(t, err, "op %d", i)
			}
			assert.Len(t, s.entries, 200)
			assert.Len(t, k.sends, (200+15)/16, "batched")
			for _, h := range k.messages() {
				assert.Equal(t, uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE), h.flags)
			}
			for _, f := range []Family{IPv4, IPv6} {
				for _, ifindex := range []int{0, 3, 4, 9} {
					k.sends = nil
					got, err := c.neighbors(context.Background(), f, ifindex)
					require.NoError(t, err)
					want := 0
					for _, op := range ops {
						if ipFamilyOf(op.Neighbor.IP) == f && (ifindex == 0 || op.Neighbor.LinkIndex == ifindex) {
							want++
							assert.Contains(t, got, Neighbor{LinkIndex: op.Neighbor.LinkIndex, IP: op.Neighbor.IP, MAC: op.Neighbor.MAC, State: NUDPermanent})
						}
					}
					assert.Len(t, got, want, "strict %v, kernel filter %v, %v, interface %d", strict, honor, f, ifindex)
					// The request carries the interface only when the kernel can filter.
					_, payload, _, ok := nextMessage(k.sends[0])
					require.True(t, ok)
					assert.Equal(t, strict && ifindex != 0, len(payload) > ndmsgLen)
					assert.Equal(t, uint8(f.AF()), payload[0])
					assert.Zero(t, ne.Uint32(payload[4:]), "strict checking refuses ndm_ifindex in a neighbour dump")
				}
			}
		}
	}
}

func ipFamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

func TestApplyNeighborsPerOpErrors(t *testing.T) {
	s := newNeighStore()
	k := s.kernel()
	c := fakeConn(k)
	existing := neighbor(true, 1, 3)
	require.NoError(t, c.applyNeighbors(context.Background(), []NeighborOp{{Kind: OpReplace, Neighbor: existing}})[0])
	k.sends = nil
	ops := []NeighborOp{
		{Kind: OpReplace, Neighbor: neighbor(true, 2, 3)},
		{Kind: OpAdd, Neighbor: existing},
		{Kind: OpDelete, Neighbor: Neighbor{LinkIndex: 3, IP: genDst(false, 7).Addr()}},
		{Kind: OpReplace, Neighbor: Neighbor{LinkIndex: 3, IP: genDst(true, 8).Addr()}}, // no MAC: invalid
		{Kind: OpDelete, Neighbor: Neighbor{LinkIndex: 3, IP: existing.IP}},             // the key alone
		{Kind: 7, Neighbor: neighbor(true, 9, 3)},
		{Kind: OpAdd, Neighbor: neighbor(false, 3, 4)},
	}
	errs := c.applyNeighbors(context.Background(), ops)
	assert.NoError(t, errs[0])
	assert.ErrorIs(t, errs[1], unix.EEXIST)
	assert.ErrorIs(t, errs[1], ErrExists)
	assert.ErrorIs(t, errs[2], unix.ENOENT)
	assert.ErrorIs(t, errs[2], ErrNotFound)
	assert.ErrorIs(t, errs[3], ErrInvalid)
	assert.NoError(t, errs[4])
	assert.ErrorIs(t, errs[5], ErrInvalid)
	assert.NoError(t, errs[6])
	assert.Len(t, k.messages(), 5, "invalid ops are not sent")
	var oe *OpError
	require.ErrorAs(t, errs[2], &oe)
	assert.Equal(t, "delete neighbor", oe.Op)
	assert.Equal(t, "fd01::7 dev 3", oe.Object)
	assert.Equal(t, "kernel: delete neighbor fd01::7 dev 3: no such file or directory", errs[2].Error())
	assert.Len(t, s.entries, 2)
}

// Our neighbour and FDB messages, read by the netlink library's parser (an
// independent implementation).
func TestNeighborEncodingWithNL(t *testing.T) {
	n := Neighbor{LinkIndex: 7, IP: netip.MustParseAddr("fd00::9"), MAC: mac(5), State: NUDNoARP}
	msg := neighborCodec.encode(nil, 3, &NeighborOp{Kind: OpReplace, Neighbor: n})
	h, payload, _, ok := nextMessage(msg)
	require.True(t, ok)
	assert.Equal(t, uint16(unix.RTM_NEWNEIGH), h.typ)
	got, err := netlink.NeighDeserialize(payload)
	require.NoError(t, err)
	assert.Equal(t, unix.AF_INET6, got.Family)
	assert.Equal(t, 7, got.LinkIndex)
	assert.Equal(t, int(NUDNoARP), got.State)
	assert.Zero(t, got.Flags)
	assert.Equal(t, n.IP.AsSlice(), []byte(got.IP))
	assert.Equal(t, n.MAC, got.HardwareAddr)

	n.State = 0 // the default: permanent
	msg = neighborCodec.encode(nil, 3, &NeighborOp{Kind: OpReplace, Neighbor: n})
	_, payload, _, _ = nextMessage(msg)
	got, err = netlink.NeighDeserialize(payload)
	require.NoError(t, err)
	assert.Equal(t, int(NUDPermanent), got.State)

	msg = neighborCodec.encode(nil, 3, &NeighborOp{Kind: OpDelete, Neighbor: n})
	h, payload, _, _ = nextMessage(msg)
	assert.Equal(t, uint16(unix.RTM_DELNEIGH), h.typ)
	assert.Equal(t, uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK), h.flags)
	got, err = netlink.NeighDeserialize(payload)
	require.NoError(t, err)
	assert.Nil(t, got.HardwareAddr, "a neighbour delete keys on the address")

	e := FDBEntry{LinkIndex: 9, MAC: mac(6), Dst: netip.MustParseAddr("192.0.2.7"), Permanent: true}
	msg = fdbCodec.encode(nil, 4, &FDBOp{Kind: OpReplace, Entry: e})
	h, payload, _, _ = nextMessage(msg)
	assert.Equal(t, uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE), h.flags)
	got, err = netlink.NeighDeserialize(payload)
	require.NoError(t, err)
	assert.Equal(t, unix.AF_BRIDGE, got.Family)
	assert.Equal(t, 9, got.LinkIndex)
	assert.Equal(t, unix.NTF_SELF, got.Flags)
	assert.Equal(t, int(NUDPermanent), got.State)
	assert.Equal(t, e.Dst.AsSlice(), []byte(got.IP))
	assert.Equal(t, e.MAC, got.HardwareAddr)

	e.Permanent = false
	msg = fdbCodec.encode(nil, 4, &FDBOp{Kind: OpAdd, Entry: e})
	h, payload, _, _ = nextMessage(msg)
	assert.Equal(t, uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL), h.flags)
	got, _ = netlink.NeighDeserialize(payload)
	assert.Equal(t, int(NUDReachable), got.State)

	flood := FDBEntry{LinkIndex: 9, MAC: make(net.HardwareAddr, 6), Dst: netip.MustParseAddr("2001:db8::7"), Permanent: true}
	msg = fdbCodec.encode(nil, 4, &FDBOp{Kind: OpReplace, Entry: flood})
	h, payload, _, _ = nextMessage(msg)
	assert.Equal(t, uint16(unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_APPEND), h.flags, "the flood list is appended to")
	got, _ = netlink.NeighDeserialize(payload)
	assert.Equal(t, flood.Dst.AsSlice(), []byte(got.IP))

	msg = fdbCodec.encode(nil, 4, &FDBOp{Kind: OpDelete, Entry: flood})
	h, payload, _, _ = nextMessage(msg)
	assert.Equal(t, uint16(unix.RTM_DELNEIGH), h.typ)
	got, _ = netlink.NeighDeserialize(payload)
	assert.Equal(t, flood.MAC, got.HardwareAddr, "an FDB delete keys on the MAC (and the remote)")
	assert.Equal(t, flood.Dst.AsSlice(), []byte(got.IP))
}

func TestApplyFDB(t *testing.T) {
	s := newNeighStore()
	s.foreign = true
	k := s.kernel()
	c := fakeConn(k)
	vtep := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}) }
	zero := make(net.HardwareAddr, 6)
	entry := func(m net.HardwareAddr, d int) FDBEntry {
		return FDBEntry{LinkIndex: 4, MAC: m, Dst: vtep(d), Permanent: true}
	}
	var ops []FDBOp
	for i := range 50 {
		ops = append(ops, FDBOp{Kind: OpReplace, Entry: entry(mac(i), i)})
	}
	for d := range 3 {
		ops = append(ops, FDBOp{Kind: OpReplace, Entry: entry(zero, 100+d)})
	}
	for i, err := range c.applyFDB(context.Background(), ops) {
		require.NoError(t, err, "op %d", i)
	}
	got, err := c.fdb(context.Background(), 4)
	require.NoError(t, err)
	assert.Len(t, got, 53, "one entry per remote, the bridge master's entry skipped")
	for _, op := range ops {
		assert.Contains(t, got, op.Entry)
	}

	// Replacing a unicast MAC moves it; appending to the flood list again
	// is a no-op; deleting one remote of the flood list keeps the others.
	errs := c.applyFDB(context.Background(), []FDBOp{
		{Kind: OpReplace, Entry: entry(mac(0), 200)},
		{Kind: OpReplace, Entry: entry(zero, 101)},
		{Kind: OpDelete, Entry: entry(zero, 100)},
		{Kind: OpAdd, Entry: entry(mac(1), 201)},
		{Kind: OpDelete, Entry: entry(mac(70), 77)},
		{Kind: OpDelete, Entry: FDBEntry{LinkIndex: 4, MAC: mac(3)}},
		{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 4, MAC: mac(3)[:5]}},
	})
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1])
	assert.NoError(t, errs[2])
	assert.ErrorIs(t, errs[3], ErrExists)
	assert.ErrorIs(t, errs[4], ErrNotFound, "no entry for the MAC")
	assert.NoError(t, errs[5], "without a remote, the MAC's whole entry")
	assert.ErrorIs(t, errs[6], ErrInvalid)
	got, err = c.fdb(context.Background(), 4)
	require.NoError(t, err)
	assert.Len(t, got, 51)
	assert.Contains(t, got, entry(mac(0), 200))
	assert.NotContains(t, got, entry(mac(0), 0))
	assert.NotContains(t, got, entry(zero, 100))
	assert.Contains(t, got, entry(zero, 101))
	assert.Contains(t, got, entry(zero, 102))
	var oe *OpError
	require.ErrorAs(t, errs[4], &oe)
	assert.Equal(t, "kernel: delete fdb entry 02:00:00:00:00:46 dev 4 dst 192.0.2.77: no such file or directory", oe.Error())

	none, err := c.fdb(context.Background(), 9)
	require.NoError(t, err)
	assert.Empty(t, none)
	all, err := c.fdb(context.Background(), 0)
	require.NoError(t, err)
	assert.Len(t, all, 51)
	_, err = c.fdb(context.Background(), -1)
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestNeighborDumpRestartsInterruptedDumps(t *testing.T) {
	s := newNeighStore()
	s.honorFilter = true
	k := s.kernel()
	c := fakeConn(k)
	var ops []NeighborOp
	for i := range 30 {
		ops = append(ops, NeighborOp{Kind: OpReplace, Neighbor: neighbor(true, i, 3)})
	}
	for _, err := range c.applyNeighbors(context.Background(), ops) {
		require.NoError(t, err)
	}
	s.intr = 2
	got, err := c.neighbors(context.Background(), IPv4, 3)
	require.NoError(t, err)
	assert.Len(t, got, 30, "what the interrupted dumps returned was dropped")
	assert.Equal(t, 3, s.dumps)

	s.intr = 100
	_, err = c.neighbors(context.Background(), IPv4, 0)
	assert.ErrorIs(t, err, ErrDumpInterrupted)
	s.intr = 0
	_, err = c.fdb(context.Background(), 0)
	assert.NoError(t, err, "the conn still works")
}

func TestNeighborDumpBadArguments(t *testing.T) {
	c := fakeConn(newNeighStore().kernel())
	_, err := c.neighbors(context.Background(), 0, 0)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = c.neighbors(context.Background(), IPv4, -2)
	assert.ErrorIs(t, err, ErrInvalid)
	require.NoError(t, c.close())
	_, err = c.neighbors(context.Background(), IPv4, 0)
	assert.ErrorIs(t, err, ErrClosed)
	for _, err := range c.applyFDB(context.Background(), []FDBOp{{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 1, MAC: mac(1)}}}) {
		assert.ErrorIs(t, err, ErrClosed)
	}
}

func TestDecodeNeighRejectsMalformed(t *testing.T) {
	good := neighborCodec.encode(nil, 1, &NeighborOp{Kind: OpReplace, Neighbor: neighbor(true, 1, 3)})[hdrLen:]
	for name, payload := range map[string][]byte{
		"short header":           good[:ndmsgLen-1],
		"3-byte address":         append(append([]byte(nil), good[:ndmsgLen]...), 7, 0, unix.NDA_DST, 0, 1, 2, 3, 0),
		"attribute past the end": append(append([]byte(nil), good[:ndmsgLen]...), 40, 0, unix.NDA_DST, 0),
		"33-byte lladdr":         appendAttrBytes(append([]byte(nil), good[:ndmsgLen]...), unix.NDA_LLADDR, make([]byte, 33)),
		"empty NDA_PROTOCOL":     appendAttrBytes(append([]byte(nil), good[:ndmsgLen]...), ndaProtocol, nil),
	} {
		var m neighMsg
		assert.ErrorIs(t, decodeNeigh(payload, &m), ErrMalformed, name)
	}
	var m neighMsg
	require.NoError(t, decodeNeigh(good, &m))
	assert.Equal(t, neighMsg{family: unix.AF_INET, ifindex: 3, state: NUDPermanent, dst: genDst(true, 1).Addr(), lladdr: mac(1)}, m)
}

// FuzzDecodeNeigh feeds arbitrary bytes to the neighbour decoder and to
// the neighbour and FDB dumps: no input may panic or hang, and an
// accepted entry has a valid address of its family.
func FuzzDecodeNeigh(f *testing.F) {
	f.Add(neighborCodec.encode(nil, 1, &NeighborOp{Kind: OpReplace, Neighbor: neighbor(false, 1, 3)})[hdrLen:])
	f.Add(neighborCodec.encode(nil, 1, &NeighborOp{Kind: OpReplace, Neighbor: withProto(neighbor(false, 2, 3), 78)})[hdrLen:])
	f.Add(fdbCodec.encode(nil, 1, &FDBOp{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 2, MAC: mac(3), Dst: netip.MustParseAddr("10.0.0.1")}})[hdrLen:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var m neighMsg
		_ = decodeNeigh(payload, &m)
		msg := appendHeader(nil, unix.RTM_NEWNEIGH, unix.NLM_F_MULTI, 0)
		msg = finishMsg(append(msg, payload...), 0)
		k := &fakeKernel{onRequest: func(h header, _ []byte) [][]byte {
			d := bytes.Clone(msg)
			ne.PutUint32(d[8:], h.seq)
			return [][]byte{d, doneMsg(h.seq, 0, 0, "")}
		}}
		c := fakeConn(k)
		ns, err := c.neighbors(context.Background(), IPv6, 0)
		if err == nil {
			for _, n := range ns {
				if !n.IP.Is6() {
					t.Fatalf("IPv6 dump returned %v", n.IP)
				}
			}
		}
		fdb, err := c.fdb(context.Background(), 0)
		if err == nil {
			for _, e := range fdb {
				if len(e.MAC) != 6 {
					t.Fatalf("FDB entry with a MAC of %d bytes", len(e.MAC))
				}
			}
		}
		_ = fmt.Sprint(ns, fdb)
	})
}

func withProto(n Neighbor, proto uint8) Neighbor {
	n.Protocol = proto
	return n
}

// neighAttrs returns the attributes of a neighbour message payload by type.
func neighAttrs(t *testing.T, payload []byte) map[uint16][]byte {
	t.Helper()
	out := map[uint16][]byte{}
	for a := payload[ndmsgLen:]; len(a) > 0; {
		typ, v, rest, ok := nextAttr(a)
		require.True(t, ok)
		out[typ] = v
		a = rest
	}
	return out
}

// TestNeighborProtocolCodec checks NDA_PROTOCOL: written (one byte) with a
// set Protocol on a replace or an add, never on a delete nor with 0, and
// read back into Protocol.
func TestNeighborProtocolCodec(t *testing.T) {
	assert.Equal(t, netlink.NDA_PROTOCOL, ndaProtocol, "the netlink library's number")
	n := withProto(neighbor(true, 1, 3), 78)
	for _, kind := range []OpKind{OpReplace, OpAdd, OpDelete} {
		msg := neighborCodec.encode(nil, 1, &NeighborOp{Kind: kind, Neighbor: n})
		_, payload, _, ok := nextMessage(msg)
		require.True(t, ok)
		v, has := neighAttrs(t, payload)[ndaProtocol]
		if kind == OpDelete {
			assert.False(t, has, "a delete keys on the address")
			continue
		}
		assert.Equal(t, []byte{78}, v, "%v", kind)
		var m neighMsg
		require.NoError(t, decodeNeigh(payload, &m))
		assert.Equal(t, uint8(78), m.proto)
		got, err := netlink.NeighDeserialize(payload)
		require.NoError(t, err, "the netlink library still parses it")
		assert.Equal(t, n.MAC, got.HardwareAddr)
	}
	msg := neighborCodec.encode(nil, 1, &NeighborOp{Kind: OpReplace, Neighbor: neighbor(true, 1, 3)})
	_, payload, _, _ := nextMessage(msg)
	assert.NotContains(t, neighAttrs(t, payload), uint16(ndaProtocol), "no protocol: no attribute")
	var m neighMsg
	require.NoError(t, decodeNeigh(payload, &m))
	assert.Zero(t, m.proto)
	msg = fdbCodec.encode(nil, 1, &FDBOp{Kind: OpReplace, Entry: FDBEntry{LinkIndex: 2, MAC: mac(3), Dst: netip.MustParseAddr("10.0.0.1")}})
	_, payload, _, _ = nextMessage(msg)
	assert.NotContains(t, neighAttrs(t, payload), uint16(ndaProtocol))
}

// TestNeighborProtocolDump writes entries with and without a protocol and
// reads them back: the dump reports each one's, and a write without one
// keeps the entry's (as the kernel does).
func TestNeighborProtocolDump(t *testing.T) {
	s := newNeighStore()
	c := fakeConn(s.kernel())
	ops := []NeighborOp{
		{Kind: OpReplace, Neighbor: withProto(neighbor(true, 1, 3), 78)},
		{Kind: OpReplace, Neighbor: neighbor(true, 2, 3)},
		{Kind: OpReplace, Neighbor: withProto(neighbor(true, 3, 3), 4)},
		{Kind: OpReplace, Neighbor: withProto(neighbor(false, 1, 3), 78)},
	}
	for i, err := range c.applyNeighbors(context.Background(), ops) {
		require.NoError(t, err, "op %d", i)
	}
	perm := func(n Neighbor) Neighbor { n.State = NUDPermanent; return n }
	got, err := c.neighbors(context.Background(), IPv4, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, []Neighbor{perm(ops[0].Neighbor), perm(ops[1].Neighbor), perm(ops[2].Neighbor)}, got)
	got, err = c.neighbors(context.Background(), IPv6, 3)
	require.NoError(t, err)
	assert.Equal(t, []Neighbor{perm(ops[3].Neighbor)}, got)

	moved := neighbor(true, 1, 3)
	moved.MAC = mac(99)
	require.NoError(t, c.applyNeighbors(context.Background(), []NeighborOp{{Kind: OpReplace, Neighbor: moved}})[0])
	got, err = c.neighbors(context.Background(), IPv4, 3)
	require.NoError(t, err)
	assert.Contains(t, got, perm(withProto(moved, 78)), "a replace without a protocol keeps the entry's")
}
