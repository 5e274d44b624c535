package ipip

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultDevice is the device name when none is given: the kernel's
// catch-all IPIP tunnel, which the ipip module creates in every namespace.
const DefaultDevice = "tunl0"

// DriverKernel is what a Driver needs of one network namespace: its links
// and addresses. A *kernel.Namespace and a kernelfake.Namespace implement
// it.
type DriverKernel interface {
	kernel.Links
	kernel.Addrs
}

// DriverOptions configure a Driver.
type DriverOptions struct {
	// Kernel is the namespace. Required.
	Kernel DriverKernel
	// Name is the device's name: the Driver's identity; empty means
	// DefaultDevice.
	Name string
	// OnDevice, when set, is called from Apply after every check of the
	// device with its index and state (kernel.LinkGone once deleted): wire
	// it to routetable.Table.OnIfaceStateChanged.
	OnDevice func(name string, index int, state kernel.LinkState)
	// OnResync, when set, is called by QueueResync (the loop's resync):
	// the overlay manager that declares the device reads the host again.
	OnResync func()
	// Clock paces the retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Driver keeps one IPIP device equal to what was declared: created (or,
// for tunl0, adopted), its MTU and tunnel address, up. It is a
// dataplane.Driver of PhaseTunnelL2, so the device exists before the
// routes through it, and a dataplane.Wakeable.
type Driver struct {
	opts DriverOptions
	// dev is the device, its Ledger and the count of writes.
	dev *tunnel.DeviceDriver[Device]

	mu sync.Mutex
}

// NewDriver returns a Driver that wants no device until told otherwise. It
// validates opts and does no I/O.
func NewDriver(opts DriverOptions) (*Driver, error) {
	dev, err := tunnel.NewDeviceDriver[Device](tunnel.DeviceDriverOptions{Kernel: opts.Kernel, Family: ipfamily.IPv4,
		Name: opts.Name, DefaultName: DefaultDevice, Kind: kernel.KindIPIP, OnDevice: opts.OnDevice, Driver: "ipip",
		Clock: opts.Clock, Logger: opts.Logger}, ErrDevice)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	dev.OnResync = opts.OnResync
	opts.Name = dev.Name
	return &Driver{opts: opts, dev: dev}, nil
}

// Name returns "ipip-" and the device name, for the loop's logs.
func (d *Driver) Name() string { return "ipip-" + d.opts.Name }

// Device returns the device's name.
func (d *Driver) Device() string { return d.opts.Name }

// Phase implements dataplane.Driver: PhaseTunnelL2.
func (d *Driver) Phase() dataplane.Phase { return dataplane.PhaseTunnelL2 }

// SetWake implements dataplane.Wakeable.
func (d *Driver) SetWake(wake func()) { d.dev.SetWake(wake) }

// QueueResync implements dataplane.Driver: the next Apply checks the
// device again.
func (d *Driver) QueueResync() {
	d.mu.Lock()
	d.dev.MarkDirty()
	d.mu.Unlock()
	d.dev.Resync()
}

// OnLinkState tells the Driver about a link, as ifacemonitor reports it:
// when the device is gone, down or has another index than the Driver
// knows, the next Apply checks it and the loop is woken. It never waits
// and may be called from any goroutine.
func (d *Driver) OnLinkState(name string, index int, state kernel.LinkState) {
	d.dev.OnLinkState(name, index, state)
}

// SetDevice declares the device; nil declares none (the Driver deletes
// it, or, for tunl0, which the kernel does not delete, removes its
// address). A bad device is an error wrapping ErrInvalidInput, and nothing
// changes.
func (d *Driver) SetDevice(dev *Device) error {
	var c *Device
	if dev != nil {
		cp := *dev
		if err := cluster.CheckHostAddr(ipfamily.IPv4, cp.Local); err != nil {
			return invalidf("device %s: local address: %v", d.opts.Name, err)
		}
		if cp.Address.IsValid() {
			if err := cluster.CheckHostAddr(ipfamily.IPv4, cp.Address); err != nil {
				return invalidf("device %s: tunnel address: %v", d.opts.Name, err)
			}
		}
		if !tunnel.ValidMTU(cp.MTU, ipfamily.IPv4) {
			return invalidf("device %s: MTU %d", d.opts.Name, cp.MTU)
		}
		c = &cp
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dev.Declare(c, func(a, b *Device) bool { return *a == *b })
	return nil
}

// Stats implements dataplane.StatsReporter: Desired is 1 when a device is
// declared, InKernel 1 when the kernel held it when last seen, Failing 1
// while it fails, Writes counts the device's changes (creation, MTU,
// address, up, deletion).
func (d *Driver) Stats() dataplane.DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := dataplane.DriverStats{Failing: d.dev.Ledger.Len(), Writes: d.dev.Writes}
	if d.dev.Want() != nil {
		s.Desired = 1
	}
	if d.dev.Present() {
		s.InKernel = 1
	}
	return s
}

// fallback reports whether the device is the kernel's catch-all tunnel,
// which has no local end and cannot be deleted.
func (d *Driver) fallback() bool { return d.opts.Name == DefaultDevice }

// Apply implements dataplane.Driver: when the device was declared anew,
// reported changed (OnLinkState) or a resync is queued, it ensures it:
// created (re-created when its local end differs), MTU, address, up — or
// deleted. A failure (a kernel without ipip refuses the device with an
// error wrapping kernel.ErrNotSupported) is retried on its own backoff
// (the Driver's dataplane.Ledger) and reported as the Ledger's
// *dataplane.PartialError, whose *dataplane.ObjectError (kind "link")
// names the device, with RetryAfter set.
func (d *Driver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pass(ctx, nil)
	return d.dev.Result()
}

// Plan returns the writes the next Apply would make (kind "link"): the
// device created, deleted (also to be re-created) or changed in place
// (MTU, address, up), or for tunl0, which the kernel does not delete, its
// address removed. It is Apply's own pass run dry: it reads the device and
// the addresses when the next Apply would check the device (declared anew,
// reported changed, after QueueResync), and writes nothing; a device
// waiting for its retry, or one the check would fail before any write
// (a foreign link holds its name), has no write. It implements
// dataplane.Planner. A nil ctx is context.Background().
func (d *Driver) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var writes []dataplane.Write
	d.pass(ctx, &writes)
	return dataplane.Plan{Driver: d.Name(), Writes: writes}, nil
}

