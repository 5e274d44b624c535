package routetable_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	rt "github.com/nodeplane/nodeplane/routetable"
)

// TestConformance runs the driver conformance suite on a fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs the driver conformance suite in fresh network
// namespaces of the running kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// confVariant is one Table identity: a family and a routing table.
type confVariant struct {
	fam   rt.Family
	table uint32
}

func (v confVariant) String() string { return fmt.Sprintf("%v-table%d", v.fam, v.table) }

// confOtherTable holds foreign routes with our prefixes and protocol.
const confOtherTable = 1001

// confIP maps an IPv4 address of the plan to v's family: a.b.c.d is
// fd00::a.b.c.d in IPv6.
func (v confVariant) ip(s string) netip.Addr {
	a := netip.MustParseAddr(s)
	if v.fam == rt.IPv4 {
		return a
	}
	a16 := [16]byte{0: 0xfd}
	b := a.As4()
	copy(a16[12:], b[:])
	return netip.AddrFrom16(a16)
}

// pfx maps an IPv4 prefix of the plan to v's family (a /n is /96+n).
func (v confVariant) pfx(s string) netip.Prefix {
	p := netip.MustParsePrefix(s)
	if v.fam == rt.IPv4 {
		return p
	}
	return netip.PrefixFrom(v.ip(p.Addr().String()), p.Bits()+96)
}

// The interfaces: np-a and np-b match the Table's pattern, eth-x does not.
// Interface n has 10.99.n.1/24, and its gateway is 10.99.n.2.
var confLinks = []string{"np-a", "np-b", "eth-x"}

func (v confVariant) gw(n int) netip.Addr { return v.ip(fmt.Sprintf("10.99.%d.2", n)) }

var confMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}

// confPair is what SetRoutes replaces at once: a class and an interface.
type confPair struct {
	class rt.RouteClass
	iface string
}

// targets is the representative state, by (class, interface).
func (v confVariant) targets() map[confPair][]rt.Target {
	var podsA, podsB []rt.Target
	for i := range 12 {
		t := rt.Target{CIDR: v.pfx(fmt.Sprintf("10.244.1.%d/32", i+1))}
		if i%4 == 0 {
			t.DestMAC = confMAC
		}
		podsA = append(podsA, t)
	}
	for i := range 8 {
		podsB = append(podsB, rt.Target{CIDR: v.pfx(fmt.Sprintf("10.244.2.%d/32", i+1)), Metric: uint32(i % 2 * 10)})
	}
	podsA = append(podsA, rt.Target{CIDR: v.pfx("10.80.0.1/32"), Type: rt.TargetLocal})
	podsB = append(podsB,
		rt.Target{CIDR: v.pfx("10.50.0.0/16"), Gateway: v.gw(2)},
		rt.Target{CIDR: v.pfx("10.51.0.0/16"), Src: v.ip("10.99.2.1"), MTU: 1400, Metric: 50},
		rt.Target{CIDR: v.pfx("10.52.0.0/16"), Type: rt.TargetOnlink, Gateway: v.ip("192.168.7.1")},
	)
	return map[confPair][]rt.Target{
		{10, "np-a"}: podsA,
		{10, "np-b"}: podsB,
		{10, "eth-x"}: {
			{CIDR: v.pfx("10.70.0.0/16")},
			{CIDR: v.pfx("10.71.0.0/16"), Gateway: v.gw(3), Metric: 20},
		},
		{20, rt.InterfaceNone}: {
			{CIDR: v.pfx("10.60.0.0/16"), Type: rt.TargetBlackhole},
			{CIDR: v.pfx("10.61.0.0/16"), Type: rt.TargetUnreachable},
			{CIDR: v.pfx("10.62.0.0/16"), Type: rt.TargetProhibit, Metric: 3},
			{CIDR: v.pfx("10.63.0.0/16"), Type: rt.TargetThrow},
			{CIDR: v.pfx("10.64.0.0/16"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: v.gw(1)}, {Iface: "np-b", Gateway: v.gw(2), Weight: 3}}},
		},
	}
}

