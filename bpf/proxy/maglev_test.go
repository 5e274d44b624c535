package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
)

// mgBackends are n backends 10.0.<i/250>.<i%250+1>:8080.
func mgBackends(n int) []beVal {
	bs := make([]beVal, n)
	for i := range bs {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)})
		bs[i] = beVal{Addr: addr16(a), Port: port16(8080)}
	}
	return bs
}

// owners counts the slots per backend address and port.
func owners(table []beVal) map[[18]byte]int {
	n := map[[18]byte]int{}
	for _, b := range table {
		var k [18]byte
		copy(k[:], b.Addr[:])
		copy(k[16:], b.Port[:])
		n[k]++
	}
	return n
}

func stripFlags(table []beVal) []beVal {
	out := slices.Clone(table)
	for i := range out {
		out[i].Flags = 0
	}
	return out
}

// Two nodes that see the same backends, in another order and with other
// ones local, compute the same table; only the local flags differ, and
// they name each node's own backends.
func TestMaglevTableIsTheSameOnEveryNode(t *testing.T) {
	bs := mgBackends(7)
	nodeA := maglevTable(bs, 3, 251) // bs[0..2] are node A's
	rev := slices.Clone(bs)
	slices.Reverse(rev) // node B lists its own (bs[6], bs[5]) first
	nodeB := maglevTable(rev, 2, 251)
	require.Len(t, nodeA, 251)
	assert.Equal(t, stripFlags(nodeA), stripFlags(nodeB))
	for i := range nodeA {
		inA := slices.IndexFunc(bs[:3], func(b beVal) bool { return b.Addr == nodeA[i].Addr })
		inB := slices.IndexFunc(rev[:2], func(b beVal) bool { return b.Addr == nodeB[i].Addr })
		assert.Equal(t, inA >= 0, nodeA[i].Flags == beLocal, "slot %d on node A", i)
		assert.Equal(t, inB >= 0, nodeB[i].Flags == beLocal, "slot %d on node B", i)
	}
	assert.Nil(t, maglevTable(nil, 0, 251))
}

// Every backend gets about M/N slots.
func TestMaglevTableSpread(t *testing.T) {
	for _, c := range []struct{ n, m int }{{1, 251}, {3, 251}, {10, 1021}, {100, 16381}, {1000, 65521}} {
		t.Run(fmt.Sprintf("%d backends, %d slots", c.n, c.m), func(t *testing.T) {
			got := owners(maglevTable(mgBackends(c.n), 0, uint32(c.m)))
			require.Len(t, got, c.n, "every backend has slots")
			lo, hi := c.m, 0
			for _, k := range got {
				lo, hi = min(lo, k), max(hi, k)
			}
			t.Logf("slots per backend: %d to %d (ideal %.1f)", lo, hi, float64(c.m)/float64(c.n))
			// Maglev fills round-robin: no backend has more than one slot
			// above another.
			assert.LessOrEqual(t, hi-lo, 1)
		})
	}
}

// A backend that goes moves its own slots and few others: the clients of
// the remaining backends mostly keep them. One that comes takes about
// M/(N+1) slots.
func TestMaglevTableDisruption(t *testing.T) {
	const n, m = 10, 1021
	bs := mgBackends(n)
	before := maglevTable(bs, 0, m)
	gone := bs[4]
	after := maglevTable(slices.Delete(slices.Clone(bs), 4, 5), 0, m)
	moved, ownMoved := 0, 0
	for i := range before {
		switch {
		case before[i].Addr == gone.Addr:
			ownMoved++
		case before[i] != after[i]:
			moved++
		}
	}
	t.Logf("backend removed: its %d slots moved, and %d of the other %d (%.1f%%)", ownMoved, moved, m-ownMoved, 100*float64(moved)/float64(m-ownMoved))
	assert.Less(t, moved, m/n, "fewer slots of the remaining backends move than one backend holds")

	added := maglevTable(append(slices.Clone(bs), mgBackends(n + 1)[n]), 0, m)
	changed := 0
	for i := range before {
		if before[i] != added[i] {
			changed++
		}
	}
	t.Logf("backend added: %d slots changed (ideal %d)", changed, m/(n+1))
	assert.Less(t, changed, 2*m/(n+1))
}

