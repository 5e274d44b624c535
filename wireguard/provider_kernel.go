package wireguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/kernel"
)

// WGClient is the part of wgctrl's *wgctrl.Client that the kernel provider
// uses. wireguardfake has an in-memory one.
type WGClient interface {
	// Device reads the device called name.
	Device(name string) (*wgtypes.Device, error)
	// ConfigureDevice changes the device called name.
	ConfigureDevice(name string, cfg wgtypes.Config) error
	// Close releases the client.
	Close() error
}

// KernelProviderOptions configure NewKernelProvider.
type KernelProviderOptions struct {
	// Links reaches the namespace's links (a *kernel.Namespace, or a
	// kernelfake.Namespace whose Kinds include kernel.KindWireGuard).
	// Required.
	Links kernel.Links
	// Doer opens the wgctrl client inside the namespace (its generic
	// netlink socket stays there). Required unless NewClient is set.
	Doer kernel.Doer
	// NewClient, if set, opens the client instead (tests:
	// wireguardfake.Kernel.NewClient).
	NewClient func() (WGClient, error)
}

// NewKernelProvider returns the kernel provider: a link of type wireguard made
// with kernel.Links.AddLink and configured through wgctrl's netlink client.
// Where the kernel has no WireGuard module, Open fails with an error
// wrapping ErrNotSupported (AddLink's kernel.ErrNotSupported).
func NewKernelProvider(o KernelProviderOptions) Provider {
	return &kernelProvider{o: o}
}

type kernelProvider struct{ o KernelProviderOptions }

func (p *kernelProvider) Mode() Mode { return ModeKernel }

func (p *kernelProvider) newClient() (WGClient, error) {
	if p.o.NewClient != nil {
		return p.o.NewClient()
	}
	if p.o.Doer == nil {
		return nil, fmt.Errorf("%w: kernel provider without Doer or NewClient", ErrInvalidOptions)
	}
	var c *wgctrl.Client
	err := p.o.Doer.Do(func() (err error) {
		c, err = wgctrl.New()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: opening wgctrl: %w", ErrDevice, err)
	}
	return c, nil
}

func (p *kernelProvider) Open(ctx context.Context, spec DeviceSpec) (Device, error) {
	if p.o.Links == nil {
		return nil, fmt.Errorf("%w: kernel provider without Links", ErrInvalidOptions)
	}
	l, err := p.o.Links.LinkByName(ctx, spec.Name)
	switch {
	case err == nil && l.Kind != kernel.KindWireGuard:
		return nil, fmt.Errorf("%w: %s is a %s link", ErrForeignDevice, spec.Name, l.Kind)
	case err == nil:
	case errors.Is(err, kernel.ErrNotFound):
		l, err = p.o.Links.AddLink(ctx, kernel.Link{Name: spec.Name, Kind: kernel.KindWireGuard, MTU: spec.MTU})
		if errors.Is(err, kernel.ErrNotSupported) {
			return nil, fmt.Errorf("%w: %w", ErrNotSupported, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: creating %s: %w", ErrDevice, spec.Name, err)
		}
	default:
		return nil, err
	}
	c, err := p.newClient()
	if err != nil {
		return nil, err
	}
	return &kernelDevice{name: spec.Name, index: l.Index, links: p.o.Links, client: c}, nil
}

type kernelDevice struct {
	name   string
	index  int
	links  kernel.Links
	mu     sync.Mutex
	client WGClient
}

func (d *kernelDevice) Name() string { return d.name }
func (d *kernelDevice) Mode() Mode   { return ModeKernel }

func (d *kernelDevice) State(context.Context) (DeviceState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return DeviceState{}, ErrClosed
	}
	wd, err := d.client.Device(d.name)
	if err != nil {
		return DeviceState{}, err
	}
	return fromWGDevice(wd), nil
}

func (d *kernelDevice) Configure(_ context.Context, cfg DeviceConfig) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return ErrClosed
	}
	return d.client.ConfigureDevice(d.name, toWGConfig(cfg))
}

func (d *kernelDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return nil
	}
	err := d.client.Close()
	d.client = nil
	return err
}

func (d *kernelDevice) Delete(ctx context.Context) error {
	err := d.links.DeleteLink(ctx, d.index)
	if errors.Is(err, kernel.ErrNotFound) {
		err = nil
	}
	return errors.Join(err, d.Close())
}

// fromWGDevice converts wgctrl's view of a device to the package's.
func fromWGDevice(wd *wgtypes.Device) DeviceState {
	st := DeviceState{Name: wd.Name, ListenPort: wd.ListenPort, FirewallMark: uint32(wd.FirewallMark),
		PrivateKey: PrivateKey(wd.PrivateKey), PublicKey: PublicKey(wd.PublicKey)}
	for _, p := range wd.Peers {
		ps := PeerState{PublicKey: PublicKey(p.PublicKey), PersistentKeepalive: p.PersistentKeepaliveInterval,
			LastHandshake: p.LastHandshakeTime, ReceiveBytes: p.ReceiveBytes, TransmitBytes: p.TransmitBytes}
		if p.Endpoint != nil {
			ps.Endpoint = p.Endpoint.AddrPort()
		}
		for _, n := range p.AllowedIPs {
			if pr, ok := prefixOf(n); ok {
				ps.AllowedIPs = append(ps.AllowedIPs, pr)
			}
		}
		st.Peers = append(st.Peers, ps)
	}
	return st
}

func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits == 32 {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, ones), true
}

// toWGConfig converts a change to wgctrl's form.
func toWGConfig(cfg DeviceConfig) wgtypes.Config {
	var wc wgtypes.Config
	if cfg.PrivateKey != nil {
		k := wgtypes.Key(*cfg.PrivateKey)
		wc.PrivateKey = &k
	}
	wc.ListenPort = cfg.ListenPort
	if cfg.FirewallMark != nil {
		m := int(*cfg.FirewallMark)
		wc.FirewallMark = &m
	}
	wc.ReplacePeers = cfg.ReplacePeers
	wc.Peers = make([]wgtypes.PeerConfig, len(cfg.Peers))
	for i, p := range cfg.Peers {
		pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), Remove: p.Remove, UpdateOnly: p.UpdateOnly,
			PersistentKeepaliveInterval: p.PersistentKeepalive, ReplaceAllowedIPs: p.ReplaceAllowedIPs}
		if p.Endpoint.IsValid() {
			pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
		}
		for _, a := range slices.Clone(p.AllowedIPs) {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
		}
		wc.Peers[i] = pc
	}
	return wc
}
