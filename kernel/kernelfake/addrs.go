package kernelfake

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// Addrs implements kernel.Addrs: the addresses of family, by interface
// index and, per interface, in the kernel's order (IPv4: primaries, then
// secondaries; IPv6: global ones before link-local ones, newest first).
func (ns *Namespace) Addrs(ctx context.Context, family kernel.Family) ([]kernel.Addr, error) {
	unlock, err := ns.begin(ctx, OpAddrs)
	defer unlock()
	if err != nil {
		return nil, err
	}
	if !family.Valid() {
		return nil, invalidf("addresses: %v is neither IPv4 nor IPv6", family)
	}
	var out []kernel.Addr
	for _, l := range ns.s.sortedLinks() {
		for _, a := range l.ordered(family) {
			out = append(out, kernel.Addr{LinkIndex: l.Index, Prefix: a.prefix})
		}
	}
	return out, nil
}

// LinkAddrs returns the addresses of the link called name, both families,
// as Addrs orders them (nil for none or no such link). It is for
// inspection: not counted, never failed.
func (ns *Namespace) LinkAddrs(name string) []netip.Prefix {
	defer ns.lock()()
	l := ns.s.byName(name)
	if l == nil {
		return nil
	}
	var out []netip.Prefix
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		for _, a := range l.ordered(fam) {
			out = append(out, a.prefix)
		}
	}
	return out
}

