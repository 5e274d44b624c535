//go:build linux

package kernelfake

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// TestKernelFakeWireGuardMatchesKernel runs one WireGuard script on a real
// namespace and on a fake that models this kernel (a fake without the
// wireguard kind when the kernel has no module, with it when it has one),
// and compares the sentinel of every answer and, where the kernel has
// WireGuard, the devices read back.
func TestKernelFakeWireGuardMatchesKernel(t *testing.T) {
	real, err := kernel.Open(kerneltest.NewNS(t).Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = real.Close() })
	_, probe := real.WireGuardDevice(bg, "np-wg")
	supported := !errors.Is(probe, kernel.ErrNotSupported)
	opts := Options{}
	if supported {
		opts.Kinds = append(DefaultKinds(), kernel.KindWireGuard)
		t.Log("this kernel has WireGuard: comparing devices")
	} else {
		t.Logf("this kernel has no WireGuard module; both sides must say so: %v", probe)
	}
	fake := New(opts)
	sentinel := func(err error) string {
		for _, s := range []struct {
			err  error
			name string
		}{{kernel.ErrInvalid, "Invalid"}, {kernel.ErrNotFound, "NotFound"}, {kernel.ErrExists, "Exists"}, {kernel.ErrNotSupported, "NotSupported"}} {
			if errors.Is(err, s.err) {
				return s.name
			}
		}
		if err != nil {
			return "other: " + err.Error()
		}
		return "ok"
	}
	a, b := kernel.WireGuardKey{1, 2, 3}, kernel.WireGuardKey{4, 5, 6}
	port, bad := 51820, -1
	p1, p2 := netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("fd00:1::/64")
	steps := []struct {
		name string
		run  func(k kernel.Kernel) (string, error)
	}{
		{"read missing", func(k kernel.Kernel) (string, error) { _, err := k.WireGuardDevice(bg, "np-wg"); return "", err }},
		{"bad port", func(k kernel.Kernel) (string, error) {
			return "", k.ConfigureWireGuard(bg, "np-wg", kernel.WireGuardConfig{ListenPort: &bad})
		}},
		{"add link", func(k kernel.Kernel) (string, error) {
			_, err := k.AddLink(bg, kernel.Link{Name: "np-wg", Kind: kernel.KindWireGuard, MTU: 1420})
			return "", err
		}},
		{"lo", func(k kernel.Kernel) (string, error) { _, err := k.WireGuardDevice(bg, "lo"); return "", err }},
		{"configure", func(k kernel.Kernel) (string, error) {
			return "", k.ConfigureWireGuard(bg, "np-wg", kernel.WireGuardConfig{ListenPort: &port, Peers: []kernel.WireGuardPeerConfig{
				{PublicKey: a, Endpoint: netip.MustParseAddrPort("198.18.0.2:51820"), AllowedIPs: []netip.Prefix{p1, p2}},
				{PublicKey: b, AllowedIPs: []netip.Prefix{p2}},
			}})
		}},
		{"read", func(k kernel.Kernel) (string, error) {
			d, err := k.WireGuardDevice(bg, "np-wg")
			d.PublicKey, d.PrivateKey = kernel.WireGuardKey{}, kernel.WireGuardKey{}
			return fmtDevice(d), err
		}},
	}
	for _, s := range steps {
		rs, rerr := s.run(real)
		fs, ferr := s.run(fake)
		assert.Equal(t, sentinel(rerr), sentinel(ferr), "%s: kernel %v, fake %v", s.name, rerr, ferr)
		assert.Equal(t, rs, fs, s.name)
	}
}

// fmtDevice renders a device for comparison.
func fmtDevice(d kernel.WireGuardDevice) string {
	var b []byte
	b = append(b, d.Name...)
	for _, p := range d.Peers {
		b = append(b, " peer "+p.PublicKey.String()+" "+p.Endpoint.String()...)
		for _, a := range p.AllowedIPs {
			b = append(b, " "+a.String()...)
		}
	}
	return string(b)
}
