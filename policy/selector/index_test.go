package selector_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func ip(s string) netfilter.Member {
	a := addr(s)
	return netfilter.NetMember(netip.PrefixFrom(a, a.BitLen()))
}

func sel(reqs ...selector.Requirement) *selector.Selector { return &selector.Selector{Endpoint: reqs} }

// feed applies msgs to m and fails on a message the model refuses.
func feed(t *testing.T, m *policy.Model, msgs []any) {
	t.Helper()
	for _, msg := range msgs {
		known, err := m.Update(msg)
		require.True(t, known, "%T", msg)
		require.NoError(t, err, "%#v", msg)
	}
}

// allowFrom is a policy on the endpoints of applies that allows ingress
// from the endpoints of from.
func allowFrom(id string, applies selector.Selector, from *selector.Selector) selector.Policy {
	return selector.Policy{ID: id, Tier: "default", AppliesTo: applies,
		Ingress: []selector.Rule{{Action: policy.Allow, Src: selector.Peer{Selector: from}}}}
}

func TestIndexEndpointAddRemoveAndRelabel(t *testing.T) {
	x := selector.New(selector.Options{})
	m := policy.NewModel()
	clients := sel(req("app", selector.Equals, "client"))
	require.NoError(t, x.SetPolicy(allowFrom("p", selector.Selector{}, clients)))
	msgs := x.Flush()
	id := selector.SetID(*clients)
	require.Equal(t, []any{
		policy.SetUpdate{ID: id, Kind: policy.SetNets},
		policy.PolicyUpdate{Policy: policy.Policy{ID: "p", Ingress: []policy.Rule{{Action: policy.Allow, Src: policy.Peer{Sets: []string{id}}}}}},
	}, msgs)
	feed(t, m, msgs)
	require.Nil(t, x.Flush(), "nothing changed")

	c1 := selector.Endpoint{ID: "c1", Namespace: "a", Labels: map[string]string{"app": "client"},
		Addrs: []netip.Addr{addr("10.0.0.1"), addr("fd00::1")}}
	require.NoError(t, x.SetEndpoint(c1))
	require.Equal(t, []any{policy.SetDelta{ID: id, Add: []netfilter.Member{ip("10.0.0.1"), ip("fd00::1")}}}, x.Flush())
	require.NoError(t, x.SetEndpoint(c1))
	require.Nil(t, x.Flush(), "the same endpoint again")

	// A second endpoint with a shared address: the member stays until both go.
	c2 := selector.Endpoint{ID: "c2", Namespace: "a", Labels: map[string]string{"app": "client"}, Addrs: []netip.Addr{addr("10.0.0.1")}}
	require.NoError(t, x.SetEndpoint(c2))
	require.Nil(t, x.Flush())
	x.RemoveEndpoint("c1")
	require.Equal(t, []any{policy.SetDelta{ID: id, Remove: []netfilter.Member{ip("fd00::1")}}}, x.Flush())

	// Relabel c2 out of the selector, and back in within one Flush: nothing.
	c2.Labels = map[string]string{"app": "server"}
	require.NoError(t, x.SetEndpoint(c2))
	c2.Labels = map[string]string{"app": "client", "v": "2"}
	require.NoError(t, x.SetEndpoint(c2))
	require.Nil(t, x.Flush())
	c2.Labels = map[string]string{"app": "server"}
	require.NoError(t, x.SetEndpoint(c2))
	require.Equal(t, []any{policy.SetDelta{ID: id, Remove: []netfilter.Member{ip("10.0.0.1")}}}, x.Flush())
	x.RemoveEndpoint("c2")
	x.RemoveEndpoint("never")
	require.Nil(t, x.Flush())
}

