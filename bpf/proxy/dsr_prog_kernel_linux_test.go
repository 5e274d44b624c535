//go:build linux

package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The DSR option on the wire, IPv4, on a packet that carries options of
// its own: the node in front puts its option first (the header grows by 8
// bytes, both checksums stay valid, the destination is the backend), and
// only on a connection's first packet; the backend's node reads it,
// whatever options follow, and gives the reply the frontend as its source.
func TestKernelProgDSROption(t *testing.T) {
	front := testObjsWith(t, map[string]uint32{"dsr_enabled": 1})
	back := testObjsWith(t, map[string]uint32{"dsr_enabled": 1})
	svc := testService{id: 3, fe: testAddrPort("192.0.2.1:30080"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.7:8080")}, flags: feNodePort | feDSR}
	testPutService(t, front, svc)
	client := testAddrPort("203.0.113.9:41000")
	nops := []byte{1, 1, 1, 1} // four NOP options of the client's
	syn := testPacket{src: client, dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn, ipOptions: nops}

	ret, out, mark := testRunHost(t, front, syn.bytes(), 0)
	require.Equal(t, testActUnspec, ret)
	assert.Zero(t, mark&testMasqMark, "not masqueraded")
	got := testParse(t, out) // checksums valid
	assert.Equal(t, client, got.src)
	assert.Equal(t, svc.backends[0], got.dst)
	ip := out[14:]
	require.Equal(t, byte(0x40|(20+8+4)/4), ip[0], "header of 20 + 8 (ours) + 4 (the client's) bytes")
	assert.Equal(t, []byte{0x9e, 8, 0x75, 0x80, 192, 0, 2, 1}, ip[20:28], "ours first: type, length, port 30080, 192.0.2.1")
	assert.Equal(t, nops, ip[28:32], "the client's options after ours")
	fwd, ok := testCtGet(t, front, client, svc.fe, testProtoTCP)
	require.True(t, ok)
	assert.NotZero(t, fwd.Flags&ctDSR)
	_, ok = testCtGet(t, front, svc.backends[0], client, testProtoTCP)
	assert.False(t, ok, "no reverse entry on the node in front")

	// The next packet goes without the option.
	ack := testPacket{src: client, dst: svc.fe, proto: testProtoTCP, tcpFlags: 0x10}
	_, out2, _ := testRunHost(t, front, ack.bytes(), 0)
	assert.Equal(t, byte(0x45), out2[14], "no option on a later packet")
	assert.Equal(t, svc.backends[0], testParse(t, out2).dst)

	// The backend's node: the option makes the pair, the reply leaves
	// from the frontend.
	ret, _, _ = testRunHost(t, back, out, 0)
	require.Equal(t, testActUnspec, ret)
	rev, ok := testCtGet(t, back, svc.backends[0], client, testProtoTCP)
	require.True(t, ok, "reverse entry from the option")
	assert.Equal(t, uint32(ctReverse|ctDSR), rev.Flags)
	reply := testPacket{src: svc.backends[0], dst: client, proto: testProtoTCP, tcpFlags: 0x12}
	_, out3, _ := testRun(t, back.NpEgress, reply.bytes(), 0)
	r := testParse(t, out3)
	assert.Equal(t, svc.fe, r.src, "the reply's source is the frontend")
	assert.Equal(t, client, r.dst)

	// An option of another type is not ours: the backend's node passes
	// the packet on untouched and remembers nothing.
	other := testObjsWith(t, map[string]uint32{"dsr_enabled": 1})
	foreign := testPacket{src: client, dst: svc.backends[0], proto: testProtoTCP, tcpFlags: testTCPSyn,
		ipOptions: []byte{0x94, 4, 0, 0}} // router alert
	in := foreign.bytes()
	ret, out4, _ := testRunHost(t, other, in, 0)
	require.Equal(t, testActUnspec, ret)
	assert.Equal(t, in, out4[:len(in)])
	var k ctKey
	var v ctVal
	assert.False(t, other.NpCt.Iterate().Next(&k, &v), "no entry for a foreign option")
}
