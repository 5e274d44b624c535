//go:build linux

package vxlan_test

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

var bothFams = []vxlan.Family{vxlan.IPv4, vxlan.IPv6}

// reachAll checks ping and TCP from the first pod of each host to every
// pod of the other hosts, in both families.
func reachAll(t *testing.T, tp *kerneltest.Topology) {
	t.Helper()
	for _, h := range tp.Hosts {
		from := h.Pods[0]
		for _, o := range tp.Hosts {
			if o == h {
				continue
			}
			for _, to := range o.Pods {
				for _, addr := range to.Addrs() {
					kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(from.NS, addr))
				}
			}
		}
	}
	for _, to := range tp.Hosts[1].Pods[:1] {
		for _, addr := range to.Addrs() {
			srv, _ := to.NS.ListenTCP(t, netip.AddrPortFrom(addr, 0))
			kerneltest.Eventually(t, 10*time.Second, kerneltest.TCPCheck(tp.Hosts[0].Pods[1].NS, srv))
			kerneltest.Eventually(t, 10*time.Second, kerneltest.TCPCheck(tp.Hosts[2].Pods[0].NS, srv))
		}
	}
}

// TestKernelVXLAN: three hosts on a bridge, two pods each, one agent per
// host (a loop with a v4 and a v6 manager) fed the same messages. Pods
// reach each other across hosts over VXLAN, v4 and v6, ping and TCP; the
// tunnel carries it (its counters move); external deletions of an FDB
// entry, a neighbour and a route are repaired at the next refresh; the
// device deleted under the running agent comes back; a host MTU change
// reaches the devices and their routes without a restart; a node removal
// removes its routes, neighbours and FDB entries.
func TestKernelVXLAN(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ping", "ipset", "ip", "bridge")
	tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 2})
	msgs := clusterMsgs(tp)
	agents := make([]*agent, len(tp.Hosts))
	for i, h := range tp.Hosts {
		agents[i] = startAgent(t, h, false, bothFams, msgs)
	}
	h1, h2, h3 := tp.Hosts[0], tp.Hosts[1], tp.Hosts[2]

	t.Run("reach", func(t *testing.T) {
		before := map[vxlan.Family]uint64{}
		for _, fam := range bothFams {
			before[fam] = txPackets(t, h1, devName(fam))
		}
		reachAll(t, tp)
		for _, fam := range bothFams {
			require.Greater(t, txPackets(t, h1, devName(fam)), before[fam], "%s: traffic went through %s", fam, devName(fam))
		}
	})

	t.Run("entries", func(t *testing.T) {
		out, err := h1.NS.Exec(context.Background(), "bridge", "fdb", "show", "dev", vxlan.DefaultDeviceV4)
		require.NoError(t, err)
		for _, o := range []*kerneltest.Host{h2, h3} {
			v := kernelVTEP(o)
			require.Contains(t, string(out), fmt.Sprintf("%s dst %s self permanent", v.VXLANMACV4, v.UnderlayV4))
		}
		out, err = h1.NS.Exec(context.Background(), "ip", "route", "show", "proto", "78")
		require.NoError(t, err)
		require.Contains(t, string(out), fmt.Sprintf("%s via %s dev %s onlink", h2.PodCIDRv4, kernelVTEP(h2).TunnelV4, vxlan.DefaultDeviceV4))
		require.Contains(t, string(out), "blackhole "+h1.PodCIDRv4.String())
		out, err = h1.NS.Exec(context.Background(), "ipset", "list", "np4-"+overlay.DefaultSetName(overlay.VXLAN{}))
		require.NoError(t, err)
		for _, h := range tp.Hosts {
			require.Contains(t, string(out), h.UnderlayIPv4.Addr().String())
		}
	})

	t.Run("external-deletions-repaired", func(t *testing.T) {
		v2 := kernelVTEP(h2)
		hd := h1.NS.Handle()
		dev, err := hd.LinkByName(vxlan.DefaultDeviceV4)
		require.NoError(t, err)
		ctx := context.Background()
		_, err = h1.NS.Exec(ctx, "bridge", "fdb", "del", v2.VXLANMACV4.String(), "dev", vxlan.DefaultDeviceV4, "dst", v2.UnderlayV4.String(), "self")
		require.NoError(t, err)
		_, err = h1.NS.Exec(ctx, "ip", "neigh", "del", v2.TunnelV4.String(), "dev", vxlan.DefaultDeviceV4)
		require.NoError(t, err)
		_, err = h1.NS.Exec(ctx, "ip", "-6", "route", "del", h2.PodCIDRv6.String())
		require.NoError(t, err)
		eventually(t, 10*time.Second, func() error {
			fdb, err := h1.NS.Exec(ctx, "bridge", "fdb", "show", "dev", vxlan.DefaultDeviceV4)
			if err != nil {
				return err
			}
			if !strings.Contains(string(fdb), v2.VXLANMACV4.String()+" dst "+v2.UnderlayV4.String()) {
				return fmt.Errorf("FDB entry not back: %s", fdb)
			}
			ns, err := hd.NeighList(dev.Attrs().Index, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			found := false
			for _, n := range ns {
				found = found || (n.IP.Equal(v2.TunnelV4.AsSlice()) && n.State&netlink.NUD_PERMANENT != 0)
			}
			if !found {
				return fmt.Errorf("neighbour %s not back", v2.TunnelV4)
			}
			rs, err := h1.NS.Exec(ctx, "ip", "-6", "route", "show", h2.PodCIDRv6.String())
			if err != nil || !strings.Contains(string(rs), "onlink") {
				return fmt.Errorf("route %s not back: %s %v", h2.PodCIDRv6, rs, err)
			}
			return nil
		})
		kerneltest.Require(t, kerneltest.PingCheck(h1.Pods[0].NS, h2.Pods[0].IPv4))
		kerneltest.Require(t, kerneltest.PingCheck(h1.Pods[0].NS, h2.Pods[0].IPv6))
	})

	t.Run("device-deleted-comes-back", func(t *testing.T) {
		for _, fam := range bothFams {
			old, err := h2.NS.Handle().LinkByName(devName(fam))
			require.NoError(t, err)
			require.NoError(t, h2.NS.Handle().LinkDel(old))
			eventually(t, 10*time.Second, func() error {
				l, err := h2.NS.Handle().LinkByName(devName(fam))
				if err != nil {
					return err
				}
				if l.Attrs().Index == old.Attrs().Index || l.Attrs().Flags&net.FlagUp == 0 {
					return fmt.Errorf("%s not re-created yet", devName(fam))
				}
				return nil
			})
		}
		for _, to := range h2.Pods[0].Addrs() {
			kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(h1.Pods[0].NS, to))
			kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(h3.Pods[1].NS, to))
		}
	})

	t.Run("host-MTU-applied-live", func(t *testing.T) {
		agents[0].send(mtu.Result{Host: mtu.HostMTU{MTU: 1400, Interface: "eth0"}})
		ctx := context.Background()
		eventually(t, 10*time.Second, func() error {
			for fam, want := range map[vxlan.Family]int{vxlan.IPv4: 1350, vxlan.IPv6: 1330} {
				l, err := h1.NS.Handle().LinkByName(devName(fam))
				if err != nil {
					return err
				}
				if l.Attrs().MTU != want {
					return fmt.Errorf("%s: MTU %d, want %d", devName(fam), l.Attrs().MTU, want)
				}
			}
			out, err := h1.NS.Exec(ctx, "ip", "route", "show", h2.PodCIDRv4.String())
			if err != nil || !strings.Contains(string(out), "mtu 1350") {
				return fmt.Errorf("route %s: %s (%v)", h2.PodCIDRv4, out, err)
			}
			return nil
		})
		kerneltest.Require(t, kerneltest.PingCheck(h1.Pods[0].NS, h2.Pods[0].IPv4))
		kerneltest.Require(t, kerneltest.PingCheck(h1.Pods[0].NS, h2.Pods[0].IPv6))
	})

	t.Run("node-removal", func(t *testing.T) {
		for _, a := range agents[:2] {
			a.send(cluster.NodeRemove{Name: h3.Name})
		}
		v3 := kernelVTEP(h3)
		ctx := context.Background()
		eventually(t, 10*time.Second, func() error {
			for _, h := range []*kerneltest.Host{h1, h2} {
				fdb, err := h.NS.Exec(ctx, "bridge", "fdb", "show", "dev", vxlan.DefaultDeviceV4)
				if err != nil {
					return err
				}
				if strings.Contains(string(fdb), v3.VXLANMACV4.String()) {
					return fmt.Errorf("%s: FDB entry of %s still there", h.Name, h3.Name)
				}
				for _, args := range [][]string{{"-4", "neigh", "show", "dev", vxlan.DefaultDeviceV4}, {"-6", "neigh", "show", "dev", vxlan.DefaultDeviceV6}} {
					out, err := h.NS.Exec(ctx, "ip", args...)
					if err != nil {
						return err
					}
					if strings.Contains(string(out), v3.TunnelV4.String()) || strings.Contains(string(out), v3.TunnelV6.String()) {
						return fmt.Errorf("%s: neighbour of %s still there: %s", h.Name, h3.Name, out)
					}
				}
				for _, c := range []netip.Prefix{h3.PodCIDRv4, h3.PodCIDRv6} {
					out, err := h.NS.Exec(ctx, "ip", "route", "show", c.String())
					if err != nil {
						return err
					}
					if strings.TrimSpace(string(out)) != "" {
						return fmt.Errorf("%s: route to %s still there: %s", h.Name, c, out)
					}
				}
			}
			return nil
		})
		kerneltest.Require(t, kerneltest.Not(kerneltest.PingCheck(h1.Pods[0].NS, h3.Pods[0].IPv4)))
		kerneltest.Require(t, kerneltest.PingCheck(h1.Pods[0].NS, h2.Pods[0].IPv4))
	})
}

