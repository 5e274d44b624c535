package kernel

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// These checks are pure: they run on every OS, and kernelfake applies
// them too.

func TestRouteValidate(t *testing.T) {
	good := Route{Family: IPv4, Table: 100, Dst: netip.MustParsePrefix("10.1.0.0/16"), Type: RTNUnicast, OIF: 3}
	with := func(f func(r *Route)) Route { r := good; f(&r); return r }
	require.NoError(t, good.Validate())
	bad := map[string]Route{
		"no family":       with(func(r *Route) { r.Family = 0 }),
		"family mismatch": with(func(r *Route) { r.Family = IPv6 }),
		"invalid prefix":  with(func(r *Route) { r.Dst = netip.Prefix{} }),
		"host bits":       with(func(r *Route) { r.Dst = netip.MustParsePrefix("10.1.2.3/16") }),
		"mapped":          with(func(r *Route) { r.Dst = netip.MustParsePrefix("::ffff:10.0.0.0/104") }),
		"MTU too large":   with(func(r *Route) { r.MTU = MaxRouteMTU + 1 }),
		"no type":         with(func(r *Route) { r.Type = 0 }),
		"broadcast":       with(func(r *Route) { r.Type = RTNBroadcast }),
		"negative OIF":    with(func(r *Route) { r.OIF = -1 }),
		"no path":         with(func(r *Route) { r.OIF = 0 }),
		"blackhole path":  with(func(r *Route) { r.Type = RTNBlackhole }),
		"v4 gw on v6": with(func(r *Route) {
			r.Family, r.Dst, r.Gateway = IPv6, netip.MustParsePrefix("fd00::/64"), netip.MustParseAddr("10.0.0.1")
		}),
		"zero gateway":    with(func(r *Route) { r.Gateway = netip.IPv4Unspecified() }),
		"prefsrc family":  with(func(r *Route) { r.PrefSrc = netip.MustParseAddr("fd00::1") }),
		"multipath + OIF": with(func(r *Route) { r.NextHops = []NextHop{{OIF: 3}, {OIF: 4}} }),
		"empty next hop":  with(func(r *Route) { r.OIF, r.NextHops = 0, []NextHop{{OIF: 3}, {}} }),
		"too many hops":   with(func(r *Route) { r.OIF, r.NextHops = 0, make([]NextHop, MaxNextHops+1) }),
	}
	for name, r := range bad {
		assert.ErrorIs(t, r.Validate(), ErrInvalid, name)
	}
	var nilRoute *Route
	assert.ErrorIs(t, nilRoute.Validate(), ErrInvalid)

	hostBits, mismatch, mtu := bad["host bits"], bad["family mismatch"], bad["MTU too large"]
	err := hostBits.Validate()
	assert.EqualError(t, err, "kernel: invalid input: destination 10.1.2.3/16 has host bits set (the network is 10.1.0.0/16)")
	assert.ErrorIs(t, err, ipfamily.ErrHostBits)
	assert.ErrorIs(t, mismatch.Validate(), ipfamily.ErrWrongFamily)
	assert.Contains(t, mtu.Validate().Error(), "65521")

	ok := map[string]Route{
		"MTU at the cap":   with(func(r *Route) { r.MTU = MaxRouteMTU }),
		"v6 gw on v4":      with(func(r *Route) { r.OIF, r.Gateway = 0, netip.MustParseAddr("fe80::1") }),
		"state flags":      with(func(r *Route) { r.Flags = FlagLinkdown | FlagOnlink }),
		"blackhole":        with(func(r *Route) { r.Type, r.OIF = RTNBlackhole, 0 }),
		"local":            with(func(r *Route) { r.Type, r.Scope = RTNLocal, ScopeHost }),
		"multipath":        with(func(r *Route) { r.OIF, r.NextHops = 0, []NextHop{{OIF: 3}, {Gateway: netip.MustParseAddr("10.0.0.1")}} }),
		"default":          with(func(r *Route) { r.Dst = netip.MustParsePrefix("0.0.0.0/0") }),
		"v6 default route": {Family: IPv6, Dst: netip.MustParsePrefix("::/0"), Type: RTNUnreachable},
	}
	for name, r := range ok {
		assert.NoError(t, r.Validate(), name)
	}
	// A delete needs only the key.
	assert.NoError(t, (&Route{Family: IPv6, Dst: netip.MustParsePrefix("fd00::/64")}).check(OpDelete))
	assert.ErrorIs(t, (&Route{Family: IPv6, Dst: netip.MustParsePrefix("fd00::1/64")}).check(OpDelete), ErrInvalid)
	assert.ErrorIs(t, checkKind(0), ErrInvalid)
}

