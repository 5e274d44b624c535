package ipip

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/overlay"
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
	// Clock paces the retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// DriverStats are counters of a Driver.
type DriverStats struct {
	// DeviceIndex is the device's index as last seen; 0 when there is
	// none.
	DeviceIndex int
	// DeviceCreations counts creations and re-creations of the device.
	DeviceCreations uint64
	// DeviceWrites counts changes of the device.
	DeviceWrites uint64
	// Failures counts failed attempts to bring the device in sync.
	Failures uint64
}

// Driver keeps one IPIP device equal to what was declared: created (or,
// for tunl0, adopted), its MTU and tunnel address, up. It is a
// dataplane.Driver of PhaseTunnelL2, so the device exists before the
// routes through it, and a dataplane.Wakeable.
type Driver struct {
	opts DriverOptions
	clk  clock.Clock
	log  *slog.Logger

	wake    atomic.Pointer[func()]
	recheck atomic.Bool
	index   atomic.Int64
	onSync  func()

	mu    sync.Mutex
	dev   *Device
	dirty bool
	retry overlay.Retries[struct{}]
	have  kernel.Link
	stats DriverStats
}

// NewDriver returns a Driver that wants no device until told otherwise. It
// validates opts and does no I/O.
func NewDriver(opts DriverOptions) (*Driver, error) {
	if opts.Kernel == nil {
		return nil, fmt.Errorf("%w: no Kernel", ErrInvalidOptions)
	}
	if opts.Name == "" {
		opts.Name = DefaultDevice
	}
	if err := overlay.CheckIfName(opts.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{opts: opts, clk: clock.OrReal(opts.Clock), log: log, dirty: true}, nil
}

// Name returns "ipip-" and the device name, for the loop's logs.
func (d *Driver) Name() string { return "ipip-" + d.opts.Name }

// Device returns the device's name.
func (d *Driver) Device() string { return d.opts.Name }

// Phase implements dataplane.Driver: PhaseTunnelL2.
func (d *Driver) Phase() dataplane.Phase { return dataplane.PhaseTunnelL2 }

// SetWake implements dataplane.Wakeable.
func (d *Driver) SetWake(wake func()) { d.wake.Store(&wake) }

func (d *Driver) wakeLoop() {
	if w := d.wake.Load(); w != nil {
		(*w)()
	}
}

// QueueResync implements dataplane.Driver: the next Apply checks the
// device again.
func (d *Driver) QueueResync() {
	d.mu.Lock()
	d.dirty = true
	d.mu.Unlock()
	if d.onSync != nil {
		d.onSync()
	}
}

// OnLinkState tells the Driver about a link, as ifacemonitor reports it:
// when the device is gone, down or has another index than the Driver
// knows, the next Apply checks it and the loop is woken. It never waits
// and may be called from any goroutine.
func (d *Driver) OnLinkState(name string, index int, state kernel.LinkState) {
	if name != d.opts.Name {
		return
	}
	if state != kernel.LinkUp || int64(index) != d.index.Load() {
		d.recheck.Store(true)
		d.wakeLoop()
	}
}

// SetDevice declares the device; nil declares none (the Driver deletes
// it, or, for tunl0, which the kernel does not delete, removes its
// address). A bad device is an error wrapping ErrInvalidInput, and nothing
// changes.
func (d *Driver) SetDevice(dev *Device) error {
	var c *Device
	if dev != nil {
		cp := *dev
		if err := overlay.CheckHost(ipfamily.IPv4, cp.Local); err != nil {
			return invalidf("device %s: local address: %v", d.opts.Name, err)
		}
		if cp.Address.IsValid() {
			if err := overlay.CheckHost(ipfamily.IPv4, cp.Address); err != nil {
				return invalidf("device %s: tunnel address: %v", d.opts.Name, err)
			}
		}
		if cp.MTU < 0 || (cp.MTU > 0 && cp.MTU < 68) || cp.MTU > 65535 {
			return invalidf("device %s: MTU %d", d.opts.Name, cp.MTU)
		}
		c = &cp
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if (d.dev == nil && c == nil) || (d.dev != nil && c != nil && *d.dev == *c) {
		return nil
	}
	d.dev, d.dirty = c, true
	d.retry.Clear(struct{}{})
	return nil
}

// Stats returns the Driver's counters.
func (d *Driver) Stats() DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.DeviceIndex = d.have.Index
	return s
}

// fallback reports whether the device is the kernel's catch-all tunnel,
// which has no local end and cannot be deleted.
func (d *Driver) fallback() bool { return d.opts.Name == DefaultDevice }

// Apply implements dataplane.Driver: when the device was declared anew,
// reported changed (OnLinkState) or a resync is queued, it ensures it:
// created (re-created when its local end differs), MTU, address, up — or
// deleted. A failure (a kernel without ipip refuses the device with an
// error wrapping kernel.ErrNotSupported) is retried on its own backoff and
// reported as a *dataplane.PartialError with RetryAfter set.
func (d *Driver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clk.Now()
	if d.recheck.Swap(false) {
		d.dirty = true
	}
	tried := false
	if d.dirty && !d.retry.Waiting(struct{}{}, now) {
		tried = true
		if err := d.ensure(ctx); err != nil {
			d.stats.Failures++
			d.retry.Fail(struct{}{}, now, err)
		} else {
			d.retry.Clear(struct{}{})
			d.dirty = false
		}
	}
	pe := &dataplane.PartialError{}
	after := d.retry.Collect(pe, now, map[struct{}]bool{{}: tried})
	if pe.Failed+pe.Waiting == 0 {
		return dataplane.ApplyResult{}, nil
	}
	return dataplane.ApplyResult{RetryAfter: after}, pe
}

func (d *Driver) ensure(ctx context.Context) error {
	k, name := d.opts.Kernel, d.opts.Name
	if d.dev == nil {
		n, err := overlay.RemoveDevice(ctx, k, name, ipfamily.IPv4, func(have *kernel.Link) bool {
			return d.fallback() && have.Kind == kernel.KindIPIP
		})
		d.stats.DeviceWrites += uint64(n)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDevice, name, err)
		}
		d.have = kernel.Link{}
		d.index.Store(0)
		if d.opts.OnDevice != nil {
			d.opts.OnDevice(name, 0, kernel.LinkGone)
		}
		return nil
	}
	tun := &kernel.IPTunnel{}
	if !d.fallback() {
		tun.Local = d.dev.Local
	}
	spec := &overlay.DeviceSpec{
		Link:   kernel.Link{Name: name, Kind: kernel.KindIPIP, MTU: d.dev.MTU, IPTunnel: tun},
		Family: ipfamily.IPv4,
		Compatible: func(have *kernel.Link) bool {
			t := have.IPTunnel
			return t != nil && !t.Remote.IsValid() && (d.fallback() || t.Local == tun.Local)
		},
	}
	if d.dev.Address.IsValid() {
		spec.Addr = netip.PrefixFrom(d.dev.Address, 32)
	}
	res, err := overlay.EnsureDevice(ctx, k, spec)
	d.stats.DeviceWrites += uint64(res.Writes)
	if res.Created {
		d.stats.DeviceCreations++
	}
	if err != nil {
		d.have = kernel.Link{}
		d.index.Store(0)
		return fmt.Errorf("%w: %s: %w", ErrDevice, name, err)
	}
	d.have = res.Link
	d.index.Store(int64(res.Link.Index))
	if d.opts.OnDevice != nil {
		d.opts.OnDevice(name, res.Link.Index, res.Link.State())
	}
	return nil
}
