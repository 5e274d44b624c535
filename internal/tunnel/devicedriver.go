package tunnel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/nodeplane/nodeplane/clock"
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
	// Driver is the package that drives the device ("vxlan"): the Driver
	// of its *dataplane.ObjectError. Required.
	Driver string
	// Clock paces the retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// DefaultBackoff paces the retries of one object (a device, a neighbour,
// an FDB entry) the kernel refused.
var DefaultBackoff = dataplane.Backoff{Initial: 100 * time.Millisecond, Max: 30 * time.Second}

// KindLink is the kind of a tunnel device in a Plan, a State and an
// ObjectError: created ("+"), changed in place ("~": its MTU, MAC,
// addresses, up) or deleted ("-").
const KindLink dataplane.ObjectKind = "link"

// Key is the Ledger key of one object of a tunnel driver: the device
// (DeviceKey), or an entry on it (a neighbour by IP, an FDB entry by MAC),
// by its Kind.
type Key struct {
	// Kind is the object's kind: KindLink, or the driver's entry kind.
	Kind dataplane.ObjectKind
	// IP is a neighbour entry's address.
	IP netip.Addr
	// MAC is an FDB entry's MAC.
	MAC [6]byte
}

// DeviceKey is the device's Key.
var DeviceKey = Key{Kind: KindLink}

// DeviceDriver is the device half of a driver (vxlan's, ipip's): the device
// wanted (of the driver's type D), the driver's Ledger (where the device is
// DeviceKey), the link last seen, the count of writes, and the
// notifications that make the driver check the device again or tell its
// manager of a resync.
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
	// Ledger holds the driver's failing objects: the device (DeviceKey)
	// and those the driver adds (its entries).
	Ledger *dataplane.Ledger[Key]
	// Writes counts the driver's kernel writes: the device's, counted by
	// Ensure and Remove, and those the driver adds.
	Writes uint64

	kernel   DeviceKernel
	family   ipfamily.Family
	kind     string
	driver   string
	reason   error
	onDevice func(name string, index int, state kernel.LinkState)

	wake    atomic.Pointer[func()]
	recheck atomic.Bool  // the device changed behind the driver's back
	index   atomic.Int64 // the link's index, for OnLinkState

	want  *D
	dirty bool
	link  kernel.Link
}

