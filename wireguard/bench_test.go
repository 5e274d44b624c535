package wireguard_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// BenchmarkPlanVsApply compares the device driver's Plan with its Apply
// on a 1000-node cluster on kernelfake, after a resync (the device read
// again, every peer compared, nothing to write) and with ten nodes whose
// endpoint moved (ten peer writes).
func BenchmarkPlanVsApply(b *testing.B) {
	const nodes = 1000
	m, peers := benchManager(b, nodes)
	ctx := context.Background()
	if _, err := m.Apply(ctx); err != nil {
		b.Fatal(err)
	}
	move := func(round int) {
		for i := range 10 {
			p := peers[(round*10+i)%nodes]
			a := p.Endpoint.Addr().As4()
			a[1] ^= 1 // 198.18 ↔ 198.19
			p.Endpoint = netip.AddrPortFrom(netip.AddrFrom4(a), 0)
			peers[(round*10+i)%nodes] = p
			send(m, p)
		}
	}
	b.Run("resync/plan", func(b *testing.B) {
		for b.Loop() {
			m.QueueResync()
			if _, err := m.Plan(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resync/apply", func(b *testing.B) {
		for b.Loop() {
			m.QueueResync()
			if _, err := m.Apply(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("10-changes/plan", func(b *testing.B) {
		move(0)
		for b.Loop() {
			if _, err := m.Plan(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := m.Apply(ctx); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("10-changes/apply", func(b *testing.B) {
		round := 1
		for b.Loop() {
			b.StopTimer()
			move(round)
			round++
			b.StartTimer()
			if _, err := m.Apply(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEndpointMove is one node's endpoint moving in a 5000-node
// cluster on kernelfake: a whole pass (the Manager's deferred work, the
// device, the table and the rule). Which prefixes hold an endpoint may
// change with it, so every prefix's fail-closed routes are decided again.
func BenchmarkEndpointMove(b *testing.B) {
	const nodes = 5000
	m, peers := benchManager(b, nodes)
	if _, err := pass(m); err != nil {
		b.Fatal(err)
	}
	round := 0
	for b.Loop() {
		p := &peers[round%nodes]
		a := p.Endpoint.Addr().As4()
		a[1] ^= 1 // 198.18 ↔ 198.19
		p.Endpoint = netip.AddrPortFrom(netip.AddrFrom4(a), 0)
		send(m, *p)
		if _, err := pass(m); err != nil {
			b.Fatal(err)
		}
		round++
	}
}

// benchManager is an IPv4 Manager on kernelfake that has been told of
// nodes peers, each with a key and one block; it closes with b.
func benchManager(b *testing.B, nodes int) (*wireguard.Manager, []testPeer) {
	b.Helper()
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	m, err := wireguard.New(wireguard.Options{Family: ipfamily.IPv4, Kernel: ns, FirewallMark: 0x100000, Table: 100,
		HostMTU: 1500, KeyFile: filepath.Join(b.TempDir(), "wg.key"), NodeName: "self"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	peers := make([]testPeer, nodes)
	for i := range peers {
		k, err := wireguard.GeneratePrivateKey()
		if err != nil {
			b.Fatal(err)
		}
		peers[i] = node(i+1, k.Public())
		send(m, peers[i])
	}
	return m, peers
}
