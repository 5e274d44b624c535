//go:build linux

package policy_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// scenario is one case of the truth table: the policies and sets it adds
// and each pod's tiers (pods without an entry keep only their profile).
type scenario struct {
	name  string
	msgs  func(n *node) []any
	tiers func(n *node) map[int][]policy.TierPolicies
}

func host(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// truthTable holds cases in the style of the upstream Kubernetes
// NetworkPolicy tests. Pods 0, 1 and 2 stand for pods of namespaces x, y
// and z (pod 3, on the second node with pod 2, has only its profile); a namespace's pods are a set, a NetworkPolicy is a policy of tier
// "k8s" ending in deny, an admin policy one of tier "admin" before it.
func truthTable() []scenario {
	k8s := func(in, out []string) []policy.TierPolicies {
		return []policy.TierPolicies{{Name: "k8s", Ingress: in, Egress: out}}
	}
	nsSet := func(n *node, id string, pods ...int) policy.SetUpdate {
		s := policy.SetUpdate{ID: id, Kind: policy.SetNets}
		for _, i := range pods {
			s.Members = append(s.Members, netfilter.IPMember(n.addr(n.pod(i))))
		}
		return s
	}
	// portSet is a named-port set of pod i's server port, for proto.
	portSet := func(n *node, id string, i int, proto netfilter.Proto) policy.SetUpdate {
		p := n.pod(i)
		return policy.SetUpdate{ID: id, Kind: policy.SetAddrPorts,
			Members: []netfilter.Member{netfilter.IPPortMember(n.addr(p), proto, n.ports[p])}}
	}
	tcpTo := func(ranges ...netfilter.PortRange) policy.Peer { return policy.Peer{Ports: ranges} }
	return []scenario{
		{name: "default deny ingress in x",
			msgs: func(*node) []any { return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "x-deny"}}} },
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{0: k8s([]string{"x-deny"}, nil)}
			}},
		{name: "x allows namespace y by set",
			msgs: func(n *node) []any {
				return []any{nsSet(n, "ns-y", 1), policy.PolicyUpdate{Policy: policy.Policy{ID: "x-from-y",
					Ingress: []policy.Rule{{Action: policy.Allow, Src: policy.Peer{Sets: []string{"ns-y"}}}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{0: k8s([]string{"x-from-y"}, nil)}
			}},
		{name: "y allows a port range with the server's port (endPort)",
			msgs: func(n *node) []any {
				p := n.ports[n.pod(1)]
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "y-range", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: tcpTo(netfilter.Ports(p-3, p+3))}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{1: k8s([]string{"y-range"}, nil)}
			}},
		{name: "y allows 20 ports, none the server's",
			msgs: func(n *node) []any {
				p := n.ports[n.pod(1)]
				var ranges []netfilter.PortRange
				for i := range 20 {
					ranges = append(ranges, netfilter.Port(p+uint16(i)+1))
				}
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "y-20", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: tcpTo(ranges...)}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{1: k8s([]string{"y-20"}, nil)}
			}},
		{name: "y allows 20 ports, the last the server's",
			msgs: func(n *node) []any {
				p := n.ports[n.pod(1)]
				var ranges []netfilter.PortRange
				for i := range 19 {
					ranges = append(ranges, netfilter.Port(p+uint16(i)+1))
				}
				ranges = append(ranges, netfilter.Port(p))
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "y-20b", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: tcpTo(ranges...)}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{1: k8s([]string{"y-20b"}, nil)}
			}},
		{name: "z allows an ipBlock with except",
			msgs: func(n *node) []any {
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "z-block", Ingress: []policy.Rule{{Action: policy.Allow,
					Src: policy.Peer{Nets: []netip.Prefix{netip.PrefixFrom(n.addr(n.pod(0)), n.addr(n.pod(0)).BitLen()-8).Masked()},
						NotNets: []netip.Prefix{host(n.addr(n.pod(0)))}}}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{2: k8s([]string{"z-block"}, nil)}
			}},
		{name: "z denies egress except to x's server port",
			msgs: func(n *node) []any {
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "z-egress", Egress: []policy.Rule{{Action: policy.Allow,
					Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(n.ports[n.pod(0)])}}}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{2: k8s(nil, []string{"z-egress"})}
			}},
		{name: "x allows y's named port only",
			msgs: func(n *node) []any {
				return []any{
					portSet(n, "named-http", 1, netfilter.ProtoTCP),
					policy.PolicyUpdate{Policy: policy.Policy{ID: "egress-named", Egress: []policy.Rule{{Action: policy.Allow,
						Protocol: netfilter.ProtoTCP, Dst: policy.Peer{NamedPorts: []string{"named-http"}}}}}},
				}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{0: k8s(nil, []string{"egress-named"})}
			}},
		{name: "x allows TCP but to y's named port (a named-port exception)",
			msgs: func(n *node) []any {
				return []any{
					portSet(n, "named-except", 1, netfilter.ProtoTCP),
					policy.PolicyUpdate{Policy: policy.Policy{ID: "egress-except", Egress: []policy.Rule{{Action: policy.Allow,
						Protocol: netfilter.ProtoTCP, Dst: policy.Peer{NotNamedPorts: []string{"named-except"}}}}}},
				}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{0: k8s(nil, []string{"egress-except"})}
			}},
		{name: "sets of the wrong kind match nothing, as alternatives and as exceptions",
			msgs: func(n *node) []any {
				return []any{
					nsSet(n, "nets-as-ports", 1),
					portSet(n, "ports-as-nets", 1, netfilter.ProtoUDP),
					policy.PolicyUpdate{Policy: policy.Policy{ID: "wrong-kinds", Ingress: []policy.Rule{
						{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{NamedPorts: []string{"nets-as-ports"}}},
						{Action: policy.Allow, Protocol: netfilter.ProtoUDP, Dst: policy.Peer{NotSets: []string{"ports-as-nets"}}},
					}}},
				}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{1: k8s([]string{"wrong-kinds"}, nil)}
			}},
		{name: "admin tier passes y and denies the rest before k8s allows all",
			msgs: func(n *node) []any {
				return []any{nsSet(n, "ns-y2", 1),
					policy.PolicyUpdate{Policy: policy.Policy{ID: "admin", Ingress: []policy.Rule{
						{Action: policy.Pass, Src: policy.Peer{Sets: []string{"ns-y2"}}},
						{Action: policy.Deny}}}},
					policy.PolicyUpdate{Policy: policy.Policy{ID: "k8s-all", Ingress: []policy.Rule{{Action: policy.Allow}}}},
				}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{2: {
					{Name: "admin", Ingress: []string{"admin"}},
					{Name: "k8s", Ingress: []string{"k8s-all"}},
				}}
			}},
		{name: "end-of-tier pass to the profile",
			msgs: func(*node) []any {
				return []any{policy.PolicyUpdate{Policy: policy.Policy{ID: "nothing", Ingress: []policy.Rule{{Action: policy.Log}}}}}
			},
			tiers: func(*node) map[int][]policy.TierPolicies {
				return map[int][]policy.TierPolicies{0: {{Name: "baseline", Ingress: []string{"nothing"}, EndOfTier: policy.Pass}}}
			}},
	}
}

