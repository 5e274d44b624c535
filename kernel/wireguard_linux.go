//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// wireGuardFamily is the generic netlink family of the kernel's WireGuard.
const wireGuardFamily = "wireguard"

// WireGuardDevice implements WireGuard: it reads the device through the
// kernel's WireGuard generic netlink family (wgctrl's client, opened
// inside the namespace on first use and closed with it). A name that is
// not a link of KindWireGuard in the namespace wraps ErrNotFound; a kernel
// without the WireGuard module wraps ErrNotSupported.
func (ns *Namespace) WireGuardDevice(ctx context.Context, name string) (WireGuardDevice, error) {
	var dev WireGuardDevice
	err := ns.withWireGuard(ctx, name, func(c *wgctrl.Client) error {
		wd, err := c.Device(name)
		if err != nil {
			return err
		}
		dev = fromWGDevice(wd)
		return nil
	})
	if err != nil {
		return WireGuardDevice{}, wireGuardError("read", name, err)
	}
	return dev, nil
}

// ConfigureWireGuard implements WireGuard: it validates cfg (see
// WireGuardConfig.Validate) and sends it in one request to the kernel's
// WireGuard, which applies the peers in order.
func (ns *Namespace) ConfigureWireGuard(ctx context.Context, name string, cfg WireGuardConfig) error {
	if err := cfg.Validate(name); err != nil {
		return err
	}
	err := ns.withWireGuard(ctx, name, func(c *wgctrl.Client) error { return c.ConfigureDevice(name, toWGConfig(&cfg)) })
	if err != nil {
		return wireGuardError("configure", name, err)
	}
	return nil
}

// withWireGuard runs fn with the namespace's WireGuard client inside a
// call, once it checked that the kernel has WireGuard and that name is a
// WireGuard link of the namespace (wgctrl would also reach a userspace
// device's control socket, which belongs to no namespace).
func (ns *Namespace) withWireGuard(ctx context.Context, name string, fn func(c *wgctrl.Client) error) error {
	ctx = orBackground(ctx)
	if err := ns.acquire(ctx); err != nil {
		return err
	}
	defer ns.release()
	c, err := ns.wireGuardClient()
	if err != nil {
		return err
	}
	l, err := ns.LinkByName(ctx, name)
	if err != nil {
		return err
	}
	if l.Kind != KindWireGuard {
		return errs.Also(fmt.Errorf("%s is a %s link, not a wireguard one", name, l.Kind), ErrNotFound)
	}
	return fn(c)
}

// wireGuardClient returns the WireGuard client, opened inside the
// namespace on first use, or an error wrapping ErrNotSupported when the
// kernel has no WireGuard (asked again at every call until it has: the
// module may be loaded later). The caller holds a call.
func (ns *Namespace) wireGuardClient() (*wgctrl.Client, error) {
	ns.initMu.Lock()
	defer ns.initMu.Unlock()
	if ns.wg != nil {
		return ns.wg, nil
	}
	var c *wgctrl.Client
	err := ns.do(func() error {
		if _, err := netlink.GenlFamilyGet(wireGuardFamily); err != nil {
			// Not %w: the family's ENOENT must not read as a missing device.
			return errs.Also(fmt.Errorf("no %s generic netlink family (no WireGuard module): %v", wireGuardFamily, err), ErrNotSupported)
		}
		var err error
		c, err = wgctrl.New()
		return err
	})
	if err != nil {
		return nil, err
	}
	ns.wg = c
	return c, nil
}

// wireGuardError names the operation and the device, and attaches
// ErrNotFound to wgctrl's "no such device".
func wireGuardError(op, name string, err error) error {
	err = fmt.Errorf("kernel: %s wireguard device %s: %w", op, name, err)
	if errors.Is(err, os.ErrNotExist) && !errors.Is(err, ErrNotFound) {
		err = errs.Also(err, ErrNotFound)
	}
	return classify(err)
}

// fromWGDevice converts wgctrl's view of a device.
func fromWGDevice(wd *wgtypes.Device) WireGuardDevice {
	d := WireGuardDevice{Name: wd.Name, PrivateKey: WireGuardKey(wd.PrivateKey), PublicKey: WireGuardKey(wd.PublicKey),
		ListenPort: wd.ListenPort, FirewallMark: uint32(wd.FirewallMark)}
	for _, p := range wd.Peers {
		wp := WireGuardPeer{PublicKey: WireGuardKey(p.PublicKey), PersistentKeepalive: p.PersistentKeepaliveInterval,
			LastHandshake: p.LastHandshakeTime, ReceiveBytes: p.ReceiveBytes, TransmitBytes: p.TransmitBytes}
		if p.Endpoint != nil {
			ap := p.Endpoint.AddrPort()
			wp.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
		for _, n := range p.AllowedIPs {
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ones, bits := n.Mask.Size()
			if bits == 32 {
				a = a.Unmap()
			}
			wp.AllowedIPs = append(wp.AllowedIPs, netip.PrefixFrom(a, ones))
		}
		d.Peers = append(d.Peers, wp)
	}
	return d
}

// toWGConfig converts a change to wgctrl's form.
func toWGConfig(cfg *WireGuardConfig) wgtypes.Config {
	wc := wgtypes.Config{ListenPort: cfg.ListenPort, ReplacePeers: cfg.ReplacePeers}
	if cfg.PrivateKey != nil {
		k := wgtypes.Key(*cfg.PrivateKey)
		wc.PrivateKey = &k
	}
	if cfg.FirewallMark != nil {
		m := int(*cfg.FirewallMark)
		wc.FirewallMark = &m
	}
	wc.Peers = make([]wgtypes.PeerConfig, len(cfg.Peers))
	for i, p := range cfg.Peers {
		pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), Remove: p.Remove, UpdateOnly: p.UpdateOnly,
			PersistentKeepaliveInterval: p.PersistentKeepalive, ReplaceAllowedIPs: p.ReplaceAllowedIPs}
		if p.Endpoint.IsValid() {
			pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
		}
		for _, a := range p.AllowedIPs {
			a = a.Masked()
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
		}
		wc.Peers[i] = pc
	}
	return wc
}
