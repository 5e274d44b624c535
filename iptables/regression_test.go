package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

// hostileComment quotes one of our hash comments inside a longer one.
const hostileComment = "see --comment np:AAAAAAAAAAAAAAAA here"

// TestForeignRuleQuotingOurHashSurvives is the regression test of item 1:
// a foreign rule whose comment merely contains one of our hash comments
// was taken for ours (the save parser looked for `--comment np:…`
// anywhere in the line) and deleted by the next Apply. Now a comment is
// ours only when the whole argument is our hash comment. (Run against the
// code before the fix, the first Apply deleted the foreign rule.)
func TestForeignRuleQuotingOurHashSurvives(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			for _, c := range []string{hostileComment, `"np:BBBBBBBBBBBBBBBB"`, "np:CCCCCCCCCCCCCCCC x", "-m comment --comment np:DDDDDDDDDDDDDDDD"} {
				require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "INPUT", "-m", "comment", "--comment", c, "-j", "ACCEPT"))
			}
			foreign := k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")
			opts := fakeOpts(ns)
			opts.Backend = b
			tbl := newTable(t, opts)
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
			apply(t, tbl)
			got := k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")
			require.Len(t, got, 5)
			assert.Equal(t, foreign, got[1:], "the foreign rules are untouched")
			require.NoError(t, tbl.InsertRules("test", "INPUT", nil))
			apply(t, tbl)
			tbl.QueueResync()
			k.ResetCalls()
			apply(t, tbl)
			assert.Zero(t, k.Count(iptablesfake.OpRestore))
			assert.Equal(t, foreign, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"))
		})
	}
}

// TestForeignJumpBehindCommentKeepsChain is the regression test of item 2:
// a foreign rule whose comment holds " -j " hid its real jump to one of
// our chains (the parser took the first "-j" of the line), so when we
// stopped using the chain we deleted it, the restore failed, and every
// Apply failed while the foreign rule stood. Now the jump is seen: the
// chain is flushed and kept, reported (ErrChainInUse) and retried on its
// backoff, and deleted once the foreign rule is gone. (Before the fix the
// Apply after RemoveChain failed with "chain np-a is referenced".)
func TestForeignJumpBehindCommentKeepsChain(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			clk := opts.Clock.(*clock.Fake)
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}, ForceProgramming: true}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
			apply(t, tbl)
			foreign := []string{"-A", "OUTPUT", "-m", "comment", "--comment", "x -j ACCEPT", "-j", "np-a"}
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, foreign...))

			// Unwanted now: flushed and kept; the rest of the table is
			// written.
			require.NoError(t, tbl.RemoveChains("np-a"))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.2.0.0/16")}))
			tbl.QueueResync()
			res, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
			assert.Equal(t, time.Second, res.RetryAfter)
			assert.Zero(t, tbl.WorkStats().RestoreErrors, "nothing was refused: the reference was seen")
			assert.Contains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")
			assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-a"))
			assert.Equal(t, []string{"-s 10.2.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"), 1)

			// The foreign rule goes; the retry deletes the chain.
			foreign[0] = "-D"
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, foreign...))
			clk.Advance(time.Second)
			apply(t, tbl)
			assert.NotContains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")
		})
	}
}

