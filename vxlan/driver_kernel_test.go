package vxlan_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

func addNodes(w *world, nodes ...int) {
	for _, n := range nodes {
		w.send(vtep(n), cluster.Block{CIDR: block(w.fam, n), Node: nodeName(n)})
	}
}

// TestMTULive: a host MTU change reported by the mtu monitor (as a
// message) reaches the device and the routes through it without a restart;
// a fixed Options.MTU wins over it.
func TestMTULive(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		w := newWorld(t, fam, nil)
		addNodes(w, 1, 2)
		w.converge()
		over := mtu.VXLAN.Overhead(fam == vxlan.IPv6)
		dev, _ := w.ns.Link(w.m.Device())
		require.Equal(t, 1500-over, dev.MTU, "the parent's MTU less the overhead")
		index := dev.Index
		w.send(mtu.Result{Host: mtu.HostMTU{MTU: 1400, Interface: "eth0"}, PodMTU: 1400 - over})
		w.converge()
		dev, _ = w.ns.Link(w.m.Device())
		require.Equal(t, 1400-over, dev.MTU)
		require.Equal(t, index, dev.Index, "changed in place")
		require.True(t, hasLine(w.routes(), "mtu "+itoa(1400-over)), "%v", w.routes())

		f := newWorld(t, fam, func(o *overlay.Options) { o.MTU = 1300 })
		addNodes(f, 1, 2)
		f.send(mtu.Result{Host: mtu.HostMTU{MTU: 1400}})
		f.converge()
		dev, _ = f.ns.Link(f.m.Device())
		require.Equal(t, 1300, dev.MTU)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDeviceInPlaceAndRecreate: a new MAC or tunnel address changes the
// device in place (the neighbour entries the kernel flushes with a new MAC
// written again at once); a new VNI or port re-creates it, and its entries
// are written again on the new one.
func TestDeviceInPlaceAndRecreate(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	w.converge()
	dev, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	v := vtep(1)
	v.VXLANMACV4 = cluster.MAC(net.HardwareAddr{0x02, 0xcc, 0, 0, 0, 1})
	v.TunnelV4 = netip.MustParseAddr("10.244.1.251")
	w.send(v)
	w.converge()
	now, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	require.Equal(t, dev.Index, now.Index)
	require.Equal(t, v.VXLANMACV4.HardwareAddr(), now.MAC)
	require.Contains(t, prefixStrings(w.ns.LinkAddrs(vxlan.DefaultDeviceV4)), "10.244.1.251/32")
	require.NotContains(t, prefixStrings(w.ns.LinkAddrs(vxlan.DefaultDeviceV4)), "10.244.1.250/32")
	// The kernel flushed the device's neighbour entries with its new MAC:
	// written again in the same pass, not at the next resync.
	require.Equal(t, wantL2(vxlan.IPv4, 2), w.l2(), "entries kept through the MAC change")

	r := newWorld(t, vxlan.IPv4, func(o *overlay.Options) { o.Encap = overlay.VXLAN{VNI: 7} })
	r.ns = w.ns // same namespace, another VNI: a restarted agent with new config
	r.tbl, r.sets = w.tbl, w.sets
	r.opts.Kernel, r.opts.Routes, r.opts.Sets = w.ns, w.tbl, w.sets
	var err error
	r.m, err = overlay.New(r.opts)
	require.NoError(t, err)
	addNodes(r, 1, 2)
	r.converge()
	again, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	require.NotEqual(t, dev.Index, again.Index, "a new VNI re-creates the device")
	require.Equal(t, uint32(7), again.VXLAN.VNI)
	require.Equal(t, wantL2(vxlan.IPv4, 2), r.l2(), "entries rewritten on the new device")
	require.Contains(t, r.routes(), "10.244.2.0/24 via 10.244.2.250 dev np-vxlan onlink mtu 1450")
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// TestExternalChangesRepaired: the device deleted behind the manager comes
// back when the interface monitor reports it (no resync needed); entries
// and an MTU changed behind its back are repaired at the next resync.
func TestExternalChangesRepaired(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2, 3)
	w.converge()
	admin := w.ns.Admin()
	dev, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	require.NoError(t, admin.DeleteLink(bg, dev.Index))
	w.m.OnLink(kernel.Link{Name: vxlan.DefaultDeviceV4, Index: dev.Index, Kind: kernel.KindVXLAN}, kernel.LinkGone)
	w.converge()
	back, ok := w.ns.Link(vxlan.DefaultDeviceV4)
	require.True(t, ok)
	require.NotEqual(t, dev.Index, back.Index)
	require.Equal(t, wantL2(vxlan.IPv4, 2, 3), w.l2())
	require.Contains(t, w.routes(), "10.244.2.0/24 via 10.244.2.250 dev np-vxlan onlink mtu 1450")

	errs := admin.ApplyFDB(bg, []kernel.FDBOp{{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: back.Index, MAC: nodeMAC(vxlan.IPv4, 2)}}})
	require.NoError(t, errors.Join(errs...))
	errs = admin.ApplyNeighbors(bg, []kernel.NeighborOp{{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: back.Index, IP: tunnelIP(vxlan.IPv4, 3), MAC: net.HardwareAddr{2, 9, 9, 9, 9, 9}}}})
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, admin.SetLinkMTU(bg, back.Index, 1300))
	w.converge()
	require.NotEqual(t, wantL2(vxlan.IPv4, 2, 3), w.l2(), "nothing repaired before a resync")
	w.m.Driver().QueueResync()
	w.converge()
	require.Equal(t, wantL2(vxlan.IPv4, 2, 3), w.l2())
	now, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	require.Equal(t, 1450, now.MTU)
}