// TestKernelVXLANRestart: an agent restarted during a continuous ping
// (10 ms interval, v4 and v6) loses at most the packets of one refresh
// interval, and the new agent writes nothing: the kernel already holds
// what it wants.
func TestKernelVXLANRestart(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ping", "ipset")
	tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1})
	msgs := clusterMsgs(tp)
	a1 := startAgent(t, tp.Hosts[0], false, bothFams, msgs)
	startAgent(t, tp.Hosts[1], false, bothFams, msgs)
	from, to := tp.Hosts[0].Pods[0], tp.Hosts[1].Pods[0]
	for _, addr := range to.Addrs() {
		kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(from.NS, addr))
	}
	const count = 300 // 3 s at 10 ms
	ctx := context.Background()
	var pings []*kerneltest.Process
	for _, addr := range to.Addrs() {
		fam := "-4"
		if addr.Is6() {
			fam = "-6"
		}
		p, err := from.NS.Start(ctx, "ping", fam, "-n", "-q", "-i", "0.01", "-c", fmt.Sprint(count), "-W", "1", addr.String())
		require.NoError(t, err)
		pings = append(pings, p)
	}
	time.Sleep(300 * time.Millisecond)
	a1.stop()
	a2 := startAgent(t, tp.Hosts[0], false, bothFams, msgs)
	time.Sleep(3 * kresync) // a few refreshes of the new agent
	for _, p := range pings {
		<-p.Done()
		sent, lost, err := pingLoss(p.Stdout())
		require.NoError(t, err, "%s", p.Stdout())
		t.Logf("%d sent, %d lost", sent, lost)
		require.Equal(t, count, sent)
		require.LessOrEqual(t, lost, int(kresync/(10*time.Millisecond)), "lost more than one refresh interval's packets")
	}
	require.Zero(t, a2.count.Writes(), "the restarted agent wrote: %v", a2.count.Log())
}

