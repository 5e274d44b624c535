package overlaytest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

// Stack is an overlay as a dataplane.Loop runs it, seen by the driver
// conformance suite as one driver: its Apply is a pass of the Manager
// (CompleteDeferredWork), then of its Driver (none for overlay.None), then
// of the route Table.
type Stack struct {
	// M is the overlay Manager; Table the route table it declares on.
	M     *overlay.Manager
	Table *routetable.Table
}

// Apply runs one pass. A failure of the Manager, or of the Driver or the
// Table as a whole, fails the pass as a whole; otherwise the parts'
// partial failures are joined, with the shortest RetryAfter.
func (s *Stack) Apply(ctx context.Context) (dataplane.ApplyResult, error) {
	if err := s.M.CompleteDeferredWork(ctx); err != nil {
		return dataplane.ApplyResult{}, err
	}
	var whole, partial []error
	var after time.Duration
	for _, step := range []func(context.Context) (dataplane.ApplyResult, error){DriverStep(s.M.Driver()), s.Table.Apply} {
		r, err := step(ctx)
		switch {
		case err == nil:
		case errors.Is(err, dataplane.ErrPartial):
			partial = append(partial, err)
		default:
			whole = append(whole, err)
		}
		if r.RetryAfter > 0 && (after == 0 || r.RetryAfter < after) {
			after = r.RetryAfter
		}
	}
	if len(whole) > 0 {
		return dataplane.ApplyResult{}, errors.Join(whole...)
	}
	return dataplane.ApplyResult{RetryAfter: after}, errors.Join(partial...)
}

// QueueResync queues a resync on the Manager, its Driver and the Table.
func (s *Stack) QueueResync() {
	s.M.QueueResync()
	if d := s.M.Driver(); d != nil {
		d.QueueResync()
	}
	s.Table.QueueResync()
}

// Phase returns dataplane.PhaseRoutes: a Stack stands for the whole pass.
func (s *Stack) Phase() dataplane.Phase { return dataplane.PhaseRoutes }

// Variant is one overlay the conformance suite runs: an encapsulation, a
// family and whether it routes across subnets only.
type Variant struct {
	// Encap is the overlay's encapsulation; for IPIP, give the device
	// ConfIPIPDevice.
	Encap overlay.Encap
	// Family is the overlay's family.
	Family ipfamily.Family
	// CrossSubnet is the overlay's option: with it, nodes on up0's subnet
	// are routed directly.
	CrossSubnet bool
}

// vxlan reports whether v encapsulates in VXLAN.
func (v Variant) vxlan() bool {
	_, ok := v.Encap.(overlay.VXLAN)
	return ok
}

// String names the variant: "vxlan-cross-subnet-IPv4", "none-IPv6"….
func (v Variant) String() string {
	s := v.Encap.String()
	if v.CrossSubnet {
		s += "-cross-subnet"
	}
	return s + "-" + v.Family.String()
}

// The plan: up0 (a veth, peer up1, both up) holds node 1's underlay
// address in its subnet; nodes 2 to 4 are on that subnet, nodes 5 to 7 on
// another. Every node has a block, a tunnel address in it and a VXLAN
// MAC. IPIP's device is ConfIPIPDevice, which the Driver creates and
// deletes: tunl0, the ipip module's catch-all device, which no driver can
// delete, is left to package ipip's own tests.
const (
	confNear, confFar, confLast = 2, 5, 7
	confParentMTU               = 1500
	// ConfIPIPDevice is the device of the conformance suite's IPIP
	// variants: give it as overlay.IPIP{Device: ConfIPIPDevice}.
	ConfIPIPDevice = "np-ipip"
)

// confUnderlay returns node n's underlay address: 198.18.0.n (near) or
// 198.51.100.n (far), fd00:198:18::n or fd00:198:51::n.
func confUnderlay(f ipfamily.Family, n int) netip.Addr {
	far := n >= confFar
	if f == ipfamily.IPv6 {
		b := [16]byte{0xfd, 0, 0x01, 0x98, 0, 0x18, 15: byte(n)}
		if far {
			b[5] = 0x51
		}
		return netip.AddrFrom16(b)
	}
	if far {
		return netip.AddrFrom4([4]byte{198, 51, 100, byte(n)})
	}
	return netip.AddrFrom4([4]byte{198, 18, 0, byte(n)})
}

