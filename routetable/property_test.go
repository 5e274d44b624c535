package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// decl is one route a producer declares.
type decl struct {
	class  rt.RouteClass
	iface  string
	target rt.Target
}

// pick returns one of xs at random.
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// genTargets draws about n targets for env e (links np-a and np-b, numbers
// 1 and 2): every type, gateways on and off the links' subnets, onlink,
// multipath with weights, MTUs from 1 to MaxMTU, metrics up to 2^32-1,
// sources (the host's and others), destination MACs, prefixes of every
// length. Some are targets the Table refuses (an MTU above what the kernel
// stores, host bits, an unspecified gateway or source) and some are routes the kernel refuses
// (a gateway reachable on no link, a source that is not the host's): what
// matters is what both accept.
func genTargets(e *env, r *rand.Rand, n int) []decl {
	links := []string{"np-a", "np-b"}
	var out []decl
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0}
	for range n {
		iface := pick(r, "np-a", "np-b", rt.InterfaceNone)
		class := pick(r, rt.RouteClass(10), rt.RouteClass(20))
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(99)), byte(r.IntN(256)), byte(r.IntN(256))}),
			pick(r, 0, 8, 16, 24, 28, 32, 32))
		if r.IntN(10) > 0 {
			dst = dst.Masked() // else, most likely, host bits set: refused
		}
		tg := rt.Target{
			CIDR:   e.pfx(dst.String()),
			MTU:    pick[uint32](r, 0, 0, 0, 1, 68, 1280, 1500, 9000, rt.MaxMTU, rt.MaxMTU+1, 1<<32-1),
			Metric: pick[uint32](r, 0, 0, 1, 100, 1024, 4294967295),
		}
		link := 1 // the number of the route's link
		if iface == "np-b" {
			link = 2
		}
		gw := func(link int) netip.Addr {
			return pick(r, e.gw(link), e.gw(link), e.gw(link), e.ip(fmt.Sprintf("10.99.%d.%d", link, 3+r.IntN(250))),
				e.ip("10.200.0.1"), e.ip("0.0.0.0"))
		}
		if r.IntN(4) == 0 {
			tg.Src = pick(r, e.src(link), e.src(link), e.src(3-link), e.ip("10.201.0.1"), e.ip("0.0.0.0"))
		}
		if iface == rt.InterfaceNone {
			tg.Type = pick(r, rt.TargetBlackhole, rt.TargetUnreachable, rt.TargetProhibit, rt.TargetThrow, rt.TargetUnicast, rt.TargetUnicast)
			if tg.Type == rt.TargetUnicast {
				for i, l := range links[:1+r.IntN(2)] {
					h := rt.NextHop{Iface: l, Weight: uint8(r.IntN(256)), Onlink: r.IntN(4) == 0}
					if e.fam == rt.IPv6 || h.Onlink || r.IntN(3) > 0 {
						h.Gateway = gw(i + 1)
					}
					tg.NextHops = append(tg.NextHops, h)
				}
				if r.IntN(3) == 0 { // two paths through one link
					tg.NextHops = append(tg.NextHops, rt.NextHop{Iface: "np-a", Gateway: e.ip("10.99.1.9"), Weight: uint8(r.IntN(256))})
				}
			}
		} else {
			tg.Type = pick(r, rt.TargetUnicast, rt.TargetUnicast, rt.TargetOnlink, rt.TargetLocal)
			switch {
			case tg.Type == rt.TargetOnlink:
				tg.Gateway = pick(r, gw(link), e.ip("10.200.0.1"))
			case tg.Type == rt.TargetUnicast && r.IntN(2) == 0:
				tg.Gateway = gw(link)
			}
			if tg.CIDR.Bits() == e.fam.Bits() && r.IntN(5) == 0 {
				mac[5]++
				tg.DestMAC = slices.Clone(mac)
			}
		}
		out = append(out, decl{class: class, iface: iface, target: tg})
	}
	return out
}

// resyncWritesNothing declares generated targets on a Table of e (those
// it accepts), applies, and checks that a resync then writes nothing: what
// the Table wrote is what it reads back, in every attribute the kernel
// normalises. It returns how many routes the kernel holds.
func resyncWritesNothing(t *testing.T, e *env, seed uint64, n int) int {
	t.Helper()
	e.addLink(t, "np-a")
	e.addLink(t, "np-b")
	r := rand.New(rand.NewPCG(seed, 0))
	tbl := e.newTable(t, rt.Options{GracePeriod: -1})
	invalid := 0
	for _, d := range genTargets(e, r, n) {
		if err := tbl.RouteUpdate(d.class, d.iface, d.target); err != nil {
			require.ErrorIs(t, err, rt.ErrInvalidTarget)
			invalid++
		}
	}
	ctx := context.Background()
	_, err := tbl.Apply(ctx)
	var refused int
	if err != nil {
		require.ErrorIs(t, err, dataplane.ErrPartial, "seed %d", seed)
		var pe *dataplane.PartialError
		require.True(t, errors.As(err, &pe))
		refused = pe.Failed
		for _, e := range pe.Errs {
			t.Logf("refused: %v", e)
		}
	}
	written := tbl.Counters().InKernel
	t.Logf("seed %d: %d targets invalid, %d keys declared, %d routes written, %d refused by the kernel",
		seed, invalid, tbl.Counters().Declared, written, refused)

	e.kernel.resetCounts()
	tbl.QueueResync()
	_, err = tbl.Apply(ctx)
	if refused == 0 {
		require.NoError(t, err)
	}
	writes, _ := e.kernel.counts()
	assert.Zero(t, writes, "seed %d: a resync after Apply writes nothing: %v", seed, e.kernel.events())
	assert.Equal(t, written, tbl.Counters().InKernel, "seed %d", seed)
	return written
}

// TestResyncWritesNothing is the property that every target the Table
// accepts is stored by the fake as the Table reads it back, for many
// seeds: a resync right after Apply writes nothing.
func TestResyncWritesNothing(t *testing.T) {
	for _, fam := range []rt.Family{rt.IPv4, rt.IPv6} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				written := resyncWritesNothing(t, fakeEnv(t, fam, 1000), seed, 300)
				assert.Greater(t, written, 100)
			})
		}
	}
}
