package agent

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// TestAgentNetworkPolicyOnKernelFake runs the agent with --network-policy
// on a fake namespace: a NetworkPolicy selecting pod a (allow ingress from
// app=b on the named port http) becomes a policy chain that pod a's
// ingress chain jumps to, matching a set that holds pod b's address; pod b
// keeps only its namespace's profile; a restarted agent writes nothing.
func TestAgentNetworkPolicyOnKernelFake(t *testing.T) {
	podA := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10")},
		Labels: map[string]string{"app": "a"}, Ports: []datastore.ContainerPort{{Name: "http", Port: 8080}}}
	podB := datastore.Pod{Namespace: "demo", Name: "b", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.11")},
		Labels: map[string]string{"app": "b"}}
	remote := datastore.Pod{Namespace: "demo", Name: "c", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.10")},
		Labels: map[string]string{"app": "b"}}
	c := datastore.Cluster{
		Nodes: []datastore.Node{
			{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
			{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}},
		},
		Pods:       []datastore.Pod{podA, podB, remote},
		Pools:      []datastore.Pool{{Name: "v4", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}},
		Namespaces: []datastore.Namespace{{Name: "demo"}},
		NetworkPolicies: []datastore.NetworkPolicy{{Namespace: "demo", Name: "allow-b",
			PodSelector: datastore.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Ingress: []datastore.NetworkPolicyRule{{
				Peers: []datastore.NetworkPolicyPeer{{PodSelector: &datastore.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}},
				Ports: []datastore.NetworkPolicyPort{{Port: "http"}},
			}}}},
	}
	node := newFakeNode(t, c.Nodes[0])
	k := node.k
	node.pod(podA)
	node.pod(podB)
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: "node1", Kernel: k, Listen: "-", StateDir: dir, Netfilter: NetfilterIPTablesLegacy,
		BPFPinDir: filepath.Join(dir, "bpf"), Datastore: &datastore.File{Path: file}, NetworkPolicy: true}
	rules := func(chain string) string {
		return strings.Join(k.IPTables().Rules(iptablesfake.BackendLegacy, ipfamily.IPv4, "filter", chain), "\n")
	}
	ifA, ifB := podA.HostInterface(), podB.HostInterface()
	programmed := func() bool {
		// The policy chains, and the tunnel device's address among the
		// host's (the last thing a first run writes).
		hostIPs, _ := k.IPSets().Members(SetPrefixV4 + "host-ips")
		return strings.Contains(rules(ChainPrefix+"tw-"+ifA), "-j "+ChainPrefix+"pi-") && slices.Contains(hostIPs, "10.244.1.0")
	}

	r := startAgent(t, cfg)
	r.await(t, programmed)
	r.stop(t)

	toA := rules(ChainPrefix + "tw-" + ifA)
	i := strings.Index(toA, "-j "+ChainPrefix+"pi-")
	if i < 0 {
		t.Fatalf("pod a's ingress chain jumps to no policy:\n%s", toA)
	}
	polChain := strings.Fields(toA[i+3:])[0]
	pol := rules(polChain)
	if !strings.Contains(pol, "--match-set") || !strings.Contains(pol, "RETURN") {
		t.Errorf("policy chain %s does not allow from a set:\n%s", polChain, pol)
	}
	if !strings.Contains(rules(ChainPrefix+"tw-"+ifA), "end of tier k8s") {
		t.Errorf("pod a is not isolated by the k8s tier's end:\n%s", toA)
	}
	if toB := rules(ChainPrefix + "tw-" + ifB); strings.Contains(toB, "-j "+ChainPrefix+"pi-") || !strings.Contains(toB, ChainPrefix+"pri-ns.demo") {
		t.Errorf("pod b should have only its namespace's profile:\n%s", toB)
	}
	// The selector's set holds pod b (here) and pod c (on node2); the
	// named port's set holds pod a's http port.
	var peers, named bool
	for _, name := range k.IPSets().Names() {
		members, _ := k.IPSets().Members(name)
		if slices.Equal(members, []string{"10.244.1.11", "10.244.2.10"}) {
			peers = true
		}
		if slices.Equal(members, []string{"10.244.1.10,tcp:8080"}) {
			named = true
		}
	}
	if !peers || !named {
		t.Errorf("sets: peers %v, named port %v; the fake holds %v", peers, named, k.IPSets().Names())
	}
	if dispatch := rules(ChainPrefix + "twd"); !strings.Contains(dispatch, ifA) || !strings.Contains(dispatch, "unknown workload interface") {
		t.Errorf("dispatch:\n%s", dispatch)
	}

	// A restart adopts: no netfilter write.
	k.IPTables().ResetCalls()
	k.IPSets().ResetCalls()
	r = startAgent(t, cfg)
	r.await(t, programmed)
	r.stop(t)
	if w := netfilterWrites(k); w != 0 {
		t.Errorf("the restarted agent wrote netfilter state %d times: %+v %+v", w, k.IPTables().Calls(), k.IPSets().Calls())
	}
}