// callCounter counts the batched calls, to prove entries are batched.
type callCounter struct {
	*kernelfake.Namespace
	neighCalls, fdbCalls int
}

func (c *callCounter) ApplyNeighbors(ctx context.Context, ops []kernel.NeighborOp) []error {
	c.neighCalls++
	return c.Namespace.ApplyNeighbors(ctx, ops)
}

func (c *callCounter) ApplyFDB(ctx context.Context, ops []kernel.FDBOp) []error {
	c.fdbCalls++
	return c.Namespace.ApplyFDB(ctx, ops)
}

// TestEntriesBatched: 200 remote VTEPs cost one neighbour batch and one
// FDB batch, not a call per entry.
func TestEntriesBatched(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	cc := &callCounter{Namespace: w.ns}
	d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: cc, Family: vxlan.IPv4})
	require.NoError(t, err)
	require.NoError(t, d.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv4, 1), MAC: nodeMAC(vxlan.IPv4, 1), Address: tunnelIP(vxlan.IPv4, 1)}))
	for n := 2; n <= 201; n++ {
		require.NoError(t, d.SetRemote(nodeName(n), vxlan.Remote{TunnelIP: tunnelIP(vxlan.IPv4, n), MAC: nodeMAC(vxlan.IPv4, n), Underlay: underlay(vxlan.IPv4, n)}))
	}
	_, err = d.Apply(bg)
	require.NoError(t, err)
	require.Equal(t, 1, cc.neighCalls)
	require.Equal(t, 1, cc.fdbCalls)
	require.Equal(t, 200, w.ns.Calls(kernelfake.OpApplyNeighbors))
	require.Equal(t, dataplane.DriverStats{Desired: 401, InKernel: 401, Writes: 3 + 400}, d.Stats(),
		"the device (created, its address, up) and 200 remotes of two entries each")
	// Nothing changed: nothing sent.
	_, err = d.Apply(bg)
	require.NoError(t, err)
	require.Equal(t, 1, cc.neighCalls)
}

// TestOneBadEntry: an FDB entry and a neighbour the kernel refuses fail
// alone (a PartialError with RetryAfter), the others are written, and the
// refused ones converge once the kernel takes them.
func TestOneBadEntry(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	bad := nodeMAC(vxlan.IPv4, 3)
	badIP := tunnelIP(vxlan.IPv4, 4)
	w.ns.Refuse(func(_ kernelfake.Op, obj any) error {
		switch o := obj.(type) {
		case kernel.FDBOp:
			if o.Entry.MAC.String() == bad.String() {
				return syscall.EBUSY
			}
		case kernel.NeighborOp:
			if o.Neighbor.IP == badIP {
				return syscall.EBUSY
			}
		}
		return nil
	})
	addNodes(w, 1, 2, 3, 4, 5)
	after, err := w.pass()
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, vxlan.ErrFDB)
	require.ErrorIs(t, err, vxlan.ErrNeighbor)
	var pe *dataplane.PartialError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, 2, pe.Failed)
	require.Positive(t, after)
	l2 := w.l2()
	require.True(t, hasLine(l2, nodeMAC(vxlan.IPv4, 5).String()), "%v", l2)
	require.True(t, hasLine(l2, tunnelIP(vxlan.IPv4, 2).String()+" "), "%v", l2)
	// Before the retry is due nothing is tried; it waits.
	_, err = w.pass()
	require.True(t, errors.As(err, &pe))
	require.Equal(t, 2, pe.Waiting)
	w.ns.Refuse(nil)
	w.converge()
	require.Equal(t, wantL2(vxlan.IPv4, 2, 3, 4, 5), w.l2())
}

