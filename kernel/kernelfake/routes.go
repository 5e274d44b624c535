package kernelfake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// Kernel numbers the kernel package does not name.
const (
	protoBoot    = kernel.ProtoBoot
	prioAddrconf = 256  // IP6_RT_PRIO_ADDRCONF: IPv6 routes the kernel adds
	prioUser6    = 1024 // IP6_RT_PRIO_USER: an IPv6 metric of 0
	stateFlags   = kernel.FlagDead | kernel.FlagLinkdown
)

// cloneRoute returns a copy of r that shares nothing with it.
func cloneRoute(r *kernel.Route) kernel.Route {
	out := *r
	out.NextHops = slices.Clone(r.NextHops)
	return out
}

// compareRoutes orders routes by table, destination, TOS and metric.
func compareRoutes(a, b *kernel.Route) int {
	return cmp.Or(cmp.Compare(a.Table, b.Table), a.Dst.Addr().Compare(b.Dst.Addr()),
		cmp.Compare(a.Dst.Bits(), b.Dst.Bits()), cmp.Compare(a.TOS, b.TOS), cmp.Compare(a.Priority, b.Priority))
}

// sameKey reports whether a and b have the same key (family and table
// given): destination, TOS and metric.
func sameKey(a, b *kernel.Route) bool {
	return a.Dst == b.Dst && a.TOS == b.TOS && a.Priority == b.Priority
}

// firstHop returns r's first path: its interface and gateway.
func firstHop(r *kernel.Route) (int, netip.Addr) {
	if len(r.NextHops) > 0 {
		return r.NextHops[0].OIF, r.NextHops[0].Gateway
	}
	return r.OIF, r.Gateway
}

// exempt reports whether r keeps no state flags and survives its link
// going down: IPv4 host-scope routes (the local routes of addresses), and
// IPv6 local and anycast routes for the flags.
func exempt(r *kernel.Route) bool {
	if r.Family == kernel.IPv4 {
		return r.Scope == kernel.ScopeHost
	}
	return r.Type == kernel.RTNLocal || r.Type == kernel.RTNAnycast
}

// hopFlags returns the state flags of a path of r through l, whose flags
// were old. A dead path stays dead (with linkdown) until revive clears
// it: IPv4 revives the paths through a link when it comes up or gets an
// address, IPv6 when the link is ready again (see ready).
func hopFlags(r *kernel.Route, l *link, old uint32) uint32 {
	switch {
	case old&kernel.FlagDead != 0:
		return stateFlags
	case exempt(r):
		return 0
	case !l.AdminUp:
		return stateFlags
	case !l.Running:
		return kernel.FlagLinkdown
	}
	return 0
}

// revive clears the dead flag of the paths of family through l and
// updates their flags.
func (s *state) revive(l *link, family kernel.Family) {
	for _, r := range s.routes[family] {
		if !r.Uses(l.Index) {
			continue
		}
		if r.OIF == l.Index {
			r.Flags &^= kernel.FlagDead
		}
		for i := range r.NextHops {
			if r.NextHops[i].OIF == l.Index {
				r.NextHops[i].Flags &^= kernel.FlagDead
			}
		}
		s.mark(r)
	}
}

// mark sets the state flags of r's paths from their links' states.
func (s *state) mark(r *kernel.Route) {
	if len(r.NextHops) == 0 {
		if l := s.links[r.OIF]; l != nil && r.OIF != 0 {
			r.Flags = r.Flags&^stateFlags | hopFlags(r, l, r.Flags)
		}
		return
	}
	for i := range r.NextHops {
		h := &r.NextHops[i]
		if l := s.links[h.OIF]; l != nil && h.OIF != 0 {
			h.Flags = h.Flags&^stateFlags | hopFlags(r, l, h.Flags)
		}
	}
}

// markRoutes updates the state flags of the routes through l.
func (s *state) markRoutes(l *link) {
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		for _, r := range s.routes[fam] {
			if r.Uses(l.Index) {
				s.mark(r)
			}
		}
	}
}

// dstKey indexes the stored routes by family, table and destination.
type dstKey struct {
	family kernel.Family
	table  uint32
	dst    netip.Prefix
}

// atDst returns the stored routes of family in table to dst, in the order
// they were added.
func (s *state) atDst(family kernel.Family, table uint32, dst netip.Prefix) []*kernel.Route {
	return s.byDst[dstKey{family, table, dst}]
}

