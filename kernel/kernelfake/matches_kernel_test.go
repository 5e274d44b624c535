//go:build linux

package kernelfake

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// side is one of the two namespaces TestKernelFakeMatchesKernel drives:
// the real one or the fake.
type side struct {
	name string
	k    kernel.Kernel
	// peer is another namespace of the same machine, peerFD its
	// descriptor for kernel.Veth.PeerNamespaceFD.
	peer   kernel.Kernel
	peerFD int
	// addFlow creates a conntrack entry (UDP, unreplied).
	addFlow func(t *testing.T, src, dst netip.Addr)
}

// idx returns the index of the link called name (0 if none).
func (s *side) idx(name string) int {
	l, err := s.k.LinkByName(bg, name)
	if err != nil {
		return 0
	}
	return l.Index
}

// errClass names what err is for the comparison: the kernel package's
// sentinels it wraps and its errno.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	var parts []string
	for _, s := range []struct {
		err  error
		name string
	}{{kernel.ErrInvalid, "Invalid"}, {kernel.ErrNotFound, "NotFound"}, {kernel.ErrExists, "Exists"}, {kernel.ErrNotSupported, "NotSupported"}} {
		if errors.Is(err, s.err) {
			parts = append(parts, s.name)
		}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		parts = append(parts, unix.ErrnoName(errno))
	}
	if len(parts) == 0 {
		return "other: " + err.Error()
	}
	return strings.Join(parts, "+")
}

// observe renders everything both sides report, with interface names for
// indexes, sorted where the order is not part of the contract.
func (s *side) observe(t *testing.T, fdbLinks []string, sysctls []string) []string {
	t.Helper()
	links, err := s.k.Links(bg)
	require.NoError(t, err, s.name)
	names := map[int]string{}
	var out []string
	for _, l := range links {
		names[l.Index] = l.Name
	}
	name := func(i int) string {
		if n, ok := names[i]; ok {
			return n
		}
		return fmt.Sprintf("#%d", i)
	}
	for _, l := range links {
		m := "chosen by the kernel"
		if l.MAC == nil || (len(l.MAC) == 6 && l.MAC[0] == 2 && l.MAC[1] == 0) {
			m = l.MAC.String() // given by the script
		}
		line := fmt.Sprintf("link %s %s encap %s mtu %d up=%v running=%v mac=%s", l.Name, l.Kind, l.Encap, l.MTU, l.AdminUp, l.Running, m)
		if v := l.VXLAN; v != nil {
			line += fmt.Sprintf(" vni %d port %d parent %s", v.VNI, v.Port, name(v.ParentIndex))
		}
		out = append(out, line)
	}
	for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
		addrs, err := s.k.Addrs(bg, fam)
		require.NoError(t, err, s.name)
		for _, a := range addrs {
			out = append(out, fmt.Sprintf("addr %s %v", name(a.LinkIndex), a.Prefix))
		}
		require.NoError(t, s.k.DumpRoutes(bg, fam, 0, func(r *kernel.Route) error {
			line := fmt.Sprintf("route %v table %d type %d %v tos %d proto %d scope %d metric %d mtu %d src %v",
				fam, r.Table, r.Type, r.Dst, r.TOS, r.Protocol, r.Scope, r.Priority, r.MTU, r.PrefSrc)
			hop := func(oif int, gw netip.Addr, flags uint32, weight uint8) string {
				return fmt.Sprintf(" [dev %s via %v flags %#x weight %d]", name(oif), gw, flags, weight)
			}
			line += hop(r.OIF, r.Gateway, r.Flags, 0)
			for _, h := range r.NextHops {
				line += hop(h.OIF, h.Gateway, h.Flags, h.Weight)
			}
			out = append(out, line)
			return nil
		}, func() { t.Fatalf("%s: dump interrupted", s.name) }))
		rules, err := s.k.Rules(bg, fam)
		require.NoError(t, err, s.name)
		for i, r := range rules {
			out = append(out, fmt.Sprintf("rule %d %+v", i, r))
		}
		neighs, err := s.k.Neighbors(bg, fam, 0)
		require.NoError(t, err, s.name)
		for _, n := range neighs {
			if n.IP.IsMulticast() && n.State == kernel.NUDNoARP {
				continue // made by the kernel as it sends IGMP and MLD reports
			}
			out = append(out, fmt.Sprintf("neigh %s %v %v state %#x proto %d", name(n.LinkIndex), n.IP, n.MAC, n.State, n.Protocol))
		}
	}
	for _, l := range fdbLinks {
		if i := s.idx(l); i != 0 {
			entries, err := s.k.FDB(bg, i)
			require.NoError(t, err, s.name)
			for _, e := range entries {
				out = append(out, fmt.Sprintf("fdb %s %v dst %v permanent %v", l, e.MAC, e.Dst, e.Permanent))
			}
		}
	}
	for _, key := range sysctls {
		v, err := s.k.Sysctl(bg, key)
		out = append(out, fmt.Sprintf("sysctl %s = %q %s", key, v, errClass(err)))
	}
	slices.Sort(out)
	return out
}

// mirror is what a consumer of an event stream knows: the state it built
// from the events alone.
type mirror struct {
	mu     sync.Mutex
	names  map[int]string       // every link name seen, by index
	links  map[int]string       // the links, rendered
	addrs  map[kernel.Addr]bool // the addresses
	routes map[string]string    // the routes, rendered, by key
	errs   []string             // Err events and unexpected Resyncs
	done   chan struct{}
}

// follow starts a mirror of k's events, ending with ctx.
func follow(ctx context.Context, t *testing.T, k kernel.Kernel) *mirror {
	m := &mirror{names: map[int]string{}, links: map[int]string{}, addrs: map[kernel.Addr]bool{},
		routes: map[string]string{}, done: make(chan struct{})}
	events, err := k.Subscribe(ctx, kernel.EventLinks|kernel.EventAddrs|kernel.EventRoutes)
	require.NoError(t, err)
	go func() {
		defer close(m.done)
		first := true
		for ev := range events {
			m.apply(&ev, first)
			first = false
		}
	}()
	return m
}

