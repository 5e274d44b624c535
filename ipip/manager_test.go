package ipip_test

import (
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipip"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/overlay"
)

// TestEndToEnd runs an IPIP overlay on a fake namespace where ipip is
// supported: tunl0 with the tunnel address and the host MTU less 20,
// routes via each node's underlay address onlink through it, a blackhole
// for this node's block, the node-address set; then a host MTU change,
// cross-subnet routing, a node removal and disabling.
func TestEndToEnd(t *testing.T) {
	ns := fakeHost(t, true)
	s := newStack(t, ns, newClock(), nil)
	for n := 1; n <= 3; n++ {
		s.send(node(n, false), cluster.Block{CIDR: block(n), Node: nodeName(n)})
	}
	require.NoError(t, s.converge())
	dev, ok := ns.Link("tunl0")
	require.True(t, ok)
	require.True(t, dev.AdminUp)
	require.Equal(t, 1480, dev.MTU)
	require.Equal(t, []string{"10.244.1.250/32"}, prefixes(ns.LinkAddrs("tunl0")))
	require.Equal(t, []string{
		"10.244.2.0/24 via 198.18.0.2 dev tunl0 onlink mtu 1480",
		"10.244.3.0/24 via 198.18.0.3 dev tunl0 onlink mtu 1480",
		"blackhole 10.244.1.0/24",
	}, routes(t, ns))
	members, _ := ns.IPSets().Members("np4-" + overlay.DefaultSetName(overlay.IPIP{}))
	require.ElementsMatch(t, []string{"198.18.0.1", "198.18.0.2", "198.18.0.3"}, members)

	// The host MTU drops: the device and its routes follow, live.
	s.send(mtu.Result{Host: mtu.HostMTU{MTU: 1400, Interface: "eth0"}})
	require.NoError(t, s.converge())
	dev, _ = ns.Link("tunl0")
	require.Equal(t, 1380, dev.MTU)
	require.Contains(t, routes(t, ns), "10.244.2.0/24 via 198.18.0.2 dev tunl0 onlink mtu 1380")

	// Node 3 leaves; node 2 stays.
	s.send(cluster.NodeRemove{Name: nodeName(3)})
	require.NoError(t, s.converge())
	require.Equal(t, []string{"10.244.2.0/24 via 198.18.0.2 dev tunl0 onlink mtu 1380", "blackhole 10.244.1.0/24"}, routes(t, ns))
	members, _ = ns.IPSets().Members("np4-" + overlay.DefaultSetName(overlay.IPIP{}))
	require.ElementsMatch(t, []string{"198.18.0.1", "198.18.0.2"}, members)

	// A restarted manager on the programmed kernel writes nothing.
	ns.ResetCounts()
	r := newStack(t, ns, newClock(), nil)
	r.send(node(1, false), node(2, false), cluster.Block{CIDR: block(1), Node: nodeName(1)}, cluster.Block{CIDR: block(2), Node: nodeName(2)},
		mtu.Result{Host: mtu.HostMTU{MTU: 1400}})
	require.NoError(t, r.converge())
	require.Zero(t, ns.Writes(), ns.Dump())

	// Disabled: the address leaves tunl0, which the kernel does not delete.
	d := newStack(t, ns, newClock(), func(o *overlay.Options) { o.Disabled = true })
	require.NoError(t, d.converge())
	require.Empty(t, ns.LinkAddrs("tunl0"))
}

// TestCrossSubnetAndNone: IPIP across subnets routes the same-subnet node
// directly and the other through tunl0; None routes the same-subnet node
// directly, the other not at all, and makes no device.
func TestCrossSubnetAndNone(t *testing.T) {
	for _, none := range []bool{false, true} {
		t.Run(fmt.Sprintf("none=%v", none), func(t *testing.T) {
			ns := fakeHost(t, true)
			s := newStack(t, ns, newClock(), func(o *overlay.Options) {
				o.CrossSubnet = true
				if none {
					o.Encap = overlay.None{}
				}
			})
			s.send(node(1, false), node(2, false), node(3, true))
			for n := 1; n <= 3; n++ {
				s.send(cluster.Block{CIDR: block(n), Node: nodeName(n)})
			}
			require.NoError(t, s.converge())
			want := []string{"10.244.2.0/24 via 198.18.0.2 dev eth0", "blackhole 10.244.1.0/24"}
			if !none {
				want = append(want, "10.244.3.0/24 via 198.18.1.3 dev tunl0 onlink mtu 1480")
			}
			require.ElementsMatch(t, want, routes(t, ns))
			_, hasDev := ns.Link("tunl0")
			require.Equal(t, !none, hasDev)
			st := s.m.Stats()
			require.Equal(t, 1, st.DirectRoutes)
			if none {
				require.Equal(t, 1, st.Unrouted)
			}
		})
	}
}

