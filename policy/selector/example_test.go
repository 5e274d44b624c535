package selector_test

import (
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

func Example() {
	x := selector.New(selector.Options{})
	_ = x.SetNamespace("shop", map[string]string{"kubernetes.io/metadata.name": "shop"})
	_ = x.SetTier("k8s", 100, policy.Deny)
	_ = x.SetEndpoint(selector.Endpoint{ID: "shop/web-1", Namespace: "shop",
		Labels: map[string]string{"app": "web"}, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5")},
		NamedPorts: []selector.NamedPort{{Name: "http", Protocol: netfilter.ProtoTCP, Port: 8080}},
		Local:      true, Iface: "cali1"})
	_ = x.SetEndpoint(selector.Endpoint{ID: "shop/client-1", Namespace: "shop",
		Labels: map[string]string{"app": "client"}, Addrs: []netip.Addr{netip.MustParseAddr("10.0.1.7")}})

	web := selector.Selector{Endpoint: []selector.Requirement{{Key: "app", Op: selector.Equals, Values: []string{"web"}}}}
	clients := selector.Selector{Endpoint: []selector.Requirement{{Key: "app", Op: selector.In, Values: []string{"client"}}}}
	fmt.Println(clients.String())
	err := x.SetPolicy(selector.Policy{ID: "shop.allow-clients", Tier: "k8s", AppliesTo: web, NoEgress: true,
		Ingress: []selector.Rule{{Action: policy.Allow, Protocol: netfilter.ProtoTCP,
			Src: selector.Peer{Selector: &clients},
			Dst: selector.Peer{Selector: &web, NamedPorts: []selector.PortName{{Protocol: netfilter.ProtoTCP, Name: "http"}}}}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range x.Flush() {
		switch m := msg.(type) {
		case policy.SetUpdate:
			fmt.Println("set", m.Members)
		case policy.PolicyUpdate:
			fmt.Println("policy", m.Policy.ID)
		case policy.ProfileUpdate:
			fmt.Println("profile", m.Profile.ID)
		case policy.WorkloadUpdate:
			t := m.Endpoint.Tiers[0]
			fmt.Println("workload", m.Endpoint.Iface, "tier", t.Name, "ingress", t.Ingress, "egress", t.Egress,
				"profiles", m.Endpoint.Profiles)
		}
	}

	// The client moves: one delta.
	_ = x.SetEndpoint(selector.Endpoint{ID: "shop/client-1", Namespace: "shop",
		Labels: map[string]string{"app": "client"}, Addrs: []netip.Addr{netip.MustParseAddr("10.0.1.8")}})
	for _, msg := range x.Flush() {
		d := msg.(policy.SetDelta)
		fmt.Println("delta", d.ID == selector.SetID(clients), d.Add, d.Remove)
	}
	// Output:
	// app=client
	// set [10.0.0.5,tcp:8080]
	// set [10.0.1.7]
	// set [10.0.0.5]
	// profile ns.shop
	// policy shop.allow-clients
	// workload cali1 tier k8s ingress [shop.allow-clients] egress [] profiles [ns.shop]
	// delta true [10.0.1.8] [10.0.1.7]
}
