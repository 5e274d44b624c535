package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/policy"
)

// IDs as long as a Kubernetes "namespace/name" behind an agent's prefix
// (a 63-byte namespace, a 253-byte name), and a rule name no backend can
// write as is: the policy is in force on both backends. Its comments are
// cut and cleaned (nftables keeps 128 bytes of comment); the policy failed
// closed, denying everything, and the workload was refused.
func TestLongIDsAndOddRuleNames(t *testing.T) {
	tables := map[string]func(ns *kernelfake.Namespace) (netfilter.Table, error){
		"iptables": func(ns *kernelfake.Namespace) (netfilter.Table, error) {
			return iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
		},
		"nftables": func(ns *kernelfake.Namespace) (netfilter.Table, error) {
			return nftables.New(nftables.Options{Name: "np", Family: ipfamily.IPv4, Role: nftables.Filter, ChainPrefix: "np-", Kernel: ns})
		},
	}
	dumps := map[string]func(ns *kernelfake.Namespace) string{
		"iptables": func(ns *kernelfake.Namespace) string {
			out, err := ns.Runner().Run(context.Background(), nil, iptables.BackendNFT.SaveCommand(ipfamily.IPv4))
			require.NoError(t, err)
			return string(out)
		},
		"nftables": func(ns *kernelfake.Namespace) string { return ns.NFTables().Dump() },
	}
	for name, newTable := range tables {
		t.Run(name, func(t *testing.T) {
			ns := kernelfake.New(kernelfake.Options{})
			filter, err := newTable(ns)
			require.NoError(t, err)
			layout, err := markbits.NewLayout(markbits.LayoutOptions{})
			require.NoError(t, err)
			m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout, ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}})
			require.NoError(t, err)
			space, pod := strings.Repeat("n", 63), strings.Repeat("p", 253)
			id := "knp/" + space + "/" + pod
			for _, msg := range []any{
				policy.PolicyUpdate{Policy: policy.Policy{ID: id, Ingress: []policy.Rule{{Action: policy.Allow, Name: `say "hi" \ ` + strings.Repeat("r", 200),
					Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(80)}}}}}},
				policy.WorkloadUpdate{Endpoint: policy.Workload{ID: space + "/" + pod, Iface: "npv1",
					Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{id}}}}},
			} {
				m.OnUpdate(msg)
			}
			require.NoError(t, m.CompleteDeferredWork(context.Background()))
			_, err = filter.Apply(context.Background())
			require.NoError(t, err)
			st, err := filter.(dataplane.Stater).State(context.Background())
			require.NoError(t, err)
			assert.Empty(t, st.Failing)
			assert.Empty(t, st.Drift)
			dump := dumps[name](ns)
			assert.Contains(t, dump, `rule say _hi_ _ rrr`, "the allow rule, its comment cleaned")
			assert.NotContains(t, dump, strings.Repeat("r", 100), "and cut")
			assert.NotContains(t, dump, "fail closed")
		})
	}
}