// TestCrossSubnetOneReplace: a node moving between subnets switches its
// block's route from the tunnel to the direct path and back, each with one
// route replace and no delete.
func TestCrossSubnetOneReplace(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		w := newWorld(t, fam, func(o *overlay.Options) { o.CrossSubnet = true })
		count := overlaytest.Wrap(w.ns)
		w.restartOn(count)
		far := vtep(3)
		if fam == vxlan.IPv6 {
			far.UnderlayV6 = netip.MustParseAddr("fd00:198:19::3")
		} else {
			far.UnderlayV4 = netip.MustParseAddr("198.18.1.3")
		}
		addNodes(w, 1, 2)
		w.send(far, cluster.Block{CIDR: block(fam, 3), Node: nodeName(3)})
		w.converge()
		require.Contains(t, w.routes(), block(fam, 2).String()+" via "+underlay(fam, 2).String()+" dev eth0")
		require.True(t, hasLine(w.routes(), block(fam, 3).String()+" via "+tunnelIP(fam, 3).String()), "%v", w.routes())
		st := w.m.Stats()
		require.Equal(t, 1, st.DirectRoutes)
		require.Equal(t, 1, st.TunnelRoutes)
		for _, step := range []cluster.Node{vtep(3), far} {
			count.Reset()
			w.send(step)
			w.converge()
			n := 0
			for _, l := range count.Log() {
				if strings.Contains(l, "route "+block(fam, 3).String()) {
					require.True(t, strings.HasPrefix(l, "replace"), "%v", count.Log())
					n++
				}
			}
			require.Equal(t, 1, n, "%v", count.Log())
		}
	})
}

// TestHostAddressesNotified: a new address on eth0 (reported through
// OnAddrs) makes nodes of its subnet same-subnet at the next pass.
func TestHostAddressesNotified(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, func(o *overlay.Options) { o.CrossSubnet = true })
	far := vtep(3)
	far.UnderlayV4 = netip.MustParseAddr("198.18.1.3")
	addNodes(w, 1)
	w.send(far, cluster.Block{CIDR: block(vxlan.IPv4, 3), Node: nodeName(3)})
	w.converge()
	require.Equal(t, 1, w.m.Stats().TunnelRoutes)
	eth0, _ := w.ns.Link("eth0")
	require.NoError(t, w.ns.Admin().AddAddr(bg, kernel.Addr{LinkIndex: eth0.Index, Prefix: netip.MustParsePrefix("198.18.1.1/24")}))
	w.m.OnAddrs("eth0", w.ns.LinkAddrs("eth0"))
	w.converge()
	require.Equal(t, 1, w.m.Stats().DirectRoutes)
	require.Contains(t, w.routes(), "10.244.3.0/24 via 198.18.1.3 dev eth0")
}

// TestConflictingRemotes: two nodes claiming one MAC: the entry goes to
// the node whose name sorts first, and to the other once it is gone.
func TestConflictingRemotes(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	twin := vtep(3)
	twin.VXLANMACV4 = cluster.MAC(nodeMAC(vxlan.IPv4, 2))
	w.send(twin)
	w.converge()
	require.True(t, hasLine(w.l2(), "fdb "+nodeMAC(vxlan.IPv4, 2).String()+" dst "+underlay(vxlan.IPv4, 2).String()), "%v", w.l2())
	w.send(cluster.NodeRemove{Name: nodeName(2)})
	w.converge()
	require.True(t, hasLine(w.l2(), "fdb "+nodeMAC(vxlan.IPv4, 2).String()+" dst "+underlay(vxlan.IPv4, 3).String()), "%v", w.l2())
}

