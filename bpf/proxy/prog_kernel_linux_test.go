package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// These tests run the service NAT program (c/nat.c) with BPF_PROG_TEST_RUN
// on packets built here, and check the packets it gives back. The map
// entries are written with the package's own types (layout.go), which
// TestKernelProgLayout holds to the program's BTF and
// TestLayoutMatchesHeader to c/nat.h.

// testSkBuff is struct __sk_buff as BPF_PROG_TEST_RUN takes and returns it:
// only len, pkt_type and mark are named, the rest must stay zero on input.
type testSkBuff struct {
	Len     uint32
	PktType uint32
	Mark    uint32
	Rest    [180]byte
}

const (
	testProtoTCP = 6
	testProtoUDP = 17

	testTCPSyn = 0x02
	testTCPRst = 0x04
	testTCPAck = 0x10

	testActUnspec   = ^uint32(0) // TC_ACT_UNSPEC (-1)
	testActShot     = 2          // TC_ACT_SHOT
	testActRedirect = 7          // TC_ACT_REDIRECT

	testMasqMark = 0x4000
)

// testObjs loads the program with masquerading on (mark and mask 0x4000).
func testObjs(t testing.TB) *natObjects { return testObjsWith(t, nil) }

// testObjsWith is testObjs with the load-time variables vars set too.
func testObjsWith(t testing.TB, vars map[string]uint32) *natObjects {
	t.Helper()
	kerneltest.RequireKernel(t)
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]uint32{"masq_mark": testMasqMark, "masq_mask": testMasqMark}
	maps.Copy(all, vars)
	for name, v := range all {
		vs, ok := spec.Variables[name]
		if !ok {
			t.Fatalf("no variable %s in the spec", name)
		}
		if err := vs.Set(v); err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
	}
	var objs natObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			t.Fatalf("load: %+v", verr)
		}
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

// testService is a frontend and its backends, the first local ones on this
// node.
type testService struct {
	id       uint32
	fe       netip.AddrPort
	proto    uint8
	backends []netip.AddrPort
	local    uint32
	flags    uint32
}

func (s testService) feKey() feKey {
	return feKey{Addr: s.fe.Addr().As16(), Port: port16(s.fe.Port()), Proto: s.proto}
}

func testPutService(t testing.TB, objs *natObjects, s testService) {
	t.Helper()
	val := feVal{SvcID: s.id, Count: uint32(len(s.backends)), LocalCount: s.local, Flags: s.flags}
	if err := objs.NpFe.Put(s.feKey(), val); err != nil {
		t.Fatal(err)
	}
	for i, be := range s.backends {
		k := beKey{SvcID: s.id, Ordinal: uint32(i)}
		v := beVal{Addr: be.Addr().As16(), Port: port16(be.Port())}
		if err := objs.NpBe.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// testPacket describes a packet to build.
type testPacket struct {
	src, dst     netip.AddrPort
	proto        uint8
	tcpFlags     uint8
	ipOptions    []byte // IPv4 options (a multiple of 4 bytes)
	zeroUDPCsum  bool
	fragOffset   uint16 // IPv4 fragment offset in 8-byte units
	moreFrags    bool   // IPv4: the more-fragments flag
	fragID       uint16 // IPv4 identification; 0: a fixed one
	v6NextHeader uint8  // IPv6 next header instead of proto (extension header test)
	payload      []byte
	seq, ack     uint32 // TCP sequence and acknowledgement numbers; 0: fixed ones
}

// testChecksum folds the one's complement sum of b into sum.
func testChecksum(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum
}

// testPseudoSum is the sum of the TCP/UDP pseudo header.
func testPseudoSum(src, dst netip.Addr, proto uint8, l4len int) uint32 {
	var sum uint32
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		sum = testChecksum(sum, s[:])
		sum = testChecksum(sum, d[:])
	} else {
		s, d := src.As16(), dst.As16()
		sum = testChecksum(sum, s[:])
		sum = testChecksum(sum, d[:])
	}
	sum += uint32(proto) + uint32(l4len)
	return testChecksum(sum, nil)
}

func (p testPacket) bytes() []byte {
	// The L4 header and payload.
	var l4 []byte
	switch p.proto {
	case testProtoTCP:
		l4 = make([]byte, 20)
		binary.BigEndian.PutUint16(l4[0:], p.src.Port())
		binary.BigEndian.PutUint16(l4[2:], p.dst.Port())
		seq, ack := p.seq, p.ack
		if seq == 0 {
			seq = 0x01020304
		}
		if ack == 0 {
			ack = 0x0a0b0c0d
		}
		binary.BigEndian.PutUint32(l4[4:], seq)
		binary.BigEndian.PutUint32(l4[8:], ack)
		l4[12] = 5 << 4
		l4[13] = p.tcpFlags
		binary.BigEndian.PutUint16(l4[14:], 64240)
	case testProtoUDP:
		l4 = make([]byte, 8)
		binary.BigEndian.PutUint16(l4[0:], p.src.Port())
		binary.BigEndian.PutUint16(l4[2:], p.dst.Port())
		binary.BigEndian.PutUint16(l4[4:], uint16(8+len(p.payload)))
	default:
		l4 = []byte{8, 0, 0, 0, 0, 1, 0, 1} // an ICMP echo request header
	}
	l4 = append(l4, p.payload...)
	if p.proto == testProtoTCP || p.proto == testProtoUDP {
		csumOff := 16
		if p.proto == testProtoUDP {
			csumOff = 6
		}
		if !(p.proto == testProtoUDP && p.zeroUDPCsum) {
			sum := testChecksum(testPseudoSum(p.src.Addr(), p.dst.Addr(), p.proto, len(l4)), l4)
			c := ^uint16(sum)
			if c == 0 && p.proto == testProtoUDP {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(l4[csumOff:], c)
		}
	}

	pkt := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0, 0}
	if p.src.Addr().Is4() {
		binary.BigEndian.PutUint16(pkt[12:], 0x0800)
		hl := 20 + len(p.ipOptions)
		ip := make([]byte, hl)
		ip[0] = 0x40 | byte(hl/4)
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+len(l4)))
		id, flags := p.fragID, uint16(0)
		if id == 0 {
			id = 0x1234
		}
		if p.moreFrags {
			flags = 0x2000
		}
		binary.BigEndian.PutUint16(ip[4:], id)
		binary.BigEndian.PutUint16(ip[6:], flags|p.fragOffset&0x1fff)
		ip[8] = 64
		ip[9] = p.proto
		s, d := p.src.Addr().As4(), p.dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		copy(ip[20:], p.ipOptions)
		binary.BigEndian.PutUint16(ip[10:], ^uint16(testChecksum(0, ip)))
		pkt = append(pkt, ip...)
	} else {
		binary.BigEndian.PutUint16(pkt[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(l4)))
		ip[6] = p.proto
		if p.v6NextHeader != 0 {
			ip[6] = p.v6NextHeader
		}
		ip[7] = 64
		s, d := p.src.Addr().As16(), p.dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		pkt = append(pkt, ip...)
	}
	return append(pkt, l4...)
}

// testParsed is what testParse read from a packet the program gave back.
type testParsed struct {
	src, dst netip.AddrPort
	proto    uint8
	l4Csum   uint16
}