// TestKernelVXLANCrossSubnet: hosts 1 and 2 share an underlay subnet,
// host 3 is on another one behind a router. In cross-subnet mode host 1
// routes host 2's pods directly and host 3's through VXLAN, which the
// device's counters prove. Host 3 moving into the first subnet switches
// host 1's route to its block with one replace, no delete.
func TestKernelVXLANCrossSubnet(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ping", "ipset", "ip")
	tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 1, Stack: kerneltest.IPv4Only})
	h1, h2, h3 := tp.Hosts[0], tp.Hosts[1], tp.Hosts[2]
	ctx := context.Background()
	ip := func(ns *kerneltest.NS, args ...string) {
		t.Helper()
		_, err := ns.Exec(ctx, "ip", args...)
		require.NoError(t, err, "ip %v", args)
	}
	// The switch routes between 198.18.0.0/24 and 198.18.1.0/24.
	ip(tp.Switch, "addr", "add", "198.18.0.254/24", "dev", kerneltest.BridgeName)
	ip(tp.Switch, "addr", "add", "198.18.1.254/24", "dev", kerneltest.BridgeName)
	require.NoError(t, tp.Switch.SetSysctl("net.ipv4.ip_forward", "1"))
	ip(h3.NS, "addr", "del", "198.18.0.3/24", "dev", h3.UnderlayIf)
	ip(h3.NS, "addr", "add", "198.18.1.3/24", "dev", h3.UnderlayIf)
	ip(h3.NS, "route", "add", "198.18.0.0/24", "via", "198.18.1.254")
	for _, h := range []*kerneltest.Host{h1, h2} {
		ip(h.NS, "route", "add", "198.18.1.0/24", "via", "198.18.0.254")
	}
	v3 := kernelVTEP(h3)
	v3.UnderlayV4 = netip.MustParseAddr("198.18.1.3")
	msgs := []any{kernelVTEP(h1), kernelVTEP(h2), v3}
	for _, h := range tp.Hosts {
		msgs = append(msgs, cluster.Block{CIDR: h.PodCIDRv4, Node: h.Name})
	}
	fams := []vxlan.Family{vxlan.IPv4}
	agents := []*agent{}
	for _, h := range tp.Hosts {
		agents = append(agents, startAgent(t, h, true, fams, msgs))
	}
	routes, err := h1.NS.Exec(ctx, "ip", "route", "show", "proto", "78")
	require.NoError(t, err)
	require.Contains(t, string(routes), fmt.Sprintf("%s via %s dev eth0", h2.PodCIDRv4, h2.UnderlayIPv4.Addr()))
	require.Contains(t, string(routes), fmt.Sprintf("%s via %s dev %s onlink", h3.PodCIDRv4, v3.TunnelV4, vxlan.DefaultDeviceV4))

	// pingPath pings n times and returns how many packets the tunnel sent.
	pingPath := func(to netip.Addr) uint64 {
		t.Helper()
		kerneltest.Eventually(t, 10*time.Second, kerneltest.PingCheck(h1.Pods[0].NS, to))
		before := txPackets(t, h1, vxlan.DefaultDeviceV4)
		_, err := h1.Pods[0].NS.Exec(ctx, "ping", "-4", "-n", "-q", "-c", "20", "-i", "0.01", to.String())
		require.NoError(t, err)
		return txPackets(t, h1, vxlan.DefaultDeviceV4) - before
	}
	require.Less(t, pingPath(h2.Pods[0].IPv4), uint64(10), "same-subnet traffic must not use the tunnel")
	require.GreaterOrEqual(t, pingPath(h3.Pods[0].IPv4), uint64(20), "cross-subnet traffic must use the tunnel")

	// Host 3 moves into host 1's subnet.
	ip(h3.NS, "route", "del", "198.18.0.0/24")
	ip(h3.NS, "addr", "add", "198.18.0.3/24", "dev", h3.UnderlayIf)
	ip(h3.NS, "addr", "del", "198.18.1.3/24", "dev", h3.UnderlayIf)
	agents[0].count.Reset()
	for _, a := range agents {
		a.send(kernelVTEP(h3))
	}
	want := fmt.Sprintf("%s via %s dev eth0", h3.PodCIDRv4, h3.UnderlayIPv4.Addr())
	eventually(t, 10*time.Second, func() error {
		out, err := h1.NS.Exec(ctx, "ip", "route", "show", h3.PodCIDRv4.String())
		if err != nil || !strings.Contains(string(out), want) {
			return fmt.Errorf("route to %s: %s (%v)", h3.PodCIDRv4, out, err)
		}
		return nil
	})
	replaces, deletes := 0, 0
	for _, w := range agents[0].count.Log() {
		if strings.Contains(w, "route "+h3.PodCIDRv4.String()) {
			switch {
			case strings.HasPrefix(w, "replace"):
				replaces++
			case strings.HasPrefix(w, "delete"):
				deletes++
			}
		}
	}
	require.Equal(t, 1, replaces, "writes: %v", agents[0].count.Log())
	require.Zero(t, deletes, "writes: %v", agents[0].count.Log())
	require.Less(t, pingPath(h3.Pods[0].IPv4), uint64(10), "host 3 is now reached directly")
}