func (m *mirror) apply(ev *kernel.Event, first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case ev.Link != nil:
		l := ev.Link.Link
		m.names[l.Index] = l.Name
		if ev.Link.Deleted {
			delete(m.links, l.Index)
			return
		}
		m.links[l.Index] = fmt.Sprintf("link %s %s mtu %d up=%v running=%v", l.Name, l.Kind, l.MTU, l.AdminUp, l.Running)
	case ev.Addr != nil:
		if ev.Addr.Deleted {
			delete(m.addrs, ev.Addr.Addr)
		} else {
			m.addrs[ev.Addr.Addr] = true
		}
	case ev.Route != nil:
		r := &ev.Route.Route
		oif, gw := firstHop(r)
		key := fmt.Sprintf("%v %d %d %v %d %d dev %d via %v", r.Family, r.Table, r.Type, r.Dst, r.TOS, r.Priority, oif, gw)
		if ev.Route.Deleted {
			delete(m.routes, key)
		} else {
			m.routes[key] = fmt.Sprintf("%s proto %d scope %d src %v hops %d", key, r.Protocol, r.Scope, r.PrefSrc, len(r.NextHops))
		}
	case ev.Resync != nil && !first:
		m.errs = append(m.errs, fmt.Sprintf("resync %v", ev.Resync.Reason))
	case ev.Err != nil:
		m.errs = append(m.errs, ev.Err.Error())
	}
}

// lines renders the mirror, with link names for indexes.
func (m *mirror) lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.links {
		out = append(out, "mirror "+l)
	}
	for a := range m.addrs {
		out = append(out, fmt.Sprintf("mirror addr %s %v", m.names[a.LinkIndex], a.Prefix))
	}
	for _, r := range m.routes {
		out = append(out, "mirror route "+r)
	}
	out = append(out, m.errs...)
	slices.Sort(out)
	return out
}

