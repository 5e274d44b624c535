package vxlan

import (
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
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

// Driver keeps one VXLAN device, and the neighbour and FDB entries of the
// remote VTEPs on it, equal to what was declared. It is a dataplane.Driver
// of PhaseTunnelL2 (before the routes through the device) and a
// dataplane.Wakeable. See the package documentation.
type Driver struct {
	opts DriverOptions
	// dev is the device, the Ledger of every object (device, neighbours,
	// FDB entries) and the count of writes.
	dev *tunnel.DeviceDriver[Device]

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
}

// NewDriver returns a Driver that wants no device and no entries until
// told otherwise. It validates opts and does no I/O.
func NewDriver(opts DriverOptions) (*Driver, error) {
	def := DefaultDeviceV4
	if opts.Family == IPv6 {
		def = DefaultDeviceV6
	}
	dev, err := tunnel.NewDeviceDriver[Device](tunnel.DeviceDriverOptions{Kernel: opts.Kernel, Family: opts.Family,
		Name: opts.Name, DefaultName: def, Kind: kernel.KindVXLAN, OnDevice: opts.OnDevice, Driver: "vxlan",
		Clock: opts.Clock, Logger: opts.Logger}, ErrDevice)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	dev.OnResync = opts.OnResync
	opts.Name = dev.Name
	return &Driver{
		opts: opts, dev: dev,
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
	case !tunnel.ValidMTU(dev.MTU, f):
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
	d.dev.Ledger.Forget(neighKey(r.ip))
	d.dev.Ledger.Forget(fdbKey(r.mac))
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

// neighKey and fdbKey are the Ledger keys of a neighbour and an FDB entry.
func neighKey(ip netip.Addr) tunnel.Key { return tunnel.Key{Kind: kindNeighbor, IP: ip} }

func fdbKey(m mac) tunnel.Key { return tunnel.Key{Kind: kindFDB, MAC: m} }

// Stats implements dataplane.StatsReporter. Desired counts, when a device
// is declared, the device, the neighbour entries and the FDB entries (one
// per MAC) wanted on it (none without a device); InKernel the device, the permanent neighbour entries and
// the MACs of the FDB on it as last read or written; Failing the objects
// in the Ledger; Writes every device change and entry operation sent.
func (d *Driver) Stats() dataplane.DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := dataplane.DriverStats{InKernel: len(d.haveFDB), Failing: d.dev.Ledger.Len(), Writes: d.dev.Writes}
	if d.dev.Want() != nil {
		s.Desired = 1 + len(d.neighOwner) + len(d.fdbOwner)
	}
	if d.dev.Present() {
		s.InKernel++
	}
	for _, n := range d.haveNeigh {
		if n.state&kernel.NUDPermanent != 0 {
			s.InKernel++
		}
	}
	return s
}
