package vxlan_test

import (
	"context"
	"fmt"
	"github.com/nodeplane/nodeplane/cluster"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/overlay/overlaytest"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
)

var bg = context.Background()

// world is one node on a fake namespace: eth0 (a veth, up) with the
// node's underlay addresses, a main-table routetable.Table, an ipset
// driver, and a vxlan Manager of one family on them.
type world struct {
	t    *testing.T
	fam  vxlan.Family
	ns   *kernelfake.Namespace
	clk  *clock.Fake
	tbl  *routetable.Table
	sets *ipsets.IPSets
	m    *overlay.Manager
	opts overlay.Options
}

// underlay returns node n's underlay address (on 198.18.0.0/24 or
// fd00:198:18::/64).
func underlay(fam vxlan.Family, n int) netip.Addr {
	if fam == vxlan.IPv6 {
		return netip.AddrFrom16([16]byte{0xfd, 0, 0x01, 0x98, 0, 0x18, 15: byte(n)})
	}
	return netip.AddrFrom4([4]byte{198, 18, 0, byte(n)})
}

// block returns node n's block, 10.244.n.0/24 or fd00:10:244:n::/64.
func block(fam vxlan.Family, n int) netip.Prefix {
	if fam == vxlan.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(n)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(n), 0}), 24)
}

// tunnelIP returns node n's tunnel address: the block's .250 (::fa).
func tunnelIP(fam vxlan.Family, n int) netip.Addr {
	b := block(fam, n).Addr()
	if fam == vxlan.IPv6 {
		a := b.As16()
		a[15] = 0xfa
		return netip.AddrFrom16(a)
	}
	a := b.As4()
	a[3] = 250
	return netip.AddrFrom4(a)
}

func nodeMAC(fam vxlan.Family, n int) net.HardwareAddr {
	f := byte(4)
	if fam == vxlan.IPv6 {
		f = 6
	}
	return net.HardwareAddr{0x02, 0xaa, f, 0, byte(n >> 8), byte(n)}
}

func nodeName(n int) string { return fmt.Sprintf("node%d", n) }

// vtep returns node n's VTEP message, both families.
func vtep(n int) cluster.Node {
	return cluster.Node{
		Name:       nodeName(n),
		UnderlayV4: underlay(vxlan.IPv4, n), UnderlayV6: underlay(vxlan.IPv6, n),
		TunnelV4: tunnelIP(vxlan.IPv4, n), TunnelV6: tunnelIP(vxlan.IPv6, n),
		VXLANMACV4: cluster.MAC(nodeMAC(vxlan.IPv4, n)), VXLANMACV6: cluster.MAC(nodeMAC(vxlan.IPv6, n)),
	}
}

