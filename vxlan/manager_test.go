package vxlan_test

import (
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/vxlan"
)

func bothFamilies(t *testing.T, fn func(t *testing.T, fam vxlan.Family)) {
	for _, fam := range []vxlan.Family{vxlan.IPv4, vxlan.IPv6} {
		t.Run(fam.String(), func(t *testing.T) { fn(t, fam) })
	}
}

func TestThreeNodesAlways(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		w := newWorld(t, fam, nil)
		for n := 1; n <= 3; n++ {
			w.send(vtep(n), cluster.Block{CIDR: block(fam, n), Node: nodeName(n)})
		}
		w.converge()
		dev, ok := w.ns.Link(vxlan.DefaultDeviceV4)
		if fam == vxlan.IPv6 {
			dev, ok = w.ns.Link(vxlan.DefaultDeviceV6)
		}
		require.True(t, ok, w.ns.Dump())
		require.True(t, dev.AdminUp)
		t.Log(w.routes())
		t.Log(w.l2())
		t.Log(w.members())
		require.Equal(t, wantL2(fam, 2, 3), w.l2())
		require.Len(t, w.members(), 3)
	})
}

func TestInputSequences(t *testing.T) {
	bothFamilies(t, func(t *testing.T, fam vxlan.Family) {
		w := newWorld(t, fam, nil)
		dev := func() string { return w.m.Device() }
		tunnelRoute := func(n int) string {
			mtu := 1450
			if fam == vxlan.IPv6 {
				mtu = 1430
			}
			return fmt.Sprintf("%s via %s dev %s onlink mtu %d", block(fam, n), tunnelIP(fam, n), dev(), mtu)
		}
		blackhole := "blackhole " + block(fam, 1).String()

		// Blocks before any VTEP: only the local blackhole.
		w.send(cluster.Block{CIDR: block(fam, 1), Node: nodeName(1)}, cluster.Block{CIDR: block(fam, 2), Node: nodeName(2)})
		w.converge()
		require.Equal(t, []string{blackhole}, w.routes())
		_, hasDev := w.ns.Link(dev())
		require.False(t, hasDev, "no local VTEP, no device")

		// A remote VTEP before the local one: entries wait for the device,
		// routes for the tunnel.
		w.send(vtep(2))
		w.converge()
		require.Equal(t, []string{blackhole}, w.routes())
		w.send(vtep(1))
		w.converge()
		require.ElementsMatch(t, []string{tunnelRoute(2), blackhole}, w.routes())
		require.Equal(t, wantL2(fam, 2), w.l2())

		// A VTEP changing its underlay address: the FDB entry's remote is
		// replaced in place.
		v := vtep(2)
		moved := underlay(fam, 22)
		if fam == vxlan.IPv6 {
			v.UnderlayV6 = moved
		} else {
			v.UnderlayV4 = moved
		}
		w.send(v)
		w.converge()
		require.True(t, hasLine(w.l2(), "dst "+moved.String()+" permanent"), "%v", w.l2())
		w.send(vtep(2))

		// A block moving to another node, then becoming local.
		w.send(vtep(3), cluster.Block{CIDR: block(fam, 2), Node: nodeName(3)})
		w.converge()
		require.Contains(t, w.routes(), fmt.Sprintf("%s via %s dev %s onlink mtu %s", block(fam, 2), tunnelIP(fam, 3), dev(), strings.Fields(tunnelRoute(2))[len(strings.Fields(tunnelRoute(2)))-1]))
		w.send(cluster.Block{CIDR: block(fam, 2), Node: nodeName(1)})
		w.converge()
		require.Contains(t, w.routes(), "blackhole "+block(fam, 2).String())
		w.send(cluster.Block{CIDR: block(fam, 2), Node: nodeName(2)}, cluster.Block{CIDR: block(fam, 3), Node: nodeName(3)})
		w.converge()
		require.ElementsMatch(t, []string{tunnelRoute(2), tunnelRoute(3), blackhole}, w.routes())

		// A node removal takes its entries, routes and set member; its
		// return brings them back.
		w.send(cluster.NodeRemove{Name: nodeName(3)})
		w.converge()
		require.Equal(t, wantL2(fam, 2), w.l2())
		require.NotContains(t, w.routes(), tunnelRoute(3))
		require.Len(t, w.members(), 2)
		w.send(vtep(3))
		w.converge()
		require.Equal(t, wantL2(fam, 2, 3), w.l2())
		require.Contains(t, w.routes(), tunnelRoute(3))

		// A block removal takes its route.
		w.send(cluster.BlockRemove{CIDR: block(fam, 3)})
		w.converge()
		require.NotContains(t, w.routes(), tunnelRoute(3))

		// A second pass and a resync write nothing.
		w.ns.ResetCounts()
		w.converge()
		w.m.Driver().QueueResync()
		w.tbl.QueueResync()
		w.converge()
		require.Zero(t, w.ns.Writes(), w.ns.Dump())

		// A restarted agent writes nothing.
		w.restart()
		w.send(vtep(1), vtep(2), vtep(3), cluster.Block{CIDR: block(fam, 1), Node: nodeName(1)}, cluster.Block{CIDR: block(fam, 2), Node: nodeName(2)})
		w.converge()
		require.Zero(t, w.ns.Writes(), w.ns.Dump())
	})
}
