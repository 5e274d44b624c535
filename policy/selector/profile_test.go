package selector_test

import (
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