// TestBadInputRejected: invalid messages change nothing and are counted;
// invalid options are errors of New.
func TestBadInputRejected(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	w.converge()
	before := w.ns.Dump()
	bad := []any{
		cluster.Node{},
		cluster.Node{Name: "x", UnderlayV4: netip.MustParseAddr("fd00::1")},
		cluster.Node{Name: "x", UnderlayV4: netip.MustParseAddr("224.0.0.1")},
		cluster.Node{Name: "x", VXLANMACV4: cluster.MAC(net.HardwareAddr{1, 0, 0, 0, 0, 1})},
		cluster.NodeRemove{},
		cluster.Block{CIDR: netip.MustParsePrefix("10.244.9.1/24"), Node: "x"},
		cluster.Block{CIDR: netip.MustParsePrefix("10.244.9.0/24")},
		cluster.BlockRemove{},
	}
	for _, m := range bad {
		w.send(m)
	}
	w.converge()
	require.Equal(t, before, w.ns.Dump())
	st := w.m.Stats()
	require.Equal(t, len(bad), st.Rejected)
	require.ErrorIs(t, st.LastRejected, cluster.ErrInvalid)
	err := (&cluster.Block{CIDR: netip.MustParsePrefix("10.244.9.1/24"), Node: "x"}).Validate()
	require.ErrorContains(t, err, "10.244.9.0/24")

	vx := overlay.VXLAN{}
	for name, o := range map[string]overlay.Options{
		"no node":        {Family: vxlan.IPv4, Kernel: w.ns, Routes: w.tbl, Encap: vx},
		"no kernel":      {Family: vxlan.IPv4, NodeName: "n", Routes: w.tbl, Encap: vx},
		"no routes":      {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Encap: vx},
		"no encap":       {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl},
		"wrong family":   {Family: vxlan.IPv6, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: vx},
		"vni":            {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: overlay.VXLAN{VNI: 1 << 24}},
		"mtu":            {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: vx, MTU: 20},
		"classes":        {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: vx, Classes: overlay.Classes{Tunnel: 1, Direct: 1, Blackhole: 2}},
		"extra":          {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: vx, ExtraCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/8")}},
		"device name":    {Family: vxlan.IPv4, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: overlay.VXLAN{Device: "a/b"}},
		"ipip over ipv6": {Family: vxlan.IPv6, NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: overlay.IPIP{}},
		"invalid family": {NodeName: "n", Kernel: w.ns, Routes: w.tbl, Encap: vx},
	} {
		_, err := overlay.New(o)
		require.ErrorIs(t, err, overlay.ErrInvalidOptions, name)
	}
	// Below 1280 the kernel turns IPv6 off on a device: refused for an
	// IPv6 overlay, whose device and routes carry IPv6.
	tbl6, err := routetable.New(routetable.Options{Kernel: w.ns, Family: vxlan.IPv6, Table: kernel.TableMain})
	require.NoError(t, err)
	_, err = overlay.New(overlay.Options{Family: vxlan.IPv6, NodeName: "n", Kernel: w.ns, Routes: tbl6, Encap: vx, MTU: 1279})
	require.ErrorIs(t, err, overlay.ErrInvalidOptions, "IPv6 MTU 1279")
	_, err = overlay.New(overlay.Options{Family: vxlan.IPv6, NodeName: "n", Kernel: w.ns, Routes: tbl6, Encap: vx, MTU: 1280})
	require.NoError(t, err, "IPv6 MTU 1280")
	d6, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: w.ns, Family: vxlan.IPv6})
	require.NoError(t, err)
	require.ErrorIs(t, d6.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv6, 1), MTU: 1000}), vxlan.ErrInvalidInput)
	require.NoError(t, d6.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv6, 1), MTU: 1280}))
	d4, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: w.ns, Family: vxlan.IPv4})
	require.NoError(t, err)
	require.NoError(t, d4.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv4, 1), MTU: 1000}), "IPv4 takes an MTU below 1280")
	d := w.m.Driver().(*vxlan.Driver)
	require.ErrorIs(t, d.SetDevice(&vxlan.Device{}), vxlan.ErrInvalidInput)
	require.ErrorIs(t, d.SetDevice(&vxlan.Device{Local: underlay(vxlan.IPv4, 1), VNI: 1 << 24}), vxlan.ErrInvalidInput)
	require.ErrorIs(t, d.SetRemote("", vxlan.Remote{}), vxlan.ErrInvalidInput)
	require.ErrorIs(t, d.SetRemote("n", vxlan.Remote{TunnelIP: tunnelIP(vxlan.IPv6, 2), MAC: nodeMAC(vxlan.IPv4, 2), Underlay: underlay(vxlan.IPv4, 2)}), vxlan.ErrInvalidInput)
	w.converge()
	require.Equal(t, before, w.ns.Dump())
}