// confGateway returns the next hop of foreign routes: .200 (::c8) of
// up0's subnet, no node's address.
func confGateway(f ipfamily.Family) netip.Addr {
	if f == ipfamily.IPv6 {
		a := confUnderlay(f, 1).As16()
		a[15] = 200
		return netip.AddrFrom16(a)
	}
	a := confUnderlay(f, 1).As4()
	a[3] = 200
	return netip.AddrFrom4(a)
}

// confBlock returns node n's block: 10.244.n.0/24 or fd00:10:244:n::/64.
func confBlock(f ipfamily.Family, n int) netip.Prefix {
	if f == ipfamily.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(n)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(n), 0}), 24)
}

// confTunnel returns node n's tunnel address: its block's .250 (::fa).
func confTunnel(f ipfamily.Family, n int) netip.Addr {
	b := confBlock(f, n).Addr()
	if f == ipfamily.IPv6 {
		a := b.As16()
		a[15] = 0xfa
		return netip.AddrFrom16(a)
	}
	a := b.As4()
	a[3] = 250
	return netip.AddrFrom4(a)
}

func confNode(n int) cluster.Node {
	name := fmt.Sprintf("node%d", n)
	return cluster.Node{Name: name,
		UnderlayV4: confUnderlay(ipfamily.IPv4, n), UnderlayV6: confUnderlay(ipfamily.IPv6, n),
		TunnelV4: confTunnel(ipfamily.IPv4, n), TunnelV6: confTunnel(ipfamily.IPv6, n),
		VXLANMACV4: cluster.MAC{0x02, 0xaa, 4, 0, 0, byte(n)}, VXLANMACV6: cluster.MAC{0x02, 0xaa, 6, 0, 0, byte(n)}}
}

// confDevice returns the device's name and overhead; empty for None.
func confDevice(v Variant) (string, mtu.Encap) {
	switch v.Encap.(type) {
	case overlay.VXLAN:
		if v.Family == ipfamily.IPv6 {
			return vxlan.DefaultDeviceV6, mtu.VXLAN
		}
		return vxlan.DefaultDeviceV4, mtu.VXLAN
	case overlay.IPIP:
		return ConfIPIPDevice, mtu.IPIP
	}
	return "", mtu.Encap{}
}

// Conformance returns the Subject of the driver conformance suite
// (drivertest.Run) for overlays of the variants: the Manager of each
// variant with its Driver and a main-table route Table, on this plan's
// nodes, declared through cluster messages and withdrawn through their
// removals, so that one run covers every encapsulation with the same
// checks.
func Conformance(variants ...Variant) drivertest.Subject[*Stack, Variant] {
	return drivertest.Subject[*Stack, Variant]{
		Variants: variants,
		Setup:    confSetup,
		New: func(k kernel.Kernel, clk clock.Clock, v Variant) (*Stack, error) {
			tbl, err := routetable.New(routetable.Options{Kernel: k, Family: v.Family, Table: kernel.TableMain, Clock: clk})
			if err != nil {
				return nil, err
			}
			m, err := overlay.New(overlay.Options{Family: v.Family, NodeName: confNode(1).Name, Kernel: k, Routes: tbl,
				Encap: v.Encap, CrossSubnet: v.CrossSubnet, Clock: clk})
			if err != nil {
				return nil, err
			}
			return &Stack{M: m, Table: tbl}, nil
		},
		Declare: func(s *Stack, v Variant) error {
			var errs []error
			for n := 1; n <= confLast; n++ {
				errs = append(errs, confReject(s, confNode(n)),
					confReject(s, cluster.Block{CIDR: confBlock(v.Family, n), Node: confNode(n).Name}))
			}
			return errors.Join(errs...)
		},
		Withdraw: func(s *Stack, v Variant) error {
			var errs []error
			for n := 1; n <= confLast; n++ {
				errs = append(errs, confReject(s, cluster.BlockRemove{CIDR: confBlock(v.Family, n)}),
					confReject(s, cluster.NodeRemove{Name: confNode(n).Name}))
			}
			return errors.Join(errs...)
		},
		Check: func(t testing.TB, k kernel.Kernel, v Variant) {
			drivertest.SameLines(t, "our device, entries and routes", confOurs(t, k, v, true), confWant(v))
		},
		Dump:    confDump,
		Foreign: confForeign,
		Delete: func(t testing.TB, k kernel.Kernel, v Variant) {
			ctx := context.Background()
			err := k.ApplyRoutes(ctx, []kernel.RouteOp{{Kind: kernel.OpDelete, Route: kernel.Route{Family: v.Family,
				Table: kernel.TableMain, Dst: confBlock(v.Family, confNear), Protocol: routetable.DefaultProtocol}}})[0]
			if err != nil {
				t.Fatalf("deleting a route: %v", err)
			}
			if dev, _ := confDevice(v); v.vxlan() {
				idx := confIndex(t, k, dev)
				mac := confNode(confFar).VXLANMACV4
				if v.Family == ipfamily.IPv6 {
					mac = confNode(confFar).VXLANMACV6
				}
				if err := k.ApplyFDB(ctx, []kernel.FDBOp{{Kind: kernel.OpDelete, Entry: kernel.FDBEntry{LinkIndex: idx, MAC: mac.HardwareAddr()}}})[0]; err != nil {
					t.Fatalf("deleting an FDB entry: %v", err)
				}
			}
		},
		BadInputs: []drivertest.BadInput[*Stack, Variant]{
			{Name: "block with host bits", Declare: func(s *Stack, v Variant) error {
				b := confBlock(v.Family, 9)
				return confReject(s, cluster.Block{CIDR: netip.PrefixFrom(b.Addr().Next(), b.Bits()), Node: confNode(9).Name})
			}},
			{Name: "block of no node", Declare: func(s *Stack, v Variant) error {
				return confReject(s, cluster.Block{CIDR: confBlock(v.Family, 9)})
			}},
			{Name: "node without a name", Declare: func(s *Stack, v Variant) error {
				n := confNode(9)
				n.Name = ""
				return confReject(s, n)
			}},
			{Name: "removal of no node", Declare: func(s *Stack, v Variant) error {
				return confReject(s, cluster.NodeRemove{})
			}},
		},
	}
}

