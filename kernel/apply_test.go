//go:build linux

package kernel

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// fakeConn returns a conn over k with strict dumps, capped acks and a
// large ack budget unless changed.
func fakeConn(k *fakeKernel) *conn { return newConnOn(k, true, true, 8<<20) }

func replaceOps(n int, table uint32) []RouteOp {
	ops := make([]RouteOp, n)
	for i := range ops {
		ops[i] = RouteOp{Kind: OpReplace, Route: Route{Family: IPv4, Table: table, Dst: genDst(true, i),
			Type: unix.RTN_UNICAST, Protocol: 80, Scope: unix.RT_SCOPE_LINK, OIF: 3}}
	}
	return ops
}

func TestApplyRoutesBatchesWithDistinctSequenceNumbers(t *testing.T) {
	for _, n := range []int{1, 10, 1000, 5000} {
		s := newRouteStore()
		k := s.kernel()
		c := fakeConn(k)
		errs := c.applyRoutes(context.Background(), replaceOps(n, 100))
		require.Len(t, errs, n)
		for i, err := range errs {
			require.NoError(t, err, "op %d", i)
		}
		assert.Len(t, s.routes, n)
		msgs := k.messages()
		require.Len(t, msgs, n)
		seen := map[uint32]bool{}
		for _, h := range msgs {
			assert.False(t, seen[h.seq], "sequence number %d reused", h.seq)
			seen[h.seq] = true
			assert.NotZero(t, h.flags&unix.NLM_F_ACK)
		}
		wantSends := (n*len(appendRouteMsg(nil, OpReplace, 1, &replaceOps(1, 100)[0].Route)) + batchBytes - 1) / batchBytes
		assert.LessOrEqual(t, len(k.sends), wantSends+1, "%d routes", n)
		for _, d := range k.sends {
			assert.LessOrEqual(t, len(d), batchBytes)
		}
	}
}

func TestApplyRoutesEmpty(t *testing.T) {
	k := newRouteStore().kernel()
	errs := fakeConn(k).applyRoutes(context.Background(), nil)
	assert.Empty(t, errs)
	assert.Empty(t, k.sends)
}

func TestApplyRoutesPerOpErrors(t *testing.T) {
	s := newRouteStore()
	s.failMsg = "kernel says no"
	k := s.kernel()
	c := fakeConn(k)
	ops := replaceOps(10, 100)
	s.fail[ops[2].Route.Dst] = unix.ENODEV
	s.fail[ops[5].Route.Dst] = unix.ENETUNREACH
	s.fail[ops[9].Route.Dst] = unix.ENETDOWN
	existing := ops[7].Route
	s.routes[keyOf(&existing)] = existing
	ops[7].Kind = OpAdd
	missing := ops[8].Route
	missing.Dst = netip.MustParsePrefix("10.200.0.0/16")
	ops[8] = RouteOp{Kind: OpDelete, Route: missing}

	errs := c.applyRoutes(context.Background(), ops)
	want := map[int]unix.Errno{2: unix.ENODEV, 5: unix.ENETUNREACH, 7: unix.EEXIST, 8: unix.ESRCH, 9: unix.ENETDOWN}
	for i, err := range errs {
		errno, bad := want[i]
		if !bad {
			assert.NoError(t, err, "op %d", i)
			assert.Contains(t, s.routes, keyOf(&ops[i].Route), "op %d", i)
			continue
		}
		require.Error(t, err, "op %d", i)
		assert.ErrorIs(t, err, errno, "op %d", i)
		var oe *OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, ops[i].Kind.String()+" route", oe.Op)
		assert.Equal(t, routeObject(&ops[i].Route), oe.Object)
		switch errno {
		case unix.EEXIST:
			assert.ErrorIs(t, err, ErrExists)
		case unix.ESRCH, unix.ENODEV:
			assert.ErrorIs(t, err, ErrNotFound)
		default:
			assert.NotErrorIs(t, err, ErrNotFound)
			assert.NotErrorIs(t, err, ErrExists)
		}
		if errno == unix.ENODEV || errno == unix.ENETUNREACH || errno == unix.ENETDOWN {
			assert.Equal(t, "kernel says no", oe.Message)
			assert.Contains(t, err.Error(), "kernel says no")
		}
	}
	assert.Len(t, k.sends, 1, "one batch")
}

