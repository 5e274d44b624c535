//go:build linux

package proxy

import (
	"net/netip"
	"testing"
)

// BenchmarkKernelConntrackChurn runs the tc programs (BPF_PROG_TEST_RUN) on
// short TCP connections through one service, one per op: the client's SYN
// (np_ingress), the backend's SYN-ACK (np_egress), the client's RST,
// which closes the connection. An idle connection opened first, and
// answered, must keep its entries to the end, in a connection map of the
// default size (DefaultConnections): run with -benchtime 1000000x for a
// million connections, eight times the map's entries. It reports the
// entries left (entries, the idle pair alone when every closed connection
// left) and fails if the idle connection lost its entries or any other
// remains.
func BenchmarkKernelConntrackChurn(b *testing.B) {
	objs := testObjs(b)
	svc := testService{id: 7, fe: testAddrPort("10.96.0.1:80"), proto: testProtoTCP,
		backends: []netip.AddrPort{testAddrPort("10.1.0.1:8080")}, local: 1}
	testPutService(b, objs, svc)
	be := svc.backends[0]
	open := func(client netip.AddrPort) {
		testRun(b, objs.NpIngress, testPacket{src: client, dst: svc.fe, proto: testProtoTCP, tcpFlags: 0x02}.bytes(), 0)
		testRun(b, objs.NpEgress, testPacket{src: be, dst: client, proto: testProtoTCP, tcpFlags: 0x12}.bytes(), 0)
	}
	idle := testAddrPort("10.0.0.1:1000")
	open(idle)
	testRun(b, objs.NpIngress, testPacket{src: idle, dst: svc.fe, proto: testProtoTCP, tcpFlags: 0x10}.bytes(), 0)
	if _, ok := testCtGet(b, objs, idle, svc.fe, testProtoTCP); !ok {
		b.Fatal("the idle connection has no entry")
	}
	i := 0
	for b.Loop() {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(1 + i/60000), 2}), uint16(1024+i%60000))
		open(client)
		testRun(b, objs.NpIngress, testPacket{src: client, dst: svc.fe, proto: testProtoTCP, tcpFlags: testTCPRst}.bytes(), 0)
		i++
	}
	b.StopTimer()
	if _, ok := testCtGet(b, objs, idle, svc.fe, testProtoTCP); !ok {
		b.Fatalf("after %d short connections the idle connection lost its entry", i)
	}
	if _, ok := testCtGet(b, objs, be, idle, testProtoTCP); !ok {
		b.Fatalf("after %d short connections the idle connection lost its reverse entry", i)
	}
	entries := testCTEntries(b, objs)
	if entries != 2 {
		b.Fatalf("after %d short connections %d entries remain, want the idle pair alone", i, entries)
	}
	b.ReportMetric(float64(entries), "entries")
	b.ReportMetric(float64(i), "connections")
}
