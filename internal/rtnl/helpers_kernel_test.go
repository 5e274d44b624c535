//go:build linux

package rtnl

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/kerneltest"
)

// Addresses of the test interface v0 (a veth whose peer v1 is also up, so
// v0 has carrier), and gateways inside its subnets.
var (
	testAddr4 = netip.MustParsePrefix("10.255.0.1/24")
	testAddr6 = netip.MustParsePrefix("fd00:255::1/64")
	testGw4   = netip.MustParseAddr("10.255.0.2")
	testGw4b  = netip.MustParseAddr("10.255.0.3")
	testGw6   = netip.MustParseAddr("fd00:255::2")
	testGw6b  = netip.MustParseAddr("fd00:255::3")
)

// testLinks are the interfaces setupLinks creates.
type testLinks struct {
	v0, v1 int32 // interface indexes
}

// setupLinks creates the veth pair v0/v1 in ns, brings both up and gives
// v0 an IPv4 and an IPv6 address (no DAD), so gateways in their subnets
// resolve.
func setupLinks(ns *kerneltest.NS) (testLinks, error) {
	h := ns.Handle()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}
	if err := h.LinkAdd(veth); err != nil {
		return testLinks{}, fmt.Errorf("add veth: %w", err)
	}
	var out testLinks
	for _, name := range []string{"v0", "v1"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return testLinks{}, err
		}
		if err := h.LinkSetUp(l); err != nil {
			return testLinks{}, err
		}
		if name == "v0" {
			out.v0 = int32(l.Attrs().Index)
			for _, p := range []netip.Prefix{testAddr4, testAddr6} {
				a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
				if p.Addr().Is6() {
					a.Flags = unix.IFA_F_NODAD
				}
				if err := h.AddrAdd(l, a); err != nil {
					return testLinks{}, fmt.Errorf("add %s: %w", p, err)
				}
			}
		} else {
			out.v1 = int32(l.Attrs().Index)
		}
	}
	return out, nil
}

// genDst returns the i-th /32 (IPv4, inside 10/8) or /128 (IPv6, inside
// fd01::/16) destination.
func genDst(v4 bool, i int) netip.Prefix {
	if v4 {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0x01, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), 128)
}

// genRoutes returns n device routes via oif in table, protocol 80.
func genRoutes(v4 bool, n int, table uint32, oif int32) []RouteOp {
	fam := uint8(unix.AF_INET6)
	if v4 {
		fam = unix.AF_INET
	}
	ops := make([]RouteOp, n)
	for i := range ops {
		ops[i] = RouteOp{Kind: OpReplace, Route: Route{
			Family: fam, Table: table, Dst: genDst(v4, i), Type: unix.RTN_UNICAST,
			Protocol: 80, Scope: unix.RT_SCOPE_LINK, OIF: oif,
		}}
	}
	return ops
}

// netlinkRoute converts a route to the vishvananda form, for the peer
// benchmarks.
func netlinkRoute(r *Route) *netlink.Route {
	return &netlink.Route{
		LinkIndex: int(r.OIF),
		Dst:       &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
		Table:     int(r.Table),
		Protocol:  netlink.RouteProtocol(r.Protocol),
		Scope:     netlink.Scope(r.Scope),
		Family:    int(r.Family),
		Type:      int(r.Type),
	}
}
