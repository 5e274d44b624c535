package vxlan

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// The kinds of the Driver's entries in its Plan, State and errors; the
// device is of kind "link".
const (
	kindFDB      dataplane.ObjectKind = "fdb"
	kindNeighbor dataplane.ObjectKind = "neighbour"
)

// Plan returns the writes the next Apply would make, in its order: the
// device's ("link": created, deleted — also to be re-created — or changed
// in place: its MTU, MAC, tunnel address, up), then the FDB entries
// ("fdb") and the neighbour entries ("neighbour") of the device. It
// writes nothing. It implements dataplane.Planner.
//
// It is Apply's own pass run dry: it reads the kernel when the next Apply
// would (the first call, after QueueResync; that read serves the Apply),
// and the device's state and the host's addresses when the device is to
// be checked, as Apply would. A device or entry waiting for its retry is
// not in it; a device the pass would fail to check (no interface holds its
// local address, a foreign link holds its name) has no write, and its
// entries wait, as in Apply. A nil ctx is context.Background().
func (d *Driver) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var writes []dataplane.Write
	if err := d.pass(ctx, &writes); err != nil {
		return dataplane.Plan{}, err
	}
	return dataplane.Plan{Driver: d.Name(), Writes: writes}, nil
}

// State returns the device, the permanent neighbour entries and the FDB
// entries on it as the Driver last read or wrote them, every difference
// from what is declared (also those waiting for their retry), and the
// failing objects. The device's drift compares what the Driver saw of it
// (VNI, port, local address, learning, MTU and MAC when declared, up);
// its parent and tunnel address are checked by the next Apply. It writes
// nothing, and reads the kernel only when the next Apply would. It
// implements dataplane.Stater. A nil ctx is context.Background().
func (d *Driver) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resync {
		if err := d.read(ctx); err != nil {
			return dataplane.State{}, err
		}
	}
	s := dataplane.State{Driver: d.Name(), Failing: d.dev.Ledger.Errors()}
	var want *kernel.Link
	if dev := d.dev.Want(); dev != nil {
		want = &kernel.Link{Name: d.opts.Name, Kind: kernel.KindVXLAN, MTU: dev.MTU, MAC: dev.MAC,
			VXLAN: &kernel.VXLAN{VNI: dev.VNI, Port: dev.Port, Local: dev.Local}}
	}
	d.dev.State(&s, want, func(have *kernel.Link) bool {
		v, w := have.VXLAN, want.VXLAN
		return v == nil || v.VNI != w.VNI || v.Port != w.Port || v.Local != w.Local || v.Learning || !have.AdminUp ||
			(want.MTU > 0 && have.MTU != want.MTU) || (len(want.MAC) > 0 && !bytes.Equal(have.MAC, want.MAC))
	})
	for m, h := range d.haveFDB {
		for _, r := range h.list() {
			s.Owned = append(s.Owned, dataplane.Object{Kind: kindFDB, Text: d.fdbText(m, r.dst, r.perm)})
		}
	}
	for ip, n := range d.haveNeigh {
		if n.state&kernel.NUDPermanent != 0 {
			s.Owned = append(s.Owned, dataplane.Object{Kind: kindNeighbor, Text: d.neighText(ip, n.mac, true)})
		}
	}
	if d.dev.Want() == nil {
		dataplane.SortState(&s)
		return s, nil // no entries without a device
	}
	// An entry drifts when the pass's own decision would write it.
	v := view{neigh: d.haveNeigh, fdb: d.haveFDB, all: true}
	hw := func(m mac) net.HardwareAddr { return net.HardwareAddr(m[:]) }
	d.eachDirtyFDB(&v, func(m mac) {
		if len(d.fdbOps(nil, &v, 0, m, hw)) == 0 {
			return
		}
		dr := dataplane.Drift{Kind: kindFDB, Name: net.HardwareAddr(m[:]).String()}
		if dst, ok := d.wantFDB(m); ok {
			dr.Want = d.fdbText(m, dst, true)
		}
		if h, ok := v.fdb[m]; ok {
			var have []string
			for _, r := range h.list() {
				have = append(have, d.fdbText(m, r.dst, r.perm))
			}
			dr.Have = strings.Join(have, "; ")
		}
		s.Drift = append(s.Drift, dr)
	})
	d.eachDirtyNeigh(&v, func(ip netip.Addr) {
		if _, ok := d.neighOp(&v, 0, ip, hw); !ok {
			return
		}
		dr := dataplane.Drift{Kind: kindNeighbor, Name: ip.String()}
		if m, ok := d.wantNeigh(ip); ok {
			dr.Want = d.neighText(ip, m, true)
		}
		if n, ok := v.neigh[ip]; ok {
			dr.Have = d.neighText(ip, n.mac, n.state&kernel.NUDPermanent != 0)
		}
		s.Drift = append(s.Drift, dr)
	})
	dataplane.SortState(&s)
	return s, nil
}

