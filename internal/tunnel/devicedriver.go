package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// DeviceDriverOptions configure a DeviceDriver: what a driver's options
// give it.
type DeviceDriverOptions struct {
	// Kernel is the namespace. Required.
	Kernel DeviceKernel
	// Family is the family of the device's addresses. Required.
	Family ipfamily.Family
	// Name is the device's name; empty means DefaultName.
	Name, DefaultName string
	// Kind is the device's link kind (kernel.KindVXLAN…): a link of its
	// name but of another kind is not the device, and is never deleted.
	// Required.
	Kind string
	// OnDevice, when set, is told the device's index and state after
	// every check of the device (kernel.LinkGone once deleted).
	OnDevice func(name string, index int, state kernel.LinkState)
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// DeviceDriver is the device half of a driver (vxlan's, ipip's): the device
// wanted (of the driver's type D), its backoff, the link last seen, the
// device counters, and the notifications that make the driver check the
// device again or tell its manager of a resync.
//
// SetWake, Wake, OnLinkState and Resync may be called from any goroutine;
// the other methods are guarded by the driver's mutex.
type DeviceDriver[D any] struct {
	// Name is the device's name.
	Name string
	// Log receives debug logs; never nil.
	Log *slog.Logger
	// OnResync, when set, is called by Resync: the manager reads the host
	// again.
	OnResync func()

	kernel   DeviceKernel
	family   ipfamily.Family
	kind     string
	onDevice func(name string, index int, state kernel.LinkState)

	wake    atomic.Pointer[func()]
	recheck atomic.Bool  // the device changed behind the driver's back
	index   atomic.Int64 // the link's index, for OnLinkState

	want  *D
	dirty bool
	retry Retries[struct{}]
	link  kernel.Link
	stats DeviceStats
}

// DeviceStats are a DeviceDriver's counters.
type DeviceStats struct {
	// Index is the device's index as last seen; 0 when there is none.
	Index int
	// Creations counts creations and re-creations of the device.
	Creations uint64
	// Writes counts changes of the device (creation, MTU, MAC, address,
	// up, deletion).
	Writes uint64
}

// NewDeviceDriver returns a DeviceDriver that wants no device and checks
// it at the first Apply. It returns why o is invalid (no Kernel, an
// invalid Family, a bad name) in the words of the drivers' errors, and
// does no I/O.
func NewDeviceDriver[D any](o DeviceDriverOptions) (*DeviceDriver[D], error) {
	if o.Kernel == nil {
		return nil, errors.New("no Kernel")
	}
	if !o.Family.Valid() {
		return nil, fmt.Errorf("family %v", o.Family)
	}
	if o.Kind == "" {
		return nil, errors.New("no device Kind")
	}
	if o.Name == "" {
		o.Name = o.DefaultName
	}
	if err := CheckIfName(o.Name); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &DeviceDriver[D]{Name: o.Name, Log: log, kernel: o.Kernel, family: o.Family, kind: o.Kind, onDevice: o.OnDevice, dirty: true}, nil
}

// SetWake records the loop's wake function (dataplane.Wakeable).
func (t *DeviceDriver[D]) SetWake(wake func()) { t.wake.Store(&wake) }

// Wake wakes the loop, if it gave a wake function.
func (t *DeviceDriver[D]) Wake() {
	if w := t.wake.Load(); w != nil {
		(*w)()
	}
}

// OnLinkState takes a link as ifacemonitor reports it: when it is the
// device and it is gone, down or has another index than the one last
// seen, the next Apply checks the device (Recheck) and the loop is woken.
// Other links are ignored. It never waits.
func (t *DeviceDriver[D]) OnLinkState(name string, index int, state kernel.LinkState) {
	if name != t.Name {
		return
	}
	if state != kernel.LinkUp || int64(index) != t.index.Load() {
		t.recheck.Store(true)
		t.Wake()
	}
}

// Resync tells the manager, through OnResync, that the driver was asked
// to resync.
func (t *DeviceDriver[D]) Resync() {
	if t.OnResync != nil {
		t.OnResync()
	}
}

// Recheck makes the device dirty when OnLinkState asked for a check since
// the last call; an Apply calls it first.
func (t *DeviceDriver[D]) Recheck() {
	if t.recheck.Swap(false) {
		t.dirty = true
	}
}

// MarkDirty makes the next Apply check the device.
func (t *DeviceDriver[D]) MarkDirty() { t.dirty = true }

// Dirty reports whether the device is to be checked.
func (t *DeviceDriver[D]) Dirty() bool { return t.dirty }

// Want returns the device wanted; nil for none.
func (t *DeviceDriver[D]) Want() *D { return t.want }

// Declare makes dev (nil for none) the device wanted, unless same says it
// is the one wanted already: it is then dirty and out of backoff.
func (t *DeviceDriver[D]) Declare(dev *D, same func(a, b *D) bool) {
	if (t.want == nil && dev == nil) || (t.want != nil && dev != nil && same(t.want, dev)) {
		return
	}
	t.want, t.dirty = dev, true
	t.retry.Clear(struct{}{})
}

// Link returns the device as last seen (Index 0 when there is none).
func (t *DeviceDriver[D]) Link() kernel.Link { return t.link }

// SetLink records the device as seen (kernel.Link{} for none).
func (t *DeviceDriver[D]) SetLink(l kernel.Link) {
	t.link = l
	t.index.Store(int64(l.Index))
}

// Stats returns the device counters.
func (t *DeviceDriver[D]) Stats() DeviceStats {
	s := t.stats
	s.Index = t.link.Index
	return s
}

// Apply ensures the device when it is dirty and not waiting for its
// retry: ensure is called; its failure is recorded for the device's
// backoff, its success ends the backoff and the dirt. It reports whether
// ensure was called, and its error.
func (t *DeviceDriver[D]) Apply(now time.Time, ensure func() error) (tried bool, err error) {
	if !t.dirty || t.retry.Waiting(struct{}{}, now) {
		return false, nil
	}
	if err := ensure(); err != nil {
		t.retry.Fail(struct{}{}, now, err)
		return true, err
	}
	t.retry.Clear(struct{}{})
	t.dirty = false
	return true, nil
}

// Collect adds the device to pe when it is failing (Retries.Collect; tried
// says whether this Apply tried it) and returns the delay until its retry.
func (t *DeviceDriver[D]) Collect(pe *dataplane.PartialError, now time.Time, tried bool) time.Duration {
	return t.retry.Collect(pe, now, map[struct{}]bool{{}: tried})
}

// Ensure makes the kernel hold spec's device (EnsureDevice), counts what
// it did, and records the link: the one the kernel reports, told to
// OnDevice, or none when it failed.
func (t *DeviceDriver[D]) Ensure(ctx context.Context, spec *DeviceSpec) (DeviceResult, error) {
	res, err := EnsureDevice(ctx, t.kernel, spec)
	t.stats.Writes += uint64(res.Writes)
	if res.Created {
		t.stats.Creations++
	}
	if err != nil {
		t.SetLink(kernel.Link{})
		return res, err
	}
	t.SetLink(res.Link)
	t.notify(res.Link.Index, res.Link.State())
	return res, nil
}

// Remove deletes the device, or empties the one undeletable names, and
// leaves a link of its name but of another kind alone (see RemoveDevice),
// and counts what it did. Once done, it records no link and
// tells OnDevice the device is gone.
func (t *DeviceDriver[D]) Remove(ctx context.Context, undeletable func(have *kernel.Link) bool) error {
	n, err := RemoveDevice(ctx, t.kernel, t.Name, t.kind, t.family, undeletable)
	t.stats.Writes += uint64(n)
	if err != nil {
		return err
	}
	t.SetLink(kernel.Link{})
	t.notify(0, kernel.LinkGone)
	return nil
}

func (t *DeviceDriver[D]) notify(index int, state kernel.LinkState) {
	if t.onDevice != nil {
		t.onDevice(t.Name, index, state)
	}
}
