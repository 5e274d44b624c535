//go:build linux

package kernel

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelWireGuard reads and configures WireGuard devices through the
// WireGuard capability of a real namespace. Where the kernel has no
// WireGuard module (this project's machines), every method fails with
// ErrNotSupported, which the test shows and says; where it has one, it
// checks WireGuard's semantics on a real device. Bad input fails with
// ErrInvalid either way, and a closed Namespace with ErrClosed.
func TestKernelWireGuard(t *testing.T) {
	e := newKernelEnv(t)
	ctx := context.Background()
	port := 70000
	err := e.ns.ConfigureWireGuard(ctx, "np-wg", WireGuardConfig{ListenPort: &port})
	assert.ErrorIs(t, err, ErrInvalid)
	err = e.ns.ConfigureWireGuard(ctx, "np/wg", WireGuardConfig{})
	assert.ErrorIs(t, err, ErrInvalid)

	_, err = e.ns.WireGuardDevice(ctx, "np-wg")
	if errors.Is(err, ErrNotSupported) {
		t.Logf("this kernel has no WireGuard module: the WireGuard capability says so: %v", err)
		err = e.ns.ConfigureWireGuard(ctx, "np-wg", WireGuardConfig{})
		assert.ErrorIs(t, err, ErrNotSupported)
		_, err = e.ns.AddLink(ctx, Link{Name: "np-wg", Kind: KindWireGuard})
		assert.ErrorIs(t, err, ErrNotSupported, "no wireguard links either")
		_, err = e.ns.WireGuardDevice(ctx, "v0")
		assert.ErrorIs(t, err, ErrNotSupported, "not even for another link")
	} else {
		t.Log("this kernel has WireGuard: checking its semantics")
		kernelWireGuardSemantics(t, e)
	}

	require.NoError(t, e.ns.Close())
	_, err = e.ns.WireGuardDevice(ctx, "np-wg")
	assert.ErrorIs(t, err, ErrClosed)
}

// kernelWireGuardSemantics checks a real device: a missing one and
// another kind of link are not found; unset fields stay; a prefix given to
// one peer leaves the other; the device goes with its link.
func kernelWireGuardSemantics(t *testing.T, e *kernelEnv) {
	ctx := context.Background()
	_, err := e.ns.WireGuardDevice(ctx, "np-wg")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = e.ns.WireGuardDevice(ctx, "v0")
	assert.ErrorIs(t, err, ErrNotFound, "a veth is no WireGuard device")
	l, err := e.ns.AddLink(ctx, Link{Name: "np-wg", Kind: KindWireGuard, MTU: 1420})
	require.NoError(t, err)
	var priv WireGuardKey
	priv[0], priv[31] = 0x48, 0x40 // clamped
	a, b := WireGuardKey{1, 2, 3}, WireGuardKey{4, 5, 6}
	port, mark, ka := 51820, uint32(0x100), 25*time.Second
	p1, p2 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("fd00:1::/64")
	require.NoError(t, e.ns.ConfigureWireGuard(ctx, "np-wg", WireGuardConfig{PrivateKey: &priv, ListenPort: &port, FirewallMark: &mark,
		Peers: []WireGuardPeerConfig{
			{PublicKey: a, Endpoint: netip.MustParseAddrPort("10.255.0.2:51820"), PersistentKeepalive: &ka, AllowedIPs: []netip.Prefix{p1, p2}},
			{PublicKey: b, UpdateOnly: true},
		}}))
	d, err := e.ns.WireGuardDevice(ctx, "np-wg")
	require.NoError(t, err)
	assert.Equal(t, priv, d.PrivateKey)
	assert.False(t, d.PublicKey.IsZero())
	assert.Equal(t, port, d.ListenPort)
	assert.Equal(t, mark, d.FirewallMark)
	require.Len(t, d.Peers, 1, "UpdateOnly skips an unknown peer")
	assert.Equal(t, ka, d.Peers[0].PersistentKeepalive)
	assert.ElementsMatch(t, []netip.Prefix{p1, p2}, d.Peers[0].AllowedIPs)

	require.NoError(t, e.ns.ConfigureWireGuard(ctx, "np-wg", WireGuardConfig{Peers: []WireGuardPeerConfig{{PublicKey: b, AllowedIPs: []netip.Prefix{p2}}}}))
	d, err = e.ns.WireGuardDevice(ctx, "np-wg")
	require.NoError(t, err)
	assert.Equal(t, port, d.ListenPort, "unset fields stay")
	for _, p := range d.Peers {
		if p.PublicKey == a {
			assert.Equal(t, []netip.Prefix{p1}, p.AllowedIPs, "p2 left a")
		}
	}
	require.NoError(t, e.ns.DeleteLink(ctx, l.Index))
	_, err = e.ns.WireGuardDevice(ctx, "np-wg")
	assert.ErrorIs(t, err, ErrNotFound)
}