// TestDisabledAndNone: a disabled VXLAN overlay removes the device an
// earlier run left; an overlay without encapsulation (None) routes
// same-subnet nodes directly, through no device.
func TestDisabledAndNone(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	w.converge()
	_, ok := w.ns.Link(vxlan.DefaultDeviceV4)
	require.True(t, ok)
	w.opts.Disabled = true
	w.restart()
	w.converge()
	_, ok = w.ns.Link(vxlan.DefaultDeviceV4)
	require.False(t, ok)

	w.opts.Disabled, w.opts.Encap = false, overlay.None{}
	w.restart()
	addNodes(w, 1, 2)
	w.converge()
	require.ElementsMatch(t, []string{"10.244.2.0/24 via 198.18.0.2 dev eth0", "blackhole 10.244.1.0/24"}, w.routes())
	_, ok = w.ns.Link(vxlan.DefaultDeviceV4)
	require.False(t, ok)

	w.opts.Encap = overlay.VXLAN{}
	w.restart()
	addNodes(w, 1, 2)
	w.converge()
	w.opts.Disabled = true
	w.restart()
	w.converge()
	_, ok = w.ns.Link(vxlan.DefaultDeviceV4)
	require.False(t, ok)
}

// TestKernelReadFailure: a failed read of the host fails the manager as a
// whole (the loop retries it); one of the device's entries fails the
// driver as a whole; both converge afterwards.
func TestKernelReadFailure(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	w.ns.Fail(kernelfake.OpAddrs, 1, nil)
	_, err := w.pass()
	require.ErrorIs(t, err, overlay.ErrRead)
	w.ns.Fail(kernelfake.OpLinkByName, 1, nil)
	_, err = w.pass()
	require.ErrorIs(t, err, vxlan.ErrRead)
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	w.converge()
	require.Equal(t, wantL2(vxlan.IPv4, 2), w.l2())
}

// TestMTUCappedByParent: a host MTU above what the parent carries (a
// jumbo uplink elsewhere) gives the device the parent's MTU less the
// overhead, which the kernel accepts, not an MTU it refuses.
func TestMTUCappedByParent(t *testing.T) {
	w := newWorld(t, vxlan.IPv4, nil)
	addNodes(w, 1, 2)
	w.send(mtu.Result{Host: mtu.HostMTU{MTU: 9000}})
	w.converge()
	dev, _ := w.ns.Link(vxlan.DefaultDeviceV4)
	require.Equal(t, 1450, dev.MTU)
}

// TestDeviceConflictsNamed: the kernel refuses the device while a foreign
// VXLAN device holds its VNI and port (the fake as the kernel, see
// TestKernelVXLANDeviceConflicts): the error names that device, which is
// left alone, and the rest of the pass goes on. A link of the device's name
// but of another kind is not the device: never deleted, by Apply or by a
// Disabled Manager, and the error names it.
func TestDeviceConflictsNamed(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		w := newWorld(t, fam, nil)
		fx, err := w.ns.AddLink(bg, kernel.Link{Name: "fx", Kind: kernel.KindVXLAN,
			VXLAN: &kernel.VXLAN{VNI: vxlan.DefaultVNI, Port: vxlan.DefaultPort, Local: underlay(fam, 9)}})
		require.NoError(t, err)
		addNodes(w, 1, 2)
		_, err = w.pass()
		require.ErrorIs(t, err, vxlan.ErrDevice)
		require.ErrorIs(t, err, kernel.ErrExists)
		require.Contains(t, err.Error(), fmt.Sprintf("VNI 4096 with UDP port 4789 is held by vxlan device fx (index %d)", fx.Index))
		still, ok := w.ns.Link("fx")
		require.True(t, ok)
		require.Equal(t, fx.Index, still.Index)
		require.Contains(t, w.routes(), "blackhole "+block(fam, 1).String(), "the rest of the pass goes on")

		require.NoError(t, w.ns.DeleteLink(bg, fx.Index))
		br, err := w.ns.AddLink(bg, kernel.Link{Name: devName(fam), Kind: kernel.KindBridge})
		require.NoError(t, err)
		w.restart()
		addNodes(w, 1, 2)
		_, err = w.pass()
		require.ErrorIs(t, err, vxlan.ErrDevice)
		require.Contains(t, err.Error(), fmt.Sprintf("the name is taken by a bridge link (index %d), which is not ours", br.Index))
		w.opts.Disabled = true
		w.restart()
		w.converge()
		still, ok = w.ns.Link(devName(fam))
		require.True(t, ok, "a Disabled Manager deletes no foreign link")
		require.Equal(t, br.Index, still.Index)
		require.Equal(t, kernel.KindBridge, still.Kind)
	})
}

