package agent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// TestAgentWireGuardKeyPerFamily: with IPv6, the agent publishes the public
// keys of both its WireGuard devices, each the key of its family's device,
// and gives each device the other node's key of that family as its peer.
func TestAgentWireGuardKeyPerFamily(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{Name: "node1", Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	n := &fakeNode{t: t, k: k}
	n.veth("eth0", "eth0p", nil, netip.MustParsePrefix("198.18.0.1/24"), netip.MustParsePrefix("fd00:198:18::1/64"))
	var peers [2]wireguard.PublicKey
	for i := range peers {
		p, err := wireguard.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		peers[i] = p.Public()
	}
	c := datastore.Cluster{Nodes: []datastore.Node{
		{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), UnderlayIPv6: netip.MustParseAddr("fd00:198:18::1"),
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}},
		{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), UnderlayIPv6: netip.MustParseAddr("fd00:198:18::2"),
			PodCIDRs:           []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")},
			WireGuardPublicKey: peers[0].String(), WireGuardPublicKeyV6: peers[1].String()},
	}}
	ds := newPublishDatastore(c)
	cfg := Config{NodeName: "node1", Kernel: k, Listen: "-", StateDir: t.TempDir(), Netfilter: NetfilterIPTablesLegacy,
		IPv6: true, WireGuard: true, WireGuardInterface: DefaultWireGuardInterface, Datastore: ds}
	r := startAgent(t, cfg)
	var own [2]wireguard.PublicKey
	r.await(t, func() bool {
		for i, fam := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			d, err := k.Admin().WireGuardDevice(context.Background(), cfg.wgInterface(fam))
			if err != nil || len(d.Peers) != 1 || d.Peers[0].PublicKey != kernel.WireGuardKey(peers[i]) {
				return false
			}
			own[i] = wireguard.PublicKey(d.PublicKey)
		}
		return true
	})
	if own[0].IsZero() || own[0] == own[1] {
		t.Fatalf("the devices' keys: %v", own)
	}
	// The datastore keeps showing node1 without keys: each publication
	// carries what is pending, both keys once both managers reported.
	deadline := time.After(bound)
	for {
		select {
		case info := <-ds.calls:
			if info.WireGuardKey.IsZero() || info.WireGuardKeyV6.IsZero() {
				continue
			}
			if info.Name != "node1" || info.WireGuardKey != own[0] || info.WireGuardKeyV6 != own[1] {
				t.Fatalf("published %+v, want IPv4 key %v and IPv6 key %v", info, own[0], own[1])
			}
			return
		case <-deadline:
			t.Fatal("the two keys were never published together")
		}
	}
}