// State returns the device as last seen, whether it differs from what is
// declared (its local end, MTU when declared, up; the tunnel address is
// checked by the next Apply), and its failure. It reads nothing and
// writes nothing. It implements dataplane.Stater. A nil ctx is
// context.Background().
func (d *Driver) State(context.Context) (dataplane.State, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := dataplane.State{Driver: d.Name(), Failing: d.dev.Ledger.Errors()}
	var want *kernel.Link
	if dev := d.dev.Want(); dev != nil {
		want = &kernel.Link{Name: d.opts.Name, Kind: kernel.KindIPIP, MTU: dev.MTU, IPTunnel: d.tunnelOf(dev)}
	}
	d.dev.State(&s, want, func(have *kernel.Link) bool {
		t := have.IPTunnel
		return t == nil || t.Local != want.IPTunnel.Local || t.Remote.IsValid() || !have.AdminUp ||
			(want.MTU > 0 && have.MTU != want.MTU)
	})
	dataplane.SortState(&s)
	return s, nil
}

// pass is one Apply (plan nil) or, with plan, the same decisions run dry
// for a Plan, appending the writes the Apply would make to *plan.
func (d *Driver) pass(ctx context.Context, plan *[]dataplane.Write) {
	d.dev.Ledger.Begin()
	d.dev.Recheck()
	_, _ = d.dev.Apply(plan, func(plan *[]dataplane.Write) error { return d.ensure(ctx, plan) })
}

// tunnelOf is the device's tunnel ends: none for tunl0, the kernel's
// catch-all tunnel, else the local end.
func (d *Driver) tunnelOf(dev *Device) *kernel.IPTunnel {
	if d.fallback() {
		return &kernel.IPTunnel{}
	}
	return &kernel.IPTunnel{Local: dev.Local}
}

// ensure makes the device what is declared, or deletes it (with a plan,
// it appends the writes to it instead).
func (d *Driver) ensure(ctx context.Context, plan *[]dataplane.Write) error {
	name, dev := d.opts.Name, d.dev.Want()
	if dev == nil {
		return d.dev.Remove(ctx, func(have *kernel.Link) bool {
			return d.fallback() && have.Kind == kernel.KindIPIP
		}, plan)
	}
	tun := d.tunnelOf(dev)
	spec := &tunnel.DeviceSpec{
		Link:   kernel.Link{Name: name, Kind: kernel.KindIPIP, MTU: dev.MTU, IPTunnel: tun},
		Family: ipfamily.IPv4,
		Compatible: func(have *kernel.Link) bool {
			t := have.IPTunnel
			return t != nil && !t.Remote.IsValid() && (d.fallback() || t.Local == tun.Local)
		},
		// The kernel gives a pair of tunnel ends (and parent) to one IPIP
		// device of the namespace.
		Conflict: func(o *kernel.Link) string {
			t := o.IPTunnel
			if o.Kind != kernel.KindIPIP || t == nil || t.Local != tun.Local || t.Remote.IsValid() || t.ParentIndex != 0 {
				return ""
			}
			if !tun.Local.IsValid() {
				return "the catch-all tunnel (no local or remote end)"
			}
			return fmt.Sprintf("the tunnel from %s to any remote", tun.Local)
		},
	}
	if dev.Address.IsValid() {
		spec.Addr = netip.PrefixFrom(dev.Address, 32)
	}
	_, err := d.dev.Ensure(ctx, spec, plan)
	return err
}

var (
	_ dataplane.Planner       = (*Driver)(nil)
	_ dataplane.Stater        = (*Driver)(nil)
	_ dataplane.StatsReporter = (*Driver)(nil)
)