// minus returns the lines of a that b lacks.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestKernelFakeMatchesKernel runs one script, through kernel.Kernel, on a
// real namespace and on a Namespace, and compares after every step the
// errors of its calls and everything the two report: links (kinds, MTUs,
// carrier), addresses (secondaries, link-local ones, IPv6 addresses
// flushed or kept on down), routes of every table (the kernel's own, the
// script's, multipath, onlink, linkdown and dead flags, IPv4 and IPv6
// differences on down and delete), rules, neighbours, a VXLAN device's FDB,
// sysctls and conntrack deletion, and the state a consumer of each side's
// event stream builds from the events alone (so the changes announced and
// not announced match too). The kernel settles asynchronously
// (carrier, link-local addresses), so its report is read again until it
// matches or a generous deadline passes.
func TestKernelFakeMatchesKernel(t *testing.T) {
	nst := kerneltest.NewNS(t)
	real, err := kernel.Open(nst.Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = real.Close() })
	h := nst.Handle()
	realPeer, err := kernel.Open(kerneltest.NewNS(t).Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = realPeer.Close() })
	port := uint16(40000)
	fake := New(Options{})
	fakePeer := fake.NewNamespace(Options{Name: "peer"})
	sides := []*side{
		{name: "kernel", k: real, peer: realPeer, peerFD: realPeer.FD(), addFlow: func(t *testing.T, src, dst netip.Addr) {
			port++
			fam := netlink.InetFamily(unix.AF_INET)
			flow := &netlink.ConntrackFlow{
				FamilyType: unix.AF_INET,
				Forward:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice(), SrcPort: port, DstPort: 53},
				Reverse:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: dst.AsSlice(), DstIP: src.AsSlice(), SrcPort: 53, DstPort: port},
				TimeOut:    300,
			}
			require.NoError(t, h.ConntrackCreate(netlink.ConntrackTable, fam, flow))
		}},
		{name: "fake", k: fake, peer: fakePeer, peerFD: fakePeer.FD(), addFlow: func(_ *testing.T, src, dst netip.Addr) {
			fake.AddFlow(Flow{Family: kernel.IPv4, Src: src, Dst: dst})
		}},
	}
	evctx, stopEvents := context.WithCancel(bg)
	mirrors := []*mirror{follow(evctx, t, real), follow(evctx, t, fake)}
	t.Cleanup(func() {
		stopEvents()
		for _, m := range mirrors {
			<-m.done
		}
	})
	fdbLinks := []string{"vx0"}
	sysctls := []string{"net.ipv4.ip_forward", "net.ipv4.conf.all.forwarding", "net.ipv4.conf.default.forwarding",
		"net.ipv4.conf.all.accept_redirects", "net.ipv4.conf.va.forwarding", "net.ipv4.conf.va.rp_filter",
		"net.ipv6.conf.all.forwarding", "net.ipv6.conf.va.forwarding", "net.ipv6.conf.br0.mtu", "net.ipv6.conf.vx1.mtu",
		"net.ipv6.conf.va.keep_addr_on_down", "net.ipv4.neigh.va.gc_stale_time", "net/ipv4/conf/va/rp_filter",
		"net.ipv4.conf.vb.rp_filter", "net.ipv4.conf.lo.disable_policy", "net.ipv6.conf.lo.mtu", "net.core.somaxconn"}
	step := func(what string, do func(s *side) []error) {
		t.Helper()
		var classes [2][]string
		for i, s := range sides {
			for _, err := range do(s) {
				classes[i] = append(classes[i], errClass(err))
			}
		}
		assert.Equal(t, classes[0], classes[1], "%s: errors, kernel (-) vs fake (+)", what)
		observe := func(i int) []string {
			s := sides[i]
			peer := side{name: s.name + " peer", k: s.peer}
			out := append(s.observe(t, fdbLinks, sysctls), peer.observe(t, nil, []string{"net.ipv4.conf.pb.forwarding"})...)
			return append(out, mirrors[i].lines()...)
		}
		var got, want []string
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, want = observe(0), observe(1)
			if slices.Equal(got, want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !slices.Equal(got, want) {
			t.Errorf("after %s:\nonly the kernel has:\n\t%s\nonly the fake has:\n\t%s\nthe fake:\n%s", what,
				strings.Join(minus(got, want), "\n\t"), strings.Join(minus(want, got), "\n\t"), fake.Dump())
		}
	}
	one := func(err error) []error { return []error{err} }
	link := func(s *side, l kernel.Link) error { _, err := s.k.AddLink(bg, l); return err }
	up := func(s *side, name string, up bool) error { return s.k.SetLinkUp(bg, s.idx(name), up) }
	addr := func(s *side, name, p string) error {
		return s.k.AddAddr(bg, kernel.Addr{LinkIndex: s.idx(name), Prefix: pfx(p)})
	}
	routes := func(s *side, ops ...kernel.RouteOp) []error { return s.k.ApplyRoutes(bg, ops) }
	add := func(r kernel.Route) kernel.RouteOp { return kernel.RouteOp{Kind: kernel.OpAdd, Route: r} }
	repl := func(r kernel.Route) kernel.RouteOp { return kernel.RouteOp{Kind: kernel.OpReplace, Route: r} }
	del := func(r kernel.Route) kernel.RouteOp { return kernel.RouteOp{Kind: kernel.OpDelete, Route: r} }
	v4 := func(dst string) kernel.Route {
		return kernel.Route{Family: kernel.IPv4, Dst: pfx(dst), Type: kernel.RTNUnicast, Protocol: 99}
	}
	v6 := func(dst string) kernel.Route {
		return kernel.Route{Family: kernel.IPv6, Dst: pfx(dst), Type: kernel.RTNUnicast, Protocol: 99}
	}
	with := func(r kernel.Route, f func(r *kernel.Route)) kernel.Route { f(&r); return r }

	step("no DAD", func(s *side) []error {
		return []error{s.k.SetSysctl(bg, "net.ipv6.conf.all.accept_dad", "0"), s.k.SetSysctl(bg, "net/ipv6/conf/default/accept_dad", "0")}
	})
	step("links", func(s *side) []error {
		return []error{
			link(s, kernel.Link{Name: "br0", Kind: kernel.KindBridge, MAC: mac("02:00:00:00:01:00")}),
			link(s, kernel.Link{Name: "br0", Kind: kernel.KindBridge}),
			link(s, kernel.Link{Name: "a/b", Kind: kernel.KindBridge}),
			link(s, kernel.Link{Name: "0123456789abcdef", Kind: kernel.KindBridge}),
			link(s, kernel.Link{Name: "ipip0", Kind: kernel.KindIPIP}),
			link(s, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard}),
			link(s, kernel.Link{Name: "va", Kind: kernel.KindVeth, MAC: mac("02:00:00:00:0a:00"), Veth: &kernel.Veth{PeerName: "vb"}}),
			s.k.SetLinkMAC(bg, s.idx("vb"), mac("02:00:00:00:0b:00")),
			s.k.SetLinkMAC(bg, s.idx("va"), mac("03:00:00:00:0a:00")),
			link(s, kernel.Link{Name: "vx0", Kind: kernel.KindVXLAN, MAC: mac("02:00:00:00:0c:00"), VXLAN: &kernel.VXLAN{VNI: 100, Port: 4789}}),
			s.k.SetLinkMTU(bg, s.idx("br0"), 9000),
			link(s, kernel.Link{Name: "vx1", Kind: kernel.KindVXLAN, MAC: mac("02:00:00:00:0d:00"), VXLAN: &kernel.VXLAN{VNI: 101, Port: 4789, ParentIndex: s.idx("br0")}}),
			link(s, kernel.Link{Name: "vx2", Kind: kernel.KindVXLAN, MTU: 8951, VXLAN: &kernel.VXLAN{VNI: 102, Port: 4789, ParentIndex: s.idx("br0")}}),
			s.k.SetLinkMTU(bg, s.idx("vx1"), 8951),
			s.k.SetLinkMTU(bg, s.idx("vx1"), 8900),
			s.k.SetLinkMTU(bg, s.idx("br0"), 65536),
			s.k.SetLinkMTU(bg, s.idx("br0"), 67),
			link(s, kernel.Link{Name: "brd", Kind: kernel.KindBridge, MAC: mac("02:00:00:00:0e:00")}),
			link(s, kernel.Link{Name: "br1", Kind: kernel.KindBridge}),
			link(s, kernel.Link{Name: "br2", Kind: kernel.KindBridge}),
			s.k.SetSysctl(bg, "net.ipv6.conf.br1.addr_gen_mode", "1"),
			s.k.SetSysctl(bg, "net.ipv6.conf.br2.addr_gen_mode", "1"),
			s.k.SetLinkMAC(bg, s.idx("br2"), mac("02:00:00:00:0f:00")),
			s.k.DeleteLink(bg, 999),
			s.k.SetLinkUp(bg, 999, true),
			s.k.DeleteLink(bg, 1),
		}
	})
	step("addresses on down links", func(s *side) []error {
		return []error{
			addr(s, "va", "10.1.0.1/24"), addr(s, "va", "10.1.0.2/24"), addr(s, "va", "fd00:1::1/64"),
			addr(s, "br0", "10.2.0.1/24"), addr(s, "br0", "fd00:2::1/64"), addr(s, "br0", "10.3.0.1/32"),
			addr(s, "br0", "10.4.0.1/31"), addr(s, "br0", "fd00:3::1/128"),
			addr(s, "va", "10.1.0.1/24"), addr(s, "va", "fd00:1::1/128"),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("va"), Prefix: pfx("10.9.0.1/24")}),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("va"), Prefix: pfx("10.1.0.1/25")}),
		}
	})
	step("up (va without carrier)", func(s *side) []error {
		return []error{up(s, "br0", true), up(s, "va", true), up(s, "vx0", true), up(s, "vx1", true), up(s, "br1", true), up(s, "br2", true),
			addr(s, "br1", "10.5.0.1/24"), addr(s, "br1", "fd00:5::1/64")}
	})
	step("vb up: va gets its carrier", func(s *side) []error { return one(up(s, "vb", true)) })
	step("routes", func(s *side) []error {
		va, br0 := s.idx("va"), s.idx("br0")
		return routes(s,
			add(with(v4("10.10.0.0/24"), func(r *kernel.Route) { r.OIF, r.Scope = va, kernel.ScopeLink })),
			add(with(v4("10.10.0.0/24"), func(r *kernel.Route) { r.OIF, r.Scope = br0, kernel.ScopeLink })),
			repl(with(v4("10.10.0.0/24"), func(r *kernel.Route) { r.OIF, r.Scope, r.MTU = va, kernel.ScopeLink, 65520 })),
			add(with(v4("10.11.0.0/24"), func(r *kernel.Route) { r.Gateway = ip("10.1.0.5") })),
			add(with(v4("10.12.0.0/24"), func(r *kernel.Route) { r.Gateway = ip("10.9.9.9") })),
			add(with(v4("10.12.0.0/24"), func(r *kernel.Route) { r.Gateway, r.OIF = ip("10.9.9.9"), br0 })),
			add(with(v4("10.12.0.0/24"), func(r *kernel.Route) { r.Gateway, r.OIF, r.Flags = ip("10.9.9.9"), va, kernel.FlagOnlink })),
			add(with(v4("10.13.0.0/24"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: va, Gateway: ip("10.1.0.5")}, {OIF: br0, Gateway: ip("10.2.0.5"), Weight: 4}}
			})),
			add(with(v4("10.14.0.0/24"), func(r *kernel.Route) { r.Type = kernel.RTNBlackhole })),
			add(with(v4("10.15.0.0/24"), func(r *kernel.Route) { r.OIF, r.Table, r.Priority = va, 100, 10 })),
			add(with(v4("10.16.0.0/24"), func(r *kernel.Route) { r.OIF = s.idx("brd") })),
			add(with(v4("10.16.0.0/24"), func(r *kernel.Route) { r.OIF = 999 })),
			add(with(v4("10.16.0.1/24"), func(r *kernel.Route) { r.OIF = va })),
			add(with(v4("10.16.0.0/24"), func(r *kernel.Route) { r.OIF, r.MTU = va, 70000 })),
			add(with(v4("10.17.0.0/24"), func(r *kernel.Route) { r.OIF, r.PrefSrc = va, ip("10.1.0.2") })),
			add(with(v4("10.18.0.0/24"), func(r *kernel.Route) { r.OIF, r.PrefSrc = va, ip("10.9.0.2") })),
			add(with(v4("10.19.0.1/32"), func(r *kernel.Route) { r.Type, r.OIF, r.Scope, r.Table = kernel.RTNLocal, va, kernel.ScopeHost, 255 })),
			del(v4("10.99.0.0/24")),
			add(with(v6("fd10::/64"), func(r *kernel.Route) { r.OIF = va })),
			add(with(v6("fd10::/64"), func(r *kernel.Route) { r.OIF = br0 })),
			add(with(v6("fd10::/64"), func(r *kernel.Route) { r.OIF, r.Priority = br0, 100 })),
			add(with(v6("fd11::/64"), func(r *kernel.Route) { r.Gateway = ip("fd00:1::5") })),
			add(with(v6("fd12::/64"), func(r *kernel.Route) { r.Gateway = ip("fd99::1") })),
			add(with(v6("fd12::/64"), func(r *kernel.Route) { r.Gateway, r.OIF, r.Flags = ip("fd99::1"), va, kernel.FlagOnlink })),
			add(with(v6("fd13::/64"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: va, Gateway: ip("fe80::1")}, {OIF: br0, Gateway: ip("fe80::2")}}
			})),
			add(with(v6("fd14::/64"), func(r *kernel.Route) { r.Type, r.Protocol = kernel.RTNBlackhole, 0 })),
			add(with(v6("fd15::/64"), func(r *kernel.Route) { r.OIF = s.idx("brd") })),
			add(with(v6("fd16::/64"), func(r *kernel.Route) { r.Gateway, r.OIF = ip("fe80::1"), va })),
			repl(with(v6("fd16::/64"), func(r *kernel.Route) { r.Gateway, r.OIF = ip("fe80::3"), br0 })),
			del(v6("fd99::/64")),
		)
	})
	step("vb down: va loses its carrier", func(s *side) []error {
		return append([]error{up(s, "vb", false)},
			routes(s, add(with(v4("10.20.0.0/24"), func(r *kernel.Route) { r.OIF, r.Scope = s.idx("va"), kernel.ScopeLink })))...)
	})
	step("vb up again", func(s *side) []error { return one(up(s, "vb", true)) })
	step("br0 down", func(s *side) []error { return one(up(s, "br0", false)) })
	step("br0 up", func(s *side) []error { return one(up(s, "br0", true)) })
	step("va keeps its IPv6 addresses and goes down", func(s *side) []error {
		return []error{s.k.SetSysctl(bg, "net.ipv6.conf.va.keep_addr_on_down", "1"), up(s, "va", false)}
	})
	step("va up", func(s *side) []error { return one(up(s, "va", true)) })
	step("route deletes", func(s *side) []error {
		return routes(s,
			del(with(v4("10.10.0.0/24"), func(r *kernel.Route) { r.Protocol = 0 })),
			del(with(v4("10.11.0.0/24"), func(r *kernel.Route) { r.Protocol, r.Priority = 0, 5 })),
			del(with(v4("10.12.0.0/24"), func(r *kernel.Route) { r.Protocol, r.Type = 0, 0 })),
			del(with(v4("10.15.0.0/24"), func(r *kernel.Route) { r.Table = 100 })),
			del(with(v6("fd10::/64"), func(r *kernel.Route) { r.OIF, r.Priority = s.idx("br0"), 0 })),
			del(with(v6("fd13::/64"), func(r *kernel.Route) { r.Gateway = ip("fe80::1") })),
		)
	})
	step("rules", func(s *side) []error {
		rule := func(fam kernel.Family, prio uint32, f func(r *kernel.Rule)) kernel.Rule {
			r := kernel.Rule{Family: fam, Priority: prio, Action: kernel.RuleLookup, Table: 100}
			f(&r)
			return r
		}
		nop := func(*kernel.Rule) {}
		return []error{
			s.k.AddRule(bg, rule(kernel.IPv4, 100, func(r *kernel.Rule) { r.Src = pfx("10.0.0.0/8") })),
			s.k.AddRule(bg, rule(kernel.IPv4, 100, func(r *kernel.Rule) { r.Src = pfx("10.0.0.0/8") })),
			s.k.AddRule(bg, rule(kernel.IPv4, 100, nop)),
			s.k.AddRule(bg, rule(kernel.IPv4, 100, func(r *kernel.Rule) { r.Mark = 0x10 })),
			s.k.AddRule(bg, rule(kernel.IPv4, 90, func(r *kernel.Rule) { r.Action, r.Table, r.Goto = kernel.RuleGoto, 0, 100 })),
			s.k.AddRule(bg, rule(kernel.IPv4, 0, func(r *kernel.Rule) { r.Table = 200 })),
			s.k.AddRule(bg, rule(kernel.IPv4, 110, func(r *kernel.Rule) { r.Action, r.Table = kernel.RuleBlackhole, 0 })),
			s.k.AddRule(bg, rule(kernel.IPv4, 120, func(r *kernel.Rule) { r.Table, r.SuppressPrefixLen = kernel.TableMain, kernel.Suppressor{Set: true} })),
			s.k.AddRule(bg, rule(kernel.IPv6, 100, func(r *kernel.Rule) { r.Dst, r.IIF = pfx("fd00::/8"), "va" })),
			s.k.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Priority: 100}),
			s.k.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Mark: 0x10}),
			s.k.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Priority: 100}),
			s.k.DeleteRule(bg, kernel.Rule{Family: kernel.IPv6, Priority: 4242}),
		}
	})
	step("neighbours", func(s *side) []error {
		va := s.idx("va")
		n := func(kind kernel.OpKind, a string, state uint16) kernel.NeighborOp {
			return kernel.NeighborOp{Kind: kind, Neighbor: kernel.Neighbor{LinkIndex: va, IP: ip(a), MAC: mac("02:00:00:00:99:01"), State: state}}
		}
		return s.k.ApplyNeighbors(bg, []kernel.NeighborOp{
			n(kernel.OpReplace, "10.1.0.9", 0), n(kernel.OpReplace, "fd00:1::9", 0), n(kernel.OpReplace, "10.1.0.10", kernel.NUDReachable),
			n(kernel.OpAdd, "10.1.0.9", 0), n(kernel.OpDelete, "10.1.0.99", 0),
			{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: 999, IP: ip("10.1.0.9"), MAC: mac("02:00:00:00:99:01")}},
		})
	})
	step("neighbour protocols: set, kept by a replace without one, changed by a replace with another", func(s *side) []error {
		va := s.idx("va")
		n := func(kind kernel.OpKind, a, m string, proto uint8) kernel.NeighborOp {
			return kernel.NeighborOp{Kind: kind, Neighbor: kernel.Neighbor{LinkIndex: va, IP: ip(a), MAC: mac(m), Protocol: proto}}
		}
		return s.k.ApplyNeighbors(bg, []kernel.NeighborOp{
			n(kernel.OpReplace, "10.1.0.11", "02:00:00:00:99:11", 78), n(kernel.OpReplace, "fd00:1::11", "02:00:00:00:99:11", 78),
			n(kernel.OpReplace, "10.1.0.9", "02:00:00:00:99:01", 78), // had none
			n(kernel.OpReplace, "10.1.0.11", "02:00:00:00:99:12", 0), // keeps 78
			n(kernel.OpReplace, "fd00:1::11", "02:00:00:00:99:11", 4),
			n(kernel.OpAdd, "fd00:1::9", "02:00:00:00:99:01", 9), // exists: unchanged
			n(kernel.OpReplace, "10.1.0.12", "02:00:00:00:99:13", 0),
			n(kernel.OpDelete, "10.1.0.12", "", 78),
		})
	})
	step("vb down: va's reachable neighbour goes", func(s *side) []error { return one(up(s, "vb", false)) })
	step("vb up, va down: its neighbours go", func(s *side) []error { return []error{up(s, "vb", true), up(s, "va", false), up(s, "va", true)} })
	step("va given a new MAC: its neighbours go, permanent ones too", func(s *side) []error {
		va := s.idx("va")
		errs := s.k.ApplyNeighbors(bg, []kernel.NeighborOp{
			{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: va, IP: ip("10.1.0.20"), MAC: mac("02:00:00:00:99:20")}},
			{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: va, IP: ip("fd00:1::20"), MAC: mac("02:00:00:00:99:20")}},
		})
		return append(errs, s.k.SetLinkMAC(bg, va, mac("02:00:00:00:0a:01")))
	})
	step("fdb", func(s *side) []error {
		vx := s.idx("vx0")
		e := func(kind kernel.OpKind, m, dst string, perm bool) kernel.FDBOp {
			var d netip.Addr
			if dst != "" {
				d = ip(dst)
			}
			return kernel.FDBOp{Kind: kind, Entry: kernel.FDBEntry{LinkIndex: vx, MAC: mac(m), Dst: d, Permanent: perm}}
		}
		zero, uni := "00:00:00:00:00:00", "02:00:00:00:77:01"
		return s.k.ApplyFDB(bg, []kernel.FDBOp{
			e(kernel.OpReplace, zero, "192.0.2.1", true), e(kernel.OpReplace, zero, "192.0.2.2", true), e(kernel.OpReplace, zero, "192.0.2.2", true),
			e(kernel.OpReplace, uni, "192.0.2.3", true), e(kernel.OpReplace, uni, "192.0.2.4", true),
			e(kernel.OpAdd, uni, "192.0.2.5", true), e(kernel.OpDelete, zero, "192.0.2.1", false), e(kernel.OpDelete, zero, "192.0.2.9", false),
			e(kernel.OpReplace, "02:00:00:00:77:02", "", true), e(kernel.OpReplace, "02:00:00:00:77:03", "192.0.2.6", false),
			e(kernel.OpDelete, "02:00:00:00:77:09", "", false), e(kernel.OpDelete, uni, "", false), e(kernel.OpReplace, uni, "192.0.2.7", false),
		})
	})
	step("vx0 down: its non-permanent FDB entries go", func(s *side) []error { return []error{up(s, "vx0", false), up(s, "vx0", true)} })
	step("sysctls", func(s *side) []error {
		return []error{
			s.k.SetSysctl(bg, "net.ipv4.ip_forward", "1"),
			s.k.SetSysctl(bg, "net.ipv4.conf.va.rp_filter", " 2\n"),
			s.k.SetSysctl(bg, "net.ipv4.conf.va.rp_filter", "loose"),
			s.k.SetSysctl(bg, "net.ipv4.nope", "1"),
			s.k.SetSysctl(bg, "kernel.hostname", "x"),
			s.k.SetSysctl(bg, "net..ipv4", "1"),
		}
	})
	step("conntrack", func(s *side) []error {
		s.addFlow(t, ip("10.1.0.1"), ip("10.1.0.50"))
		s.addFlow(t, ip("10.1.0.51"), ip("10.1.0.1"))
		s.addFlow(t, ip("10.1.0.52"), ip("10.1.0.53"))
		n, err := s.k.DeleteConntrack(bg, kernel.IPv4, []netip.Addr{ip("10.1.0.1")})
		assert.Equal(t, 2, n, s.name)
		return one(err)
	})
	step("more links", func(s *side) []error {
		return []error{
			link(s, kernel.Link{Name: "pa", Kind: kernel.KindVeth, MAC: mac("02:00:00:00:1a:00"), Veth: &kernel.Veth{PeerName: "pb", PeerNamespaceFD: s.peerFD}}),
			s.peer.SetLinkMAC(bg, (&side{k: s.peer}).idx("pb"), mac("02:00:00:00:1b:00")),
			up(s, "pa", true), s.peer.SetLinkUp(bg, (&side{k: s.peer}).idx("pb"), true),
			link(s, kernel.Link{Name: "tun0", Kind: kernel.KindTUN}),
			s.k.SetLinkMTU(bg, 1, 0), s.k.SetLinkMTU(bg, 1, 70000), s.k.SetLinkMTU(bg, s.idx("vx0"), 65535),
			s.k.SetLinkMAC(bg, 1, mac("02:00:00:00:01:01")),
		}
	})
	step("a VNI and port another vxlan device holds", func(s *side) []error {
		return []error{
			link(s, kernel.Link{Name: "vx3", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 100, Port: 4789, ParentIndex: s.idx("br1")}}),
			link(s, kernel.Link{Name: "vx4", Kind: kernel.KindVXLAN, MAC: mac("02:00:00:00:1c:00"), VXLAN: &kernel.VXLAN{VNI: 100, Port: 4790}}),
		}
	})
	step("secondaries", func(s *side) []error {
		return []error{
			addr(s, "br1", "10.5.0.2/24"), addr(s, "br1", "10.5.0.3/24"), addr(s, "br1", "fd00:5::2/64"),
			s.k.SetSysctl(bg, "net.ipv4.conf.br1.promote_secondaries", "1"),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("br1"), Prefix: pfx("10.5.0.1/24")}),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("br1"), Prefix: pfx("fd00:5::1/64")}),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("va"), Prefix: pfx("10.1.0.1/24")}),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("va"), Prefix: pfx("fd00:1::1/128")}),
		}
	})
	step("more routes", func(s *side) []error {
		va, br1 := s.idx("va"), s.idx("br1")
		return append(routes(s,
			add(with(v4("10.1.0.0/24"), func(r *kernel.Route) { r.OIF, r.Scope = va, kernel.ScopeLink })),
			add(with(v4("10.30.0.0/24"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: va, Gateway: ip("10.1.0.5")}, {OIF: br1, Gateway: ip("10.5.0.5")}}
			})),
			add(with(v6("fd30::/64"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: va, Gateway: ip("fe80::1")}, {OIF: br1, Gateway: ip("fe80::2")}}
			})),
			add(with(v6("fd31::/64"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: va, Gateway: ip("fe80::1")}, {OIF: br1, Gateway: ip("fe80::2")}}
			})),
			// From routetable's differential test: an IPv6 MTU above what
			// the kernel stores is capped, and an IPv6 multipath route
			// via global gateways and weights.
			add(with(v6("fd37::/64"), func(r *kernel.Route) { r.OIF, r.MTU = br1, 70000 })),
			add(with(v6("fd38::/64"), func(r *kernel.Route) {
				r.NextHops = []kernel.NextHop{{OIF: br1, Gateway: ip("fd00:5::5")}, {OIF: va, Gateway: ip("fe80::1"), Weight: 2}}
			})),
			del(with(v6("fd31::/64"), func(r *kernel.Route) { r.OIF = br1 })),
			add(with(v4("10.31.0.0/24"), func(r *kernel.Route) { r.Type, r.OIF = kernel.RTNLocal, va })),
			add(with(v4("10.31.0.0/24"), func(r *kernel.Route) { r.Scope, r.Gateway = kernel.ScopeHost, ip("10.5.0.5") })),
			add(with(v4("10.32.0.0/24"), func(r *kernel.Route) { r.Gateway, r.Table = ip("10.5.0.5"), 100 })),
			add(with(v6("fd32::/64"), func(r *kernel.Route) { r.Gateway = ip("fd00:5::2") })),
			add(with(v6("fd33::/64"), func(r *kernel.Route) { r.Gateway = ip("fe80::9") })),
			add(with(v6("fd34::/64"), func(r *kernel.Route) { r.Gateway, r.OIF = ip("fd00:5::2"), br1 })),
			add(with(v6("fd35::/64"), func(r *kernel.Route) { r.OIF, r.PrefSrc = br1, ip("fd00:5::2") })),
			add(with(v6("fd36::/64"), func(r *kernel.Route) { r.OIF, r.PrefSrc = br1, ip("fd00:9::2") })),
			add(with(v4("10.33.0.0/24"), func(r *kernel.Route) { r.Gateway = ip("10.4.0.0") })),
			add(with(v4("10.34.0.0/24"), func(r *kernel.Route) { r.Gateway, r.TOS = ip("10.5.0.5"), 0x10 })),
			add(with(v4("10.34.0.0/24"), func(r *kernel.Route) { r.Gateway = ip("10.5.0.6") })),
			del(with(v4("10.34.0.0/24"), func(r *kernel.Route) { r.Protocol = 0 })),
			del(with(v4("10.34.0.0/24"), func(r *kernel.Route) { r.Protocol = 0 })),
		), s.k.AddRule(bg, kernel.Rule{Family: kernel.IPv6, Action: kernel.RuleLookup, Table: 7, Invert: true}),
			s.k.DeleteRule(bg, kernel.Rule{Family: kernel.IPv4, Action: kernel.RuleBlackhole}),
			s.k.ApplyNeighbors(bg, []kernel.NeighborOp{{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: s.idx("brd"), IP: ip("10.8.0.1"), MAC: mac("02:00:00:00:99:02")}}})[0],
		)
	})
	step("delete va (and vb with it)", func(s *side) []error { return one(s.k.DeleteLink(bg, s.idx("va"))) })
	step("delete br0 (and vx1, its child)", func(s *side) []error { return one(s.k.DeleteLink(bg, s.idx("br0"))) })
	step("delete pb in the peer namespace (and pa with it)", func(s *side) []error {
		return one(s.peer.DeleteLink(bg, (&side{k: s.peer}).idx("pb")))
	})
	step("IPv6 forwarding", func(s *side) []error { return one(s.k.SetSysctl(bg, "net.ipv6.conf.all.forwarding", "1")) })
	step("anycast routes follow addresses and links", func(s *side) []error {
		return []error{addr(s, "br1", "fd00:6::1/64"), addr(s, "br1", "fd00:6::2/64"), addr(s, "br1", "fd00:7::1/127"),
			s.k.DeleteAddr(bg, kernel.Addr{LinkIndex: s.idx("br1"), Prefix: pfx("fd00:6::1/64")}),
			up(s, "vx0", false), up(s, "vx0", true), s.k.SetSysctl(bg, "net.ipv6.conf.br1.forwarding", "0")}
	})
	step("duplicate address detection (the kernel takes a second, the fake none)", func(s *side) []error {
		return []error{
			s.k.SetSysctl(bg, "net.ipv6.conf.br1.accept_dad", "1"), addr(s, "br1", "fd00:8::1/64"),
			s.k.SetSysctl(bg, "net.ipv6.conf.default.accept_dad", "1"),
			link(s, kernel.Link{Name: "br3", Kind: kernel.KindBridge, MAC: mac("02:00:00:00:03:00")}),
			s.k.SetSysctl(bg, "net.ipv6.conf.br3.addr_gen_mode", "1"),
			addr(s, "br3", "fd00:9::1/64"), up(s, "br3", true),
		}
	})
}

