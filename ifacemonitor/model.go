package ifacemonitor

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/kernel"
)

// linkInfo is what the monitor keeps of a kernel link.
type linkInfo struct {
	index   int
	name    string
	up      bool // kernel.LinkUp: admin up and running
	adminUp bool
	mtu     int
	kind    string
	encap   string
}

// linkInfoOf converts a kernel link; false for one without an index.
func linkInfoOf(l *kernel.Link) (linkInfo, bool) {
	if l.Index <= 0 {
		return linkInfo{}, false
	}
	return linkInfo{
		index:   l.Index,
		name:    l.Name,
		up:      l.State() == kernel.LinkUp,
		adminUp: l.AdminUp,
		mtu:     l.MTU,
		kind:    l.Kind,
		encap:   l.Encap,
	}, true
}

// link is one kernel link in the model.
type link struct {
	linkInfo
	visible    bool // its name passes Include/Exclude
	addrs      map[netip.Prefix]struct{}
	addrsDirty bool      // addrs changed since they were last compared with the report
	downSince  time.Time // when it went from up to down; zero while up
}

// model is the monitor's picture of the kernel, updated by events and
// re-lists, and what changed in it since the last report.
type model struct {
	links   map[int]*link
	byName  map[string]map[int]*link // several indexes share a name only transiently
	orphans map[int]map[netip.Prefix]struct{}
	dirty   map[int]struct{} // link indexes to compare with the report
	damped  map[int]time.Time

	routes      map[routeKey]kernel.Route
	slots       map[routeSlot]map[routeKey]struct{}
	dirtyRoutes map[routeKey]kernel.Route // keys changed since the last report, with the route they last held
	v4ByOIF     map[int]int               // single-path IPv4 routes of the model, by output interface
}

