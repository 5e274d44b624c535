package agent

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/wireguard"
)

func testCluster(nodes int) datastore.Cluster {
	var c datastore.Cluster
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node%d", i)
		c.Nodes = append(c.Nodes, datastore.Node{Name: name, UnderlayIPv4: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}),
			PodCIDRs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)}})
		c.Pods = append(c.Pods, datastore.Pod{Namespace: "demo", Name: fmt.Sprintf("pod%d", i), Node: name,
			IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i), 10})}})
	}
	c.Pools = []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}}
	return c
}

func count[T any](msgs []any) int {
	n := 0
	for _, m := range msgs {
		if _, ok := m.(T); ok {
			n++
		}
	}
	return n
}

func TestTranslator(t *testing.T) {
	tr := newTranslator("node1")
	c3 := testCluster(3)
	key, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	key6, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	c3.Nodes[1].WireGuardPublicKey = key.Public().String()
	c3.Nodes[1].WireGuardPublicKeyV6 = key6.Public().String()
	msgs := tr.messages(c3)
	if count[cluster.Node](msgs) != 3 || count[cluster.Block](msgs) != 3 ||
		count[cluster.Endpoint](msgs) != 1 || count[cluster.Pool](msgs) != 1 {
		t.Fatalf("first snapshot: %#v", msgs)
	}
	for _, m := range msgs {
		if v, ok := m.(cluster.Node); ok {
			if err := v.Validate(); err != nil {
				t.Errorf("%v", err)
			}
			if v.Name == "node2" && (v.TunnelV4 != netip.MustParseAddr("10.244.2.0") || v.VXLANMACV4.String() != datastore.DefaultVTEPMAC("node2", 4).String() ||
				v.WireGuardKeyV4 != cluster.WireGuardKey(key.Public()) || v.WireGuardKeyV6 != cluster.WireGuardKey(key6.Public())) {
				t.Errorf("node2 = %+v", v)
			}
			if v.Name != "node2" && (!v.WireGuardKeyV4.IsZero() || !v.WireGuardKeyV6.IsZero()) {
				t.Errorf("%s published no keys: %+v", v.Name, v)
			}
		}
		if e, ok := m.(cluster.Endpoint); ok && (e.ID != "demo/pod1" || e.Iface != datastore.PodInterface("demo", "pod1") ||
			fmt.Sprint(e.Addrs) != "[10.244.1.10/32]" || e.Validate() != nil) {
			t.Errorf("endpoint = %+v (%v)", e, e.Validate())
		}
	}
	// The same cluster again: nothing.
	if msgs := tr.messages(c3); len(msgs) != 0 {
		t.Errorf("unchanged cluster gave %#v", msgs)
	}
	// node3 gone: its block and its node go, removals only.
	c := testCluster(2)
	c.Nodes[1].WireGuardPublicKey = c3.Nodes[1].WireGuardPublicKey
	c.Nodes[1].WireGuardPublicKeyV6 = c3.Nodes[1].WireGuardPublicKeyV6
	msgs = tr.messages(c)
	if count[cluster.BlockRemove](msgs) != 1 || count[cluster.NodeRemove](msgs) != 1 || len(msgs) != 2 {
		t.Errorf("node removal gave %#v", msgs)
	}
	// A new IPv6 key changes node2's message alone, the IPv4 key kept.
	key6, err = wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes[1].WireGuardPublicKeyV6 = key6.Public().String()
	if msgs := tr.messages(c); len(msgs) != 1 || count[cluster.Node](msgs) != 1 ||
		msgs[0].(cluster.Node).WireGuardKeyV6 != cluster.WireGuardKey(key6.Public()) || msgs[0].(cluster.Node).WireGuardKeyV4 != cluster.WireGuardKey(key.Public()) {
		t.Errorf("IPv6 key change gave %#v", msgs)
	}
	// A published MAC changes node2's message alone.
	c.Nodes[1].VTEPMAC = datastore.MAC{0x02, 0, 0, 0, 0, 9}
	if msgs := tr.messages(c); len(msgs) != 1 || count[cluster.Node](msgs) != 1 {
		t.Errorf("MAC change gave %#v", msgs)
	}
	// The local pod moves away: its routes go.
	c.Pods[0].Node = "node2"
	if msgs := tr.messages(c); count[cluster.EndpointRemove](msgs) != 1 {
		t.Errorf("pod moved: %#v", msgs)
	}
	// Service ranges: sent sorted once, again only when they change.
	c.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00:96::/112"), netip.MustParsePrefix("10.96.0.0/12")}
	msgs = tr.messages(c)
	if len(msgs) != 1 || fmt.Sprint(msgs[0]) != "{[10.96.0.0/12 fd00:96::/112]}" {
		t.Errorf("service CIDRs gave %#v", msgs)
	}
	if msgs := tr.messages(c); len(msgs) != 0 {
		t.Errorf("unchanged service CIDRs gave %#v", msgs)
	}
	c.ServiceCIDRs = nil
	if msgs := tr.messages(c); len(msgs) != 1 || fmt.Sprint(msgs[0]) != "{[]}" {
		t.Errorf("service CIDRs removed gave %#v", msgs)
	}
}