// testParse reads a TCP or UDP packet and fails the test unless its IPv4
// header checksum and its TCP/UDP checksum are valid (a zero IPv4 UDP
// checksum is accepted: it means none).
func testParse(t testing.TB, pkt []byte) testParsed {
	t.Helper()
	if len(pkt) < 14 {
		t.Fatalf("packet of %d bytes", len(pkt))
	}
	var (
		src, dst netip.Addr
		proto    uint8
		l4       []byte
	)
	switch binary.BigEndian.Uint16(pkt[12:]) {
	case 0x0800:
		ip := pkt[14:]
		hl := int(ip[0]&0xf) * 4
		if c := testChecksum(0, ip[:hl]); c != 0xffff {
			t.Fatalf("IPv4 header checksum invalid (sum %#x): % x", c, ip[:hl])
		}
		tot := int(binary.BigEndian.Uint16(ip[2:]))
		src = netip.AddrFrom4([4]byte(ip[12:16]))
		dst = netip.AddrFrom4([4]byte(ip[16:20]))
		proto = ip[9]
		l4 = ip[hl:tot]
	case 0x86dd:
		ip := pkt[14:]
		src = netip.AddrFrom16([16]byte(ip[8:24]))
		dst = netip.AddrFrom16([16]byte(ip[24:40]))
		proto = ip[6]
		l4 = ip[40 : 40+int(binary.BigEndian.Uint16(ip[4:]))]
	default:
		t.Fatalf("not IP: % x", pkt)
	}
	var csum uint16
	switch proto {
	case testProtoTCP:
		csum = binary.BigEndian.Uint16(l4[16:])
	case testProtoUDP:
		csum = binary.BigEndian.Uint16(l4[6:])
	default:
		t.Fatalf("protocol %d", proto)
	}
	if !(proto == testProtoUDP && src.Is4() && csum == 0) {
		if c := testChecksum(testPseudoSum(src, dst, proto, len(l4)), l4); c != 0xffff {
			t.Fatalf("L4 checksum %#04x invalid (sum %#x)", csum, c)
		}
	}
	return testParsed{
		src:    netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:])),
		dst:    netip.AddrPortFrom(dst, binary.BigEndian.Uint16(l4[2:])),
		proto:  proto,
		l4Csum: csum,
	}
}

// testRun runs prog on pkt with the skb mark set to mark, and returns the
// verdict, the packet and the mark after the run.
func testRun(t testing.TB, prog *ebpf.Program, pkt []byte, mark uint32) (uint32, []byte, uint32) {
	t.Helper()
	var ctxOut testSkBuff
	opts := ebpf.RunOptions{
		Data:       pkt,
		DataOut:    make([]byte, len(pkt)+256),
		Context:    testSkBuff{Mark: mark},
		ContextOut: &ctxOut,
	}
	ret, err := prog.Run(&opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return ret, opts.DataOut, ctxOut.Mark
}

// testRunHost runs np_ingress on pkt as a host interface's ingress: the
// interface of a test run (the namespace's loopback) is a host's in
// np_ifs for the run.
func testRunHost(t testing.TB, objs *natObjects, pkt []byte, mark uint32) (uint32, []byte, uint32) {
	t.Helper()
	const loopback = uint32(1)
	if err := objs.NpIfs.Put(loopback, ifHost); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := objs.NpIfs.Delete(loopback); err != nil {
			t.Fatal(err)
		}
	}()
	return testRun(t, objs.NpIngress, pkt, mark)
}

func testAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// testIndex is the index of ap in list, or -1.
func testIndex(list []netip.AddrPort, ap netip.AddrPort) int {
	for i, x := range list {
		if x == ap {
			return i
		}
	}
	return -1
}

// testCTEntries counts the entries of the connection map.
func testCTEntries(tb testing.TB, objs *natObjects) int {
	tb.Helper()
	n := 0
	var k ctKey
	var v ctVal
	it := objs.NpCt.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

func testCtGet(t testing.TB, objs *natObjects, src, dst netip.AddrPort, proto uint8) (ctVal, bool) {
	t.Helper()
	k := ctKey{
		Src: src.Addr().As16(), Dst: dst.Addr().As16(),
		Sport: port16(src.Port()), Dport: port16(dst.Port()), Proto: proto,
	}
	var v ctVal
	if err := objs.NpCt.Lookup(k, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return v, false
		}
		t.Fatal(err)
	}
	return v, true
}

func TestKernelProgLayout(t *testing.T) {
	kerneltest.RequireKernel(t)
	spec, err := loadNat()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		key, val uint32
		goKey    any
		goVal    any
	}{
		{"np_fe", 20, 20, feKey{}, feVal{}},
		{"np_be", 8, 20, beKey{}, beVal{}},
		{"np_ct", 40, 40, ctKey{}, ctVal{}},
		{"np_aff", 20, 32, affKey{}, affVal{}},
		{"np_src", 24, 1, srcKey{}, srcVal{}},
		{"np_maglev", 8, 20, mgKey{}, beVal{}},
	} {
		m, ok := spec.Maps[c.name]
		if !ok {
			t.Errorf("no map %s", c.name)
			continue
		}
		if m.KeySize != c.key || m.ValueSize != c.val {
			t.Errorf("%s: key/value %d/%d bytes, want %d/%d", c.name, m.KeySize, m.ValueSize, c.key, c.val)
		}
		if k, v := binary.Size(c.goKey), binary.Size(c.goVal); uint32(k) != c.key || uint32(v) != c.val {
			t.Errorf("%s: Go types %d/%d bytes, want %d/%d", c.name, k, v, c.key, c.val)
		}
	}
	if got := binary.Size(testSkBuff{}); got != 192 {
		t.Errorf("testSkBuff is %d bytes, want 192", got)
	}
	for _, name := range []string{"np_ingress", "np_egress"} {
		p, ok := spec.Programs[name]
		if !ok {
			t.Errorf("no program %s", name)
			continue
		}
		if p.Type != ebpf.SchedCLS {
			t.Errorf("%s: type %v, want SchedCLS", name, p.Type)
		}
	}
}

// testDNAT checks a service end to end on one family and protocol: spread
// over backends, a flow keeps its backend, replies get the frontend back.
func testDNAT(t *testing.T, client netip.Addr, svc testService) {
	objs := testObjs(t)
	testPutService(t, objs, svc)

	hits := make([]int, len(svc.backends))
	for sport := uint16(20000); sport < 20200; sport++ {
		cl := netip.AddrPortFrom(client, sport)
		in := testPacket{src: cl, dst: svc.fe, proto: svc.proto, tcpFlags: testTCPSyn, payload: []byte("hello")}
		ret, out, mark := testRun(t, objs.NpIngress, in.bytes(), 0)
		if ret != testActUnspec {
			t.Fatalf("ingress returned %d, want -1", int32(ret))
		}
		if mark != 0 {
			t.Fatalf("mark %#x set on a pod's packet", mark)
		}
		got := testParse(t, out)
		i := testIndex(svc.backends, got.dst)
		if i < 0 {
			t.Fatalf("destination %v is no backend of %v", got.dst, svc.backends)
		}
		if got.src != cl {
			t.Fatalf("source changed to %v", got.src)
		}
		hits[i]++

		// The forward and reverse entries.
		fwd, ok := testCtGet(t, objs, cl, svc.fe, svc.proto)
		if !ok || fwd.Flags != 0 || fwd.SvcID != svc.id || fwd.Ordinal != uint32(i) ||
			netip.AddrPortFrom(netip.AddrFrom16(fwd.Addr).Unmap(), binary.BigEndian.Uint16(fwd.Port[:])) != got.dst || fwd.LastSeen == 0 {
			t.Fatalf("forward entry %+v (found %v)", fwd, ok)
		}
		rev, ok := testCtGet(t, objs, got.dst, cl, svc.proto)
		if !ok || rev.Flags != ctReverse ||
			netip.AddrPortFrom(netip.AddrFrom16(rev.Addr).Unmap(), binary.BigEndian.Uint16(rev.Port[:])) != svc.fe {
			t.Fatalf("reverse entry %+v (found %v)", rev, ok)
		}

		// The next packets of the flow go to the same backend.
		for n := 0; n < 3; n++ {
			in2 := testPacket{src: cl, dst: svc.fe, proto: svc.proto, tcpFlags: testTCPAck, payload: []byte(fmt.Sprint("more data ", n))}
			ret, out, _ = testRun(t, objs.NpIngress, in2.bytes(), 0)
			if ret != testActUnspec {
				t.Fatalf("ingress returned %d on an established flow", int32(ret))
			}
			if again := testParse(t, out); again.dst != got.dst {
				t.Fatalf("established flow went to %v, first to %v", again.dst, got.dst)
			}
		}

		// The backend's reply leaves with the frontend as source.
		reply := testPacket{src: got.dst, dst: cl, proto: svc.proto, tcpFlags: testTCPSyn | testTCPAck, payload: []byte("world!")}
		ret, out, _ = testRun(t, objs.NpEgress, reply.bytes(), 0)
		if ret != testActUnspec {
			t.Fatalf("egress returned %d, want -1", int32(ret))
		}
		back := testParse(t, out)
		if back.src != svc.fe || back.dst != cl {
			t.Fatalf("reply %v -> %v, want %v -> %v", back.src, back.dst, svc.fe, cl)
		}
	}
	for i, n := range hits {
		if n == 0 {
			t.Errorf("backend %v never picked in 200 flows (hits %v)", svc.backends[i], hits)
		}
	}
	t.Logf("hits over 200 flows: %v", hits)
}