// TestKernelPolicyTruthTable runs the truth table on every backend and
// family: for each case, every ordered pod pair is probed with TCP and
// UDP (and SCTP where the kernel has it) and the
// outcome compared with the model's Explain (egress at the source, then
// ingress at the destination), which is written apart from the renderer.
func TestKernelPolicyTruthTable(t *testing.T) {
	kerneltest.RequireCommands(t, "conntrack")
	forEachDispatch(t, func(t *testing.T, b managertest.Backend, d policy.Dispatch) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			// Two nodes, two pods each: pods 0 and 1 on the first, 2 and 3
			// on the second, so that a pair is probed on one node and
			// across nodes (egress on one Manager, ingress on the other).
			n := newNodes(t, b, f, policy.Options{Deny: policy.DenyReject, Dispatch: d},
				kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 2, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f)})
			sctp, err := sctpAvailable(n.pod(0).NS)
			if err != nil {
				t.Fatal(err)
			}
			protos := []netfilter.Proto{netfilter.ProtoTCP, netfilter.ProtoUDP}
			if sctp {
				protos = append(protos, netfilter.ProtoSCTP)
			} else {
				t.Log("this kernel makes no SCTP sockets: SCTP is not probed")
			}
			var pods []*kerneltest.Pod
			for i := range 4 {
				pods = append(pods, n.pod(i))
				serve(t, n.pod(i).NS, n.addr(n.pod(i)), sctp)
				n.ports[n.pod(i)] = ttPort
			}
			for _, sc := range truthTable() {
				msgs := append([]any{allowAll}, sc.msgs(n)...)
				tiers := sc.tiers(n)
				for i, p := range pods {
					msgs = append(msgs, workload(p, tiers[i], "ns.default"))
				}
				n.send(msgs...)
				// Each case on its own: a flow an earlier case allowed would
				// pass as established, should a probe's ephemeral source
				// port come round again while its entry lives.
				for _, h := range n.topo.Hosts {
					if _, err := h.NS.Exec(context.Background(), "conntrack", "-F"); err != nil {
						t.Fatalf("flushing conntrack in %s: %v", h.NS, err)
					}
				}
				var table strings.Builder
				fmt.Fprintf(&table, "%s (%s %v):\n", sc.name, b.Name, f)
				bad := false
				for i, from := range pods {
					for j, to := range pods {
						if i == j {
							continue
						}
						for _, proto := range protos {
							pkt := policy.Packet{Src: n.addr(from), Dst: n.addr(to), Protocol: proto, SrcPort: 40000, DstPort: ttPort}
							out := n.managerOf(from).Model().Explain(pkt, from.Name, false)
							in := n.managerOf(to).Model().Explain(pkt, to.Name, true)
							want := out.Verdict == policy.Allowed && in.Verdict == policy.Allowed
							got, err := probe(from.NS, proto, netip.AddrPortFrom(n.addr(to), ttPort), want)
							if err != nil {
								t.Fatal(err)
							}
							mark := ""
							if got != want {
								bad, mark = true, "  <-- MISMATCH"
							}
							fmt.Fprintf(&table, "  pod%d → pod%d %s: kernel %v, model %v (egress %v; ingress %v)%s\n", i+1, j+1, proto, got, want, out, in, mark)
						}
					}
				}
				if bad {
					t.Errorf("%s%s", table.String(), b.Dump(t, n.topo.Hosts[0].NS, "filter", f))
				} else {
					t.Log(table.String())
				}
			}
		})
	})
}
