//go:build linux

package policy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/policy"
)

// forEachDispatch runs fn per backend and dispatch: the tree on every
// backend, and on nftables the verdict maps too.
func forEachDispatch(t *testing.T, fn func(t *testing.T, b managertest.Backend, d policy.Dispatch)) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		ds := []policy.Dispatch{policy.DispatchTree}
		if b.Name == "nftables" {
			ds = append(ds, policy.DispatchVerdictMap)
		}
		for _, d := range ds {
			t.Run(d.String(), func(t *testing.T) { fn(t, b, d) })
		}
	})
}

// node is one or more host namespaces with their pods, a policy Manager
// per host on a backend, and the drivers each Manager declares on,
// applied in the loop's order.
type node struct {
	t     *testing.T
	b     managertest.Backend
	f     ipfamily.Family
	topo  *kerneltest.Topology
	hosts []*hostManager
	m     *policy.Manager            // the first host's
	ports map[*kerneltest.Pod]uint16 // each pod's echo server
}

// hostManager is one host's Manager and drivers.
type hostManager struct {
	host   *kerneltest.Host
	m      *policy.Manager
	filter netfilter.Table
	sets   netfilter.Sets
}

// newNode builds one host with three pods.
func newNode(t *testing.T, b managertest.Backend, f ipfamily.Family, opts policy.Options) *node {
	return newNodes(t, b, f, opts, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 3, Stack: managertest.Stack(f)})
}

// newNodes builds the topology with a Manager on every host.
func newNodes(t *testing.T, b managertest.Backend, f ipfamily.Family, opts policy.Options, topts kerneltest.TopologyOptions) *node {
	topo := kerneltest.NewTopology(t, topts)
	if topts.Hosts > 1 {
		require.NoError(t, topo.AddPodRoutesViaUnderlay())
	}
	n := &node{t: t, b: b, f: f, topo: topo, ports: map[*kerneltest.Pod]uint16{}}
	for _, host := range topo.Hosts {
		k := managertest.Open(t, host.NS)
		filter := b.NewTable(t, k, "filter", f, "npp-")
		sets := b.Sets(t, k, filter, f, "npp-")
		layout, err := markbits.NewLayout(markbits.LayoutOptions{})
		require.NoError(t, err)
		o := opts
		o.Family, o.Filter, o.Sets, o.Marks = f, filter, sets, layout
		o.ChainPrefix, o.WorkloadPrefixes = "npp-", []string{kerneltest.DefaultPodIfacePrefix}
		m, err := policy.New(o)
		require.NoError(t, err)
		n.hosts = append(n.hosts, &hostManager{host: host, m: m, filter: filter, sets: sets})
		for _, p := range host.Pods {
			addr, _ := p.NS.ListenTCP(t, netip.AddrPortFrom(netip.Addr{}, 0))
			n.ports[p] = addr.Port()
		}
	}
	n.m = n.hosts[0].m
	return n
}

// send feeds msgs to every host's Manager — a workload only to its own
// host's — and applies every driver, as a pass of the loop does.
func (n *node) send(msgs ...any) {
	n.t.Helper()
	ctx := context.Background()
	for _, h := range n.hosts {
		for _, msg := range msgs {
			if w, ok := msg.(policy.WorkloadUpdate); ok && !slices.ContainsFunc(h.host.Pods, func(p *kerneltest.Pod) bool { return p.Name == w.Endpoint.ID }) {
				continue
			}
			h.m.OnUpdate(msg)
		}
		require.NoError(n.t, h.m.CompleteDeferredWork(ctx))
		for _, d := range []dataplane.Driver{h.sets, h.filter} {
			_, err := d.Apply(ctx)
			require.NoError(n.t, err, "%T", d)
		}
		_, err := h.sets.ApplyDeletions(ctx)
		require.NoError(n.t, err)
	}
}

// pod returns the i-th pod of the topology, host by host.
func (n *node) pod(i int) *kerneltest.Pod { return n.topo.Pods()[i] }

// managerOf returns the Manager of the pod's host.
func (n *node) managerOf(p *kerneltest.Pod) *policy.Manager {
	for _, h := range n.hosts {
		if h.host == p.Host {
			return h.m
		}
	}
	n.t.Fatalf("pod %s on no host", p.Name)
	return nil
}

func (n *node) addr(p *kerneltest.Pod) netip.Addr { return managertest.Pick(n.f, p.Addrs()...) }

