package ifacemonitor

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// routeKey tells routes apart as a dump does: the kernel's key (table,
// destination, TOS, metric; the family is the destination's), the type and
// the first hop, since routes of one kernel key may coexist (IPv6 routes
// through different links, IPv4 routes appended with NLM_F_APPEND). A
// multipath route has no first hop (OIF 0, no gateway).
type routeKey struct {
	table    uint32
	dst      netip.Prefix
	tos      uint8
	priority uint32
	typ      uint8
	oif      int
	gw       netip.Addr
}

// routeSlot is a route's kernel key: what NLM_F_REPLACE replaces.
type routeSlot struct {
	table    uint32
	dst      netip.Prefix
	tos      uint8
	priority uint32
}

func keyOf(r *kernel.Route) routeKey {
	return routeKey{table: r.Table, dst: r.Dst, tos: r.TOS, priority: r.Priority, typ: r.Type, oif: r.OIF, gw: r.Gateway}
}

func slotOf(k routeKey) routeSlot {
	return routeSlot{table: k.table, dst: k.dst, tos: k.tos, priority: k.priority}
}

// compareRouteKeys orders routes by family, table, destination, metric,
// TOS, type, output interface and gateway.
func compareRouteKeys(a, b routeKey) int {
	return cmp.Or(
		cmp.Compare(a.dst.Addr().BitLen(), b.dst.Addr().BitLen()),
		cmp.Compare(a.table, b.table),
		comparePrefixes(a.dst, b.dst),
		cmp.Compare(a.priority, b.priority),
		cmp.Compare(a.tos, b.tos),
		cmp.Compare(a.typ, b.typ),
		cmp.Compare(a.oif, b.oif),
		a.gw.Compare(b.gw),
	)
}

// normRoute returns r as the monitor keeps and reports it: its own copy,
// with the flags limited to kernel.WritableFlags on the route and its next
// hops. The state flags (linkdown, dead) change without a notification,
// so reporting them would make reports depend on when re-lists happen.
// ok is false for a route with no valid destination of its family.
func normRoute(r *kernel.Route) (kernel.Route, bool) {
	if !r.Family.Valid() || !r.Dst.IsValid() || r.Dst.Addr().Is4() != (r.Family == kernel.IPv4) {
		return kernel.Route{}, false
	}
	c := *r
	c.Flags &= kernel.WritableFlags
	if r.NextHops != nil {
		c.NextHops = slices.Clone(r.NextHops)
		for i := range c.NextHops {
			c.NextHops[i].Flags &= kernel.WritableFlags
		}
	}
	return c, true
}

// routeEqual reports whether a and b are the same route with the same
// attributes.
func routeEqual(a, b *kernel.Route) bool {
	return a.Family == b.Family && a.Table == b.Table && a.Dst == b.Dst && a.Type == b.Type &&
		a.Protocol == b.Protocol && a.Scope == b.Scope && a.TOS == b.TOS && a.Priority == b.Priority &&
		a.OIF == b.OIF && a.Gateway == b.Gateway && a.PrefSrc == b.PrefSrc && a.Flags == b.Flags &&
		a.MTU == b.MTU && slices.Equal(a.NextHops, b.NextHops)
}

func cloneRoute(r kernel.Route) kernel.Route {
	r.NextHops = slices.Clone(r.NextHops)
	return r
}

