package policy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/managertest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/policy"
)

// fakeNode is a Manager on an iptables filter Table of kernelfake.
type fakeNode struct {
	t      *testing.T
	ns     *kernelfake.Namespace
	f      ipfamily.Family
	filter *iptables.Table
	m      *policy.Manager
}

func newFakeNode(t *testing.T, f ipfamily.Family) *fakeNode {
	return newFakeNodeWith(t, f, func(*policy.Options) {})
}

// newFakeNodeWith is newFakeNode with the Manager's options changed by
// change.
func newFakeNodeWith(t *testing.T, f ipfamily.Family, change func(*policy.Options)) *fakeNode {
	return newFakeNodeWithOn(t, kernelfake.New(kernelfake.Options{}), f, change)
}

// newFakeNodeWithOn is newFakeNodeWith on namespace ns.
func newFakeNodeWithOn(t *testing.T, ns *kernelfake.Namespace, f ipfamily.Family, change func(*policy.Options)) *fakeNode {
	filter, err := iptables.New(iptables.Options{Table: "filter", Family: f, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
	require.NoError(t, err)
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	opts := policy.Options{Family: f, Filter: filter, Marks: layout, ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}}
	change(&opts)
	m, err := policy.New(opts)
	require.NoError(t, err)
	return &fakeNode{t: t, ns: ns, f: f, filter: filter, m: m}
}

// send feeds msgs and returns CompleteDeferredWork's error.
func (n *fakeNode) send(msgs ...any) error {
	for _, msg := range msgs {
		n.m.OnUpdate(msg)
	}
	return n.m.CompleteDeferredWork(context.Background())
}

func (n *fakeNode) apply() {
	n.t.Helper()
	_, err := n.filter.Apply(context.Background())
	require.NoError(n.t, err)
}

func (n *fakeNode) plan() dataplane.Plan {
	n.t.Helper()
	p, err := n.filter.Plan(context.Background())
	require.NoError(n.t, err)
	return p
}

func (n *fakeNode) chain(name string) []string {
	var out []string
	for _, r := range n.ns.IPTables().Rules(iptablesfake.BackendNFT, n.f, "filter", name) {
		out = append(out, hashComment.ReplaceAllString(r, ""))
	}
	return out
}

func TestNewRefusesBadOptions(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	filter, err := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
	require.NoError(t, err)
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	good := policy.Options{Family: ipfamily.IPv4, Filter: filter, Marks: layout, ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}}
	_, err = policy.New(good)
	require.NoError(t, err)
	for name, change := range map[string]func(o *policy.Options){
		"no family":           func(o *policy.Options) { o.Family = 0 },
		"no filter":           func(o *policy.Options) { o.Filter = nil },
		"no prefix":           func(o *policy.Options) { o.ChainPrefix = "" },
		"long prefix":         func(o *policy.Options) { o.ChainPrefix = "nodeplane-" },
		"no workload prefix":  func(o *policy.Options) { o.WorkloadPrefixes = nil },
		"bad workload prefix": func(o *policy.Options) { o.WorkloadPrefixes = []string{"np v"} },
		"no accept bit":       func(o *policy.Options) { o.Marks.Accept = 0 },
		"two-bit pass":        func(o *policy.Options) { o.Marks.Pass = 0x30000 },
		"same bits":           func(o *policy.Options) { o.Marks.Pass = o.Marks.Accept },
		"unknown deny":        func(o *policy.Options) { o.Deny = 9 },
		"unknown to-host":     func(o *policy.Options) { o.EndpointToHost = 9 },
		"log limit no period": func(o *policy.Options) { o.LogLimit = &netfilter.MatchLimit{Rate: 1} },
		"log limit too fast":  func(o *policy.Options) { o.LogLimit = &netfilter.MatchLimit{Rate: 20000, Per: netfilter.PerSecond} },
	} {
		o := good
		change(&o)
		_, err := policy.New(o)
		assert.ErrorIs(t, err, policy.ErrInvalidOptions, name)
	}
}

