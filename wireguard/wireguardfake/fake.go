// Package wireguardfake has what kernelfake cannot be for tests of
// package wireguard and of agents built on it: a userspace WireGuard
// provider. The kernel's WireGuard needs no fake of its own: a
// kernelfake.Namespace whose Options.Kinds include kernel.KindWireGuard
// implements kernel.WireGuard, and wireguard.NewKernelProvider works on it.
//
// # What it models
//
// A userspace device is a tun link, with its carrier, in the namespace the
// Userspace was made for (as the process that serves it gives it one),
// and a configuration with WireGuard's semantics. The configurations are
// kept by kernelfake: one WireGuard link per device in a namespace of
// their own (Devices), so they behave as kernelfake's (and, through its
// differential tests, the kernel's). A device's Close and Delete remove
// its tun link and its configuration, as a userspace device's end does.
//
// # Failure injection and inspection
//
// Devices returns the kernelfake.Namespace that holds the configurations:
// its WireGuardDevice shows a device as it is, its Fail and Refuse (with
// kernelfake.OpConfigureWireGuard, OpWireGuardDevice, OpAddLink for
// Open) make calls fail, its Calls and Writes count them, and
// SetWireGuardPeerStats sets a peer's counters as traffic would.
//
// It touches no kernel state and starts no goroutines. A Userspace is safe
// for concurrent use.
package wireguardfake

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// Userspace is an in-memory userspace WireGuard for one fake namespace.
type Userspace struct {
	ns   *kernelfake.Namespace
	devs *kernelfake.Namespace
	kp   wireguard.Provider
}

// New returns a Userspace whose devices' tun links live in ns.
func New(ns *kernelfake.Namespace) *Userspace {
	devs := ns.NewNamespace(kernelfake.Options{Name: "wireguardfake", Kinds: []string{kernel.KindWireGuard}})
	return &Userspace{ns: ns, devs: devs, kp: wireguard.NewKernelProvider(wireguard.KernelProviderOptions{Links: devs, WireGuard: devs})}
}

// Devices returns the namespace that keeps the devices' configurations,
// one WireGuard link per device, of the device's name: inspect it, inject
// failures and count writes there.
func (u *Userspace) Devices() *kernelfake.Namespace { return u.devs }

// Provider returns the userspace provider: Open makes a tun link in the
// namespace (kernelfake.Namespace.AddTUN, with its carrier, as the
// attached process gives it) and a device for it. A name already taken
// fails with an error wrapping wireguard.ErrForeignDevice.
func (u *Userspace) Provider() wireguard.Provider { return provider{u} }

type provider struct{ u *Userspace }

func (provider) Mode() wireguard.Mode { return wireguard.ModeUserspace }

func (p provider) Open(ctx context.Context, spec wireguard.DeviceSpec) (wireguard.Device, error) {
	u := p.u
	if _, ok := u.ns.Link(spec.Name); ok {
		return nil, fmt.Errorf("%w: %s exists", wireguard.ErrForeignDevice, spec.Name)
	}
	conf, err := u.kp.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	admin := u.ns.Admin()
	l, err := admin.AddTUN(spec.Name)
	if err == nil && spec.MTU > 0 {
		err = admin.SetLinkMTU(ctx, l.Index, spec.MTU)
	}
	if err == nil {
		err = admin.SetCarrier(spec.Name, true)
	}
	if err != nil {
		return nil, errors.Join(err, conf.Delete(ctx))
	}
	return &device{Device: conf, u: u, index: l.Index}, nil
}

// device is a userspace device: its configuration (the kernel provider's
// device in Devices) and its tun link.
type device struct {
	wireguard.Device
	u      *Userspace
	index  int
	mu     sync.Mutex
	closed bool
}

func (d *device) Mode() wireguard.Mode { return wireguard.ModeUserspace }

// Close stops the device: its configuration and its tun link go.
func (d *device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.Device.Delete(context.Background())
	if lerr := d.u.ns.Admin().DeleteLink(context.Background(), d.index); lerr != nil && !errors.Is(lerr, kernel.ErrNotFound) {
		err = errors.Join(err, lerr)
	}
	return err
}

func (d *device) Delete(context.Context) error { return d.Close() }
