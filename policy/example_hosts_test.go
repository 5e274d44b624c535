package policy_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// A host endpoint with a pre-DNAT policy, rendered in the mangle table
// (Options.Mangle): the node port 30080 is open to one network before
// kube-proxy's DNAT sends it to a pod, everything else on it is closed;
// the failsafe ports come first. Log rules are rate-limited
// (Options.LogLimit, here 5 a minute).
func ExampleOptions_mangle() {
	ns := kernelfake.New(kernelfake.Options{})
	table := func(name string) *iptables.Table {
		t, _ := iptables.New(iptables.Options{Table: name, Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
		return t
	}
	filter, mangle := table("filter"), table("mangle")
	layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Mangle: mangle, Marks: layout,
		ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"},
		LogLimit: &netfilter.MatchLimit{Rate: 5, Per: netfilter.PerMinute}})
	if err != nil {
		panic(err)
	}
	ports := func(p uint16) policy.Peer { return policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(p)}} }
	for _, msg := range []any{
		policy.PolicyUpdate{Policy: policy.Policy{ID: "nodeport", Ingress: []policy.Rule{
			{Action: policy.Log, Protocol: netfilter.ProtoTCP, Dst: ports(30080)},
			{Action: policy.Allow, Protocol: netfilter.ProtoTCP, Src: policy.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}, Dst: ports(30080)},
			{Action: policy.Deny, Protocol: netfilter.ProtoTCP, Dst: ports(30080)},
		}}},
		policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "eth0", Iface: "eth0",
			PreDNATTiers: []policy.TierPolicies{{Name: "pd", Ingress: []string{"nodeport"}}}}},
	} {
		m.OnUpdate(msg)
	}
	ctx := context.Background()
	if err := m.CompleteDeferredWork(ctx); err != nil {
		panic(err)
	}
	for _, t := range []*iptables.Table{mangle, filter} {
		if _, err := t.Apply(ctx); err != nil {
			panic(err)
		}
	}
	for _, chain := range []string{"PREROUTING", "np-thp-eth0", "np-pi-nodeport"} {
		for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "mangle", chain) {
			fmt.Println(chain, hashComment.ReplaceAllString(r, ""))
		}
	}
	// Output:
	// PREROUTING -j np-mangle-pre
	// np-thp-eth0 -m comment --comment "failsafe ports" -j np-mangle-failsafe-in
	// np-thp-eth0 -j MARK --set-xmark 0x0/0x30000
	// np-thp-eth0 -m comment --comment "tier pd" -j MARK --set-xmark 0x0/0x20000
	// np-thp-eth0 -m mark --mark 0x0/0x30000 -m comment --comment "tier pd" -j np-pi-nodeport
	// np-thp-eth0 -m mark --mark 0x10000/0x10000 -m comment --comment "tier pd" -j RETURN
	// np-pi-nodeport -p tcp -m tcp --dport 30080 -m limit --limit 5/minute --limit-burst 5 -m comment --comment "nodeport rule 0" -j LOG --log-prefix "nodeport 0 "
	// np-pi-nodeport -s 192.0.2.0/24 -p tcp -m tcp --dport 30080 -m comment --comment "nodeport rule 1" -j MARK --set-xmark 0x10000/0x10000
	// np-pi-nodeport -m mark --mark 0x10000/0x10000 -m comment --comment "nodeport rule 1" -j RETURN
	// np-pi-nodeport -p tcp -m tcp --dport 30080 -m comment --comment "nodeport rule 2" -j DROP
}