// reaches reports whether a TCP exchange from one pod to another's echo
// server succeeds; a harness failure fails the test.
func (n *node) reaches(from, to *kerneltest.Pod) bool {
	n.t.Helper()
	return tcpReaches(n.t, from.NS, netip.AddrPortFrom(n.addr(to), n.ports[to]))
}

// tcpReaches reports whether a TCP exchange from ns with an echo server
// at to succeeds within 2 s; a harness failure fails the test.
func tcpReaches(t *testing.T, ns *kerneltest.NS, to netip.AddrPort) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := ns.DialTCP(ctx, to)
	if err != nil && !errors.Is(err, kerneltest.ErrUnreachable) {
		t.Fatal(err)
	}
	return err == nil
}

// expect checks the reachability of every ordered pair of pods against
// want (want[i][j]: pod i reaches pod j).
func (n *node) expect(what string, want [3][3]bool) {
	n.t.Helper()
	for i := range 3 {
		for j := range 3 {
			if i == j {
				continue
			}
			if got := n.reaches(n.pod(i), n.pod(j)); got != want[i][j] {
				n.t.Errorf("%s: pod%d → pod%d reached = %v, want %v\n%s", what, i+1, j+1, got, want[i][j],
					n.b.Dump(n.t, n.topo.Hosts[0].NS, "filter", n.f))
			}
		}
	}
}

func workload(p *kerneltest.Pod, tiers []policy.TierPolicies, profiles ...string) policy.WorkloadUpdate {
	return policy.WorkloadUpdate{Endpoint: policy.Workload{ID: p.Name, Iface: p.HostVeth, Tiers: tiers, Profiles: profiles}}
}

var allowAll = policy.ProfileUpdate{Profile: policy.Profile{ID: "ns.default",
	Ingress: []policy.Rule{{Action: policy.Allow}}, Egress: []policy.Rule{{Action: policy.Allow}}}}

var all = [3][3]bool{{true, true, true}, {true, true, true}, {true, true, true}}

// TestKernelPolicyTraffic programs policy on a node with three pods and
// checks every pod pair with TCP on each backend and family: unknown
// workload interfaces are denied (fail closed), a namespace profile allows
// all, a tier's policy isolates a pod to the sources it allows (by network
// and by set, then by a set member added), a Pass goes on to the profile,
// a removed policy fails closed, and an established connection outlives a
// later deny.
func TestKernelPolicyTraffic(t *testing.T) {
	forEachDispatch(t, func(t *testing.T, b managertest.Backend, d policy.Dispatch) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			n := newNode(t, b, f, policy.Options{Deny: policy.DenyReject, Dispatch: d})
			p1, p2, p3 := n.pod(0), n.pod(1), n.pod(2)
			n.send()
			n.expect("no workload known", [3][3]bool{})

			n.send(allowAll, workload(p1, nil, "ns.default"), workload(p2, nil, "ns.default"), workload(p3, nil, "ns.default"))
			n.expect("profile allows all", all)

			// pod2 isolated: ingress from pod1's address only.
			k8s := []policy.TierPolicies{{Name: "k8s", Ingress: []string{"allow-p1"}}}
			n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{
				Action: policy.Allow, Protocol: netfilter.ProtoTCP,
				Src: policy.Peer{Nets: []netip.Prefix{netip.PrefixFrom(n.addr(p1), n.addr(p1).BitLen())}},
			}}}}, workload(p2, k8s, "ns.default"))
			n.expect("pod2 allows pod1", [3][3]bool{{false, true, true}, {true, false, true}, {true, false, false}})

			// By a set: pod3 only, then pod1 too through a delta.
			n.send(policy.SetUpdate{ID: "peers", Kind: policy.SetNets, Members: []netfilter.Member{netfilter.IPMember(n.addr(p3))}},
				policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{
					Action: policy.Allow, Src: policy.Peer{Sets: []string{"peers"}},
					Dst:      policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(1), netfilter.Ports(n.ports[p2], n.ports[p2])}},
					Protocol: netfilter.ProtoTCP,
				}}}})
			n.expect("pod2 allows the set {pod3}", [3][3]bool{{false, false, true}, {true, false, true}, {true, true, false}})
			n.send(policy.SetDelta{ID: "peers", Add: []netfilter.Member{netfilter.IPMember(n.addr(p1))}})
			n.expect("pod2 allows the set {pod1, pod3}", [3][3]bool{{false, true, true}, {true, false, true}, {true, true, false}})

			// Negation: every source but pod1's address, through the
			// scratch mark.
			n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{
				Action: policy.Allow, Src: policy.Peer{Sets: []string{"peers"},
					NotNets: []netip.Prefix{netip.PrefixFrom(n.addr(p1), n.addr(p1).BitLen())}},
			}}}})
			n.expect("pod2 allows the set less pod1", [3][3]bool{{false, false, true}, {true, false, true}, {true, true, false}})

			// Pass to the profile: the tier lets everything through.
			n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{Action: policy.Pass}}}})
			n.expect("pass to the profile", all)

			// An established connection outlives a later deny.
			conn := n.dial(p3, p2)
			n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{Action: policy.Deny}}}})
			n.expect("deny all to pod2", [3][3]bool{{false, false, true}, {true, false, true}, {true, false, false}})
			n.echo(conn)

			// A policy removed while pod2 still lists it: fail closed.
			n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "allow-p1", Ingress: []policy.Rule{{Action: policy.Allow}}}})
			n.expect("allow all to pod2", all)
			n.send(policy.PolicyRemove{ID: "allow-p1"})
			n.expect("missing policy denies", [3][3]bool{{false, false, true}, {true, false, true}, {true, false, false}})

			// Removed workloads are unknown again.
			n.send(policy.WorkloadRemove{ID: p3.Name})
			n.expect("pod3 removed", [3][3]bool{{false, false, false}, {true, false, false}, {false, false, false}})
		})
	})
}

