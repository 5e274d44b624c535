package wireguard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/nodeplane/nodeplane/kernel"
)

// KernelProviderOptions configure NewKernelProvider.
type KernelProviderOptions struct {
	// Links reaches the namespace's links (a *kernel.Namespace, or a
	// kernelfake.Namespace whose Kinds include kernel.KindWireGuard).
	// Required.
	Links kernel.Links
	// WireGuard reads and configures the namespace's WireGuard devices
	// (the same namespace, through its kernel.WireGuard capability).
	// Required.
	WireGuard kernel.WireGuard
}

// NewKernelProvider returns the kernel provider: a link of type wireguard
// made with kernel.Links.AddLink and configured through the namespace's
// kernel.WireGuard capability. Where the kernel has no WireGuard module,
// Open fails with an error wrapping ErrNotSupported (AddLink's
// kernel.ErrNotSupported).
func NewKernelProvider(o KernelProviderOptions) Provider {
	return &kernelProvider{o: o}
}

type kernelProvider struct{ o KernelProviderOptions }

func (p *kernelProvider) Mode() Mode { return ModeKernel }

func (p *kernelProvider) Open(ctx context.Context, spec DeviceSpec) (Device, error) {
	if p.o.Links == nil || p.o.WireGuard == nil {
		return nil, fmt.Errorf("%w: kernel provider without Links or WireGuard", ErrInvalidOptions)
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
	return &kernelDevice{name: spec.Name, index: l.Index, links: p.o.Links, wg: p.o.WireGuard}, nil
}

type kernelDevice struct {
	name   string
	index  int
	links  kernel.Links
	wg     kernel.WireGuard
	mu     sync.Mutex
	closed bool
}

func (d *kernelDevice) Name() string { return d.name }
func (d *kernelDevice) Mode() Mode   { return ModeKernel }

func (d *kernelDevice) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *kernelDevice) State(ctx context.Context) (DeviceState, error) {
	if d.isClosed() {
		return DeviceState{}, ErrClosed
	}
	kd, err := d.wg.WireGuardDevice(ctx, d.name)
	if err != nil {
		return DeviceState{}, err
	}
	return fromKernelDevice(&kd), nil
}

func (d *kernelDevice) Configure(ctx context.Context, cfg DeviceConfig) error {
	if d.isClosed() {
		return ErrClosed
	}
	return d.wg.ConfigureWireGuard(ctx, d.name, toKernelConfig(&cfg))
}

// Close releases the handle; the device stays in the kernel.
func (d *kernelDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

func (d *kernelDevice) Delete(ctx context.Context) error {
	err := d.links.DeleteLink(ctx, d.index)
	if errors.Is(err, kernel.ErrNotFound) {
		err = nil
	}
	return errors.Join(err, d.Close())
}

// fromKernelDevice converts the kernel's view of a device to the
// package's.
func fromKernelDevice(kd *kernel.WireGuardDevice) DeviceState {
	st := DeviceState{Name: kd.Name, ListenPort: kd.ListenPort, FirewallMark: kd.FirewallMark,
		PrivateKey: PrivateKey(kd.PrivateKey), PublicKey: PublicKey(kd.PublicKey)}
	for _, p := range kd.Peers {
		st.Peers = append(st.Peers, PeerState{PublicKey: PublicKey(p.PublicKey), Endpoint: p.Endpoint,
			PersistentKeepalive: p.PersistentKeepalive, AllowedIPs: slices.Clone(p.AllowedIPs),
			LastHandshake: p.LastHandshake, ReceiveBytes: p.ReceiveBytes, TransmitBytes: p.TransmitBytes})
	}
	return st
}

// toKernelConfig converts a change to the kernel's form.
func toKernelConfig(cfg *DeviceConfig) kernel.WireGuardConfig {
	kc := kernel.WireGuardConfig{ListenPort: cfg.ListenPort, FirewallMark: cfg.FirewallMark, ReplacePeers: cfg.ReplacePeers,
		Peers: make([]kernel.WireGuardPeerConfig, len(cfg.Peers))}
	if cfg.PrivateKey != nil {
		k := kernel.WireGuardKey(*cfg.PrivateKey)
		kc.PrivateKey = &k
	}
	for i, p := range cfg.Peers {
		kc.Peers[i] = kernel.WireGuardPeerConfig{PublicKey: kernel.WireGuardKey(p.PublicKey), Remove: p.Remove,
			UpdateOnly: p.UpdateOnly, Endpoint: p.Endpoint, PersistentKeepalive: p.PersistentKeepalive,
			ReplaceAllowedIPs: p.ReplaceAllowedIPs, AllowedIPs: slices.Clone(p.AllowedIPs)}
	}
	return kc
}
