package selector_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/policy/selector"
)

// TestIndexSharedProfile checks that a profile NamespaceProfile gives
// several namespaces stays while one of them has a local endpoint, and is
// removed with the last.
func TestIndexSharedProfile(t *testing.T) {
	shared := policy.Profile{ID: "allow-all", Ingress: []policy.Rule{{Action: policy.Allow}}}
	x := selector.New(selector.Options{NamespaceProfile: func(string) policy.Profile { return shared }})
	m := policy.NewModel()
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "a", Namespace: "n1", Local: true, Iface: "if1"}))
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n2", Local: true, Iface: "if2"}))
	msgs := x.Flush()
	require.Equal(t, []any{
		policy.ProfileUpdate{Profile: shared},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "a", Iface: "if1", Profiles: []string{"allow-all"}}},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "b", Iface: "if2", Profiles: []string{"allow-all"}}},
	}, msgs, "one ProfileUpdate for two namespaces")
	feed(t, m, msgs)

	x.RemoveEndpoint("a")
	msgs = x.Flush()
	require.Equal(t, []any{policy.WorkloadRemove{ID: "a"}}, msgs, "n2 still uses the profile")
	feed(t, m, msgs)
	require.Equal(t, []string{"allow-all"}, m.ProfileIDs())

	// b goes remote: its workload and, with it, the profile go.
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n2"}))
	msgs = x.Flush()
	require.Equal(t, []any{policy.WorkloadRemove{ID: "b"}, policy.ProfileRemove{ID: "allow-all"}}, msgs)
	feed(t, m, msgs)
	require.Empty(t, m.ProfileIDs())
	require.Empty(t, m.Workloads())

	// Back again: the profile is sent again, before the workload.
	require.NoError(t, x.SetEndpoint(selector.Endpoint{ID: "b", Namespace: "n2", Local: true, Iface: "if2"}))
	msgs = x.Flush()
	require.Equal(t, []any{
		policy.ProfileUpdate{Profile: shared},
		policy.WorkloadUpdate{Endpoint: policy.Workload{ID: "b", Iface: "if2", Profiles: []string{"allow-all"}}},
	}, msgs)
	feed(t, m, msgs)
}

func TestValidateMatchesSetters(t *testing.T) {
	x := selector.New(selector.Options{})
	bad := selector.Policy{ID: "p", Tier: "t", AppliesTo: selector.Selector{Endpoint: []selector.Requirement{{Key: "app", Op: selector.In}}}}
	require.ErrorIs(t, bad.Validate(), selector.ErrInvalidPolicy)
	require.ErrorIs(t, bad.Validate(), selector.ErrInvalidSelector)
	require.Equal(t, bad.Validate(), x.SetPolicy(bad))
	require.Equal(t, "selector: invalid policy p: applies to: app In takes at least one value", bad.Validate().Error(),
		"the package's prefix once")
	inRule := selector.Policy{ID: "p", Tier: "t", Ingress: []selector.Rule{{Action: policy.Allow,
		Src: selector.Peer{Selector: &bad.AppliesTo}}}}
	require.ErrorIs(t, inRule.Validate(), selector.ErrInvalidSelector)
	require.Equal(t, 1, strings.Count(inRule.Validate().Error(), "selector:"), "%v", inRule.Validate())
	badRule := selector.Policy{ID: "p", Tier: "t", Egress: []selector.Rule{{}}}
	require.ErrorIs(t, badRule.Validate(), selector.ErrInvalidPolicy)
	require.ErrorIs(t, badRule.Validate(), policy.ErrInvalidRule)
	good := selector.Policy{ID: "p", Tier: "t"}
	require.NoError(t, good.Validate())

	badEp := selector.Endpoint{ID: "e", Local: true}
	require.ErrorIs(t, badEp.Validate(), selector.ErrInvalidEndpoint)
	require.ErrorIs(t, badEp.Validate(), policy.ErrInvalidEndpoint, "the workload's own check")
	require.Equal(t, badEp.Validate(), x.SetEndpoint(badEp))
	require.NoError(t, selector.Endpoint{ID: "e", Local: true, Iface: "if1"}.Validate())
	require.Nil(t, x.Flush(), "refused input changes nothing")
}
