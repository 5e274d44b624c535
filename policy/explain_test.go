package policy_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

func TestExplain(t *testing.T) {
	a1, a2 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	tcp := func(src netip.Addr, port uint16) policy.Packet {
		return policy.Packet{Src: src, Dst: a2, Protocol: netfilter.ProtoTCP, SrcPort: 40000, DstPort: port}
	}
	m := policy.NewModel()
	for _, msg := range []any{
		policy.SetUpdate{ID: "web", Kind: policy.SetNets, Members: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/30"))}},
		policy.SetUpdate{ID: "http", Kind: policy.SetAddrPorts, Members: []netfilter.Member{netfilter.IPPortMember(a2, netfilter.ProtoTCP, 8080)}},
		policy.PolicyUpdate{Policy: policy.Policy{ID: "admin", Ingress: []policy.Rule{
			{Action: policy.Log, Name: "seen"},
			{Action: policy.Deny, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(22)}}},
			{Action: policy.Pass},
		}}},
		policy.PolicyUpdate{Policy: policy.Policy{ID: "np", Ingress: []policy.Rule{
			{Action: policy.Allow, Src: policy.Peer{Sets: []string{"web"}, NotNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}},
				Dst: policy.Peer{NamedPorts: []string{"http"}}},
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Ports(9000, 9010)}}},
		}}},
		policy.ProfileUpdate{Profile: policy.Profile{ID: "ns", Egress: []policy.Rule{{Action: policy.Allow}}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "pod2", Iface: "npv2", Profiles: []string{"ns"}, Tiers: []policy.TierPolicies{
			{Name: "admin", Ingress: []string{"admin"}},
			{Name: "k8s", Ingress: []string{"np"}},
		}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "down", Iface: "npv3", AdminDown: true}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "lost", Iface: "npv4", Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"gone"}}}}},
	} {
		_, err := m.Update(msg)
		require.NoError(t, err, "%T", msg)
	}
	for _, c := range []struct {
		name    string
		pkt     policy.Packet
		id      string
		ingress bool
		want    string
	}{
		{"admin tier denies ssh", tcp(a1, 22), "pod2", true, "denied: rule (tier admin policy admin rule 1)"},
		{"named port from the set", tcp(a2, 8080), "pod2", true, "allowed: rule (tier k8s policy np rule 0)"},
		{"named port, excluded source", tcp(a1, 8080), "pod2", true, "denied: end of tier (tier k8s)"},
		{"port range", tcp(a1, 9005), "pod2", true, "allowed: rule (tier k8s policy np rule 1)"},
		{"outside the range", tcp(a1, 9011), "pod2", true, "denied: end of tier (tier k8s)"},
		{"egress has no tier: profile", tcp(a1, 1), "pod2", false, "allowed: rule (profile ns rule 0)"},
		{"admin down", tcp(a1, 80), "down", true, "denied: admin down"},
		{"missing policy fails closed", tcp(a1, 80), "lost", true, "denied: policy missing (fail closed) (tier k8s policy gone)"},
		{"unknown endpoint", tcp(a1, 80), "nobody", true, "denied: unknown endpoint"},
	} {
		e := m.Explain(c.pkt, c.id, c.ingress)
		assert.Equal(t, c.want, e.String(), c.name)
	}
	e := m.Explain(tcp(a1, 22), "pod2", true)
	assert.Equal(t, []string{"admin/seen"}, e.Logged, "the Log rule is met and goes on")

	// An end-of-tier Pass goes on to the profiles, which allow nothing
	// in this direction.
	_, err := m.Update(policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "pod2", Iface: "npv2", Profiles: []string{"ns"},
		Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"np"}, EndOfTier: policy.Pass}}}})
	require.NoError(t, err)
	assert.Equal(t, "denied: no profile allowed it", m.Explain(tcp(a1, 1), "pod2", true).String())
}

func ExampleModel_Explain() {
	m := policy.NewModel()
	for _, msg := range []any{
		policy.PolicyUpdate{Policy: policy.Policy{ID: "web", Ingress: []policy.Rule{{
			Action: policy.Allow, Protocol: netfilter.ProtoTCP,
			Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(80)}},
		}}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "default/web-1", Iface: "npv1",
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"web"}}}}},
	} {
		if _, err := m.Update(msg); err != nil {
			fmt.Println(err)
		}
	}
	pkt := policy.Packet{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Protocol: netfilter.ProtoTCP, DstPort: 80}
	fmt.Println(m.Explain(pkt, "default/web-1", true))
	pkt.DstPort = 443
	fmt.Println(m.Explain(pkt, "default/web-1", true))
	// Output:
	// allowed: rule (tier k8s policy web rule 0)
	// denied: end of tier (tier k8s)
}
