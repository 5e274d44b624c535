package selector

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/policy"
)

// TestRelabelEvaluatesOnlyAffectedSelectors checks the cost contract: a
// relabel tests only the selectors that test a changed key, a change of
// addresses tests none, and a namespace relabel only those whose Namespace
// requirements test a changed key.
func TestRelabelEvaluatesOnlyAffectedSelectors(t *testing.T) {
	x := New(Options{})
	for i := range 50 {
		s := Selector{Endpoint: []Requirement{{Key: "app", Op: Equals, Values: []string{fmt.Sprint("a", i)}}}}
		require.NoError(t, x.SetPolicy(Policy{ID: fmt.Sprint("p", i), Tier: "t",
			Ingress: []Rule{{Action: policy.Allow, Src: Peer{Selector: &s}}}}))
	}
	role := Selector{Endpoint: []Requirement{{Key: "role", Op: NotIn, Values: []string{"db", "cache"}}}}
	env := Selector{Namespace: []Requirement{{Key: "env", Op: Equals, Values: []string{"prod"}}}}
	require.NoError(t, x.SetPolicy(Policy{ID: "role", Tier: "t",
		Ingress: []Rule{{Action: policy.Allow, Src: Peer{Selector: &role, NotSelector: &env}}}}))
	total := len(x.nodes) // 50 app selectors, role, env and all() (every AppliesTo)
	require.Equal(t, 53, total)

	e := Endpoint{ID: "e", Namespace: "n", Labels: map[string]string{"app": "a1", "role": "web"},
		Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	require.NoError(t, x.SetEndpoint(e))
	require.Equal(t, total, x.evaluated, "a new endpoint is tested against every selector")
	x.Flush()

	x.evaluated = 0
	e.Labels = map[string]string{"app": "a1", "role": "db"}
	require.NoError(t, x.SetEndpoint(e))
	require.Equal(t, 1, x.evaluated, "only the role selector tests role")
	msgs := x.Flush()
	require.Equal(t, []any{policy.SetDelta{ID: SetID(role), Remove: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.1/32"))}}}, msgs)

	x.evaluated = 0
	e.Addrs = []netip.Addr{netip.MustParseAddr("10.0.0.2")}
	require.NoError(t, x.SetEndpoint(e))
	require.Zero(t, x.evaluated, "new addresses, same labels: no selector is tested")
	a1 := Selector{Endpoint: []Requirement{{Key: "app", Op: Equals, Values: []string{"a1"}}}}
	require.Equal(t, []any{policy.SetDelta{ID: SetID(a1),
		Add:    []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.2/32"))},
		Remove: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.1/32"))}}}, x.Flush())

	x.evaluated = 0
	require.NoError(t, x.SetNamespace("n", map[string]string{"env": "prod", "team": "x"}))
	require.Equal(t, 1, x.evaluated, "one endpoint against the one selector that tests env")
	require.Equal(t, []any{policy.SetDelta{ID: SetID(env),
		Add: []netfilter.Member{netfilter.NetMember(netip.MustParsePrefix("10.0.0.2/32"))}}}, x.Flush())
}