func TestIndexNamespaceRelabel(t *testing.T) {
	x := selector.New(selector.Options{})
	prod := &selector.Selector{Namespace: []selector.Requirement{req("env", selector.Equals, "prod")}}
	notDev := &selector.Selector{Namespace: []selector.Requirement{req("env", selector.NotEquals, "dev")}}
	require.NoError(t, x.SetPolicy(allowFrom("p", selector.Selector{}, prod)))
	require.NoError(t, x.SetPolicy(allowFrom("q", selector.Selector{}, notDev)))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "e", Namespace: "shop", Addrs: []netip.Addr{addr("10.0.0.9")}}))
	m := policy.NewModel()
	feed(t, m, x.Flush())
	pid, qid := selector.SetID(*prod), selector.SetID(*notDev)
	require.Empty(t, m.SetMembers(pid), "no namespace labels yet")
	require.Equal(t, []netfilter.Member{ip("10.0.0.9")}, m.SetMembers(qid), "env absent: != dev holds")

	require.NoError(t, x.SetNamespace("shop", map[string]string{"env": "prod"}))
	msgs := x.Flush()
	require.Equal(t, []any{policy.SetDelta{ID: pid, Add: []netfilter.Member{ip("10.0.0.9")}}}, msgs)
	feed(t, m, msgs)
	require.NoError(t, x.SetNamespace("shop", map[string]string{"env": "prod"}))
	require.Nil(t, x.Flush())

	require.NoError(t, x.SetNamespace("shop", map[string]string{"env": "dev"}))
	msgs = x.Flush()
	require.ElementsMatch(t, []any{
		policy.SetDelta{ID: pid, Remove: []netfilter.Member{ip("10.0.0.9")}},
		policy.SetDelta{ID: qid, Remove: []netfilter.Member{ip("10.0.0.9")}},
	}, msgs)
	feed(t, m, msgs)
	x.RemoveNamespace("shop")
	msgs = x.Flush()
	require.Equal(t, []any{policy.SetDelta{ID: qid, Add: []netfilter.Member{ip("10.0.0.9")}}}, msgs)
	require.ErrorIs(t, x.SetNamespace("", nil), selector.ErrInvalidNamespace)
	require.ErrorIs(t, x.SetNamespace("n", map[string]string{"a b": "x"}), selector.ErrInvalidNamespace)
}

func TestIndexWorkloadsTiersAndPolicyRemoval(t *testing.T) {
	x := selector.New(selector.Options{})
	m := policy.NewModel()
	require.NoError(t, x.SetTier("admin", 10, policy.Pass))
	require.NoError(t, x.SetTier("k8s", 100, policy.Deny))
	require.NoError(t, x.SetTier("baseline", 1000, policy.Deny))
	web := selector.Selector{Endpoint: []selector.Requirement{req("app", selector.Equals, "web")}}
	db := sel(req("app", selector.Equals, "db"))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "w", Namespace: "shop", Labels: map[string]string{"app": "web"},
		Addrs: []netip.Addr{addr("10.0.0.1")}, Local: true, Iface: "cali1"}))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "d", Namespace: "shop", Labels: map[string]string{"app": "db"},
		Addrs: []netip.Addr{addr("10.0.0.2")}}))
	feed(t, m, x.Flush())
	w, ok := m.Workload("w")
	require.True(t, ok)
	require.Equal(t, policy.Workload{ID: "w", Iface: "cali1", Profiles: []string{"ns.shop"}}, w, "no tier applies")
	_, ok = m.Profile("ns.shop")
	require.True(t, ok)

	b := allowFrom("b", web, db)
	b.Tier, b.Order = "k8s", 2
	a := allowFrom("a", web, db)
	a.Tier, a.Order, a.NoEgress = "k8s", 2, true
	z := allowFrom("z", web, db)
	z.Tier, z.Order = "k8s", 1
	adm := allowFrom("adm", selector.Selector{}, nil)
	adm.Tier, adm.NoIngress = "admin", true
	other := allowFrom("other", selector.Selector{Endpoint: []selector.Requirement{req("app", selector.Equals, "none")}}, db)
	other.Tier = "baseline"
	for _, p := range []selector.Policy{b, a, z, adm, other} {
		require.NoError(t, x.SetPolicy(p))
	}
	feed(t, m, x.Flush())
	w, _ = m.Workload("w")
	require.Equal(t, []policy.TierPolicies{
		{Name: "admin", Egress: []string{"adm"}, EndOfTier: policy.Pass},
		{Name: "k8s", Ingress: []string{"z", "a", "b"}, Egress: []string{"z", "b"}, EndOfTier: policy.Deny},
	}, w.Tiers, "tiers by order, policies by order then ID, baseline left out")
	dbSet := selector.SetID(*db)
	require.Equal(t, []netfilter.Member{ip("10.0.0.2")}, m.SetMembers(dbSet))
	require.Equal(t, []string{"a", "adm", "b", "other", "z"}, m.PolicyIDs())

	// Tier order changes reorder the workload's tiers.
	require.NoError(t, x.SetTier("admin", 200, policy.Pass))
	feed(t, m, x.Flush())
	w, _ = m.Workload("w")
	require.Equal(t, []string{"k8s", "admin"}, []string{w.Tiers[0].Name, w.Tiers[1].Name})

	// Removing policies frees the set only with its last user.
	for _, id := range []string{"a", "b", "z"} {
		x.RemovePolicy(id)
	}
	msgs := x.Flush()
	require.NotContains(t, msgs, policy.SetRemove{ID: dbSet}, "policy other still uses it")
	feed(t, m, msgs)
	x.RemovePolicy("other")
	msgs = x.Flush()
	require.Contains(t, msgs, policy.SetRemove{ID: dbSet})
	require.Equal(t, policy.SetRemove{ID: dbSet}, msgs[len(msgs)-1], "sets go last")
	feed(t, m, msgs)
	_, ok = m.Set(dbSet)
	require.False(t, ok)
	w, _ = m.Workload("w")
	require.Equal(t, []policy.TierPolicies{{Name: "admin", Egress: []string{"adm"}, EndOfTier: policy.Pass}}, w.Tiers)
	require.Equal(t, []string{"adm"}, m.PolicyIDs())

	// The endpoint leaves the node: its workload and profile go.
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "w", Namespace: "shop", Labels: map[string]string{"app": "web"},
		Addrs: []netip.Addr{addr("10.0.0.1")}}))
	msgs = x.Flush()
	require.Equal(t, []any{policy.WorkloadRemove{ID: "w"}, policy.ProfileRemove{ID: "ns.shop"}}, msgs)
	feed(t, m, msgs)
	require.Empty(t, m.Workloads())
}