// One bad message is refused alone and reported once; the good ones of
// the same batch are declared.
func TestBadMessageRefusedAlone(t *testing.T) {
	n := newFakeNode(t, ipfamily.IPv4)
	err := n.send(
		policy.PolicyUpdate{Policy: policy.Policy{ID: "bad", Ingress: []policy.Rule{{Action: policy.Allow,
			Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(80)}}}}}}, // ports without a protocol
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w", Iface: "npv1", Profiles: []string{"p"}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w2", Iface: "npv1"}}, // another's interface
		policy.ProfileUpdate{Profile: policy.Profile{ID: "p", Ingress: []policy.Rule{{Action: policy.Allow}}}},
	)
	assert.ErrorIs(t, err, policy.ErrInvalidPolicy)
	assert.ErrorIs(t, err, policy.ErrInvalidRule)
	assert.ErrorIs(t, err, policy.ErrInvalidEndpoint)
	assert.NoError(t, n.send(), "reported once")
	n.apply()
	assert.Equal(t, []string{"-o npv1 -g np-tw-npv1", `-m comment --comment "unknown workload interface" -j DROP`}, n.chain("np-twd"))
	assert.Contains(t, strings.Join(n.chain("np-tw-npv1"), "\n"), "-j np-pri-p")
}

// A workload whose interface no workload prefix starts would get chains
// that no dispatch rule reaches: it is refused, and the workload that was
// there before keeps its chains.
func TestWorkloadOutsidePrefixesRefused(t *testing.T) {
	n := newFakeNode(t, ipfamily.IPv4)
	require.NoError(t, n.send(policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w", Iface: "npv1"}}))
	err := n.send(policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w", Iface: "cali1"}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "x", Iface: "eth0"}})
	require.ErrorIs(t, err, policy.ErrInvalidEndpoint)
	assert.ErrorContains(t, err, `"cali1"`)
	assert.ErrorContains(t, err, `"eth0"`)
	n.apply()
	w, ok := n.m.Model().Workload("w")
	assert.True(t, ok)
	assert.Equal(t, "npv1", w.Iface, "the refused update changed nothing")
	_, ok = n.m.Model().Workload("x")
	assert.False(t, ok)
	assert.Equal(t, []string{"-o npv1 -g np-tw-npv1", `-m comment --comment "unknown workload interface" -j DROP`}, n.chain("np-twd"))
	assert.Empty(t, n.chain("np-tw-cali1"))
	assert.Empty(t, n.chain("np-tw-eth0"))
}

// A host endpoint update the Manager cannot render (untracked tiers
// without Options.Raw, pre-DNAT tiers without Options.Mangle, or a
// workload's interface) is refused and changes nothing: the endpoint it
// would replace stays in force, its chains and dispatch unchanged.
func TestHostEndpointUpdateRefusedChangesNothing(t *testing.T) {
	n := newFakeNode(t, ipfamily.IPv4)
	hep := policy.HostEndpoint{ID: "hep0", Iface: "eth0"}
	require.NoError(t, n.send(policy.HostEndpointUpdate{Endpoint: hep}))
	n.apply()
	dispatch, chain := n.chain("np-thd"), n.chain("np-th-eth0")
	require.NotEmpty(t, chain)
	tiers := []policy.TierPolicies{{Name: "t", Ingress: []string{"p"}}}
	for what, bad := range map[string]policy.HostEndpoint{
		"untracked without Raw":    {ID: "hep0", Iface: "eth0", UntrackedTiers: tiers},
		"pre-DNAT without Mangle":  {ID: "hep0", Iface: "eth0", PreDNATTiers: tiers},
		"a workload's interface":   {ID: "hep0", Iface: "npv1"},
		"another, on a workload's": {ID: "hep1", Iface: "npv2"},
	} {
		err := n.send(policy.HostEndpointUpdate{Endpoint: bad})
		require.ErrorIs(t, err, policy.ErrInvalidEndpoint, what)
		assert.NoError(t, n.send(), "reported once")
		n.apply()
		got, ok := n.m.Model().HostEndpoint("hep0")
		assert.True(t, ok, what)
		assert.Equal(t, hep, got, what)
		_, ok = n.m.Model().HostEndpoint("hep1")
		assert.False(t, ok, what)
		assert.Equal(t, dispatch, n.chain("np-thd"), what)
		assert.Equal(t, chain, n.chain("np-th-eth0"), what)
	}
}

// A set member of every address (a /0, which a hash:net set cannot hold)
// is written as its family's two halves; adding and removing it later
// does the same.
func TestSetOfEveryAddress(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	sets := managertest.FakeSets(t, ns, ipfamily.IPv4, "np4-")
	n := newFakeNodeWithOn(t, ns, ipfamily.IPv4, func(o *policy.Options) { o.Sets = sets })
	every := netfilter.NetMember(netip.MustParsePrefix("0.0.0.0/0"))
	require.NoError(t, n.send(policy.SetUpdate{ID: "all", Kind: policy.SetNets, Members: []netfilter.Member{every}}))
	_, err := sets.Apply(context.Background())
	require.NoError(t, err)
	name, err := sets.KernelName("all")
	require.NoError(t, err)
	members := func() []string {
		m, ok := n.ns.IPSets().Members(name)
		require.True(t, ok, "set %s", name)
		return m
	}
	assert.ElementsMatch(t, []string{"0.0.0.0/1", "128.0.0.0/1"}, members())
	require.NoError(t, n.send(policy.SetDelta{ID: "all", Remove: []netfilter.Member{every},
		Add: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.0/8"))}}))
	_, err = sets.Apply(context.Background())
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"10.0.0.0/8"}, members())
}

// Two workloads that swap interfaces in one pass each get the chains of
// their new interface, whichever is declared first, and a later pass has
// nothing to write.
func TestWorkloadsSwapInterfaces(t *testing.T) {
	for _, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			n := newFakeNode(t, ipfamily.IPv4)
			deny := policy.Workload{ID: order[0], Iface: "npva", Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{"deny"}}}}
			open := policy.Workload{ID: order[1], Iface: "npvb", Profiles: []string{"open"}}
			require.NoError(t, n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "deny"}},
				policy.ProfileUpdate{Profile: policy.Profile{ID: "open", Ingress: []policy.Rule{{Action: policy.Allow}}}},
				policy.WorkloadUpdate{Endpoint: deny}, policy.WorkloadUpdate{Endpoint: open}))
			n.apply()
			deny.Iface, open.Iface = "npvb", "npva"
			require.NoError(t, n.send(policy.WorkloadRemove{ID: deny.ID}, policy.WorkloadRemove{ID: open.ID},
				policy.WorkloadUpdate{Endpoint: deny}, policy.WorkloadUpdate{Endpoint: open}))
			n.apply()
			assert.Contains(t, strings.Join(n.chain("np-tw-npvb"), "\n"), "-j np-pi-deny")
			assert.NotContains(t, strings.Join(n.chain("np-tw-npvb"), "\n"), "np-pri-open")
			assert.Contains(t, strings.Join(n.chain("np-tw-npva"), "\n"), "-j np-pri-open")
			assert.NotContains(t, strings.Join(n.chain("np-tw-npva"), "\n"), "np-pi-deny")
			assert.NotEmpty(t, n.chain("np-fw-npva"))
			assert.NotEmpty(t, n.chain("np-fw-npvb"))
			require.NoError(t, n.send())
			assert.Empty(t, n.plan().Writes, "converged")
		})
	}
}