// NewDeviceDriver returns a DeviceDriver that wants no device and checks
// it at the first Apply; reason is the driver's sentinel of a device not
// in sync (the Reason of the device's *dataplane.ObjectError). It returns
// why o is invalid (no Kernel, an invalid Family, a bad name) in the words
// of the drivers' errors, and does no I/O.
func NewDeviceDriver[D any](o DeviceDriverOptions, reason error) (*DeviceDriver[D], error) {
	if o.Kernel == nil {
		return nil, errors.New("no Kernel")
	}
	if !o.Family.Valid() {
		return nil, fmt.Errorf("family %v", o.Family)
	}
	if o.Kind == "" {
		return nil, errors.New("no device Kind")
	}
	if o.Driver == "" || reason == nil {
		return nil, errors.New("no Driver or reason")
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
	return &DeviceDriver[D]{Name: o.Name, Log: log, Ledger: dataplane.NewLedger[Key](DefaultBackoff, o.Clock), kernel: o.Kernel,
		family: o.Family, kind: o.Kind, driver: o.Driver, reason: reason, onDevice: o.OnDevice, dirty: true}, nil
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

// Want returns the device wanted; nil for none.
func (t *DeviceDriver[D]) Want() *D { return t.want }

// Declare makes dev (nil for none) the device wanted, unless same says it
// is the one wanted already: it is then dirty and out of backoff.
func (t *DeviceDriver[D]) Declare(dev *D, same func(a, b *D) bool) {
	if (t.want == nil && dev == nil) || (t.want != nil && dev != nil && same(t.want, dev)) {
		return
	}
	t.want, t.dirty = dev, true
	t.Ledger.Forget(DeviceKey)
}

// Link returns the device as last seen (Index 0 when there is none).
func (t *DeviceDriver[D]) Link() kernel.Link { return t.link }

// SetLink records the device as seen (kernel.Link{} for none).
func (t *DeviceDriver[D]) SetLink(l kernel.Link) {
	t.link = l
	t.index.Store(int64(l.Index))
}

// Present reports whether the kernel holds the device, as last seen: a
// link of its name and kind.
func (t *DeviceDriver[D]) Present() bool { return t.link.Index > 0 && t.link.Kind == t.kind }

// Apply checks the device when it is dirty and not waiting for its retry:
// ensure is called, with plan. With a nil plan (an Apply) a failure is
// recorded in the Ledger as the device's *dataplane.ObjectError (op
// "write", or "delete" when no device is wanted, with the Reason and the
// error ensure returned), and a success forgets it and ends the dirt. With
// a plan (a Plan) nothing is recorded: ensure appends its writes to the
// plan. It reports whether the device is clean after the pass (its entries
// can be written; a Plan counts a planned check a success), and ensure's
// error.
func (t *DeviceDriver[D]) Apply(plan *[]dataplane.Write, ensure func(plan *[]dataplane.Write) error) (clean bool, err error) {
	if !t.dirty || t.Ledger.Waiting(DeviceKey) {
		return !t.dirty, nil
	}
	err = ensure(plan)
	if plan != nil {
		return err == nil, err
	}
	if err != nil {
		op := "write"
		if t.want == nil {
			op = "delete"
		}
		t.Ledger.Fail(DeviceKey, &dataplane.ObjectError{Driver: t.driver, Op: op, Kind: KindLink, Name: t.Name, Reason: t.reason, Err: err})
		return false, err
	}
	t.Ledger.Forget(DeviceKey)
	t.dirty = false
	return true, nil
}

// Result is an Apply's outcome from the Ledger: its *dataplane.PartialError
// (nil when nothing fails) with RetryAfter set to the first retry due.
func (t *DeviceDriver[D]) Result() (dataplane.ApplyResult, error) {
	return dataplane.ApplyResult{RetryAfter: t.Ledger.RetryAfter()}, t.Ledger.Err()
}

// State adds the device to s: owned (as LinkText) when the kernel held it
// when last seen; drifted when it is wanted (as want: the link it would be
// created as) and missing, unwanted and present, or when differs says the
// link last seen differs from what is wanted.
func (t *DeviceDriver[D]) State(s *dataplane.State, want *kernel.Link, differs func(have *kernel.Link) bool) {
	d := dataplane.Drift{Kind: KindLink, Name: t.Name}
	if t.Present() {
		d.Have = LinkText(&t.link)
		s.Owned = append(s.Owned, dataplane.Object{Kind: KindLink, Text: d.Have})
	}
	if want != nil {
		d.Want = LinkText(want)
	}
	if (want == nil && d.Have == "") || (want != nil && d.Have != "" && !differs(&t.link)) {
		return
	}
	s.Drift = append(s.Drift, d)
}

// Ensure makes the kernel hold spec's device (EnsureDevice), counts its
// writes, and records the link: the one the kernel reports, told to
// OnDevice, or none when it failed. With a non-nil plan it writes and
// records nothing, and appends the writes it would make to *plan.
func (t *DeviceDriver[D]) Ensure(ctx context.Context, spec *DeviceSpec, plan *[]dataplane.Write) (DeviceResult, error) {
	res, err := EnsureDevice(ctx, t.kernel, spec, plan)
	if plan != nil {
		return res, err
	}
	t.Writes += uint64(res.Writes)
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
// and counts its writes. Once done, it records no link and tells OnDevice
// the device is gone. With a non-nil plan it writes and records nothing,
// and appends the writes it would make to *plan.
func (t *DeviceDriver[D]) Remove(ctx context.Context, undeletable func(have *kernel.Link) bool, plan *[]dataplane.Write) error {
	n, err := RemoveDevice(ctx, t.kernel, t.Name, t.kind, t.family, undeletable, plan)
	if plan != nil {
		return err
	}
	t.Writes += uint64(n)
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
