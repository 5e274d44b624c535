//go:build linux

package vxlan_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/vxlan"
)

// TestKernelPlanProperties checks the Plan properties of
// TestPlanProperties in fresh namespaces of the running kernel, IPv4 and
// IPv6, for a few seeds and rounds: Plan writes nothing, the Apply after
// it makes exactly its writes (the device's and the entries'), and then
// Plan is empty and an Apply writes nothing, while the kernel drifts
// (entries deleted and rewritten, the device's MTU, up state and
// addresses changed, the device deleted) between rounds.
func TestKernelPlanProperties(t *testing.T) {
	kerneltest.RequireKernel(t)
	for _, fam := range bothFams {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%v/%d", fam, seed), func(t *testing.T) {
				ns := kerneltest.NewNS(t)
				k, err := kernel.Open(ns.Path())
				require.NoError(t, err)
				defer k.Close()
				w := newPlanWorld(t, k, fam, nil)
				planned := planProperty(w, seed, 6, 10, nil)
				t.Logf("%d writes planned", planned)
			})
		}
	}
}

// BenchmarkKernelPlanApply compares Plan with Apply in a namespace of the
// running kernel, for a device with 1000 remote VTEPs (2000 entries):
// "program" plans or applies the whole state on a kernel without the
// device (the Apply creates it and writes every entry), "resync" plans or
// applies after a resync of a kernel already in sync (both read the
// device and its entries; the Apply writes nothing). Report the ratio of
// Plan's ns/op to Apply's.
func BenchmarkKernelPlanApply(b *testing.B) {
	kerneltest.RequireKernel(b)
	const n = 1000
	ns := kerneltest.NewNS(b)
	k, err := kernel.Open(ns.Path())
	require.NoError(b, err)
	defer k.Close()
	confSetup(b, k, confVariant{vxlan.IPv4})
	d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: vxlan.IPv4})
	require.NoError(b, err)
	require.NoError(b, d.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv4, 1), MAC: nodeMAC(vxlan.IPv4, 1), Address: tunnelIP(vxlan.IPv4, 1)}))
	for i := 2; i < 2+n; i++ {
		node := i + 1000 // above the conformance suite's remotes: tunnel addresses 10.244.x.250 stay distinct
		require.NoError(b, d.SetRemote(nodeName(node), vxlan.Remote{
			TunnelIP: netip.AddrFrom4([4]byte{10, 245, byte(node >> 8), byte(node)}), MAC: nodeMAC(vxlan.IPv4, node), Underlay: underlay(vxlan.IPv4, 2)}))
	}
	noDevice := func(b *testing.B) {
		if l, err := k.LinkByName(bg, vxlan.DefaultDeviceV4); err == nil {
			require.NoError(b, k.DeleteLink(bg, l.Index))
		}
		d.QueueResync()
	}
	b.Run("program/plan", func(b *testing.B) {
		noDevice(b)
		for b.Loop() {
			d.QueueResync()
			p, err := d.Plan(bg)
			require.NoError(b, err)
			require.Len(b, p.Writes, 3+2*n)
		}
	})
	b.Run("program/apply", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			noDevice(b)
			b.StartTimer()
			_, err := d.Apply(bg)
			require.NoError(b, err)
		}
	})
	b.Run("resync/plan", func(b *testing.B) {
		for b.Loop() {
			d.QueueResync()
			p, err := d.Plan(bg)
			require.NoError(b, err)
			require.Empty(b, p.Writes)
		}
	})
	b.Run("resync/apply", func(b *testing.B) {
		for b.Loop() {
			d.QueueResync()
			_, err := d.Apply(bg)
			require.NoError(b, err)
		}
	})
}