// fdbWrite is the Plan's write of the FDB operation op, given what v
// holds: an add of a MAC v does not hold, a replace (saying what it
// replaces) of one it holds, or a deletion.
func (d *Driver) fdbWrite(op *kernel.FDBOp, v *view) dataplane.Write {
	e := &op.Entry
	m := macOf(e.MAC)
	w := dataplane.Write{Op: dataplane.WriteDelete, Kind: kindFDB, Object: d.fdbText(m, e.Dst, e.Permanent)}
	if op.Kind == kernel.OpDelete {
		return w
	}
	w.Op = dataplane.WriteAdd
	if h, ok := v.fdb[m]; ok {
		w.Op, w.Detail = dataplane.WriteReplace, "was "+d.fdbText(m, h.one.dst, h.one.perm)
	}
	return w
}

// neighWrite is the Plan's write of the neighbour operation op, given
// what v holds.
func (d *Driver) neighWrite(op *kernel.NeighborOp, v *view) dataplane.Write {
	ip := op.Neighbor.IP
	have, held := v.neigh[ip]
	if op.Kind == kernel.OpDelete {
		return dataplane.Write{Op: dataplane.WriteDelete, Kind: kindNeighbor, Object: d.neighText(ip, have.mac, true)}
	}
	w := dataplane.Write{Op: dataplane.WriteAdd, Kind: kindNeighbor, Object: d.neighText(ip, macOf(op.Neighbor.MAC), true)}
	if held {
		w.Op, w.Detail = dataplane.WriteReplace, "was "+d.neighText(ip, have.mac, have.state&kernel.NUDPermanent != 0)
	}
	return w
}

// fdbText is an FDB entry as `bridge fdb` prints it: "02:00:00:00:00:02
// dev np-vxlan dst 192.0.2.2 self permanent" (without dst for the
// deletion of a MAC's entry, without permanent for one that is not).
func (d *Driver) fdbText(m mac, dst netip.Addr, perm bool) string {
	s := net.HardwareAddr(m[:]).String() + " dev " + d.opts.Name
	if dst.IsValid() {
		s += " dst " + dst.String()
	}
	s += " self"
	if perm {
		s += " permanent"
	}
	return s
}

// neighText is a neighbour entry as `ip neigh` prints it: "10.0.0.2 dev
// np-vxlan lladdr 02:00:00:00:00:02 PERMANENT" (without PERMANENT for one
// that is not).
func (d *Driver) neighText(ip netip.Addr, m mac, perm bool) string {
	s := ip.String() + " dev " + d.opts.Name + " lladdr " + net.HardwareAddr(m[:]).String()
	if perm {
		s += " PERMANENT"
	}
	return s
}

var (
	_ dataplane.Planner       = (*Driver)(nil)
	_ dataplane.Stater        = (*Driver)(nil)
	_ dataplane.StatsReporter = (*Driver)(nil)
)
