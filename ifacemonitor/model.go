//go:build linux

package ifacemonitor

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	afBridge   = unix.AF_BRIDGE
	rtmNewLink = unix.RTM_NEWLINK
	rtmDelLink = unix.RTM_DELLINK
)

// link is one kernel link in the model.
type link struct {
	linkInfo
	visible    bool // its name passes Include/Exclude
	addrs      map[netip.Prefix]struct{}
	addrsDirty bool      // addrs changed since they were last compared with the report
	downSince  time.Time // when it went from up to down; zero while up
}

// routeSlot is what the kernel replaces on NLM_F_REPLACE: the key without
// the output interface.
type routeSlot struct {
	table    int
	dst      netip.Prefix
	priority int
	tos      int
}

func slotOf(k RouteKey) routeSlot {
	return routeSlot{table: k.Table, dst: k.Dst, priority: k.Priority, tos: k.TOS}
}

// model is the monitor's picture of the kernel, updated by events and
// re-lists, and what changed in it since the last report.
type model struct {
	links   map[int]*link
	byName  map[string]map[int]*link // several indexes share a name only transiently
	orphans map[int]map[netip.Prefix]struct{}
	dirty   map[int]struct{} // link indexes to compare with the report
	damped  map[int]time.Time

	routes      map[RouteKey]Route
	slots       map[routeSlot]map[int]struct{}
	dirtyRoutes map[RouteKey]struct{}
}

func newModel() model {
	return model{
		links:       map[int]*link{},
		byName:      map[string]map[int]*link{},
		orphans:     map[int]map[netip.Prefix]struct{}{},
		dirty:       map[int]struct{}{},
		damped:      map[int]time.Time{},
		routes:      map[RouteKey]Route{},
		slots:       map[routeSlot]map[int]struct{}{},
		dirtyRoutes: map[RouteKey]struct{}{},
	}
}

func (r *run) addName(l *link) {
	s := r.byName[l.name]
	if s == nil {
		s = map[int]*link{}
		r.byName[l.name] = s
	}
	s[l.index] = l
}

func (r *run) delName(l *link) {
	if s := r.byName[l.name]; s != nil {
		delete(s, l.index)
		if len(s) == 0 {
			delete(r.byName, l.name)
		}
	}
}

// upsertLink records a link as the kernel reports it now.
func (r *run) upsertLink(li linkInfo, now time.Time) {
	l := r.links[li.index]
	if l == nil {
		l = &link{linkInfo: li, visible: r.m.Matches(li.name), addrs: r.orphans[li.index], addrsDirty: true}
		delete(r.orphans, li.index)
		if l.addrs == nil {
			l.addrs = map[netip.Prefix]struct{}{}
		}
		r.links[li.index] = l
		r.addName(l)
		r.dirty[li.index] = struct{}{}
		return
	}
	changed := l.mtu != li.mtu || l.typ != li.typ
	if l.name != li.name {
		r.delName(l)
		l.name = li.name
		l.visible = r.m.Matches(li.name)
		r.addName(l)
		l.addrsDirty = true // they move to the new name
		changed = true
	}
	if l.up != li.up {
		if li.up {
			l.downSince = time.Time{}
			delete(r.damped, li.index)
		} else {
			l.downSince = now
		}
		changed = true
	}
	if l.adminUp && !li.adminUp {
		r.routesFlushedSilently()
	}
	l.linkInfo = li
	if changed {
		r.dirty[li.index] = struct{}{}
	}
}

// removeLink records that a link is gone.
func (r *run) removeLink(index int) {
	l := r.links[index]
	if l == nil {
		delete(r.orphans, index)
		return
	}
	r.delName(l)
	delete(r.links, index)
	delete(r.damped, index)
	r.dirty[index] = struct{}{}
	r.routesFlushedSilently()
}