func TestMaglevOptions(t *testing.T) {
	o, err := MaglevOptions{Enabled: true}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, MaglevOptions{Enabled: true, TableSize: DefaultMaglevTableSize, Entries: DefaultMaglevEntries}, o)
	for _, size := range []uint32{2, 250, 1000, 65537} {
		_, err := MaglevOptions{Enabled: true, TableSize: size}.withDefaults()
		assert.ErrorIs(t, err, ErrInvalidOptions, "size %d", size)
	}
	_, err = New(Options{Kernel: nil})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// The client hash depends on each of its inputs and spreads client ports
// evenly over the slots (that it is the program's own is checked with
// traffic: TestKernelProxyMaglev).
func TestMaglevHashSpread(t *testing.T) {
	a := addr16(netip.MustParseAddr("192.0.2.1"))
	h1 := maglevHash(a, port16(40000), 6)
	assert.NotEqual(t, h1, maglevHash(a, port16(40001), 6), "the port counts")
	assert.NotEqual(t, h1, maglevHash(a, port16(40000), 17), "the protocol counts")
	assert.NotEqual(t, h1, maglevHash(addr16(netip.MustParseAddr("192.0.2.2")), port16(40000), 6), "the address counts")
	// Spread over slots: 10,000 client ports fill a 251-slot table evenly.
	hits := make([]int, 251)
	for p := range 10000 {
		hits[maglevHash(a, port16(uint16(20000+p)), 6)%251]++
	}
	lo, hi := slices.Min(hits), slices.Max(hits)
	t.Logf("10,000 client ports over 251 slots: %d to %d per slot (ideal 39.8)", lo, hi)
	assert.Greater(t, lo, 10)
	assert.Less(t, hi, 80)
}

// A service with more backends than slots gets no table: some backends
// would get no slot at all.
func TestMaglevTablesNeedRoomForEveryBackend(t *testing.T) {
	p, err := New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", Maglev: MaglevOptions{Enabled: true, TableSize: 251}})
	require.NoError(t, err)
	var e entries
	e.backends[0], e.backends[1] = mgBackends(251), mgBackends(252)
	s := cluster.Service{NodePort: 30080}
	tables := p.maglevTables(s, e)
	assert.Len(t, tables[0], 251, "as many backends as slots")
	assert.Nil(t, tables[1], "one more backend than slots")
	s.NodePort = 0
	assert.Equal(t, [2][]beVal{}, p.maglevTables(s, e), "no frontend for outside clients")
	s.NodePort, s.ExternalTrafficLocal = 30080, true
	assert.Equal(t, [2][]beVal{}, p.maglevTables(s, e), "externalTrafficPolicy Local")
}

// A service's local-only backends take no slot: traffic from outside is
// spread over the others. (They come first, local ones after them.)
func TestMaglevTablesLeaveLocalOnlyBackendsOut(t *testing.T) {
	p, err := New(Options{Kernel: fakeDoer{}, PinDir: "/sys/fs/bpf/x", Maglev: MaglevOptions{Enabled: true, TableSize: 251}})
	require.NoError(t, err)
	s := cluster.Service{Name: "s", Port: 80, NodePort: 30080, InternalTrafficLocal: true, Backends: []cluster.Backend{
		{Addr: mustAP("10.244.1.7:80"), Local: true, LocalOnly: true},
		{Addr: mustAP("10.244.1.8:80"), Local: true},
		{Addr: mustAP("10.244.2.9:80")},
	}}
	require.NoError(t, s.Validate())
	table := p.maglevTables(s, build(s, nil))[0]
	require.Len(t, table, 251)
	seen := map[beVal]int{}
	for _, b := range table {
		seen[b]++
	}
	local, remote := be("10.244.1.8:80"), be("10.244.2.9:80")
	local.Flags = beLocal
	assert.Len(t, seen, 2, "%v", seen)
	assert.Positive(t, seen[local], "the local backend that serves all traffic, marked local")
	assert.Positive(t, seen[remote])
}