func TestApplyRoutesInvalidOpsAreNotSent(t *testing.T) {
	good := Route{Family: IPv4, Table: 100, Dst: v4Dst, Type: unix.RTN_UNICAST, OIF: 3}
	with := func(f func(r *Route)) Route { r := good; f(&r); return r }
	tests := []struct {
		name string
		kind OpKind
		r    Route
	}{
		{"unknown kind", 0, good},
		{"kind out of range", 9, good},
		{"no family", OpReplace, with(func(r *Route) { r.Family = 0 })},
		{"family mismatch", OpReplace, with(func(r *Route) { r.Family = IPv6 })},
		{"invalid prefix", OpReplace, with(func(r *Route) { r.Dst = netip.Prefix{} })},
		{"host bits set", OpReplace, with(func(r *Route) { r.Dst = netip.MustParsePrefix("10.1.2.3/16") })},
		{"IPv4-mapped destination", OpReplace, with(func(r *Route) { r.Dst = netip.MustParsePrefix("::ffff:10.0.0.0/104") })},
		{"no type", OpReplace, with(func(r *Route) { r.Type = 0 })},
		{"unsupported type", OpAdd, with(func(r *Route) { r.Type = unix.RTN_MULTICAST })},
		{"unsupported type on delete", OpDelete, with(func(r *Route) { r.Type = unix.RTN_NAT })},
		{"negative OIF", OpReplace, with(func(r *Route) { r.OIF = -1 })},
		{"unicast without path", OpReplace, with(func(r *Route) { r.OIF = 0 })},
		{"blackhole with interface", OpReplace, with(func(r *Route) { r.Type = unix.RTN_BLACKHOLE })},
		{"unreachable with gateway", OpReplace, with(func(r *Route) { r.Type, r.OIF, r.Gateway = unix.RTN_UNREACHABLE, 0, v4Gw })},
		{"IPv4 gateway on IPv6 route", OpReplace, with(func(r *Route) { r.Family, r.Dst, r.Gateway = IPv6, v6Dst, v4Gw })},
		{"unspecified gateway", OpReplace, with(func(r *Route) { r.Gateway = netip.IPv4Unspecified() })},
		{"mapped gateway", OpReplace, with(func(r *Route) { r.Gateway = netip.MustParseAddr("::ffff:192.0.2.1") })},
		{"zoned gateway", OpReplace, with(func(r *Route) { r.Gateway = netip.MustParseAddr("fe80::1%eth0") })},
		{"prefsrc of other family", OpReplace, with(func(r *Route) { r.PrefSrc = v6Src })},
		{"multipath plus OIF", OpReplace, with(func(r *Route) { r.NextHops = []NextHop{{OIF: 3}, {OIF: 4}} })},
		{"next hop without path", OpReplace, with(func(r *Route) { r.OIF, r.NextHops = 0, []NextHop{{OIF: 3}, {}} })},
		{"next hop negative OIF", OpReplace, with(func(r *Route) { r.OIF, r.NextHops = 0, []NextHop{{OIF: 3}, {OIF: -4}} })},
		{"next hop bad gateway", OpReplace, with(func(r *Route) {
			r.Family, r.Dst, r.OIF, r.NextHops = IPv6, v6Dst, 0, []NextHop{{OIF: 3, Gateway: v4Gw}}
		})},
		{"too many next hops", OpReplace, with(func(r *Route) { r.OIF, r.NextHops = 0, make([]NextHop, MaxNextHops+1) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRouteStore()
			k := s.kernel()
			ops := []RouteOp{replaceOps(1, 100)[0], {Kind: tc.kind, Route: tc.r}, replaceOps(2, 100)[1]}
			errs := fakeConn(k).applyRoutes(context.Background(), ops)
			assert.NoError(t, errs[0])
			assert.ErrorIs(t, errs[1], ErrInvalid)
			assert.NoError(t, errs[2])
			assert.Len(t, k.messages(), 2, "only the valid ops are sent")
			if tc.kind != 0 && tc.kind != 9 {
				assert.ErrorIs(t, tc.r.check(tc.kind), ErrInvalid)
			}
		})
	}
}

func TestValidateAcceptsEveryShape(t *testing.T) {
	for _, tc := range codecCases() {
		assert.NoError(t, tc.r.Validate(), tc.name)
	}
	var nilRoute *Route
	assert.ErrorIs(t, nilRoute.Validate(), ErrInvalid)
	del := Route{Family: IPv6, Table: 100, Dst: v6Dst}
	assert.NoError(t, del.check(OpDelete), "a delete may leave the type and path out")
	assert.ErrorIs(t, del.Validate(), ErrInvalid)
}

func TestApplyRoutesAckWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		capAck bool
		budget int
	}{
		{"capped acks, small buffer", true, minAckBudget},
		{"echoed requests, small buffer", false, minAckBudget},
		{"capped acks, tiny buffer below the minimum", true, 100},
		{"capped acks, 1 MiB", true, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRouteStore()
			k := s.kernel()
			c := newConnOn(k, true, tc.capAck, tc.budget)
			errs := c.applyRoutes(context.Background(), replaceOps(3000, 100))
			for i, err := range errs {
				require.NoError(t, err, "op %d", i)
			}
			budget := max(tc.budget, minAckBudget)
			msgLen := len(appendRouteMsg(nil, OpReplace, 1, &replaceOps(1, 100)[0].Route))
			perAck := ackCost
			if !tc.capAck {
				perAck += msgLen
			}
			maxPerSend := min(budget/perAck, batchBytes/msgLen)
			total := 0
			for _, d := range k.sends {
				n := len(d) / msgLen
				total += n
				assert.LessOrEqual(t, n, maxPerSend)
			}
			assert.Equal(t, 3000, total)
			assert.Len(t, k.sends, (3000+maxPerSend-1)/maxPerSend, "batches are as full as the window allows")
		})
	}
}

