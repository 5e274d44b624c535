package wireguard

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"
)

// stubBind is a conn.Bind that opens no socket, so a real wireguard-go
// device runs in a unit test without touching any network.
type stubBind struct{}

func (stubBind) Open(p uint16) ([]conn.ReceiveFunc, uint16, error) { return nil, p, nil }
func (stubBind) Close() error                                      { return nil }
func (stubBind) SetMark(uint32) error                              { return nil }
func (stubBind) Send([][]byte, conn.Endpoint) error                { return nil }
func (stubBind) BatchSize() int                                    { return 1 }
func (stubBind) ParseEndpoint(s string) (conn.Endpoint, error) {
	return conn.NewStdNetBind().ParseEndpoint(s)
}

func mustKey(t *testing.T) PrivateKey {
	t.Helper()
	k, err := GeneratePrivateKey()
	require.NoError(t, err)
	return k
}

// The UAPI codec against the real userspace implementation: what encodeUAPI
// writes, wireguard-go applies, and parseUAPI reads back the same.
func TestUAPIRoundTripWithWireGuardGo(t *testing.T) {
	dev := device.NewDevice(tuntest.NewChannelTUN().TUN(), stubBind{}, device.NewLogger(device.LogLevelSilent, ""))
	defer dev.Close()

	priv := mustKey(t)
	p1, p2 := mustKey(t).Public(), mustKey(t).Public()
	port, mark := 51820, uint32(0x100000)
	ka := 25 * time.Second
	cfg := DeviceConfig{PrivateKey: &priv, ListenPort: &port, FirewallMark: &mark, Peers: []PeerConfig{
		{PublicKey: p1, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"), PersistentKeepalive: &ka, ReplaceAllowedIPs: true,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:10:244:2::/64")}},
		{PublicKey: p2, Endpoint: netip.MustParseAddrPort("[fd00:198:18::3]:51821"), ReplaceAllowedIPs: true,
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24")}},
	}}
	var buf bytes.Buffer
	require.NoError(t, encodeUAPI(&buf, cfg))
	require.NoError(t, dev.IpcSetOperation(&buf))

	buf.Reset()
	require.NoError(t, dev.IpcGetOperation(&buf))
	st, err := parseUAPI(&buf)
	require.NoError(t, err)
	assert.Equal(t, priv, st.PrivateKey)
	assert.Equal(t, priv.Public(), st.PublicKey)
	assert.Equal(t, port, st.ListenPort)
	assert.Equal(t, mark, st.FirewallMark)
	require.Len(t, st.Peers, 2)
	byKey := map[PublicKey]PeerState{st.Peers[0].PublicKey: st.Peers[0], st.Peers[1].PublicKey: st.Peers[1]}
	assert.Equal(t, netip.MustParseAddrPort("198.18.0.2:51820"), byKey[p1].Endpoint)
	assert.Equal(t, ka, byKey[p1].PersistentKeepalive)
	assert.ElementsMatch(t, cfg.Peers[0].AllowedIPs, byKey[p1].AllowedIPs)
	assert.Equal(t, netip.MustParseAddrPort("[fd00:198:18::3]:51821"), byKey[p2].Endpoint)

	// Moving a prefix: WireGuard takes it from p1 when p2 gets it, which
	// the cache models the same way.
	cache := newCache(st)
	move := []PeerConfig{{PublicKey: p2, UpdateOnly: true, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}}}
	buf.Reset()
	require.NoError(t, encodeUAPI(&buf, DeviceConfig{Peers: move}))
	require.NoError(t, dev.IpcSetOperation(&buf))
	cache.apply(move)
	buf.Reset()
	require.NoError(t, dev.IpcGetOperation(&buf))
	st, err = parseUAPI(&buf)
	require.NoError(t, err)
	assert.Equal(t, cache.peers, newCache(st).peers)

	// Remove.
	buf.Reset()
	require.NoError(t, encodeUAPI(&buf, DeviceConfig{Peers: []PeerConfig{{PublicKey: p1, Remove: true}}}))
	require.NoError(t, dev.IpcSetOperation(&buf))
	buf.Reset()
	require.NoError(t, dev.IpcGetOperation(&buf))
	st, err = parseUAPI(&buf)
	require.NoError(t, err)
	require.Len(t, st.Peers, 1)
	assert.Equal(t, p2, st.Peers[0].PublicKey)
}

func TestParseUAPIRefusesGarbage(t *testing.T) {
	for _, in := range []string{"no equals sign\n", "private_key=zz\n", "listen_port=x\n", "errno=22\n",
		"public_key=" + hexKey(mustKey(t).Public()) + "\nallowed_ip=10.0.0.0/99\n"} {
		_, err := parseUAPI(bytes.NewBufferString(in))
		assert.ErrorIs(t, err, ErrDevice, "%q", in)
	}
}

func TestDiffPeersWritesOnlyTheDifference(t *testing.T) {
	k1, k2, k3 := mustKey(t).Public(), mustKey(t).Public(), mustKey(t).Public()
	ep := netip.MustParseAddrPort("198.18.0.2:51820")
	pfx := netip.MustParsePrefix
	have := map[PublicKey]*cachedPeer{
		k1: {endpoint: ep, allowed: []netip.Prefix{pfx("10.0.1.0/24")}},
		k2: {endpoint: ep, allowed: []netip.Prefix{pfx("10.0.2.0/24")}},
	}
	want := map[PublicKey]*peerSpec{
		k1: {key: k1, endpoint: ep, allowed: []netip.Prefix{pfx("10.0.1.0/24")}},
		k3: {key: k3, endpoint: ep, allowed: []netip.Prefix{pfx("10.0.3.0/24")}},
	}
	ops := diffPeers(want, have, 0)
	require.Len(t, ops, 2)
	assert.True(t, ops[0].Remove)
	assert.Equal(t, k2, ops[0].PublicKey)
	assert.Equal(t, k3, ops[1].PublicKey)
	assert.True(t, ops[1].ReplaceAllowedIPs)

	c := &devCache{peers: have}
	c.apply(ops)
	assert.Empty(t, diffPeers(want, c.peers, 0))

	// One change: only that peer, only what changed.
	want[k1] = &peerSpec{key: k1, endpoint: ep, allowed: []netip.Prefix{pfx("10.0.1.0/24"), pfx("10.0.9.0/24")}}
	ops = diffPeers(want, c.peers, 0)
	require.Len(t, ops, 1)
	assert.True(t, ops[0].UpdateOnly)
	assert.False(t, ops[0].Endpoint.IsValid())
	assert.Nil(t, ops[0].PersistentKeepalive)
	assert.Len(t, ops[0].AllowedIPs, 2)

	assert.Len(t, chunk(make([]PeerConfig, 250), 100), 3)
	assert.Empty(t, chunk(nil, 100))
}
