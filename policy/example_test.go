package policy_test

import (
	"context"
	"fmt"
	"regexp"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// A Manager on a loop with its filter Table: one workload whose ingress
// allows TCP port 80 only, and the namespace profile that allows
// everything else. The namespace here is kernelfake's; an agent opens the
// real one with kernel.Open.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4,
		Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
	layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout,
		ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	_ = loop.AddDriver(filter)
	for _, msg := range []any{
		policy.PolicyUpdate{Policy: policy.Policy{ID: "web", Ingress: []policy.Rule{{Action: policy.Allow,
			Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(80)}}}}}},
		policy.ProfileUpdate{Profile: policy.Profile{ID: "ns.demo", Egress: []policy.Rule{{Action: policy.Allow}}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "demo/web-1", Iface: "npv1",
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"web"}}}, Profiles: []string{"ns.demo"}}},
	} {
		_ = loop.Send(ctx, msg)
	}
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)

	for _, chain := range []string{"FORWARD", "np-forward", "np-twd", "np-pi-web"} {
		for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", chain) {
			fmt.Println(chain, hashComment.ReplaceAllString(r, ""))
		}
	}
	// Output:
	// FORWARD -j np-forward
	// np-forward -j MARK --set-xmark 0x0/0x30000
	// np-forward -m comment --comment "forwarded in through host endpoints" -j np-hep-fw-in
	// np-forward -i npv+ -m comment --comment "from workloads" -j np-fwd
	// np-forward -o npv+ -m comment --comment "to workloads" -j np-twd
	// np-forward -m comment --comment "forwarded out through host endpoints" -j np-hep-fw-out
	// np-forward -m mark --mark 0x10000/0x10000 -m comment --comment "allowed by policy" -j ACCEPT
	// np-twd -o npv1 -g np-tw-npv1
	// np-twd -m comment --comment "unknown workload interface" -j DROP
	// np-pi-web -p tcp -m tcp --dport 80 -m comment --comment "web rule 0" -j MARK --set-xmark 0x10000/0x10000
	// np-pi-web -m mark --mark 0x10000/0x10000 -m comment --comment "web rule 0" -j RETURN
}

var hashComment = regexp.MustCompile(`-m comment --comment "np:[A-Za-z0-9_-]{16}" `)
