package vxlan_test

import (
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
			w.send(vtep(n), vxlan.BlockUpdate{CIDR: block(fam, n), Node: nodeName(n)})
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
