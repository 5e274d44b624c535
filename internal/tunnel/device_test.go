package tunnel_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

var ctx = context.Background()

// host returns a fake namespace with eth0 up, holding 192.0.2.1/24.
func host(t *testing.T) (*kernelfake.Namespace, int) {
	ns := kernelfake.New(kernelfake.Options{})
	a := ns.Admin()
	l, err := a.AddLink(ctx, kernel.Link{Name: "eth0", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.NoError(t, a.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.MustParsePrefix("192.0.2.1/24")}))
	require.NoError(t, a.SetLinkUp(ctx, l.Index, true))
	return ns, l.Index
}

func vxSpec(parent int, vni uint32) *tunnel.DeviceSpec {
	want := &kernel.VXLAN{VNI: vni, Port: 4789, ParentIndex: parent, Local: netip.MustParseAddr("192.0.2.1")}
	return &tunnel.DeviceSpec{
		Link: kernel.Link{Name: "np-vx", Kind: kernel.KindVXLAN, MTU: 1400, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, VXLAN: want},
		Addr: netip.MustParsePrefix("10.244.1.0/32"), Family: ipfamily.IPv4,
		Compatible: func(have *kernel.Link) bool { return have.VXLAN != nil && have.VXLAN.VNI == want.VNI },
	}
}

// TestEnsureDeviceDry checks that EnsureDevice with a plan writes nothing
// and lists exactly the writes the same call without one makes (their
// number, res.Writes), over a device to create, one to change in place
// (MTU, MAC, addresses, up) and one to re-create; and that a plan after is
// empty.
func TestEnsureDeviceDry(t *testing.T) {
	ns, eth0 := host(t)
	a := ns.Admin()
	step := func(what string, spec *tunnel.DeviceSpec, want []string) {
		t.Helper()
		var plan []dataplane.Write
		before := ns.Writes()
		_, err := tunnel.EnsureDevice(ctx, ns, spec, &plan)
		require.NoError(t, err, what)
		require.Equal(t, before, ns.Writes(), "%s: a plan wrote", what)
		var got []string
		for _, w := range plan {
			got = append(got, w.String())
		}
		assert.Equal(t, want, got, what)
		res, err := tunnel.EnsureDevice(ctx, ns, spec, nil)
		require.NoError(t, err, what)
		assert.Equal(t, len(plan), ns.Writes()-before, "%s: the writes made", what)
		assert.Equal(t, len(plan), res.Writes, what)
		plan = nil
		_, err = tunnel.EnsureDevice(ctx, ns, spec, &plan)
		require.NoError(t, err, what)
		assert.Empty(t, plan, "%s: the plan after", what)
	}
	step("create", vxSpec(eth0, 7), []string{
		"+ link np-vx vxlan vni 7 port 4789 local 192.0.2.1 parent 2 mtu 1400 mac 02:00:00:00:00:01",
		"~ link np-vx addr add 10.244.1.0/32",
		"~ link np-vx up (was down)",
	})
	dev, err := a.LinkByName(ctx, "np-vx")
	require.NoError(t, err)
	require.NoError(t, a.SetLinkMTU(ctx, dev.Index, 1300))
	require.NoError(t, a.SetLinkMAC(ctx, dev.Index, net.HardwareAddr{2, 0, 0, 0, 0, 9}))
	require.NoError(t, a.AddAddr(ctx, kernel.Addr{LinkIndex: dev.Index, Prefix: netip.MustParsePrefix("10.99.0.1/32")}))
	require.NoError(t, a.SetLinkUp(ctx, dev.Index, false))
	step("change in place", vxSpec(eth0, 7), []string{
		"~ link np-vx mtu 1400 (was 1300)",
		"~ link np-vx mac 02:00:00:00:00:01 (was 02:00:00:00:00:09)",
		"~ link np-vx addr del 10.99.0.1/32",
		"~ link np-vx up (was down)",
	})
	step("re-create", vxSpec(eth0, 8), []string{
		"- link np-vx vxlan vni 7 port 4789 local 192.0.2.1 parent 2 mtu 1400 mac 02:00:00:00:00:01 (incompatible, re-created)",
		"+ link np-vx vxlan vni 8 port 4789 local 192.0.2.1 parent 2 mtu 1400 mac 02:00:00:00:00:01",
		"~ link np-vx addr add 10.244.1.0/32",
		"~ link np-vx up (was down)",
	})

	// Removal, and of a device the kernel keeps (its addresses go).
	for _, undeletable := range []bool{true, false} {
		var plan []dataplane.Write
		before := ns.Writes()
		keep := func(*kernel.Link) bool { return undeletable }
		_, err := tunnel.RemoveDevice(ctx, ns, "np-vx", kernel.KindVXLAN, ipfamily.IPv4, keep, &plan)
		require.NoError(t, err)
		require.Equal(t, before, ns.Writes())
		n, err := tunnel.RemoveDevice(ctx, ns, "np-vx", kernel.KindVXLAN, ipfamily.IPv4, keep, nil)
		require.NoError(t, err)
		assert.Equal(t, len(plan), n)
		assert.Equal(t, len(plan), ns.Writes()-before)
		require.Len(t, plan, 1)
		if undeletable {
			assert.Equal(t, "~ link np-vx addr del 10.244.1.0/32", plan[0].String())
		} else {
			assert.Equal(t, dataplane.WriteDelete, plan[0].Op)
		}
	}
	_, ok := ns.Link("np-vx")
	assert.False(t, ok)

	// A foreign link of the name: the same error, planned or not, and no
	// write.
	_, err = a.AddLink(ctx, kernel.Link{Name: "np-vx", Kind: kernel.KindBridge})
	require.NoError(t, err)
	var plan []dataplane.Write
	_, errDry := tunnel.EnsureDevice(ctx, ns, vxSpec(eth0, 7), &plan)
	_, errReal := tunnel.EnsureDevice(ctx, ns, vxSpec(eth0, 7), nil)
	require.ErrorIs(t, errDry, kernel.ErrExists)
	assert.Equal(t, errReal.Error(), errDry.Error())
	assert.Empty(t, plan)
}