var confSubject = drivertest.Subject[*rt.Table, confVariant]{
	Variants: []confVariant{{rt.IPv4, 1000}, {rt.IPv6, 1000}, {rt.IPv4, kernel.TableMain}, {rt.IPv6, kernel.TableMain}},
	Setup:    confSetup,
	New: func(k kernel.Kernel, clk clock.Clock, v confVariant) (*rt.Table, error) {
		return rt.New(rt.Options{Kernel: k, Family: v.fam, Table: v.table, InterfacePatterns: []string{`^np-`}, Clock: clk})
	},
	Declare: func(tbl *rt.Table, v confVariant) error {
		for key, targets := range v.targets() {
			if err := tbl.SetRoutes(key.class, key.iface, targets); err != nil {
				return err
			}
		}
		return nil
	},
	Withdraw: func(tbl *rt.Table, v confVariant) error {
		for key := range v.targets() {
			if err := tbl.SetRoutes(key.class, key.iface, nil); err != nil {
				return err
			}
		}
		return nil
	},
	Check: func(t testing.TB, k kernel.Kernel, v confVariant) {
		var want, neigh, got []string
		for key, targets := range v.targets() {
			for _, tg := range targets {
				want = append(want, v.expect(key.iface, tg))
				if tg.DestMAC != nil {
					neigh = append(neigh, fmt.Sprintf("neigh %v dev %s lladdr %v", tg.CIDR.Addr(), key.iface, tg.DestMAC))
				}
			}
		}
		for _, r := range drivertest.Routes(t, k, v.fam, v.table) {
			if strings.Contains(r, fmt.Sprintf(" proto %d ", rt.DefaultProtocol)) && !strings.Contains(r, " tos ") {
				got = append(got, r)
			}
		}
		drivertest.SameLines(t, "our routes", got, want)
		drivertest.SameLines(t, "our neighbour entries", slices.DeleteFunc(drivertest.PermanentNeighbors(t, k, v.fam), func(n string) bool {
			return !strings.Contains(n, " lladdr "+confMAC.String())
		}), neigh)
	},
	Dump: confDump,
	Foreign: func(t testing.TB, k kernel.Kernel, v confVariant, at drivertest.Stage) {
		ex := confIndex(t, k, "eth-x")
		na := confIndex(t, k, "np-a")
		var routes []kernel.Route
		var neighbors []kernel.Neighbor
		switch at {
		case drivertest.BeforeApply:
			routes = []kernel.Route{
				// Our prefix and protocol in another table.
				{Table: confOtherTable, Dst: v.pfx("10.50.0.0/16"), Type: kernel.RTNUnicast, Protocol: rt.DefaultProtocol, Scope: kernel.ScopeLink, OIF: ex},
				// Our prefix, another metric, through an interface outside
				// the patterns, another protocol.
				{Table: v.table, Dst: v.pfx("10.50.0.0/16"), Priority: 77, Type: kernel.RTNUnicast, Protocol: kernel.ProtoBoot, Gateway: v.gw(3), OIF: ex},
				{Table: v.table, Dst: v.pfx("10.90.0.0/16"), Type: kernel.RTNUnicast, Protocol: 4, Scope: kernel.ScopeLink, OIF: ex},
			}
			if v.fam == rt.IPv4 {
				// Our protocol, but a TOS selector.
				routes = append(routes, kernel.Route{Table: v.table, Dst: v.pfx("10.60.0.0/16"), TOS: 0x10, Type: kernel.RTNBlackhole, Protocol: rt.DefaultProtocol})
			}
			// A static entry without a protocol on our interface.
			neighbors = []kernel.Neighbor{{LinkIndex: na, IP: v.ip("10.99.1.77"), MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}}}
		case drivertest.AfterApply:
			routes = []kernel.Route{
				{Table: confOtherTable, Dst: v.pfx("10.244.1.1/32"), Type: kernel.RTNUnicast, Protocol: kernel.ProtoBoot, Scope: kernel.ScopeLink, OIF: na},
				{Table: v.table, Dst: v.pfx("10.60.0.0/16"), Priority: 7, Type: kernel.RTNBlackhole, Protocol: kernel.ProtoBoot},
				{Table: v.table, Dst: v.pfx("10.91.0.0/16"), Type: kernel.RTNUnicast, Protocol: kernel.ProtoBoot, Gateway: v.gw(3), OIF: ex},
			}
			neighbors = []kernel.Neighbor{
				// Static entries of another protocol on our interface, and
				// of ours on an interface outside the patterns (another
				// Table's with the same protocol).
				{LinkIndex: na, IP: v.ip("10.99.1.78"), MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x78}, Protocol: 4},
				{LinkIndex: ex, IP: v.ip("10.99.3.79"), MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 0x79}, Protocol: rt.DefaultProtocol},
			}
		case drivertest.InPlace:
			routes = []kernel.Route{
				{Table: v.table, Dst: v.pfx("10.50.0.0/16"), Priority: 99, Type: kernel.RTNUnicast, Protocol: kernel.ProtoBoot, Scope: kernel.ScopeLink, OIF: ex},
			}
		}
		var ops []kernel.RouteOp
		for _, r := range routes {
			r.Family = v.fam
			ops = append(ops, kernel.RouteOp{Kind: kernel.OpAdd, Route: r})
		}
		for i, err := range k.ApplyRoutes(context.Background(), ops) {
			if err != nil {
				t.Fatalf("adding foreign route %v: %v", routes[i].Dst, err)
			}
		}
		for _, n := range neighbors {
			if err := k.ApplyNeighbors(context.Background(), []kernel.NeighborOp{{Kind: kernel.OpAdd, Neighbor: n}})[0]; err != nil {
				t.Fatalf("adding foreign neighbour %v: %v", n.IP, err)
			}
		}
	},
	Delete: func(t testing.TB, k kernel.Kernel, v confVariant) {
		var ops []kernel.RouteOp
		for _, dst := range []string{"10.50.0.0/16", "10.244.1.5/32", "10.60.0.0/16"} {
			ops = append(ops, kernel.RouteOp{Kind: kernel.OpDelete, Route: kernel.Route{
				Family: v.fam, Table: v.table, Dst: v.pfx(dst), Priority: v.metric(0), Protocol: rt.DefaultProtocol}})
		}
		for i, err := range k.ApplyRoutes(context.Background(), ops) {
			if err != nil {
				t.Fatalf("deleting %v: %v", ops[i].Route.Dst, err)
			}
		}
	},
	BadInputs: []drivertest.BadInput[*rt.Table, confVariant]{
		{Name: "host bits", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: netip.PrefixFrom(v.ip("10.244.9.1"), v.pfx("10.0.0.0/24").Bits())})
		}},
		{Name: "no destination", Declare: func(tbl *rt.Table, _ confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{})
		}},
		{Name: "other family", Declare: func(tbl *rt.Table, v confVariant) error {
			other := confVariant{fam: rt.IPv6}
			if v.fam == rt.IPv6 {
				other.fam = rt.IPv4
			}
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: other.pfx("10.244.9.0/24")})
		}},
		{Name: "gateway of the other family", Declare: func(tbl *rt.Table, v confVariant) error {
			gw := netip.MustParseAddr("10.99.1.2")
			if v.fam == rt.IPv4 {
				gw = netip.MustParseAddr("fd00::2")
			}
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), Gateway: gw})
		}},
		{Name: "unspecified gateway", Declare: func(tbl *rt.Table, v confVariant) error {
			gw := netip.IPv4Unspecified()
			if v.fam == rt.IPv6 {
				gw = netip.IPv6Unspecified()
			}
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), Gateway: gw})
		}},
		{Name: "MTU above the kernel's cap", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), MTU: rt.MaxMTU + 1})
		}},
		{Name: "onlink without a gateway", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), Type: rt.TargetOnlink})
		}},
		{Name: "blackhole on an interface", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), Type: rt.TargetBlackhole})
		}},
		{Name: "unicast without an interface", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(20, rt.InterfaceNone, rt.Target{CIDR: v.pfx("10.244.9.0/24")})
		}},
		{Name: "unknown type", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(20, rt.InterfaceNone, rt.Target{CIDR: v.pfx("10.244.9.0/24"), Type: 99})
		}},
		{Name: "DestMAC on a network route", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), DestMAC: confMAC})
		}},
		{Name: "bad interface name", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np/a", rt.Target{CIDR: v.pfx("10.244.9.0/24")})
		}},
		{Name: "multipath on an interface", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteUpdate(10, "np-a", rt.Target{CIDR: v.pfx("10.244.9.0/24"), NextHops: []rt.NextHop{{Iface: "np-a", Gateway: v.gw(1)}}})
		}},
		{Name: "duplicate route", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.SetRoutes(10, "np-a", append(v.targets()[confPair{10, "np-a"}], rt.Target{CIDR: v.pfx("10.244.1.1/32")}))
		}},
		{Name: "good targets with a bad one", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.SetRoutes(10, "np-b", append(v.targets()[confPair{10, "np-b"}][:2:2], rt.Target{CIDR: v.pfx("10.244.9.0/24"), MTU: rt.MaxMTU + 1}))
		}},
		{Name: "removing an invalid key", Declare: func(tbl *rt.Table, v confVariant) error {
			return tbl.RouteRemove(10, "np-a", rt.RouteKey{CIDR: netip.PrefixFrom(v.ip("10.244.1.1"), v.pfx("10.0.0.0/24").Bits())})
		}},
	},
}