func newWorld(t *testing.T, fam vxlan.Family, tune func(*overlay.Options)) *world {
	t.Helper()
	ns := overlaytest.FakeHost(t, kernelfake.Options{Name: "node1"},
		netip.PrefixFrom(underlay(vxlan.IPv4, 1), 24), netip.PrefixFrom(underlay(vxlan.IPv6, 1), 64))
	w := &world{t: t, fam: fam, ns: ns, clk: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	var err error
	w.tbl, err = routetable.New(routetable.Options{Kernel: ns, Family: fam, Table: kernel.TableMain, Clock: w.clk})
	require.NoError(t, err)
	prefix := "np4-"
	if fam == vxlan.IPv6 {
		prefix = "np6-"
	}
	w.sets, err = ipsets.New(ipsets.Options{Family: fam, Prefix: prefix, Kernel: ns, Clock: w.clk})
	require.NoError(t, err)
	w.opts = overlay.Options{Family: fam, Encap: overlay.VXLAN{}, NodeName: nodeName(1), Kernel: ns, Routes: w.tbl, Sets: w.sets, Clock: w.clk}
	if tune != nil {
		tune(&w.opts)
	}
	w.m, err = overlay.New(w.opts)
	require.NoError(t, err)
	return w
}

// restart replaces the Manager, Table and sets with new ones on the same
// namespace, as a restarted agent.
func (w *world) restart() {
	w.t.Helper()
	var err error
	w.tbl, err = routetable.New(routetable.Options{Kernel: w.ns, Family: w.fam, Table: kernel.TableMain, Clock: w.clk})
	require.NoError(w.t, err)
	prefix := "np4-"
	if w.fam == vxlan.IPv6 {
		prefix = "np6-"
	}
	w.sets, err = ipsets.New(ipsets.Options{Family: w.fam, Prefix: prefix, Kernel: w.ns, Clock: w.clk})
	require.NoError(w.t, err)
	w.opts.Routes, w.opts.Sets = w.tbl, w.sets
	w.m, err = overlay.New(w.opts)
	require.NoError(w.t, err)
}

func (w *world) send(msgs ...any) {
	for _, m := range msgs {
		w.m.OnUpdate(m)
	}
}

// pass runs one apply pass as a dataplane.Loop does: the manager, then the
// drivers phase by phase. It returns the shortest RetryAfter and the
// joined errors.
func (w *world) pass() (time.Duration, error) {
	return overlaytest.Pass(bg, w.m, w.sets.Apply, overlaytest.DriverStep(w.m.Driver()), w.tbl.Apply, w.sets.ApplyDeletions)
}

// converge runs passes, moving the clock by each RetryAfter, until one
// succeeds with nothing to retry.
func (w *world) converge() {
	w.t.Helper()
	if ok, _ := overlaytest.Converge(w.clk, 50, w.pass); !ok {
		_, err := w.pass()
		w.t.Fatalf("no convergence after 50 passes: %v\n%s", err, w.ns.Dump())
	}
}

// routes renders the routes of the main table that are not the kernel's,
// sorted, with interface names.
func (w *world) routes() []string {
	names := map[int]string{}
	for _, l := range mustLinks(w.t, w.ns) {
		names[l.Index] = l.Name
	}
	var out []string
	for _, r := range w.ns.Routes(w.fam, kernel.TableMain) {
		if r.Protocol == kernel.ProtoKernel || r.Protocol == 0 || r.Type == kernel.RTNLocal || r.Dst.Addr().IsMulticast() || r.Dst.Addr().IsLinkLocalUnicast() {
			continue
		}
		out = append(out, overlaytest.RouteLine(&r, names))
	}
	sort.Strings(out)
	return out
}

func mustLinks(t *testing.T, ns *kernelfake.Namespace) []kernel.Link {
	links, err := ns.Admin().Links(bg)
	require.NoError(t, err)
	return links
}

// l2 renders the device's neighbour and FDB entries, sorted.
func (w *world) l2() []string {
	dev, ok := w.ns.Link(w.m.Device())
	if !ok {
		return nil
	}
	var out []string
	ns, err := w.ns.Admin().Neighbors(bg, w.fam, dev.Index)
	require.NoError(w.t, err)
	for _, n := range ns {
		perm := ""
		if n.State&kernel.NUDPermanent != 0 {
			perm = " permanent"
		}
		out = append(out, fmt.Sprintf("neigh %s lladdr %s%s", n.IP, n.MAC, perm))
	}
	fdb, err := w.ns.Admin().FDB(bg, dev.Index)
	require.NoError(w.t, err)
	for _, e := range fdb {
		perm := ""
		if e.Permanent {
			perm = " permanent"
		}
		out = append(out, fmt.Sprintf("fdb %s dst %s%s", e.MAC, e.Dst, perm))
	}
	sort.Strings(out)
	return out
}

// wantL2 is l2 for the remote nodes ns.
func wantL2(fam vxlan.Family, nodes ...int) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, fmt.Sprintf("neigh %s lladdr %s permanent", tunnelIP(fam, n), nodeMAC(fam, n)),
			fmt.Sprintf("fdb %s dst %s permanent", nodeMAC(fam, n), underlay(fam, n)))
	}
	sort.Strings(out)
	return out
}

// members returns the node-address set's members.
func (w *world) members() []string {
	prefix := "np4-"
	if w.fam == vxlan.IPv6 {
		prefix = "np6-"
	}
	out, _ := w.ns.IPSets().Members(prefix + overlay.DefaultSetName(overlay.VXLAN{}))
	out = slices.Clone(out)
	slices.Sort(out)
	return out
}

func hasLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// restartOn replaces the Manager, Table and sets with new ones on k (a
// wrapper of the world's namespace).
func (w *world) restartOn(k overlay.Kernel) {
	w.t.Helper()
	var err error
	w.tbl, err = routetable.New(routetable.Options{Kernel: k.(routetable.Kernel), Family: w.fam, Table: kernel.TableMain, Clock: w.clk})
	require.NoError(w.t, err)
	w.opts.Kernel, w.opts.Routes = k, w.tbl
	w.m, err = overlay.New(w.opts)
	require.NoError(w.t, err)
}

func devName(fam vxlan.Family) string {
	if fam == vxlan.IPv6 {
		return vxlan.DefaultDeviceV6
	}
	return vxlan.DefaultDeviceV4
}