// TestRefusedObjectIsLeftOut is the regression test of item 3: one
// restore line the kernel refused failed the whole transaction, three
// times, and blocked the table. Now the object the line belongs to is
// left out (created empty when it did not exist, so the jumps to it stay
// valid), the rest is written in the same Apply, and the object is
// retried on its own backoff or at once when declared anew. (Before the
// fix Apply failed after three attempts and np-a was never written.)
func TestRefusedObjectIsLeftOut(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	opts := fakeOpts(ns)
	clk := opts.Clock.(*clock.Fake)
	tbl := newTable(t, opts)
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
		netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("10.65.0.0/16"), acceptFrom("10.66.0.0/16")}},
	))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a"), jump("np-b")}))
	k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "10.66.0.0/16"})

	res, err := tbl.Apply(context.Background())
	pe := requireObjects(t, err, map[string]error{"np-b": iptables.ErrRefused})
	assert.Equal(t, time.Second, res.RetryAfter)
	assert.Equal(t, clk.Now().Add(time.Second), pe.Objects()[0].RetryAt)
	assert.Contains(t, err.Error(), "np-b: change refused by the kernel: input line 6 (-A np-b -s 10.66.0.0/16")
	var re *command.RestoreError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 6, re.Line)
	assert.Contains(t, string(re.Stderr), "line 6 failed")
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "np-a")))
	assert.Equal(t, []string{"-j np-a", "-j np-b"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
	assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-b"), "created empty: the jump to it is valid")
	st := tbl.WorkStats()
	assert.Equal(t, [3]int{3, 2, 2}, [3]int{st.Restores, st.RestoreErrors, st.Saves}, "a failure, a re-read and the same failure, then the rest")

	// Not due: nothing runs, the failure is still reported.
	k.ResetCalls()
	_, err = tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-b": iptables.ErrRefused})
	assert.Zero(t, k.Count(iptablesfake.OpAny))

	// Due: re-read and tried again; refused again, the delay doubles.
	clk.Advance(time.Second)
	res, err = tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-b": iptables.ErrRefused})
	assert.Equal(t, 2*time.Second, res.RetryAfter)
	assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-b"))

	// A new declaration retries it at once; the kernel takes it now.
	k.ClearFaults()
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("10.65.0.0/16"), acceptFrom("10.67.0.0/16")}}))
	apply(t, tbl)
	assert.Equal(t, []string{"-s 10.65.0.0/16 -j ACCEPT", "-s 10.67.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "np-b")))
	tbl.QueueResync()
	k.ResetCalls()
	apply(t, tbl)
	assert.Zero(t, k.Count(iptablesfake.OpRestore), "converged")
}

// TestRefusedHookKeepsItsKernelRules: when the kernel refuses a change to
// our rules in a built-in chain, they stay as they were there; the other
// built-in chains are written.
func TestRefusedHookKeepsItsKernelRules(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	apply(t, tbl)
	before := k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD")
	k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "10.9.0.0/16"})
	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.9.0.0/16"), acceptFrom("10.1.0.0/16")}))
	require.NoError(t, tbl.AppendRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.2.0.0/16")}))
	_, err := tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"FORWARD": iptables.ErrRefused})
	assert.Equal(t, before, k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD"))
	assert.Equal(t, []string{"-s 10.2.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
}

// TestCommitTimeRefusalIsFoundByHalving: the legacy kernel checks rules
// when the whole table is committed, and iptables-nft resolves jumps then:
// the binary names the COMMIT line, no object's. Apply finds the object
// by writing halves of the changed objects alone, and writes the rest.
func TestCommitTimeRefusalIsFoundByHalving(t *testing.T) {
	const chains = 16
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			tbl := newTable(t, opts)
			var jumps []netfilter.Rule
			for i := range chains {
				name := fmt.Sprintf("np-c%02d", i)
				require.NoError(t, tbl.SetChains(netfilter.Chain{Name: name, Rules: []netfilter.Rule{acceptFrom(fmt.Sprintf("10.%d.0.0/16", i))}}))
				jumps = append(jumps, jump(name))
			}
			require.NoError(t, tbl.InsertRules("test", "INPUT", jumps))
			k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "10.11.0.0/16", AtCommit: true})
			_, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-c11": iptables.ErrRefused})
			assert.Contains(t, err.Error(), "refused when the transaction was committed")
			for i := range chains {
				if i != 11 {
					assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", fmt.Sprintf("np-c%02d", i)), 1, "chain %d", i)
				}
			}
			assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-c11"))
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"), chains)
			// 17 objects: two failures (before and after the re-read), then
			// at most two restores per halving, then the rest.
			assert.LessOrEqual(t, tbl.WorkStats().Restores, 2+2*5+1)
		})
	}
}

// TestJumpToMissingChainIsIsolated is the kernel-dependent part of item 4:
// a jump to a chain that is neither ours nor built-in is accepted at
// declaration (another agent may create it). The read tells the Table
// whether the chain exists: when it does not, only the object holding the
// jump is held back, without a failed write (iptables-nft would name only
// the COMMIT line). Once the chain exists, the retry writes it.
func TestJumpToMissingChainIsIsolated(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			clk := opts.Clock.(*clock.Fake)
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(
				netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), jump("KUBE-MISSING")}},
				netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}},
			))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a"), jump("np-b")}))
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{Action: netfilter.Jump("KUBE-ALSO-MISSING")}}))
			_, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrRefused, "OUTPUT": iptables.ErrRefused})
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-b"), 1)
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"), 2)

			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-MISSING"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-ALSO-MISSING"))
			clk.Advance(time.Second)
			apply(t, tbl)
			assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT", "-j KUBE-MISSING"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "np-a")))
			assert.Equal(t, []string{"-j KUBE-ALSO-MISSING"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT")))
		})
	}
}