// confReject sends msg and returns the error it was rejected with; nil
// when it was taken.
func confReject(s *Stack, msg any) error {
	before := s.M.Stats().Rejected
	s.M.OnUpdate(msg)
	if st := s.M.Stats(); st.Rejected > before {
		return st.LastRejected
	}
	return nil
}

// confSetup makes up0 (a veth pair, both up, MTU 1500) with node 1's
// underlay address; IPv6 without duplicate address detection or
// link-local addresses, which would differ between namespaces.
func confSetup(t testing.TB, k kernel.Kernel, v Variant) {
	ctx := context.Background()
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.accept_dad", "0"}, {"net.ipv6.conf.default.accept_dad", "0"},
		{"net.ipv6.conf.default.addr_gen_mode", "1"},
	} {
		if err := k.SetSysctl(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("sysctl %s: %v", kv[0], err)
		}
	}
	l, err := k.AddLink(ctx, kernel.Link{Name: "up0", Kind: kernel.KindVeth, MTU: confParentMTU, Veth: &kernel.Veth{PeerName: "up1"}})
	if err != nil {
		t.Fatalf("up0: %v", err)
	}
	bits := 24
	if v.Family == ipfamily.IPv6 {
		bits = 64
	}
	if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(confUnderlay(v.Family, 1), bits)}); err != nil {
		t.Fatalf("address of up0: %v", err)
	}
	for _, n := range []string{"up1", "up0"} {
		if err := k.SetLinkUp(ctx, confIndex(t, k, n), true); err != nil {
			t.Fatalf("%s up: %v", n, err)
		}
	}
	// The route table holds a route through an interface without carrier
	// until told it came up, which no monitor tells here: start once the
	// kernel has set up0's carrier, as an agent starts on a node whose
	// uplink is up.
	drivertest.WaitFor(t, "up0 running", func() bool {
		l, err := k.LinkByName(ctx, "up0")
		return err == nil && l.Running
	})
}

