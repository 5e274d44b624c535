// Size: the device, FDB and neighbour driver: one read, one write pass and one report over the state it keeps per remote.

package vxlan

import (
	"context"
	"errors"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/kernel"
)

// Defaults of a Device and of the device names.
const (
	// DefaultVNI is the VXLAN network identifier of a Device whose VNI is 0.
	DefaultVNI = 4096
	// DefaultPort is the UDP port of a Device whose Port is 0 (IANA's).
	DefaultPort = 4789
	// DefaultDeviceV4 and DefaultDeviceV6 are the device names of the two
	// families when none is given. They match mtu.DefaultExclude (^np-),
	// so the host MTU never comes from the tunnel.
	DefaultDeviceV4 = "np-vxlan"
	DefaultDeviceV6 = "np-vxlan6"
	// MaxVNI is the largest VXLAN network identifier (24 bits).
	MaxVNI = 1<<24 - 1
)

// DriverKernel is what a Driver needs of one network namespace: its links
// and addresses (the device, its parent, its tunnel address), and its
// neighbour and FDB entries, written in batches. A *kernel.Namespace and a
// kernelfake.Namespace implement it.
type DriverKernel interface {
	kernel.Links
	kernel.Addrs
	kernel.Neighbors
	kernel.FDB
}

// DriverOptions configure a Driver.
type DriverOptions struct {
	// Kernel is the namespace. Required.
	Kernel DriverKernel
	// Family is the family of the device, its tunnel and underlay
	// addresses and its entries. Required.
	Family Family
	// Name is the device's name: the Driver's identity. It owns the link
	// of that name and every permanent neighbour and FDB entry on it.
	// Empty means DefaultDeviceV4 or DefaultDeviceV6.
	Name string
	// OnDevice, when set, is called from Apply after every check of the
	// device with its index and state (kernel.LinkGone once deleted): wire
	// it to routetable.Table.OnIfaceStateChanged so that routes through
	// the device are written in the same pass, on its current index.
	OnDevice func(name string, index int, state kernel.LinkState)
	// OnResync, when set, is called by QueueResync (the loop's resync):
	// the overlay manager that declares the device reads the host again.
	OnResync func()
	// Clock paces the retries; nil means clock.Real().
	Clock clock.Clock
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

type mac [6]byte

func macOf(hw net.HardwareAddr) (m mac) {
	copy(m[:], hw)
	return m
}

// remote is a Remote as the Driver keeps it.
type remote struct {
	ip       netip.Addr
	mac      mac
	underlay netip.Addr
}

// neighEntry and fdbRemote are the kernel's entries as last read or
// written.
type neighEntry struct {
	mac   mac
	state uint16
}

type fdbRemote struct {
	dst  netip.Addr
	perm bool
}

// fdbHave is a MAC's remotes in the kernel: almost always one, so it is
// held inline.
type fdbHave struct {
	one  fdbRemote
	more []fdbRemote
}

func (h fdbHave) list() []fdbRemote { return append([]fdbRemote{h.one}, h.more...) }

// vtep is a declared remote VTEP.
type vtep struct {
	node string
	r    remote
}

// claim is who declared one key (a tunnel address or a MAC): first is the
// node whose name sorts first, which the kernel entry is for; more are the
// others, sorted, waiting for it to go.
type claim struct {
	first *vtep
	more  []*vtep
}

func (c claim) add(v *vtep) claim {
	switch {
	case c.first == nil:
		c.first = v
	case v.node < c.first.node:
		c.more = insertVTEP(c.more, c.first)
		c.first = v
	default:
		c.more = insertVTEP(c.more, v)
	}
	return c
}

func (c claim) remove(node string) claim {
	if c.first != nil && c.first.node == node {
		if len(c.more) == 0 {
			return claim{}
		}
		return claim{first: c.more[0], more: c.more[1:]}
	}
	if i, ok := slices.BinarySearchFunc(c.more, node, func(v *vtep, n string) int { return strings.Compare(v.node, n) }); ok {
		c.more = slices.Delete(slices.Clone(c.more), i, i+1)
	}
	return c
}

func insertVTEP(s []*vtep, v *vtep) []*vtep {
	i, _ := slices.BinarySearchFunc(s, v.node, func(x *vtep, n string) int { return strings.Compare(x.node, n) })
	return slices.Insert(slices.Clone(s), i, v)
}

// DriverStats are counters and sizes of a Driver.
type DriverStats struct {
	// Remotes is the number of remote VTEPs declared.
	Remotes int
	// DeviceIndex is the device's index as last seen; 0 when there is
	// none.
	DeviceIndex int
	// DeviceCreations counts creations and re-creations of the device.
	DeviceCreations uint64
	// DeviceWrites counts changes of the device (creation, MTU, MAC,
	// address, up, deletion).
	DeviceWrites uint64
	// NeighborWrites and FDBWrites count the entry operations sent,
	// successful or not.
	NeighborWrites, FDBWrites uint64
	// Resyncs counts full reads of the device and its entries.
	Resyncs uint64
}

// Driver keeps one VXLAN device, and the neighbour and FDB entries of the
// remote VTEPs on it, equal to what was declared. It is a dataplane.Driver
// of PhaseTunnelL2 (before the routes through the device) and a
// dataplane.Wakeable. See the package documentation.
type Driver struct {
	opts DriverOptions
	clk  clock.Clock
	dev  *tunnel.DeviceDriver[Device] // the device, its backoff and counters

	mu         sync.Mutex
	remotes    map[string]*vtep
	neighOwner map[netip.Addr]claim
	fdbOwner   map[mac]claim
	dirtyNeigh map[netip.Addr]struct{}
	dirtyFDB   map[mac]struct{}
	// allDirty stands for every key wanted or held being dirty (after a
	// read or a new device), without listing them in the dirty maps.
	allDirty bool

	resync    bool
	haveNeigh map[netip.Addr]neighEntry
	haveFDB   map[mac]fdbHave

	neighRetry tunnel.Retries[netip.Addr]
	fdbRetry   tunnel.Retries[mac]
	stats      DriverStats
}

// NewDriver returns a Driver that wants no device and no entries until
// told otherwise. It validates opts and does no I/O.
func NewDriver(opts DriverOptions) (*Driver, error) {
	def := DefaultDeviceV4
	if opts.Family == IPv6 {
		def = DefaultDeviceV6
	}
	dev, err := tunnel.NewDeviceDriver[Device](tunnel.DeviceDriverOptions{Kernel: opts.Kernel, Family: opts.Family,
		Name: opts.Name, DefaultName: def, Kind: kernel.KindVXLAN, OnDevice: opts.OnDevice, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	dev.OnResync = opts.OnResync
	opts.Name = dev.Name
	return &Driver{
		opts: opts, clk: clock.OrReal(opts.Clock), dev: dev,
		remotes:    map[string]*vtep{},
		neighOwner: map[netip.Addr]claim{},
		fdbOwner:   map[mac]claim{},
		dirtyNeigh: map[netip.Addr]struct{}{},
		dirtyFDB:   map[mac]struct{}{},
		resync:     true,
		haveNeigh:  map[netip.Addr]neighEntry{},
		haveFDB:    map[mac]fdbHave{},
	}, nil
}

// Name returns "vxlan-" and the device name, for the loop's logs.
func (d *Driver) Name() string { return "vxlan-" + d.opts.Name }

// Device returns the device's name.
func (d *Driver) Device() string { return d.opts.Name }

// Phase implements dataplane.Driver: PhaseTunnelL2.
func (d *Driver) Phase() dataplane.Phase { return dataplane.PhaseTunnelL2 }

// SetWake implements dataplane.Wakeable.
func (d *Driver) SetWake(wake func()) { d.dev.SetWake(wake) }

// QueueResync implements dataplane.Driver: the next Apply reads the device,
// its neighbour and its FDB entries again and repairs what differs.
func (d *Driver) QueueResync() {
	d.mu.Lock()
	d.resync = true
	d.mu.Unlock()
	d.dev.Resync()
}

// OnLinkState tells the Driver about a link, as ifacemonitor reports it:
// when the device is gone, down or has another index than the Driver
// knows, the next Apply checks it (and re-creates it) and the loop is
// woken. Other links are ignored. It never waits and may be called from
// any goroutine.
func (d *Driver) OnLinkState(name string, index int, state kernel.LinkState) {
	d.dev.OnLinkState(name, index, state)
}

// SetDevice declares the device; nil declares none (the Driver deletes
// it, with everything on it). A bad device is an error wrapping
// ErrInvalidInput, and nothing changes.
func (d *Driver) SetDevice(dev *Device) error {
	var c *Device
	if dev != nil {
		cp := *dev
		cp.MAC = slices.Clone(dev.MAC)
		if cp.VNI == 0 {
			cp.VNI = DefaultVNI
		}
		if cp.Port == 0 {
			cp.Port = DefaultPort
		}
		if err := d.checkDevice(&cp); err != nil {
			return err
		}
		c = &cp
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dev.Declare(c, sameDevice)
	return nil
}

func sameDevice(a, b *Device) bool {
	return a.VNI == b.VNI && a.Port == b.Port && a.Local == b.Local && slices.Equal(a.MAC, b.MAC) &&
		a.Address == b.Address && a.MTU == b.MTU
}

func (d *Driver) checkDevice(dev *Device) error {
	f := d.opts.Family
	switch {
	case dev.VNI > MaxVNI:
		return invalidf("device %s: VNI %d above %d", d.opts.Name, dev.VNI, MaxVNI)
	case !tunnel.ValidMTU(dev.MTU):
		return invalidf("device %s: MTU %d", d.opts.Name, dev.MTU)
	}
	if err := cluster.CheckHostAddr(f, dev.Local); err != nil {
		return invalidf("device %s: local address: %v", d.opts.Name, err)
	}
	if dev.MAC != nil {
		if err := tunnel.CheckMAC(dev.MAC); err != nil {
			return invalidf("device %s: %v", d.opts.Name, err)
		}
	}
	if dev.Address.IsValid() {
		if err := cluster.CheckHostAddr(f, dev.Address); err != nil {
			return invalidf("device %s: tunnel address: %v", d.opts.Name, err)
		}
	}
	return nil
}

// SetRemote declares the remote VTEP of node (replacing what was declared
// for it). Two nodes declaring one tunnel address or one MAC conflict: the
// entry goes to the node whose name sorts first, and to the other once it
// is gone. A bad remote is an error wrapping ErrInvalidInput, and nothing
// changes.
func (d *Driver) SetRemote(node string, r Remote) error {
	f := d.opts.Family
	if err := tunnel.CheckName(node); err != nil {
		return invalidf("remote: %v", err)
	}
	if err := cluster.CheckHostAddr(f, r.TunnelIP); err != nil {
		return invalidf("remote %s: tunnel address: %v", node, err)
	}
	if err := tunnel.CheckMAC(r.MAC); err != nil {
		return invalidf("remote %s: %v", node, err)
	}
	if err := cluster.CheckHostAddr(f, r.Underlay); err != nil {
		return invalidf("remote %s: underlay address: %v", node, err)
	}
	n := remote{ip: r.TunnelIP, mac: macOf(r.MAC), underlay: r.Underlay}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.remotes[node]
	if had && old.r == n {
		return nil
	}
	if had {
		d.release(node, old.r)
	}
	v := &vtep{node: node, r: n}
	d.remotes[node] = v
	d.neighOwner[n.ip] = d.neighOwner[n.ip].add(v)
	d.fdbOwner[n.mac] = d.fdbOwner[n.mac].add(v)
	d.touch(n)
	return nil
}

// RemoveRemote withdraws node's remote VTEP; removing one not declared does
// nothing.
func (d *Driver) RemoveRemote(node string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.remotes[node]; ok {
		d.release(node, old.r)
		delete(d.remotes, node)
	}
}

func (d *Driver) release(node string, r remote) {
	if c := d.neighOwner[r.ip].remove(node); c.first != nil {
		d.neighOwner[r.ip] = c
	} else {
		delete(d.neighOwner, r.ip)
	}
	if c := d.fdbOwner[r.mac].remove(node); c.first != nil {
		d.fdbOwner[r.mac] = c
	} else {
		delete(d.fdbOwner, r.mac)
	}
	d.touch(r)
}

// touch marks r's keys for the next Apply and ends their backoff: they
// were declared anew.
func (d *Driver) touch(r remote) {
	if !d.resync && !d.allDirty { // else every key is looked at anyway
		d.dirtyNeigh[r.ip] = struct{}{}
		d.dirtyFDB[r.mac] = struct{}{}
	}
	d.neighRetry.Clear(r.ip)
	d.fdbRetry.Clear(r.mac)
}

// wantNeigh and wantFDB return what the kernel should hold for a key.
func (d *Driver) wantNeigh(ip netip.Addr) (mac, bool) {
	c, ok := d.neighOwner[ip]
	if !ok {
		return mac{}, false
	}
	return c.first.r.mac, true
}

func (d *Driver) wantFDB(m mac) (netip.Addr, bool) {
	c, ok := d.fdbOwner[m]
	if !ok {
		return netip.Addr{}, false
	}
	return c.first.r.underlay, true
}

// Stats returns the Driver's counters.
func (d *Driver) Stats() DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	ds := d.dev.Stats()
	s.Remotes, s.DeviceIndex, s.DeviceCreations, s.DeviceWrites = len(d.remotes), ds.Index, ds.Creations, ds.Writes
	return s
}

// Apply implements dataplane.Driver. On the first call and after
// QueueResync it reads the device and its neighbour and FDB entries. It
// then ensures the device (created, re-created for a new VNI, port, local
// address or parent, otherwise changed in place), and writes the
// neighbour and FDB entries that differ, each kind in one batch. A failure
// to read the kernel fails the Apply as a whole (ErrRead). A device or an
// entry the kernel refuses fails alone: it is retried on its own backoff
// and reported in a *dataplane.PartialError, with RetryAfter set, while
// everything else is written.
func (d *Driver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clk.Now()
	d.dev.Recheck()
	if d.resync {
		if err := d.read(ctx); err != nil {
			return dataplane.ApplyResult{}, err
		}
	}
	triedDev, err := d.dev.Apply(now, func() error { return d.ensureDevice(ctx) })
	if err != nil {
		d.resync = true // read what the failed attempt left
	}
	tried := d.writeEntries(ctx, now)
	return d.report(now, triedDev, tried)
}

// read reads the device and its entries.
func (d *Driver) read(ctx context.Context) error {
	d.stats.Resyncs++
	l, err := d.opts.Kernel.LinkByName(ctx, d.opts.Name)
	switch {
	case errors.Is(err, kernel.ErrNotFound):
		l = kernel.Link{}
	case err != nil:
		return errs.Also(fmt.Errorf("%w: device %s: %w", ErrRead, d.opts.Name, err))
	}
	clear(d.haveNeigh)
	clear(d.haveFDB)
	if l.Index > 0 && l.Kind == kernel.KindVXLAN {
		ns, err := d.opts.Kernel.Neighbors(ctx, d.opts.Family, l.Index)
		if err != nil {
			return fmt.Errorf("%w: neighbours of %s: %w", ErrRead, d.opts.Name, err)
		}
		for _, n := range ns {
			if n.LinkIndex == l.Index && len(n.MAC) == 6 {
				d.haveNeigh[n.IP] = neighEntry{mac: macOf(n.MAC), state: n.State}
			}
		}
		fdb, err := d.opts.Kernel.FDB(ctx, l.Index)
		if err != nil {
			return fmt.Errorf("%w: FDB of %s: %w", ErrRead, d.opts.Name, err)
		}
		for _, e := range fdb {
			if e.LinkIndex == l.Index && len(e.MAC) == 6 {
				m := macOf(e.MAC)
				r := fdbRemote{dst: e.Dst, perm: e.Permanent}
				if h, ok := d.haveFDB[m]; ok {
					h.more = append(h.more, r)
					d.haveFDB[m] = h
				} else {
					d.haveFDB[m] = fdbHave{one: r}
				}
			}
		}
	}
	d.dev.SetLink(l)
	d.dev.MarkDirty()
	d.dirtyAll()
	d.resync = false
	return nil
}

// dirtyAll marks every key wanted or held for the next write.
func (d *Driver) dirtyAll() { d.allDirty = true }

// eachDirtyFDB and eachDirtyNeigh call fn for every dirty key.
func (d *Driver) eachDirtyFDB(fn func(mac)) {
	if !d.allDirty {
		for m := range d.dirtyFDB {
			fn(m)
		}
		return
	}
	for m := range d.fdbOwner {
		fn(m)
	}
	for m := range d.haveFDB {
		if _, ok := d.fdbOwner[m]; !ok {
			fn(m)
		}
	}
	for m := range d.dirtyFDB { // keys no longer wanted nor held
		if _, ok := d.fdbOwner[m]; !ok {
			if _, ok := d.haveFDB[m]; !ok {
				fn(m)
			}
		}
	}
}

func (d *Driver) eachDirtyNeigh(fn func(netip.Addr)) {
	if !d.allDirty {
		for ip := range d.dirtyNeigh {
			fn(ip)
		}
		return
	}
	for ip := range d.neighOwner {
		fn(ip)
	}
	for ip := range d.haveNeigh {
		if _, ok := d.neighOwner[ip]; !ok {
			fn(ip)
		}
	}
	for ip := range d.dirtyNeigh {
		if _, ok := d.neighOwner[ip]; !ok {
			if _, ok := d.haveNeigh[ip]; !ok {
				fn(ip)
			}
		}
	}
}

// ensureDevice makes the device what is declared, or deletes it.
func (d *Driver) ensureDevice(ctx context.Context) error {
	name, dev := d.opts.Name, d.dev.Want()
	if dev == nil {
		had := d.dev.Link().Index > 0
		if err := d.dev.Remove(ctx, nil); err != nil {
			return errs.Also(fmt.Errorf("%w: %s: %w", ErrDevice, name, err))
		}
		if had {
			d.dev.Log.Debug("vxlan: device deleted", "device", name)
		}
		clear(d.haveNeigh)
		clear(d.haveFDB)
		return nil
	}
	parent, err := d.parentOf(ctx, dev.Local)
	if err != nil {
		return err
	}
	want := &kernel.VXLAN{VNI: dev.VNI, Port: dev.Port, ParentIndex: parent, Local: dev.Local}
	spec := &tunnel.DeviceSpec{
		Link:   kernel.Link{Name: name, Kind: kernel.KindVXLAN, MTU: dev.MTU, MAC: dev.MAC, VXLAN: want},
		Family: d.opts.Family,
		Compatible: func(have *kernel.Link) bool {
			v := have.VXLAN
			return v != nil && v.VNI == want.VNI && v.Port == want.Port && v.ParentIndex == want.ParentIndex &&
				v.Local == want.Local && !v.Learning
		},
		// The kernel gives a VNI and a UDP port of a family to one VXLAN
		// device of the namespace, whatever its parent or local address.
		Conflict: func(o *kernel.Link) string {
			v := o.VXLAN
			if o.Kind != kernel.KindVXLAN || v == nil || v.VNI != want.VNI || v.Port != want.Port ||
				(v.Local.IsValid() && v.Local.Is6() != want.Local.Is6()) {
				return ""
			}
			return fmt.Sprintf("VNI %d with UDP port %d", want.VNI, want.Port)
		},
	}
	if dev.Address.IsValid() {
		spec.Addr = netip.PrefixFrom(dev.Address, dev.Address.BitLen())
	}
	old := d.dev.Link().Index
	res, err := d.dev.Ensure(ctx, spec)
	if res.Created || res.Link.Index != old {
		// Whatever was on the old device went with it.
		clear(d.haveNeigh)
		clear(d.haveFDB)
		d.dirtyAll()
	}
	if err != nil {
		return errs.Also(fmt.Errorf("%w: %s: %w", ErrDevice, name, err))
	}
	if res.Created {
		d.dev.Log.Debug("vxlan: device created", "device", name, "index", res.Link.Index, "vni", want.VNI, "parent", parent)
	}
	return nil
}

// parentOf returns the index of the interface that holds local.
func (d *Driver) parentOf(ctx context.Context, local netip.Addr) (int, error) {
	addrs, err := d.opts.Kernel.Addrs(ctx, d.opts.Family)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: parent of %s: %w", ErrDevice, d.opts.Name, local, err)
	}
	for _, a := range addrs {
		if a.Prefix.Addr() == local {
			return a.LinkIndex, nil
		}
	}
	return 0, errs.Also(fmt.Errorf("%w: %s: %s is on no interface", ErrNoParent, d.opts.Name, local), ErrDevice)
}

// writeEntries writes the dirty neighbour and FDB entries that are not
// waiting for their retry, and returns the keys that failed now.
func (d *Driver) writeEntries(ctx context.Context, now time.Time) triedKeys {
	var tried triedKeys
	if d.dev.Want() == nil || d.dev.Link().Index == 0 || d.dev.Dirty() {
		return tried // no device (yet): the entries wait for it
	}
	idx := d.dev.Link().Index
	// One slab holds the MACs of every operation of this Apply.
	n := len(d.dirtyFDB) + len(d.dirtyNeigh)
	if d.allDirty {
		n += len(d.fdbOwner) + len(d.haveFDB) + len(d.neighOwner) + len(d.haveNeigh)
	}
	slab := make([]byte, 0, 6*n)
	hw := func(m mac) net.HardwareAddr {
		slab = append(slab, m[:]...)
		return net.HardwareAddr(slab[len(slab)-6 : len(slab) : len(slab)])
	}
	// FDB first: a neighbour entry is only useful once its MAC leads
	// somewhere.
	fops := make([]kernel.FDBOp, 0, n/2)
	fkeys := make([]mac, 0, n/2)
	d.eachDirtyFDB(func(m mac) {
		if d.fdbRetry.Waiting(m, now) {
			d.dirtyFDB[m] = struct{}{}
			return
		}
		n := len(fops)
		fops = d.fdbOps(fops, idx, m, hw)
		if len(fops) == n {
			delete(d.dirtyFDB, m)
			d.fdbRetry.Clear(m)
			return
		}
		for range len(fops) - n {
			fkeys = append(fkeys, m)
		}
	})
	if len(fops) > 0 {
		d.stats.FDBWrites += uint64(len(fops))
		errs := d.opts.Kernel.ApplyFDB(ctx, fops)
		for i, err := range errs {
			if err != nil && !(fops[i].Kind == kernel.OpDelete && errors.Is(err, kernel.ErrNotFound)) {
				m := fkeys[i]
				if tried.fdb == nil {
					tried.fdb = map[mac]bool{}
				}
				if !tried.fdb[m] {
					tried.fdb[m] = true
					d.dirtyFDB[m] = struct{}{}
					// What the kernel holds is unknown: the same writes
					// are made again at the retry (replaces are
					// idempotent, deletes of what is gone succeed).
					d.fdbRetry.Fail(m, now, fmt.Errorf("%w: %s: %w", ErrFDB, net.HardwareAddr(m[:]), err))
				}
			}
		}
		for i, m := range fkeys {
			if tried.fdb[m] || (i > 0 && fkeys[i-1] == m) {
				continue
			}
			d.fdbRetry.Clear(m)
			delete(d.dirtyFDB, m)
			if dst, ok := d.wantFDB(m); ok {
				d.haveFDB[m] = fdbHave{one: fdbRemote{dst: dst, perm: true}}
			} else {
				delete(d.haveFDB, m)
			}
		}
	}
	nops := make([]kernel.NeighborOp, 0, n/2)
	d.eachDirtyNeigh(func(ip netip.Addr) {
		if d.neighRetry.Waiting(ip, now) {
			d.dirtyNeigh[ip] = struct{}{}
			return
		}
		op, ok := d.neighOp(idx, ip, hw)
		if !ok {
			delete(d.dirtyNeigh, ip)
			d.neighRetry.Clear(ip)
			return
		}
		nops = append(nops, op)
	})
	d.allDirty = false
	if len(nops) > 0 {
		d.stats.NeighborWrites += uint64(len(nops))
		for i, err := range d.opts.Kernel.ApplyNeighbors(ctx, nops) {
			op := &nops[i]
			ip := op.Neighbor.IP
			if err != nil && !(op.Kind == kernel.OpDelete && errors.Is(err, kernel.ErrNotFound)) {
				if tried.neigh == nil {
					tried.neigh = map[netip.Addr]bool{}
				}
				tried.neigh[ip] = true
				d.dirtyNeigh[ip] = struct{}{}
				d.neighRetry.Fail(ip, now, fmt.Errorf("%w: %s: %w", ErrNeighbor, ip, err))
				continue
			}
			d.neighRetry.Clear(ip)
			delete(d.dirtyNeigh, ip)
			if op.Kind == kernel.OpDelete {
				delete(d.haveNeigh, ip)
			} else {
				d.haveNeigh[ip] = neighEntry{mac: macOf(op.Neighbor.MAC), state: kernel.NUDPermanent}
			}
		}
	}
	// Iterating a map costs its capacity: once the dirty keys are written,
	// start afresh rather than walk a map sized for the first load.
	if len(d.dirtyFDB) == 0 {
		d.dirtyFDB = map[mac]struct{}{}
	}
	if len(d.dirtyNeigh) == 0 {
		d.dirtyNeigh = map[netip.Addr]struct{}{}
	}
	return tried
}

// fdbOps appends the writes that make the MAC's entry what is wanted: one
// remote, permanent. A replace of a unicast MAC replaces its first remote
// in place, so a remote that moves is never missing.
func (d *Driver) fdbOps(ops []kernel.FDBOp, idx int, m mac, hw func(mac) net.HardwareAddr) []kernel.FDBOp {
	h, held := d.haveFDB[m]
	dst, want := d.wantFDB(m)
	if !want {
		if !held {
			return ops
		}
		return append(ops, kernel.FDBOp{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: hw(m)}})
	}
	if held && len(h.more) == 0 && h.one.dst == dst && h.one.perm {
		return ops
	}
	if !held {
		return append(ops, kernel.FDBOp{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: hw(m), Dst: dst, Permanent: true}})
	}
	have := h.list()
	present, perm := false, false
	for _, r := range have {
		if r.dst == dst {
			present, perm = true, r.perm
		}
	}
	if !present || !perm {
		ops = append(ops, kernel.FDBOp{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: hw(m), Dst: dst, Permanent: true}})
	}
	for i, r := range have {
		if r.dst == dst || (!present && i == 0) || !r.dst.IsValid() {
			continue // the one kept, or the one the replace took over
		}
		ops = append(ops, kernel.FDBOp{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: hw(m), Dst: r.dst}})
	}
	return ops
}