// TestForeignChainGoneBeforeWriteIsIsolated: the foreign chain is deleted
// between the read and the write, so the kernel refuses the jump (legacy
// at its line, iptables-nft at COMMIT): the re-read after the failure
// shows the chain missing, and only the object holding the jump is held
// back.
func TestForeignChainGoneBeforeWriteIsIsolated(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-X"))
			opts := fakeOpts(ns)
			opts.Backend = b
			tbl := newTable(t, opts)
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("KUBE-X")}))
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
			k.OnCall(func(c iptablesfake.Call) {
				if c.Op == iptablesfake.OpRestore {
					k.OnCall(nil)
					require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-X", "KUBE-X"))
				}
			})
			_, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"INPUT": iptables.ErrRefused})
			assert.Contains(t, err.Error(), "it jumps to KUBE-X, which the table does not have")
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"), 1)
			st := tbl.WorkStats()
			assert.Equal(t, [3]int{2, 1, 2}, [3]int{st.Restores, st.RestoreErrors, st.Saves})
		})
	}
}

// TestDeclarationRefusesWhatTheTableKnows is the declaration part of item
// 4: what the Table can tell without the kernel is refused when declared,
// with nothing changed: a chain that jumps to itself, a target or option
// the table or built-in chain does not allow. (A jump to an undeclared
// owned chain is not: it may be declared later; Apply holds it back, see
// TestUnknownChainAndLoopAreIsolated.)
func TestDeclarationRefusesWhatTheTableKnows(t *testing.T) {
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	tests := []struct {
		name, table string
		call        func(*iptables.Table) error
		is          []error
		msg         string
	}{
		{"chain jumps to itself", "filter", func(tbl *iptables.Table) error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), {Action: netfilter.Goto("np-a")}}})
		}, []error{netfilter.ErrInvalidRule, iptables.ErrChainLoop}, "rule 2 of chain np-a jumps to its own chain"},
		{"masquerade in filter", "filter", func(tbl *iptables.Table) error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.ActionMasquerade{}}}})
		}, []error{netfilter.ErrInvalidRule}, "MASQUERADE is allowed only in the nat table, not in filter, in rule 1 of chain np-a"},
		{"masquerade in nat PREROUTING", "nat", func(tbl *iptables.Table) error {
			return tbl.AppendRules("test", "PREROUTING", []netfilter.Rule{{Action: netfilter.ActionMasquerade{}}})
		}, []error{netfilter.ErrInvalidRule}, "MASQUERADE is not allowed in PREROUTING (only in POSTROUTING)"},
		{"dnat in POSTROUTING", "nat", func(tbl *iptables.Table) error {
			return tbl.InsertRules("test", "POSTROUTING", []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}})
		}, []error{netfilter.ErrInvalidRule}, "DNAT is not allowed in POSTROUTING"},
		{"snat in an owned chain of mangle", "mangle", func(tbl *iptables.Table) error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.ActionSNAT{To: netip.MustParseAddr("10.0.0.1")}}}})
		}, []error{netfilter.ErrInvalidRule}, "SNAT is allowed only in the nat table"},
		{"reject in nat", "nat", func(tbl *iptables.Table) error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Reject(netfilter.RejectPortUnreachable)}}})
		}, []error{netfilter.ErrInvalidRule}, "REJECT is allowed only in the filter table"},
		{"notrack in filter", "filter", func(tbl *iptables.Table) error {
			return tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{Action: netfilter.NoTrack()}})
		}, []error{netfilter.ErrInvalidRule}, "CT --notrack is allowed only in the raw table"},
		{"-i in OUTPUT", "filter", func(tbl *iptables.Table) error {
			return tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.InInterface("eth0")}, Action: netfilter.Drop()}})
		}, []error{netfilter.ErrInvalidRule}, "input interface criterion (-i) is not allowed in OUTPUT"},
		{"-o in PREROUTING", "raw", func(tbl *iptables.Table) error {
			return tbl.AppendRules("test", "PREROUTING", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.OutInterface("eth0")}, Action: netfilter.Drop()}})
		}, []error{netfilter.ErrInvalidRule}, "(-o) is not allowed in PREROUTING"},
		{"limit-iface-in in OUTPUT", "filter", func(tbl *iptables.Table) error {
			return tbl.AppendRules("test", "OUTPUT", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true}}, Action: netfilter.Drop()}})
		}, []error{netfilter.ErrInvalidRule}, "--limit-iface-in is not allowed in OUTPUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, k := newFake()
			opts := fakeOpts(ns)
			opts.Table = tc.table
			tbl := newTable(t, opts)
			err := tc.call(tbl)
			for _, is := range tc.is {
				require.ErrorIs(t, err, is)
			}
			assert.Contains(t, err.Error(), tc.msg)
			apply(t, tbl)
			assert.Zero(t, k.Count(iptablesfake.OpRestore), "nothing declared, nothing written")
		})
	}
	// What is allowed stays allowed: the same targets where they belong,
	// and -i in an owned chain (the kernel accepts it there).
	ns, _ := newFake()
	opts := fakeOpts(ns)
	opts.Table = "nat"
	tbl := newTable(t, opts)
	require.NoError(t, tbl.AppendRules("test", "POSTROUTING", []netfilter.Rule{{Action: netfilter.ActionMasquerade{}}}))
	require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{{Matches: []netfilter.Match{tcp}, Action: netfilter.DNAT(netip.MustParseAddrPort("10.0.0.1:80"))}}))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.InInterface("eth0")}, Action: netfilter.ActionMasquerade{}}}}))
	apply(t, tbl)
}