func TestIndexNamedPortsResolvedOnOwner(t *testing.T) {
	x := selector.New(selector.Options{})
	http := selector.PortName{Protocol: netfilter.ProtoTCP, Name: "http"}
	backends := sel(req("role", selector.Exists))
	require.NoError(t, x.SetPolicy(selector.Policy{ID: "p", Tier: "t", AppliesTo: selector.Selector{},
		Egress: []selector.Rule{
			{Action: policy.Allow, Dst: selector.Peer{Selector: backends, NamedPorts: []selector.PortName{http}}},
			{Action: policy.Deny, Dst: selector.Peer{NotNamedPorts: []selector.PortName{http}}},
		}}))
	eps := []selector.Endpoint{
		{ID: "a", Labels: map[string]string{"role": "x"}, Addrs: []netip.Addr{addr("10.0.0.1")},
			NamedPorts: []selector.NamedPort{{Name: "http", Protocol: netfilter.ProtoTCP, Port: 8080}}},
		{ID: "b", Labels: map[string]string{"role": "y"}, Addrs: []netip.Addr{addr("10.0.0.2"), addr("fd00::2")},
			NamedPorts: []selector.NamedPort{{Name: "http", Protocol: netfilter.ProtoTCP, Port: 9090},
				{Name: "http", Protocol: netfilter.ProtoUDP, Port: 53}}},
		{ID: "c", Labels: map[string]string{"role": "z"}, Addrs: []netip.Addr{addr("10.0.0.3")},
			NamedPorts: []selector.NamedPort{{Name: "metrics", Protocol: netfilter.ProtoTCP, Port: 9100}}},
		{ID: "d", Addrs: []netip.Addr{addr("10.0.0.4")},
			NamedPorts: []selector.NamedPort{{Name: "http", Protocol: netfilter.ProtoTCP, Port: 80}}},
	}
	for _, e := range eps {
		require.NoError(t, x.SetEndpoint(e))
	}
	m := policy.NewModel()
	feed(t, m, x.Flush())
	scoped := selector.NamedPortSetID(*backends, http)
	anyEp := selector.NamedPortSetID(selector.Selector{}, http)
	pm := func(a string, port uint16) netfilter.Member {
		return netfilter.IPPortMember(addr(a), netfilter.ProtoTCP, port)
	}
	require.Equal(t, []netfilter.Member{pm("10.0.0.1", 8080), pm("10.0.0.2", 9090), pm("fd00::2", 9090)}, m.SetMembers(scoped))
	require.Equal(t, []netfilter.Member{pm("10.0.0.1", 8080), pm("10.0.0.2", 9090), pm("10.0.0.4", 80), pm("fd00::2", 9090)}, m.SetMembers(anyEp))
	kind, _ := m.Set(scoped)
	require.Equal(t, policy.SetAddrPorts, kind)
	p, _ := m.Policy("p")
	require.Equal(t, []string{scoped}, p.Egress[0].Dst.NamedPorts)
	require.Equal(t, []string{selector.SetID(*backends)}, p.Egress[0].Dst.Sets)
	require.Equal(t, []string{anyEp}, p.Egress[1].Dst.NotNamedPorts)

	// Endpoint a renumbers its port: one delta per set.
	eps[0].NamedPorts[0].Port = 8081
	require.NoError(t, x.SetEndpoint(eps[0]))
	msgs := x.Flush()
	require.Equal(t, []any{
		policy.SetDelta{ID: scoped, Add: []netfilter.Member{pm("10.0.0.1", 8081)}, Remove: []netfilter.Member{pm("10.0.0.1", 8080)}},
		policy.SetDelta{ID: anyEp, Add: []netfilter.Member{pm("10.0.0.1", 8081)}, Remove: []netfilter.Member{pm("10.0.0.1", 8080)}},
	}, sortMsgs(msgs, scoped, anyEp))
	feed(t, m, msgs)
}