// dial opens a TCP connection from one pod to another's echo server.
func (n *node) dial(from, to *kerneltest.Pod) net.Conn {
	n.t.Helper()
	var conn net.Conn
	require.NoError(n.t, from.NS.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", netip.AddrPortFrom(n.addr(to), n.ports[to]).String(), 2*time.Second)
		return err
	}))
	n.t.Cleanup(func() { _ = conn.Close() })
	n.echo(conn)
	return conn
}

// echo checks that conn still carries data both ways.
func (n *node) echo(conn net.Conn) {
	n.t.Helper()
	require.NoError(n.t, conn.SetDeadline(time.Now().Add(2*time.Second)))
	_, err := conn.Write([]byte("ping"))
	require.NoError(n.t, err)
	buf := make([]byte, 4)
	_, err = conn.Read(buf)
	require.NoError(n.t, err, "the established connection was cut")
	require.Equal(n.t, "ping", string(buf))
}

// TestKernelPolicyHostEndpoint protects a host's underlay interface with a
// host endpoint whose policy denies everything: another host reaches
// neither its server nor, once the endpoint is the wildcard one, still
// not — but always its failsafe port (SSH, tcp 22); an allow rule for the
// server's port opens it; the pods behind the host are not policed by it.
func TestKernelPolicyHostEndpoint(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f)})
			h1, h2 := topo.Hosts[0], topo.Hosts[1]
			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			k := managertest.Open(t, h1.NS)
			filter := b.NewTable(t, k, "filter", f, "nph-")
			layout, err := markbits.NewLayout(markbits.LayoutOptions{})
			require.NoError(t, err)
			m, err := policy.New(policy.Options{Family: f, Filter: filter, Marks: layout, ChainPrefix: "nph-",
				WorkloadPrefixes: []string{kerneltest.DefaultPodIfacePrefix}, Deny: policy.DenyReject})
			require.NoError(t, err)
			send := func(msgs ...any) {
				t.Helper()
				for _, msg := range msgs {
					m.OnUpdate(msg)
				}
				require.NoError(t, m.CompleteDeferredWork(context.Background()))
				_, err := filter.Apply(context.Background())
				require.NoError(t, err)
			}
			h1IP := managertest.Pick(f, h1.UnderlayAddrs()...)
			server, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 0))
			ssh, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 22))
			pod := h1.Pods[0]
			podServer, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(managertest.Pick(f, pod.Addrs()...), 0))
			reaches := func(to netip.AddrPort) bool { return tcpReaches(t, h2.NS, to) }
			check := func(what string, wantServer, wantSSH, wantPod bool) {
				t.Helper()
				for _, c := range []struct {
					name string
					to   netip.AddrPort
					want bool
				}{{"server", server, wantServer}, {"ssh", ssh, wantSSH}, {"pod", podServer, wantPod}} {
					if got := reaches(c.to); got != c.want {
						t.Errorf("%s: host2 → %s (%s) reached = %v, want %v\n%s", what, c.name, c.to, got, c.want, b.Dump(t, h1.NS, "filter", f))
					}
				}
			}
			send(allowAll, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "pod", Iface: pod.HostVeth, Profiles: []string{"ns.default"}}})
			check("no host endpoint", true, true, true)

			denyAll := policy.PolicyUpdate{Policy: policy.Policy{ID: "host-deny", Ingress: []policy.Rule{{Action: policy.Deny}}}}
			tiers := []policy.TierPolicies{{Name: "host", Ingress: []string{"host-deny"}}}
			send(denyAll, policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: h1.UnderlayIf, Tiers: tiers}})
			check("host endpoint denies all", false, true, true)

			send(policy.HostEndpointRemove{ID: "eth"},
				policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "any", Iface: policy.WildcardIface, Tiers: tiers}})
			check("wildcard host endpoint denies all", false, true, true)

			send(policy.PolicyUpdate{Policy: policy.Policy{ID: "host-deny", Ingress: []policy.Rule{
				{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(server.Port())}}},
				{Action: policy.Deny}}}})
			check("the server's port allowed", true, true, true)

			send(policy.HostEndpointRemove{ID: "any"})
			check("host endpoint removed", true, true, true)
		})
	})
}