// TestChangingAnAppendedRuleRewritesOnlyIt is the regression test of item
// 5: changing the first of our appended rules (after a foreign rule)
// deleted and re-appended all of ours after it, resetting their counters.
// Now each rule of ours is recognised by its hash wherever its run starts,
// and only the changed rule is rewritten, at its place. (Before the fix,
// changing the first appended rule kept 1 of the 4 rules' identities.)
func TestChangingAnAppendedRuleRewritesOnlyIt(t *testing.T) {
	b, v := iptables.BackendNFT, ipfamily.IPv4
	r := func(i int) netfilter.Rule { return acceptFrom(fmt.Sprintf("10.%d.0.0/16", i)) }
	for _, group := range []string{"insert", "append"} {
		for _, changed := range []int{0, 2, 4} {
			t.Run(fmt.Sprintf("%s/%d", group, changed), func(t *testing.T) {
				ns, k := newFake()
				require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP"))
				tbl := newTable(t, fakeOpts(ns))
				set := tbl.InsertRules
				if group == "append" {
					set = tbl.AppendRules
				}
				rules := []netfilter.Rule{r(0), r(1), r(2), r(3), r(4)}
				require.NoError(t, set("test", "FORWARD", rules))
				apply(t, tbl)
				before := k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD")

				rules[changed] = r(9)
				require.NoError(t, set("test", "FORWARD", rules))
				apply(t, tbl)
				after := k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD")
				require.Len(t, after, 6)
				kept := 0
				for i := range after {
					if after[i].Serial == before[i].Serial {
						kept++
					}
				}
				assert.Equal(t, 5, kept, "every rule but the changed one keeps its identity (and counters)")
				in := lastRestore(k)
				assert.Equal(t, 1, strings.Count(in, "\n-D FORWARD "), in)
				assert.Equal(t, 1, strings.Count(in, "\n-I FORWARD ")+strings.Count(in, "\n-A FORWARD "), in)
				want := []string{"-s 192.0.2.1/32 -j DROP"}
				for _, rule := range rules {
					args, err := iptables.RuleArgs(rule, v)
					require.NoError(t, err)
					want = append(want, strings.Join(args, " "))
				}
				if group == "insert" {
					want = append(want[1:], want[0])
				}
				assert.Equal(t, want, stripped(specs(after)))
			})
		}
	}
}

// TestHostBitsAreRefused is the Table side of item 6: a prefix with host
// bits set was masked silently (before the fix Args returned no error);
// now it is an error naming it, and nothing changes.
func TestHostBitsAreRefused(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	err := tbl.InsertRules("test", "INPUT", []netfilter.Rule{{Matches: []netfilter.Match{netfilter.DestNet(netip.MustParsePrefix("10.0.0.1/24"))}, Action: netfilter.Accept()}})
	require.ErrorIs(t, err, netfilter.ErrInvalidRule)
	require.ErrorIs(t, err, ipfamily.ErrHostBits)
	assert.Contains(t, err.Error(), "10.0.0.1/24 (the network is 10.0.0.0/24)")
	apply(t, tbl)
	assert.Zero(t, k.Count(iptablesfake.OpRestore))
}

