package kernelfake

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
)

func withWireGuard() *Namespace {
	return New(Options{Kinds: append(DefaultKinds(), kernel.KindWireGuard)})
}

// TestWireGuardWithoutTheModule: a namespace whose kinds lack wireguard
// (this project's machines) answers every WireGuard call with
// kernel.ErrNotSupported, as the kernel without the module.
func TestWireGuardWithoutTheModule(t *testing.T) {
	ns := New(Options{})
	_, err := ns.WireGuardDevice(bg, "wg0")
	assert.ErrorIs(t, err, kernel.ErrNotSupported)
	assert.ErrorIs(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{}), kernel.ErrNotSupported)
	assert.Equal(t, 1, ns.Calls(OpWireGuardDevice))
}

// TestWireGuardSemantics checks the configuration semantics: unset
// fields stay, UpdateOnly skips an unknown peer, an allowed IP given to
// one peer leaves the other, ReplaceAllowedIPs, Remove, ReplacePeers
// (every peer made anew), the public key derived and a peer with it
// ignored, and the device's life with its link.
func TestWireGuardSemantics(t *testing.T) {
	ns := withWireGuard()
	_, err := ns.WireGuardDevice(bg, "wg0")
	assert.ErrorIs(t, err, kernel.ErrNotFound)
	_, err = ns.WireGuardDevice(bg, "lo")
	assert.ErrorIs(t, err, kernel.ErrNotFound, "lo is no WireGuard device")
	l, err := ns.AddLink(bg, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard, MTU: 1420})
	require.NoError(t, err)
	d, err := ns.WireGuardDevice(bg, "wg0")
	require.NoError(t, err)
	assert.Equal(t, kernel.WireGuardDevice{Name: "wg0"}, d, "a new device is empty")
	ns.ResetCounts()

	priv := kernel.WireGuardKey{0x48, 31: 0x40}
	a, b, c := kernel.WireGuardKey{1}, kernel.WireGuardKey{2}, kernel.WireGuardKey{3}
	port, mark, ka := 51820, uint32(0x100), 25*time.Second
	p1, p2, p3 := pfx("10.0.1.0/24"), pfx("fd00:1::/64"), pfx("10.0.3.0/24")
	ep := netip.MustParseAddrPort("198.18.0.2:51820")
	require.NoError(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{PrivateKey: &priv, ListenPort: &port, FirewallMark: &mark,
		Peers: []kernel.WireGuardPeerConfig{
			{PublicKey: a, Endpoint: ep, PersistentKeepalive: &ka, AllowedIPs: []netip.Prefix{pfx("10.0.1.9/24"), p2}},
			{PublicKey: b, UpdateOnly: true},
		}}))
	assert.Equal(t, 3, ns.Writes(), "two peers and the device's fields: one write each")
	d, err = ns.WireGuardDevice(bg, "wg0")
	require.NoError(t, err)
	assert.Equal(t, priv, d.PrivateKey)
	assert.Equal(t, publicKey(priv), d.PublicKey)
	assert.False(t, d.PublicKey.IsZero())
	assert.Equal(t, port, d.ListenPort)
	assert.Equal(t, mark, d.FirewallMark)
	require.Equal(t, []kernel.WireGuardPeer{{PublicKey: a, Endpoint: ep, PersistentKeepalive: ka, AllowedIPs: []netip.Prefix{p1, p2}}}, d.Peers,
		"UpdateOnly skipped b; host bits cleared")

	// c takes p2 from a; a's own key is ignored; unset fields stay.
	require.NoError(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{
		{PublicKey: c, AllowedIPs: []netip.Prefix{p2}},
		{PublicKey: d.PublicKey, AllowedIPs: []netip.Prefix{p3}},
	}}))
	d, _ = ns.WireGuardDevice(bg, "wg0")
	require.Len(t, d.Peers, 2)
	assert.Equal(t, []netip.Prefix{p1}, d.Peers[0].AllowedIPs)
	assert.Equal(t, []netip.Prefix{p2}, d.Peers[1].AllowedIPs)
	assert.Equal(t, ep, d.Peers[0].Endpoint)
	assert.Equal(t, port, d.ListenPort)

	// ReplaceAllowedIPs, then Remove.
	require.NoError(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{
		{PublicKey: a, ReplaceAllowedIPs: true, AllowedIPs: []netip.Prefix{p3}},
		{PublicKey: c, Remove: true},
	}}))
	d, _ = ns.WireGuardDevice(bg, "wg0")
	require.Len(t, d.Peers, 1)
	assert.Equal(t, []netip.Prefix{p3}, d.Peers[0].AllowedIPs)

	// ReplacePeers: every peer made anew.
	require.NoError(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{ReplacePeers: true,
		Peers: []kernel.WireGuardPeerConfig{{PublicKey: a}, {PublicKey: b}}}))
	d, _ = ns.WireGuardDevice(bg, "wg0")
	assert.Equal(t, []kernel.WireGuardPeer{{PublicKey: a}, {PublicKey: b}}, d.Peers)

	// Counters, as traffic would set them.
	at := time.Unix(1000, 0)
	assert.True(t, ns.SetWireGuardPeerStats("wg0", b, at, 10, 20))
	assert.False(t, ns.SetWireGuardPeerStats("wg0", c, at, 10, 20))
	d, _ = ns.WireGuardDevice(bg, "wg0")
	assert.Equal(t, at, d.Peers[1].LastHandshake)
	assert.Equal(t, int64(20), d.Peers[1].TransmitBytes)

	// The device goes with its link; a new link is a new device.
	require.NoError(t, ns.DeleteLink(bg, l.Index))
	_, err = ns.WireGuardDevice(bg, "wg0")
	assert.ErrorIs(t, err, kernel.ErrNotFound)
	assert.ErrorIs(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{}), kernel.ErrNotFound)
	_, err = ns.AddLink(bg, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard})
	require.NoError(t, err)
	d, _ = ns.WireGuardDevice(bg, "wg0")
	assert.Equal(t, kernel.WireGuardDevice{Name: "wg0"}, d)
}

