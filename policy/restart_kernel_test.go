//go:build linux

package policy_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// TestKernelPolicyRestartAdopts programs policy for workloads and a host
// endpoint (tracked, forwarded, pre-DNAT and untracked tiers, a set) on
// every backend and family beside kube-proxy-like foreign chains in the
// filter, mangle and raw tables (a foreign nftables table on nftables);
// then a new Manager with new drivers, given the same messages, as after a
// restart: every driver plans no write, its Apply leaves the kernel as it
// was, byte for byte, and the foreign rules are all still there.
func TestKernelPolicyRestartAdopts(t *testing.T) {
	managertest.ForEachBackend(t, func(t *testing.T, b managertest.Backend) {
		managertest.ForEachFamily(t, func(t *testing.T, f ipfamily.Family) {
			ctx := context.Background()
			ns := kerneltest.NewNS(t)
			k := managertest.Open(t, ns)
			foreign := addForeign(t, b, ns, f)
			dump := func() string {
				var out strings.Builder
				for _, table := range []string{"filter", "mangle", "raw"} {
					for _, line := range strings.Split(b.Dump(t, ns, table, f), "\n") {
						if !strings.HasPrefix(line, "#") { // iptables-save's dated header
							out.WriteString(line + "\n")
						}
					}
				}
				return out.String()
			}
			net := netip.MustParsePrefix("10.9.0.0/16")
			if f == ipfamily.IPv6 {
				net = netip.MustParsePrefix("fd00:9::/64")
			}
			msgs := []any{allowAll,
				policy.SetUpdate{ID: "clients", Kind: policy.SetNets, Members: []netfilter.Member{netfilter.NetMember(net)}},
				policy.PolicyUpdate{Policy: policy.Policy{ID: "web", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Src: policy.Peer{Sets: []string{"clients"}},
						Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(80), netfilter.Ports(8000, 8080)}}},
					{Action: policy.Log}, {Action: policy.Deny}}}},
				policy.PolicyUpdate{Policy: policy.Policy{ID: "host", Ingress: []policy.Rule{
					{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Src: policy.Peer{Nets: []netip.Prefix{net}}}}}},
				policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth", Iface: "eth0",
					Tiers:          []policy.TierPolicies{{Name: "h", Ingress: []string{"host"}}},
					ForwardTiers:   []policy.TierPolicies{{Name: "f", Ingress: []string{"host"}}},
					PreDNATTiers:   []policy.TierPolicies{{Name: "p", Ingress: []string{"host"}}},
					UntrackedTiers: []policy.TierPolicies{{Name: "u", Ingress: []string{"host"}}}}},
			}
			for i := range 3 {
				msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: fmt.Sprintf("w%d", i), Iface: fmt.Sprintf("npr%d", i),
					Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"web"}}}, Profiles: []string{"ns.default"}}})
			}
			start := func() []dataplane.Driver {
				filter := b.NewTable(t, k, "filter", f, "npr-")
				raw := b.NewTable(t, k, "raw", f, "npr-")
				mangle := b.NewTable(t, k, "mangle", f, "npr-")
				sets := b.Sets(t, k, filter, f, "npr-")
				layout, err := markbits.NewLayout(markbits.LayoutOptions{})
				require.NoError(t, err)
				m, err := policy.New(policy.Options{Family: f, Filter: filter, Raw: raw, Mangle: mangle, Sets: sets, Marks: layout,
					ChainPrefix: "npr-", WorkloadPrefixes: []string{"npr"}})
				require.NoError(t, err)
				for _, msg := range msgs {
					m.OnUpdate(msg)
				}
				require.NoError(t, m.CompleteDeferredWork(ctx))
				return []dataplane.Driver{sets.(dataplane.Driver), raw.(dataplane.Driver), mangle.(dataplane.Driver), filter.(dataplane.Driver)}
			}
			for _, d := range start() {
				_, err := d.Apply(ctx)
				require.NoError(t, err, fmt.Sprintf("%T", d))
			}
			before := dump()
			for _, line := range foreign {
				require.Contains(t, before, line, "the foreign rules beside ours")
			}

			for _, d := range start() {
				planner, ok := d.(dataplane.Planner)
				require.True(t, ok, "%s plans", fmt.Sprintf("%T", d))
				plan, err := planner.Plan(ctx)
				require.NoError(t, err)
				assert.True(t, plan.Empty(), "a restarted %s would write:\n%s", fmt.Sprintf("%T", d), plan)
				_, err = d.Apply(ctx)
				require.NoError(t, err, fmt.Sprintf("%T", d))
			}
			assert.Equal(t, before, dump(), "the restart changed the kernel")
		})
	})
}

// addForeign writes kube-proxy-like rules that are not ours into the
// filter, mangle and raw tables (a table of its own on nftables) and
// returns lines of them as the backend's dump shows them.
func addForeign(t *testing.T, b managertest.Backend, ns *kerneltest.NS, f ipfamily.Family) []string {
	t.Helper()
	ctx := context.Background()
	if b.Name == "nftables" {
		fam := "ip"
		if f == ipfamily.IPv6 {
			fam = "ip6"
		}
		rules := "table " + fam + " kube-proxy {\n chain forward {\n  type filter hook forward priority -110; policy accept;\n  ct state invalid drop\n }\n" +
			" chain mangle-pre {\n  type filter hook prerouting priority -150; policy accept;\n  meta mark set 0x4000\n }\n}\n"
		_, err := ns.ExecInput(ctx, strings.NewReader(rules), "nft", "-f", "-")
		require.NoError(t, err)
		return []string{"table " + fam + " kube-proxy", "ct state invalid drop", "meta mark set 0x00004000"}
	}
	restore := b.Commands[0]
	if f == ipfamily.IPv6 {
		restore = b.Commands[2]
	}
	rules := "*filter\n:KUBE-FORWARD - [0:0]\n-A FORWARD -j KUBE-FORWARD\n-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n" +
		"*mangle\n:KUBE-KUBELET-CANARY - [0:0]\n-A PREROUTING -j KUBE-KUBELET-CANARY\nCOMMIT\n" +
		"*raw\n:KUBE-RAW - [0:0]\n-A PREROUTING -j KUBE-RAW\nCOMMIT\n"
	_, err := ns.ExecInput(ctx, strings.NewReader(rules), restore, "--noflush")
	require.NoError(t, err)
	return []string{"-A FORWARD -j KUBE-FORWARD", "-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP",
		"-A PREROUTING -j KUBE-KUBELET-CANARY", "-A PREROUTING -j KUBE-RAW"}
}
