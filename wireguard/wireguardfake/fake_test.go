package wireguardfake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

// TestUserspaceDeviceLifetime: a device is a tun link with its carrier
// and a configuration; a taken name is foreign; Close removes both, and a
// closed device refuses calls; a failed Open leaves nothing behind.
func TestUserspaceDeviceLifetime(t *testing.T) {
	ctx := context.Background()
	ns := kernelfake.New(kernelfake.Options{})
	u := wireguardfake.New(ns)
	p := u.Provider()
	assert.Equal(t, wireguard.ModeUserspace, p.Mode())
	dev, err := p.Open(ctx, wireguard.DeviceSpec{Name: "wg0", MTU: 1420})
	require.NoError(t, err)
	assert.Equal(t, wireguard.ModeUserspace, dev.Mode())
	l, ok := ns.Link("wg0")
	require.True(t, ok)
	assert.Equal(t, kernel.KindTUN, l.Kind)
	_, err = p.Open(ctx, wireguard.DeviceSpec{Name: "wg0", MTU: 1420})
	assert.ErrorIs(t, err, wireguard.ErrForeignDevice)

	port := 51820
	require.NoError(t, dev.Configure(ctx, wireguard.DeviceConfig{ListenPort: &port}))
	st, err := dev.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, 51820, st.ListenPort)

	require.NoError(t, dev.Close())
	_, ok = ns.Link("wg0")
	assert.False(t, ok)
	_, err = u.Devices().WireGuardDevice(ctx, "wg0")
	assert.ErrorIs(t, err, kernel.ErrNotFound, "the configuration went with the device")
	_, err = dev.State(ctx)
	assert.ErrorIs(t, err, wireguard.ErrClosed)
	assert.NoError(t, dev.Close(), "idempotent")

	u.Devices().Fail(kernelfake.OpAddLink, 1, nil)
	_, err = p.Open(ctx, wireguard.DeviceSpec{Name: "wg1", MTU: 1420})
	assert.ErrorIs(t, err, kernelfake.ErrInjected)
	_, ok = ns.Link("wg1")
	assert.False(t, ok)
}