// TestWireGuardBadInputAndFaults: bad input changes nothing; Fail and
// Refuse reach the WireGuard calls as every other (a refused peer stops
// the change there); Admin is neither counted nor failed.
func TestWireGuardBadInputAndFaults(t *testing.T) {
	ns := withWireGuard()
	_, err := ns.AddLink(bg, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard})
	require.NoError(t, err)
	a, b := kernel.WireGuardKey{1}, kernel.WireGuardKey{2}
	bad := 90000
	assert.ErrorIs(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{ListenPort: &bad,
		Peers: []kernel.WireGuardPeerConfig{{PublicKey: a}}}), kernel.ErrInvalid)
	half := 1500 * time.Millisecond
	assert.ErrorIs(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{
		Peers: []kernel.WireGuardPeerConfig{{PublicKey: a, PersistentKeepalive: &half}}}), kernel.ErrInvalid)
	assert.ErrorIs(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{
		Peers: []kernel.WireGuardPeerConfig{{PublicKey: a, Endpoint: netip.MustParseAddrPort("10.0.0.1:0")}}}), kernel.ErrInvalid)
	d, _ := ns.WireGuardDevice(bg, "wg0")
	assert.Empty(t, d.Peers)

	ns.Fail(OpConfigureWireGuard, 1, syscall.ENOMEM)
	err = ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{{PublicKey: a}}})
	assert.ErrorIs(t, err, syscall.ENOMEM)
	ns.Fail(OpWireGuardDevice, 1, nil)
	_, err = ns.WireGuardDevice(bg, "wg0")
	assert.ErrorIs(t, err, ErrInjected)

	refused := errors.New("no")
	ns.Refuse(func(op Op, obj any) error {
		if pc, ok := obj.(kernel.WireGuardPeerConfig); ok && op == OpConfigureWireGuard && pc.PublicKey == b {
			return refused
		}
		return nil
	})
	err = ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{{PublicKey: a}, {PublicKey: b}, {PublicKey: kernel.WireGuardKey{3}}}})
	assert.ErrorIs(t, err, refused)
	d, _ = ns.WireGuardDevice(bg, "wg0")
	assert.Equal(t, []kernel.WireGuardPeer{{PublicKey: a}}, d.Peers, "the peers before the refused one are applied, not those after")
	ns.ClearFailures()

	ns.ResetCounts()
	require.NoError(t, ns.Admin().ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{{PublicKey: a, Remove: true}}}))
	assert.Zero(t, ns.Writes())
	require.NoError(t, ns.ConfigureWireGuard(bg, "wg0", kernel.WireGuardConfig{}))
	assert.Equal(t, 1, ns.Calls(OpConfigureWireGuard), "a change of nothing counts one")
}