// TestKernelVXLANDeviceConflicts: a foreign VXLAN device holding the VNI
// and UDP port the Driver's device needs makes the kernel refuse it; the
// error names the device that holds them (not "Link not found"), and the
// foreign device is untouched. A link of the device's name but of another
// kind is not the device: the error names it, and neither Apply nor a
// Driver that wants no device deletes it. Both families.
func TestKernelVXLANDeviceConflicts(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip")
	for _, fam := range bothFams {
		t.Run(fam.String(), func(t *testing.T) {
			ns := kerneltest.NewNS(t)
			ctx := context.Background()
			ip := func(args ...string) {
				t.Helper()
				_, err := ns.Exec(ctx, "ip", args...)
				require.NoError(t, err, "ip %v", args)
			}
			local := underlay(fam, 1)
			ip("link", "add", "up0", "type", "bridge")
			ip("addr", "add", netip.PrefixFrom(local, local.BitLen()).String(), "dev", "up0", "nodad")
			ip("link", "set", "up0", "up")
			// The foreign device: same VNI and port, no parent, no local
			// address of ours.
			fx := []string{"link", "add", "fx", "type", "vxlan", "id", "4096", "dstport", "4789"}
			if fam == vxlan.IPv6 {
				fx = append(fx, "local", underlay(fam, 9).String())
			}
			ip(fx...)
			k, err := kernel.Open(ns.Path())
			require.NoError(t, err)
			defer k.Close()
			fxBefore, err := k.LinkByName(ctx, "fx")
			require.NoError(t, err)

			d, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: fam})
			require.NoError(t, err)
			require.NoError(t, d.SetDevice(&vxlan.Device{Local: local}))
			_, err = d.Apply(ctx)
			require.Error(t, err)
			t.Logf("the error: %v", err)
			require.ErrorIs(t, err, vxlan.ErrDevice)
			require.ErrorIs(t, err, kernel.ErrExists)
			require.Contains(t, err.Error(), fmt.Sprintf("VNI 4096 with UDP port 4789 is held by vxlan device fx (index %d)", fxBefore.Index))
			require.NotContains(t, err.Error(), "not found")
			fxAfter, err := k.LinkByName(ctx, "fx")
			require.NoError(t, err, "the foreign device survives")
			require.Equal(t, fxBefore.Index, fxAfter.Index)
			_, err = k.LinkByName(ctx, devName(fam))
			require.ErrorIs(t, err, kernel.ErrNotFound)

			// Another port: no conflict, the device is made.
			require.NoError(t, d.SetDevice(&vxlan.Device{Local: local, Port: 4790}))
			_, err = d.Apply(ctx)
			require.NoError(t, err)
			dev, err := k.LinkByName(ctx, devName(fam))
			require.NoError(t, err)
			require.Equal(t, uint16(4790), dev.VXLAN.Port)

			// A bridge of the device's name is not the device.
			require.NoError(t, d.SetDevice(nil))
			_, err = d.Apply(ctx)
			require.NoError(t, err)
			ip("link", "add", devName(fam), "type", "bridge")
			br, err := k.LinkByName(ctx, devName(fam))
			require.NoError(t, err)
			d2, err := vxlan.NewDriver(vxlan.DriverOptions{Kernel: k, Family: fam})
			require.NoError(t, err)
			require.NoError(t, d2.SetDevice(&vxlan.Device{Local: local, Port: 4790}))
			_, err = d2.Apply(ctx)
			require.Error(t, err)
			t.Logf("the error: %v", err)
			require.ErrorIs(t, err, vxlan.ErrDevice)
			require.Contains(t, err.Error(), fmt.Sprintf("the name is taken by a bridge link (index %d)", br.Index))
			require.NoError(t, d2.SetDevice(nil))
			_, err = d2.Apply(ctx)
			require.NoError(t, err, "wanting no device: the bridge is not ours to delete")
			still, err := k.LinkByName(ctx, devName(fam))
			require.NoError(t, err, "the bridge survives")
			require.Equal(t, br.Index, still.Index)
			require.Equal(t, kernel.KindBridge, still.Kind)
		})
	}
}