// insert stores r (normalised, flags set) after the routes of its key and
// announces it.
func (s *state) insert(r kernel.Route) {
	s.mark(&r)
	s.routes[r.Family] = append(s.routes[r.Family], &r)
	k := dstKey{r.Family, r.Table, r.Dst}
	s.byDst[k] = append(s.byDst[k], &r)
	s.emitRoute(&r, false)
}

// remove deletes the stored route r, announcing it if notify.
func (s *state) remove(r *kernel.Route, notify bool) {
	is := func(x *kernel.Route) bool { return x == r }
	s.routes[r.Family] = slices.DeleteFunc(s.routes[r.Family], is)
	k := dstKey{r.Family, r.Table, r.Dst}
	if s.byDst[k] = slices.DeleteFunc(s.byDst[k], is); len(s.byDst[k]) == 0 {
		delete(s.byDst, k)
	}
	if notify {
		s.emitRoute(r, true)
	}
}

// syncDown applies l going down (or away, if gone) to the routes of fam
// through it: a single path route goes, a multipath route keeps its path
// through l as a dead one (IPv4 on unregister: the whole route goes; IPv6:
// the path goes) and goes once every path is dead. The kernel announces
// only the IPv6 deletions. IPv4 host-scope routes stay while l only goes
// down, unless force (l lost its last IPv4 address).
func (s *state) syncDown(l *link, fam kernel.Family, gone, force bool) {
	notify := fam == kernel.IPv6
	for _, r := range slices.Clone(s.routes[fam]) {
		if !r.Uses(l.Index) || (!gone && !force && fam == kernel.IPv4 && exempt(r)) {
			continue
		}
		if force {
			for i := range r.NextHops {
				if r.NextHops[i].OIF == l.Index {
					r.NextHops[i].Flags |= stateFlags
				}
			}
		}
		if len(r.NextHops) == 0 || (gone && fam == kernel.IPv4) {
			s.remove(r, notify)
			continue
		}
		if gone {
			for _, h := range slices.Clone(r.NextHops) {
				if h.OIF == l.Index {
					s.dropHop(r, h)
				}
			}
			if len(r.NextHops) == 0 {
				s.mark(r) // one path left: a plain route now
				continue
			}
		}
		s.mark(r)
		alive := slices.ContainsFunc(r.NextHops, func(h kernel.NextHop) bool { return h.Flags&kernel.FlagDead == 0 })
		switch {
		case !alive:
			s.remove(r, notify)
		case len(r.NextHops) == 1:
			h := r.NextHops[0]
			r.OIF, r.Gateway, r.Flags, r.NextHops = h.OIF, h.Gateway, h.Flags, nil
		}
	}
}

// dropHop removes the path h from the IPv6 multipath route r and
// announces the deletion of that path alone, as the kernel does (it keeps
// each path as a route of its own); the paths left are not announced. A
// route left with one path becomes a plain one.
func (s *state) dropHop(r *kernel.Route, h kernel.NextHop) {
	i := slices.IndexFunc(r.NextHops, func(x kernel.NextHop) bool { return x.OIF == h.OIF && x.Gateway == h.Gateway })
	r.NextHops = slices.Delete(r.NextHops, i, i+1)
	gone := *r
	gone.OIF, gone.Gateway, gone.Flags, gone.NextHops = h.OIF, h.Gateway, h.Flags, nil
	s.emitRoute(&gone, true)
	if len(r.NextHops) == 1 {
		x := r.NextHops[0]
		r.OIF, r.Gateway, r.Flags, r.NextHops = x.OIF, x.Gateway, x.Flags, nil
	}
}

// normalise returns r as the kernel stores it.
func normalise(r kernel.Route) kernel.Route {
	if r.Table == 0 {
		r.Table = kernel.TableMain
	}
	r.Flags &= kernel.WritableFlags
	r.MTU = min(r.MTU, kernel.MaxRouteMTU)
	r.NextHops = slices.Clone(r.NextHops)
	for i := range r.NextHops {
		r.NextHops[i].Flags &= kernel.WritableFlags
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		r.OIF, r.Gateway, r.NextHops = h.OIF, h.Gateway, nil
		r.Flags |= h.Flags
	}
	if r.Family == kernel.IPv6 {
		if r.Priority == 0 {
			r.Priority = prioUser6
		}
		if r.Protocol == 0 {
			r.Protocol = protoBoot
		}
		r.Scope = kernel.ScopeUniverse
		switch r.Type {
		case kernel.RTNBlackhole, kernel.RTNUnreachable, kernel.RTNProhibit, kernel.RTNThrow:
			r.OIF = loopbackIdx
		}
	}
	return r
}