// routesFlushedSilently asks for a route re-list: when a link goes down or
// away, the kernel drops its IPv4 routes without a notification.
func (r *run) routesFlushedSilently() {
	r.want |= r.subscribed & nlutil.Routes
}

// applyLinkList replaces the model's links with a dump.
func (r *run) applyLinkList(ls []netlink.Link, now time.Time) {
	seen := make(map[int]struct{}, len(ls))
	for _, nl := range ls {
		li, ok := linkInfoFrom(nl)
		if !ok {
			continue
		}
		seen[li.index] = struct{}{}
		r.upsertLink(li, now)
	}
	for idx := range r.links {
		if _, ok := seen[idx]; !ok {
			r.removeLink(idx)
		}
	}
}

// applyAddrUpdate applies an address event. An address of a link the model
// does not know yet (its link event comes through another socket and may
// come later) is kept as an orphan until the link appears.
func (r *run) applyAddrUpdate(u *netlink.AddrUpdate) {
	p, ok := prefixFrom(u.LinkAddress)
	if !ok || u.LinkIndex <= 0 {
		return
	}
	l := r.links[u.LinkIndex]
	var set map[netip.Prefix]struct{}
	if l != nil {
		set = l.addrs
	} else {
		set = r.orphans[u.LinkIndex]
		if set == nil {
			if !u.NewAddr {
				return
			}
			set = map[netip.Prefix]struct{}{}
			r.orphans[u.LinkIndex] = set
		}
	}
	_, had := set[p]
	if had == u.NewAddr {
		return
	}
	if u.NewAddr {
		set[p] = struct{}{}
	} else {
		delete(set, p)
		if l == nil && len(set) == 0 {
			delete(r.orphans, u.LinkIndex)
		}
	}
	if l != nil {
		l.addrsDirty = true
		r.dirty[l.index] = struct{}{}
	}
}

// applyAddrList replaces every link's addresses with a dump.
func (r *run) applyAddrList(as []netlink.Addr) {
	byIdx := map[int]map[netip.Prefix]struct{}{}
	for _, a := range as {
		if a.IPNet == nil || a.LinkIndex <= 0 {
			continue
		}
		p, ok := prefixFrom(*a.IPNet)
		if !ok {
			continue
		}
		set := byIdx[a.LinkIndex]
		if set == nil {
			set = map[netip.Prefix]struct{}{}
			byIdx[a.LinkIndex] = set
		}
		set[p] = struct{}{}
	}
	for idx, l := range r.links {
		want := byIdx[idx]
		delete(byIdx, idx)
		if maps.Equal(l.addrs, want) {
			continue
		}
		if want == nil {
			want = map[netip.Prefix]struct{}{}
		}
		l.addrs = want
		l.addrsDirty = true
		r.dirty[idx] = struct{}{}
	}
	r.orphans = byIdx
}

// applyRouteUpdate applies a route event.
func (r *run) applyRouteUpdate(u *netlink.RouteUpdate) {
	rt, ok := routeFrom(u.Route)
	if !ok {
		return
	}
	k := rt.Key()
	switch u.Type {
	case unix.RTM_NEWROUTE:
		if u.NlFlags&unix.NLM_F_REPLACE != 0 {
			for li := range r.slots[slotOf(k)] {
				if li != k.LinkIndex {
					old := k
					old.LinkIndex = li
					r.delRoute(old)
				}
			}
		}
		if old, ok := r.routes[k]; ok && old.Equal(rt) {
			return
		}
		r.setRoute(rt)
	case unix.RTM_DELROUTE:
		r.delRoute(k)
	}
}

func (r *run) setRoute(rt Route) {
	k := rt.Key()
	r.routes[k] = rt
	s := r.slots[slotOf(k)]
	if s == nil {
		s = map[int]struct{}{}
		r.slots[slotOf(k)] = s
	}
	s[k.LinkIndex] = struct{}{}
	r.dirtyRoutes[k] = struct{}{}
}