// TestKernelPolicyCounters reads per-rule counters through the Manager on
// nftables: the rule that allowed a flow counted its packets, a rule no
// packet met counted none; on iptables Counters says it is not supported.
func TestKernelPolicyCounters(t *testing.T) {
	kerneltest.RequireCommands(t, "nft")
	topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 2, Stack: kerneltest.IPv4Only})
	host := topo.Hosts[0]
	k := managertest.Open(t, host.NS)
	filter, err := nftables.New(nftables.Options{Name: "npc-filter", Family: ipfamily.IPv4, Role: nftables.Filter, ChainPrefix: "npc-", Kernel: k, Counters: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = filter.Close() })
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout, ChainPrefix: "npc-",
		WorkloadPrefixes: []string{kerneltest.DefaultPodIfacePrefix}})
	require.NoError(t, err)
	p1, p2 := host.Pods[0], host.Pods[1]
	srv, _ := p2.NS.ListenTCP(t, netip.AddrPortFrom(p2.IPv4, 0))
	for _, msg := range []any{allowAll,
		policy.PolicyUpdate{Policy: policy.Policy{ID: "web", Ingress: []policy.Rule{
			{Action: policy.Allow, Protocol: netfilter.ProtoUDP},
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(srv.Port())}}},
		}}},
		workload(p1, nil, "ns.default"),
		workload(p2, []policy.TierPolicies{{Name: "k8s", Ingress: []string{"web"}}}, "ns.default"),
	} {
		m.OnUpdate(msg)
	}
	require.NoError(t, m.CompleteDeferredWork(context.Background()))
	_, err = filter.Apply(context.Background())
	require.NoError(t, err)
	for range 3 {
		kerneltest.Require(t, kerneltest.TCPCheck(p1.NS, srv))
	}
	counters, err := m.Counters(context.Background())
	require.NoError(t, err)
	byRule := map[string]policy.RuleCounter{}
	for _, c := range counters {
		byRule[fmt.Sprintf("%s/%v/%v/%d", c.Policy, c.Profile, c.Ingress, c.Rule)] = c
	}
	require.Contains(t, byRule, "web/false/true/1")
	assert.Equal(t, uint64(3), byRule["web/false/true/1"].Packets, "three connections, each allowed by its first packet: %+v", counters)
	assert.NotZero(t, byRule["web/false/true/1"].Bytes)
	assert.Zero(t, byRule["web/false/true/0"].Packets, "no UDP was sent")

	ipt, err := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "npc-", Kernel: k})
	require.NoError(t, err)
	m2, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: ipt, Marks: layout, ChainPrefix: "npc-", WorkloadPrefixes: []string{"npv"}})
	require.NoError(t, err)
	_, err = m2.Counters(context.Background())
	assert.ErrorIs(t, err, policy.ErrNotSupported)
}

// untrackedManager is a Manager with the filter and raw tables of backend
// b in k (chain prefix "npu-", rejecting what it denies), and the tables.
func untrackedManager(t *testing.T, b managertest.Backend, k *kernel.Namespace, f ipfamily.Family) (*policy.Manager, netfilter.Table, netfilter.Table) {
	t.Helper()
	filter := b.NewTable(t, k, "filter", f, "npu-")
	raw := b.NewTable(t, k, "raw", f, "npu-")
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	m, err := policy.New(policy.Options{Family: f, Filter: filter, Raw: raw, Marks: layout, ChainPrefix: "npu-",
		WorkloadPrefixes: []string{kerneltest.DefaultPodIfacePrefix}, Deny: policy.DenyReject})
	require.NoError(t, err)
	return m, filter, raw
}