// opName names a route operation in an OpError.
func opName(k kernel.OpKind, what string) string { return k.String() + " " + what }

// routeObject names a route in an OpError.
func routeObject(r *kernel.Route) string {
	table := r.Table
	if table == 0 {
		table = kernel.TableMain
	}
	if !r.Dst.IsValid() {
		return fmt.Sprintf("<invalid prefix> table %d", table)
	}
	return fmt.Sprintf("%s table %d", r.Dst, table)
}

// ApplyRoutes implements kernel.Routes with the kernel's semantics (see
// the package documentation): each operation is validated with
// kernel.Route.Validate, then checked against the namespace's links and
// routes, and fails alone with a *kernel.OpError.
func (ns *Namespace) ApplyRoutes(ctx context.Context, ops []kernel.RouteOp) []error {
	return applyEach(ns, ctx, OpApplyRoutes, ops, ns.applyRoute, func(op *kernel.RouteOp) (string, string) {
		return opName(op.Kind, "route"), routeObject(&op.Route)
	})
}

// applyRoute performs one route operation. The caller holds the lock.
func (ns *Namespace) applyRoute(op *kernel.RouteOp) error {
	r := op.Route
	switch op.Kind {
	case kernel.OpReplace, kernel.OpAdd:
		if err := r.Validate(); err != nil {
			return err
		}
	case kernel.OpDelete:
		if err := validateRouteKey(&r); err != nil {
			return err
		}
	default:
		return invalidf("unknown operation kind %d", uint8(op.Kind))
	}
	if err := ns.refused(OpApplyRoutes, kernel.RouteOp{Kind: op.Kind, Route: cloneRoute(&r)}); err != nil {
		return err
	}
	if op.Kind == kernel.OpDelete {
		return ns.s.deleteRoute(r)
	}
	return ns.s.writeRoute(op.Kind, normalise(r))
}

// validateRouteKey validates the route of a delete as kernel.Route's
// Validate does: every check but those of the type against the path.
func validateRouteKey(r *kernel.Route) error {
	switch r.Type {
	case 0, kernel.RTNUnicast, kernel.RTNLocal, kernel.RTNBlackhole, kernel.RTNUnreachable, kernel.RTNProhibit, kernel.RTNThrow:
	default:
		return invalidf("unsupported route type %d", r.Type)
	}
	c := *r
	c.Type = kernel.RTNUnicast
	if c.OIF == 0 && !c.Gateway.IsValid() && len(c.NextHops) == 0 {
		c.Type = kernel.RTNBlackhole
	}
	return c.Validate()
}

// writeRoute adds or replaces r, which is valid and normalised.
func (s *state) writeRoute(kind kernel.OpKind, r kernel.Route) error {
	if err := s.checkPaths(&r); err != nil {
		return err
	}
	var same []*kernel.Route
	for _, x := range s.atDst(r.Family, r.Table, r.Dst) {
		if sameKey(x, &r) {
			same = append(same, x)
		}
	}
	if len(same) > 0 && kind == kernel.OpAdd {
		return syscall.EEXIST
	}
	if len(same) == 0 {
		s.insert(r)
		return nil
	}
	old := same[0]
	if r.Family == kernel.IPv6 {
		// IPv6 replaces a route that qualifies for multipath (it has a
		// gateway) with one that does, if it can.
		gw := func(x *kernel.Route) bool { _, g := firstHop(x); return g.IsValid() }
		if i := slices.IndexFunc(same, func(x *kernel.Route) bool { return gw(x) == gw(&r) }); i >= 0 {
			old = same[i]
		}
	}
	s.mark(&r)
	*old = r
	s.emitRoute(old, false)
	return nil
}