// sortMsgs orders two set deltas as ids says.
func sortMsgs(msgs []any, ids ...string) []any {
	var out []any
	for _, id := range ids {
		for _, msg := range msgs {
			if d, ok := msg.(policy.SetDelta); ok && d.ID == id {
				out = append(out, d)
			}
		}
	}
	if len(out) != len(msgs) {
		return msgs
	}
	return out
}

func TestIndexRefusesBadInput(t *testing.T) {
	x := selector.New(selector.Options{})
	bad := &selector.Selector{Endpoint: []selector.Requirement{req("", selector.Exists)}}
	for _, p := range []selector.Policy{
		{ID: "", Tier: "t"},
		{ID: "p"},
		{ID: "p", Tier: "t", AppliesTo: *bad},
		{ID: "p", Tier: "t", Ingress: []selector.Rule{{Action: policy.Allow, Src: selector.Peer{NotSelector: bad}}}},
		{ID: "p", Tier: "t", Ingress: []selector.Rule{{}}},
		{ID: "p", Tier: "t", Egress: []selector.Rule{{Action: policy.Allow,
			Dst: selector.Peer{NamedPorts: []selector.PortName{{Protocol: netfilter.ProtoICMP, Name: "x"}}}}}},
	} {
		require.ErrorIs(t, x.SetPolicy(p), selector.ErrInvalidPolicy, "%+v", p)
	}
	for _, e := range []selector.Endpoint{
		{ID: ""},
		{ID: "e", Local: true},
		{ID: "e", Local: true, Iface: "a-much-too-long-interface-name"},
		{ID: "e", Labels: map[string]string{"": "x"}},
		{ID: "e", Addrs: []netip.Addr{{}}},
		{ID: "e", NamedPorts: []selector.NamedPort{{Name: "", Protocol: netfilter.ProtoTCP}}},
	} {
		require.ErrorIs(t, x.SetEndpoint(e), selector.ErrInvalidEndpoint, "%+v", e)
	}
	require.ErrorIs(t, x.SetTier("", 0, policy.Deny), selector.ErrInvalidTier)
	require.ErrorIs(t, x.SetTier("t", 0, policy.Allow), selector.ErrInvalidTier)
	require.Nil(t, x.Flush(), "refused input changes nothing")
}

func TestIndexCustomNamespaceProfile(t *testing.T) {
	x := selector.New(selector.Options{NamespaceProfile: func(ns string) policy.Profile {
		if ns == "open" {
			return policy.Profile{}
		}
		return policy.Profile{ID: "deny." + ns}
	}})
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "a", Namespace: "open", Local: true, Iface: "if1"}))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "closed", Local: true, Iface: "if2"}))
	m := policy.NewModel()
	feed(t, m, x.Flush())
	require.Equal(t, []string{"deny.closed"}, m.ProfileIDs())
	a, _ := m.Workload("a")
	require.Empty(t, a.Profiles)
	b, _ := m.Workload("b")
	require.Equal(t, []string{"deny.closed"}, b.Profiles)
}

func TestIndexLocalInterfaces(t *testing.T) {
	x := selector.New(selector.Options{})
	m := policy.NewModel()
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "a", Namespace: "n", Local: true, Iface: "if1"}))
	err := x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n", Local: true, Iface: "if1"})
	require.ErrorIs(t, err, selector.ErrInvalidEndpoint)
	feed(t, m, x.Flush())

	// a and b swap interfaces between two Flushes: the model takes it.
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n", Local: true, Iface: "if2"}))
	feed(t, m, x.Flush())
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "a", Namespace: "n", Local: true, Iface: "if3"}))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n", Local: true, Iface: "if1"}))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "a", Namespace: "n", Local: true, Iface: "if2"}))
	feed(t, m, x.Flush())
	w, ok := m.WorkloadByIface("if1")
	require.True(t, ok)
	require.Equal(t, "b", w.ID)
	w, _ = m.WorkloadByIface("if2")
	require.Equal(t, "a", w.ID)
	require.Len(t, m.Workloads(), 2)
}