func confIndex(t testing.TB, k kernel.Kernel, name string) int {
	l, err := k.LinkByName(context.Background(), name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return l.Index
}

// confWant returns the lines of confOurs once every node and block of the
// plan is declared.
func confWant(v Variant) []string {
	f := v.Family
	dev, encap := confDevice(v)
	devMTU := confParentMTU - encap.Overhead(f == ipfamily.IPv6)
	var out []string
	switch v.Encap.(type) {
	case overlay.VXLAN:
		out = append(out, fmt.Sprintf("link %s vxlan vni %d port %d local %s parent up0 learning false mtu %d up true mac %s",
			dev, vxlan.DefaultVNI, vxlan.DefaultPort, confUnderlay(f, 1), devMTU, confMAC(f, 1)))
	case overlay.IPIP:
		out = append(out, fmt.Sprintf("link %s ipip local %s mtu %d up true", dev, confUnderlay(f, 1), devMTU))
	}
	if dev != "" {
		out = append(out, fmt.Sprintf("addr %s dev %s", netip.PrefixFrom(confTunnel(f, 1), f.Bits()), dev))
	}
	out = append(out, "route blackhole "+confBlock(f, 1).String())
	for n := 2; n <= confLast; n++ {
		switch {
		case n < confFar && (v.CrossSubnet || dev == ""):
			out = append(out, fmt.Sprintf("route %s via %s dev up0", confBlock(f, n), confUnderlay(f, n)))
		case v.vxlan():
			out = append(out, fmt.Sprintf("route %s via %s dev %s onlink mtu %d", confBlock(f, n), confTunnel(f, n), dev, devMTU))
		case dev != "":
			out = append(out, fmt.Sprintf("route %s via %s dev %s onlink mtu %d", confBlock(f, n), confUnderlay(f, n), dev, devMTU))
		}
		if v.vxlan() {
			out = append(out, fmt.Sprintf("neigh %s dev %s lladdr %s", confTunnel(f, n), dev, confMAC(f, n)),
				fmt.Sprintf("fdb %s dev %s dst %s permanent", confMAC(f, n), dev, confUnderlay(f, n)))
		}
	}
	sort.Strings(out)
	return out
}

func confMAC(f ipfamily.Family, n int) string {
	if f == ipfamily.IPv6 {
		return confNode(n).VXLANMACV6.String()
	}
	return confNode(n).VXLANMACV4.String()
}

// confOurs renders what the overlay of v owns in k: its device (with its
// MAC when withMAC) and its addresses of the family, the routes of our
// protocol in the main table, and the permanent neighbour and FDB entries
// on the device; sorted.
func confOurs(t testing.TB, k kernel.Kernel, v Variant, withMAC bool) []string {
	dev, _ := confDevice(v)
	var out []string
	for _, l := range confLinks(t, k, v, withMAC) {
		if l.name == dev {
			out = append(out, l.line)
		}
	}
	for _, l := range confAddrs(t, k, v) {
		if l.name == dev {
			out = append(out, l.line)
		}
	}
	ctx := context.Background()
	names := confNames(t, k)
	var routes []string
	err := k.DumpRoutes(ctx, v.Family, kernel.TableMain, func(r *kernel.Route) error {
		if r.Protocol == routetable.DefaultProtocol {
			routes = append(routes, "route "+RouteLine(r, names))
		}
		return nil
	}, func() { routes = routes[:0] })
	if err != nil {
		t.Fatalf("routes: %v", err)
	}
	out = append(out, routes...)
	for _, e := range confEntries(t, k, v) {
		if e.name == dev {
			out = append(out, e.line)
		}
	}
	sort.Strings(out)
	return out
}

// named is a rendered object and the link it is on.
type named struct{ name, line string }

func confNames(t testing.TB, k kernel.Kernel) map[int]string {
	links, err := k.Links(context.Background())
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Index] = l.Name
	}
	return names
}

