//go:build linux

package ifacemonitor

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkInfo is what the monitor keeps of a netlink link.
type linkInfo struct {
	index   int
	name    string
	up      bool // admin up and running: StateUp
	adminUp bool
	mtu     int
	typ     string
}

// linkInfoFrom converts a netlink link; false for one without attributes or
// index.
func linkInfoFrom(l netlink.Link) (linkInfo, bool) {
	if l == nil {
		return linkInfo{}, false
	}
	a := l.Attrs()
	if a == nil || a.Index <= 0 {
		return linkInfo{}, false
	}
	return linkInfo{
		index:   a.Index,
		name:    a.Name,
		up:      a.Flags&net.FlagUp != 0 && a.Flags&net.FlagRunning != 0,
		adminUp: a.Flags&net.FlagUp != 0,
		mtu:     a.MTU,
		typ:     l.Type(),
	}, true
}

// prefixFrom converts an interface address; false for a malformed one. The
// mask's length says the family, so an IPv4 address held in 16 bytes comes
// out as IPv4 and an IPv4-mapped IPv6 address stays IPv6.
func prefixFrom(n net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	switch bits {
	case 32:
		ip = ip.Unmap()
		if !ip.Is4() {
			return netip.Prefix{}, false
		}
	case 128:
		if len(n.IP) != net.IPv6len {
			return netip.Prefix{}, false
		}
	default:
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(ip, ones), true
}

// addrOf converts a route's address of the given family; invalid when ip
// is empty or does not fit the family.
func addrOf(family int, ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	if family == unix.AF_INET {
		if a = a.Unmap(); !a.Is4() {
			return netip.Addr{}
		}
	} else if !a.Is6() {
		return netip.Addr{}
	}
	return a
}

// routeFrom converts a netlink route; false for a cloned (cache) route, a
// family other than IPv4 and IPv6, or a malformed destination.
func routeFrom(r netlink.Route) (Route, bool) {
	if r.Flags&unix.RTM_F_CLONED != 0 {
		return Route{}, false
	}
	family := r.Family
	bits := 32
	switch family {
	case unix.AF_INET:
	case unix.AF_INET6:
		bits = 128
	default:
		return Route{}, false
	}
	dst := netip.PrefixFrom(addrOf(family, make(net.IP, bits/8)), 0) // default route
	if r.Dst != nil {
		ones, mbits := r.Dst.Mask.Size()
		a := addrOf(family, r.Dst.IP)
		if !a.IsValid() || mbits != bits {
			return Route{}, false
		}
		dst = netip.PrefixFrom(a, ones)
	}
	out := Route{
		Table:     r.Table,
		Dst:       dst,
		Priority:  r.Priority,
		TOS:       r.Tos,
		LinkIndex: r.LinkIndex,
		Type:      r.Type,
		Protocol:  int(r.Protocol),
		Scope:     int(r.Scope),
		Gw:        addrOf(family, r.Gw),
		Src:       addrOf(family, r.Src),
	}
	for _, nh := range r.MultiPath {
		if nh != nil {
			out.Nexthops = append(out.Nexthops, Nexthop{LinkIndex: nh.LinkIndex, Gw: addrOf(family, nh.Gw)})
		}
	}
	return out, true
}
