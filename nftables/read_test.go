//go:build linux

package nftables_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/nftables"
)

// resizingKernel is a fake namespace whose dumps of set elements go wrong
// as the kernel's do when it resizes a hash set's table during the dump
// (each part resumes the walk by skipping as many elements as were sent,
// in an order the resize changed): the next `dumps` element dumps send
// their first part twice, in place of the second, so that its elements
// come twice and those of the second not at all.
type resizingKernel struct {
	*nftablesfake.Namespace
	dumps *int
}

func (k resizingKernel) OpenNFTablesSocket() (kernel.NFTablesSocket, error) {
	s, err := k.Namespace.OpenNFTablesSocket()
	return &resizingSocket{NFTablesSocket: s, dumps: k.dumps}, err
}

type resizingSocket struct {
	kernel.NFTablesSocket
	dumps *int
	// part counts the datagrams of the element dump being spoilt (0: none
	// is); first is its first one.
	part  int
	first []byte
}

func (s *resizingSocket) Send(b []byte) error {
	// A dump request of set elements: NFNL_SUBSYS_NFTABLES << 8 |
	// NFT_MSG_GETSETELEM, with NLM_F_DUMP.
	if len(b) >= 8 && *s.dumps > 0 && binary.NativeEndian.Uint16(b[4:]) == 10<<8|13 && binary.NativeEndian.Uint16(b[6:])&0x300 == 0x300 {
		*s.dumps--
		s.part = 1
	}
	return s.NFTablesSocket.Send(b)
}

func (s *resizingSocket) Receive(b []byte, block bool) (int, error) {
	n, err := s.NFTablesSocket.Receive(b, block)
	if err != nil || n == 0 || s.part == 0 {
		return n, err
	}
	switch s.part {
	case 1:
		s.first = append([]byte(nil), b[:n]...)
		s.part++
	case 2:
		s.part = 0
		n = copy(b, s.first)
	}
	return n, nil
}

// A dump of a set's elements that sends some twice, and so leaves as many
// out, is read again: a restarted Table finds every element it declares
// and writes nothing, and deletes every element it no longer declares.
func TestReadDumpRepeatingElementsReadAgain(t *testing.T) {
	ns := nftablesfake.New()
	const n = 5500 // a dump of several datagrams
	s := nftables.Set{Name: "many", Key: []nftables.KeyType{nftables.TypeAddr}}
	for i := range n {
		s.Elements = append(s.Elements, nftables.Elem(nftables.Addr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))))
	}
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetSets(s))
	apply(t, tbl)
	require.Len(t, ns.Elements(v4, "np", "many"), n)

	dumps := 0
	o := fakeOpts(resizingKernel{ns, &dumps})
	t.Run("same state", func(t *testing.T) {
		dumps = 1
		again := newTable(t, o)
		require.NoError(t, again.SetSets(s))
		apply(t, again)
		assert.Zero(t, dumps, "the dump was spoilt")
		assert.Zero(t, again.WorkStats().Transactions, "all there")
		assert.Equal(t, n, again.WorkStats().Elements)
	})
	t.Run("fewer elements", func(t *testing.T) {
		dumps = 1
		again := newTable(t, o)
		half := s
		half.Elements = nil
		for i := 0; i < n; i += 2 {
			half.Elements = append(half.Elements, s.Elements[i])
		}
		require.NoError(t, again.SetSets(half))
		apply(t, again)
		assert.Zero(t, dumps, "the dump was spoilt")
		assert.Equal(t, len(half.Elements), len(ns.Elements(v4, "np", "many")), "the others deleted")
	})
}
