//go:build linux

package policy_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// TestKernelPolicyPreDNAT gives a node's host endpoint a pre-DNAT policy
// in the mangle table beside a node port (a DNAT of the node's port 8080
// to a pod's port P) and an apply-on-forward policy that lets in only the
// pod's port Q. Another host then sees, on every backend and family: the
// node port reaches the pod (pre-DNAT judged the port the client asked
// for, and its allow stands for the forward policy, which would deny P);
// P asked directly is dropped by the pre-DNAT deny; Q, which pre-DNAT
// leaves undecided, goes on to the forward policy and reaches; a third
// port is denied there; the failsafe port 22 answers though pre-DNAT
// denies it.
func TestKernelPolicyPreDNAT(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			topo := kerneltest.NewTopology(t, kerneltest.TopologyOptions{Hosts: 2, PodsPerHost: 1, Underlay: kerneltest.UnderlayVeth, Stack: managertest.Stack(f)})
			h1, h2 := topo.Hosts[0], topo.Hosts[1]
			require.NoError(t, topo.AddPodRoutesViaUnderlay())
			k := managertest.Open(t, h1.NS)
			filter := b.NewTable(t, k, "filter", f, "npd-")
			mangle := b.NewTable(t, k, "mangle", f, "npd-")
			nat := b.NewTable(t, k, "nat", f, "npd-")
			layout, err := markbits.NewLayout(markbits.LayoutOptions{})
			require.NoError(t, err)
			m, err := policy.New(policy.Options{Family: f, Filter: filter, Mangle: mangle, Marks: layout, ChainPrefix: "npd-",
				WorkloadPrefixes: []string{kerneltest.DefaultPodIfacePrefix}})
			require.NoError(t, err)

			h1IP := managertest.Pick(f, h1.UnderlayAddrs()...)
			pod := h1.Pods[0]
			podIP := managertest.Pick(f, pod.Addrs()...)
			p, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(podIP, 0))
			q, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(podIP, 0))
			r, _ := pod.NS.ListenTCP(t, netip.AddrPortFrom(podIP, 0))
			ssh, _ := h1.NS.ListenTCP(t, netip.AddrPortFrom(h1IP, 22))
			nodePort := netip.AddrPortFrom(h1IP, 8080)
			require.NoError(t, nat.InsertRules("test", netfilter.HookPrerouting, []netfilter.Rule{{
				Matches: []netfilter.Match{netfilter.Protocol(netfilter.ProtoTCP), netfilter.DestNet(netip.PrefixFrom(h1IP, h1IP.BitLen())),
					netfilter.DestPorts(netfilter.Port(nodePort.Port()))},
				Action: netfilter.DNAT(p)}}))

			tcpTo := func(ports ...uint16) policy.Peer {
				var rs []netfilter.PortRange
				for _, port := range ports {
					rs = append(rs, netfilter.Port(port))
				}
				return policy.Peer{Ports: rs}
			}
			for _, msg := range []any{allowAll,
				workload(pod, nil, "ns.default"),
				policy.PolicyUpdate{Policy: policy.Policy{ID: "nodeport", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: tcpTo(nodePort.Port())},
					{Action: policy.Deny, Protocol: netfilter.ProtoTCP, Dst: tcpTo(p.Port(), 22)},
				}}},
				policy.PolicyUpdate{Policy: policy.Policy{ID: "forward", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: tcpTo(q.Port())},
					{Action: policy.Deny},
				}}},
				policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: h1.UnderlayIf,
					ForwardTiers: []policy.TierPolicies{{Name: "fwd", Ingress: []string{"forward"}}},
					PreDNATTiers: []policy.TierPolicies{{Name: "pd", Ingress: []string{"nodeport"}}}}},
			} {
				m.OnUpdate(msg)
			}
			require.NoError(t, m.CompleteDeferredWork(context.Background()))
			for _, d := range []dataplane.Driver{mangle, nat, filter} {
				_, err := d.Apply(context.Background())
				require.NoError(t, err)
			}
			dump := func() string {
				return b.Dump(t, h1.NS, "mangle", f) + b.Dump(t, h1.NS, "nat", f) + b.Dump(t, h1.NS, "filter", f)
			}
			for _, c := range []struct {
				name string
				to   netip.AddrPort
				want bool
			}{
				{"the node port, to the pod's port P", nodePort, true},
				{"P asked directly (pre-DNAT deny)", p, false},
				{"Q (undecided before DNAT, allowed on forward)", q, true},
				{"a third port (denied on forward)", r, false},
				{"the failsafe port", ssh, true},
			} {
				if got := tcpReaches(t, h2.NS, c.to); got != c.want {
					t.Errorf("host2 → %s (%s): reached = %v, want %v\n%s", c.name, c.to, got, c.want, dump())
				}
			}

			// Without pre-DNAT tiers the node port meets the forward
			// policy, which denies P.
			m.OnUpdate(policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: h1.UnderlayIf,
				ForwardTiers: []policy.TierPolicies{{Name: "fwd", Ingress: []string{"forward"}}}}})
			require.NoError(t, m.CompleteDeferredWork(context.Background()))
			for _, d := range []dataplane.Driver{mangle, filter} {
				_, err := d.Apply(context.Background())
				require.NoError(t, err)
			}
			if tcpReaches(t, h2.NS, nodePort) {
				t.Errorf("the node port without its pre-DNAT allow was reached\n%s", dump())
			}
			if !tcpReaches(t, h2.NS, q) {
				t.Errorf("Q without pre-DNAT tiers was not reached\n%s", dump())
			}
		})
	})
}