// TestErrorTexts is item 7: every error of a bad input starts with
// "iptables: ", names the package once, matches every sentinel it speaks
// of, and runs nothing.
func TestErrorTexts(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	tcp := netfilter.Protocol(netfilter.ProtoTCP)
	rule := func(c ...netfilter.Match) []netfilter.Rule {
		return []netfilter.Rule{{Matches: c, Action: netfilter.Accept()}}
	}
	chain := func(rules []netfilter.Rule) error {
		return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: rules})
	}
	badOpts := func(mod func(*iptables.Options)) error {
		o := fakeOpts(ns)
		mod(&o)
		_, err := iptables.New(o)
		return err
	}
	tests := []struct {
		name string
		err  error
		is   []error
	}{
		{"host bits", chain(rule(netfilter.SourceNet(netip.MustParsePrefix("10.1.2.3/8")))), []error{netfilter.ErrInvalidRule, ipfamily.ErrHostBits}},
		{"wrong version", chain(rule(netfilter.SourceNet(netip.MustParsePrefix("fd00::/8")))), []error{netfilter.ErrInvalidRule, netfilter.ErrWrongFamily}},
		{"ports without protocol", chain(rule(netfilter.DestPorts(netfilter.Port(80)))), []error{netfilter.ErrInvalidRule}},
		{"two protocols", chain(rule(tcp, netfilter.Protocol(netfilter.ProtoUDP))), []error{netfilter.ErrInvalidRule}},
		{"bad jump name", chain([]netfilter.Rule{{Action: netfilter.Jump("a b")}}), []error{netfilter.ErrInvalidRule, netfilter.ErrInvalidChainName}},
		{"jump to a target name", chain([]netfilter.Rule{{Action: netfilter.Goto("MASQUERADE")}}), []error{netfilter.ErrInvalidRule, netfilter.ErrInvalidChainName}},
		{"self jump", chain([]netfilter.Rule{{Action: netfilter.Jump("np-a")}}), []error{netfilter.ErrInvalidRule, iptables.ErrChainLoop}},
		{"bad comment", chain([]netfilter.Rule{{Action: netfilter.Accept(), Comments: []string{`"`}}}), []error{netfilter.ErrInvalidRule}},
		{"no action", chain([]netfilter.Rule{{}}), []error{netfilter.ErrInvalidRule}},
		{"chain without prefix", tbl.SetChains(netfilter.Chain{Name: "KUBE-X"}), []error{iptables.ErrNotOwned}},
		{"chain name too long", tbl.SetChains(netfilter.Chain{Name: "np-" + strings.Repeat("x", 30)}), []error{netfilter.ErrInvalidChainName}},
		{"chain given twice", tbl.SetChains(netfilter.Chain{Name: "np-a"}, netfilter.Chain{Name: "np-a"}), []error{iptables.ErrDuplicateChain}},
		{"remove a foreign chain", tbl.RemoveChains("np-a", "INPUT"), []error{iptables.ErrNotOwned}},
		{"rules in a chain of another table", tbl.InsertRules("test", "PREROUTING", nil), []error{iptables.ErrNotBuiltin}},
		{"rules in an owned chain", tbl.AppendRules("test", "np-a", nil), []error{iptables.ErrNotBuiltin}},
		{"bad hook rule", tbl.AppendRules("test", "INPUT", rule(netfilter.InInterface("a/b"))), []error{netfilter.ErrInvalidRule}},
		{"unknown table", badOpts(func(o *iptables.Options) { o.Table = "bogus" }), []error{iptables.ErrInvalidOptions}},
		{"bad chain prefix", badOpts(func(o *iptables.Options) { o.ChainPrefix = "n p" }), []error{iptables.ErrInvalidOptions, netfilter.ErrInvalidChainName}},
		{"bad hash prefix", badOpts(func(o *iptables.Options) { o.HashPrefix = `x"` }), []error{iptables.ErrInvalidOptions}},
		{"bad backend", func() error { _, err := iptables.ParseBackend("auto"); return err }(), []error{iptables.ErrInvalidOptions}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			text := tc.err.Error()
			assert.True(t, strings.HasPrefix(text, "iptables: "), text)
			assert.Equal(t, 1, strings.Count(text, "iptables:"), text)
			for _, is := range tc.is {
				assert.ErrorIs(t, tc.err, is)
			}
		})
	}
	assert.Zero(t, k.Count(iptablesfake.OpAny), "bad input runs nothing")
	apply(t, tbl)
	assert.Zero(t, k.Count(iptablesfake.OpRestore), "and leaves nothing to write")
}