func newModel() model {
	return model{
		links:       map[int]*link{},
		byName:      map[string]map[int]*link{},
		orphans:     map[int]map[netip.Prefix]struct{}{},
		dirty:       map[int]struct{}{},
		damped:      map[int]time.Time{},
		routes:      map[routeKey]kernel.Route{},
		slots:       map[routeSlot]map[routeKey]struct{}{},
		dirtyRoutes: map[routeKey]kernel.Route{},
		v4ByOIF:     map[int]int{},
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
	changed := l.mtu != li.mtu || l.kind != li.kind || l.encap != li.encap
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
	if !li.adminUp && (l.adminUp || r.v4ByOIF[li.index] > 0) {
		// Its IPv4 routes went silently. The model may hold some that it
		// thinks down already: an event that replays a route added
		// before the link went down, after a listing that shows the link
		// down; the kernel holds no single-path IPv4 route through a link
		// that is down.
		r.relistRoutes()
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
		if r.v4ByOIF[index] > 0 {
			r.relistRoutes() // routes through it went with it, silently
		}
		return
	}
	r.delName(l)
	delete(r.links, index)
	delete(r.damped, index)
	r.dirty[index] = struct{}{}
	r.relistRoutes()
}

// relistRoutes asks for a route re-list: when a link goes down or away, or
// loses its last IPv4 address, the kernel drops its IPv4 routes without a
// notification; and some route events do not say what they replaced.
func (r *run) relistRoutes() {
	r.want |= r.subscribed & kernel.EventRoutes
}

// applyLinkList replaces the model's links with a dump.
func (r *run) applyLinkList(ls []kernel.Link, now time.Time) {
	seen := make(map[int]struct{}, len(ls))
	for i := range ls {
		li, ok := linkInfoOf(&ls[i])
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

// applyLinkEvent applies a link event.
func (r *run) applyLinkEvent(e *kernel.LinkEvent, now time.Time) {
	if e.Deleted {
		r.removeLink(e.Link.Index)
		return
	}
	if li, ok := linkInfoOf(&e.Link); ok {
		r.upsertLink(li, now)
	}
}

// applyAddrEvent applies an address event. An address of a link the model
// does not know yet (its link event may come later, after a re-list) is
// kept as an orphan until the link appears.
func (r *run) applyAddrEvent(e *kernel.AddrEvent) {
	p, idx, add := e.Addr.Prefix, e.Addr.LinkIndex, !e.Deleted
	if !p.IsValid() || idx <= 0 {
		return
	}
	l := r.links[idx]
	var set map[netip.Prefix]struct{}
	if l != nil {
		set = l.addrs
	} else {
		set = r.orphans[idx]
		if set == nil {
			if !add {
				return
			}
			set = map[netip.Prefix]struct{}{}
			r.orphans[idx] = set
		}
	}
	_, had := set[p]
	if had == add {
		if !add && l != nil && p.Addr().Is4() && !hasIPv4(set) && r.v4ByOIF[idx] > 0 {
			// A listing that shows the address gone came first; the
			// routes that went with it may have been replayed since.
			r.relistRoutes()
		}
		return
	}
	if add {
		set[p] = struct{}{}
	} else {
		delete(set, p)
		if l == nil && len(set) == 0 {
			delete(r.orphans, idx)
		}
		if l != nil && p.Addr().Is4() && !hasIPv4(set) {
			r.relistRoutes() // the link's IPv4 routes went silently
		}
	}
	if l != nil {
		l.addrsDirty = true
		r.dirty[l.index] = struct{}{}
	}
}

// hasIPv4 reports whether set holds an IPv4 address.
func hasIPv4(set map[netip.Prefix]struct{}) bool {
	for p := range set {
		if p.Addr().Is4() {
			return true
		}
	}
	return false
}

// applyAddrList replaces every link's addresses with a listing.
func (r *run) applyAddrList(as []kernel.Addr) {
	byIdx := map[int]map[netip.Prefix]struct{}{}
	for _, a := range as {
		if !a.Prefix.IsValid() || a.LinkIndex <= 0 {
			continue
		}
		set := byIdx[a.LinkIndex]
		if set == nil {
			set = map[netip.Prefix]struct{}{}
			byIdx[a.LinkIndex] = set
		}
		set[a.Prefix] = struct{}{}
	}
	for idx, l := range r.links {
		want := byIdx[idx]
		delete(byIdx, idx)
		if maps.Equal(l.addrs, want) {
			continue
		}
		if hasIPv4(l.addrs) && !hasIPv4(want) {
			r.relistRoutes()
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
func (r *run) stateOf(l *link, rep *Interface, now time.Time) kernel.LinkState {
	if l.up {
		return kernel.LinkUp
	}
	if r.m.damping > 0 && rep != nil && rep.Index == l.index && rep.State == kernel.LinkUp && !l.downSince.IsZero() {
		if due := l.downSince.Add(r.m.damping); now.Before(due) {
			r.damped[l.index] = due
			return kernel.LinkUp
		}
	}
	delete(r.damped, l.index)
	return kernel.LinkDown
}

func sortedAddrs(l *link) []netip.Prefix {
	if len(l.addrs) == 0 {
		return nil
	}
	ps := slices.Collect(maps.Keys(l.addrs))
	slices.SortFunc(ps, comparePrefixes)
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
			iface := &Interface{Name: n, Index: l.index, State: state, MTU: l.mtu, Kind: l.kind, Encap: l.encap, Addrs: sortedAddrs(l)}
			l.addrsDirty = false
			r.m.mu.Lock()
			r.m.rep[n] = iface
			r.m.repByIdx[l.index] = n
			r.m.mu.Unlock()
			r.reportLink(LinkUpdate{Name: n, Index: l.index, State: state, MTU: l.mtu, Kind: l.kind, Encap: l.encap, OldName: removed[l.index]})
			if len(iface.Addrs) > 0 {
				r.reportAddrs(n, iface.Addrs)
			}
			continue
		}
		if state != rep.State || l.mtu != rep.MTU || l.kind != rep.Kind || l.encap != rep.Encap {
			r.m.mu.Lock()
			rep.State, rep.MTU, rep.Kind, rep.Encap = state, l.mtu, l.kind, l.encap
			r.m.mu.Unlock()
			r.reportLink(LinkUpdate{Name: n, Index: l.index, State: state, MTU: l.mtu, Kind: l.kind, Encap: l.encap})
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
	r.reportLink(LinkUpdate{Name: rep.Name, Index: rep.Index, State: kernel.LinkGone, MTU: rep.MTU, Kind: rep.Kind, Encap: rep.Encap})
}

func (r *run) reportLink(u LinkUpdate) {
	r.m.log.Debug("ifacemonitor: link", "name", u.Name, "index", u.Index, "state", u.State.String(), "mtu", u.MTU, "kind", u.Kind, "old_name", u.OldName)
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
