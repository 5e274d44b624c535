package kernelfake

import (
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// This file holds what a link's state changes do to the rest of the
// namespace, as the kernel's notifier chains do it.

// setAdmin brings l administratively up or down. The caller holds the
// lock.
func (s *state) setAdmin(l *link, up bool) {
	if l.AdminUp == up {
		return
	}
	before := s.addrRoutes4(l)
	l.AdminUp = up
	l.Running = up && l.carrier()
	s.emitLink(l, false)
	if up {
		s.linkUp(l, before)
	} else {
		s.linkDown(l)
	}
	if p := l.peer; p != nil {
		p.ns.carrierChanged(p)
	}
}

// linkUp does what NETDEV_UP does: IPv4 adds its addresses' routes and
// revives the next hops through l; IPv6 restores the prefix routes of the
// addresses it kept (and their local routes once DAD has run) and, once
// the link runs, configures it.
func (s *state) linkUp(l *link, before []kernel.Route) {
	s.syncAddrRoutes4(l, before, true)
	s.revive(l, kernel.IPv4)
	s.markRoutes(l)
	for _, a := range l.addrs {
		if !a.prefix.Addr().Is6() {
			continue
		}
		if l.Kind != kernel.KindDevice {
			s.addPrefixRoute6(l, a.prefix)
		}
		if a.tentative && s.dadInstant(l) {
			a.tentative = false
		}
		if !a.tentative {
			s.addLocalRoute6(l, a.prefix)
		}
	}
	s.syncAnycast(l)
	if l.Running {
		s.ready(l)
	}
}

// linkDown does what NETDEV_DOWN does: neighbours through l go, so do the
// non-permanent FDB entries; IPv4 routes through l go (silently, host
// scope excepted) or keep a dead next hop; IPv6 drops the routes through l
// and its addresses, unless keep_addr_on_down keeps the global ones
// (without their routes, tentative again).
func (s *state) linkDown(l *link) {
	s.flushNeighbors(l, true)
	s.flushFDB(l, false)
	s.syncDown(l, kernel.IPv4, false, false)
	s.syncDown(l, kernel.IPv6, false, false)
	keep := s.keepAddrOnDown(l)
	for _, a := range slices.Clone(l.addrs) {
		ip := a.prefix.Addr()
		if !ip.Is6() {
			continue
		}
		if keep && !ip.IsLinkLocalUnicast() && !ip.IsLoopback() {
			a.tentative = true
			continue
		}
		s.dropAddr(l, a)
	}
	l.ready = false
}

// carrierChanged updates l after its carrier (or its peer's state)
// changed: a link that starts running clears the linkdown flags of its
// routes and gets configured for IPv6 if it was not; one that stops marks
// them linkdown and loses its non-permanent neighbours.
func (s *state) carrierChanged(l *link) {
	running := l.AdminUp && l.carrier()
	if running == l.Running {
		return
	}
	l.Running = running
	s.emitLink(l, false)
	s.markRoutes(l)
	if !running {
		s.flushNeighbors(l, false)
		return
	}
	if !l.ready {
		s.ready(l)
	}
}

// ready configures IPv6 on l once it runs (addrconf's link becoming
// ready): the ff00::/8 multicast route, the EUI-64 link-local address
// with its fe80::/64 route (when addr_gen_mode is 0), and the local routes
// of the addresses that waited for DAD.
func (s *state) ready(l *link) {
	l.ready = true
	s.revive(l, kernel.IPv6)
	if l.Kind == kernel.KindDevice || s.intSysctl(linkKey("net/ipv6/conf", l.Name, "disable_ipv6")) > 0 ||
		s.intSysctl("net/ipv6/conf/all/disable_ipv6") > 0 {
		return
	}
	s.addAddrRoute(&kernel.Route{Family: kernel.IPv6, Table: kernel.TableLocal, Type: kernel.RTNMulticast,
		Dst: netip.MustParsePrefix("ff00::/8"), Protocol: kernel.ProtoKernel, Priority: prioAddrconf, OIF: l.Index})
	if ll, ok := eui64(l); ok && s.intSysctl(linkKey("net/ipv6/conf", l.Name, "addr_gen_mode")) == 0 && l.find(ll) == nil {
		s.addAddr(l, ll)
	}
	for _, a := range l.addrs {
		if a.tentative {
			a.tentative = false
			s.addLocalRoute6(l, a.prefix)
		}
	}
	s.syncAnycast(l)
}

// eui64 returns l's EUI-64 link-local address: fe80::/64 with the MAC's
// universal/local bit flipped and ff:fe in the middle.
func eui64(l *link) (netip.Prefix, bool) {
	m := l.MAC
	if !l.ether() || len(m) != 6 {
		return netip.Prefix{}, false
	}
	b := [16]byte{0: 0xfe, 1: 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]}
	return netip.PrefixFrom(netip.AddrFrom16(b), 64), true
}

// unregister removes what goes with a deleted link l (already down):
// every route through it (IPv4: the whole route; IPv6: the path), its
// addresses, neighbours and FDB entries.
func (s *state) unregister(l *link) {
	before := s.addrRoutes4(l)
	for _, a := range slices.Clone(l.addrs) {
		if a.prefix.Addr().Is4() {
			s.dropAddr(l, a)
		}
	}
	s.syncAddrRoutes4(l, before, true) // the kernel announces these
	s.syncDown(l, kernel.IPv4, true, false)
	s.syncDown(l, kernel.IPv6, true, false)
	for _, a := range slices.Clone(l.addrs) {
		s.dropAddr(l, a)
	}
	for _, a := range before {
		s.flushPrefSrc(a.PrefSrc)
	}
	s.flushNeighbors(l, true)
	s.flushFDB(l, true)
}

// keepAddrOnDown reports whether l keeps its IPv6 addresses when it goes
// down (net.ipv6.conf.{all,<l>}.keep_addr_on_down).
func (s *state) keepAddrOnDown(l *link) bool {
	if v := s.intSysctl("net/ipv6/conf/all/keep_addr_on_down"); v != 0 {
		return v > 0
	}
	return s.intSysctl(linkKey("net/ipv6/conf", l.Name, "keep_addr_on_down")) > 0
}

// flushNeighbors removes l's neighbour entries: all of them, or (on
// carrier loss) those that are not permanent.
func (s *state) flushNeighbors(l *link, all bool) {
	s.neighs = slices.DeleteFunc(s.neighs, func(n kernel.Neighbor) bool {
		return n.LinkIndex == l.Index && (all || n.State&(kernel.NUDPermanent|kernel.NUDNoARP) == 0)
	})
}

// flushFDB removes l's FDB entries: all of them, or (when l goes down)
// those that are not permanent.
func (s *state) flushFDB(l *link, all bool) {
	s.fdb = slices.DeleteFunc(s.fdb, func(e kernel.FDBEntry) bool {
		return e.LinkIndex == l.Index && (all || !e.Permanent)
	})
}