func TestApplyRoutesLostAcks(t *testing.T) {
	s := newRouteStore()
	k := s.kernel()
	drop := map[int]bool{3: true, 4: true}
	sent := 0
	k.onRequest = func(h header, payload []byte) [][]byte {
		i := sent
		sent++
		replies := s.handle(h, payload)
		if drop[i] {
			return nil
		}
		return replies
	}
	k.recvErrs = []error{unix.ENOBUFS}
	c := newConnOn(k, true, true, minAckBudget) // 16 ops per batch
	ops := replaceOps(40, 100)
	errs := c.applyRoutes(context.Background(), ops)
	for i, err := range errs {
		if drop[i] {
			assert.ErrorIs(t, err, ErrAckLost, "op %d", i)
			assert.ErrorIs(t, err, unix.ENOBUFS, "op %d", i)
			continue
		}
		assert.NoError(t, err, "op %d", i)
	}
	assert.Len(t, k.sends, 3, "later batches still go out")
}

func TestApplyRoutesSilentKernel(t *testing.T) {
	k := &fakeKernel{} // never answers
	errs := fakeConn(k).applyRoutes(context.Background(), replaceOps(3, 100))
	for _, err := range errs {
		assert.ErrorIs(t, err, ErrAckLost)
		assert.ErrorIs(t, err, unix.ETIMEDOUT)
	}
	assert.Equal(t, maxIdlePolls, k.waits)
}

func TestApplyRoutesIgnoresStaleAndDuplicateAcks(t *testing.T) {
	s := newRouteStore()
	k := s.kernel()
	c := fakeConn(k)
	c.seq = 500
	k.queue = [][]byte{ackMsg(499, -int32(unix.EPERM), "stale"), ackMsg(400, 0, "")}
	inner := k.onRequest
	k.onRequest = func(h header, payload []byte) [][]byte {
		out := inner(h, payload)
		// A duplicate failure ack after the real one must not count.
		return append(out, ackMsg(h.seq, -int32(unix.EIO), ""), doneMsg(h.seq, 0, 0, ""))
	}
	for i, err := range c.applyRoutes(context.Background(), replaceOps(5, 100)) {
		assert.NoError(t, err, "op %d", i)
	}
	assert.Len(t, s.routes, 5)
}

func TestApplyRoutesSequenceWrap(t *testing.T) {
	s := newRouteStore()
	k := s.kernel()
	c := fakeConn(k)
	c.seq = maxSeqBeforeWrap + 10
	for i, err := range c.applyRoutes(context.Background(), replaceOps(50, 100)) {
		assert.NoError(t, err, "op %d", i)
	}
	for _, h := range k.messages() {
		assert.NotZero(t, h.seq)
		assert.LessOrEqual(t, h.seq, uint32(50))
	}
}