func (r *run) delRoute(k RouteKey) {
	if _, ok := r.routes[k]; !ok {
		return
	}
	delete(r.routes, k)
	if s := r.slots[slotOf(k)]; s != nil {
		delete(s, k.LinkIndex)
		if len(s) == 0 {
			delete(r.slots, slotOf(k))
		}
	}
	r.dirtyRoutes[k] = struct{}{}
}

// applyRouteList replaces the model's routes with a dump.
func (r *run) applyRouteList(rs []netlink.Route) {
	want := make(map[RouteKey]Route, len(rs))
	for _, nr := range rs {
		if rt, ok := routeFrom(nr); ok {
			want[rt.Key()] = rt
		}
	}
	for k := range r.routes {
		if _, ok := want[k]; !ok {
			r.delRoute(k)
		}
	}
	for k, rt := range want {
		if old, ok := r.routes[k]; ok && old.Equal(rt) {
			continue
		}
		r.setRoute(rt)
	}
}

// dampDue marks the links whose held-back down report is due.
func (r *run) dampDue(now time.Time) {
	for idx, due := range r.damped {
		if !now.Before(due) {
			delete(r.damped, idx)
			r.dirty[idx] = struct{}{}
		}
	}
}

// pick returns the link to report under name: nil if no link has it or it
// is filtered out. If several links have it (only while stale events
// replay after a re-list), the one already reported keeps it; otherwise the
// newest.
func (r *run) pick(name string) *link {
	cands := r.byName[name]
	var best *link
	for _, l := range cands {
		if !l.visible {
			return nil
		}
		if best == nil || l.index > best.index {
			best = l
		}
	}
	if rep := r.m.rep[name]; rep != nil {
		if l := cands[rep.Index]; l != nil {
			return l
		}
	}
	return best
}

// stateOf is the state to report for l, which is or will be reported under
// the name of rep (nil if none): down is held back while the damping window
// of a link reported up runs.
func (r *run) stateOf(l *link, rep *Interface, now time.Time) State {
	if l.up {
		return StateUp
	}
	if r.m.damping > 0 && rep != nil && rep.Index == l.index && rep.State == StateUp && !l.downSince.IsZero() {
		if due := l.downSince.Add(r.m.damping); now.Before(due) {
			r.damped[l.index] = due
			return StateUp
		}
	}
	delete(r.damped, l.index)
	return StateDown
}

func sortedAddrs(l *link) []netip.Prefix {
	if len(l.addrs) == 0 {
		return nil
	}
	ps := slices.Collect(maps.Keys(l.addrs))
	SortPrefixes(ps)
	return ps
}

