//go:build linux

package vxlan_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
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
// device deleted under the running agent comes back; a node removal
// removes its routes, neighbours and FDB entries.
func TestKernelVXLAN(t *testing.T) {
	kerneltest.RequireKernel(t)
	kerneltest.RequireCommands(t, "ping", "ipset", "ip", "bridge")
	tp := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 3, PodsPerHost: 2})
	msgs := clusterMsgs(tp)
	agents := make([]*agent, len(tp.Hosts))
	for i, h := range tp.Hosts {
		agents[i] = startAgent(t, h, vxlan.Always, bothFams, msgs)
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
			require.Contains(t, string(out), fmt.Sprintf("%s dst %s self permanent", v.MACV4, v.UnderlayV4))
		}
		out, err = h1.NS.Exec(context.Background(), "ip", "route", "show", "proto", "78")
		require.NoError(t, err)
		require.Contains(t, string(out), fmt.Sprintf("%s via %s dev %s onlink", h2.PodCIDRv4, kernelVTEP(h2).TunnelV4, vxlan.DefaultDeviceV4))
		require.Contains(t, string(out), "blackhole "+h1.PodCIDRv4.String())
		out, err = h1.NS.Exec(context.Background(), "ipset", "list", "np4-"+vxlan.DefaultSetName)
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
		_, err = h1.NS.Exec(ctx, "bridge", "fdb", "del", v2.MACV4.String(), "dev", vxlan.DefaultDeviceV4, "dst", v2.UnderlayV4.String(), "self")
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
			if !strings.Contains(string(fdb), v2.MACV4.String()+" dst "+v2.UnderlayV4.String()) {
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

	t.Run("node-removal", func(t *testing.T) {
		for _, a := range agents[:2] {
			a.send(vxlan.VTEPRemove{Node: h3.Name})
		}
		v3 := kernelVTEP(h3)
		ctx := context.Background()
		eventually(t, 10*time.Second, func() error {
			for _, h := range []*kerneltest.Host{h1, h2} {
				fdb, err := h.NS.Exec(ctx, "bridge", "fdb", "show", "dev", vxlan.DefaultDeviceV4)
				if err != nil {
					return err
				}
				if strings.Contains(string(fdb), v3.MACV4.String()) {
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
