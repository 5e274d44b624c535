package endpoints_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// The route driver stands for the table in the loop, so it shows the
// table's plan, state and stats: a pending endpoint route is in the plan
// and the plan writes nothing; after the Apply the plan is empty and the
// route is owned.
func TestRouteDriverPlansAsItsTable(t *testing.T) {
	for _, f := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
		t.Run(f.String(), func(t *testing.T) {
			r := newRig(t, f, nil)
			r.veth("np1")
			r.m.OnLink(r.linkUpdate("np1").link, r.linkUpdate("np1").state)
			r.m.OnUpdate(cluster.Endpoint{ID: "a", Iface: "np1", Addrs: []netip.Prefix{r.addr(1)}})
			require.NoError(t, r.m.CompleteDeferredWork(ctx))
			d := r.m.RouteDriver()
			planner, ok := d.(dataplane.Planner)
			require.True(t, ok, "the route driver plans")
			writes := r.ns.Writes()
			plan, err := planner.Plan(ctx)
			require.NoError(t, err)
			assert.Equal(t, writes, r.ns.Writes(), "a plan writes nothing")
			assert.Contains(t, plan.String(), r.addr(1).String())
			assert.Contains(t, plan.String(), "dev np1")

			_, err = d.Apply(ctx)
			require.NoError(t, err)
			plan, err = planner.Plan(ctx)
			require.NoError(t, err)
			assert.Empty(t, plan.Writes)
			st, err := d.(dataplane.Stater).State(ctx)
			require.NoError(t, err)
			require.Len(t, st.Owned, 1)
			assert.Contains(t, st.Owned[0].Text, r.addr(1).String())
			assert.Empty(t, st.Drift)
			stats := d.(dataplane.StatsReporter).Stats()
			assert.Equal(t, 1, stats.Desired)
			assert.Equal(t, 1, stats.InKernel)
		})
	}
}