func TestNeighborAndFDBValidate(t *testing.T) {
	n := Neighbor{LinkIndex: 2, IP: netip.MustParseAddr("10.0.0.1"), MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
	require.NoError(t, n.Validate())
	assert.Equal(t, NUDPermanent, n.state(), "0 means permanent")
	for name, f := range map[string]func(*Neighbor){
		"no link":     func(n *Neighbor) { n.LinkIndex = 0 },
		"no address":  func(n *Neighbor) { n.IP = netip.Addr{} },
		"unspecified": func(n *Neighbor) { n.IP = netip.IPv6Unspecified() },
		"zoned":       func(n *Neighbor) { n.IP = netip.MustParseAddr("fe80::1%eth0") },
		"mapped":      func(n *Neighbor) { n.IP = netip.MustParseAddr("::ffff:10.0.0.1") },
		"no MAC":      func(n *Neighbor) { n.MAC = nil },
		"long MAC":    func(n *Neighbor) { n.MAC = make(net.HardwareAddr, 33) },
		"bad state":   func(n *Neighbor) { n.State = 0x100 },
	} {
		m := n
		f(&m)
		assert.ErrorIs(t, m.Validate(), ErrInvalid, name)
	}
	assert.NoError(t, (&Neighbor{LinkIndex: 2, IP: n.IP}).check(OpDelete), "a delete needs no MAC")

	e := FDBEntry{LinkIndex: 3, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, Dst: netip.MustParseAddr("fd00::1")}
	require.NoError(t, e.Validate())
	assert.False(t, e.floods())
	for name, f := range map[string]func(*FDBEntry){
		"no link":   func(e *FDBEntry) { e.LinkIndex = -1 },
		"short MAC": func(e *FDBEntry) { e.MAC = e.MAC[:5] },
		"zero dst":  func(e *FDBEntry) { e.Dst = netip.IPv4Unspecified() },
	} {
		m := e
		f(&m)
		assert.ErrorIs(t, m.Validate(), ErrInvalid, name)
	}
	assert.True(t, (&FDBEntry{MAC: make(net.HardwareAddr, 6)}).floods(), "all zeros")
	assert.True(t, (&FDBEntry{MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}).floods(), "multicast")
	assert.True(t, (&FDBEntry{MAC: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}).floods(), "broadcast")
	assert.NoError(t, (&FDBEntry{LinkIndex: 3, MAC: make(net.HardwareAddr, 6)}).Validate(), "a bridge-port entry has no remote")
}

func TestRuleValidate(t *testing.T) {
	good := Rule{Family: IPv4, Priority: 100, Action: RuleLookup, Table: 200}
	require.NoError(t, good.Validate())
	for name, f := range map[string]func(*Rule){
		"no family":          func(r *Rule) { r.Family = 0 },
		"src family":         func(r *Rule) { r.Src = netip.MustParsePrefix("fd00::/64") },
		"lookup no table":    func(r *Rule) { r.Table = 0 },
		"backward goto":      func(r *Rule) { r.Action, r.Goto = RuleGoto, 50 },
		"unknown action":     func(r *Rule) { r.Action = 42 },
		"long iif":           func(r *Rule) { r.IIF = strings.Repeat("x", 16) },
		"port range":         func(r *Rule) { r.DstPorts = PortRange{Start: 10, End: 5} },
		"port 0":             func(r *Rule) { r.SrcPorts = PortRange{End: 5} },
		"uid range":          func(r *Rule) { r.UID = UIDRange{Start: 5, End: 1, Set: true} },
		"suppress too long":  func(r *Rule) { r.SuppressPrefixLen = Suppressor{Value: 33, Set: true} },
		"suppress -2":        func(r *Rule) { r.SuppressPrefixLen = Suppressor{Value: -2, Set: true} },
		"ifgroup -2":         func(r *Rule) { r.SuppressIfGroup = Suppressor{Value: -2, Set: true} },
		"realm on v6":        func(r *Rule) { r.Family, r.Realm = IPv6, 5 },
		"zero suppress zero": func(r *Rule) { r.SuppressIfGroup = Suppressor{Value: -5, Set: true} },
	} {
		r := good
		f(&r)
		assert.ErrorIs(t, r.Validate(), ErrInvalid, name)
	}
	assert.NoError(t, (&Rule{Family: IPv6}).check(OpDelete), "a delete may match anything")
	assert.ErrorIs(t, (&Rule{}).check(OpDelete), ErrInvalid)
}

func TestLinkAndAddrValidate(t *testing.T) {
	good := []Link{
		{Name: "br0", Kind: KindBridge, MTU: 1400, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
		{Name: "v0", Kind: KindVeth, Veth: &Veth{PeerName: "v1"}},
		{Name: "vx", Kind: KindVXLAN, VXLAN: &VXLAN{VNI: 1<<24 - 1, Port: 4789, Local: netip.MustParseAddr("fd00::1")}},
		{Name: "tunl0", Kind: KindIPIP},
		{Name: "tun1", Kind: KindIPIP, IPTunnel: &IPTunnel{Remote: netip.MustParseAddr("192.0.2.1")}},
		{Name: "wg0", Kind: KindWireGuard, MTU: 1420},
	}
	for _, l := range good {
		assert.NoError(t, l.Validate(), l.Name)
	}
	for name, l := range map[string]Link{
		"index":        {Index: 3, Name: "br0", Kind: KindBridge},
		"empty name":   {Kind: KindBridge},
		"long name":    {Name: "abcdefghijklmnop", Kind: KindBridge},
		"slash":        {Name: "a/b", Kind: KindBridge},
		"dotdot":       {Name: "..", Kind: KindBridge},
		"space":        {Name: "a b", Kind: KindBridge},
		"tun kind":     {Name: "t", Kind: KindTUN},
		"device kind":  {Name: "d", Kind: KindDevice},
		"negative MTU": {Name: "b", Kind: KindBridge, MTU: -1},
		"short MAC":    {Name: "b", Kind: KindBridge, MAC: net.HardwareAddr{1, 2}},
		"MAC on wg":    {Name: "w", Kind: KindWireGuard, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}},
		"veth no peer": {Name: "v", Kind: KindVeth},
		"peer name":    {Name: "v", Kind: KindVeth, Veth: &Veth{PeerName: ""}},
		"veth on br":   {Name: "b", Kind: KindBridge, Veth: &Veth{PeerName: "x"}},
		"vxlan no cfg": {Name: "x", Kind: KindVXLAN},
		"big VNI":      {Name: "x", Kind: KindVXLAN, VXLAN: &VXLAN{VNI: 1 << 24}},
		"ipip v6":      {Name: "t", Kind: KindIPIP, IPTunnel: &IPTunnel{Local: netip.MustParseAddr("fd00::1")}},
		"tunnel on br": {Name: "b", Kind: KindBridge, IPTunnel: &IPTunnel{}},
	} {
		assert.ErrorIs(t, l.Validate(), ErrInvalid, name)
	}

	assert.NoError(t, (&Addr{LinkIndex: 1, Prefix: netip.MustParsePrefix("10.0.0.5/24")}).Validate(), "host bits are the point")
	for name, a := range map[string]Addr{
		"no link":     {Prefix: netip.MustParsePrefix("10.0.0.5/24")},
		"no prefix":   {LinkIndex: 1},
		"unspecified": {LinkIndex: 1, Prefix: netip.MustParsePrefix("0.0.0.0/0")},
		"mapped":      {LinkIndex: 1, Prefix: netip.MustParsePrefix("::ffff:10.0.0.1/128")},
	} {
		assert.ErrorIs(t, a.Validate(), ErrInvalid, name)
	}
	assert.Equal(t, IPv6, Addr{Prefix: netip.MustParsePrefix("fd00::1/64")}.Family())
}

func TestSysctlPath(t *testing.T) {
	for key, want := range map[string]string{
		"net.ipv4.ip_forward":                 "net/ipv4/ip_forward",
		"net/ipv4/ip_forward":                 "net/ipv4/ip_forward",
		"net/ipv4/conf/eth0.100/rp_filter":    "net/ipv4/conf/eth0.100/rp_filter",
		"net.ipv4.conf.eth0.100.rp_filter":    "net/ipv4/conf/eth0/100/rp_filter", // dots always separate
		"net.ipv6.conf.all.keep_addr_on_down": "net/ipv6/conf/all/keep_addr_on_down",
	} {
		got, err := SysctlPath(key)
		require.NoError(t, err, key)
		assert.Equal(t, want, got, key)
	}
	for _, key := range []string{
		"", "net", "kernel.hostname", "/proc/sys/net/ipv4/ip_forward", "/net/ipv4/ip_forward",
		"net/../kernel/hostname", "net..ipv4", "net/ipv4/", "net/./ipv4", "net.ipv4.ip_forward\x00", "vm/swappiness",
	} {
		_, err := SysctlPath(key)
		assert.ErrorIs(t, err, ErrInvalid, "%q", key)
	}
}

func TestCheckEventKinds(t *testing.T) {
	assert.NoError(t, checkEventKinds(EventLinks|EventAddrs|EventRoutes))
	assert.ErrorIs(t, checkEventKinds(0), ErrInvalid)
	assert.ErrorIs(t, checkEventKinds(1<<5), ErrInvalid)
}

func TestStringers(t *testing.T) {
	assert.Equal(t, "gone down up LinkState(7)", LinkGone.String()+" "+LinkDown.String()+" "+LinkUp.String()+" "+LinkState(7).String())
	assert.Equal(t, "replace add delete", OpReplace.String()+" "+OpAdd.String()+" "+OpDelete.String())
	l := Link{AdminUp: true}
	assert.Equal(t, LinkDown, l.State())
	l.Running = true
	assert.Equal(t, LinkUp, l.State())
	r := Route{OIF: 3, NextHops: []NextHop{{OIF: 5}}}
	assert.True(t, r.Uses(3))
	assert.True(t, r.Uses(5))
	assert.False(t, r.Uses(4))
	assert.Equal(t, "<invalid prefix> table 254", routeObject(&Route{}))
}