// checkPaths checks r's paths against the namespace, as the kernel does
// when it creates a route, and fills in the interfaces the gateways
// resolve to.
func (s *state) checkPaths(r *kernel.Route) error {
	if r.Family == kernel.IPv4 {
		if err := s.checkScope4(r); err != nil {
			return err
		}
	}
	if err := s.checkPrefSrc(r); err != nil {
		return err
	}
	switch r.Type {
	case kernel.RTNBlackhole, kernel.RTNUnreachable, kernel.RTNProhibit, kernel.RTNThrow:
		return nil
	}
	if len(r.NextHops) == 0 {
		return s.checkHop(r, &r.OIF, r.Gateway, r.Flags)
	}
	for i := range r.NextHops {
		h := &r.NextHops[i]
		if err := s.checkHop(r, &h.OIF, h.Gateway, h.Flags); err != nil {
			return err
		}
	}
	return nil
}

// checkScope4 applies the IPv4 scope rules: a type has a narrowest scope
// (local: host), and a host-scope route has one path and no gateway.
func (s *state) checkScope4(r *kernel.Route) error {
	min := kernel.ScopeUniverse
	switch r.Type {
	case kernel.RTNLocal:
		min = kernel.ScopeHost
	case kernel.RTNBroadcast:
		min = kernel.ScopeLink
	}
	if r.Scope < min || r.Scope > kernel.ScopeHost {
		return fmt.Errorf("invalid scope %d for route type %d: %w", r.Scope, r.Type, syscall.EINVAL)
	}
	if r.Scope == kernel.ScopeHost {
		if len(r.NextHops) > 1 || r.Gateway.IsValid() {
			return fmt.Errorf("a host-scope route has one path and no gateway: %w", syscall.EINVAL)
		}
		if s.links[r.OIF] == nil {
			return fmt.Errorf("no link with index %d: %w", r.OIF, syscall.ENODEV)
		}
	}
	return nil
}

// checkPrefSrc refuses a preferred source that is not an address of the
// namespace (IPv4) or of the route's interface (IPv6).
func (s *state) checkPrefSrc(r *kernel.Route) error {
	if !r.PrefSrc.IsValid() {
		return nil
	}
	if r.Family == kernel.IPv4 && r.Type == kernel.RTNLocal && r.Dst == netip.PrefixFrom(r.PrefSrc, 32) {
		return nil
	}
	for _, l := range s.links {
		if r.Family == kernel.IPv6 && r.OIF != 0 && l.Index != r.OIF {
			continue
		}
		for _, a := range l.addrs {
			if a.prefix.Addr() == r.PrefSrc && !a.tentative {
				return nil
			}
		}
	}
	return fmt.Errorf("preferred source %s is not a local address: %w", r.PrefSrc, syscall.EINVAL)
}

// checkHop checks one path of r: its interface exists and is up, and its
// gateway is reachable on a connected route (unless onlink, or an IPv6
// link-local gateway); an unset interface is filled in from the route to
// the gateway.
func (s *state) checkHop(r *kernel.Route, oif *int, gw netip.Addr, flags uint32) error {
	onlink := flags&kernel.FlagOnlink != 0
	if r.Family == kernel.IPv4 && r.Scope == kernel.ScopeHost {
		return nil // checked in checkScope4; a down link is fine
	}
	if *oif != 0 && s.links[*oif] == nil && (onlink || !gw.IsValid() || r.Family == kernel.IPv6) {
		return fmt.Errorf("no link with index %d: %w", *oif, syscall.ENODEV)
	}
	if onlink {
		if *oif == 0 {
			return fmt.Errorf("an onlink next hop needs an interface: %w", syscall.ENODEV)
		}
		if r.Family == kernel.IPv4 && r.Scope >= kernel.ScopeLink {
			return fmt.Errorf("an onlink next hop has universe scope: %w", syscall.EINVAL)
		}
	}
	if gw.IsValid() && !onlink && !(gw.Is6() && gw.IsLinkLocalUnicast()) {
		if err := s.resolve(r, oif, gw); err != nil {
			return err
		}
	}
	if *oif == 0 {
		return fmt.Errorf("no egress interface: %w", syscall.EINVAL)
	}
	l := s.links[*oif]
	if l == nil {
		return fmt.Errorf("no link with index %d: %w", *oif, syscall.ENODEV)
	}
	if r.Family == kernel.IPv6 && gw.IsValid() && s.hasAddr(gw, l) {
		return fmt.Errorf("gateway %s is a local address: %w", gw, syscall.EINVAL)
	}
	if !l.AdminUp {
		return fmt.Errorf("link %q is down: %w", l.Name, syscall.ENETDOWN)
	}
	return nil
}

