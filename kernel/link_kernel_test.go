//go:build linux

package kernel

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

func TestKernelLinks(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	hwaddr := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 1}

	br, err := e.ns.AddLink(ctx, Link{Name: "np-br0", Kind: KindBridge, MTU: 1400, MAC: hwaddr})
	require.NoError(t, err)
	assert.Positive(t, br.Index)
	assert.Equal(t, Link{Index: br.Index, Name: "np-br0", Kind: KindBridge, Encap: EncapEthernet, MTU: 1400, MAC: hwaddr}, br, "down, as asked")
	assert.Equal(t, LinkDown, br.State())

	veth, err := e.ns.AddLink(ctx, Link{Name: "np-va", Kind: KindVeth, Veth: &Veth{PeerName: "np-vb"}, MasterIndex: br.Index})
	require.NoError(t, err)
	assert.Equal(t, KindVeth, veth.Kind)
	assert.Equal(t, br.Index, veth.MasterIndex)
	assert.Nil(t, veth.Veth, "a dump does not report the peer")
	peer, err := e.ns.LinkByName(ctx, "np-vb")
	require.NoError(t, err)
	assert.Equal(t, KindVeth, peer.Kind)

	vx, err := e.ns.AddLink(ctx, Link{Name: "np-vx", Kind: KindVXLAN, VXLAN: &VXLAN{VNI: 4096, Port: 4789, ParentIndex: e.links.v0,
		Local: testAddr4.Addr()}})
	require.NoError(t, err)
	assert.Equal(t, &VXLAN{VNI: 4096, Port: 4789, ParentIndex: e.links.v0, Local: testAddr4.Addr()}, vx.VXLAN)
	assert.Equal(t, 1500-50, vx.MTU, "the kernel sizes a VXLAN device by its parent")
	vx6, err := e.ns.AddLink(ctx, Link{Name: "np-vx6", Kind: KindVXLAN, VXLAN: &VXLAN{VNI: 7, Local: testAddr6.Addr(), Learning: true}})
	require.NoError(t, err)
	assert.Equal(t, uint32(7), vx6.VXLAN.VNI)
	assert.Equal(t, testAddr6.Addr(), vx6.VXLAN.Local)
	assert.True(t, vx6.VXLAN.Learning)

	// Taken names, bad input.
	_, err = e.ns.AddLink(ctx, Link{Name: "np-br0", Kind: KindBridge})
	assert.ErrorIs(t, err, ErrExists)
	_, err = e.ns.AddLink(ctx, Link{Name: "np-bad/name", Kind: KindBridge})
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = e.ns.AddLink(ctx, Link{Name: "np-tun", Kind: KindTUN})
	assert.ErrorIs(t, err, ErrInvalid)

	// Kinds this kernel may lack: the error says so; if a kernel has them,
	// they are created.
	for _, l := range []Link{
		{Name: "np-ipip", Kind: KindIPIP, IPTunnel: &IPTunnel{Local: testAddr4.Addr(), Remote: netip.MustParseAddr("192.0.2.9")}},
		{Name: "np-wg", Kind: KindWireGuard, MTU: 1420},
	} {
		got, err := e.ns.AddLink(ctx, l)
		if err != nil {
			assert.ErrorIs(t, err, ErrNotSupported, l.Kind)
			t.Logf("this kernel has no %s links: %v", l.Kind, err)
			continue
		}
		assert.Equal(t, l.Kind, got.Kind)
		if l.IPTunnel != nil {
			assert.Equal(t, l.IPTunnel, got.IPTunnel)
		}
	}

	ls, err := e.ns.Links(ctx)
	require.NoError(t, err)
	byName := map[string]Link{}
	for _, l := range ls {
		byName[l.Name] = l
	}
	for _, name := range []string{"lo", "v0", "v1", "np-br0", "np-va", "np-vb", "np-vx", "np-vx6"} {
		assert.Contains(t, byName, name)
	}
	assert.Equal(t, KindDevice, byName["lo"].Kind)
	lo := byName["lo"]
	assert.Equal(t, LinkUp, lo.State())
	waitLinkState(t, e.ns, "v0", LinkUp) // carrier comes with the peer, a moment after it is up
	listed := byName["np-br0"]
	assert.Equal(t, 1500, listed.MTU, "a bridge takes the MTU of its ports (the veth's 1500)")
	listed.MTU = br.MTU
	assert.Equal(t, br, listed)

	// Setters: up, MTU, MAC; carrier follows the peer.
	require.NoError(t, e.ns.SetLinkUp(ctx, veth.Index, true))
	got, err := e.ns.LinkByName(ctx, "np-va")
	require.NoError(t, err)
	assert.True(t, got.AdminUp)
	assert.False(t, got.Running, "no carrier while the peer is down")
	assert.Equal(t, LinkDown, got.State())
	require.NoError(t, e.ns.SetLinkUp(ctx, peer.Index, true))
	waitLinkState(t, e.ns, "np-va", LinkUp)
	require.NoError(t, e.ns.SetLinkUp(ctx, veth.Index, false))
	require.NoError(t, e.ns.SetLinkMTU(ctx, veth.Index, 1280))
	mac2 := net.HardwareAddr{0x02, 0xbb, 0, 0, 0, 2}
	require.NoError(t, e.ns.SetLinkMAC(ctx, veth.Index, mac2))
	got, err = e.ns.LinkByName(ctx, "np-va")
	require.NoError(t, err)
	assert.False(t, got.AdminUp)
	assert.Equal(t, 1280, got.MTU)
	assert.Equal(t, mac2, got.MAC)
	assert.Error(t, e.ns.SetLinkMTU(ctx, veth.Index, 70_000), "out of the device's range")
	assert.ErrorIs(t, e.ns.SetLinkMTU(ctx, veth.Index, 0), ErrInvalid)
	assert.ErrorIs(t, e.ns.SetLinkMAC(ctx, veth.Index, nil), ErrInvalid)
	assert.ErrorIs(t, e.ns.SetLinkUp(ctx, 0, true), ErrInvalid)
	assert.ErrorIs(t, e.ns.SetLinkUp(ctx, 99999, true), ErrNotFound)
	assert.ErrorIs(t, e.ns.SetLinkMTU(ctx, 99999, 1400), ErrNotFound)

	// Delete: a veth takes its peer with it.
	require.NoError(t, e.ns.DeleteLink(ctx, veth.Index))
	_, err = e.ns.LinkByName(ctx, "np-vb")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorIs(t, e.ns.DeleteLink(ctx, veth.Index), ErrNotFound)
	_, err = e.ns.LinkByName(ctx, "np-nothere")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = e.ns.LinkByName(ctx, "")
	assert.ErrorIs(t, err, ErrInvalid)
}