func TestWriteTable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := Status{Node: "node1", Overlay: "vxlan", StartedAt: now.Add(-time.Minute), Ready: true, LastApply: now.Add(-2 * time.Second),
		Applies: 7, PodMTU: 1450, HostMTU: 1500, HostMTUInterface: "eth0",
		Nodes: []NodeStatus{{Name: "node1", Self: true, Underlay: "198.18.0.1", PodCIDRs: []string{"10.244.1.0/24"}, TunnelIP: "10.244.1.0", VTEPMAC: "02:4e:aa:bb:cc:dd"},
			// An IPv6-only node: its IPv6 tunnel and key.
			{Name: "node2", Underlay: "2001:db8::2", PodCIDRs: []string{"fd00:244:2::/64"}, TunnelIPv6: "fd00:244:2::", VTEPMACv6: "02:4e:aa:bb:cc:02",
				WireGuardV6: "v6key"}},
		LocalPods: []PodStatus{{Name: "demo/pod1a", Interface: "npv0123", IPs: []string{"10.244.1.10"}, State: "up"}},
		Routes:    []RouteStatus{{Destination: "10.244.2.0/24", Via: "10.244.2.0", Device: "np-vxlan", Table: kernel.TableMain, Kind: "vxlan"}},
		Services:  1, ServicesNote: "not load-balanced"}
	var b bytes.Buffer
	if err := WriteTable(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"node node1", "ready yes", "last apply 2s ago", "node1 (self)", "demo/pod1a", "10.244.2.0/24", "np-vxlan", "main", "services 1",
		"fd00:244:2::  ", "02:4e:aa:bb:cc:02", "v6key"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.DriverApplied(dataplane.DriverApply{Driver: "routetable-ipv4-254", Phase: dataplane.PhaseRoutes, Outcome: dataplane.OutcomePartial, FailedObjects: 2, Duration: time.Millisecond})
	m.ManagerCompleted(dataplane.ManagerWork{Manager: "pod-routes", Outcome: dataplane.OutcomeSucceeded})
	m.PassCompleted(dataplane.PassStats{Active: true, Outcome: dataplane.OutcomeSucceeded})
	m.QueueDepth(3)
	m.Resynced(dataplane.ResyncEvent{Name: "ipsets", Reason: dataplane.ResyncPeriodic})
	m.health(dataplane.Health{Ready: true, FailingObjects: 2})
	m.ObservePeer(wireguard.PeerStats{Node: "node2", ReceiveBytes: 10, TransmitBytes: 20, LastHandshake: time.Unix(100, 0)})
	m.proxy(proxy.Status{Services: 2, Frontends: 3, Backends: 6, Interfaces: []string{"eth0"}, Errors: []string{"x"},
		Conntrack: proxy.ConntrackStatus{Entries: 10, Capacity: 100, Full: 1, Closed: 7, Expired: 2, Stale: 3, Orphans: 4, LastPass: 500 * time.Millisecond}})
	if err := m.serviceCounters(func() map[string]proxy.ServiceCounters {
		return map[string]proxy.ServiceCounters{"ns/web:http": {Connections: 3, Packets: 30, Bytes: 3000, Rejects: 1}}
	}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "nodeplane_agent_bpf_proxy_service_") {
			for _, mt := range f.GetMetric() {
				counted[strings.TrimPrefix(f.GetName(), "nodeplane_agent_bpf_proxy_service_")+" "+mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			}
		}
	}
	if want := map[string]float64{"connections_total ns/web:http": 3, "packets_total ns/web:http": 30, "bytes_total ns/web:http": 3000,
		"rejects_total ns/web:http": 1}; fmt.Sprint(counted) != fmt.Sprint(want) {
		t.Errorf("per-service counters %v, want %v", counted, want)
	}
	got := map[string]bool{}
	for _, f := range families {
		got[f.GetName()] = true
		if f.GetName() != "nodeplane_agent_bpf_proxy" {
			continue
		}
		values := map[string]float64{}
		for _, mt := range f.GetMetric() {
			values[mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
		}
		if want := map[string]float64{"service_ports": 2, "frontends": 3, "backends": 6, "interfaces": 1, "errors": 1,
			"conntrack_entries": 10, "conntrack_capacity": 100, "conntrack_full_drops": 1, "conntrack_closed": 7, "conntrack_expired": 2,
			"conntrack_stale": 3, "conntrack_orphans": 4, "conntrack_scan_seconds": 0.5}; fmt.Sprint(values) != fmt.Sprint(want) {
			t.Errorf("bpf_proxy = %v, want %v", values, want)
		}
	}
	if !got["nodeplane_agent_bpf_proxy"] {
		t.Error("metric nodeplane_agent_bpf_proxy missing")
	}
	for _, want := range []string{"nodeplane_agent_driver_apply_seconds", "nodeplane_agent_driver_failed_objects_total",
		"nodeplane_agent_queue_depth", "nodeplane_agent_resyncs_total", "nodeplane_agent_ready", "nodeplane_agent_wireguard_peer_transmit_bytes"} {
		if !got[want] {
			t.Errorf("metric %s missing (have %v)", want, got)
		}
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
}

func TestConfigDefaults(t *testing.T) {
	for _, c := range []Config{{}, {NodeName: "a"}, {NodeName: "a", StateDir: "/x", Overlay: "gre"}, {NodeName: "a", StateDir: "/x", Overlay: OverlayIPIP, IPv6: true},
		// Policy lives in netfilter, which the local redirect bypasses: refused (fail closed).
		{NodeName: "a", StateDir: "/x", BPFLocalRedirect: true, NetworkPolicy: true},
		// Connect-time options without the cgroup they apply to.
		{NodeName: "a", StateDir: "/x", BPFCgroupPods: true}, {NodeName: "a", StateDir: "/x", BPFCgroupTCPOnly: true},
		// Neither family.
		{NodeName: "a", StateDir: "/x", NoIPv4: true}} {
		if err := c.defaults(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if c := (Config{NodeName: "a", StateDir: "/x", BPFLocalRedirect: true}); c.defaults() != nil {
		t.Error("local redirect without NetworkPolicy refused")
	}
	if c := (Config{NodeName: "a", StateDir: "/x", BPFCgroup: "/sys/fs/cgroup", BPFCgroupPods: true, NetworkPolicy: true}); c.defaults() != nil {
		t.Error("pods' connect-time translation refused")
	}
	c := Config{NodeName: "a", StateDir: "/x", WireGuardInterface: "wg-a-very-long"}
	if err := c.defaults(); err != nil || c.Overlay != OverlayVXLAN || c.Listen != DefaultListen {
		t.Errorf("defaults: %+v %v", c, err)
	}
	if n := c.wgInterface(ipfamily.IPv6); len(n) > 15 {
		t.Errorf("IPv6 WireGuard interface %q too long", n)
	}
}

func TestConfigNetfilter(t *testing.T) {
	base := Config{NodeName: "a", StateDir: "/x"}
	for _, tc := range []struct {
		nf   Netfilter
		ipt  iptables.Backend
		want Netfilter
	}{
		{"", "", NetfilterAuto},
		{NetfilterAuto, "", NetfilterAuto},
		{NetfilterNFTables, "", NetfilterNFTables},
		{NetfilterIPTablesLegacy, "", NetfilterIPTablesLegacy},
		{"", iptables.BackendNFT, NetfilterIPTablesNFT},
		{NetfilterAuto, iptables.BackendLegacy, NetfilterIPTablesLegacy},
		{NetfilterIPTablesNFT, iptables.BackendNFT, NetfilterIPTablesNFT},
	} {
		c := base
		c.Netfilter, c.IPTablesBackend = tc.nf, tc.ipt
		if err := c.defaults(); err != nil || c.Netfilter != tc.want {
			t.Errorf("Netfilter %q, IPTablesBackend %q: got %q, %v; want %q", tc.nf, tc.ipt, c.Netfilter, err, tc.want)
		}
		if b, ok := c.Netfilter.iptablesBackend(); ok != (tc.want == NetfilterIPTablesLegacy || tc.want == NetfilterIPTablesNFT) ||
			ok && netfilterOf(b) != tc.want {
			t.Errorf("%q: iptables backend %q, %v", tc.want, b, ok)
		}
	}
	for _, tc := range []struct {
		nf  Netfilter
		ipt iptables.Backend
	}{{"pf", ""}, {"iptables", ""}, {NetfilterNFTables, iptables.BackendNFT}, {NetfilterIPTablesLegacy, iptables.BackendNFT}, {"", "ebtables"}} {
		c := base
		c.Netfilter, c.IPTablesBackend = tc.nf, tc.ipt
		if err := c.defaults(); err == nil {
			t.Errorf("Netfilter %q, IPTablesBackend %q accepted", tc.nf, tc.ipt)
		}
	}
}

func TestWriteTableShowsTheNetfilterBackend(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := WriteTable(&b, Status{Node: "node1", Overlay: "vxlan", Masquerade: string(NetfilterNFTables), StartedAt: now}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "masquerade nftables") {
		t.Errorf("table lacks the backend:\n%s", b.String())
	}
}

// The pod MTU fits every tunnel the agent runs: with IPv6, the IPv6
// tunnels over the IPv6 underlay (VXLAN 70 bytes, WireGuard 80), whose
// devices are that much below the host MTU.
func TestPodMTUFitsTheIPv6Tunnels(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want int
	}{
		{Config{Overlay: OverlayVXLAN}, 1450},
		{Config{Overlay: OverlayVXLAN, IPv6: true}, 1430},
		{Config{Overlay: OverlayDirect, WireGuard: true}, 1440},
		{Config{Overlay: OverlayDirect, WireGuard: true, IPv6: true}, 1420},
		{Config{Overlay: OverlayVXLAN, WireGuard: true, IPv6: true}, 1420},
		{Config{Overlay: OverlayDirect, IPv6: true}, 1500},
	} {
		o := tc.cfg.podMTU()
		o.HostMTU = 1500
		got, err := mtu.PodMTU(o)
		if err != nil || got != tc.want {
			t.Errorf("%+v: pod MTU %d, %v; want %d", tc.cfg, got, err, tc.want)
		}
	}
}

// A pod address no pod can own (link-local, loopback, multicast), say a
// hand-written cluster file's, is left out of the pod's endpoint: the pod
// keeps its others, and no host route is written for it.
func TestEndpointOfLeavesOutNonUnicast(t *testing.T) {
	p := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{
		netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("fe80::dead"), netip.MustParseAddr("fd00:244:1::5"),
		netip.MustParseAddr("127.0.0.5"), netip.MustParseAddr("ff02::1")}}
	e := endpointOf(p)
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32"), netip.MustParsePrefix("fd00:244:1::5/128")}
	if !slices.Equal(e.Addrs, want) {
		t.Errorf("addresses %v, want %v", e.Addrs, want)
	}
	if err := e.Validate(); err != nil {
		t.Error(err)
	}
}

// A node whose IPv6 underlay cannot be one (link-local, as a datastore may
// hand it over) keeps its IPv4 overlay: the bad address is left out with
// what depends on it, and the node is valid (the managers refused it
// whole, IPv4 included).
func TestNodeOfLeavesOutABadFamily(t *testing.T) {
	n := datastore.Node{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), UnderlayIPv6: netip.MustParseAddr("fe80::2"),
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24"), netip.MustParsePrefix("fd00:244:2::/64")}}
	v := nodeOf(n)
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	if v.UnderlayV4 != n.UnderlayIPv4 || !v.TunnelV4.IsValid() || v.VXLANMACV4 == (cluster.MAC{}) {
		t.Errorf("IPv4 lost: %+v", v)
	}
	if v.UnderlayV6.IsValid() || v.TunnelV6.IsValid() || v.VXLANMACV6 != (cluster.MAC{}) {
		t.Errorf("IPv6 kept: %+v", v)
	}
	// The agent is told, to log it.
	tr := newTranslator("node1")
	tr.messages(datastore.Cluster{Nodes: []datastore.Node{n}})
	if len(tr.nodeErrs) != 1 || !strings.Contains(tr.nodeErrs[0].Error(), "node node2: IPv6 underlay: fe80::2 is not a unicast host address") {
		t.Errorf("node errors %v", tr.nodeErrs)
	}
}

// Direct server return behind the VXLAN overlay: the proxy serves the
// overlay's devices as host interfaces too, since another node's
// forwarded packets (the frontend in their option) arrive there; behind
// IPIP or WireGuard, whose devices carry no Ethernet header, it is
// refused.
func TestDSRBehindTheOverlay(t *testing.T) {
	c := Config{NodeName: "a", StateDir: "/x", BPFProxy: true, BPFDSR: true, IPv6: true, HostInterfaces: []string{"eth0"}}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.proxyHostInterfaces(), []string{"eth0", "np-vxlan", "np-vxlan6"}; !slices.Equal(got, want) {
		t.Errorf("host interfaces %v, want %v", got, want)
	}
	c.Overlay = OverlayDirect
	if got := c.proxyHostInterfaces(); !slices.Equal(got, []string{"eth0"}) {
		t.Errorf("direct routing: host interfaces %v", got)
	}
	for _, bad := range []Config{
		{NodeName: "a", StateDir: "/x", BPFProxy: true, BPFDSR: true, Overlay: OverlayIPIP},
		{NodeName: "a", StateDir: "/x", BPFProxy: true, BPFDSR: true, WireGuard: true},
	} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