// hasAddr reports whether a is an address of l, or of any link for an
// address that is not link-local.
func (s *state) hasAddr(a netip.Addr, l *link) bool {
	for _, x := range s.links {
		if x != l && a.IsLinkLocalUnicast() {
			continue
		}
		for _, p := range x.addrs {
			if p.prefix.Addr() == a {
				return true
			}
		}
	}
	return false
}

// resolve checks that gw is on a connected route (through *oif, if set),
// as the kernel's gateway check does, and sets *oif to that route's
// interface. IPv4 looks in r's table (unless main), then through the
// rules; a route via another gateway does not make gw connected. IPv6
// looks in r's table, then through the rules, and fails with
// EHOSTUNREACH whenever the result is not a connected route.
func (s *state) resolve(r *kernel.Route, oif *int, gw netip.Addr) error {
	fam := ipfamily.Of(gw)
	scope := max(r.Scope+1, kernel.ScopeLink)
	lookup := func(table uint32) *kernel.Route { return s.tableLookup(fam, table, gw, *oif, scope) }
	if fam == kernel.IPv4 {
		var best *kernel.Route
		if r.Table != kernel.TableMain {
			best = lookup(r.Table)
		}
		if best == nil {
			var errno syscall.Errno
			if best, errno = s.ruleLookup(fam, gw, *oif, lookup); errno != 0 {
				return fmt.Errorf("gateway %s: %w", gw, errno)
			}
		}
		if best.Type != kernel.RTNUnicast && best.Type != kernel.RTNLocal {
			return fmt.Errorf("gateway %s resolves to a route of type %d: %w", gw, best.Type, syscall.EINVAL)
		}
		*oif, _ = firstHop(best)
		return nil
	}
	connected := func(x *kernel.Route) bool {
		if x == nil {
			return false
		}
		_, g := firstHop(x)
		return (x.Type == kernel.RTNUnicast || x.Type == kernel.RTNLocal) && !g.IsValid()
	}
	best := lookup(r.Table)
	if !connected(best) {
		best, _ = s.ruleLookup(fam, gw, *oif, lookup)
	}
	if !connected(best) {
		return fmt.Errorf("no connected route to gateway %s: %w", gw, syscall.EHOSTUNREACH)
	}
	*oif, _ = firstHop(best)
	return nil
}

// tableLookup returns the longest-prefix match for dst among the routes of
// family in table, as a lookup for a gateway sees them: IPv4 skips routes
// of a scope narrower than scope (routes via a gateway, blackholes), both
// skip dead paths, and with oif set only routes through it count.
func (s *state) tableLookup(family kernel.Family, table uint32, dst netip.Addr, oif int, scope uint8) *kernel.Route {
	var best *kernel.Route
	for _, x := range s.routes[family] {
		if x.Table != table || !x.Dst.Contains(dst) || (best != nil && (best.Dst.Bits() > x.Dst.Bits() ||
			best.Dst.Bits() == x.Dst.Bits() && best.Priority <= x.Priority)) ||
			(family == kernel.IPv4 && x.Scope < scope) || (oif != 0 && !x.Uses(oif)) {
			continue
		}
		if len(x.NextHops) == 0 && x.Flags&kernel.FlagDead != 0 ||
			len(x.NextHops) > 0 && !slices.ContainsFunc(x.NextHops, func(h kernel.NextHop) bool { return h.Flags&kernel.FlagDead == 0 }) {
			continue
		}
		best = x
	}
	return best
}

// deleteRoute deletes the first route that matches every field the
// request sets, as the kernel does; none fails with ESRCH.
func (s *state) deleteRoute(req kernel.Route) error {
	if req.Table == 0 {
		req.Table = kernel.TableMain
	}
	candidates := slices.Clone(s.atDst(req.Family, req.Table, req.Dst))
	slices.SortStableFunc(candidates, compareRoutes)
	for _, r := range candidates {
		if !deleteMatches(&req, r) {
			continue
		}
		oif, gw := firstHop(&req)
		if req.Family == kernel.IPv6 && len(r.NextHops) > 0 {
			i := slices.IndexFunc(r.NextHops, func(h kernel.NextHop) bool {
				return (!gw.IsValid() || h.Gateway == gw) && (oif == 0 || h.OIF == oif)
			})
			if gw.IsValid() {
				s.dropHop(r, r.NextHops[i]) // IPv6 deletes the one path with that gateway
				return nil
			}
			// Without a gateway every path goes; the kernel announces them
			// from the one that matched.
			gone := cloneRoute(r)
			gone.NextHops = append([]kernel.NextHop{gone.NextHops[i]}, slices.Delete(gone.NextHops, i, i+1)...)
			s.remove(r, false)
			s.emitRoute(&gone, true)
			return nil
		}
		s.remove(r, true)
		return nil
	}
	return syscall.ESRCH
}