// TestOptionsKernel is item 8 after the one kernel option: a Table reaches
// its namespace only through Options.Kernel, whose Runner runs both the
// save and the restore, so there is no second handle that could name
// another namespace. Nil means the process's namespace.
func TestOptionsKernel(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	apply(t, tbl)
	assert.Equal(t, 2, ns.Calls(kernelfake.OpRun), "the save and the restore ran through the Kernel's runner")
	assert.Equal(t, 1, k.Count(iptablesfake.OpSave))
	assert.Equal(t, 1, k.Count(iptablesfake.OpRestore))

	// A failure of the Kernel's runner is the Table's failure, and the
	// next Apply reads again.
	ns.Fail(kernelfake.OpRun, 1, nil)
	tbl.QueueResync()
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrSave)
	require.ErrorIs(t, err, kernelfake.ErrInjected)
	assert.Equal(t, 1, strings.Count(err.Error(), "iptables:"), err.Error())
	apply(t, tbl)

	// Without a Kernel the Table works on the process's namespace; New
	// runs nothing to find out.
	o := fakeOpts(nil)
	tbl = newTable(t, o)
	assert.Nil(t, tbl.Options().Kernel)
}

// TestPartialErrorContract: a refused object makes Apply return what a
// dataplane.Loop expects of a partial failure (ErrPartial, the failed
// count, RetryAfter for the object's retry), so that the loop does not
// back the Table off.
func TestPartialErrorContract(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.66.0.0/16")}, ForceProgramming: true}))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	k.AddFault(iptablesfake.Fault{Op: iptablesfake.OpRestore, LineContains: "10.66.0.0/16"})
	res, err := tbl.Apply(context.Background())
	require.True(t, errors.Is(err, dataplane.ErrPartial))
	var dpe *dataplane.PartialError
	require.ErrorAs(t, err, &dpe)
	assert.Equal(t, 1, dpe.Failed)
	assert.Zero(t, dpe.Waiting)
	assert.Equal(t, time.Second, res.RetryAfter, "the loop comes back for the retry")

	// Before its retry is due the object is reported as waiting, not as a
	// fresh failure, so the loop's failure counter counts attempts.
	_, err = tbl.Apply(context.Background())
	require.ErrorAs(t, err, &dpe)
	assert.Equal(t, [2]int{0, 1}, [2]int{dpe.Failed, dpe.Waiting})
}

// TestChainInUseDeletedOnResync is the regression test of issue 20, item
// 4: an unwanted chain kept (ErrChainInUse) because a foreign rule jumped
// to it stayed held until its retry was due, even after a resync had shown
// the foreign rule gone. Now whether it is kept is the picture's to say:
// the resync's read deletes it on that pass. A read that still shows the
// reference keeps it without pushing its retry back. (Before the fix the
// Apply after QueueResync reported ErrChainInUse again and np-a stayed
// until the clock reached the retry.)
func TestChainInUseDeletedOnResync(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			clk := opts.Clock.(*clock.Fake)
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}, ForceProgramming: true}))
			apply(t, tbl)
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "OUTPUT", "-j", "np-a"))
			require.NoError(t, tbl.RemoveChains("np-a"))
			tbl.QueueResync()
			res, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
			assert.Equal(t, time.Second, res.RetryAfter)

			// A resync before the retry that still sees the reference keeps
			// the chain, and the retry where it was.
			clk.Advance(500 * time.Millisecond)
			tbl.QueueResync()
			res, err = tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
			assert.Equal(t, 500*time.Millisecond, res.RetryAfter, "checking again is no retry")
			assert.Contains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")

			// The foreign rule goes; the next resync, before the retry is
			// due, deletes the chain.
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-D", "OUTPUT", "-j", "np-a"))
			tbl.QueueResync()
			res = apply(t, tbl)
			assert.Zero(t, res.RetryAfter)
			assert.NotContains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")
			assert.Zero(t, tbl.WorkStats().RestoreErrors)
		})
	}
}

