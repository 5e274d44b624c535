package vxlan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/kernel"
)

// Apply implements dataplane.Driver. On the first call and after
// QueueResync it reads the device and its neighbour and FDB entries. It
// then ensures the device (created, re-created for a new VNI, port, local
// address or parent, otherwise changed in place), and writes the
// neighbour and FDB entries that differ, each kind in one batch. A failure
// to read the kernel fails the Apply as a whole (ErrRead). A device or an
// entry the kernel refuses fails alone: it is retried on its own backoff
// (the Driver's dataplane.Ledger) and reported in the Ledger's
// *dataplane.PartialError, whose *dataplane.ObjectError name it (kind
// "link", "fdb" or "neighbour"), with RetryAfter set, while everything
// else is written.
func (d *Driver) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.pass(ctx, nil); err != nil {
		return dataplane.ApplyResult{}, err
	}
	return d.dev.Result()
}

// view is what a pass takes the kernel to hold on the device: the entries
// as last read or written, or none on a device the pass creates; all says
// every key wanted or held is to be looked at.
type view struct {
	neigh map[netip.Addr]neighEntry
	fdb   map[mac]fdbHave
	all   bool
}

// pass is one Apply (plan nil) or, with plan, the same decisions run dry
// for a Plan: it appends the writes the Apply would make to *plan and
// writes nothing. Both read the kernel when a resync is due (that read
// serves the next Apply), check the device when it is dirty and not
// waiting for its retry, then decide the entries on the device.
func (d *Driver) pass(ctx context.Context, plan *[]dataplane.Write) error {
	d.dev.Ledger.Begin()
	d.dev.Recheck()
	if d.resync {
		if err := d.read(ctx); err != nil {
			return err
		}
	}
	v := view{neigh: d.haveNeigh, fdb: d.haveFDB, all: d.allDirty}
	clean, err := d.dev.Apply(plan, func(plan *[]dataplane.Write) error {
		fresh, err := d.ensureDevice(ctx, plan)
		if fresh {
			// Whatever was on the old device went with it.
			if plan == nil {
				clear(d.haveNeigh)
				clear(d.haveFDB)
				d.dirtyAll()
			} else {
				v = view{}
			}
			v.all = true
		}
		return err
	})
	if err != nil && plan == nil {
		d.resync = true // read what the failed attempt left
	}
	if !clean || d.dev.Want() == nil || (plan == nil && d.dev.Link().Index == 0) {
		return nil // no device (yet): the entries wait for it
	}
	d.writeEntries(ctx, plan, v)
	return nil
}