// applyRouteEvent applies a route event. The kernel does not announce
// everything: a route that NLM_F_REPLACE replaced through another next hop
// goes without a deletion, and an IPv6 multipath route that loses a path
// announces the deletion of that path alone. When an event leaves the
// model unsure (a new route beside another of its kernel key that the
// kernel did not add itself, a deletion of a route the model does not
// hold while its key holds others), the monitor re-lists the routes.
func (r *run) applyRouteEvent(e *kernel.RouteEvent) {
	rt, ok := normRoute(&e.Route)
	if !ok {
		return
	}
	k := keyOf(&rt)
	slot := r.slots[slotOf(k)]
	if e.Deleted {
		if _, ok := r.routes[k]; ok {
			r.delRoute(k)
		} else if len(slot) > 0 {
			r.relistRoutes()
		}
		return
	}
	if old, ok := r.routes[k]; ok {
		if !routeEqual(&old, &rt) {
			r.setRoute(rt)
		}
		return
	}
	// The kernel adds its own routes beside those of the same key (the
	// prefix, broadcast and multicast routes of each link); any other new
	// route there may have replaced one.
	if len(slot) > 0 && (rt.Protocol != kernel.ProtoKernel || len(rt.NextHops) > 0) {
		r.relistRoutes()
	}
	r.setRoute(rt)
}

func (r *run) setRoute(rt kernel.Route) {
	k := keyOf(&rt)
	if _, ok := r.routes[k]; !ok {
		r.countV4(&rt, 1)
	}
	r.routes[k] = rt
	s := r.slots[slotOf(k)]
	if s == nil {
		s = map[routeKey]struct{}{}
		r.slots[slotOf(k)] = s
	}
	s[k] = struct{}{}
	r.dirtyRoutes[k] = rt
}

func (r *run) delRoute(k routeKey) {
	rt, ok := r.routes[k]
	if !ok {
		return
	}
	r.countV4(&rt, -1)
	delete(r.routes, k)
	if s := r.slots[slotOf(k)]; s != nil {
		delete(s, k)
		if len(s) == 0 {
			delete(r.slots, slotOf(k))
		}
	}
	r.dirtyRoutes[k] = rt
}

// countV4 counts rt in v4ByOIF if it is a single-path IPv4 route.
func (r *run) countV4(rt *kernel.Route, delta int) {
	if rt.Family != kernel.IPv4 || rt.OIF <= 0 {
		return
	}
	if n := r.v4ByOIF[rt.OIF] + delta; n > 0 {
		r.v4ByOIF[rt.OIF] = n
	} else {
		delete(r.v4ByOIF, rt.OIF)
	}
}

// applyRouteList replaces the model's routes with a listing.
func (r *run) applyRouteList(rs []kernel.Route) {
	want := make(map[routeKey]kernel.Route, len(rs))
	for i := range rs {
		if rt, ok := normRoute(&rs[i]); ok {
			want[keyOf(&rt)] = rt
		}
	}
	for k := range r.routes {
		if _, ok := want[k]; !ok {
			r.delRoute(k)
		}
	}
	for k, rt := range want {
		if old, ok := r.routes[k]; ok && routeEqual(&old, &rt) {
			continue
		}
		r.setRoute(rt)
	}
}

// reconcileRoutes reports the routes that changed since the last report,
// as the state after the batch. A route that changed and changed back
// within the batch is reported too: one that came and went is reported
// removed, one that went and came back (or was replaced by its equal) is
// reported again. A consumer that writes routes itself (routetable) keeps
// its own view of them, in which its write may be the change it missed.
func (r *run) reconcileRoutes() {
	if len(r.dirtyRoutes) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(r.dirtyRoutes), compareRouteKeys)
	last := r.dirtyRoutes
	r.dirtyRoutes = make(map[routeKey]kernel.Route, len(last))
	for _, k := range keys {
		cur, ok := r.routes[k]
		var u RouteUpdate
		r.m.mu.Lock()
		if ok {
			r.m.repRoutes[k] = cur
			u = RouteUpdate{Route: cur}
		} else {
			old, had := r.m.repRoutes[k]
			if !had {
				old = last[k]
			}
			delete(r.m.repRoutes, k)
			u = RouteUpdate{Route: old, Gone: true}
		}
		r.m.mu.Unlock()
		r.m.log.Debug("ifacemonitor: route", "dst", u.Route.Dst, "table", u.Route.Table, "oif", u.Route.OIF, "gone", u.Gone)
		if f := r.m.opts.OnRoute; f != nil {
			u.Route = cloneRoute(u.Route)
			r.call("OnRoute", func() { f(u) })
		}
	}
}
