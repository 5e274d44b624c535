package wireguardfake_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

func key(t *testing.T) wireguard.PublicKey {
	k, err := wireguard.GeneratePrivateKey()
	require.NoError(t, err)
	return k.Public()
}

func TestConfigureHasWireGuardSemantics(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	wg := wireguardfake.New(ns)
	dev, err := wg.Provider().Open(context.Background(), wireguard.DeviceSpec{Name: "wg0", MTU: 1420})
	require.NoError(t, err)
	a, b, c := key(t), key(t), key(t)
	p1, p2 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24")
	ctx := context.Background()
	require.NoError(t, dev.Configure(ctx, wireguard.DeviceConfig{Peers: []wireguard.PeerConfig{
		{PublicKey: a, AllowedIPs: []netip.Prefix{p1, p2}},
		{PublicKey: b, UpdateOnly: true}, // unknown: skipped
	}}))
	st, _ := wg.State("wg0")
	require.Len(t, st.Peers, 1)

	// A prefix given to c leaves a.
	require.NoError(t, dev.Configure(ctx, wireguard.DeviceConfig{Peers: []wireguard.PeerConfig{{PublicKey: c, AllowedIPs: []netip.Prefix{p2}}}}))
	st, _ = wg.State("wg0")
	require.Len(t, st.Peers, 2)
	assert.Equal(t, []netip.Prefix{p1}, st.Peers[0].AllowedIPs)
	assert.Equal(t, []netip.Prefix{p2}, st.Peers[1].AllowedIPs)

	// ReplacePeers keeps only those named.
	require.NoError(t, dev.Configure(ctx, wireguard.DeviceConfig{ReplacePeers: true, Peers: []wireguard.PeerConfig{{PublicKey: c}}}))
	st, _ = wg.State("wg0")
	require.Len(t, st.Peers, 1)
	assert.Equal(t, c, st.Peers[0].PublicKey)
	assert.Equal(t, 3, wg.Calls(wireguardfake.OpConfigure))
}

func TestKernelClientSeesOnlyWireGuardLinks(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	wg := wireguardfake.New(ns)
	c, err := wg.NewClient()
	require.NoError(t, err)
	_, err = c.Device("wg0")
	assert.ErrorIs(t, err, os.ErrNotExist)
	l, err := ns.AddLink(context.Background(), kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard})
	require.NoError(t, err)
	port := 51820
	k := key(t)
	require.NoError(t, c.ConfigureDevice("wg0", wgtypes.Config{ListenPort: &port, Peers: []wgtypes.PeerConfig{{
		PublicKey: wgtypes.Key(k), Endpoint: &net.UDPAddr{IP: net.ParseIP("198.18.0.2"), Port: 51820},
		AllowedIPs: []net.IPNet{{IP: net.ParseIP("10.0.1.0").To4(), Mask: net.CIDRMask(24, 32)}}}}}))
	d, err := c.Device("wg0")
	require.NoError(t, err)
	assert.Equal(t, 51820, d.ListenPort)
	require.Len(t, d.Peers, 1)
	assert.Equal(t, "198.18.0.2:51820", d.Peers[0].Endpoint.String())

	// The link goes: so does the device.
	require.NoError(t, ns.DeleteLink(context.Background(), l.Index))
	_, err = c.Device("wg0")
	assert.ErrorIs(t, err, os.ErrNotExist)

	wg.Fail(wireguardfake.OpOpen, 1, nil)
	_, err = wg.NewClient()
	assert.ErrorIs(t, err, wireguardfake.ErrInjected)
}