// ExplainFlow answers from the cluster alone: the NetworkPolicy of
// TestAgentNetworkPolicyOnKernelFake allows app=b to app=a on http only.
func TestExplainFlow(t *testing.T) {
	a := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10")},
		Labels: map[string]string{"app": "a"}, Ports: []datastore.ContainerPort{{Name: "http", Port: 8080}}}
	b := datastore.Pod{Namespace: "demo", Name: "b", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.11")},
		Labels: map[string]string{"app": "b"}}
	other := datastore.Pod{Namespace: "other", Name: "o", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.12")}}
	c := datastore.Cluster{Pods: []datastore.Pod{a, b, other},
		NetworkPolicies: []datastore.NetworkPolicy{{Namespace: "demo", Name: "allow-b",
			PodSelector: datastore.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Ingress: []datastore.NetworkPolicyRule{{
				Peers: []datastore.NetworkPolicyPeer{{PodSelector: &datastore.LabelSelector{MatchLabels: map[string]string{"app": "b"}}}},
				Ports: []datastore.NetworkPolicyPort{{Port: "http"}},
			}}}}}
	for _, tc := range []struct {
		from, to, proto string
		port            uint16
		allowed         bool
		ingress         string
	}{
		{"demo/b", "demo/a", "TCP", 8080, true, "allowed: rule (tier k8s policy demo/allow-b rule 0)"},
		{"demo/b", "demo/a", "TCP", 9090, false, "denied: end of tier (tier k8s)"},
		{"demo/b", "demo/a", "UDP", 8080, false, "denied: end of tier (tier k8s)"},
		{"other/o", "demo/a", "TCP", 8080, false, "denied: end of tier (tier k8s)"},
		{"demo/a", "other/o", "TCP", 80, true, "allowed: rule (profile ns.other rule 0)"},
	} {
		e, err := ExplainFlow(c, tc.from, tc.to, tc.proto, tc.port)
		if err != nil {
			t.Fatal(err)
		}
		if e.Allowed != tc.allowed || e.Ingress.String() != tc.ingress {
			t.Errorf("%s → %s %s/%d: %s; want allowed %v, ingress %q", tc.from, tc.to, tc.proto, tc.port, e, tc.allowed, tc.ingress)
		}
	}
	if _, err := ExplainFlow(c, "demo/a", "demo/nobody", "TCP", 80); err == nil {
		t.Error("an unknown pod is an error")
	}
	if _, err := ExplainFlow(c, "demo/a", "demo/b", "ICMP", 80); err == nil {
		t.Error("an unknown protocol is an error")
	}
}