// metric is the metric the kernel stores for m: IPv6 turns 0 into 1024.
func (v confVariant) metric(m uint32) uint32 {
	if m == 0 && v.fam == rt.IPv6 {
		return 1024
	}
	return m
}

// expect renders a declared target as drivertest.FormatRoute renders the
// route the Table writes for it.
func (v confVariant) expect(iface string, tg rt.Target) string {
	typ := map[rt.TargetType]uint8{rt.TargetUnicast: kernel.RTNUnicast, rt.TargetOnlink: kernel.RTNUnicast, rt.TargetLocal: kernel.RTNLocal,
		rt.TargetBlackhole: kernel.RTNBlackhole, rt.TargetUnreachable: kernel.RTNUnreachable, rt.TargetProhibit: kernel.RTNProhibit, rt.TargetThrow: kernel.RTNThrow}[tg.Type]
	r := kernel.Route{Table: v.table, Dst: tg.CIDR, Priority: v.metric(tg.Metric), Type: typ, Gateway: tg.Gateway, PrefSrc: tg.Src,
		MTU: tg.MTU, Protocol: rt.DefaultProtocol}
	names := map[int]string{1: iface}
	if iface != rt.InterfaceNone {
		r.OIF = 1
	}
	switch {
	case v.fam == rt.IPv6:
	case tg.Type == rt.TargetLocal:
		r.Scope = kernel.ScopeHost
	case tg.Type == rt.TargetUnicast && !tg.Gateway.IsValid() && tg.NextHops == nil:
		r.Scope = kernel.ScopeLink
	}
	if tg.Type == rt.TargetOnlink {
		r.Flags = kernel.FlagOnlink
	}
	for i, h := range tg.NextHops {
		names[i+2] = h.Iface
		r.NextHops = append(r.NextHops, kernel.NextHop{OIF: i + 2, Gateway: h.Gateway, Weight: max(h.Weight, 1) - 1})
	}
	return drivertest.FormatRoute(&r, names)
}