// ruleStep is one rule write of TestKernelFakeRulesMatchKernel and the
// outcome the kernel gives it.
type ruleStep struct {
	name string
	add  bool // AddRule, else DeleteRule
	rule kernel.Rule
	want string // errClass of the kernel's answer
}

// ruleSteps exercise how the kernel compares rules on add (EEXIST) and
// matches them on delete (the first rule, in list order, that matches every
// field the request sets), the behaviours internal/fib models for the fake
// and for the routerule driver. The expected outcomes were observed on
// kernel 6.18.
func ruleSteps() []ruleStep {
	v4, v6 := kernel.IPv4, kernel.IPv6
	mk := func(fam kernel.Family, prio, table uint32, mods ...func(*kernel.Rule)) kernel.Rule {
		r := kernel.Rule{Family: fam, Priority: prio, Table: table}
		if table != 0 {
			r.Action = kernel.RuleLookup
		}
		for _, m := range mods {
			m(&r)
		}
		return r
	}
	src := func(s string) func(*kernel.Rule) { return func(r *kernel.Rule) { r.Src = pfx(s) } }
	dst := func(s string) func(*kernel.Rule) { return func(r *kernel.Rule) { r.Dst = pfx(s) } }
	mark := func(m, mask uint32) func(*kernel.Rule) { return func(r *kernel.Rule) { r.Mark, r.Mask = m, mask } }
	action := func(a uint8) func(*kernel.Rule) { return func(r *kernel.Rule) { r.Action = a } }
	goTo := func(p uint32) func(*kernel.Rule) {
		return func(r *kernel.Rule) { r.Action, r.Goto = kernel.RuleGoto, p }
	}
	iif := func(n string) func(*kernel.Rule) { return func(r *kernel.Rule) { r.IIF = n } }
	proto := func(p uint8) func(*kernel.Rule) { return func(r *kernel.Rule) { r.Protocol = p } }
	invert := func(r *kernel.Rule) { r.Invert = true }
	ports := func(r *kernel.Rule) { r.IPProto, r.DstPorts = 6, kernel.PortRange{Start: 80, End: 80} }
	const (
		ok     = "ok"
		exists = "Exists+EEXIST"
		absent = "NotFound+ENOENT"
	)
	return []ruleStep{
		{"lookup", true, mk(v4, 100, 100), ok},
		{"exact duplicate", true, mk(v4, 100, 100), exists},
		{"narrower after catch-all", true, mk(v4, 100, 100, src("10.0.0.0/8")), ok},
		{"narrower first", true, mk(v4, 200, 100, src("10.0.0.0/8")), ok},
		{"catch-all after narrower is a duplicate", true, mk(v4, 200, 100), exists},
		{"destination does not block a source", true, mk(v4, 200, 100, dst("10.0.0.0/8")), ok},
		{"inverted mark", true, mk(v4, 100, 100, mark(1, 1), invert), ok},
		{"invert is not compared", true, mk(v4, 100, 100, mark(1, 1)), exists},
		{"goto", true, mk(v4, 100, 0, goTo(300)), ok},
		{"goto target is not compared", true, mk(v4, 100, 0, goTo(400)), exists},
		{"blackhole", true, mk(v4, 100, 0, action(kernel.RuleBlackhole)), ok},
		{"prohibit beside blackhole", true, mk(v4, 100, 0, action(kernel.RuleProhibit)), ok},
		{"unreachable", true, mk(v4, 100, 0, action(kernel.RuleUnreachable)), ok},
		{"nop", true, mk(v4, 100, 0, action(kernel.RuleNop)), ok},
		{"mark 0 with mask", true, mk(v4, 70, 100, mark(0, 4)), ok},
		{"mark with the same mask", true, mk(v4, 70, 100, mark(4, 4)), ok},
		{"default mask equals full mask", true, mk(v4, 70, 100, mark(4, 0)), ok},
		{"explicit full mask is a duplicate", true, mk(v4, 70, 100, mark(4, 0xffffffff)), exists},
		{"iif", true, mk(v4, 60, 100, iif("lo")), ok},
		{"no iif after iif", true, mk(v4, 60, 100), ok},
		{"protocol is compared", true, mk(v4, 60, 100, proto(99)), ok},
		{"ports and ip proto", true, mk(v4, 80, 100, ports), ok},
		{"default priority", true, mk(v4, 0, 555), ok},
		{"source with host bits kept", true, mk(v4, 90, 100, src("10.1.2.3/16")), ok},

		{"delete hits the first match: iif lo", false, mk(v4, 60, 100), ok},
		{"delete with protocol", false, mk(v4, 60, 100, proto(99)), ok},
		{"delete the blackhole only", false, mk(v4, 100, 0, action(kernel.RuleBlackhole)), ok},
		{"delete goto by another target", false, mk(v4, 100, 0, goTo(999)), ok},
		{"delete without invert hits the inverted rule", false, mk(v4, 100, 100, mark(1, 1)), ok},
		{"delete mark 0/4 wildcards the mark", false, mk(v4, 70, 100, mark(0, 4)), ok},
		{"delete catch-all template hits the narrower rule first", false, mk(v4, 200, 100), ok},
		{"delete missing", false, mk(v4, 777, 5), absent},
		{"delete wrong action", false, mk(v4, 100, 0, action(kernel.RuleBlackhole)), absent},
		{"delete any action hits the first", false, mk(v4, 100, 0), ok},
		{"delete by ports", false, mk(v4, 80, 100, ports), ok},
		{"delete by the host bits kept", false, mk(v4, 90, 100, src("10.1.2.3/16")), ok},

		{"v6 lookup", true, mk(v6, 100, 100, src("fd00::/64")), ok},
		{"v6 catch-all after narrower", true, mk(v6, 100, 100), exists},
		{"v6 destination", true, mk(v6, 100, 100, dst("fd00:1::/64")), ok},
		{"v6 blackhole", true, mk(v6, 101, 0, action(kernel.RuleBlackhole), mark(2, 0)), ok},
		{"v6 delete", false, mk(v6, 100, 100, dst("fd00:1::/64")), ok},
		{"v6 delete blackhole as prohibit", false, mk(v6, 101, 0, action(kernel.RuleProhibit)), absent},
		{"v6 delete blackhole by its mark", false, mk(v6, 0, 0, mark(2, 0)), ok},
	}
}