// deleteMatches reports whether a delete request matches the stored
// route r (same family, table and destination): fields the request sets
// must be equal. IPv4 compares TOS always, and type, scope, protocol,
// preferred source, metric and the first path when set; IPv6 compares
// the metric, protocol and a path (interface, gateway) when set.
func deleteMatches(req, r *kernel.Route) bool {
	if req.Priority != 0 && req.Priority != r.Priority {
		return false
	}
	if req.Protocol != 0 && req.Protocol != r.Protocol {
		return false
	}
	oif, gw := firstHop(req)
	if req.Family == kernel.IPv6 {
		if len(r.NextHops) == 0 {
			return (oif == 0 || oif == r.OIF) && (!gw.IsValid() || gw == r.Gateway)
		}
		return slices.ContainsFunc(r.NextHops, func(h kernel.NextHop) bool {
			return (oif == 0 || oif == h.OIF) && (!gw.IsValid() || gw == h.Gateway)
		})
	}
	roif, rgw := firstHop(r)
	return req.TOS == r.TOS &&
		(req.Type == 0 || req.Type == r.Type) &&
		(req.Scope == 0 || req.Scope == r.Scope) &&
		(!req.PrefSrc.IsValid() || req.PrefSrc == r.PrefSrc) &&
		(oif == 0 || oif == roif) &&
		(!gw.IsValid() || gw == rgw)
}

// sorted returns the stored routes of family in table (0: every table),
// in dump order: by table, destination, TOS and metric, and in the order
// they were added within a key.
func (s *state) sorted(family kernel.Family, table uint32) []*kernel.Route {
	var out []*kernel.Route
	for _, r := range s.routes[family] {
		if table == 0 || r.Table == table {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, compareRoutes)
	return out
}

// Routes returns the routes of family in table (0: every table) as a dump
// reports them, in dump order. It is for inspection: not counted, never
// failed.
func (ns *Namespace) Routes(family kernel.Family, table uint32) []kernel.Route {
	defer ns.lock()()
	var out []kernel.Route
	for _, r := range ns.s.sorted(family, table) {
		out = append(out, cloneRoute(r))
	}
	return out
}

// DumpRoutes implements kernel.Routes.
func (ns *Namespace) DumpRoutes(ctx context.Context, family kernel.Family, table uint32, fn func(*kernel.Route) error, reset func()) error {
	return ns.dump(ctx, OpDumpRoutes, family, table, 0, fn, reset)
}

// DumpInterfaceRoutes implements kernel.Routes.
func (ns *Namespace) DumpInterfaceRoutes(ctx context.Context, family kernel.Family, table uint32, oif int, fn func(*kernel.Route) error, reset func()) error {
	if oif <= 0 {
		return invalidf("dump routes: interface index %d", oif)
	}
	return ns.dump(ctx, OpDumpInterfaceRoutes, family, table, oif, fn, reset)
}

// dump implements DumpRoutes (oif 0) and DumpInterfaceRoutes: it copies
// the routes under the lock and calls fn without it.
func (ns *Namespace) dump(ctx context.Context, op Op, family kernel.Family, table uint32, oif int, fn func(*kernel.Route) error, reset func()) error {
	unlock, err := ns.begin(ctx, op)
	if err != nil && !errors.Is(err, ErrInterrupted) {
		unlock()
		return err
	}
	interrupted := err != nil
	if !family.Valid() {
		unlock()
		return invalidf("dump routes: %v is neither IPv4 nor IPv6", family)
	}
	var routes []kernel.Route
	for _, r := range ns.s.sorted(family, table) {
		if oif == 0 || r.Uses(oif) {
			routes = append(routes, cloneRoute(r))
		}
	}
	unlock()
	emit := func(rs []kernel.Route) error {
		for i := range rs {
			r := cloneRoute(&rs[i])
			if err := fn(&r); err != nil {
				return err
			}
		}
		return nil
	}
	if interrupted {
		if err := emit(routes[:len(routes)/2]); err != nil {
			return err
		}
		if reset != nil {
			reset()
		}
	}
	return emit(routes)
}