// A change costs what it changes: one policy changed rewrites only its
// chain; nothing changed writes nothing.
func TestUpdatesAreIncremental(t *testing.T) {
	n := newFakeNode(t, ipfamily.IPv4)
	var msgs []any
	for _, id := range []string{"a", "b", "c"} {
		msgs = append(msgs, policy.PolicyUpdate{Policy: policy.Policy{ID: id, Ingress: []policy.Rule{{Action: policy.Allow, Protocol: netfilter.ProtoTCP}}}})
	}
	for i, iface := range []string{"npv1", "npv2", "npv3"} {
		msgs = append(msgs, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: iface, Iface: iface,
			Tiers: []policy.TierPolicies{{Name: "k8s", Ingress: []string{[]string{"a", "b", "c"}[i], "a"}}}}})
	}
	require.NoError(t, n.send(msgs...))
	n.apply()
	require.NoError(t, n.send())
	assert.Empty(t, n.plan().Writes, "nothing changed")

	require.NoError(t, n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "b", Ingress: []policy.Rule{{Action: policy.Deny, Protocol: netfilter.ProtoUDP}}}}))
	p := n.plan()
	require.NotEmpty(t, p.Writes)
	for _, w := range p.Writes {
		assert.Contains(t, w.String(), "np-pi-b", "only policy b's chain is written")
	}
	n.apply()
	assert.Equal(t, []string{`-p udp -m comment --comment "b rule 0" -j DROP`}, n.chain("np-pi-b"))

	// An endpoint added: its chains and the dispatch chains.
	require.NoError(t, n.send(policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "npv4", Iface: "npv4"}}))
	for _, w := range n.plan().Writes {
		s := w.String()
		assert.True(t, strings.Contains(s, "npv4") || strings.Contains(s, "np-fwd") || strings.Contains(s, "np-twd"), s)
	}
}