// TestKernelFakeRulesMatchKernel runs ruleSteps on a fresh real namespace
// and on a fresh Namespace and requires, after every step, the same outcome
// (the one the kernel is documented to give) and the same rules of both
// families, in the same order.
func TestKernelFakeRulesMatchKernel(t *testing.T) {
	real, err := kernel.Open(kerneltest.NewNS(t).Path())
	require.NoError(t, err)
	t.Cleanup(func() { _ = real.Close() })
	sides := []kernel.Kernel{real, New(Options{})}
	dump := func(k kernel.Kernel) []string {
		var out []string
		for _, fam := range []kernel.Family{kernel.IPv4, kernel.IPv6} {
			rules, err := k.Rules(bg, fam)
			require.NoError(t, err)
			for _, r := range rules {
				out = append(out, fmt.Sprintf("%+v", r))
			}
		}
		return out
	}
	for _, s := range ruleSteps() {
		var got [2]string
		for i, k := range sides {
			if s.add {
				got[i] = errClass(k.AddRule(bg, s.rule))
			} else {
				got[i] = errClass(k.DeleteRule(bg, s.rule))
			}
		}
		assert.Equal(t, s.want, got[0], "step %q: the kernel's answer differs from the documented one", s.name)
		assert.Equal(t, got[0], got[1], "step %q: kernel vs fake", s.name)
		assert.Equal(t, dump(sides[0]), dump(sides[1]), "step %q: rules, kernel (-) vs fake (+)", s.name)
	}
}
