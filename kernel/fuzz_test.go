//go:build linux

package kernel

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzDecodeRoute feeds arbitrary bytes to the route decoder: it must
// never panic, and whatever it accepts must be a well-formed Route that
// encodes and decodes to itself.
func FuzzDecodeRoute(f *testing.F) {
	for _, tc := range codecCases() {
		f.Add(appendRouteMsg(nil, OpReplace, 1, &tc.r)[hdrLen:])
		f.Add(nlEncode(&tc.r))
	}
	f.Add([]byte{})
	f.Add(make([]byte, rtmsgLen))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var r Route
		ok, err := decodeRoute(payload, &r)
		if err != nil || !ok {
			return
		}
		if !r.Dst.IsValid() || r.Dst.Masked() != r.Dst {
			t.Fatalf("decoded invalid destination %v", r.Dst)
		}
		if r.Dst.Addr().Is4() != (r.Family == IPv4) {
			t.Fatalf("destination %v in family %d", r.Dst, r.Family)
		}
		// Encoding what was decoded never panics either.
		_ = appendRouteMsg(nil, OpDelete, 1, &r)
	})
}

// FuzzDumpDatagram feeds an arbitrary datagram to a dump (and the same
// bytes to an ack drain): no input may panic or hang.
func FuzzDumpDatagram(f *testing.F) {
	r := Route{Family: IPv4, Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3}
	f.Add(append(routeMsg(1, 0, &r), doneMsg(1, 0, 0, "")...), false)
	f.Add(doneMsg(1, unix.NLM_F_DUMP_INTR, 0, ""), true)
	f.Add(ackMsg(1, -int32(unix.ENODEV), "nope"), false)
	f.Add(uncappedAck(appendRouteMsg(nil, OpAdd, 1, &r), -1, "x"), false)
	f.Fuzz(func(t *testing.T, datagram []byte, patchSeq bool) {
		patch := func(seq uint32) []byte {
			d := append([]byte(nil), datagram...)
			if patchSeq && len(d) >= hdrLen {
				ne.PutUint32(d[8:], seq)
			}
			return d
		}
		k := &fakeKernel{onRequest: func(h header, _ []byte) [][]byte {
			return [][]byte{patch(h.seq), doneMsg(h.seq, 0, 0, "")}
		}}
		c := fakeConn(k)
		_ = c.dumpRoutes(context.Background(), IPv4, 0, 0, func(*Route) error { return nil }, func() {})
		k.onRequest = func(h header, _ []byte) [][]byte { return [][]byte{patch(h.seq), ackMsg(h.seq, 0, "")} }
		errs := c.applyRoutes(context.Background(), []RouteOp{{Kind: OpReplace, Route: r}})
		if len(errs) != 1 {
			t.Fatalf("%d errors for one op", len(errs))
		}
	})
}
