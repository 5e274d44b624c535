package iptables_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// FuzzResyncWritesNothing is the property of item 6 on the fake: for any
// rule a Table accepts, in an owned chain and in a built-in chain of any
// table, Apply then a resync (a re-read) writes nothing, and removing it
// all leaves no rule and no chain of ours (our rules in built-in chains
// are deleted by the text the kernel prints). A rule the fake refuses (a
// jump to a chain it does not have) is left out as an object, never a
// whole-table failure. TestKernelGoldenRulesResyncWritesNothing checks a
// sample of every criterion and action against the kernel.
func FuzzResyncWritesNothing(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte{1, 1, 0, 2, 2, 0, 3, 1, 2, 0, 80, 0, 80, 0}, uint8(1))
	f.Add([]byte{1, 1, 1, 3, 0, 1, 10, 0, 0, 1, 24, 1, 9, 1, 8, 9, 3, 1}, uint8(2))
	f.Add([]byte("\x01\x01\x00\x05\x05\x00\x00\x00\x01\x00\x00\x00\x03\x06\x04hello\x06\x00\x00\x00\x01\xff\xff\xff\xff"), uint8(3))
	f.Add([]byte("\x00\x03\x01\x06\x12np:abc\x01\x02\x0c\x06\x09\x01\x10\x0a\x07prefix "), uint8(4))
	f.Add([]byte("\x01\x01\x00\x02\x03\x01\x06\x03\x00\x00\x00\x00\xff\xff\x01\x07\x00\x01\x00\x00\x00\x00\x00\x00\x0a\x0cit's a log\x05"), uint8(9))
	tables := []string{"filter", "nat", "mangle", "raw"}
	hooks := map[string][]netfilter.Hook{
		"filter": {netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput},
		"nat":    {netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookOutput, netfilter.HookPostrouting},
		"mangle": {netfilter.HookPrerouting, netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput, netfilter.HookPostrouting},
		"raw":    {netfilter.HookPrerouting, netfilter.HookOutput},
	}
	f.Fuzz(func(t *testing.T, data []byte, where uint8) {
		r, v := iptables.RandomRuleForTest(data)
		if !v.Valid() {
			return
		}
		table := tables[where%4]
		builtin := hooks[table]
		hook := builtin[int(where/4)%len(builtin)]
		ns, k := newFake()
		opts := fakeOpts(ns)
		opts.Family, opts.Table = v, table
		tbl := newTable(t, opts)
		chainErr := tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{r, r}, ForceProgramming: true})
		hookErr := tbl.AppendRules("test", hook, []netfilter.Rule{r, {Action: netfilter.Accept()}})
		if chainErr != nil && hookErr != nil {
			return
		}
		ctx := context.Background()
		_, err := tbl.Apply(ctx)
		if r.JumpTarget() == "" {
			require.NoError(t, err, "the fake takes every rule the Table accepts")
		} else if err != nil {
			require.ErrorIs(t, err, dataplane.ErrPartial)
		}
		restores := k.Count(iptablesfake.OpRestore)
		tbl.QueueResync()
		_, _ = tbl.Apply(ctx)
		require.Equal(t, restores, k.Count(iptablesfake.OpRestore), "a resync wrote:\n%s", lastRestore(k))

		require.NoError(t, tbl.AppendRules("test", hook, nil))
		require.NoError(t, tbl.RemoveChains("np-a"))
		apply(t, tbl)
		require.Empty(t, k.Rules(iptablesfake.Backend(opts.Backend), v, table, string(hook)))
		require.NotContains(t, k.Chains(iptablesfake.Backend(opts.Backend), v, table), "np-a")
	})
}