func TestKernelProgDNATIPv4TCP(t *testing.T) {
	testDNAT(t, netip.MustParseAddr("10.244.1.7"), testService{
		id: 7, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{
			testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.2.21:8080"),
			testAddrPort("10.244.3.22:9090"), testAddrPort("10.96.0.10:8443"), // same address, other port
		},
		local: 1,
	})
}

func TestKernelProgDNATIPv4UDP(t *testing.T) {
	testDNAT(t, netip.MustParseAddr("10.244.1.7"), testService{
		id: 8, fe: testAddrPort("10.96.0.53:53"), proto: testProtoUDP,
		backends: []netip.AddrPort{testAddrPort("10.244.1.30:53"), testAddrPort("10.244.2.31:5353")},
		local:    2,
	})
}

func TestKernelProgDNATIPv6TCP(t *testing.T) {
	testDNAT(t, netip.MustParseAddr("fd00:10:244:1::7"), testService{
		id: 9, fe: testAddrPort("[fd00:10:96::10]:443"), proto: testProtoTCP,
		backends: []netip.AddrPort{
			testAddrPort("[fd00:10:244:1::20]:8443"), testAddrPort("[fd00:10:244:2::21]:8443"),
			testAddrPort("[fd00:10:96::10]:443"), // the frontend itself: nothing to rewrite
		},
		local: 1,
	})
}

func TestKernelProgDNATIPv6UDP(t *testing.T) {
	testDNAT(t, netip.MustParseAddr("fd00:10:244:1::7"), testService{
		id: 10, fe: testAddrPort("[fd00:10:96::53]:53"), proto: testProtoUDP,
		backends: []netip.AddrPort{testAddrPort("[fd00:10:244:1::30]:53"), testAddrPort("[fd00:10:244:2::31]:5353")},
		local:    1,
	})
}

// testMACsSwapped fails the test unless out's Ethernet destination and
// source are in's source and destination.
func testMACsSwapped(t *testing.T, in, out []byte) {
	t.Helper()
	if string(out[0:6]) != string(in[6:12]) || string(out[6:12]) != string(in[0:6]) {
		t.Fatalf("MACs % x / % x, want % x / % x", out[0:6], out[6:12], in[6:12], in[0:6])
	}
}

// testHairpin checks a pod that is its service's only backend: its
// connection is translated on both ends and sent back out of the veth,
// in both directions and on every packet; np_egress leaves the redirected
// packets alone; another pod's connection is translated as usual.
func testHairpin(t *testing.T, pod, other netip.Addr, svc testService) {
	objs := testObjs(t)
	testPutService(t, objs, svc)
	be := svc.backends[0]
	cl := netip.AddrPortFrom(pod, 40123)
	feAsClient := netip.AddrPortFrom(svc.fe.Addr(), cl.Port()) // the source the server sees

	for i, flags := range []uint8{testTCPSyn, testTCPAck, testTCPAck} {
		in := testPacket{src: cl, dst: svc.fe, proto: svc.proto, tcpFlags: flags, payload: []byte(fmt.Sprint("request ", i))}.bytes()
		ret, out, mark := testRun(t, objs.NpIngress, in, 0)
		if ret != testActRedirect || mark != 0 {
			t.Fatalf("packet %d: ret %d mark %#x, want %d (redirect), no mark", i, int32(ret), mark, testActRedirect)
		}
		got := testParse(t, out)
		if got.src != feAsClient || got.dst != be {
			t.Fatalf("packet %d: %v -> %v, want %v -> %v", i, got.src, got.dst, feAsClient, be)
		}
		testMACsSwapped(t, in, out)
		// np_egress sees it on the veth's way out and leaves it.
		if ret, again, _ := testRun(t, objs.NpEgress, out, 0); ret != testActUnspec || string(again) != string(out) {
			t.Fatalf("packet %d: np_egress ret %d, changed %v", i, int32(ret), string(again) != string(out))
		}
	}

	fwd, ok := testCtGet(t, objs, cl, svc.fe, svc.proto)
	if !ok || fwd.Flags != ctHairpin || netip.AddrPortFrom(fromAddr16(fwd.Addr), fromPort16(fwd.Port)) != be {
		t.Fatalf("forward entry %+v (found %v)", fwd, ok)
	}
	rev, ok := testCtGet(t, objs, be, feAsClient, svc.proto)
	if !ok || rev.Flags != ctReverse|ctHairpin || netip.AddrPortFrom(fromAddr16(rev.Addr), fromPort16(rev.Port)) != svc.fe {
		t.Fatalf("hairpin reverse entry %+v (found %v)", rev, ok)
	}
	if _, ok := testCtGet(t, objs, be, cl, svc.proto); ok {
		t.Fatalf("a plain reverse entry %v -> %v was made", be, cl)
	}

	// The server's replies go back to the client from the frontend.
	for i, flags := range []uint8{testTCPSyn | testTCPAck, testTCPAck} {
		in := testPacket{src: be, dst: feAsClient, proto: svc.proto, tcpFlags: flags, payload: []byte(fmt.Sprint("reply ", i))}.bytes()
		ret, out, mark := testRun(t, objs.NpIngress, in, 0)
		if ret != testActRedirect || mark != 0 {
			t.Fatalf("reply %d: ret %d mark %#x, want %d (redirect)", i, int32(ret), mark, testActRedirect)
		}
		got := testParse(t, out)
		if got.src != svc.fe || got.dst != cl {
			t.Fatalf("reply %d: %v -> %v, want %v -> %v", i, got.src, got.dst, svc.fe, cl)
		}
		testMACsSwapped(t, in, out)
		if ret, again, _ := testRun(t, objs.NpEgress, out, 0); ret != testActUnspec || string(again) != string(out) {
			t.Fatalf("reply %d: np_egress ret %d, changed %v", i, int32(ret), string(again) != string(out))
		}
	}
	// The hairpin reverse entry is np_ingress's at a pod's interface alone:
	// np_egress and np_ingress at a host interface leave the server's reply
	// alone.
	reply := testPacket{src: be, dst: feAsClient, proto: svc.proto, tcpFlags: testTCPAck}.bytes()
	if ret, out, _ := testRun(t, objs.NpEgress, reply, 0); ret != testActUnspec || string(out) != string(reply) {
		t.Fatalf("np_egress on the server's reply: ret %d, changed %v", int32(ret), string(out) != string(reply))
	}
	if ret, out, _ := testRunHost(t, objs, reply, 0); ret != testActUnspec || string(out) != string(reply) {
		t.Fatalf("np_ingress (host) on the server's reply: ret %d, changed %v", int32(ret), string(out) != string(reply))
	}

	// Another pod reaches the same backend as before: plain DNAT.
	ocl := netip.AddrPortFrom(other, 40123)
	in := testPacket{src: ocl, dst: svc.fe, proto: svc.proto, tcpFlags: testTCPSyn}.bytes()
	ret, out, _ := testRun(t, objs.NpIngress, in, 0)
	got := testParse(t, out)
	if ret != testActUnspec || got.src != ocl || got.dst != be || string(out[:12]) != string(in[:12]) {
		t.Fatalf("other pod: ret %d %v -> %v, want -1 %v -> %v, MACs kept", int32(ret), got.src, got.dst, ocl, be)
	}
	if fwd, _ := testCtGet(t, objs, ocl, svc.fe, svc.proto); fwd.Flags != 0 {
		t.Fatalf("other pod: forward flags %#x", fwd.Flags)
	}
	if rev, _ := testCtGet(t, objs, be, ocl, svc.proto); rev.Flags != ctReverse {
		t.Fatalf("other pod: reverse flags %#x", rev.Flags)
	}
	ret, out, _ = testRun(t, objs.NpEgress, testPacket{src: be, dst: ocl, proto: svc.proto, tcpFlags: testTCPAck}.bytes(), 0)
	if got := testParse(t, out); ret != testActUnspec || got.src != svc.fe || got.dst != ocl {
		t.Fatalf("other pod's reply: ret %d %v -> %v", int32(ret), got.src, got.dst)
	}
}

