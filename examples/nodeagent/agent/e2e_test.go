package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/vxlan"
	"github.com/nodeplane/nodeplane/wireguard"
)

// fakeNode is a kernelfake namespace set up as a node before the agent
// starts: an underlay interface with this node's addresses, and the pods'
// veths, whose other ends are in a namespace of their own.
type fakeNode struct {
	t    *testing.T
	k    *kernelfake.Namespace
	pods *kernelfake.Namespace
}

func newFakeNode(t *testing.T, self datastore.Node) *fakeNode {
	n := &fakeNode{t: t, k: kernelfake.New(kernelfake.Options{Name: self.Name})}
	n.pods = n.k.NewNamespace(kernelfake.Options{Name: "pods"})
	var addrs []netip.Prefix
	for _, a := range []netip.Addr{self.UnderlayIPv4, self.UnderlayIPv6} {
		if a.IsValid() {
			addrs = append(addrs, netip.PrefixFrom(a, map[bool]int{true: 24, false: 64}[a.Is4()]))
		}
	}
	n.veth("eth0", "eth0p", nil, addrs...)
	return n
}

// veth makes the veth name, with its peer in peerNS (nil: here), both up,
// and gives it addrs.
func (n *fakeNode) veth(name, peer string, peerNS *kernelfake.Namespace, addrs ...netip.Prefix) {
	t, k, ctx := n.t, n.k, context.Background()
	t.Helper()
	l := kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: peer}}
	other := k
	if peerNS != nil {
		l.Veth.PeerNamespaceFD, other = peerNS.FD(), peerNS
	}
	l, err := k.AddLink(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	p, err := other.LinkByName(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetLinkUp(ctx, p.Index, true); err != nil {
		t.Fatal(err)
	}
	if err := k.SetLinkUp(ctx, l.Index, true); err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: a}); err != nil {
			t.Fatal(err)
		}
	}
}

// pod makes the host-side veth of pod p.
func (n *fakeNode) pod(p datastore.Pod) {
	n.veth(p.HostInterface(), strings.ReplaceAll(p.Key(), "/", "-"), n.pods)
}

// vxlanDevice is the agent's VXLAN device of family f.
func vxlanDevice(f ipfamily.Family) string {
	if f == ipfamily.IPv6 {
		return vxlan.DefaultDeviceV6
	}
	return vxlan.DefaultDeviceV4
}