// TestMissingForeignChainWrittenOnResync is the same class of bug as
// issue 20, item 4, for a jump to a foreign chain the table did not have:
// the object holding it waited for its retry even after a resync had
// shown the chain created. Now every plan checks the picture, so the
// resync writes it on that pass, for a jump or a goto, in an owned chain
// or in a built-in one. (Before the fix the Apply after QueueResync still
// held np-a and INPUT back with ErrRefused.)
func TestMissingForeignChainWrittenOnResync(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			tbl := newTable(t, opts)
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Goto("KUBE-X")}}}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a"), jump("KUBE-Y")}))
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
			_, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrRefused, "INPUT": iptables.ErrRefused})
			assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"), 1)

			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-X"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-Y"))
			tbl.QueueResync()
			apply(t, tbl)
			assert.Equal(t, []string{"-g KUBE-X"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "np-a")))
			assert.Equal(t, []string{"-j np-a", "-j KUBE-Y"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
			assert.Zero(t, tbl.WorkStats().RestoreErrors)
		})
	}
}

// TestJumpDeclaredAfterReadIsChecked is the regression test of issue 20,
// item 5, for foreign chains: a jump to a foreign chain declared after the
// last read of the table was written blind — the read never looked for
// that chain — and when the chain was missing the restore failed (at the
// rule with legacy, at COMMIT with nft), the table was read again and
// written once more. Now a plan that meets a jump the picture knows
// nothing about reads the table first, so the object holding it is held
// back without a failed restore, and the rest of the table goes in the
// same restore; a chain created since the last read is seen and the jump
// written. (Before the fix the first Apply below counted a failed restore
// and two restores.)
func TestJumpDeclaredAfterReadIsChecked(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		t.Run(string(b), func(t *testing.T) {
			ns, k := newFake()
			v := ipfamily.IPv4
			opts := fakeOpts(ns)
			opts.Backend = b
			tbl := newTable(t, opts)
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
			apply(t, tbl)

			// Declared after the read: a goto in an owned chain and a jump
			// in a built-in one to chains the table lacks, and a change
			// elsewhere.
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Goto("KUBE-X")}}}))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a"), jump("KUBE-Y")}))
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
			before := tbl.WorkStats()
			_, err := tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrRefused, "INPUT": iptables.ErrRefused})
			assert.Contains(t, err.Error(), "np-a: change refused by the kernel: it jumps to KUBE-X, which the table does not have")
			assert.Contains(t, err.Error(), "INPUT: change refused by the kernel: it jumps to KUBE-Y, which the table does not have")
			st := tbl.WorkStats()
			assert.Equal(t, [2]int{1, 0}, [2]int{st.Restores - before.Restores, st.RestoreErrors - before.RestoreErrors}, "one restore, none refused")
			assert.Equal(t, []string{"-s 10.1.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT")))
			assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-a"), "created empty: jumps to it stay valid")

			// Another agent creates a chain after the read; a jump to it
			// declared now is written at once.
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-Z"))
			require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("KUBE-Z")}))
			_, err = tbl.Apply(context.Background())
			requireObjects(t, err, map[string]error{"np-a": iptables.ErrRefused, "INPUT": iptables.ErrRefused})
			assert.Equal(t, []string{"-j KUBE-Z"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")))
			assert.Zero(t, tbl.WorkStats().RestoreErrors)
		})
	}
}

