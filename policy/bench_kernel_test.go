//go:build linux

package policy_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// benchModel returns the messages of the program: 1,000 policies
// of 10 rules each on 250 workloads (four policies each, in one tier),
// with a namespace profile.
func benchModel() []any {
	msgs := []any{allowAll}
	for p := range 1000 {
		var rules []policy.Rule
		for r := range 10 {
			rules = append(rules, policy.Rule{Action: policy.Allow, Protocol: netfilter.ProtoTCP,
				Src: policy.Peer{Nets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(p / 250), byte(p % 250), byte(r)}), 32)}},
				Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(uint16(1000 + r))}}})
		}
		msgs = append(msgs, policy.PolicyUpdate{Policy: policy.Policy{ID: fmt.Sprintf("pol-%04d", p), Ingress: rules}})
	}
	for w := range 250 {
		var ids []string
		for k := range 4 {
			ids = append(ids, fmt.Sprintf("pol-%04d", w*4+k))
		}
		msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: fmt.Sprintf("w%03d", w), Iface: fmt.Sprintf("npv%03d", w),
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: ids}}, Profiles: []string{"ns.default"}}})
	}
	return msgs
}

// BenchmarkKernelPolicyProgram programs the full program (1,000
// policies × 10 rules on 250 workloads) from nothing through the Manager
// and its Table, in a fresh namespace per run, and beside it restores the
// very ruleset the Manager wrote (its dump) with one restore (iptables) or
// one `nft -f` (nftables) in another fresh namespace. It reports both and
// their ratio, x-restore (target ≤ 1.2); for iptables also the ratio to a
// restore with --noflush (x-restore-noflush), the mode that leaves other
// owners' rules in the table, which ours must use.
func BenchmarkKernelPolicyProgram(b *testing.B) {
	kerneltest.RequireKernel(b)
	msgs := benchModel()
	for _, be := range managertest.Backends() {
		if be.Name == "iptables-legacy" {
			continue // the same writer as iptables-nft; the peer is its restore
		}
		b.Run(be.Name, func(b *testing.B) {
			kerneltest.RequireCommands(b, be.Commands...)
			ctx := context.Background()
			var ours, peer, peerNoflush time.Duration
			var rules int
			for b.Loop() {
				b.StopTimer()
				ns := kerneltest.NewNS(b)
				k := managertest.Open(b, ns)
				filter := be.NewTable(b, k, "filter", ipfamily.IPv4, "npb-")
				layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
				m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout, ChainPrefix: "npb-", WorkloadPrefixes: []string{"npv"}})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				for _, msg := range msgs {
					m.OnUpdate(msg)
				}
				if err := m.CompleteDeferredWork(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := filter.(dataplane.Driver).Apply(ctx); err != nil {
					b.Fatal(err)
				}
				ours += time.Since(start)
				b.StopTimer()
				dump, restore := peerDump(b, be, ns)
				rules = bytes.Count(dump, []byte("\n-A ")) + bytes.Count(dump, []byte("\n\t\t"))
				fresh := kerneltest.NewNS(b)
				start = time.Now()
				if _, err := fresh.ExecInput(ctx, bytes.NewReader(dump), restore[0], restore[1:]...); err != nil {
					b.Fatal(err)
				}
				peer += time.Since(start)
				if len(restore) == 1 {
					// iptables: the same rules restored without flushing the
					// table, the mode that keeps other owners' rules, as ours
					// does.
					shared := kerneltest.NewNS(b)
					start = time.Now()
					if _, err := shared.ExecInput(ctx, bytes.NewReader(dump), restore[0], "--noflush"); err != nil {
						b.Fatal(err)
					}
					peerNoflush += time.Since(start)
					_ = shared.Close()
				}
				_ = ns.Close()
				_ = fresh.Close()
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(ours.Milliseconds())/n, "ms-ours")
			b.ReportMetric(float64(peer.Milliseconds())/n, "ms-restore")
			b.ReportMetric(float64(ours)/float64(peer), "x-restore")
			if peerNoflush > 0 {
				b.ReportMetric(float64(ours)/float64(peerNoflush), "x-restore-noflush")
			}
			b.ReportMetric(float64(rules), "rules")
		})
	}
}

// peerDump returns the ruleset the Manager wrote in ns and the command
// that restores it whole.
func peerDump(b *testing.B, be managertest.Backend, ns *kerneltest.NS) ([]byte, []string) {
	ctx := context.Background()
	if be.Name == "nftables" {
		out, err := ns.Exec(ctx, "nft", "list", "table", "ip", "npb-filter")
		if err != nil {
			b.Fatal(err)
		}
		return append([]byte("table ip npb-filter\ndelete table ip npb-filter\n"), out...), []string{"nft", "-f", "-"}
	}
	out, err := ns.Exec(ctx, "iptables-nft-save", "-t", "filter")
	if err != nil {
		b.Fatal(err)
	}
	return out, []string{"iptables-nft-restore"}
}