// want is the picture of the kernel objects an agent on node self must
// own for cluster c (VXLAN overlay, both families), as picture draws it.
func want(t *testing.T, c datastore.Cluster, self string) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	fams := []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	underlay := func(n datastore.Node, f ipfamily.Family) netip.Addr {
		if f == ipfamily.IPv6 {
			return n.UnderlayIPv6
		}
		return n.UnderlayIPv4
	}
	me, ok := c.Node(self)
	if !ok {
		t.Fatalf("no node %s in the cluster", self)
	}
	for _, f := range fams {
		add("set %shost-ips holds the host's addresses", map[ipfamily.Family]string{ipfamily.IPv4: SetPrefixV4, ipfamily.IPv6: SetPrefixV6}[f])
		add("sysctl %s=1", map[ipfamily.Family]string{ipfamily.IPv4: "net.ipv4.ip_forward", ipfamily.IPv6: "net.ipv6.conf.all.forwarding"}[f])
		var tunnel netip.Addr
		for _, b := range me.PodCIDRs {
			if ipfamily.Of(b.Addr()) == f {
				add("route blackhole %s", b)
				if !tunnel.IsValid() {
					tunnel = datastore.TunnelAddr(b)
				}
			}
		}
		if tunnel.IsValid() {
			add("link %s vxlan %s", vxlanDevice(f), netip.PrefixFrom(tunnel, tunnel.BitLen()))
		}
		for _, n := range c.Nodes {
			if n.Name == self || !underlay(n, f).IsValid() {
				continue
			}
			mac := datastore.DefaultVTEPMAC(n.Name, map[ipfamily.Family]int{ipfamily.IPv4: 4, ipfamily.IPv6: 6}[f])
			var gw netip.Addr
			for _, b := range n.PodCIDRs {
				if ipfamily.Of(b.Addr()) != f {
					continue
				}
				if !gw.IsValid() {
					gw = datastore.TunnelAddr(b)
				}
				add("route %s via %s dev %s", b, gw, vxlanDevice(f))
			}
			if gw.IsValid() {
				add("neigh %s dev %s lladdr %s", gw, vxlanDevice(f), mac)
				add("fdb %s dev %s dst %s", mac, vxlanDevice(f), underlay(n, f))
			}
		}
		for _, p := range c.Pods {
			if p.Node != self {
				continue
			}
			has := false
			for _, ip := range p.IPs {
				if ipfamily.Of(ip) != f {
					continue
				}
				has = true
				add("route %s dev %s", netip.PrefixFrom(ip, ip.BitLen()), p.HostInterface())
				if len(p.MAC) != 0 {
					add("neigh %s dev %s lladdr %s", ip, p.HostInterface(), p.MAC)
				}
			}
			if has {
				for _, s := range endpoints.DefaultSysctls(f) {
					add("sysctl %s=%s", podSysctl(f, p.HostInterface(), s), s.Value)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func podSysctl(f ipfamily.Family, iface string, s endpoints.Sysctl) string {
	dir := s.Dir
	if dir == "" {
		dir = "conf"
	}
	return fmt.Sprintf("net/%s/%s/%s/%s", map[ipfamily.Family]string{ipfamily.IPv4: "ipv4", ipfamily.IPv6: "ipv6"}[f], dir, iface, s.Name)
}

// picture draws what the agent owns in k for cluster c: its routes (its
// route protocol, main table), its devices with their addresses, the
// neighbours and FDB entries on its devices and the pods' interfaces, and
// the sysctls that want names (read back from k).
func picture(t *testing.T, k *kernelfake.Namespace, c datastore.Cluster, self string) []string {
	ctx := context.Background()
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	links, err := k.Links(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := map[int]string{}
	for _, l := range links {
		name[l.Index] = l.Name
	}
	var addrs []kernel.Addr
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		as, err := k.Addrs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, as...)
	}
	for _, l := range links {
		if l.Kind != kernel.KindVXLAN {
			continue
		}
		for _, a := range addrs {
			if a.LinkIndex == l.Index && !a.Prefix.Addr().IsLinkLocalUnicast() {
				add("link %s %s %s", l.Name, l.Kind, a.Prefix)
			}
		}
		fdb, err := k.FDB(ctx, l.Index)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range fdb {
			add("fdb %s dev %s dst %s", e.MAC, l.Name, e.Dst)
		}
	}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		// The host-ips set holds the addresses of the family that are on
		// the node's interfaces but not link-local nor on a pod's.
		var host []string
		for _, a := range addrs {
			if ipfamily.Of(a.Prefix.Addr()) == f && !a.Prefix.Addr().IsLinkLocalUnicast() && !strings.HasPrefix(name[a.LinkIndex], datastore.PodInterfacePrefix) {
				host = append(host, a.Prefix.Addr().String())
			}
		}
		slices.Sort(host)
		host = slices.Compact(host)
		set := map[ipfamily.Family]string{ipfamily.IPv4: SetPrefixV4, ipfamily.IPv6: SetPrefixV6}[f] + "host-ips"
		members, _ := k.IPSets().Members(set)
		slices.Sort(members)
		if slices.Equal(members, host) {
			add("set %s holds the host's addresses", set)
		} else {
			add("set %s holds %v, not the host's addresses %v", set, members, host)
		}
		for _, r := range k.Routes(f, kernel.TableMain) {
			switch {
			case r.Protocol != routetable.DefaultProtocol:
			case r.Type == kernel.RTNBlackhole:
				add("route blackhole %s", r.Dst)
			case len(r.NextHops) != 0:
				add("route %+v", r)
			case r.Gateway.IsValid():
				add("route %s via %s dev %s", r.Dst, r.Gateway, name[r.OIF])
			default:
				add("route %s dev %s", r.Dst, name[r.OIF])
			}
		}
		neigh, err := k.Neighbors(ctx, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range neigh {
			add("neigh %s dev %s lladdr %s", n.IP, name[n.LinkIndex], n.MAC)
		}
	}
	// The sysctls the agent keeps: the forwarding ones and those of the
	// local pods' interfaces.
	for _, key := range []string{"net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"} {
		v, err := k.Sysctl(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		add("sysctl %s=%s", key, v)
	}
	for _, p := range c.Pods {
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			if p.Node != self || !slices.ContainsFunc(p.IPs, func(a netip.Addr) bool { return ipfamily.Of(a) == f }) {
				continue
			}
			for _, s := range endpoints.DefaultSysctls(f) {
				key := podSysctl(f, p.HostInterface(), s)
				v, err := k.Sysctl(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				add("sysctl %s=%s", key, v)
			}
		}
	}
	slices.Sort(out)
	return out
}

// netfilterProblems compares the agent's netfilter rules and sets in k (the
// iptables-legacy backend) with cluster c, and says what differs.
func netfilterProblems(k *kernelfake.Namespace, c datastore.Cluster, self string) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	ipt := k.IPTables()
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		rules := func(table, chain string) string {
			return strings.Join(ipt.Rules(iptablesfake.BackendLegacy, f, table, chain), "\n")
		}
		bits := 32
		if f == ipfamily.IPv6 {
			bits = 128
		}
		// Floating IPs: one DNAT rule each, and nothing else.
		var fips int
		for _, p := range c.Pods {
			for _, fip := range p.FloatingIPs {
				if p.Node != self || ipfamily.Of(fip.Floating) != f {
					continue
				}
				fips++
				if s := fmt.Sprintf("-d %s/%d ", fip.Floating, bits); !strings.Contains(rules("nat", FloatingDNATChain), s) ||
					!strings.Contains(rules("nat", FloatingDNATChain), "--to-destination "+fip.Internal.String()) {
					errorf("%s: no DNAT of floating IP %s to %s in:\n%s", f, fip.Floating, fip.Internal, rules("nat", FloatingDNATChain))
				}
			}
		}
		if n := strings.Count(rules("nat", FloatingDNATChain), "-j DNAT"); n != fips {
			errorf("%s: %d DNAT rules, want %d:\n%s", f, n, fips, rules("nat", FloatingDNATChain))
		}
		// Service ranges: one DROP rule each.
		var svc int
		for _, cidr := range c.ServiceCIDRs {
			if ipfamily.Of(cidr.Addr()) != f {
				continue
			}
			svc++
			if !strings.Contains(rules("filter", ServiceLoopChain), "-d "+cidr.String()+" ") {
				errorf("%s: no rule for service range %s in:\n%s", f, cidr, rules("filter", ServiceLoopChain))
			}
		}
		if n := strings.Count(rules("filter", ServiceLoopChain), "-j DROP"); n != svc {
			errorf("%s: %d DROP rules, want %d:\n%s", f, n, svc, rules("filter", ServiceLoopChain))
		}
		// Masquerade: the rule, and the pools in its sets.
		if !strings.Contains(rules("nat", MasqueradeChain), "MASQUERADE") {
			errorf("%s: no masquerade rule", f)
		}
		prefix := map[ipfamily.Family]string{ipfamily.IPv4: SetPrefixV4, ipfamily.IPv6: SetPrefixV6}[f]
		var pools []string
		for _, p := range c.Pools {
			if ipfamily.Of(p.CIDR.Addr()) == f && p.Masquerade {
				pools = append(pools, p.CIDR.String())
			}
		}
		if got, _ := k.IPSets().Members(prefix + "masq-pools"); fmt.Sprint(got) != fmt.Sprint(pools) {
			errorf("%s: masquerade pools %v, want %v", f, got, pools)
		}
		// The host's addresses: this node's underlay address among them.
		me, _ := c.Node(self)
		u := me.UnderlayIPv4
		if f == ipfamily.IPv6 {
			u = me.UnderlayIPv6
		}
		if got, _ := k.IPSets().Members(prefix + "host-ips"); !slices.Contains(got, u.String()) {
			errorf("%s: host-ips %v lack %s", f, got, u)
		}
	}
	return problems
}

// netfilterWrites counts the runs of binaries that write netfilter state.
func netfilterWrites(k *kernelfake.Namespace) int {
	n := k.IPTables().Count(iptablesfake.OpRestore) + k.IPTables().Count(iptablesfake.OpCommand)
	for _, c := range k.IPSets().Calls() {
		if len(c.Args) > 0 && c.Args[0] != "save" && c.Args[0] != "list" {
			n++
		}
	}
	return n
}

// running is an agent running on a fake namespace.
type running struct {
	a      *Agent
	cancel context.CancelFunc
	errc   chan error
}

func startAgent(t *testing.T, cfg Config) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errc: make(chan error, 1)}
	built := make(chan *Agent, 1)
	go func() { r.errc <- run(ctx, cfg, func(a *Agent) { built <- a }) }()
	select {
	case r.a = <-built:
	case err := <-r.errc:
		cancel()
		t.Fatalf("the agent did not start: %v", err)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// await waits until the agent is ready with nothing failing and done
// holds, and returns its health then.
func (r *running) await(t *testing.T, done func() bool) dataplane.Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := r.a.plane.loop.Health()
		if h.Ready && h.FailingObjects == 0 && len(h.FailingDrivers) == 0 && done() {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not converge: %+v", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop stops the agent and waits for Run to return; once is enough.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.errc == nil {
		return
	}
	r.cancel()
	err := <-r.errc
	r.errc = nil
	if err != nil {
		t.Error(err)
	}
}

// TestAgentOnKernelFake runs the whole agent — its build, its loop, its
// interface monitor, a cluster file — on a fake namespace, IPv4 and IPv6,
// and checks what it leaves there against what the cluster file implies;
// then that a restarted agent writes nothing, that a changed file's
// removals and additions reach the kernel, and that Cleanup leaves nothing
// of the agent's.
func TestAgentOnKernelFake(t *testing.T) {
	podA := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10"), netip.MustParseAddr("fd00:244:1::10")},
		MAC: datastore.MAC{0x02, 0, 0, 0, 0, 0x10},
		FloatingIPs: []datastore.FloatingIP{
			{Floating: netip.MustParseAddr("203.0.113.10"), Internal: netip.MustParseAddr("10.244.1.10")},
			{Floating: netip.MustParseAddr("2001:db8:f::10"), Internal: netip.MustParseAddr("fd00:244:1::10")}}}
	podB := datastore.Pod{Namespace: "demo", Name: "b", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.11")}}
	remote := datastore.Pod{Namespace: "demo", Name: "c", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.10")}}
	c := datastore.Cluster{
		Nodes: []datastore.Node{
			{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), UnderlayIPv6: netip.MustParseAddr("2001:db8::1"),
				PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:244:1::/64")}},
			{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), UnderlayIPv6: netip.MustParseAddr("2001:db8::2"),
				PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:244:2::/64")}},
			{Name: "node3", UnderlayIPv4: netip.MustParseAddr("198.18.0.3"),
				PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.3.0/24")}},
		},
		Pods: []datastore.Pod{podA, remote},
		Pools: []datastore.Pool{{Name: "v4", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true},
			{Name: "v6", CIDR: netip.MustParsePrefix("fd00:244::/48"), Masquerade: true}},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/112")},
	}
	node := newFakeNode(t, c.Nodes[0])
	k := node.k
	node.pod(podA)
	node.pod(podB)
	rulesBefore := fmt.Sprint(k.Rules(context.Background(), ipfamily.IPv4))
	rulesBefore6 := fmt.Sprint(k.Rules(context.Background(), ipfamily.IPv6))

	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	// The file in, as the agent reads it.
	c, err := datastore.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: "node1", Kernel: k, Listen: "-", StateDir: dir, IPv6: true, Netfilter: NetfilterIPTablesLegacy,
		BPFPinDir: filepath.Join(dir, "bpf"), Datastore: &datastore.File{Path: file}}
	matches := func(t *testing.T, c datastore.Cluster) func() bool {
		return func() bool {
			return slices.Equal(picture(t, k, c, "node1"), want(t, c, "node1")) && len(netfilterProblems(k, c, "node1")) == 0
		}
	}
	check := func(t *testing.T, c datastore.Cluster) {
		t.Helper()
		if got, want := picture(t, k, c, "node1"), want(t, c, "node1"); !slices.Equal(got, want) {
			t.Errorf("the kernel holds\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
		for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			before := map[ipfamily.Family]string{ipfamily.IPv4: rulesBefore, ipfamily.IPv6: rulesBefore6}[f]
			if got := fmt.Sprint(k.Rules(context.Background(), f)); got != before {
				t.Errorf("%s rules changed: %s, were %s", f, got, before)
			}
		}
		for _, p := range netfilterProblems(k, c, "node1") {
			t.Error(p)
		}
	}

	t.Run("first run", func(t *testing.T) {
		r := startAgent(t, cfg)
		r.await(t, matches(t, c))
		r.stop(t)
		check(t, c)
	})
	if t.Failed() {
		return
	}
	t.Run("restart writes nothing", func(t *testing.T) {
		k.IPTables().ResetCalls()
		k.IPSets().ResetCalls()
		writes := k.Writes()
		r := startAgent(t, cfg)
		h := r.await(t, func() bool { return true })
		r.stop(t)
		if w := k.Writes() - writes; w != 0 {
			t.Errorf("the restarted agent made %d kernel writes (%+v)", w, h.Drivers)
		}
		if w := netfilterWrites(k); w != 0 {
			t.Errorf("the restarted agent wrote netfilter state %d times: %+v %+v", w, k.IPTables().Calls(), k.IPSets().Calls())
		}
		check(t, c)
	})
	t.Run("changes", func(t *testing.T) {
		r := startAgent(t, cfg)
		r.await(t, matches(t, c))
		// While it runs: node2 goes (its blocks and tunnel entries with it), pod a goes
		// (its routes, neighbours and floating IPs) and pod b comes, the
		// IPv6 service range goes.
		c2 := c
		c2.Nodes = slices.DeleteFunc(slices.Clone(c.Nodes), func(n datastore.Node) bool { return n.Name == "node2" })
		c2.Pods = []datastore.Pod{podB}
		c2.ServiceCIDRs = c.ServiceCIDRs[:1]
		if err := datastore.WriteFile(file, c2); err != nil {
			t.Fatal(err)
		}
		if c2, err = datastore.Load(file); err != nil {
			t.Fatal(err)
		}
		r.await(t, matches(t, c2))
		r.stop(t)
		check(t, c2)
	})
	t.Run("cleanup", func(t *testing.T) {
		if err := Cleanup(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		checkNothingOurs(t, k)
	})
}

// checkNothingOurs checks that k holds nothing of the agent's: no route
// with its protocol, no device of its, no neighbour or FDB entry it wrote,
// no ip set with its prefixes, no iptables chain with its prefix.
func checkNothingOurs(t *testing.T, k *kernelfake.Namespace) {
	t.Helper()
	ctx := context.Background()
	links, err := k.Links(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Kind == kernel.KindVXLAN {
			t.Errorf("device %s is left", l.Name)
		}
	}
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		for _, r := range k.Routes(f, kernel.TableMain) {
			if r.Protocol == routetable.DefaultProtocol {
				t.Errorf("route %+v is left", r)
			}
		}
		neigh, err := k.Neighbors(ctx, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range neigh {
			if n.Protocol == uint8(routetable.DefaultProtocol) {
				t.Errorf("neighbour %+v is left", n)
			}
		}
		for _, table := range []string{"nat", "filter"} {
			for _, b := range []iptablesfake.Backend{iptablesfake.BackendLegacy, iptablesfake.BackendNFT} {
				if save := k.IPTables().Save(b, f, table); strings.Contains(save, ChainPrefix) {
					t.Errorf("%s %s %s holds chains of ours:\n%s", b, f, table, save)
				}
			}
		}
	}
	for _, name := range k.IPSets().Names() {
		if strings.HasPrefix(name, SetPrefixV4) || strings.HasPrefix(name, SetPrefixV6) {
			t.Errorf("ip set %s is left", name)
		}
	}
}

// TestAgentNeedsDoForWhatRunsInside: on a kernel that cannot run work
// inside its namespace, the features that need it are refused at start,
// with nothing written.
func TestAgentNeedsDoForWhatRunsInside(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if err := datastore.WriteFile(file, datastore.Cluster{Nodes: []datastore.Node{{Name: "node1"}}}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want error
	}{
		"BPF proxy": {Config{Netfilter: NetfilterIPTablesLegacy, BPFProxy: true}, errNoDo},
		"WireGuard": {Config{Netfilter: NetfilterIPTablesLegacy, WireGuard: true}, errNoDo},
	} {
		cfg := tc.cfg
		k := kernelfake.New(kernelfake.Options{})
		cfg.NodeName, cfg.Kernel, cfg.Listen, cfg.StateDir, cfg.Datastore = "node1", k, "-", dir, &datastore.File{Path: file}
		cfg.BPFPinDir = filepath.Join(dir, "bpf")
		err := Run(context.Background(), cfg)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want one wrapping %v", name, err, tc.want)
		}
		if w := k.Writes() + netfilterWrites(k); w != 0 {
			t.Errorf("%s: %d writes", name, w)
		}
	}
}

// TestAgentWireGuardOnKernelFake: on a fake kernel that has WireGuard
// (the wireguard link kind and the kernel.WireGuard capability) but cannot
// run work inside its namespace, the agent uses WireGuard all the same,
// through the kernel's: the device is a wireguard link whose peer is the
// other node.
func TestAgentWireGuardOnKernelFake(t *testing.T) {
	k := kernelfake.New(kernelfake.Options{Name: "node1", Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	n := &fakeNode{t: t, k: k}
	n.veth("eth0", "eth0p", nil, netip.MustParsePrefix("198.18.0.1/24"))
	peer, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	c := datastore.Cluster{Nodes: []datastore.Node{
		{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
		{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")},
			WireGuardPublicKey: peer.Public().String()},
	}}
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	r := startAgent(t, Config{NodeName: "node1", Kernel: k, Listen: "-", StateDir: dir, Netfilter: NetfilterIPTablesLegacy,
		WireGuard: true, WireGuardInterface: DefaultWireGuardInterface, Datastore: &datastore.File{Path: file}})
	r.await(t, func() bool {
		d, err := k.Admin().WireGuardDevice(context.Background(), DefaultWireGuardInterface)
		return err == nil && len(d.Peers) == 1 && d.Peers[0].PublicKey == kernel.WireGuardKey(peer.Public())
	})
	if l, _ := k.Link(DefaultWireGuardInterface); l.Kind != kernel.KindWireGuard || !l.AdminUp {
		t.Errorf("the device is %+v, want an up wireguard link", l)
	}
}

// TestAgentIPv6OnlyOnKernelFake: an IPv6-only cluster, run with IPv6 and
// without IPv4: the IPv6 dataplane is programmed (forwarding, the routes to
// the other node's pods) and nothing of IPv4 is written, IPv4 forwarding
// included (it turned a node with IPv4 on its underlay into an IPv4
// router).
func TestAgentIPv6OnlyOnKernelFake(t *testing.T) {
	c := datastore.Cluster{
		Nodes: []datastore.Node{
			{Name: "node1", UnderlayIPv6: netip.MustParseAddr("2001:db8::1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:244:1::/64")}},
			{Name: "node2", UnderlayIPv6: netip.MustParseAddr("2001:db8::2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:244:2::/64")}},
		},
		Pods:         []datastore.Pod{{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("fd00:244:1::10")}}},
		Pools:        []datastore.Pool{{Name: "v6", CIDR: netip.MustParsePrefix("fd00:244::/48"), Masquerade: true}},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:96::/112")},
	}
	node := newFakeNode(t, c.Nodes[0])
	k := node.k
	node.pod(c.Pods[0])
	ctx := context.Background()
	forward4, err := k.Sysctl(ctx, "net.ipv4.ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: "node1", Kernel: k, Listen: "-", StateDir: dir, IPv6: true, NoIPv4: true,
		Netfilter: NetfilterIPTablesLegacy, BPFPinDir: filepath.Join(dir, "bpf"), Datastore: &datastore.File{Path: file}}
	r := startAgent(t, cfg)
	r.await(t, func() bool {
		routes := k.Routes(ipfamily.IPv6, kernel.TableMain)
		return slices.ContainsFunc(routes, func(rt kernel.Route) bool { return rt.Dst == netip.MustParsePrefix("fd00:244:2::/64") })
	})
	r.stop(t)
	if v, _ := k.Sysctl(ctx, "net.ipv6.conf.all.forwarding"); v != "1" {
		t.Errorf("IPv6 forwarding %q", v)
	}
	if v, _ := k.Sysctl(ctx, "net.ipv4.ip_forward"); v != forward4 {
		t.Errorf("IPv4 forwarding changed: %q, was %q", v, forward4)
	}
	for _, set := range k.IPSets().Names() {
		if strings.HasPrefix(set, "np4-") {
			t.Errorf("an IPv4 set: %s", set)
		}
	}
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		for _, chain := range k.IPTables().Chains(iptablesfake.BackendLegacy, ipfamily.IPv4, table) {
			if rules := k.IPTables().Rules(iptablesfake.BackendLegacy, ipfamily.IPv4, table, chain); len(rules) > 0 {
				t.Errorf("IPv4 %s %s: %v", table, chain, rules)
			}
		}
	}
	if routes := k.Routes(ipfamily.IPv4, kernel.TableMain); slices.ContainsFunc(routes, func(rt kernel.Route) bool { return rt.Protocol != kernel.ProtoKernel }) {
		t.Errorf("IPv4 routes of the agent's: %v", routes)
	}
}