// ordered returns l's addresses of family in the kernel's order.
func (l *link) ordered(family kernel.Family) []*addr {
	var out []*addr
	for _, a := range l.addrs {
		if ipfamily.Of(a.prefix.Addr()) == family {
			out = append(out, a)
		}
	}
	if family == kernel.IPv4 {
		slices.SortStableFunc(out, func(a, b *addr) int {
			return cmp.Compare(boolInt(l.secondary(a)), boolInt(l.secondary(b)))
		})
		return out
	}
	slices.Reverse(out)
	slices.SortStableFunc(out, func(a, b *addr) int {
		return cmp.Compare(boolInt(a.prefix.Addr().IsLinkLocalUnicast()), boolInt(b.prefix.Addr().IsLinkLocalUnicast()))
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// find returns l's address equal to p: IPv4 compares the prefix length
// too, IPv6 only the address.
func (l *link) find(p netip.Prefix) *addr {
	for _, a := range l.addrs {
		if a.prefix.Addr() == p.Addr() && (p.Addr().Is6() || a.prefix.Bits() == p.Bits()) {
			return a
		}
	}
	return nil
}

// primary returns the primary IPv4 address of a's subnet on l: the first
// address added with the same subnet (a itself if it is primary).
func (l *link) primary(a *addr) *addr {
	for _, x := range l.addrs {
		if x.prefix.Addr().Is4() && x.prefix.Bits() == a.prefix.Bits() && x.prefix.Masked() == a.prefix.Masked() {
			return x
		}
	}
	return a
}

func (l *link) secondary(a *addr) bool { return a.prefix.Addr().Is4() && l.primary(a) != a }

// AddAddr implements kernel.Addrs, adding the routes the kernel adds for
// the address (see the package documentation).
func (ns *Namespace) AddAddr(ctx context.Context, a kernel.Addr) error {
	unlock, err := ns.begin(ctx, OpAddAddr)
	defer unlock()
	if err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	l, err := ns.s.linkAt("add address", a.LinkIndex)
	if err != nil {
		return err
	}
	if err := ns.refused(OpAddAddr, a); err != nil {
		return err
	}
	if l.find(a.Prefix) != nil {
		return errnof(syscall.EEXIST, "add address %s to %q: already assigned", a.Prefix, l.Name)
	}
	ns.s.addAddr(l, a.Prefix)
	return nil
}

// DeleteAddr implements kernel.Addrs. Deleting a primary IPv4 address
// deletes its secondaries too, unless promote_secondaries is set (on the
// interface or on all), which promotes the first of them instead.
// Deleting an interface's last IPv4 address disables IPv4 on it, as link
// down does (host-scope routes included): the routes through it go, or
// keep a dead next hop until it gets an address again or comes up.
func (ns *Namespace) DeleteAddr(ctx context.Context, a kernel.Addr) error {
	unlock, err := ns.begin(ctx, OpDeleteAddr)
	defer unlock()
	if err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	l, err := ns.s.linkAt("delete address", a.LinkIndex)
	if err != nil {
		return err
	}
	if err := ns.refused(OpDeleteAddr, a); err != nil {
		return err
	}
	x := l.find(a.Prefix)
	if x == nil || (a.Prefix.Addr().Is6() && x.prefix.Bits() != a.Prefix.Bits()) {
		return errnof(syscall.EADDRNOTAVAIL, "delete address %s from %q", a.Prefix, l.Name)
	}
	ns.s.deleteAddr(l, x)
	return nil
}

// addAddr adds p to l with its routes. The caller holds the lock and has
// checked that p is new.
func (s *state) addAddr(l *link, p netip.Prefix) {
	if p.Addr().Is4() {
		before := s.addrRoutes4(l)
		l.addrs = append(l.addrs, &addr{prefix: p})
		s.emitAddr(l, p, false)
		s.syncAddrRoutes4(l, before, true)
		if l.AdminUp {
			s.revive(l, kernel.IPv4)
		}
		return
	}
	a := &addr{prefix: p, tentative: !s.dadInstant(l) && !l.ready}
	l.addrs = append(l.addrs, a)
	s.emitAddr(l, p, false)
	if l.AdminUp && l.Kind != kernel.KindDevice {
		s.addPrefixRoute6(l, p)
	}
	if !a.tentative {
		s.addLocalRoute6(l, p)
		s.syncAnycast(l)
	}
}

// deleteAddr removes x from l with its routes. The caller holds the lock.
func (s *state) deleteAddr(l *link, x *addr) {
	if x.prefix.Addr().Is6() {
		s.dropAddr(l, x)
		s.removeAddrRoute(&kernel.Route{Family: kernel.IPv6, Table: kernel.TableLocal, Type: kernel.RTNLocal,
			Dst: netip.PrefixFrom(x.prefix.Addr(), 128), Protocol: kernel.ProtoKernel, OIF: l.Index}, true)
		if !slices.ContainsFunc(l.addrs, func(a *addr) bool { return a.prefix.Masked() == x.prefix.Masked() }) {
			s.removeAddrRoute(prefixRoute6(l, x.prefix), true)
		}
		s.syncAnycast(l)
		return
	}
	before := s.addrRoutes4(l)
	gone := []*addr{x}
	if !l.secondary(x) && !s.promoteSecondaries(l) {
		for _, a := range l.addrs {
			if a != x && l.primary(a) == x {
				gone = append(gone, a)
			}
		}
	}
	for _, a := range gone {
		s.dropAddr(l, a)
	}
	s.syncAddrRoutes4(l, before, true)
	for _, a := range gone {
		s.flushPrefSrc(a.prefix.Addr())
	}
	if !slices.ContainsFunc(l.addrs, func(a *addr) bool { return a.prefix.Addr().Is4() }) {
		// The last IPv4 address went: IPv4 is disabled on l, and every
		// path through it dies, host-scope ones included.
		s.syncDown(l, kernel.IPv4, false, true)
	}
}

// dropAddr removes a from l's list and announces it.
func (s *state) dropAddr(l *link, a *addr) {
	l.addrs = slices.DeleteFunc(l.addrs, func(x *addr) bool { return x == a })
	s.emitAddr(l, a.prefix, true)
}

// flushPrefSrc removes the IPv4 routes whose preferred source was ip, once
// no link has that address any more, as the kernel does (silently).
func (s *state) flushPrefSrc(ip netip.Addr) {
	for _, l := range s.links {
		if slices.ContainsFunc(l.addrs, func(a *addr) bool { return a.prefix.Addr() == ip }) {
			return
		}
	}
	for _, r := range slices.Clone(s.routes[kernel.IPv4]) {
		if r.PrefSrc == ip {
			s.remove(r, false)
		}
	}
}

// addrRoutes4 returns the routes the kernel derives from l's IPv4
// addresses in its present state: a local route per address; for each
// primary, while l is up, the prefix route (in the local table with type
// local on lo) and the subnet's broadcast route.
func (s *state) addrRoutes4(l *link) []kernel.Route {
	var out []kernel.Route
	base := kernel.Route{Family: kernel.IPv4, Protocol: kernel.ProtoKernel, OIF: l.Index}
	for _, a := range l.addrs {
		if !a.prefix.Addr().Is4() {
			continue
		}
		ip, prim := a.prefix.Addr(), l.primary(a).prefix.Addr()
		r := base
		r.Table, r.Type, r.Scope, r.Dst, r.PrefSrc = kernel.TableLocal, kernel.RTNLocal, kernel.ScopeHost, netip.PrefixFrom(ip, 32), prim
		out = append(out, r)
		if !l.AdminUp || l.secondary(a) {
			continue
		}
		subnet := a.prefix.Masked()
		if subnet.Addr() == netip.IPv4Unspecified() || a.prefix.Bits() == 32 {
			continue
		}
		r = base
		r.Table, r.Type, r.Scope, r.Dst, r.PrefSrc = kernel.TableMain, kernel.RTNUnicast, kernel.ScopeLink, subnet, ip
		if l.Kind == kernel.KindDevice {
			r.Table, r.Type, r.Scope = kernel.TableLocal, kernel.RTNLocal, kernel.ScopeHost
		}
		out = append(out, r)
		if a.prefix.Bits() < 31 {
			r = base
			r.Table, r.Type, r.Scope, r.Dst, r.PrefSrc = kernel.TableLocal, kernel.RTNBroadcast, kernel.ScopeLink, netip.PrefixFrom(lastAddr(subnet), 32), ip
			out = append(out, r)
		}
	}
	return out
}

// lastAddr returns the last address of p (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

// syncAddrRoutes4 applies the change of l's derived IPv4 routes since
// before: routes no longer derived go (announced if notify), new ones are
// added. A route derived twice (the same local route for two addresses)
// is stored once.
func (s *state) syncAddrRoutes4(l *link, before []kernel.Route, notify bool) {
	after := s.addrRoutes4(l)
	has := func(rs []kernel.Route, r *kernel.Route) bool {
		return slices.ContainsFunc(rs, func(x kernel.Route) bool { return sameAddrRoute(&x, r) })
	}
	for i := range before {
		if !has(after, &before[i]) {
			s.removeAddrRoute(&before[i], notify)
		}
	}
	for i := range after {
		if !has(before, &after[i]) {
			s.addAddrRoute(&after[i])
		}
	}
}

// sameAddrRoute reports whether two routes are the same address route.
func sameAddrRoute(a, b *kernel.Route) bool {
	return a.Family == b.Family && a.Table == b.Table && a.Type == b.Type && a.Dst == b.Dst &&
		a.OIF == b.OIF && a.PrefSrc == b.PrefSrc && a.Priority == b.Priority && a.Protocol == b.Protocol && len(b.NextHops) == 0
}

// removeAddrRoute removes the stored route that is the address route r,
// if it is still there.
func (s *state) removeAddrRoute(r *kernel.Route, notify bool) {
	for _, x := range s.atDst(r.Family, r.Table, r.Dst) {
		if sameAddrRoute(x, r) {
			s.remove(x, notify)
			return
		}
	}
}

// prefixRoute6 returns the route IPv6 adds for address p on l.
func prefixRoute6(l *link, p netip.Prefix) *kernel.Route {
	return &kernel.Route{Family: kernel.IPv6, Table: kernel.TableMain, Type: kernel.RTNUnicast, Dst: p.Masked(),
		Protocol: kernel.ProtoKernel, Priority: prioAddrconf, OIF: l.Index}
}

// addPrefixRoute6 adds the prefix route of IPv6 address p on l, unless
// another address already added it.
func (s *state) addPrefixRoute6(l *link, p netip.Prefix) {
	s.addAddrRoute(prefixRoute6(l, p))
}

// addLocalRoute6 adds the local route of IPv6 address p on l.
func (s *state) addLocalRoute6(l *link, p netip.Prefix) {
	s.addAddrRoute(&kernel.Route{Family: kernel.IPv6, Table: kernel.TableLocal, Type: kernel.RTNLocal,
		Dst: netip.PrefixFrom(p.Addr(), 128), Protocol: kernel.ProtoKernel, OIF: l.Index})
}

// addAddrRoute stores r unless it is there already.
func (s *state) addAddrRoute(r *kernel.Route) {
	for _, x := range s.atDst(r.Family, r.Table, r.Dst) {
		if sameAddrRoute(x, r) {
			return
		}
	}
	s.insert(*r)
}

// syncAnycast adds and removes l's IPv6 anycast routes: while IPv6
// forwarding is on for l, every address that has passed DAD, with a prefix
// shorter than /127, makes its subnet-router anycast address (the prefix's
// first address) a local anycast route.
func (s *state) syncAnycast(l *link) {
	var want []netip.Prefix
	if s.intSysctl(linkKey("net/ipv6/conf", l.Name, "forwarding")) > 0 {
		for _, a := range l.addrs {
			m := a.prefix.Masked()
			if a.prefix.Addr().Is6() && !a.tentative && a.prefix.Bits() < 127 && !m.Addr().IsUnspecified() {
				want = append(want, netip.PrefixFrom(m.Addr(), 128))
			}
		}
	}
	route := func(dst netip.Prefix) *kernel.Route {
		return &kernel.Route{Family: kernel.IPv6, Table: kernel.TableLocal, Type: kernel.RTNAnycast, Dst: dst, Protocol: kernel.ProtoKernel, OIF: l.Index}
	}
	for _, r := range slices.Clone(s.routes[kernel.IPv6]) {
		if r.Type == kernel.RTNAnycast && r.OIF == l.Index && !slices.Contains(want, r.Dst) {
			s.remove(r, true)
		}
	}
	for _, dst := range want {
		s.addAddrRoute(route(dst))
	}
}

// dadInstant reports whether a new IPv6 address on l skips duplicate
// address detection: on lo and tun (no ARP), or with accept_dad below 1
// on all and on l. The fake runs detection at once when it runs at all,
// so an address is tentative (without its local route) only until l is
// ready.
func (s *state) dadInstant(l *link) bool {
	if l.Kind == kernel.KindDevice || l.Kind == kernel.KindTUN {
		return true
	}
	return s.intSysctl("net/ipv6/conf/all/accept_dad") < 1 && s.intSysctl(linkKey("net/ipv6/conf", l.Name, "accept_dad")) < 1
}

// promoteSecondaries reports whether net.ipv4.conf.{all,<l>}.promote_secondaries is set.
func (s *state) promoteSecondaries(l *link) bool {
	return s.intSysctl("net/ipv4/conf/all/promote_secondaries") > 0 ||
		s.intSysctl(linkKey("net/ipv4/conf", l.Name, "promote_secondaries")) > 0
}
