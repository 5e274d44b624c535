package overlay_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
)

// foreignNameNS is what the test needs of a namespace, fake or real.
type foreignNameNS interface {
	overlay.Kernel
	routetable.Kernel
}

// checkForeignName: a veth of someone else holds the VXLAN device's name.
// The Driver leaves it alone and fails; the tunnel routes wait (a route
// through the veth would send the pods' traffic out of it unencapsulated),
// while the direct route and the blackhole of this node's block are
// written, and the veth is as it was.
func checkForeignName(t *testing.T, ns foreignNameNS) {
	ctx := context.Background()
	eth0, err := ns.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "uplink"}})
	require.NoError(t, err)
	uplink, err := ns.LinkByName(ctx, "uplink")
	require.NoError(t, err)
	foreign, err := ns.AddLink(ctx, kernel.Link{Name: "np-vxlan", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "np-other"}})
	require.NoError(t, err)
	other, err := ns.LinkByName(ctx, "np-other")
	require.NoError(t, err)
	for _, i := range []int{eth0.Index, uplink.Index, foreign.Index, other.Index} {
		require.NoError(t, ns.SetLinkUp(ctx, i, true))
	}
	require.NoError(t, ns.AddAddr(ctx, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("192.0.2.1/24")}))
	// A veth has a carrier a moment after both ends are up (on a busy
	// machine, a long moment): the direct route waits for it.
	require.Eventually(t, func() bool {
		for _, name := range []string{"eth0", "np-vxlan"} {
			if l, err := ns.LinkByName(ctx, name); err != nil || !l.Running {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the veths running")
	before, err := ns.LinkByName(ctx, "np-vxlan")
	require.NoError(t, err)

	tbl, err := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
	require.NoError(t, err)
	m, err := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
		Encap: overlay.VXLAN{}, CrossSubnet: true})
	require.NoError(t, err)
	for i, n := range []struct{ name, underlay string }{{"node-a", "192.0.2.1"}, {"node-b", "192.0.2.2"}, {"node-c", "198.51.100.3"}} {
		m.OnUpdate(cluster.Node{Name: n.name, UnderlayV4: netip.MustParseAddr(n.underlay),
			TunnelV4: netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), VXLANMACV4: cluster.MAC(net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)})})
		m.OnUpdate(cluster.Block{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), 0}), 24), Node: n.name})
	}
	for pass := range 2 { // the second pass sees the Driver's failure and the host as read again
		require.NoError(t, m.CompleteDeferredWork(ctx))
		_, err = m.Driver().Apply(ctx)
		require.ErrorIs(t, err, kernel.ErrExists, "pass %d", pass)
		assert.ErrorContains(t, err, "not ours")
		_, err = tbl.Apply(ctx)
		require.NoError(t, err, "pass %d", pass)
		m.OnLink(before, before.State()) // as a monitor would tell it
	}

	got := map[netip.Prefix]kernel.Route{}
	require.NoError(t, ns.DumpRoutes(ctx, kernel.IPv4, kernel.TableMain, func(r *kernel.Route) error {
		if r.Protocol == routetable.DefaultProtocol {
			got[r.Dst] = *r
		}
		return nil
	}, func() { clear(got) }))
	for dst, r := range got {
		assert.NotEqual(t, foreign.Index, r.OIF, "route %s goes through the foreign veth", dst)
	}
	assert.NotContains(t, got, netip.MustParsePrefix("10.244.3.0/24"), "node-c's block is behind the tunnel, which is not there")
	if assert.Contains(t, got, netip.MustParsePrefix("10.244.2.0/24")) {
		assert.Equal(t, eth0.Index, got[netip.MustParsePrefix("10.244.2.0/24")].OIF, "node-b is routed directly")
	}
	if assert.Contains(t, got, netip.MustParsePrefix("10.244.1.0/24")) {
		assert.Equal(t, kernel.RTNBlackhole, got[netip.MustParsePrefix("10.244.1.0/24")].Type)
	}
	after, err := ns.LinkByName(ctx, "np-vxlan")
	require.NoError(t, err)
	assert.Equal(t, before, after, "the foreign veth is untouched")
}

func TestForeignLinkHoldsDeviceName(t *testing.T) {
	checkForeignName(t, kernelfake.New(kernelfake.Options{}))
}

func TestKernelForeignLinkHoldsDeviceName(t *testing.T) {
	kerneltest.RequireKernel(t)
	checkForeignName(t, managertest.Open(t, kerneltest.NewNS(t)))
}