// Each family renders its own: a rule whose networks are all of the other
// family is left out, other-family exclusions are dropped, ICMP rules go
// to their family, and more than seven port ranges are split.
func TestFamiliesRenderApart(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")
	pol := policy.PolicyUpdate{Policy: policy.Policy{ID: "p", Ingress: []policy.Rule{
		{Action: policy.Allow, Name: "v4-only", Src: policy.Peer{Nets: []netip.Prefix{v4}}},
		{Action: policy.Allow, Name: "both", Src: policy.Peer{Nets: []netip.Prefix{v4, v6}, NotNets: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}},
		{Action: policy.Allow, Name: "icmp", Protocol: netfilter.ProtoICMP, ICMP: &policy.ICMP{Type: 8}},
		{Action: policy.Deny, Name: "ports", Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{
			netfilter.Port(1), netfilter.Port(2), netfilter.Port(3), netfilter.Port(4), netfilter.Port(5),
			netfilter.Port(6), netfilter.Port(7), netfilter.Ports(100, 200)}}},
	}}}
	w := policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w", Iface: "npv1", Tiers: []policy.TierPolicies{{Name: "t", Ingress: []string{"p"}}}}}
	for _, f := range ipfamily.All {
		n := newFakeNode(t, f)
		require.NoError(t, n.send(pol, w))
		n.apply()
		text := strings.Join(n.chain("np-pi-p"), "\n")
		assert.Equal(t, f == ipfamily.IPv4, strings.Contains(text, "v4-only"), "%v: the v4-only rule", f)
		assert.Equal(t, f == ipfamily.IPv4, strings.Contains(text, "icmp"), "%v: the ICMP rule", f)
		assert.Equal(t, f == ipfamily.IPv4, strings.Contains(text, "10.1.0.0/16"), "%v: the IPv4 exclusion", f)
		assert.Contains(t, text, `"p rule both"`)
		assert.Equal(t, 2, strings.Count(text, `"p rule ports" -j MARK --set-xmark 0x40000/0x40000`),
			"%v: eight ranges in two rules, at most seven each:\n%s", f, text)
	}
}

// A Log rule logs at most Options.LogLimit packets: the limit comes last,
// after the rule's own criteria, so only the packets it picks spend
// tokens; a Rate of 0 lifts it.
func TestLogRulesAreLimited(t *testing.T) {
	logged := policy.PolicyUpdate{Policy: policy.Policy{ID: "audit", Ingress: []policy.Rule{
		{Action: policy.Log, Protocol: netfilter.ProtoTCP, Dst: policy.Peer{Ports: []netfilter.PortRange{netfilter.Port(22)}}},
		{Action: policy.Allow},
	}}}
	for name, tc := range map[string]struct {
		limit *netfilter.MatchLimit
		want  string
	}{
		"default": {nil, "-p tcp -m tcp --dport 22 -m limit --limit 10/second --limit-burst 20 -m comment "},
		"chosen":  {&netfilter.MatchLimit{Rate: 3, Per: netfilter.PerMinute}, "-p tcp -m tcp --dport 22 -m limit --limit 3/minute --limit-burst 5 -m comment "},
		"none":    {&netfilter.MatchLimit{}, "-p tcp -m tcp --dport 22 -m comment "},
	} {
		n := newFakeNodeWith(t, ipfamily.IPv4, func(o *policy.Options) { o.LogLimit = tc.limit })
		require.NoError(t, n.send(logged, policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "w", Iface: "npv1",
			Tiers: []policy.TierPolicies{{Name: "t", Ingress: []string{"audit"}}}}}), name)
		n.apply()
		rules := n.chain("np-pi-audit")
		require.NotEmpty(t, rules, name)
		assert.True(t, strings.HasPrefix(rules[0], tc.want), "%s: %q", name, rules[0])
		assert.Contains(t, rules[0], "-j LOG --log-prefix \"audit 0 \"", name)
		assert.Contains(t, strings.Join(rules[1:], "\n"), "MARK", "%s: the allow after it is not limited", name)
		assert.NotContains(t, strings.Join(rules[1:], "\n"), "limit", name)
	}
}