// BenchmarkKernelPolicyChange measures, on the full program of
// BenchmarkKernelPolicyProgram plus a set of 10,000 members that one
// policy's rule matches, what one change costs from the message to the
// kernel: one policy's rules replaced (policy-ms), and one member added
// to and removed from the set (member-ms); and beside them the peer, a
// chain of the same two rules rewritten by one restore or `nft -f` into
// the same table (peer-policy-ms, and policy-x-peer, the ratio of the
// p50s).
func BenchmarkKernelPolicyChange(b *testing.B) {
	kerneltest.RequireKernel(b)
	ctx := context.Background()
	for _, be := range managertest.Backends() {
		if be.Name == "iptables-legacy" {
			continue
		}
		b.Run(be.Name, func(b *testing.B) {
			kerneltest.RequireCommands(b, be.Commands...)
			ns := kerneltest.NewNS(b)
			k := managertest.Open(b, ns)
			filter := be.NewTable(b, k, "filter", ipfamily.IPv4, "npb-")
			sets := be.Sets(b, k, filter, ipfamily.IPv4, "npb-")
			layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
			m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Sets: sets, Marks: layout, ChainPrefix: "npb-", WorkloadPrefixes: []string{"npv"}})
			if err != nil {
				b.Fatal(err)
			}
			apply := func(msgs ...any) {
				for _, msg := range msgs {
					m.OnUpdate(msg)
				}
				if err := m.CompleteDeferredWork(ctx); err != nil {
					b.Fatal(err)
				}
				for _, d := range []dataplane.Driver{sets, filter} {
					if _, err := d.Apply(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := sets.ApplyDeletions(ctx); err != nil {
					b.Fatal(err)
				}
			}
			members := make([]netfilter.Member, 0, 10000)
			for i := range 10000 {
				members = append(members, netfilter.IPMember(netip.AddrFrom4([4]byte{10, 100, byte(i / 256), byte(i % 256)})))
			}
			big := policy.PolicyUpdate{Policy: policy.Policy{ID: "pol-0000", Ingress: []policy.Rule{{Action: policy.Allow, Src: policy.Peer{Sets: []string{"big"}}}}}}
			apply(append(benchModel(), policy.SetUpdate{ID: "big", Kind: policy.SetNets, Members: members}, big)...)
			var policyTimes, memberTimes, peerTimes []time.Duration
			for i := 0; b.Loop(); i++ {
				port := uint16(2000 + i%1000)
				start := time.Now()
				apply(policy.PolicyUpdate{Policy: policy.Policy{ID: "pol-0001", Ingress: []policy.Rule{{Action: policy.Allow,
					Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(port)}}}}}})
				policyTimes = append(policyTimes, time.Since(start))
				// The peer: the same chain rewritten by one restore (or nft
				// -f) in a chain of its own beside the Manager's.
				b.StopTimer()
				peerTimes = append(peerTimes, peerChange(b, be, ns, port))
				b.StartTimer()
				extra := netfilter.IPMember(netip.AddrFrom4([4]byte{10, 200, byte(i / 256), byte(i % 256)}))
				start = time.Now()
				apply(policy.SetDelta{ID: "big", Add: []netfilter.Member{extra}})
				apply(policy.SetDelta{ID: "big", Remove: []netfilter.Member{extra}})
				memberTimes = append(memberTimes, time.Since(start)/2)
			}
			// The mean counts the writers' post-write rechecks, which
			// re-read the whole table now and then; the median is one
			// change alone.
			report := func(ts []time.Duration, unit string) {
				var sum time.Duration
				for _, d := range ts {
					sum += d
				}
				slices.Sort(ts)
				b.ReportMetric(float64(sum.Microseconds())/float64(len(ts))/1000, unit+"-mean-ms")
				b.ReportMetric(float64(ts[len(ts)/2].Microseconds())/1000, unit+"-p50-ms")
			}
			report(policyTimes, "policy")
			report(memberTimes, "member")
			report(peerTimes, "peer-policy")
			b.ReportMetric(float64(policyTimes[len(policyTimes)/2])/float64(peerTimes[len(peerTimes)/2]), "policy-x-peer")
		})
	}
}