// confDump renders the routes of v's family in every table but local,
// then the permanent neighbour entries, sorted: the kernel dumps those in
// the order of its hash table, whose hash mixes in the namespace.
func confDump(t testing.TB, k kernel.Kernel, v confVariant) []string {
	neighbors := drivertest.PermanentNeighbors(t, k, v.fam)
	slices.Sort(neighbors)
	return append(drivertest.Routes(t, k, v.fam), neighbors...)
}

// confSetup creates the interfaces, each a veth pair with an address,
// up, and waits until the kernel reports them running and their
// addresses usable. IPv6 runs without duplicate address detection and
// without link-local addresses, whose routes would differ between
// namespaces.
func confSetup(t testing.TB, k kernel.Kernel, v confVariant) {
	ctx := context.Background()
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.accept_dad", "0"}, {"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.default.addr_gen_mode", "1"}, {"net.ipv6.conf.all.keep_addr_on_down", "1"},
	} {
		if err := k.SetSysctl(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("sysctl %s: %v", kv[0], err)
		}
	}
	for i, name := range confLinks {
		peer := fmt.Sprintf("peer%d", i+1)
		l, err := k.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: peer}})
		if err != nil {
			t.Fatalf("adding %s: %v", name, err)
		}
		addr := netip.PrefixFrom(v.ip(fmt.Sprintf("10.99.%d.1", i+1)), v.pfx("10.0.0.0/24").Bits())
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: addr}); err != nil {
			t.Fatalf("address of %s: %v", name, err)
		}
		for _, n := range []string{peer, name} {
			if err := k.SetLinkUp(ctx, confIndex(t, k, n), true); err != nil {
				t.Fatalf("%s up: %v", n, err)
			}
		}
	}
	drivertest.WaitFor(t, "interfaces running and addresses usable", func() bool {
		for i, name := range confLinks {
			l, err := k.LinkByName(ctx, name)
			if err != nil || !l.Running {
				return false
			}
			local := false
			host := netip.PrefixFrom(v.ip(fmt.Sprintf("10.99.%d.1", i+1)), v.ip("10.0.0.0").BitLen())
			err = k.DumpRoutes(ctx, v.fam, kernel.TableLocal, func(r *kernel.Route) error {
				local = local || r.Dst == host
				return nil
			}, func() { local = false })
			if err != nil || !local {
				return false
			}
		}
		return true
	})
}

// confIndex returns the index of the link called name.
func confIndex(t testing.TB, k kernel.Kernel, name string) int {
	l, err := k.LinkByName(context.Background(), name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l.Index
}