// An untracked policy the raw table refuses (on nftables, a set its rules
// name lives in another table) is a chain that drops there (fail closed),
// as a refused policy is in the filter table, not a missing one.
func TestUntrackedPolicyRefusedFailsClosed(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	newTable := func(name string, role nftables.Role) *nftables.Table {
		tbl, err := nftables.New(nftables.Options{Name: name, Family: ipfamily.IPv4, Role: role, ChainPrefix: "np-", Kernel: ns})
		require.NoError(t, err)
		return tbl
	}
	filter, raw := newTable("np-filter", nftables.Filter), newTable("np-raw", nftables.Raw)
	sets, err := nftables.NewIPSets(filter, nftables.IPSetsOptions{})
	require.NoError(t, err)
	layout, err := markbits.NewLayout(markbits.LayoutOptions{})
	require.NoError(t, err)
	m, err := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Raw: raw, Sets: sets, Marks: layout,
		ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}})
	require.NoError(t, err)
	for _, msg := range []any{
		policy.SetUpdate{ID: "peers", Kind: policy.SetNets, Members: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.1.0.0/24"))}},
		policy.PolicyUpdate{Policy: policy.Policy{ID: "u", Ingress: []policy.Rule{{Action: policy.Deny, Protocol: netfilter.ProtoTCP,
			Src: policy.Peer{Sets: []string{"peers"}}}}}},
		policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "hep0", Iface: "eth0",
			UntrackedTiers: []policy.TierPolicies{{Name: "u", Ingress: []string{"u"}}}}},
	} {
		m.OnUpdate(msg)
	}
	err = m.CompleteDeferredWork(context.Background())
	require.ErrorContains(t, err, "u in the untracked table denies all")
	for _, d := range []dataplane.Driver{sets, filter, raw} {
		_, err := d.Apply(context.Background())
		require.NoError(t, err, "the fail-closed chain is written")
	}
	dump := ns.NFTables().Dump()
	rawDump := dump[strings.Index(dump, "table ip np-raw"):]
	i := strings.Index(rawDump, "chain np-pi-u\n")
	require.NotEqual(t, -1, i, "%s", dump)
	rules := strings.Split(strings.TrimSpace(rawDump[i:]), "\n")[1:]
	require.NotEmpty(t, rules)
	assert.Contains(t, rules[0], "policy u was refused: fail closed", dump)
	assert.NotContains(t, rules[1], "np:", "one rule: %s", dump)
}

// Untracked policy is the host's own traffic's: raw PREROUTING returns for
// a packet whose destination is not a local address (forwarded: it stays
// tracked and meets the forwarded stages and the workloads' policy) before
// it dispatches to the host endpoints; raw OUTPUT (the host's own packets)
// needs no such test.
func TestUntrackedPolicyIsForTheHostOnly(t *testing.T) {
	ns := kernelfake.New(kernelfake.Options{})
	raw := managertest.FakeTable(t, ns, "raw", ipfamily.IPv4, "np-")
	n := newFakeNodeWithOn(t, ns, ipfamily.IPv4, func(o *policy.Options) { o.Raw = raw })
	require.NoError(t, n.send(policy.PolicyUpdate{Policy: policy.Policy{ID: "u", Ingress: []policy.Rule{{Action: policy.Allow}}}},
		policy.HostEndpointUpdate{Endpoint: policy.HostEndpoint{ID: "hep0", Iface: "eth0",
			UntrackedTiers: []policy.TierPolicies{{Name: "u", Ingress: []string{"u"}}}}}))
	n.apply()
	_, err := raw.Apply(context.Background())
	require.NoError(t, err)
	rules := func(chain string) []string {
		var out []string
		for _, r := range ns.IPTables().Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "raw", chain) {
			out = append(out, hashComment.ReplaceAllString(r, ""))
		}
		return out
	}
	pre := strings.Join(rules("np-raw-pre"), "\n")
	notLocal := strings.Index(pre, "! --dst-type LOCAL")
	dispatch := strings.Index(pre, "-j np-thud")
	require.NotEqual(t, -1, notLocal, pre)
	require.NotEqual(t, -1, dispatch, pre)
	assert.Less(t, notLocal, dispatch, "the forwarded return comes before the dispatch:\n%s", pre)
	assert.NotContains(t, strings.Join(rules("np-raw-out"), "\n"), "dst-type", "raw OUTPUT tests no destination")
}
