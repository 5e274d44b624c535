package ipsets_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/netfilter"
)

// A set of ours that has options the driver never sets (a timeout, which
// the fake does not emulate) is replaced, and the Plan's text says why;
// the Apply then makes that write, and the Plan is empty.
func TestKernelPlanNamesExtraOptions(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	ctx := context.Background()
	ns := kerneltest.NewNS(t)
	_, err := ns.Exec(ctx, "ipset", "create", "np4-a", "hash:ip", "family", "inet", "maxelem", "8", "timeout", "30")
	require.NoError(t, err)
	d, err := ipsets.New(ipsets.Options{Family: ipsets.IPv4, Prefix: "np4-", Kernel: openKernel(t, ns)})
	require.NoError(t, err)
	require.NoError(t, d.AddOrReplaceSet(netfilter.SetMetadata{Name: "a", Type: netfilter.HashIP, MaxSize: 8}, nil))
	p, err := d.Plan(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Write{{Op: dataplane.WriteReplace, Kind: "set", Object: "np4-a hash:ip family inet maxelem 8",
		Detail: "swapped in, was np4-a hash:ip family inet maxelem 8 +options"}}, p.Writes)
	st, err := d.State(ctx)
	require.NoError(t, err)
	assert.Equal(t, []dataplane.Drift{{Kind: "set", Name: "np4-a", Want: "np4-a hash:ip family inet maxelem 8",
		Have: "np4-a hash:ip family inet maxelem 8 +options"}}, st.Drift)
	_, err = d.Apply(ctx)
	require.NoError(t, err)
	out, err := ns.Exec(ctx, "ipset", "list", "-t", "np4-a")
	require.NoError(t, err)
	assert.NotContains(t, string(out), "timeout")
	p, err = d.Plan(ctx)
	require.NoError(t, err)
	assert.True(t, p.Empty(), "%v", p)
}