// TestOwnBlockBlackholeConflict: a bridge CNI's bridge holding this node's
// block (its gateway address, so a connected route of the block) makes the
// block get no blackhole: the table is not asked for a route a foreign
// route holds (which it would fail and retry forever), the conflict is
// warned about once however many passes run, and counted in Stats. A wider
// connected subnet holds it too (a blackhole would swallow the local pods'
// traffic). Once the address goes, the blackhole comes. NoBlackholes gives
// none at all.
func TestOwnBlockBlackholeConflict(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		var logs strings.Builder
		w := newWorld(t, fam, func(o *overlay.Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		admin := w.ns.Admin()
		br, err := admin.AddLink(bg, kernel.Link{Name: "cni0", Kind: kernel.KindBridge})
		require.NoError(t, err)
		require.NoError(t, admin.SetLinkUp(bg, br.Index, true))
		own := block(fam, 1)
		gw := netip.PrefixFrom(own.Addr().Next(), own.Bits())
		require.NoError(t, admin.AddAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: gw}))
		addNodes(w, 1, 2)
		for range 5 {
			_, err := w.pass()
			require.NoError(t, err)
			w.clk.Advance(time.Minute)
			w.m.QueueResync()
			w.tbl.QueueResync()
		}
		require.NotContains(t, w.routes(), "blackhole "+own.String())
		st := w.m.Stats()
		require.Equal(t, 1, st.BlackholeConflicts)
		require.Zero(t, st.Blackholes)
		require.Equal(t, 1, strings.Count(logs.String(), "no blackhole for this node's block"), logs.String())
		require.Contains(t, logs.String(), "interface=cni0")

		// A wider subnet holds it too.
		require.NoError(t, admin.DeleteAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: gw}))
		wide := netip.PrefixFrom(gw.Addr(), gw.Bits()-8)
		require.NoError(t, admin.AddAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: wide}))
		w.m.OnAddrs("cni0", []netip.Prefix{wide})
		w.converge()
		require.NotContains(t, w.routes(), "blackhole "+own.String())
		require.Equal(t, 1, w.m.Stats().BlackholeConflicts)
		require.Equal(t, 2, strings.Count(logs.String(), "no blackhole for this node's block"), "a new holder is reported")

		// The address goes: the blackhole comes.
		require.NoError(t, admin.DeleteAddr(bg, kernel.Addr{LinkIndex: br.Index, Prefix: wide}))
		w.m.OnAddrs("cni0", nil)
		w.converge()
		require.Contains(t, w.routes(), "blackhole "+own.String())
		require.Zero(t, w.m.Stats().BlackholeConflicts)

		// Turned off: none, and no conflict.
		w.opts.NoBlackholes = true
		w.restart()
		addNodes(w, 1, 2)
		w.converge()
		require.NotContains(t, w.routes(), "blackhole "+own.String())
		st = w.m.Stats()
		require.Zero(t, st.Blackholes)
		require.Zero(t, st.BlackholeConflicts)
		require.Equal(t, 1, st.Unrouted)
		require.Contains(t, w.routes(), block(fam, 2).String()+" via "+tunnelIP(fam, 2).String()+" dev "+devName(fam)+" onlink mtu "+itoa(1500-mtuOverhead(fam)))
	})
}

func mtuOverhead(fam vxlan.Family) int {
	if fam == vxlan.IPv6 {
		return 70
	}
	return 50
}