// The client pod is the service's only backend (on the backend's
// address); another pod on the same node reaches it with plain DNAT.
func TestKernelProgHairpin(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fe, be, other string
		proto         uint8
	}{
		{"IPv4TCP", "10.96.0.10:80", "10.244.1.7:8080", "10.244.1.8", testProtoTCP},
		{"IPv4UDP", "10.96.0.53:53", "10.244.1.7:5353", "10.244.1.8", testProtoUDP},
		{"IPv6TCP", "[fd00:10:96::10]:443", "[fd00:10:244:1::7]:8443", "fd00:10:244:1::8", testProtoTCP},
		{"IPv6UDP", "[fd00:10:96::53]:53", "[fd00:10:244:1::7]:53", "fd00:10:244:1::8", testProtoUDP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := testAddrPort(tc.be)
			testHairpin(t, be.Addr(), netip.MustParseAddr(tc.other), testService{
				id: 11, fe: testAddrPort(tc.fe), proto: tc.proto, backends: []netip.AddrPort{be}, local: 1,
			})
		})
	}
}

// A pod that is one of several backends of its service is never its own:
// the program takes the next backend (plain DNAT, no hairpin), also when
// the next one is the pod again on another port, which then hairpins.
func TestKernelProgSkipsClientBackend(t *testing.T) {
	objs := testObjs(t)
	pod := netip.MustParseAddr("10.244.1.7")
	svc := testService{
		id: 5, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.1.7:8080"), testAddrPort("10.244.2.9:8080")}, local: 1,
	}
	testPutService(t, objs, svc)
	for sport := uint16(20000); sport < 20100; sport++ {
		cl := netip.AddrPortFrom(pod, sport)
		ret, out, _ := testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: svc.proto, tcpFlags: testTCPSyn}.bytes(), 0)
		got := testParse(t, out)
		if ret != testActUnspec || got.src != cl || got.dst != svc.backends[1] {
			t.Fatalf("port %d: ret %d %v -> %v, want -1 %v -> %v", sport, int32(ret), got.src, got.dst, cl, svc.backends[1])
		}
		if fwd, ok := testCtGet(t, objs, cl, svc.fe, svc.proto); !ok || fwd.Flags != 0 || fwd.Ordinal != 1 {
			t.Fatalf("port %d: forward entry %+v (found %v)", sport, fwd, ok)
		}
	}

	// Both backends are the pod (two ports): whichever is picked, the
	// connection hairpins.
	svc.id, svc.fe = 6, testAddrPort("10.96.0.11:80")
	svc.backends = []netip.AddrPort{testAddrPort("10.244.1.7:8080"), testAddrPort("10.244.1.7:8081")}
	testPutService(t, objs, svc)
	cl := netip.AddrPortFrom(pod, 30000)
	ret, out, _ := testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: svc.proto, tcpFlags: testTCPSyn}.bytes(), 0)
	got := testParse(t, out)
	if ret != testActRedirect || got.src != netip.AddrPortFrom(svc.fe.Addr(), cl.Port()) || testIndex(svc.backends, got.dst) < 0 {
		t.Fatalf("pod only: ret %d %v -> %v, want a hairpin to one of %v", int32(ret), got.src, got.dst, svc.backends)
	}
	if fwd, ok := testCtGet(t, objs, cl, svc.fe, svc.proto); !ok || fwd.Flags != ctHairpin {
		t.Fatalf("pod only: forward entry %+v (found %v)", fwd, ok)
	}
}

// A hairpinned IPv4 UDP datagram without a checksum keeps none.
func TestKernelProgHairpinUDPZeroChecksum(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 1, fe: testAddrPort("10.96.0.53:53"), proto: testProtoUDP,
		backends: []netip.AddrPort{testAddrPort("10.244.1.7:5353")}, local: 1,
	}
	testPutService(t, objs, svc)
	cl := testAddrPort("10.244.1.7:40000")
	ret, out, _ := testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: testProtoUDP, zeroUDPCsum: true, payload: []byte("query")}.bytes(), 0)
	got := testParse(t, out)
	if ret != testActRedirect || got.dst != svc.backends[0] || got.src != testAddrPort("10.96.0.53:40000") || got.l4Csum != 0 {
		t.Fatalf("ret %d %v -> %v checksum %#x", int32(ret), got.src, got.dst, got.l4Csum)
	}
	ret, out, _ = testRun(t, objs.NpIngress, testPacket{src: svc.backends[0], dst: got.src, proto: testProtoUDP, zeroUDPCsum: true, payload: []byte("answer")}.bytes(), 0)
	got = testParse(t, out)
	if ret != testActRedirect || got.src != svc.fe || got.dst != cl || got.l4Csum != 0 {
		t.Fatalf("reply: ret %d %v -> %v checksum %#x", int32(ret), got.src, got.dst, got.l4Csum)
	}
}

