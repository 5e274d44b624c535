package ipip_test

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
	"github.com/nodeplane/nodeplane/routetable"
)

var bg = context.Background()

// node returns node n's Node message: underlay 198.18.0.n (198.18.1.n when
// far), tunnel address 10.244.n.250.
func node(n int, far bool) cluster.Node {
	sub := byte(0)
	if far {
		sub = 1
	}
	return cluster.Node{Name: nodeName(n), UnderlayV4: netip.AddrFrom4([4]byte{198, 18, sub, byte(n)}), TunnelV4: netip.AddrFrom4([4]byte{10, 244, byte(n), 250})}
}

func nodeName(n int) string { return fmt.Sprintf("node%d", n) }

func block(n int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(n), 0}), 24)
}

// stack is the route table, the sets and an IPIP overlay on one namespace, driven
// pass by pass as a dataplane.Loop drives them.
type stack struct {
	t    testing.TB
	k    kernel.Kernel
	clk  *clock.Fake
	tbl  *routetable.Table
	sets *ipsets.IPSets
	m    *overlay.Manager
	opts overlay.Options
}

func newStack(t testing.TB, k kernel.Kernel, clk *clock.Fake, tune func(*overlay.Options)) *stack {
	t.Helper()
	s := &stack{t: t, k: k, clk: clk}
	var err error
	s.tbl, err = routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain, Clock: clk})
	require.NoError(t, err)
	s.sets, err = ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: k, Clock: clk})
	require.NoError(t, err)
	s.opts = overlay.Options{Family: routetable.IPv4, Encap: overlay.IPIP{}, NodeName: nodeName(1), Kernel: k, Routes: s.tbl, Sets: s.sets, Clock: clk}
	if tune != nil {
		tune(&s.opts)
	}
	s.m, err = overlay.New(s.opts)
	require.NoError(t, err)
	return s
}

func (s *stack) send(msgs ...any) {
	for _, m := range msgs {
		s.m.OnUpdate(m)
	}
}

// pass runs one apply pass: the manager, then the drivers phase by phase.
func (s *stack) pass() (time.Duration, error) {
	return overlaytest.Pass(bg, s.m, s.sets.Apply, overlaytest.DriverStep(s.m.Driver()), s.tbl.Apply, s.sets.ApplyDeletions)
}

// converge runs passes, moving the clock by each RetryAfter, until one
// succeeds with nothing to retry, and returns the last pass's error when
// passes keep failing (a device the kernel refuses), after some.
func (s *stack) converge() error {
	_, err := overlaytest.Converge(s.clk, 20, s.pass)
	return err
}

// routes renders the non-kernel IPv4 routes of the main table, sorted.
func routes(t testing.TB, k kernel.Kernel) []string {
	links, err := k.Links(bg)
	require.NoError(t, err)
	names := map[int]string{}
	for _, l := range links {
		names[l.Index] = l.Name
	}
	var out []string
	err = k.DumpRoutes(bg, kernel.IPv4, kernel.TableMain, func(r *kernel.Route) error {
		if r.Protocol == kernel.ProtoKernel || r.Type == kernel.RTNLocal || r.Type == kernel.RTNBroadcast {
			return nil
		}
		out = append(out, overlaytest.RouteLine(r, names))
		return nil
	}, func() { out = out[:0] })
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// fakeHost returns a fake namespace of this project's machines with ipip
// modelled as supported (Options.Kinds), and eth0 up with 198.18.0.1/24.
func fakeHost(t testing.TB, withIPIP bool) *kernelfake.Namespace {
	t.Helper()
	o := kernelfake.Options{Name: "node1"}
	if withIPIP {
		o.Kinds = append(kernelfake.DefaultKinds(), kernel.KindIPIP)
	}
	return overlaytest.FakeHost(t, o, netip.MustParsePrefix("198.18.0.1/24"))
}

func newClock() *clock.Fake { return clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

func netipFrom4(a [4]byte) netip.Addr { return netip.AddrFrom4(a) }