// TestNoIPIPModule: on this project's kernels (no ipip module) the device
// fails alone, as a partial failure retried on its backoff; the direct
// routes and the blackholes are written all the same.
func TestNoIPIPModule(t *testing.T) {
	ns := fakeHost(t, false)
	s := newStack(t, ns, newClock(), func(o *overlay.Options) { o.CrossSubnet = true })
	s.send(node(1, false), node(2, false), node(3, true))
	for n := 1; n <= 3; n++ {
		s.send(cluster.Block{CIDR: block(n), Node: nodeName(n)})
	}
	after, err := s.pass()
	require.Error(t, err)
	require.ErrorIs(t, err, dataplane.ErrPartial)
	require.ErrorIs(t, err, ipip.ErrDevice)
	require.ErrorIs(t, err, kernel.ErrNotSupported)
	require.Positive(t, after)
	require.ElementsMatch(t, []string{"10.244.2.0/24 via 198.18.0.2 dev eth0", "blackhole 10.244.1.0/24"}, routes(t, ns))
	var pe *dataplane.PartialError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, 1, pe.Failed)
}

func prefixes[P interface{ String() string }](ps []P) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// TestDeviceConflictsNamed: a foreign IPIP device with the same ends makes
// the kernel refuse the device (the fake as the kernel: no ipip here to
// show it on); the error names the device that holds them, which is left
// alone. A link of the device's name but of another kind is not the device:
// never deleted, and the error names it.
func TestDeviceConflictsNamed(t *testing.T) {
	ns := fakeHost(t, true)
	fx, err := ns.AddLink(bg, kernel.Link{Name: "fx", Kind: kernel.KindIPIP, IPTunnel: &kernel.IPTunnel{Local: node(1, false).UnderlayV4}})
	require.NoError(t, err)
	s := newStack(t, ns, newClock(), func(o *overlay.Options) { o.Encap = overlay.IPIP{Device: "np-ipip"} })
	s.send(node(1, false), node(2, false), cluster.Block{CIDR: block(1), Node: nodeName(1)})
	_, err = s.pass()
	require.ErrorIs(t, err, ipip.ErrDevice)
	require.ErrorIs(t, err, kernel.ErrExists)
	require.Contains(t, err.Error(), fmt.Sprintf("the tunnel from 198.18.0.1 to any remote is held by ipip device fx (index %d)", fx.Index))
	still, ok := ns.Link("fx")
	require.True(t, ok)
	require.Equal(t, fx.Index, still.Index)

	require.NoError(t, ns.DeleteLink(bg, fx.Index))
	br, err := ns.AddLink(bg, kernel.Link{Name: "np-ipip", Kind: kernel.KindBridge})
	require.NoError(t, err)
	s = newStack(t, ns, newClock(), func(o *overlay.Options) { o.Encap = overlay.IPIP{Device: "np-ipip"} })
	s.send(node(1, false), node(2, false))
	_, err = s.pass()
	require.ErrorIs(t, err, ipip.ErrDevice)
	require.Contains(t, err.Error(), fmt.Sprintf("the name is taken by a bridge link (index %d), which is not ours", br.Index))
	d := newStack(t, ns, newClock(), func(o *overlay.Options) { o.Encap = overlay.IPIP{Device: "np-ipip"}; o.Disabled = true })
	require.NoError(t, d.converge())
	still, ok = ns.Link("np-ipip")
	require.True(t, ok, "a Disabled Manager deletes no foreign link")
	require.Equal(t, br.Index, still.Index)
}

// TestNoBlackholes: Options.NoBlackholes gives this node's block no
// blackhole; the remote blocks are routed as before.
func TestNoBlackholes(t *testing.T) {
	ns := fakeHost(t, true)
	s := newStack(t, ns, newClock(), func(o *overlay.Options) { o.NoBlackholes = true })
	for n := 1; n <= 2; n++ {
		s.send(node(n, false), cluster.Block{CIDR: block(n), Node: nodeName(n)})
	}
	require.NoError(t, s.converge())
	require.Equal(t, []string{"10.244.2.0/24 via 198.18.0.2 dev tunl0 onlink mtu 1480"}, routes(t, ns))
	st := s.m.Stats()
	require.Zero(t, st.Blackholes)
	require.Equal(t, 1, st.Unrouted)
}
