//go:build linux

package kernel

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// The netlink library's view of routes and addresses: the oracle that the
// kernel tests compare this package's own codecs with.

// routeFromNetlink converts a route of the netlink library; ok is false
// for a family other than IPv4 and IPv6.
func routeFromNetlink(nr *netlink.Route) (Route, bool) {
	f, ok := familyOfAF(uint8(nr.Family))
	if !ok {
		return Route{}, false
	}
	r := Route{
		Family: f, Table: uint32(nr.Table), Type: uint8(nr.Type), Protocol: uint8(nr.Protocol),
		Scope: uint8(nr.Scope), TOS: uint8(nr.Tos), Priority: uint32(nr.Priority), OIF: nr.LinkIndex,
		Gateway: familyAddr(nr.Gw, f), PrefSrc: familyAddr(nr.Src, f), Flags: uint32(nr.Flags), MTU: uint32(nr.MTU),
		Dst: netip.PrefixFrom(zeroAddr(f), 0),
	}
	if nr.Dst != nil {
		ones, _ := nr.Dst.Mask.Size()
		r.Dst = netip.PrefixFrom(familyAddr(nr.Dst.IP, f), ones)
	}
	if v, ok := nr.Via.(*netlink.Via); ok {
		r.Gateway = viaOf(v)
	}
	for _, h := range nr.MultiPath {
		nh := NextHop{OIF: h.LinkIndex, Gateway: familyAddr(h.Gw, f), Weight: uint8(h.Hops), Flags: uint32(h.Flags)}
		if v, ok := h.Via.(*netlink.Via); ok {
			nh.Gateway = viaOf(v)
		}
		r.NextHops = append(r.NextHops, nh)
	}
	return r, true
}

// familyAddr converts a net.IP of family f (nil: the zero Addr).
func familyAddr(ip net.IP, f Family) netip.Addr {
	if ip == nil {
		return netip.Addr{}
	}
	if f == IPv4 {
		ip = ip.To4()
	} else {
		ip = ip.To16()
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// viaOf converts an RTA_VIA gateway.
func viaOf(v *netlink.Via) netip.Addr {
	if f, ok := familyOfAF(uint8(v.AddrFamily)); ok {
		return familyAddr(v.Addr, f)
	}
	return netip.Addr{}
}