// A zero IPv4 UDP checksum (none) stays zero through DNAT and reverse NAT.
func TestKernelProgUDPZeroChecksum(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 1, fe: testAddrPort("10.96.0.53:53"), proto: testProtoUDP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.31:5353")},
	}
	testPutService(t, objs, svc)
	cl := testAddrPort("10.244.1.7:40000")
	in := testPacket{src: cl, dst: svc.fe, proto: testProtoUDP, zeroUDPCsum: true, payload: []byte("query")}
	ret, out, _ := testRun(t, objs.NpIngress, in.bytes(), 0)
	got := testParse(t, out)
	if ret != testActUnspec || got.dst != svc.backends[0] || got.l4Csum != 0 {
		t.Fatalf("ret %d dst %v checksum %#x, want -1 %v 0", int32(ret), got.dst, got.l4Csum, svc.backends[0])
	}
	reply := testPacket{src: svc.backends[0], dst: cl, proto: testProtoUDP, zeroUDPCsum: true, payload: []byte("answer")}
	ret, out, _ = testRun(t, objs.NpEgress, reply.bytes(), 0)
	got = testParse(t, out)
	if ret != testActUnspec || got.src != svc.fe || got.l4Csum != 0 {
		t.Fatalf("reply: ret %d src %v checksum %#x, want -1 %v 0", int32(ret), got.src, got.l4Csum, svc.fe)
	}
}

// IPv4 options: the TCP header is found after them.
func TestKernelProgIPv4Options(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 1, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.31:8080")},
	}
	testPutService(t, objs, svc)
	in := testPacket{
		src: testAddrPort("10.244.1.7:40000"), dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn,
		ipOptions: []byte{1, 1, 1, 0}, // NOP NOP NOP EOL
	}
	ret, out, _ := testRun(t, objs.NpIngress, in.bytes(), 0)
	if got := testParse(t, out); ret != testActUnspec || got.dst != svc.backends[0] {
		t.Fatalf("ret %d dst %v, want -1 %v", int32(ret), got.dst, svc.backends[0])
	}
}

