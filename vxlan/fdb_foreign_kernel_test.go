package vxlan_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/vxlan"
)

// checkForeignFDB: FDB entries that are not permanent on the device (added
// by hand as static or dynamic ones, or learnt) are not the Driver's: a
// Driver restarted with the same declarations leaves them, and writes
// nothing; a permanent entry nobody declared is its own, and goes.
func checkForeignFDB(t *testing.T, k vxlan.DriverKernel) {
	ctx := context.Background()
	eth0, err := k.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "up0"}})
	require.NoError(t, err)
	up0, err := k.LinkByName(ctx, "up0")
	require.NoError(t, err)
	require.NoError(t, k.SetLinkUp(ctx, up0.Index, true))
	require.NoError(t, k.SetLinkUp(ctx, eth0.Index, true))
	require.NoError(t, k.AddAddr(ctx, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("192.0.2.1/24")}))

	declare := func() *vxlan.Driver {
		d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: vxlan.IPv4})
		require.NoError(t, err)
		require.NoError(t, d.SetDevice(&vxlan.Device{Local: netip.MustParseAddr("192.0.2.1"),
			MAC: net.HardwareAddr{2, 0xaa, 4, 0, 0, 1}, Address: netip.MustParseAddr("10.244.1.250")}))
		require.NoError(t, d.SetRemote("node2", vxlan.Remote{TunnelIP: netip.MustParseAddr("10.244.2.250"),
			MAC: net.HardwareAddr{2, 0xaa, 4, 0, 0, 2}, Underlay: netip.MustParseAddr("192.0.2.2")}))
		return d
	}
	_, err = declare().Apply(ctx)
	require.NoError(t, err)
	dev, err := k.LinkByName(ctx, vxlan.DefaultDeviceV4)
	require.NoError(t, err)

	static := net.HardwareAddr{2, 0x99, 0, 0, 0, 6}
	stray := net.HardwareAddr{2, 0x99, 0, 0, 0, 7}
	for i, e := range []kernel.FDBEntry{
		{LinkIndex: dev.Index, MAC: static, Dst: netip.MustParseAddr("192.0.2.6")},
		{LinkIndex: dev.Index, MAC: stray, Dst: netip.MustParseAddr("192.0.2.7"), Permanent: true},
	} {
		require.NoError(t, k.ApplyFDB(ctx, []kernel.FDBOp{{Kind: kernel.OpReplace, Entry: e}})[0], "entry %d", i)
	}
	entries := func() map[string]kernel.FDBEntry {
		fdb, err := k.FDB(ctx, dev.Index)
		require.NoError(t, err)
		out := map[string]kernel.FDBEntry{}
		for _, e := range fdb {
			out[e.MAC.String()] = e
		}
		return out
	}
	before := entries()
	require.Contains(t, before, static.String())
	require.False(t, before[static.String()].Permanent, "the hand-made entry is not permanent")

	d := declare() // a restarted agent
	plan, err := d.Plan(ctx)
	require.NoError(t, err)
	require.Len(t, plan.Writes, 1, "%v", plan.Writes)
	assert.Contains(t, plan.Writes[0].String(), stray.String())
	_, err = d.Apply(ctx)
	require.NoError(t, err)
	after := entries()
	assert.Equal(t, before[static.String()], after[static.String()], "the entry that is not permanent is left alone")
	assert.NotContains(t, after, stray.String(), "an undeclared permanent entry is the Driver's, and goes")
	assert.Contains(t, after, "02:aa:04:00:00:02", "the declared remote stays")
	plan, err = d.Plan(ctx)
	require.NoError(t, err)
	assert.Empty(t, plan.Writes)
}

func TestForeignFDBEntries(t *testing.T) {
	checkForeignFDB(t, kernelfake.New(kernelfake.Options{}))
}

func TestKernelForeignFDBEntries(t *testing.T) {
	kerneltest.RequireKernel(t)
	checkForeignFDB(t, managertest.Open(t, kerneltest.NewNS(t)))
}