// TestSetMatchCheckedAtPlan is the regression test of issue 20, item 5,
// for ip sets: a rule matching a set the kernel did not have failed two
// restores (the second after a re-read) before its object was left out.
// Now the plan checks the sets of the objects it writes against the
// kernel's (ipset list -t through the namespace's runner): the object is
// held back at once, without a failed restore, and the rest of the table
// goes in the same, single restore. A set of the other family is held
// back the same way, a set of no family (bitmap:port) is fit for both,
// and a set created after the listing is listed again when a rule first
// matches it. A resync that sees the set writes the object on that pass.
// (Before the fix the first Apply counted three restores, two refused.)
func TestSetMatchCheckedAtPlan(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) {
				ns, k := newFake()
				sets := ns.IPSets()
				opts := fakeOpts(ns)
				opts.Backend, opts.Family = b, v
				tbl := newTable(t, opts)
				family, other, otherName := "inet", "inet6", "IPv6"
				net := "10.0.0.0/8"
				if v == ipfamily.IPv6 {
					family, other, otherName = "inet6", "inet", "IPv4"
					net = "2001:db8::/32"
				}
				require.NoError(t, sets.Exec("create", "np-other", "hash:net", "family", other))
				require.NoError(t, sets.Exec("create", "np-ports", "bitmap:port", "range", "1-1024"))
				matchSet := func(set string) netfilter.Rule {
					return netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceIPSet(set)}, Action: netfilter.Accept()}
				}
				require.NoError(t, tbl.SetChains(
					netfilter.Chain{Name: "np-good", Rules: []netfilter.Rule{acceptFrom(net), matchSet("np-ports")}},
					netfilter.Chain{Name: "np-set", Rules: []netfilter.Rule{acceptFrom(net), matchSet("np-s")}},
					netfilter.Chain{Name: "np-fam", Rules: []netfilter.Rule{matchSet("np-other")}},
				))
				require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-good"), jump("np-set"), jump("np-fam")}))
				require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{matchSet("np-s")}))
				_, err := tbl.Apply(context.Background())
				requireObjects(t, err, map[string]error{"np-set": iptables.ErrRefused, "np-fam": iptables.ErrRefused, "OUTPUT": iptables.ErrRefused})
				assert.Contains(t, err.Error(), "np-set: change refused by the kernel: it matches set np-s, which the kernel does not have")
				assert.Contains(t, err.Error(), "np-fam: change refused by the kernel: it matches set np-other, which is "+otherName)
				st := tbl.WorkStats()
				assert.Equal(t, [2]int{1, 0}, [2]int{st.Restores, st.RestoreErrors}, "one restore, none refused")
				assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-good"), 2)
				assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"), 3)
				assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-set"), "created empty: the jump to it is valid")
				assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"))

				// A set created after the listing, matched by a rule
				// declared now: listed again, and written.
				require.NoError(t, sets.Exec("create", "np-new", "hash:net", "family", family))
				require.NoError(t, tbl.AppendRules("test", "FORWARD", []netfilter.Rule{matchSet("np-new")}))
				_, err = tbl.Apply(context.Background())
				requireObjects(t, err, map[string]error{"np-set": iptables.ErrRefused, "np-fam": iptables.ErrRefused, "OUTPUT": iptables.ErrRefused})
				assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD"), 1)

				// The set appears: the next resync writes what matches it.
				require.NoError(t, sets.Exec("create", "np-s", "hash:net", "family", family))
				tbl.QueueResync()
				_, err = tbl.Apply(context.Background())
				requireObjects(t, err, map[string]error{"np-fam": iptables.ErrRefused})
				assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-set"), 2)
				assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"), 1)
				assert.Zero(t, tbl.WorkStats().RestoreErrors)
			})
		}
	}
}

// TestSetListingFailureLeavesTheRestoreToJudge: when the kernel's sets
// cannot be listed (no ipset binary), rules that match sets are written
// unchecked until the next read, and an object the kernel refuses is left
// out as before, after the re-read; the listing is not tried again on
// every round or Apply of the same picture.
func TestSetListingFailureLeavesTheRestoreToJudge(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	ipsetRuns := 0
	runner := command.RunnerFunc(func(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
		if name == "ipset" {
			ipsetRuns++
			return nil, &command.Error{Argv: append([]string{name}, args...), ExitCode: -1, Err: exec.ErrNotFound}
		}
		return ns.Runner().Run(ctx, stdin, name, args...)
	})
	opts := fakeOpts(commands(runner))
	tbl := newTable(t, opts)
	matchSet := netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceIPSet("np-s")}, Action: netfilter.Accept()}
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-set", Rules: []netfilter.Rule{matchSet}},
		netfilter.Chain{Name: "np-good", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
	))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-set"), jump("np-good")}))
	_, err := tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-set": iptables.ErrRefused})
	assert.Contains(t, err.Error(), "Set np-s doesn't exist.")
	assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-good"), 1)
	assert.Equal(t, 2, ipsetRuns, "once per read: the first, and the re-read after the refusal")

	require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{matchSet}))
	_, err = tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-set": iptables.ErrRefused, "OUTPUT": iptables.ErrRefused})
	assert.Equal(t, 3, ipsetRuns, "once more, for the re-read after the second refusal")
}
