package routetable

import (
	"maps"
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// drainEvents applies the queued interface changes and routes, in the
// order they came, and the resync request. Route events are dropped when
// the table is to be read again. Called with t.mu held.
func (t *Table) drainEvents() {
	t.evMu.Lock()
	events := t.events
	t.events = nil
	if t.resyncQueued {
		t.needResync = true
		t.resyncQueued = false
	}
	t.evMu.Unlock()
	for i := range events {
		ev := &events[i]
		switch {
		case ev.route == nil:
			t.ifaceChanged(ev.name, ev.index, ev.state)
		case !t.needResync:
			t.forgetFlushed() // routes the kernel removed before this one came
			t.routeChanged(ev.route, ev.gone)
		}
	}
	t.forgetFlushed()
}

// routeChanged records a route the kernel reported new or changed, or
// gone, in the views of the table: a route that is gone is forgotten if it
// is the one recorded (an older report of a route since replaced says
// nothing of its successor); a new one is recorded as ours or foreign, in
// place of the same route (sameRoute) of the other kind, which it
// replaced.
func (t *Table) routeChanged(r *kernel.Route, gone bool) {
	k, v, ours, ok := t.dumped(r)
	if !ok {
		return
	}
	cur, have := t.tr.Dataplane().Get(k)
	switch {
	case gone:
		if have && krouteEqual(cur, v) {
			t.tr.Dataplane().Delete(k)
		}
		t.dropForeign(k, func(f kroute) bool { return krouteEqual(f, v) })
	case ours:
		t.dropForeign(k, func(f kroute) bool { return sameRoute(f, v) })
		if !have || !krouteEqual(cur, v) {
			t.tr.Dataplane().Set(k, v)
		}
	default:
		if have && sameRoute(cur, v) {
			t.tr.Dataplane().Delete(k)
		}
		t.addForeign(k, v)
	}
}

// ifaceChanged records that interface name now has index and state, and
// re-resolves the keys that depend on it. Routes through an index that
// went down or away are dropped from the dataplane view (the kernel
// removes them); forgetFlushed does that once per batch of changes.
func (t *Table) ifaceChanged(name string, index int32, state kernel.LinkState) {
	rec := t.recs[name]
	if rec == nil {
		if state == kernel.LinkGone {
			return
		}
		rec = &ifaceRec{name: name}
		t.recs[name] = rec
	}
	if state == kernel.LinkGone {
		index = 0
	}
	if rec.index == index && rec.state == state {
		return
	}
	oldIndex, wasUp := rec.index, rec.up()
	if oldIndex != 0 && (oldIndex != index || state != kernel.LinkUp) {
		// Down or away: the kernel removed the routes through it.
		t.flushedIndex[oldIndex] = t.flushedIndex[oldIndex] || oldIndex != index
	}
	if oldIndex != 0 && oldIndex != index && t.byIndex[oldIndex] == rec {
		delete(t.byIndex, oldIndex)
	}
	rec.index, rec.state = index, state
	if index != 0 {
		if other := t.byIndex[index]; other != nil && other != rec {
			// The index was renamed to this name before we heard the
			// old name was gone.
			t.ifaceChanged(other.name, 0, kernel.LinkGone)
		}
		t.byIndex[index] = rec
	}
	t.opts.Logger.Debug("routetable: interface changed", "table", t.Name(), "iface", name, "index", index,
		"state", state, "was_up", wasUp)
	if wasUp != rec.up() || oldIndex != index {
		t.resolveIface(rec)
	}
	if rec.up() && (!wasUp || oldIndex != index) {
		// Down, the kernel removed its routes, unless only the carrier
		// went (then it keeps them), and others may have added some:
		// read them before writing.
		t.rescan[index] = struct{}{}
	}
	t.releaseRec(rec)
}

// resolveIface re-resolves every key declared on rec, and every multipath
// key.
func (t *Table) resolveIface(rec *ifaceRec) {
	for _, class := range rec.classes {
		for k := range t.groups[groupKey{class: class, iface: rec}] {
			t.resolve(k)
		}
	}
	for k := range t.multipath {
		t.resolve(k)
	}
}

// forgetFlushed drops from the views of the table the routes and
// neighbours through the interfaces in t.flushedIndex, which the kernel
// removed when those interfaces went down or away: ours, so that they are
// written again rather than deleted, and, through interfaces that went
// away, foreign ones, so that a re-created interface's routes are written
// at once rather than held for a foreign route gone with the old one. A
// foreign route through an interface that is only down stays: the kernel
// keeps it when only the carrier went, which a LinkState does not tell
// apart (ifacemonitor's route events, or the rescan when the interface
// comes up, tell the rest).
func (t *Table) forgetFlushed() {
	if len(t.flushedIndex) == 0 {
		return
	}
	var flushed []rkey
	for k, v := range t.tr.Dataplane().All() {
		if t.flushed(v, false) {
			flushed = append(flushed, k)
		}
	}
	for _, k := range flushed {
		t.tr.Dataplane().Delete(k)
		if t.isHost(k) && !t.opts.NoConntrackCleanup {
			// The address's route is gone: its flows go too, before
			// another route for it is written.
			t.pendingFlush = append(t.pendingFlush, t.addrOf(k))
		}
	}
	for k := range t.foreign {
		t.dropForeign(k, func(v kroute) bool { return t.flushed(v, true) })
	}
	var goneN []nbrKey
	for k := range t.nbrs.Dataplane().All() {
		if _, ok := t.flushedIndex[k.oif]; ok {
			goneN = append(goneN, k)
		}
	}
	for _, k := range goneN {
		t.nbrs.Dataplane().Delete(k)
	}
	clear(t.flushedIndex)
}

// flushed reports whether the kernel removed route v with the interfaces
// in t.flushedIndex (only those that went away, with goneOnly): a route
// through one of them alone, except an IPv4 local route through one that
// only went down, and an IPv4 multipath route with a path through one
// that went away (IPv6 drops that path alone).
func (t *Table) flushed(v kroute, goneOnly bool) bool {
	if v.hops != nil {
		return t.opts.Family == IPv4 && slices.ContainsFunc(*v.hops, func(h khop) bool { return t.flushedIndex[h.oif] })
	}
	gone, ok := t.flushedIndex[v.oif]
	switch {
	case !ok || v.oif == 0:
		return false
	case gone:
		return true
	}
	return !goneOnly && (v.typ != kernel.RTNLocal || t.opts.Family == IPv6)
}

// refreshLinks updates the interface table from a full list of links.
func (t *Table) refreshLinks(links []kernel.Link) {
	present := make(map[string]struct{}, len(links))
	for i := range links {
		l := &links[i]
		if validIfaceName(l.Name) != nil || l.Index <= 0 || int64(l.Index) > int64(^uint32(0)>>1) {
			continue
		}
		present[l.Name] = struct{}{}
		t.ifaceChanged(l.Name, int32(l.Index), l.State())
	}
	for _, name := range slices.Collect(maps.Keys(t.recs)) {
		if _, ok := present[name]; !ok {
			t.ifaceChanged(name, 0, kernel.LinkGone)
		}
	}
	t.forgetFlushed()
}