// Admin policies decide before the NetworkPolicies (Allow and Deny final,
// Pass hands over), the baseline after them, for what no NetworkPolicy
// isolates.
func TestExplainFlowAdminTiers(t *testing.T) {
	a := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10")},
		Labels: map[string]string{"app": "a"}}
	b := datastore.Pod{Namespace: "demo", Name: "b", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.11")},
		Labels: map[string]string{"app": "b"}}
	o := datastore.Pod{Namespace: "other", Name: "o", Node: "node2", IPs: []netip.Addr{netip.MustParseAddr("10.244.2.12")}}
	ns := func(name string) *datastore.LabelSelector {
		return &datastore.LabelSelector{MatchLabels: map[string]string{datastore.NamespaceNameLabel: name}}
	}
	c := datastore.Cluster{Pods: []datastore.Pod{a, b, o},
		// demo/a takes everything by its NetworkPolicy...
		NetworkPolicies: []datastore.NetworkPolicy{{Namespace: "demo", Name: "a-open",
			PodSelector: datastore.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Ingress:     []datastore.NetworkPolicyRule{{}}}},
		// ...but the admins deny namespace other into demo, and pass demo/b on.
		AdminNetworkPolicies: []datastore.AdminNetworkPolicy{{Name: "guard", Priority: 10,
			Subject: datastore.AdminPeer{NamespaceSelector: ns("demo")},
			Ingress: []datastore.AdminRule{
				{Name: "demo-passes", Action: "Pass", Peers: []datastore.AdminPeer{{NamespaceSelector: ns("demo")}}},
				{Name: "others-denied", Action: "Deny", Peers: []datastore.AdminPeer{{NamespaceSelector: ns("other")}}},
			}}},
		// The baseline denies ingress to namespace other.
		BaselineAdminNetworkPolicy: &datastore.AdminNetworkPolicy{Name: "default",
			Subject: datastore.AdminPeer{NamespaceSelector: ns("other")},
			Ingress: []datastore.AdminRule{{Action: "Deny"}}},
	}
	c.Normalize()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to string
		allowed  bool
		ingress  string
	}{
		{"other/o", "demo/a", false, "denied: rule (tier admin policy anp/guard rule 1)"},
		{"demo/b", "demo/a", true, "allowed: rule (tier k8s policy demo/a-open rule 0)"},
		{"demo/a", "other/o", false, "denied: rule (tier baseline policy banp/default rule 0)"},
		{"demo/a", "demo/b", true, "allowed: rule (profile ns.demo rule 0)"}, // passed by admin, no NetworkPolicy, no baseline for demo
	} {
		e, err := ExplainFlow(c, tc.from, tc.to, "TCP", 80)
		if err != nil {
			t.Fatal(err)
		}
		if e.Allowed != tc.allowed || e.Ingress.String() != tc.ingress {
			t.Errorf("%s → %s: %s; want allowed %v, ingress %q", tc.from, tc.to, e, tc.allowed, tc.ingress)
		}
	}
}

// A dual-stack pair's two flows may meet different rules: an ipBlock is of
// one family. ExplainFlowOf judges the flow of the family asked for, and
// names its addresses; ExplainFlow, the source's first family's.
func TestExplainFlowOfEachFamily(t *testing.T) {
	a := datastore.Pod{Namespace: "demo", Name: "a", Node: "node1",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10"), netip.MustParseAddr("fd00:244:1::10")}, Labels: map[string]string{"app": "a"}}
	b := datastore.Pod{Namespace: "demo", Name: "b", Node: "node2",
		IPs: []netip.Addr{netip.MustParseAddr("10.244.2.11"), netip.MustParseAddr("fd00:244:2::11")}}
	c := datastore.Cluster{Pods: []datastore.Pod{a, b},
		NetworkPolicies: []datastore.NetworkPolicy{{Namespace: "demo", Name: "from-v6",
			PodSelector: datastore.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Ingress: []datastore.NetworkPolicyRule{{Peers: []datastore.NetworkPolicyPeer{{IPBlock: &datastore.IPBlock{
				CIDR: netip.MustParsePrefix("fd00:244::/32")}}}}}}}}
	for fam, want := range map[ipfamily.Family]bool{ipfamily.IPv4: false, ipfamily.IPv6: true} {
		e, err := ExplainFlowOf(c, "demo/b", "demo/a", "TCP", 80, fam)
		if err != nil {
			t.Fatal(err)
		}
		if e.Allowed != want || ipfamily.Of(e.Src) != fam || ipfamily.Of(e.Dst) != fam {
			t.Errorf("%v: %s; want allowed %v", fam, e, want)
		}
	}
	if e, err := ExplainFlow(c, "demo/b", "demo/a", "TCP", 80); err != nil || e.Src != b.IPs[0] || e.Allowed {
		t.Errorf("ExplainFlow: %s, %v", e, err)
	}
	one := c
	one.Pods = []datastore.Pod{a, {Namespace: "demo", Name: "b", Node: "node2", IPs: b.IPs[:1]}}
	if _, err := ExplainFlowOf(one, "demo/b", "demo/a", "TCP", 80, ipfamily.IPv6); err == nil {
		t.Error("a pod without an IPv6 address: no IPv6 flow to explain")
	}
}