// Packets the program does not handle pass byte for byte unchanged.
func TestKernelProgPassUnchanged(t *testing.T) {
	objs := testObjs(t)
	testPutService(t, objs, testService{
		id: 1, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.31:8080")},
	})
	testPutService(t, objs, testService{
		id: 2, fe: testAddrPort("[fd00:10:96::10]:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("[fd00:10:244:2::31]:8080")},
	})
	cl4, cl6 := testAddrPort("10.244.1.7:40000"), testAddrPort("[fd00:10:244:1::7]:40000")
	arp := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1}
	arp = append(arp, make([]byte, 20)...)
	cases := map[string][]byte{
		"not a service":               testPacket{src: cl4, dst: testAddrPort("10.244.2.31:8080"), proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes(),
		"service address, other port": testPacket{src: cl4, dst: testAddrPort("10.96.0.10:81"), proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes(),
		"service port, UDP":           testPacket{src: cl4, dst: testAddrPort("10.96.0.10:80"), proto: testProtoUDP}.bytes(),
		"ICMP":                        testPacket{src: cl4, dst: testAddrPort("10.96.0.10:80"), proto: 1}.bytes(),
		"non-first fragment":          testPacket{src: cl4, dst: testAddrPort("10.96.0.10:80"), proto: testProtoTCP, fragOffset: 185}.bytes(),
		"IPv6 not a service":          testPacket{src: cl6, dst: testAddrPort("[fd00:10:244:2::31]:8080"), proto: testProtoTCP}.bytes(),
		"IPv6 extension header":       testPacket{src: cl6, dst: testAddrPort("[fd00:10:96::10]:80"), proto: testProtoTCP, v6NextHeader: 60}.bytes(),
		"ARP":                         arp,
		// To the service, but cut inside the TCP header (before its flags):
		// neither way of reading it may run past the frame.
		"truncated TCP header":      testPacket{src: cl4, dst: testAddrPort("10.96.0.10:80"), proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes()[:14+20+10],
		"IPv6 truncated TCP header": testPacket{src: cl6, dst: testAddrPort("[fd00:10:96::10]:80"), proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes()[:14+40+10],
	}
	for name, pkt := range cases {
		for pname, run := range map[string]func([]byte, uint32) (uint32, []byte, uint32){
			"np_ingress (pod)":  func(pkt []byte, mark uint32) (uint32, []byte, uint32) { return testRun(t, objs.NpIngress, pkt, mark) },
			"np_ingress (host)": func(pkt []byte, mark uint32) (uint32, []byte, uint32) { return testRunHost(t, objs, pkt, mark) },
			"np_egress":         func(pkt []byte, mark uint32) (uint32, []byte, uint32) { return testRun(t, objs.NpEgress, pkt, mark) },
		} {
			ret, out, mark := run(pkt, 0)
			if ret != testActUnspec || string(out) != string(pkt) || mark != 0 {
				t.Errorf("%s, %s: ret %d mark %#x, packet changed %v", name, pname, int32(ret), mark, string(out) != string(pkt))
			}
		}
	}
	// The service's own packet does go through (the cases above are not
	// passed for want of a working program).
	ret, out, _ := testRun(t, objs.NpIngress, testPacket{src: cl4, dst: testAddrPort("10.96.0.10:80"), proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes(), 0)
	if got := testParse(t, out); ret != testActUnspec || got.dst != testAddrPort("10.244.2.31:8080") {
		t.Fatalf("service packet: ret %d dst %v", int32(ret), got.dst)
	}
}

// A frontend without backends drops; so does one whose backend entry is
// missing.
func TestKernelProgDrop(t *testing.T) {
	objs := testObjs(t)
	empty := testService{id: 1, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP}
	testPutService(t, objs, empty)
	broken := testService{id: 2, fe: testAddrPort("[fd00:10:96::11]:80"), proto: testProtoTCP}
	testPutService(t, objs, broken)
	if err := objs.NpFe.Put(broken.feKey(), feVal{SvcID: 2, Count: 1, LocalCount: 1}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		pkt  testPacket
	}{
		{"count 0", testPacket{src: testAddrPort("10.244.1.7:40000"), dst: empty.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}},
		{"backend missing", testPacket{src: testAddrPort("[fd00:10:244:1::7]:40000"), dst: broken.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}},
	} {
		if ret, _, _ := testRun(t, objs.NpIngress, c.pkt.bytes(), 0); ret != testActShot {
			t.Errorf("%s, pod: ret %d, want %d", c.name, int32(ret), testActShot)
		}
		if ret, _, _ := testRunHost(t, objs, c.pkt.bytes(), 0); ret != testActShot {
			t.Errorf("%s, host: ret %d, want %d", c.name, int32(ret), testActShot)
		}
	}
}

// externalTrafficPolicy Local: from a host interface only local backends,
// none means a drop; from a pod every backend.
func TestKernelProgExternalLocal(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 3, fe: testAddrPort("198.18.0.1:30080"), proto: testProtoTCP,
		backends: []netip.AddrPort{
			testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.1.21:8080"),
			testAddrPort("10.244.2.22:8080"), testAddrPort("10.244.3.23:8080"),
		},
		local: 0, flags: feExternalLocal,
	}
	testPutService(t, objs, svc)
	syn := func(sport uint16) []byte {
		return testPacket{src: netip.AddrPortFrom(netip.MustParseAddr("203.0.113.9"), sport), dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes()
	}
	if ret, _, _ := testRunHost(t, objs, syn(1000), 0); ret != testActShot {
		t.Fatalf("no local backend: ret %d, want drop", int32(ret))
	}

	svc.local = 2
	testPutService(t, objs, svc)
	hits := map[netip.AddrPort]int{}
	for sport := uint16(2000); sport < 2100; sport++ {
		ret, out, mark := testRunHost(t, objs, syn(sport), 0)
		got := testParse(t, out)
		if ret != testActUnspec || testIndex(svc.backends, got.dst) < 0 || testIndex(svc.backends, got.dst) >= 2 || mark != 0 {
			t.Fatalf("ret %d dst %v mark %#x: want a local backend, no mark", int32(ret), got.dst, mark)
		}
		hits[got.dst]++
	}
	if len(hits) != 2 {
		t.Errorf("local backends hit: %v, want both", hits)
	}

	// Pods use every backend all the same.
	hits = map[netip.AddrPort]int{}
	for sport := uint16(3000); sport < 3200; sport++ {
		ret, out, mark := testRun(t, objs.NpIngress, syn(sport), 0)
		got := testParse(t, out)
		if ret != testActUnspec || testIndex(svc.backends, got.dst) < 0 || mark != 0 {
			t.Fatalf("pod: ret %d dst %v mark %#x", int32(ret), got.dst, mark)
		}
		hits[got.dst]++
	}
	if len(hits) != len(svc.backends) {
		t.Errorf("pod: backends hit %v, want all %d", hits, len(svc.backends))
	}
}

// From a host interface, a connection sent to a remote backend gets the
// masquerade mark (other mark bits kept), on its first and later packets;
// one to a local backend does not.
func TestKernelProgMasqMark(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 4, fe: testAddrPort("198.18.0.1:30080"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.2.22:8080")},
		local:    1,
	}
	testPutService(t, objs, svc)
	const markIn = 0x10001
	seen := map[bool]int{}
	for sport := uint16(1000); sport < 1100; sport++ {
		cl := netip.AddrPortFrom(netip.MustParseAddr("203.0.113.9"), sport)
		for i, flags := range []uint8{testTCPSyn, testTCPAck, testTCPAck} {
			ret, out, mark := testRunHost(t, objs, testPacket{src: cl, dst: svc.fe, proto: testProtoTCP, tcpFlags: flags}.bytes(), markIn)
			got := testParse(t, out)
			remote := testIndex(svc.backends, got.dst) == 1
			want := uint32(markIn)
			if remote {
				want |= testMasqMark
			}
			if ret != testActUnspec || testIndex(svc.backends, got.dst) < 0 || mark != want {
				t.Fatalf("packet %d to %v: ret %d mark %#x, want -1 mark %#x", i, got.dst, int32(ret), mark, want)
			}
			if i == 0 {
				seen[remote]++
				fwd, _ := testCtGet(t, objs, cl, svc.fe, testProtoTCP)
				rev, _ := testCtGet(t, objs, got.dst, cl, testProtoTCP)
				wantFwd, wantRev := uint32(0), uint32(ctReverse)
				if remote {
					wantFwd |= ctMasq
					wantRev |= ctMasq
				}
				if fwd.Flags != wantFwd || rev.Flags != wantRev {
					t.Fatalf("to %v: ct flags %#x/%#x, want %#x/%#x", got.dst, fwd.Flags, rev.Flags, wantFwd, wantRev)
				}
			}
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("remote/local picks %v, want both", seen)
	}
}

// A backend removed from np_be: the connection it served moves to a
// backend still present. Here the last backend fills the hole, so a moved
// backend may be found before or after its old ordinal (the agent itself
// A backend removed from its service: a UDP flow to it picks another at
// its next packet (which then stays, and its replies are translated back);
// a TCP connection keeps it to the end (a terminating pod finishes what it
// serves, as with kube-proxy).
func TestKernelProgBackendRemoved(t *testing.T) {
	objs := testObjs(t)
	for _, proto := range []uint8{testProtoUDP, testProtoTCP} {
		svc := testService{
			id: 5, fe: testAddrPort("10.96.0.10:80"), proto: proto,
			backends: []netip.AddrPort{testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.2.21:8080"), testAddrPort("10.244.3.22:8080")},
		}
		for trial := 0; trial < 6; trial++ {
			testPutService(t, objs, svc)
			cl := netip.AddrPortFrom(netip.MustParseAddr("10.244.1.7"), uint16(5000+trial))
			pkt := func(flags uint8) []byte {
				return testPacket{src: cl, dst: svc.fe, proto: proto, tcpFlags: flags}.bytes()
			}
			_, out, _ := testRun(t, objs.NpIngress, pkt(testTCPSyn), 0)
			first := testParse(t, out).dst
			gone := testIndex(svc.backends, first)

			// Remove it: the last backend takes its ordinal, the count shrinks.
			left := append([]netip.AddrPort(nil), svc.backends...)
			last := len(left) - 1
			left[gone] = left[last]
			left = left[:last]
			if gone != last {
				v := beVal{Addr: left[gone].Addr().As16(), Port: port16(left[gone].Port())}
				if err := objs.NpBe.Put(beKey{SvcID: svc.id, Ordinal: uint32(gone)}, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := objs.NpBe.Delete(beKey{SvcID: svc.id, Ordinal: uint32(last)}); err != nil {
				t.Fatal(err)
			}
			if err := objs.NpFe.Put(svc.feKey(), feVal{SvcID: svc.id, Count: uint32(len(left))}); err != nil {
				t.Fatal(err)
			}

			ret, out, _ := testRun(t, objs.NpIngress, pkt(testTCPAck), 0)
			now := testParse(t, out).dst
			switch {
			case ret != testActUnspec:
				t.Fatalf("proto %d, after removing %v: ret %d", proto, first, int32(ret))
			case proto == testProtoUDP && testIndex(left, now) < 0:
				t.Fatalf("UDP after removing %v: dst %v, want one of %v", first, now, left)
			case proto == testProtoTCP && now != first:
				t.Fatalf("TCP after removing %v: dst %v, want it kept", first, now)
			}
			// And it stays there; the reply is translated back.
			_, out, _ = testRun(t, objs.NpIngress, pkt(testTCPAck), 0)
			if again := testParse(t, out).dst; again != now {
				t.Fatalf("proto %d: flow moved again: %v then %v", proto, now, again)
			}
			_, out, _ = testRun(t, objs.NpEgress, testPacket{src: now, dst: cl, proto: proto, tcpFlags: testTCPAck}.bytes(), 0)
			if back := testParse(t, out); back.src != svc.fe {
				t.Fatalf("proto %d: reply from %v leaves from %v, want %v", proto, now, back.src, svc.fe)
			}
		}
	}
}

// The agent numbers backends in order: removing the first moves the others
// down by one ordinal. TCP connections keep their backend whatever the
// service holds (the program does not look it up); UDP flows to the others
// keep theirs too (the program finds it at its new ordinal and records
// that), and those to the removed one pick another.
func TestKernelProgKnownBackendMoves(t *testing.T) {
	for _, proto := range []uint8{testProtoTCP, testProtoUDP} {
		t.Run(fmt.Sprint("proto ", proto), func(t *testing.T) {
			objs := testObjs(t)
			svc := testService{
				id: 7, fe: testAddrPort("10.96.0.10:80"), proto: proto,
				backends: []netip.AddrPort{testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.2.21:8080"), testAddrPort("10.244.3.22:8080")},
			}
			testPutService(t, objs, svc)
			pkt := func(cl netip.AddrPort, flags uint8) []byte {
				if proto == testProtoUDP {
					flags = 0
				}
				return testPacket{src: cl, dst: svc.fe, proto: proto, tcpFlags: flags}.bytes()
			}
			first := map[netip.AddrPort]netip.AddrPort{} // client -> backend
			hits := make([]int, len(svc.backends))
			for sport := uint16(7000); sport < 7060; sport++ {
				cl := netip.AddrPortFrom(netip.MustParseAddr("10.244.1.7"), sport)
				_, out, _ := testRun(t, objs.NpIngress, pkt(cl, testTCPSyn), 0)
				first[cl] = testParse(t, out).dst
				hits[testIndex(svc.backends, first[cl])]++
			}
			if hits[0] == 0 || hits[1] == 0 || hits[2] == 0 {
				t.Fatalf("60 connections left a backend unpicked: %v", hits)
			}

			left := svc.backends[1:]
			svc.backends = left
			testPutService(t, objs, svc) // ordinals 0 and 1 now hold the old 1 and 2
			if err := objs.NpBe.Delete(beKey{SvcID: svc.id, Ordinal: 2}); err != nil {
				t.Fatal(err)
			}
			for cl, was := range first {
				ret, out, _ := testRun(t, objs.NpIngress, pkt(cl, testTCPAck), 0)
				now := testParse(t, out).dst
				i := testIndex(left, was)
				switch {
				case ret != testActUnspec:
					t.Fatalf("%v (was %v): ret %d", cl, was, int32(ret))
				case proto == testProtoTCP || i >= 0:
					if now != was {
						t.Fatalf("%v (was %v): now %v", cl, was, now)
					}
				case testIndex(left, now) < 0:
					t.Fatalf("%v (was %v, removed): now %v, not one of %v", cl, was, now, left)
				}
				if proto == testProtoUDP && i >= 0 {
					if fwd, _ := testCtGet(t, objs, cl, svc.fe, proto); fwd.Ordinal != uint32(i) {
						t.Fatalf("%v to %v: forward entry ordinal %d, want %d", cl, now, fwd.Ordinal, i)
					}
				}
			}
		})
	}
}

// A bare SYN on a known tuple (a reused client port) picks anew, and the
// entry follows the new pick.
func TestKernelProgSynRepicks(t *testing.T) {
	objs := testObjs(t)
	svc := testService{
		id: 6, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.1.20:8080"), testAddrPort("10.244.2.21:8080")},
	}
	testPutService(t, objs, svc)
	cl := testAddrPort("10.244.1.7:6000")
	moved := false
	for i := 0; i < 64 && !moved; i++ {
		_, out, _ := testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes(), 0)
		a := testParse(t, out).dst
		_, out, _ = testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes(), 0)
		b := testParse(t, out).dst
		moved = a != b
		fwd, _ := testCtGet(t, objs, cl, svc.fe, testProtoTCP)
		if testIndex(svc.backends, b) != int(fwd.Ordinal) {
			t.Fatalf("forward entry ordinal %d, last pick %v", fwd.Ordinal, b)
		}
	}
	if !moved {
		t.Errorf("64 pairs of SYNs on one tuple always went to the same backend")
	}
}

// testSetCsumOffload turns a device's transmit (tx) or receive checksum
// offload on or off (testEthtoolSet). It must run inside the device's
// namespace.
func testSetCsumOffload(iface string, tx, on bool) error {
	const ethtoolSRXCSUM, ethtoolSTXCSUM = 0x15, 0x17
	if tx {
		return testEthtoolSet(iface, ethtoolSTXCSUM, on)
	}
	return testEthtoolSet(iface, ethtoolSRXCSUM, on)
}

// testEthtoolSet turns one of a device's features on or off with a legacy
// SIOCETHTOOL set command (cmd: ETHTOOL_SRXCSUM, ETHTOOL_SGRO …; no
// ethtool binary needed). It must run inside the device's namespace.
func testEthtoolSet(iface string, cmd uint32, on bool) error {
	value := struct{ Cmd, Data uint32 }{Cmd: cmd}
	if on {
		value.Data = 1
	}
	var ifr struct {
		Name [unix.IFNAMSIZ]byte
		Data unsafe.Pointer
		_    [16]byte
	}
	copy(ifr.Name[:], iface)
	ifr.Data = unsafe.Pointer(&value)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(&value)
	if errno != 0 {
		return fmt.Errorf("SIOCETHTOOL %#x on %s: %w", value.Cmd, iface, errno)
	}
	return nil
}

// Real TCP connections between two pods through a service, the programs
// attached with TCX to the pods' host veths. With the pods' transmit
// checksum offload on, the program sees CHECKSUM_PARTIAL skbs (the
// checksum field holds only the pseudo-header sum); with it off, complete
// checksums. Either way the host veths compute the final checksum on the
// way to a pod (their transmit offload is off) and the pods verify every
// checksum they receive (receive offload off), so a wrong fix-up loses the
// connection.
func TestKernelProgVethTraffic(t *testing.T) {
	for _, partial := range []bool{true, false} {
		name := "checksum_partial"
		if !partial {
			name = "checksum_complete_in_packet"
		}
		t.Run(name, func(t *testing.T) {
			objs := testObjs(t)
			tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2})
			host := tp.Hosts[0]
			client, server := host.Pods[0], host.Pods[1]

			for _, pod := range host.Pods {
				err := host.NS.Do(func() error {
					ifc, err := net.InterfaceByName(pod.HostVeth)
					if err != nil {
						return err
					}
					for _, a := range []struct {
						prog *ebpf.Program
						typ  ebpf.AttachType
					}{{objs.NpIngress, ebpf.AttachTCXIngress}, {objs.NpEgress, ebpf.AttachTCXEgress}} {
						l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: a.prog, Attach: a.typ})
						if err != nil {
							return fmt.Errorf("attach to %s: %w", pod.HostVeth, err)
						}
						t.Cleanup(func() { l.Close() })
					}
					return testSetCsumOffload(pod.HostVeth, true, false)
				})
				if err != nil {
					t.Fatal(err)
				}
				err = pod.NS.Do(func() error {
					if err := testSetCsumOffload(pod.Iface, false, false); err != nil {
						return err
					}
					return testSetCsumOffload(pod.Iface, true, partial)
				})
				if err != nil {
					t.Fatal(err)
				}
			}

			ln, _ := server.NS.ListenTCP(t, netip.AddrPort{})
			services := []testService{
				{id: 1, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
					backends: []netip.AddrPort{netip.AddrPortFrom(server.IPv4, ln.Port())}, local: 1},
				{id: 2, fe: testAddrPort("[fd00:10:96::10]:80"), proto: testProtoTCP,
					backends: []netip.AddrPort{netip.AddrPortFrom(server.IPv6, ln.Port())}, local: 1},
			}
			for _, svc := range services {
				testPutService(t, objs, svc)
				for i := 0; i < 3; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					err := client.NS.DialTCP(ctx, svc.fe)
					cancel()
					if err != nil {
						t.Fatalf("connection %d to %v (backend %v): %v", i, svc.fe, svc.backends[0], err)
					}
				}
			}

			// The connections did go through the program, and closed (both
			// sides closed their end): the programs removed their entries
			// at the acknowledgement of the second FIN and counted them in
			// np_stats. (Both sides close at once, so the entries go a
			// little after the dials return: read until they are gone.)
			fromServer := map[[16]byte]bool{server.IPv4.As16(): true, server.IPv6.As16(): true}
			count := func() (nrev, closed int) {
				var (
					k   ctKey
					v   ctVal
					per []uint64
				)
				for it := objs.NpCt.Iterate(); it.Next(&k, &v); {
					if v.Flags&ctReverse != 0 && fromServer[k.Src] {
						nrev++
					}
				}
				if err := objs.NpStats.Lookup(uint32(statClosed), &per); err != nil {
					t.Fatal(err)
				}
				for _, n := range per {
					closed += int(n)
				}
				return nrev, closed
			}
			var nrev, closed int
			deadline := time.Now().Add(5 * time.Second)
			for nrev, closed = count(); (nrev != 0 || closed != 6) && time.Now().Before(deadline); nrev, closed = count() {
				time.Sleep(20 * time.Millisecond)
			}
			if nrev != 0 || closed != 6 {
				t.Errorf("%d reverse entries from the server left and %d connections closed, want 0 and 6", nrev, closed)
			}
		})
	}
}

// BenchmarkKernelProgPackets measures what the programs cost each kind of
// packet of a TCP connection to the middle one of 10,000 services, by the
// kernel's own measurement of a run (one run per packet, so each figure
// includes the run's fixed cost, which not-ip reports: a frame the
// programs leave at its first check). In order, per connection: the
// client's SYN (a new connection: the frontend lookup, the backend's
// choice, both entries written), an acknowledgement with data (an entry
// found, the packet translated), the backend's reply at the ingress (its
// reverse entry found, the packet left for the egress) and at the egress
// (translated back), and the client's RST (both entries removed).
func BenchmarkKernelProgPackets(b *testing.B) {
	const services = 10000
	objs := testObjs(b)
	var target testService
	for i := 0; i < services; i++ {
		s := testService{
			id:    uint32(i + 1),
			fe:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 80),
			proto: testProtoTCP,
			backends: []netip.AddrPort{
				netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), 8080),
				netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), 8080),
			},
		}
		testPutService(b, objs, s)
		if i == services/2 {
			target = s
		}
	}
	notIP := make([]byte, 14+28)
	notIP[12], notIP[13] = 0x08, 0x06 // ARP
	kinds := []string{"not-ip", "syn", "ack", "reply-ingress", "reply-egress", "rst"}
	var total [6]time.Duration
	run := func(kind int, prog *ebpf.Program, pkt []byte) {
		ret, d, err := prog.Benchmark(pkt, 1, nil)
		if err != nil || ret != testActUnspec {
			b.Fatalf("%s: ret %d: %v", kinds[kind], int32(ret), err)
		}
		total[kind] += d
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A client port of its own per connection (the RST removed the
		// entries of the one before it on that port).
		cl := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 200, 7}), uint16(20000+i%40000))
		fwd := testPacket{src: cl, dst: target.fe, proto: testProtoTCP, tcpFlags: testTCPAck, payload: []byte{1}}
		run(0, objs.NpIngress, notIP)
		run(1, objs.NpIngress, testPacket{src: cl, dst: target.fe, proto: testProtoTCP, tcpFlags: testTCPSyn}.bytes())
		b.StopTimer()
		_, out, _ := testRun(b, objs.NpIngress, fwd.bytes(), 0) // which backend
		be := netip.AddrPortFrom(netip.AddrFrom4([4]byte(out[30:34])), uint16(out[36])<<8|uint16(out[37]))
		if testIndex(target.backends, be) < 0 {
			b.Fatalf("the connection's packet went to %v, none of the service's backends", be)
		}
		reply := testPacket{src: be, dst: cl, proto: testProtoTCP, tcpFlags: testTCPAck, payload: []byte{2}}.bytes()
		if i == 0 { // the reply is translated back at the egress
			_, back, _ := testRun(b, objs.NpEgress, reply, 0)
			if src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(back[26:30])), uint16(back[34])<<8|uint16(back[35])); src != target.fe {
				b.Fatalf("the reply leaves from %v, want the frontend %v", src, target.fe)
			}
		}
		b.StartTimer()
		run(2, objs.NpIngress, fwd.bytes())
		run(3, objs.NpIngress, reply)
		run(4, objs.NpEgress, reply)
		fwd.tcpFlags = testTCPRst | testTCPAck
		run(5, objs.NpIngress, fwd.bytes())
	}
	b.StopTimer()
	for i, k := range kinds {
		b.ReportMetric(float64(total[i].Nanoseconds())/float64(b.N), k+"-ns/packet")
	}
	if n := testCTEntries(b, objs); n != 0 {
		b.Fatalf("%d connection entries left after every connection's RST", n)
	}
}