// reconcileLinks compares the dirty part of the model with the reported
// view and reports the differences. Names whose holder changed are released
// first (gone reports), then new and changed interfaces are reported, so a
// consumer that keys interfaces by name never sees two at once.
func (r *run) reconcileLinks(now time.Time) {
	if len(r.dirty) == 0 {
		return
	}
	names := map[string]struct{}{}
	for idx := range r.dirty {
		if l := r.links[idx]; l != nil {
			names[l.name] = struct{}{}
		}
		if n, ok := r.m.repByIdx[idx]; ok {
			names[n] = struct{}{}
		}
	}
	clear(r.dirty)
	sorted := slices.Sorted(maps.Keys(names))
	desired := make(map[string]*link, len(sorted))
	for _, n := range sorted {
		if l := r.pick(n); l != nil {
			desired[n] = l
		}
	}

	removed := map[int]string{} // index → the name it was reported under
	for _, n := range sorted {
		rep := r.m.rep[n]
		if rep == nil {
			continue
		}
		if l := desired[n]; l != nil && l.index == rep.Index {
			continue
		}
		r.reportGone(rep)
		removed[rep.Index] = n
	}

	for _, n := range sorted {
		l := desired[n]
		if l == nil {
			continue
		}
		rep := r.m.rep[n]
		state := r.stateOf(l, rep, now)
		if rep == nil {
			if other, ok := r.m.repByIdx[l.index]; ok {
				// Still reported under a name that is not being
				// reconciled; release it first.
				r.reportGone(r.m.rep[other])
				removed[l.index] = other
			}
			iface := &Interface{Name: n, Index: l.index, State: state, MTU: l.mtu, Type: l.typ, Addrs: sortedAddrs(l)}
			l.addrsDirty = false
			r.m.mu.Lock()
			r.m.rep[n] = iface
			r.m.repByIdx[l.index] = n
			r.m.mu.Unlock()
			r.reportLink(LinkUpdate{Name: n, Index: l.index, State: state, MTU: l.mtu, Type: l.typ, OldName: removed[l.index]})
			if len(iface.Addrs) > 0 {
				r.reportAddrs(n, iface.Addrs)
			}
			continue
		}
		if state != rep.State || l.mtu != rep.MTU || l.typ != rep.Type {
			r.m.mu.Lock()
			rep.State, rep.MTU, rep.Type = state, l.mtu, l.typ
			r.m.mu.Unlock()
			r.reportLink(LinkUpdate{Name: n, Index: l.index, State: state, MTU: l.mtu, Type: l.typ})
		}
		if l.addrsDirty {
			l.addrsDirty = false
			if addrs := sortedAddrs(l); !slices.Equal(addrs, rep.Addrs) {
				r.m.mu.Lock()
				rep.Addrs = addrs
				r.m.mu.Unlock()
				r.reportAddrs(n, addrs)
			}
		}
	}
}

// reportGone removes rep from the reported view and reports it gone, its
// addresses first.
func (r *run) reportGone(rep *Interface) {
	r.m.mu.Lock()
	delete(r.m.rep, rep.Name)
	delete(r.m.repByIdx, rep.Index)
	r.m.mu.Unlock()
	if len(rep.Addrs) > 0 {
		r.reportAddrs(rep.Name, nil)
	}
	r.reportLink(LinkUpdate{Name: rep.Name, Index: rep.Index, State: StateGone, MTU: rep.MTU, Type: rep.Type})
}

func (r *run) reportLink(u LinkUpdate) {
	r.m.log.Debug("ifacemonitor: link", "name", u.Name, "index", u.Index, "state", u.State.String(), "mtu", u.MTU, "old_name", u.OldName)
	if f := r.m.opts.OnLinkState; f != nil {
		r.call("OnLinkState", func() { f(u) })
	}
}

func (r *run) reportAddrs(name string, addrs []netip.Prefix) {
	r.m.log.Debug("ifacemonitor: addresses", "name", name, "count", len(addrs))
	if f := r.m.opts.OnAddrs; f != nil {
		c := slices.Clone(addrs)
		r.call("OnAddrs", func() { f(name, c) })
	}
}

// reconcileRoutes reports the routes that changed since the last report.
func (r *run) reconcileRoutes() {
	if len(r.dirtyRoutes) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(r.dirtyRoutes), CompareRouteKeys)
	clear(r.dirtyRoutes)
	for _, k := range keys {
		cur, ok := r.routes[k]
		old, had := r.m.repRoutes[k]
		var u RouteUpdate
		switch {
		case !ok && had:
			r.m.mu.Lock()
			delete(r.m.repRoutes, k)
			r.m.mu.Unlock()
			u = RouteUpdate{Route: old, Gone: true}
		case ok && (!had || !old.Equal(cur)):
			r.m.mu.Lock()
			r.m.repRoutes[k] = cur
			r.m.mu.Unlock()
			u = RouteUpdate{Route: cur}
		default:
			continue
		}
		if f := r.m.opts.OnRoute; f != nil {
			u.Route.Nexthops = slices.Clone(u.Route.Nexthops)
			r.call("OnRoute", func() { f(u) })
		}
	}
}