// waitLinkState waits until the link called name is in state (carrier
// changes are applied asynchronously).
func waitLinkState(t *testing.T, ns *Namespace, name string, state LinkState) {
	t.Helper()
	var l Link
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var err error
		l, err = ns.LinkByName(context.Background(), name)
		require.NoError(t, err)
		if l.State() == state {
			return
		}
	}
	t.Fatalf("link %s is %v, not %v, after 10s: %+v", name, l.State(), state, l)
}

// A veth whose peer is created directly in another namespace.
func TestKernelLinksVethPeerInOtherNamespace(t *testing.T) {
	e := newKernelEnv(t)
	other := kerneltest.NewNS(t)
	ctx := context.Background()
	_, err := e.ns.AddLink(ctx, Link{Name: "np-here", Kind: KindVeth, Veth: &Veth{PeerName: "np-there", PeerNamespaceFD: int(other.NsHandle())}})
	require.NoError(t, err)
	_, err = e.ns.LinkByName(ctx, "np-there")
	assert.ErrorIs(t, err, ErrNotFound)
	o, err := OpenFD(int(other.NsHandle()))
	require.NoError(t, err)
	defer o.Close()
	l, err := o.LinkByName(ctx, "np-there")
	require.NoError(t, err)
	assert.Equal(t, KindVeth, l.Kind)
}

func TestKernelAddrs(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	require.NoError(t, e.ns.SetSysctl(ctx, "net/ipv6/conf/v1/accept_dad", "0"))
	v4 := Addr{LinkIndex: e.links.v1, Prefix: netip.MustParsePrefix("10.7.0.5/24")}
	v6 := Addr{LinkIndex: e.links.v1, Prefix: netip.MustParsePrefix("fd07::5/64")}
	for _, a := range []Addr{v4, v6} {
		require.NoError(t, e.ns.AddAddr(ctx, a))
		assert.ErrorIs(t, e.ns.AddAddr(ctx, a), ErrExists, "%s twice", a.Prefix)
	}
	for _, f := range []Family{IPv4, IPv6} {
		as, err := e.ns.Addrs(ctx, f)
		require.NoError(t, err)
		for _, a := range as {
			assert.Equal(t, f, a.Family())
		}
		want := map[Family][]Addr{
			IPv4: {v4, {LinkIndex: e.links.v0, Prefix: testAddr4}, {LinkIndex: 1, Prefix: netip.MustParsePrefix("127.0.0.1/8")}},
			IPv6: {v6, {LinkIndex: e.links.v0, Prefix: testAddr6}, {LinkIndex: 1, Prefix: netip.MustParsePrefix("::1/128")}},
		}[f]
		for _, a := range want {
			assert.Contains(t, as, a, "host bits kept: the address, not the network")
		}
	}
	require.NoError(t, e.ns.DeleteAddr(ctx, v4))
	require.NoError(t, e.ns.DeleteAddr(ctx, v6))
	assert.ErrorIs(t, e.ns.DeleteAddr(ctx, v4), ErrNotFound)
	assert.ErrorIs(t, e.ns.DeleteAddr(ctx, v6), ErrNotFound)
	as, err := e.ns.Addrs(ctx, IPv4)
	require.NoError(t, err)
	assert.False(t, slices.Contains(as, v4))
	assert.ErrorIs(t, e.ns.AddAddr(ctx, Addr{LinkIndex: 99999, Prefix: v4.Prefix}), ErrNotFound)
	assert.ErrorIs(t, e.ns.AddAddr(ctx, Addr{LinkIndex: e.links.v1}), ErrInvalid)
	_, err = e.ns.Addrs(ctx, 0)
	assert.ErrorIs(t, err, ErrInvalid)
}