// peerChange rewrites a chain of two rules (a policy's allow at port,
// and its return) with one `iptables-nft-restore --noflush` or one `nft
// -f` in the Manager's table, as a hand-written agent would, and returns
// how long that took.
func peerChange(b *testing.B, be managertest.Backend, ns *kerneltest.NS, port uint16) time.Duration {
	var input string
	cmd := []string{"iptables-nft-restore", "--noflush"}
	if be.Name == "nftables" {
		cmd = []string{"nft", "-f", "-"}
		input = fmt.Sprintf("add chain ip npb-filter peer-pol\nflush chain ip npb-filter peer-pol\n"+
			"add rule ip npb-filter peer-pol tcp dport %d meta mark set meta mark or 0x10000\n"+
			"add rule ip npb-filter peer-pol meta mark & 0x10000 == 0x10000 return\n", port)
	} else {
		input = fmt.Sprintf("*filter\n:peer-pol - [0:0]\n-A peer-pol -p tcp -m tcp --dport %d -j MARK --set-xmark 0x10000/0x10000\n"+
			"-A peer-pol -m mark --mark 0x10000/0x10000 -j RETURN\nCOMMIT\n", port)
	}
	start := time.Now()
	if _, err := ns.ExecInput(context.Background(), strings.NewReader(input), cmd[0], cmd[1:]...); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkKernelPolicyConnect measures what policy costs a packet: the
// p50 of TCP connects from a pod to a pod whose interface sorts first
// among 250 workloads and to one that sorts after the other 248, on the
// full program of 1,000 policies (each workload has four), on nftables,
// with the dispatch tree and with the verdict maps; and, beside them, on
// a node with only the four policies of the pods and no other workload.
// It reports the p50s in µs, last/first (target ≤ 1.1) and
// full/minimal, the last pod's p50 on the full program against the first
// pod's on the minimal one (target ≤ 1.1).
func BenchmarkKernelPolicyConnect(b *testing.B) {
	kerneltest.RequireKernel(b)
	var nft managertest.Backend
	for _, be := range managertest.Backends() {
		if be.Name == "nftables" {
			nft = be
		}
	}
	kerneltest.RequireCommands(b, nft.Commands...)
	for _, d := range []policy.Dispatch{policy.DispatchTree, policy.DispatchVerdictMap} {
		b.Run(d.String(), func(b *testing.B) {
			full := newConnectNode(b, nft, d, true)
			minimal := newConnectNode(b, nft, d, false)
			var tFirst, tLast, tMin time.Duration
			for b.Loop() {
				tFirst += full.p50(b, full.first, 500)
				tLast += full.p50(b, full.last, 500)
				tMin += minimal.p50(b, minimal.first, 500)
			}
			n := float64(b.N)
			b.ReportMetric(float64(tFirst.Microseconds())/n, "first-p50-µs")
			b.ReportMetric(float64(tLast.Microseconds())/n, "last-p50-µs")
			b.ReportMetric(float64(tMin.Microseconds())/n, "minimal-p50-µs")
			b.ReportMetric(float64(tLast)/float64(tFirst), "last/first")
			b.ReportMetric(float64(tLast)/float64(tMin), "full/minimal")
		})
	}
}

// connectNode is a host with three pods and a Manager on nftables.
type connectNode struct {
	client, first, last *kerneltest.Pod
}

// newConnectNode programs a host: the full program (1,000 policies, 250
// workloads: the three pods and 248 without interfaces named to sort
// between the first pod's and the second's), or only the pods with their
// four policies.
func newConnectNode(b *testing.B, nft managertest.Backend, d policy.Dispatch, full bool) *connectNode {
	ctx := context.Background()
	topo := kerneltest.NewTopology(b, kerneltest.TopologyOptions{Hosts: 1, PodsPerHost: 3, Stack: kerneltest.IPv4Only})
	host := topo.Hosts[0]
	k := managertest.Open(b, host.NS)
	filter := nft.NewTable(b, k, "filter", ipfamily.IPv4, "npb-")
	layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout, ChainPrefix: "npb-",
		WorkloadPrefixes: []string{kerneltest.DefaultPodIfacePrefix}, Dispatch: d})
	if err != nil {
		b.Fatal(err)
	}
	model := benchModel()
	msgs := append([]any{model[0]}, model[997:1001]...) // the profile and the pods' four policies
	if full {
		msgs = model[:1001] // the profile and the 1,000 policies
		for w := range 248 {
			msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: fmt.Sprintf("fake%03d", w), Iface: fmt.Sprintf("veth1%03d", w),
				Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{fmt.Sprintf("pol-%04d", w*4)}}}, Profiles: []string{"ns.default"}}})
		}
	}
	for _, p := range host.Pods {
		msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: p.Name, Iface: p.HostVeth,
			Tiers:    []policy.TierPolicies{{Name: "k8s", Ingress: []string{"pol-0996", "pol-0997", "pol-0998", "pol-0999"}, EndOfTier: policy.Pass}},
			Profiles: []string{"ns.default"}}})
	}
	for _, msg := range msgs {
		m.OnUpdate(msg)
	}
	if err := m.CompleteDeferredWork(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := filter.(dataplane.Driver).Apply(ctx); err != nil {
		b.Fatal(err)
	}
	return &connectNode{client: host.Pods[2], first: host.Pods[0], last: host.Pods[1]}
}

// p50 returns the median of n TCP connects from the client to pod to.
func (c *connectNode) p50(b *testing.B, to *kerneltest.Pod, n int) time.Duration {
	srv, stop := to.NS.ListenTCP(b, netip.AddrPortFrom(to.IPv4, 0))
	defer stop()
	var took []time.Duration
	if err := c.client.NS.Do(func() error {
		for range n {
			start := time.Now()
			conn, err := net.DialTimeout("tcp4", srv.String(), 2*time.Second)
			if err != nil {
				return err
			}
			took = append(took, time.Since(start))
			_ = conn.Close()
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	slices.Sort(took)
	return took[len(took)/2]
}