// The programs remove a TCP connection's entries at the packet that
// acknowledges the second FIN (by acknowledgement number), or at a RST:
// a close where one side answers the other's FIN, a simultaneous close
// (each side acknowledges the other's FIN after sending its own: the
// entries stay for the last of those acknowledgements), a FIN that carries
// data (acknowledging the data alone is not acknowledging the FIN), and a
// reset.
func TestKernelProgTCPClose(t *testing.T) {
	svc := testService{id: 9, fe: testAddrPort("10.96.0.10:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.244.2.21:8080")}, local: 1}
	be := svc.backends[0]
	const (
		fin, ack, rst = 0x01, 0x10, 0x04
		c, s          = 1000, 5000 // the client's and the server's sequence numbers after the handshake
	)
	type step struct {
		fromClient bool
		flags      uint8
		seq, ack   uint32
		payload    int
		open       bool // the entries are still there after the packet
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"client closes, server answers", []step{
			{true, fin | ack, c, s, 0, true},
			{false, fin | ack, s, c + 1, 0, true},
			{true, ack, c + 1, s + 1, 0, false},
		}},
		{"server closes, client acknowledges then closes", []step{
			{false, fin | ack, s, c, 0, true},
			{true, ack, c, s + 1, 0, true},
			{true, fin | ack, c, s + 1, 0, true},
			{false, ack, s + 1, c + 1, 0, false},
		}},
		{"simultaneous close", []step{
			{true, fin | ack, c, s, 0, true},
			{false, fin | ack, s, c, 0, true},
			{true, ack, c + 1, s + 1, 0, true},
			{false, ack, s + 1, c + 1, 0, false},
		}},
		{"FIN with data", []step{
			{true, fin | ack, c, s, 10, true},
			{false, fin | ack, s, c + 10, 0, true},
			{true, ack, c + 11, s + 1, 0, true},
			{false, ack, s + 1, c + 11, 0, false},
		}},
		{"reset", []step{
			{true, rst | ack, c, s, 0, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := testObjs(t)
			testPutService(t, objs, svc)
			cl := testAddrPort("10.244.1.7:40000")
			if ret, _, _ := testRun(t, objs.NpIngress, testPacket{src: cl, dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPSyn, seq: c - 1}.bytes(), 0); ret != testActUnspec {
				t.Fatalf("SYN: ret %d", int32(ret))
			}
			for i, st := range tc.steps {
				pkt := testPacket{proto: testProtoTCP, tcpFlags: st.flags, seq: st.seq, ack: st.ack, payload: make([]byte, st.payload)}
				prog := objs.NpIngress
				if st.fromClient {
					pkt.src, pkt.dst = cl, svc.fe
				} else {
					pkt.src, pkt.dst, prog = be, cl, objs.NpEgress
				}
				if ret, _, _ := testRun(t, prog, pkt.bytes(), 0); ret != testActUnspec {
					t.Fatalf("step %d: ret %d", i, int32(ret))
				}
				_, fwd := testCtGet(t, objs, cl, svc.fe, testProtoTCP)
				_, rev := testCtGet(t, objs, be, cl, testProtoTCP)
				if fwd != st.open || rev != st.open {
					t.Fatalf("step %d: forward entry %v, reverse entry %v, want %v", i, fwd, rev, st.open)
				}
			}
			var per []uint64
			if err := objs.NpStats.Lookup(uint32(statClosed), &per); err != nil {
				t.Fatal(err)
			}
			closed := uint64(0)
			for _, n := range per {
				closed += n
			}
			if closed != 1 {
				t.Errorf("%d connections counted closed, want 1", closed)
			}
		})
	}
}