// TestKernelOwnBlockBlackholeConflict: a bridge CNI's bridge has this
// node's block as its subnet (the block's gateway address), so the kernel
// has a connected route for the block. The Manager declares no blackhole
// for it — over IPv4 the connected route holds the blackhole's key, and the
// Table would report it failed and retry it forever — and warns once,
// whatever the number of passes and resyncs. Once the bridge's address
// goes, the blackhole is written. Both families.
func TestKernelOwnBlockBlackholeConflict(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ip")
	for _, fam := range bothFams {
		t.Run(fam.String(), func(t *testing.T) {
			ns := kerneltest.NewNS(t)
			ctx := context.Background()
			ip := func(args ...string) string {
				t.Helper()
				out, err := ns.Exec(ctx, "ip", args...)
				require.NoError(t, err, "ip %v", args)
				return string(out)
			}
			bits := 24
			if fam == vxlan.IPv6 {
				bits = 64
			}
			ip("link", "add", "up0", "type", "bridge")
			ip("addr", "add", netip.PrefixFrom(underlay(fam, 1), bits).String(), "dev", "up0", "nodad")
			ip("link", "set", "up0", "up")
			own := block(fam, 1)
			gw := netip.PrefixFrom(own.Addr().Next(), own.Bits())
			ip("link", "add", "cni0", "type", "bridge")
			ip("addr", "add", gw.String(), "dev", "cni0", "nodad")
			ip("link", "set", "cni0", "up")

			k, err := kernel.Open(ns.Path())
			require.NoError(t, err)
			defer k.Close()
			var logs strings.Builder
			tbl, err := routetable.New(routetable.Options{Kernel: k, Family: fam, Table: kernel.TableMain})
			require.NoError(t, err)
			m, err := overlay.New(overlay.Options{Family: fam, NodeName: nodeName(1), Kernel: k, Routes: tbl, Encap: overlay.VXLAN{},
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			require.NoError(t, err)
			for _, n := range []int{1, 2} {
				m.OnUpdate(vtep(n))
				m.OnUpdate(cluster.Block{CIDR: block(fam, n), Node: nodeName(n)})
			}
			pass := func() error {
				_, err := overlaytest.Pass(ctx, m, m.Driver().Apply, tbl.Apply)
				return err
			}
			for range 3 {
				require.NoError(t, pass())
				m.QueueResync()
				m.Driver().QueueResync()
				tbl.QueueResync()
			}
			af := "-4"
			if fam == vxlan.IPv6 {
				af = "-6"
			}
			routes := ip(af, "route", "show", "proto", "78")
			require.NotContains(t, routes, "blackhole")
			require.Contains(t, routes, block(fam, 2).String()+" via "+tunnelIP(fam, 2).String())
			require.Contains(t, ip(af, "route", "show", own.String()), "dev cni0", "the bridge CNI's connected route stays")
			require.Equal(t, 1, m.Stats().BlackholeConflicts)
			require.Equal(t, 1, strings.Count(logs.String(), "no blackhole for this node's block"), logs.String())
			t.Logf("the warning: %s", logs.String())

			// The bridge's address goes: the blackhole is written.
			ip("addr", "del", gw.String(), "dev", "cni0")
			m.OnAddrs("cni0", nil)
			require.NoError(t, pass())
			require.Contains(t, ip(af, "route", "show", "proto", "78"), "blackhole "+own.String())
			require.Zero(t, m.Stats().BlackholeConflicts)
		})
	}
}
