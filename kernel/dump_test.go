//go:build linux

package kernel

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fillStore puts n IPv4 and n IPv6 routes into each of tables 100 and 300,
// plus one multipath route per family in table 100.
func fillStore(s *routeStore, n int) {
	for _, table := range []uint32{100, 300} {
		for _, isV4 := range []bool{true, false} {
			fam := IPv6
			if isV4 {
				fam = IPv4
			}
			for i := range n {
				r := Route{Family: fam, Table: table, Dst: genDst(isV4, i), Type: unix.RTN_UNICAST, Protocol: 80, OIF: int(table)}
				s.routes[keyOf(&r)] = r
			}
		}
	}
	mp4 := v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, NextHops: []NextHop{{OIF: 3, Gateway: v4Gw}, {OIF: 4, Gateway: v4Gw2, Weight: 2}}})
	mp6 := v6(Route{Table: 100, Dst: v6Dst, Type: unix.RTN_UNICAST, NextHops: []NextHop{{OIF: 3, Gateway: v6Gw}, {OIF: 4, Gateway: v6Gw2}}})
	s.routes[keyOf(&mp4)], s.routes[keyOf(&mp6)] = mp4, mp6
}

// collect dumps into a slice of copies, dropping them on reset.
func collect(c *conn, ctx context.Context, family Family, table uint32) ([]Route, int, error) {
	var out []Route
	resets := 0
	err := c.dumpRoutes(ctx, family, table, 0, func(r *Route) error {
		out = append(out, *r)
		return nil
	}, func() { out = out[:0]; resets++ })
	return out, resets, err
}

// expected returns the store's routes of family in table (0 = all).
func expected(s *routeStore, family Family, table uint32) map[routeKey]Route {
	out := map[routeKey]Route{}
	for k, r := range s.routes {
		if k.family == family && (table == 0 || k.table == table) {
			out[k] = r
		}
	}
	return out
}

func asMap(rs []Route) map[routeKey]Route {
	out := map[routeKey]Route{}
	for _, r := range rs {
		out[keyOf(&r)] = r
	}
	return out
}

func TestDumpRoutesFiltersByFamilyAndTable(t *testing.T) {
	for _, strict := range []bool{true, false} {
		for _, honor := range []bool{true, false} {
			for _, fam := range []Family{IPv4, IPv6} {
				for _, table := range []uint32{0, 100, 300} {
					s := newRouteStore()
					s.honorFilter = honor
					fillStore(s, 20)
					k := s.kernel()
					c := newConnOn(k, strict, true, 1<<20)
					got, resets, err := collect(c, context.Background(), fam, table)
					require.NoError(t, err)
					assert.Zero(t, resets)
					assert.Len(t, got, len(expected(s, fam, table)))
					assert.Equal(t, expected(s, fam, table), asMap(got), "strict %v, kernel filter %v, family %d, table %d", strict, honor, fam, table)

					// The request carries the table only when the kernel can filter.
					_, payload, _, ok := nextMessage(k.sends[0])
					require.True(t, ok)
					hasTable := len(payload) > rtmsgLen
					assert.Equal(t, strict && table != 0, hasTable)
					assert.Equal(t, uint8(fam.AF()), payload[0])
				}
			}
		}
	}
}

func TestDumpInterfaceRoutesFiltersByInterface(t *testing.T) {
	for _, strict := range []bool{true, false} {
		for _, honor := range []bool{true, false} {
			for _, oif := range []int{3, 4, 100, 7} {
				s := newRouteStore()
				s.honorFilter = honor
				fillStore(s, 5)
				k := s.kernel()
				c := newConnOn(k, strict, true, 1<<20)
				var got []Route
				err := c.dumpRoutes(context.Background(), IPv4, 0, oif, func(r *Route) error {
					got = append(got, *r)
					return nil
				}, func() { got = got[:0] })
				require.NoError(t, err)
				want := map[routeKey]Route{}
				for key, r := range expected(s, IPv4, 0) {
					if r.Uses(oif) {
						want[key] = r
					}
				}
				assert.Equal(t, want, asMap(got), "strict %v, kernel filter %v, oif %d", strict, honor, oif)
				switch oif {
				case 3, 4:
					assert.Len(t, got, 1, "the multipath route, through either next hop")
				case 100:
					assert.Len(t, got, 5)
				default:
					assert.Empty(t, got)
				}
				// The request carries the interface only when the kernel can filter.
				_, payload, _, ok := nextMessage(k.sends[0])
				require.True(t, ok)
				assert.Equal(t, strict, len(payload) > rtmsgLen)
			}
		}
	}
	c := newConnOn(newRouteStore().kernel(), true, true, 1<<20)
	err := c.dumpRoutes(context.Background(), IPv4, 0, -1, func(*Route) error { return nil }, nil)
	assert.ErrorIs(t, err, ErrInvalid, "interface index -1")
}

