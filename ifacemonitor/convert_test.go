//go:build linux

package ifacemonitor

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestPrefixFrom(t *testing.T) {
	tests := []struct {
		name string
		in   net.IPNet
		want string // empty: rejected
	}{
		{"IPv4 in 4 bytes", net.IPNet{IP: net.IP{10, 0, 0, 1}, Mask: net.CIDRMask(24, 32)}, "10.0.0.1/24"},
		{"IPv4 in 16 bytes", net.IPNet{IP: net.ParseIP("10.0.0.1"), Mask: net.CIDRMask(32, 32)}, "10.0.0.1/32"},
		{"IPv6", net.IPNet{IP: net.ParseIP("fd00::1"), Mask: net.CIDRMask(64, 128)}, "fd00::1/64"},
		{"IPv4-mapped IPv6 stays IPv6", net.IPNet{IP: net.ParseIP("::ffff:10.0.0.1"), Mask: net.CIDRMask(128, 128)}, "::ffff:10.0.0.1/128"},
		{"IPv6 with an IPv4 mask", net.IPNet{IP: net.ParseIP("fd00::1"), Mask: net.CIDRMask(24, 32)}, ""},
		{"IPv4 bytes with an IPv6 mask", net.IPNet{IP: net.IP{10, 0, 0, 1}, Mask: net.CIDRMask(64, 128)}, ""},
		{"no mask", net.IPNet{IP: net.IP{10, 0, 0, 1}}, ""},
		{"non-canonical mask", net.IPNet{IP: net.IP{10, 0, 0, 1}, Mask: net.IPMask{255, 0, 255, 0}}, ""},
		{"no address", net.IPNet{Mask: net.CIDRMask(24, 32)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := prefixFrom(tc.in)
			if tc.want == "" {
				assert.False(t, ok, "got %v", p)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, mustPrefix(tc.want), p)
		})
	}
}

func TestRouteFrom(t *testing.T) {
	_, dst4, _ := net.ParseCIDR("10.2.0.0/16")
	_, dst6, _ := net.ParseCIDR("fd00:2::/64")
	tests := []struct {
		name string
		in   netlink.Route
		want *Route // nil: rejected
	}{
		{
			name: "IPv4 via a gateway",
			in:   netlink.Route{Family: unix.AF_INET, Table: 254, Dst: dst4, Gw: net.ParseIP("10.0.0.254"), LinkIndex: 3, Priority: 10, Protocol: unix.RTPROT_STATIC, Type: unix.RTN_UNICAST},
			want: &Route{Table: 254, Dst: mustPrefix("10.2.0.0/16"), Gw: netip.MustParseAddr("10.0.0.254"), LinkIndex: 3, Priority: 10, Protocol: unix.RTPROT_STATIC, Type: unix.RTN_UNICAST},
		},
		{
			name: "IPv4 default (no Dst)",
			in:   netlink.Route{Family: unix.AF_INET, Table: 254, Gw: net.IP{10, 0, 0, 1}, LinkIndex: 3},
			want: &Route{Table: 254, Dst: mustPrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("10.0.0.1"), LinkIndex: 3},
		},
		{
			name: "IPv6 default (no Dst)",
			in:   netlink.Route{Family: unix.AF_INET6, Table: 254, Gw: net.ParseIP("fe80::1"), LinkIndex: 3, Priority: 1024},
			want: &Route{Table: 254, Dst: mustPrefix("::/0"), Gw: netip.MustParseAddr("fe80::1"), LinkIndex: 3, Priority: 1024},
		},
		{
			name: "IPv6 multipath with a source",
			in: netlink.Route{Family: unix.AF_INET6, Table: 100, Dst: dst6, Src: net.ParseIP("fd00::9"), MultiPath: []*netlink.NexthopInfo{
				{LinkIndex: 3, Gw: net.ParseIP("fe80::1")}, nil, {LinkIndex: 4, Gw: net.ParseIP("fe80::2")},
			}},
			want: &Route{Table: 100, Dst: mustPrefix("fd00:2::/64"), Src: netip.MustParseAddr("fd00::9"), Nexthops: []Nexthop{
				{LinkIndex: 3, Gw: netip.MustParseAddr("fe80::1")}, {LinkIndex: 4, Gw: netip.MustParseAddr("fe80::2")},
			}},
		},
		{name: "cloned", in: netlink.Route{Family: unix.AF_INET6, Dst: dst6, Flags: unix.RTM_F_CLONED}},
		{name: "other family", in: netlink.Route{Family: unix.AF_MPLS}},
		{name: "family mismatch", in: netlink.Route{Family: unix.AF_INET, Dst: dst6}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := routeFrom(tc.in)
			if tc.want == nil {
				assert.False(t, ok, "got %+v", got)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, *tc.want, got)
			assert.True(t, got.Equal(*tc.want))
		})
	}
}

func TestLinkInfoFrom(t *testing.T) {
	tests := []struct {
		name  string
		flags net.Flags
		up    bool
		admin bool
	}{
		{"down", 0, false, false},
		{"admin up, no carrier", net.FlagUp, false, true},
		{"up and running", net.FlagUp | net.FlagRunning, true, true},
		{"running without admin up", net.FlagRunning, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			li, ok := linkInfoFrom(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: 4, Name: "v", MTU: 1450, Flags: tc.flags}})
			assert.True(t, ok)
			assert.Equal(t, linkInfo{index: 4, name: "v", up: tc.up, adminUp: tc.admin, mtu: 1450, typ: "veth"}, li)
		})
	}
	_, ok := linkInfoFrom(nil)
	assert.False(t, ok)
	_, ok = linkInfoFrom(&netlink.Device{})
	assert.False(t, ok, "no index")
}

func TestTypes(t *testing.T) {
	assert.Equal(t, []string{"gone", "down", "up", "State(7)"},
		[]string{StateGone.String(), StateDown.String(), StateUp.String(), State(7).String()})

	ps := []netip.Prefix{mustPrefix("fd00::1/64"), mustPrefix("10.0.0.1/32"), mustPrefix("10.0.0.1/24"), mustPrefix("9.0.0.1/8")}
	SortPrefixes(ps)
	assert.Equal(t, []netip.Prefix{mustPrefix("9.0.0.1/8"), mustPrefix("10.0.0.1/24"), mustPrefix("10.0.0.1/32"), mustPrefix("fd00::1/64")}, ps)

	a := RouteKey{Table: 254, Dst: mustPrefix("10.0.0.0/8")}
	b := a
	b.LinkIndex = 2
	assert.Negative(t, CompareRouteKeys(a, b))
	assert.Zero(t, CompareRouteKeys(a, a))
	b = a
	b.Table = 100
	assert.Positive(t, CompareRouteKeys(a, b))

	v := View{Interfaces: []Interface{{Name: "a", Index: 1}, {Name: "c", Index: 3}}}
	got, ok := v.Interface("c")
	assert.True(t, ok)
	assert.Equal(t, 3, got.Index)
	_, ok = v.Interface("b")
	assert.False(t, ok)

	r := Route{Table: 1, Dst: mustPrefix("10.0.0.0/8"), Priority: 2, TOS: 3, LinkIndex: 4, Type: 5}
	assert.Equal(t, RouteKey{Table: 1, Dst: mustPrefix("10.0.0.0/8"), Priority: 2, TOS: 3, LinkIndex: 4}, r.Key())
	o := r
	o.Nexthops = []Nexthop{{LinkIndex: 1}}
	assert.False(t, r.Equal(o))
}