// read reads the device and its entries.
func (d *Driver) read(ctx context.Context) error {
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

// eachDirtyFDB and eachDirtyNeigh call fn for every key to look at: the
// dirty ones, or, when v.all, every key wanted, held or dirty.
func (d *Driver) eachDirtyFDB(v *view, fn func(mac)) {
	if !v.all {
		for m := range d.dirtyFDB {
			fn(m)
		}
		return
	}
	for m := range d.fdbOwner {
		fn(m)
	}
	for m := range v.fdb {
		if _, ok := d.fdbOwner[m]; !ok {
			fn(m)
		}
	}
	for m := range d.dirtyFDB { // keys no longer wanted nor held
		if _, ok := d.fdbOwner[m]; !ok {
			if _, ok := v.fdb[m]; !ok {
				fn(m)
			}
		}
	}
}

func (d *Driver) eachDirtyNeigh(v *view, fn func(netip.Addr)) {
	if !v.all {
		for ip := range d.dirtyNeigh {
			fn(ip)
		}
		return
	}
	for ip := range d.neighOwner {
		fn(ip)
	}
	for ip := range v.neigh {
		if _, ok := d.neighOwner[ip]; !ok {
			fn(ip)
		}
	}
	for ip := range d.dirtyNeigh {
		if _, ok := d.neighOwner[ip]; !ok {
			if _, ok := v.neigh[ip]; !ok {
				fn(ip)
			}
		}
	}
}

// ensureDevice makes the device what is declared, or deletes it (with a
// plan, it appends the writes to it instead). It reports whether the
// device is new (created, or found with another index than last seen), so
// that the entries the kernel held on the old one are gone.
func (d *Driver) ensureDevice(ctx context.Context, plan *[]dataplane.Write) (fresh bool, err error) {
	name, dev := d.opts.Name, d.dev.Want()
	if dev == nil {
		had := d.dev.Link().Index > 0
		if err := d.dev.Remove(ctx, nil, plan); err != nil {
			return false, err
		}
		if plan == nil {
			if had {
				d.dev.Log.Debug("vxlan: device deleted", "device", name)
			}
			clear(d.haveNeigh)
			clear(d.haveFDB)
		}
		return false, nil
	}
	parent, err := d.parentOf(ctx, dev.Local)
	if err != nil {
		return false, err
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
	res, err := d.dev.Ensure(ctx, spec, plan)
	if err == nil && res.Created && plan == nil {
		d.dev.Log.Debug("vxlan: device created", "device", name, "index", res.Link.Index, "vni", want.VNI, "parent", parent)
	}
	// (A new MAC: the kernel flushed the device's neighbour entries.)
	return res.Created || res.Link.Index != old || res.MACChanged, err
}

// parentOf returns the index of the interface that holds local.
func (d *Driver) parentOf(ctx context.Context, local netip.Addr) (int, error) {
	addrs, err := d.opts.Kernel.Addrs(ctx, d.opts.Family)
	if err != nil {
		return 0, fmt.Errorf("parent of %s: %w", local, err)
	}
	for _, a := range addrs {
		if a.Prefix.Addr() == local {
			return a.LinkIndex, nil
		}
	}
	return 0, fmt.Errorf("%w: %s is on no interface", ErrNoParent, local)
}

// writeEntries writes the dirty neighbour and FDB entries that are not
// waiting for their retry (in the order of their MACs and addresses), FDB
// first (a neighbour entry is only useful
// once its MAC leads somewhere), each kind in one batch, and records the
// failures in the Ledger. With a plan it decides the same on v, appends
// the writes to the plan, and neither writes nor changes the Driver.
func (d *Driver) writeEntries(ctx context.Context, plan *[]dataplane.Write, v view) {
	dry := plan != nil
	idx := d.dev.Link().Index
	// One slab holds the MACs of every operation of this Apply.
	n := len(d.dirtyFDB) + len(d.dirtyNeigh)
	if v.all {
		n += len(d.fdbOwner) + len(v.fdb) + len(d.neighOwner) + len(v.neigh)
	}
	slab := make([]byte, 0, 6*n)
	hw := func(m mac) net.HardwareAddr {
		slab = append(slab, m[:]...)
		return net.HardwareAddr(slab[len(slab)-6 : len(slab) : len(slab)])
	}
	// The keys are taken in order, so that a Plan lists the writes in the
	// order its Apply makes them.
	macs := make([]mac, 0, n/2)
	d.eachDirtyFDB(&v, func(m mac) { macs = append(macs, m) })
	slices.SortFunc(macs, func(a, b mac) int { return bytes.Compare(a[:], b[:]) })
	fops := make([]kernel.FDBOp, 0, len(macs))
	fkeys := make([]mac, 0, len(macs))
	for _, m := range macs {
		if d.dev.Ledger.Waiting(fdbKey(m)) {
			if !dry {
				d.dirtyFDB[m] = struct{}{}
			}
			continue
		}
		n := len(fops)
		fops = d.fdbOps(fops, &v, idx, m, hw)
		if len(fops) == n {
			if !dry {
				delete(d.dirtyFDB, m)
				d.dev.Ledger.Forget(fdbKey(m))
			}
			continue
		}
		for range len(fops) - n {
			fkeys = append(fkeys, m)
		}
	}
	if dry {
		for i := range fops {
			*plan = append(*plan, d.fdbWrite(&fops[i], &v))
		}
	} else if len(fops) > 0 {
		d.applyFDB(ctx, fops, fkeys)
	}
	ips := make([]netip.Addr, 0, n/2)
	d.eachDirtyNeigh(&v, func(ip netip.Addr) { ips = append(ips, ip) })
	slices.SortFunc(ips, netip.Addr.Compare)
	nops := make([]kernel.NeighborOp, 0, len(ips))
	for _, ip := range ips {
		if d.dev.Ledger.Waiting(neighKey(ip)) {
			if !dry {
				d.dirtyNeigh[ip] = struct{}{}
			}
			continue
		}
		op, ok := d.neighOp(&v, idx, ip, hw)
		if !ok {
			if !dry {
				delete(d.dirtyNeigh, ip)
				d.dev.Ledger.Forget(neighKey(ip))
			}
			continue
		}
		nops = append(nops, op)
	}
	if dry {
		for i := range nops {
			*plan = append(*plan, d.neighWrite(&nops[i], &v))
		}
		return
	}
	d.allDirty = false
	if len(nops) > 0 {
		d.applyNeighbors(ctx, nops)
	}
	// Iterating a map costs its capacity: once the dirty keys are written,
	// start afresh rather than walk a map sized for the first load.
	if len(d.dirtyFDB) == 0 {
		d.dirtyFDB = map[mac]struct{}{}
	}
	if len(d.dirtyNeigh) == 0 {
		d.dirtyNeigh = map[netip.Addr]struct{}{}
	}
}

// applyFDB writes the FDB operations (fkeys[i] is the MAC of fops[i]) in
// one batch and records the outcome: a MAC whose operations all succeeded
// is as wanted; one with a refused operation is failed in the Ledger once,
// and stays dirty (what the kernel holds is unknown: the same writes are
// made again at the retry; replaces are idempotent, deletes of what is
// gone succeed).
func (d *Driver) applyFDB(ctx context.Context, fops []kernel.FDBOp, fkeys []mac) {
	d.dev.Writes += uint64(len(fops))
	var failed map[mac]bool
	for i, err := range d.opts.Kernel.ApplyFDB(ctx, fops) {
		op := &fops[i]
		if err == nil || (op.Kind == kernel.OpDelete && errors.Is(err, kernel.ErrNotFound)) {
			continue
		}
		m := fkeys[i]
		if failed[m] {
			continue
		}
		if failed == nil {
			failed = map[mac]bool{}
		}
		failed[m] = true
		d.dirtyFDB[m] = struct{}{}
		d.dev.Ledger.Fail(fdbKey(m), &dataplane.ObjectError{Driver: "vxlan", Op: opName(op.Kind), Kind: kindFDB,
			Name: net.HardwareAddr(m[:]).String(), Object: d.remoteOf(d.fdbOwner[m]), Reason: ErrFDB, Err: err})
	}
	for i, m := range fkeys {
		if failed[m] || (i > 0 && fkeys[i-1] == m) {
			continue
		}
		d.dev.Ledger.Forget(fdbKey(m))
		delete(d.dirtyFDB, m)
		if dst, ok := d.wantFDB(m); ok {
			d.haveFDB[m] = fdbHave{one: fdbRemote{dst: dst, perm: true}}
		} else {
			delete(d.haveFDB, m)
		}
	}
}

// applyNeighbors writes the neighbour operations in one batch and records
// the outcome of each.
func (d *Driver) applyNeighbors(ctx context.Context, nops []kernel.NeighborOp) {
	d.dev.Writes += uint64(len(nops))
	for i, err := range d.opts.Kernel.ApplyNeighbors(ctx, nops) {
		op := &nops[i]
		ip := op.Neighbor.IP
		if err != nil && !(op.Kind == kernel.OpDelete && errors.Is(err, kernel.ErrNotFound)) {
			d.dirtyNeigh[ip] = struct{}{}
			d.dev.Ledger.Fail(neighKey(ip), &dataplane.ObjectError{Driver: "vxlan", Op: opName(op.Kind), Kind: kindNeighbor,
				Name: ip.String(), Object: d.remoteOf(d.neighOwner[ip]), Reason: ErrNeighbor, Err: err})
			continue
		}
		d.dev.Ledger.Forget(neighKey(ip))
		delete(d.dirtyNeigh, ip)
		if op.Kind == kernel.OpDelete {
			delete(d.haveNeigh, ip)
		} else {
			d.haveNeigh[ip] = neighEntry{mac: macOf(op.Neighbor.MAC), state: kernel.NUDPermanent}
		}
	}
}

// remoteOf is the Remote a claim's entry is written for (the Object of its
// ObjectError), or nil for an entry nobody wants.
func (d *Driver) remoteOf(c claim) any {
	if c.first == nil {
		return nil
	}
	r := c.first.r
	return Remote{TunnelIP: r.ip, MAC: net.HardwareAddr(r.mac[:]), Underlay: r.underlay}
}

// opName is an entry operation's name in an ObjectError.
func opName(k kernel.OpKind) string {
	if k == kernel.OpDelete {
		return "delete"
	}
	return "replace"
}

// fdbOps appends the writes that make the MAC's entry what is wanted: one
// remote, permanent, given what v holds. A replace of a unicast MAC
// replaces its first remote in place, so a remote that moves is never
// missing. An entry nobody wants is deleted only when it is permanent
// (ours): one that is not was added by someone else, or learnt.
func (d *Driver) fdbOps(ops []kernel.FDBOp, v *view, idx int, m mac, hw func(mac) net.HardwareAddr) []kernel.FDBOp {
	h, held := v.fdb[m]
	dst, want := d.wantFDB(m)
	if !want {
		if !held || !slices.ContainsFunc(h.list(), func(r fdbRemote) bool { return r.perm }) {
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
// wanted, given what v holds, if any. Entries that are not permanent and
// that nobody wants are the kernel's own (resolution attempts), not ours.
func (d *Driver) neighOp(v *view, idx int, ip netip.Addr, hw func(mac) net.HardwareAddr) (kernel.NeighborOp, bool) {
	have, held := v.neigh[ip]
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