func TestDumpRoutesRestartsInterruptedDumps(t *testing.T) {
	s := newRouteStore()
	s.honorFilter = true // so that the interruption falls mid-table
	fillStore(s, 10)
	s.intr = 2
	c := fakeConn(s.kernel())
	seen := 0
	got, resets, err := collect(c, context.Background(), IPv4, 100)
	require.NoError(t, err)
	assert.Equal(t, 2, resets)
	assert.Equal(t, 3, s.dumps)
	assert.Equal(t, expected(s, IPv4, 100), asMap(got))
	assert.Len(t, got, len(expected(s, IPv4, 100)), "no duplicates after resets")

	// Without reset the dump still restarts; fn sees the routes before the
	// interruption twice.
	s.intr = 1
	err = c.dumpRoutes(context.Background(), IPv4, 100, 0, func(*Route) error { seen++; return nil }, nil)
	require.NoError(t, err)
	n := len(expected(s, IPv4, 100))
	assert.Equal(t, n+n/2, seen, "fn stops at the interrupted message")
}

func TestDumpRoutesGivesUpAfterAttempts(t *testing.T) {
	s := newRouteStore()
	fillStore(s, 5)
	s.intr = 1000
	c := fakeConn(s.kernel())
	_, resets, err := collect(c, context.Background(), IPv6, 0)
	assert.ErrorIs(t, err, ErrDumpInterrupted)
	assert.Equal(t, DumpAttempts, s.dumps)
	assert.Equal(t, DumpAttempts-1, resets)

	// The conn is still usable.
	s.intr = 0
	got, _, err := collect(c, context.Background(), IPv6, 0)
	require.NoError(t, err)
	assert.Equal(t, expected(s, IPv6, 0), asMap(got))
}

func TestDumpRoutesCallbackErrorThenNextCallIsClean(t *testing.T) {
	s := newRouteStore()
	fillStore(s, 30)
	k := s.kernel()
	c := fakeConn(k)
	stop := errors.New("enough")
	calls := 0
	err := c.dumpRoutes(context.Background(), IPv4, 0, 0, func(*Route) error {
		calls++
		if calls == 4 {
			return stop
		}
		return nil
	}, nil)
	assert.Same(t, stop, err, "fn's error is returned as is")
	assert.Equal(t, 4, calls)
	assert.NotEmpty(t, k.queue, "the rest of the dump is still queued")

	got, _, err := collect(c, context.Background(), IPv4, 300)
	require.NoError(t, err)
	assert.Equal(t, expected(s, IPv4, 300), asMap(got))

	// The same after an abandoned dump, for writes.
	_ = c.dumpRoutes(context.Background(), IPv4, 0, 0, func(*Route) error { return stop }, nil)
	for _, err := range c.applyRoutes(context.Background(), replaceOps(3, 500)) {
		assert.NoError(t, err)
	}
	assert.Empty(t, k.queue)
}

func TestDumpRoutesContextCancelledMidDump(t *testing.T) {
	s := newRouteStore()
	fillStore(s, 30)
	k := s.kernel()
	c := fakeConn(k)
	ctx, cancel := context.WithCancel(context.Background())
	err := c.dumpRoutes(ctx, IPv4, 0, 0, func(*Route) error { cancel(); return nil }, nil)
	assert.ErrorIs(t, err, context.Canceled)
	got, _, err := collect(c, context.Background(), IPv4, 0)
	require.NoError(t, err)
	assert.Equal(t, expected(s, IPv4, 0), asMap(got))
}

func TestDumpRoutesMissingTableIsEmpty(t *testing.T) {
	s := newRouteStore()
	s.honorFilter = true
	fillStore(s, 3)
	c := fakeConn(s.kernel())
	got, _, err := collect(c, context.Background(), IPv4, 12345)
	assert.NoError(t, err)
	assert.Empty(t, got)
}

func TestDumpRoutesKernelErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(seq uint32) [][]byte
		want  error
	}{
		{"request refused", func(seq uint32) [][]byte { return [][]byte{ackMsg(seq, -int32(unix.EPERM), "no")} }, unix.EPERM},
		{"done with error", func(seq uint32) [][]byte { return [][]byte{doneMsg(seq, 0, -int32(unix.EMSGSIZE), "")} }, unix.EMSGSIZE},
		{"ENOENT without a table filter", func(seq uint32) [][]byte { return [][]byte{doneMsg(seq, 0, -int32(unix.ENOENT), "")} }, unix.ENOENT},
		{"malformed route", func(seq uint32) [][]byte {
			m := routeMsg(seq, 0, &Route{Family: IPv4, Table: 1, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 1})
			m[hdrLen+1] = 40 // prefix length
			return [][]byte{m}
		}, ErrMalformed},
		{"truncated datagram", func(seq uint32) [][]byte { return [][]byte{make([]byte, recvBufLen+1)} }, ErrMalformed},
		{"silent kernel", func(uint32) [][]byte { return nil }, unix.ETIMEDOUT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &fakeKernel{onRequest: func(h header, _ []byte) [][]byte { return tc.reply(h.seq) }}
			_, _, err := collect(fakeConn(k), context.Background(), IPv4, 0)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

func TestDumpRoutesSkipsForeignMessages(t *testing.T) {
	r := v4(Route{Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3})
	cloned := r
	cloned.Dst, cloned.Flags = v4Host, unix.RTM_F_CLONED
	k := &fakeKernel{onRequest: func(h header, _ []byte) [][]byte {
		other := routeMsg(h.seq-1, 0, &r) // an earlier request's
		mpls := routeMsg(h.seq, 0, &r)
		mpls[hdrLen] = unix.AF_MPLS
		clonedMsg := routeMsg(h.seq, 0, &cloned)
		ne.PutUint32(clonedMsg[hdrLen+8:], unix.RTM_F_CLONED)
		noise := appendHeader(nil, unix.NLMSG_NOOP, 0, h.seq)
		return [][]byte{other, append(append(mpls, clonedMsg...), finish(noise)...), routeMsg(h.seq, 0, &r), doneMsg(h.seq, 0, 0, "")}
	}}
	got, _, err := collect(fakeConn(k), context.Background(), IPv4, 0)
	require.NoError(t, err)
	assert.Equal(t, []Route{r}, got)
}

func TestDumpRoutesBadArguments(t *testing.T) {
	fn := func(*Route) error { return nil }
	c := fakeConn(newRouteStore().kernel())
	assert.ErrorIs(t, c.dumpRoutes(context.Background(), 0, 0, 0, fn, nil), ErrInvalid)
	assert.ErrorIs(t, c.dumpRoutes(context.Background(), Family(9), 0, 0, fn, nil), ErrInvalid)
	assert.ErrorIs(t, c.dumpRoutes(context.Background(), IPv4, 0, 0, nil, nil), ErrInvalid)
	require.NoError(t, c.close())
	require.NoError(t, c.close(), "Close is idempotent")
	assert.ErrorIs(t, c.dumpRoutes(context.Background(), IPv4, 0, 0, fn, nil), ErrClosed)
}

func TestDumpRoutesAllocatesOnlyForMultipath(t *testing.T) {
	s := newRouteStore()
	for i := range 1000 {
		r := Route{Family: IPv6, Table: 100, Dst: genDst(false, i), Type: unix.RTN_UNICAST, OIF: 3, Gateway: v6Gw, Priority: 1024}
		s.routes[keyOf(&r)] = r
	}
	// Replay the same datagrams every dump, so the fake does not allocate.
	var replies [][]byte
	k := &fakeKernel{}
	k.onRequest = func(h header, p []byte) [][]byte {
		if replies == nil {
			replies = s.dump(h, p)
		}
		for _, d := range replies {
			for buf := d; len(buf) > 0; {
				_, _, rest, ok := nextMessage(buf)
				if !ok {
					break
				}
				ne.PutUint32(buf[8:], h.seq)
				buf = rest
			}
		}
		return replies
	}
	c := fakeConn(k)
	k.queue = make([][]byte, 0, 1024)
	n := 0
	fn := func(*Route) error { n++; return nil }
	allocs := testing.AllocsPerRun(20, func() {
		k.queue, k.sends = k.queue[:0], k.sends[:0]
		if err := c.dumpRoutes(context.Background(), IPv6, 100, 0, fn, nil); err != nil {
			t.Fatal(err)
		}
	})
	assert.Less(t, allocs, 10.0, "allocations per dump of 1000 routes")
	assert.Equal(t, 21*1000, n)
}
