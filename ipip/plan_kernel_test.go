//go:build linux

package ipip_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
)

// TestKernelPlan checks Plan against Apply in a fresh namespace of the
// running kernel: the Plan of a new device writes nothing, and the Apply
// after it makes exactly its writes. Where the kernel has ipip, the Plan
// after is empty and the State in sync. Where it has not (this project's
// machines), the test says so: the Plan's creation is the one write tried,
// the kernel refuses it (kernel.ErrNotSupported), State shows the device
// missing and failing, and the next Plan, before the retry is due, is
// empty; the Plan properties of a working device are covered on kernelfake
// (TestPlanProperties).
func TestKernelPlan(t *testing.T) {
	kerneltest.RequireKernel(t)
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	require.NoError(t, err)
	defer k.Close()
	eth0, err := k.AddLink(bg, kernel.Link{Name: "eth0", Kind: kernel.KindBridge})
	require.NoError(t, err)
	require.NoError(t, k.AddAddr(bg, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("198.18.0.1/24")}))
	require.NoError(t, k.SetLinkUp(bg, eth0.Index, true))

	rec := &recorder{DriverKernel: k}
	d, err := ipip.NewDriver(ipip.DriverOptions{Kernel: rec, Name: "np-ipip", Clock: newClock()})
	require.NoError(t, err)
	require.NoError(t, d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1"), Address: netip.MustParseAddr("10.244.1.250"), MTU: 1400}))
	plan, err := d.Plan(bg)
	require.NoError(t, err)
	require.Empty(t, rec.take(), "Plan wrote")
	require.Equal(t, `ipip-np-ipip: 3 writes
+ link np-ipip ipip local 198.18.0.1 mtu 1400
~ link np-ipip addr add 10.244.1.250/32
~ link np-ipip up (was down)`, plan.String())
	_, err = d.Apply(bg)
	tried := rec.take()
	st, serr := d.State(bg)
	require.NoError(t, serr)
	after, perr := d.Plan(bg)
	require.NoError(t, perr)
	if err == nil {
		require.Equal(t, planLog(t, plan), tried, "Apply made other writes than its Plan")
		assert.True(t, after.Empty(), "%v", after)
		assert.True(t, st.InSync(), "%v", st)
		return
	}
	require.ErrorIs(t, err, kernel.ErrNotSupported, "the device failed for another reason than a kernel without ipip")
	t.Logf("this kernel has no IPIP (%v): the Plan's creation was the one write tried and refused; the Plan properties of a working device are covered on kernelfake", err)
	require.Equal(t, []string{"+ link np-ipip"}, tried, "the Plan's first write, and no other, was tried")
	require.Len(t, st.Failing, 1)
	assert.ErrorIs(t, st.Failing[0], ipip.ErrDevice)
	assert.Equal(t, []dataplane.Drift{{Kind: "link", Name: "np-ipip", Want: "np-ipip ipip local 198.18.0.1 mtu 1400"}}, st.Drift)
	assert.True(t, after.Empty(), "the device waits for its retry: %v", after)
}