func TestApplyRoutesKeepsOrder(t *testing.T) {
	s := newRouteStore()
	k := s.kernel()
	r := replaceOps(1, 100)[0].Route
	s.routes[keyOf(&r)] = r
	changed := r
	changed.Protocol = 99
	errs := fakeConn(k).applyRoutes(context.Background(), []RouteOp{{Kind: OpDelete, Route: r}, {Kind: OpAdd, Route: changed}})
	assert.Equal(t, []error{nil, nil}, errs)
	assert.Equal(t, changed, s.routes[keyOf(&r)])
}

func TestApplyRoutesUncappedAckMessage(t *testing.T) {
	k := &fakeKernel{}
	k.onRequest = func(h header, payload []byte) [][]byte {
		req := appendHeader(nil, unix.RTM_NEWROUTE, h.flags, h.seq)
		req = finish(append(req, payload...))
		return [][]byte{uncappedAck(req, -int32(unix.EINVAL), "Invalid prefix for given prefix length")}
	}
	c := newConnOn(k, true, false, 1<<20)
	errs := c.applyRoutes(context.Background(), replaceOps(2, 100))
	for _, err := range errs {
		var oe *OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, unix.EINVAL, oe.Err)
		assert.Equal(t, "Invalid prefix for given prefix length", oe.Message)
	}
}

func TestApplyRoutesFailures(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		prepare func(c *conn, k *fakeKernel)
		want    error
	}{
		{"cancelled context", canceled, nil, context.Canceled},
		{"closed", context.Background(), func(c *conn, _ *fakeKernel) { require.NoError(t, c.close()) }, ErrClosed},
		{"send fails", context.Background(), func(_ *conn, k *fakeKernel) { k.sendErr = unix.ENOBUFS }, unix.ENOBUFS},
		{"receive fails", context.Background(), func(_ *conn, k *fakeKernel) { k.recvErrs = []error{unix.EBADF} }, unix.EBADF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newRouteStore()
			k := s.kernel()
			c := fakeConn(k)
			if tc.prepare != nil {
				tc.prepare(c, k)
			}
			errs := c.applyRoutes(tc.ctx, replaceOps(3, 100))
			require.Len(t, errs, 3)
			for _, err := range errs {
				assert.ErrorIs(t, err, tc.want)
				var oe *OpError
				assert.ErrorAs(t, err, &oe)
			}
		})
	}
}

func TestApplyRoutesContextEndsBetweenBatches(t *testing.T) {
	s := newRouteStore()
	k := s.kernel()
	ctx, cancel := context.WithCancel(context.Background())
	inner := k.onRequest
	k.onRequest = func(h header, p []byte) [][]byte { cancel(); return inner(h, p) }
	c := newConnOn(k, true, true, minAckBudget)
	errs := c.applyRoutes(ctx, replaceOps(40, 100))
	for i, err := range errs {
		if i < 16 {
			assert.NoError(t, err, "op %d: the first batch was sent and acknowledged", i)
		} else {
			assert.ErrorIs(t, err, context.Canceled, "op %d", i)
		}
	}
	assert.Len(t, k.sends, 1)
}

func TestOpErrorFormat(t *testing.T) {
	r := Route{Table: 7, Dst: v4Dst}
	err := error(&OpError{Op: "delete route", Object: routeObject(&r), Err: classify(unix.ESRCH), Message: "No such route"})
	assert.Equal(t, "kernel: delete route 10.1.0.0/16 table 7: no such process (No such route)", err.Error())
	assert.True(t, errors.Is(err, unix.ESRCH))
	assert.True(t, errors.Is(err, ErrNotFound))
	assert.Equal(t, "OpKind(9)", OpKind(9).String())
	r.Table = 0
	assert.Equal(t, "10.1.0.0/16 table 254", routeObject(&r), "table 0 is the main table")
}

// A Namespace that was not opened never reaches any namespace.
func TestZeroNamespace(t *testing.T) {
	var ns Namespace
	_, err := ns.Links(context.Background())
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, ErrClosed)
	for _, err := range ns.ApplyRoutes(context.Background(), replaceOps(2, 100)) {
		assert.ErrorIs(t, err, ErrClosed)
	}
	assert.ErrorIs(t, ns.Do(func() error { return nil }), ErrClosed)
	_, err = ns.Runner().Run(context.Background(), nil, "true")
	assert.ErrorIs(t, err, ErrClosed)
	assert.Equal(t, -1, ns.FD())
	assert.NoError(t, ns.Close())
}