// TestKernelPolicyUntrackedNotForwarded: an untracked policy that denies a
// port on a host endpoint closes it on the host itself, but a connection
// forwarded through that interface to a pod of the host on the same port
// is no traffic of the host's: it goes on tracked, and the pod's policy
// lets it in. Both backends, both families, with traffic.
func TestKernelPolicyUntrackedNotForwarded(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f)})
			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			h1, h2 := topo.Hosts[0], topo.Hosts[1]
			pod := h1.Pods[0]
			k := managertest.Open(t, h1.NS)
			m, filter, raw := untrackedManager(t, b, k, f)
			podAddr, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(managertest.Pick(f, pod.Addrs()...), 0))
			hostAddr, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(managertest.Pick(f, h1.UnderlayAddrs()...), podAddr.Port()))
			port := []netfilter.PortRange{netfilter.Port(podAddr.Port())}
			for _, msg := range []any{
				allowAll,
				policy.PolicyUpdate{Policy: policy.Policy{ID: "untracked", Ingress: []policy.Rule{
					{Action: policy.Deny, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: port}}}}},
				policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: h1.UnderlayIf, Profiles: []string{"ns.default"},
					UntrackedTiers: []policy.TierPolicies{{Name: "raw", Ingress: []string{"untracked"}}}}},
				workload(pod, nil, "ns.default"),
			} {
				m.OnUpdate(msg)
			}
			require.NoError(t, m.CompleteDeferredWork(context.Background()))
			for _, d := range []dataplane.Driver{raw, filter} {
				_, err := d.Apply(context.Background())
				require.NoError(t, err)
			}
			dump := func() string { return b.Dump(t, h1.NS, "raw", f) + b.Dump(t, h1.NS, "filter", f) }
			assert.False(t, tcpReaches(t, h2.NS, hostAddr), "the host's port, denied by the untracked policy:\n%s", dump())
			assert.True(t, tcpReaches(t, h2.NS, podAddr), "the pod's port, forwarded through the host endpoint:\n%s", dump())
		})
	})
}

// TestKernelPolicyUntracked gives a host endpoint an untracked policy in
// the raw table that lets another host reach one server port (both ways,
// as untracked flows need) while its tracked policy denies everything: the
// port answers and conntrack never sees the flow; another port stays
// denied; the failsafe port answers.
func TestKernelPolicyUntracked(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 0, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f)})
			h1, h2 := topo.Hosts[0], topo.Hosts[1]
			k := managertest.Open(t, h1.NS)
			m, filter, raw := untrackedManager(t, b, k, f)
			h1IP := managertest.Pick(f, h1.UnderlayAddrs()...)
			open, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 0))
			closed, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 0))
			ssh, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 22))
			port := []netfilter.PortRange{netfilter.Port(open.Port())}
			for _, msg := range []any{
				policy.PolicyUpdate{Policy: policy.Policy{ID: "untracked", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: port}}},
					Egress: []policy.Rule{{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Src: policy.Peer{Ports: port}}}}},
				policy.PolicyUpdate{Policy: policy.Policy{ID: "deny", Ingress: []policy.Rule{{Action: policy.Deny}}}},
				policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: h1.UnderlayIf,
					Tiers:          []policy.TierPolicies{{Name: "host", Ingress: []string{"deny"}}},
					UntrackedTiers: []policy.TierPolicies{{Name: "raw", Ingress: []string{"untracked"}, Egress: []string{"untracked"}}}}},
			} {
				m.OnUpdate(msg)
			}
			require.NoError(t, m.CompleteDeferredWork(context.Background()))
			for _, d := range []dataplane.Driver{raw, filter} {
				_, err := d.Apply(context.Background())
				require.NoError(t, err)
			}
			reaches := func(to netip.AddrPort) bool { return tcpReaches(t, h2.NS, to) }
			dump := func() string { return b.Dump(t, h1.NS, "raw", f) + b.Dump(t, h1.NS, "filter", f) }
			assert.True(t, reaches(open), "the untracked port:\n%s", dump())
			assert.False(t, reaches(closed), "another port:\n%s", dump())
			assert.True(t, reaches(ssh), "the failsafe port:\n%s", dump())
			flows := managertest.Conntrack(t, h1.NS, f, "-p", "tcp", "--dport", fmt.Sprint(open.Port()))
			assert.Empty(t, flows, "the untracked flow is not in conntrack")
			assert.NotEmpty(t, managertest.Conntrack(t, h1.NS, f, "-p", "tcp", "--dport", "22"), "the failsafe flow is tracked")
		})
	})
}