// neighOp returns the write that makes the kernel's entry for ip what is
// wanted, if any. Entries that are not permanent and that nobody wants
// are the kernel's own (resolution attempts), not ours.
func (d *Driver) neighOp(idx int, ip netip.Addr, hw func(mac) net.HardwareAddr) (kernel.NeighborOp, bool) {
	have, held := d.haveNeigh[ip]
	m, want := d.wantNeigh(ip)
	switch {
	case want && held && have.mac == m && have.state&kernel.NUDPermanent != 0:
		return kernel.NeighborOp{}, false
	case want:
		return kernel.NeighborOp{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{
			LinkIndex: idx, IP: ip, MAC: hw(m), State: kernel.NUDPermanent}}, true
	case held && have.state&kernel.NUDPermanent != 0:
		return kernel.NeighborOp{Kind: kernel.OpDelete, Neighbor: kernel.Neighbor{LinkIndex: idx, IP: ip}}, true
	}
	return kernel.NeighborOp{}, false
}

// triedKeys are the entries an Apply tried to write.
type triedKeys struct {
	neigh map[netip.Addr]bool
	fdb   map[mac]bool
}

// report turns the failing objects into the Apply's outcome: a
// *dataplane.PartialError (tried and failed, or waiting) with RetryAfter
// set to the first retry due, or nothing.
func (d *Driver) report(now time.Time, triedDev bool, t triedKeys) (dataplane.ApplyResult, error) {
	pe := &dataplane.PartialError{}
	after := d.dev.Collect(pe, now, triedDev)
	after = tunnel.MinAfter(after, d.fdbRetry.Collect(pe, now, t.fdb))
	after = tunnel.MinAfter(after, d.neighRetry.Collect(pe, now, t.neigh))
	return tunnel.Outcome(pe, after)
}
