//go:build linux

package nftables_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// A chain whose creation the kernel refused is absent: a rule or a
// verdict-map element declared since that jumps to it is held back at
// plan time, with the chain it is in (or the element), instead of being
// sent for the kernel to refuse; everything else is written.
func TestJumpToRefusedChainHeldAtPlanTime(t *testing.T) {
	ns := nftablesfake.New()
	opts := fakeOpts(ns)
	opts.ChainPrefix = "np-"
	tbl := newTable(t, opts)
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newchain" && r.Chain == "np-b" {
			return syscall.EPERM
		}
		return 0
	})
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "svc", Key: svcKey, Verdict: true}))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-b", ForceProgramming: true, Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)}}))
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	errs := tbl.WorkStats().TransactionErrors

	// Declared after the refusal: a chain jumping to np-b, an element
	// going to it, and a chain that does neither.
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-a", ForceProgramming: true, Rules: []netfilter.Rule{jump("np-b")}},
		netfilter.Chain{Name: "np-c", ForceProgramming: true, Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
	require.NoError(t, tbl.AddElements("svc", svcElem("10.96.0.1", 80, "np-b")))
	_, err = tbl.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	assert.Equal(t, errs, tbl.WorkStats().TransactionErrors, "nothing was sent for the kernel to refuse")
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	var names []string
	for _, o := range pe.Objects() {
		names = append(names, string(o.Kind)+" "+o.Name)
	}
	assert.ElementsMatch(t, []string{"chain np-a", "chain np-b", "element svc 10.96.0.1 . tcp . 80"}, names)
	assert.Contains(t, chainNames(ns, v4, "np"), "np-c")
	assert.NotContains(t, chainNames(ns, v4, "np"), "np-b")

	// Once the kernel takes np-b, its retry writes everything.
	ns.Refuse(nil)
	opts.Clock.(interface{ Advance(d time.Duration) }).Advance(time.Hour)
	apply(t, tbl)
	assert.Subset(t, chainNames(ns, v4, "np"), []string{"np-a", "np-b", "np-c"})
	assert.Len(t, ns.Elements(v4, "np", "svc"), 1)
}