// confLinks renders every link, sorted by name: its kind, its tunnel
// attributes, MTU and state, and its MAC when withMAC (the kernel's
// random MACs differ between namespaces).
func confLinks(t testing.TB, k kernel.Kernel, v Variant, withMAC bool) []named {
	links, err := k.Links(context.Background())
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	names := confNames(t, k)
	var out []named
	for _, l := range links {
		s := "link " + l.Name + " " + l.Kind
		switch {
		case l.VXLAN != nil:
			s += fmt.Sprintf(" vni %d port %d local %s parent %s learning %v", l.VXLAN.VNI, l.VXLAN.Port, l.VXLAN.Local, names[l.VXLAN.ParentIndex], l.VXLAN.Learning)
		case l.IPTunnel != nil && l.IPTunnel.Local.IsValid():
			s += fmt.Sprintf(" local %s", l.IPTunnel.Local)
		}
		s += fmt.Sprintf(" mtu %d up %v", l.MTU, l.AdminUp)
		if withMAC && l.Kind == kernel.KindVXLAN {
			s += " mac " + l.MAC.String()
		}
		out = append(out, named{l.Name, s})
	}
	slices.SortFunc(out, func(a, b named) int { return compareStrings(a.name, b.name) })
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// confAddrs renders the addresses of the family, link-local ones aside,
// sorted.
func confAddrs(t testing.TB, k kernel.Kernel, v Variant) []named {
	addrs, err := k.Addrs(context.Background(), v.Family)
	if err != nil {
		t.Fatalf("addresses: %v", err)
	}
	names := confNames(t, k)
	var out []named
	for _, a := range addrs {
		if !a.Prefix.Addr().IsLinkLocalUnicast() {
			out = append(out, named{names[a.LinkIndex], fmt.Sprintf("addr %s dev %s", a.Prefix, names[a.LinkIndex])})
		}
	}
	slices.SortFunc(out, func(a, b named) int { return compareStrings(a.line, b.line) })
	return out
}

// confEntries renders the permanent neighbours of the family and the FDB
// entries of every VXLAN device, sorted.
func confEntries(t testing.TB, k kernel.Kernel, v Variant) []named {
	ctx := context.Background()
	names := confNames(t, k)
	links, err := k.Links(ctx)
	if err != nil {
		t.Fatalf("links: %v", err)
	}
	vx := map[int]bool{}
	for _, l := range links {
		vx[l.Index] = l.Kind == kernel.KindVXLAN
	}
	neighs, err := k.Neighbors(ctx, v.Family, 0)
	if err != nil {
		t.Fatalf("neighbours: %v", err)
	}
	var out []named
	for _, n := range neighs {
		if n.State&kernel.NUDPermanent != 0 {
			out = append(out, named{names[n.LinkIndex], fmt.Sprintf("neigh %s dev %s lladdr %s", n.IP, names[n.LinkIndex], n.MAC)})
		}
	}
	fdb, err := k.FDB(ctx, 0)
	if err != nil {
		t.Fatalf("FDB: %v", err)
	}
	for _, e := range fdb {
		if vx[e.LinkIndex] {
			perm := ""
			if e.Permanent {
				perm = " permanent"
			}
			out = append(out, named{names[e.LinkIndex], fmt.Sprintf("fdb %s dev %s dst %s%s", e.MAC, names[e.LinkIndex], e.Dst, perm)})
		}
	}
	slices.SortFunc(out, func(a, b named) int { return compareStrings(a.line, b.line) })
	return out
}

// confDump renders the slice of the namespace an overlay works in: every
// link, the addresses of the family, the routes of the family in every
// table but local, and the permanent neighbours and VXLAN FDB entries.
func confDump(t testing.TB, k kernel.Kernel, v Variant) []string {
	var out []string
	for _, l := range confLinks(t, k, v, false) {
		out = append(out, l.line)
	}
	for _, a := range confAddrs(t, k, v) {
		out = append(out, a.line)
	}
	out = append(out, drivertest.Routes(t, k, v.Family)...)
	for _, e := range confEntries(t, k, v) {
		out = append(out, e.line)
	}
	return out
}

// confForeign adds routes that are not ours: before the first Apply one
// in the main table and one with a block's prefix in table 100; after it
// another in the main table; in place of the route Delete removed, the
// same prefix in table 200.
func confForeign(t testing.TB, k kernel.Kernel, v Variant, at drivertest.Stage) {
	f := v.Family
	add := func(table uint32, dst netip.Prefix) {
		r := kernel.Route{Family: f, Table: table, Dst: dst, Type: kernel.RTNUnicast, Protocol: kernel.ProtoBoot,
			Gateway: confGateway(f), OIF: confIndex(t, k, "up0")}
		if err := k.ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kernel.OpAdd, Route: r}})[0]; err != nil {
			t.Fatalf("foreign route %s table %d: %v", dst, table, err)
		}
	}
	switch at {
	case drivertest.BeforeApply:
		add(kernel.TableMain, confBlock(f, 101))
		add(100, confBlock(f, confFar))
	case drivertest.AfterApply:
		add(kernel.TableMain, confBlock(f, 102))
	case drivertest.InPlace:
		add(200, confBlock(f, confNear))
	}
}
