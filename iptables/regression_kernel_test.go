//go:build linux

package iptables_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/netfilter"
)

// TestKernelForeignRuleQuotingOurHashSurvives is item 1 against the
// kernel: foreign rules whose comments contain one of our hash comments
// (quoted, escaped, spread over lines) are never taken for ours.
func TestKernelForeignRuleQuotingOurHashSurvives(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		for _, c := range []string{
			hostileComment,
			`"np:BBBBBBBBBBBBBBBB"`,
			`q"uo\te's --comment np:CCCCCCCCCCCCCCCC`,
			"line\n-A INPUT -m comment --comment np:DDDDDDDDDDDDDDDD -j ACCEPT",
		} {
			ipt(t, ns, f, "-A", "INPUT", "-m", "comment", "--comment", c, "-j", "ACCEPT")
		}
		_, before := dump(t, ns, f, "filter")
		tbl := kernelTable(t, f, ns, nil)
		require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom(f.net(1))}))
		kernelApply(t, tbl)
		require.NoError(t, tbl.InsertRules("test", "INPUT", nil))
		kernelApply(t, tbl)
		tbl.QueueResync()
		kernelApply(t, tbl)
		_, after := dump(t, ns, f, "filter")
		assert.Equal(t, before, after, "the foreign rules are untouched")
		assert.Equal(t, 2, tbl.WorkStats().Restores)
	})
}

// TestKernelForeignJumpBehindCommentKeepsChain is item 2 against the
// kernel: a foreign jump to our chain behind a comment holding " -j " is
// seen; the unwanted chain is flushed and kept, then deleted by the retry
// once the foreign rule is gone. No restore fails.
func TestKernelForeignJumpBehindCommentKeepsChain(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		clk := clock.NewFake(t0)
		tbl := kernelTable(t, f, ns, clk)
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom(f.net(1))}, ForceProgramming: true}))
		kernelApply(t, tbl)
		foreign := []string{"-A", "OUTPUT", "-m", "comment", "--comment", "x -j ACCEPT", "-j", "np-a"}
		ipt(t, ns, f, foreign...)

		require.NoError(t, tbl.RemoveChains("np-a"))
		tbl.QueueResync()
		_, err := tbl.Apply(context.Background())
		requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
		chains, rules := dump(t, ns, f, "filter")
		assert.Contains(t, chains, "np-a")
		assert.Empty(t, rules["np-a"])
		assert.Zero(t, tbl.WorkStats().RestoreErrors)

		foreign[0] = "-D"
		ipt(t, ns, f, foreign...)
		clk.Advance(time.Second)
		kernelApply(t, tbl)
		chains, _ = dump(t, ns, f, "filter")
		assert.NotContains(t, chains, "np-a")
		assert.Zero(t, tbl.WorkStats().RestoreErrors)
	})
}

// TestKernelRefusalsAreIsolated is items 3 and 4 against the kernel: what
// the kernel refuses (a set it does not have, a jump to a chain that does
// not exist, an option allowed only in some built-in chains reached from
// another) holds back only the object it belongs to — whether the binary
// names the line or, as the legacy kernel does, only the COMMIT — and is
// written by a retry once the kernel has what it needs.
func TestKernelRefusalsAreIsolated(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		clk := clock.NewFake(t0)
		tbl := kernelTable(t, f, ns, clk)
		set := "np-missing-" + strings.ToLower(f.v.String())
		limited := netfilter.Rule{Matches: []netfilter.Match{netfilter.MatchAddrType{Types: netfilter.AddrTypeLocal, Dir: netfilter.Dst, LimitIfaceIn: true}}, Action: netfilter.Return()}
		require.NoError(t, tbl.SetChains(
			netfilter.Chain{Name: "np-good", Rules: []netfilter.Rule{acceptFrom(f.net(1))}},
			netfilter.Chain{Name: "np-set", Rules: []netfilter.Rule{acceptFrom(f.net(2)), {Matches: []netfilter.Match{netfilter.SourceIPSet(set)}, Action: netfilter.Accept()}}},
			netfilter.Chain{Name: "np-jump", Rules: []netfilter.Rule{acceptFrom(f.net(3)), {Action: netfilter.Jump("KUBE-MISSING")}}},
			netfilter.Chain{Name: "np-lim", Rules: []netfilter.Rule{limited}},
		))
		require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-good"), jump("np-set")}))
		require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("np-jump"), acceptFrom(f.net(4))}))
		// --limit-iface-in in a chain OUTPUT reaches: the legacy kernel
		// refuses it when the table is committed, naming no line (nft
		// checks the option only in a built-in chain, and takes it).
		require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{jump("np-lim")}))
		refused := map[string]error{"np-set": iptables.ErrRefused, "np-jump": iptables.ErrRefused}
		if f.b == iptables.BackendLegacy {
			refused["OUTPUT"] = iptables.ErrRefused
		}

		res, err := tbl.Apply(context.Background())
		requireObjects(t, err, refused)
		assert.Equal(t, time.Second, res.RetryAfter)
		chains, rules := dump(t, ns, f, "filter")
		assert.Subset(t, chains, []string{"np-good", "np-set", "np-jump", "np-lim"}, "refused new chains exist, empty")
		assert.Equal(t, []string{"-s " + f.net(1) + " -j ACCEPT"}, stripped(rules["np-good"]))
		assert.Empty(t, rules["np-set"])
		assert.Empty(t, rules["np-jump"])
		assert.Equal(t, []string{"-j np-good", "-j np-set"}, stripped(rules["INPUT"]))
		assert.Equal(t, []string{"-j np-jump", "-s " + f.net(4) + " -j ACCEPT"}, stripped(rules["FORWARD"]))
		assert.Equal(t, f.b == iptables.BackendNFT, len(rules["OUTPUT"]) == 1)

		// Nothing is due: nothing runs.
		st := tbl.WorkStats()
		_, err = tbl.Apply(context.Background())
		requireObjects(t, err, refused)
		assert.Equal(t, st, tbl.WorkStats())

		// The kernel gets the set and the chain: the retry writes them.
		family := map[ipfamily.Family]string{ipfamily.IPv4: "inet", ipfamily.IPv6: "inet6"}[f.v]
		_, err = ns.Exec(context.Background(), "ipset", "create", set, "hash:net", "family", family)
		require.NoError(t, err)
		ipt(t, ns, f, "-N", "KUBE-MISSING")
		clk.Advance(time.Second)
		res, err = tbl.Apply(context.Background())
		delete(refused, "np-set")
		delete(refused, "np-jump")
		if f.b == iptables.BackendLegacy {
			requireObjects(t, err, refused)
			assert.Equal(t, 2*time.Second, res.RetryAfter)
		} else {
			require.NoError(t, err)
		}
		_, rules = dump(t, ns, f, "filter")
		assert.Len(t, rules["np-set"], 2)
		assert.Len(t, rules["np-jump"], 2)

		// Without the option, the OUTPUT jump goes through at its retry.
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-lim", Rules: []netfilter.Rule{{Action: netfilter.Return()}}}))
		clk.Advance(2 * time.Second)
		kernelApply(t, tbl)
		_, rules = dump(t, ns, f, "filter")
		assert.Equal(t, []string{"-j np-lim"}, stripped(rules["OUTPUT"]))
		tbl.QueueResync()
		restores := tbl.WorkStats().Restores
		kernelApply(t, tbl)
		assert.Equal(t, restores, tbl.WorkStats().Restores, "converged")
	})
}

// TestKernelChangingAnAppendedRuleKeepsCounters is item 5 against the
// kernel: changing one of our appended rules (after a foreign rule)
// rewrites that rule alone; the others keep their packet counters.
func TestKernelChangingAnAppendedRuleKeepsCounters(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		lo := netip.MustParseAddr("127.0.0.1")
		if f.v == ipfamily.IPv6 {
			lo = netip.IPv6Loopback()
		}
		ipt(t, ns, f, "-A", "INPUT", "-s", f.net(9), "-j", "DROP")
		tbl := kernelTable(t, f, ns, nil)
		// Marks count the packets and let them go on to the next rule.
		mark := func(m uint32) netfilter.Rule {
			return netfilter.Rule{Matches: []netfilter.Match{netfilter.InInterface("lo")}, Action: netfilter.SetMaskedMark(m, m)}
		}
		rules := []netfilter.Rule{mark(1), mark(2), mark(4), mark(8)}
		require.NoError(t, tbl.AppendRules("test", "INPUT", rules))
		kernelApply(t, tbl)
		require.NoError(t, ns.Ping(context.Background(), lo))
		before := settledCounters(t, ns, f, "INPUT")
		require.Len(t, before, 5)
		for i, n := range before[1:] {
			require.Positive(t, n, "rule %d counted the ping", i)
		}

		rules[0] = mark(16)
		require.NoError(t, tbl.AppendRules("test", "INPUT", rules))
		kernelApply(t, tbl)
		after := counters(t, ns, f, "INPUT")
		require.Len(t, after, 5)
		assert.Zero(t, after[1], "the changed rule is new")
		assert.Equal(t, before[2:], after[2:], "the unchanged rules kept their counters")
		_, dumped := dump(t, ns, f, "filter")
		assert.Equal(t, "-s "+f.net(9)+" -j DROP", dumped["INPUT"][0])
	})
}

// TestKernelNamespace is item 8 against the kernel, with the one kernel
// option: a Table given a kernel.Namespace reads and writes that
// namespace and no other, without a second handle to agree with it.
func TestKernelNamespace(t *testing.T) {
	kerneltest.RequireCommands(t, "iptables-nft-restore")
	ns, other := kerneltest.NewNS(t), kerneltest.NewNS(t)
	tbl, err := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-",
		Kernel: iptables.OpenKernelForTest(t, ns), PostWriteRecheck: []time.Duration{},
	})
	require.NoError(t, err)
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	kernelApply(t, tbl)
	f := flavour{b: iptables.BackendNFT, v: ipfamily.IPv4}
	_, rules := dump(t, ns, f, "filter")
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT"}, stripped(rules["INPUT"]))
	_, rules = dump(t, other, f, "filter")
	assert.Empty(t, rules["INPUT"], "nothing in the other namespace")

	// Another Table on the other namespace adopts nothing of ns's.
	tbl2, err := iptables.New(iptables.Options{
		Table: "filter", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "np-",
		Kernel: iptables.OpenKernelForTest(t, other), PostWriteRecheck: []time.Duration{},
	})
	require.NoError(t, err)
	kernelApply(t, tbl2)
	assert.Zero(t, tbl2.WorkStats().Restores, "nothing of ours there, nothing to remove")
	tbl.QueueResync()
	kernelApply(t, tbl)
	assert.Equal(t, 1, tbl.WorkStats().Restores, "ns is as we left it")
}

// TestKernelChainInUseDeletedOnResync is issue 20, item 4, against the
// kernel: an unwanted chain kept while a foreign rule jumps to it is
// deleted by the first resync that reads the foreign rule gone, before its
// retry is due; a resync that still reads the rule keeps it.
func TestKernelChainInUseDeletedOnResync(t *testing.T) {
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ns := kerneltest.NewNS(t)
		clk := clock.NewFake(t0)
		tbl := kernelTable(t, f, ns, clk)
		require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom(f.net(1))}, ForceProgramming: true}))
		kernelApply(t, tbl)
		ipt(t, ns, f, "-A", "OUTPUT", "-j", "np-a")
		require.NoError(t, tbl.RemoveChains("np-a"))
		tbl.QueueResync()
		_, err := tbl.Apply(context.Background())
		requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})

		tbl.QueueResync()
		res, err := tbl.Apply(context.Background())
		requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
		assert.Equal(t, time.Second, res.RetryAfter, "checking again is no retry")

		ipt(t, ns, f, "-D", "OUTPUT", "-j", "np-a")
		tbl.QueueResync()
		kernelApply(t, tbl)
		chains, _ := dump(t, ns, f, "filter")
		assert.NotContains(t, chains, "np-a")
		assert.Zero(t, tbl.WorkStats().RestoreErrors)
	})
}

// TestKernelDependenciesCheckedAtPlan is issue 20, item 5, against the
// kernel: jumps and gotos to foreign chains declared after the last read,
// and rules matching a set the kernel does not have or has of the other
// family, hold back their own objects at plan time — no restore fails,
// and the rest of the table goes in one restore — and a resync that sees
// the chains and the set writes them on that pass.
func TestKernelDependenciesCheckedAtPlan(t *testing.T) {
	kerneltest.RequireCommands(t, "ipset")
	forEachKernelFlavour(t, func(t *testing.T, f flavour) {
		ctx := context.Background()
		ns := kerneltest.NewNS(t)
		tbl := kernelTable(t, f, ns, clock.NewFake(t0))
		family, other := "inet", "inet6"
		if f.v == ipfamily.IPv6 {
			family, other = "inet6", "inet"
		}
		ipset := func(args ...string) {
			t.Helper()
			_, err := ns.Exec(ctx, "ipset", args...)
			require.NoError(t, err)
		}
		ipset("create", "np-other", "hash:net", "family", other)
		matchSet := func(set string) netfilter.Rule {
			return netfilter.Rule{Matches: []netfilter.Match{netfilter.SourceIPSet(set)}, Action: netfilter.Accept()}
		}
		require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom(f.net(1))}))
		kernelApply(t, tbl)

		// All declared after the read.
		require.NoError(t, tbl.SetChains(
			netfilter.Chain{Name: "np-good", Rules: []netfilter.Rule{acceptFrom(f.net(2))}},
			netfilter.Chain{Name: "np-set", Rules: []netfilter.Rule{acceptFrom(f.net(3)), matchSet("np-s")}},
			netfilter.Chain{Name: "np-fam", Rules: []netfilter.Rule{matchSet("np-other")}},
			netfilter.Chain{Name: "np-goto", Rules: []netfilter.Rule{{Action: netfilter.Goto("KUBE-X")}}},
		))
		require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-good"), jump("np-set"), jump("np-fam"), jump("np-goto")}))
		require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("KUBE-Y")}))
		require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom(f.net(4))}))
		before := tbl.WorkStats()
		_, err := tbl.Apply(ctx)
		held := map[string]error{"np-set": iptables.ErrRefused, "np-fam": iptables.ErrRefused, "np-goto": iptables.ErrRefused, "FORWARD": iptables.ErrRefused}
		requireObjects(t, err, held)
		st := tbl.WorkStats()
		assert.Equal(t, [2]int{1, 0}, [2]int{st.Restores - before.Restores, st.RestoreErrors - before.RestoreErrors}, "one restore, none refused")
		chains, rules := dump(t, ns, f, "filter")
		assert.Subset(t, chains, []string{"np-good", "np-set", "np-fam", "np-goto"})
		assert.Len(t, rules["np-good"], 1)
		assert.Empty(t, rules["np-set"])
		assert.Empty(t, rules["np-goto"])
		assert.Len(t, rules["INPUT"], 4)
		assert.Empty(t, rules["FORWARD"])
		assert.Equal(t, []string{"-s " + f.net(4) + " -j ACCEPT"}, stripped(rules["OUTPUT"]))

		// The kernel gets the set and the chains: the resync writes them.
		ipset("create", "np-s", "hash:net", "family", family)
		ipt(t, ns, f, "-N", "KUBE-X")
		ipt(t, ns, f, "-N", "KUBE-Y")
		tbl.QueueResync()
		_, err = tbl.Apply(ctx)
		requireObjects(t, err, map[string]error{"np-fam": iptables.ErrRefused})
		_, rules = dump(t, ns, f, "filter")
		assert.Len(t, rules["np-set"], 2)
		assert.Equal(t, []string{"-g KUBE-X"}, stripped(rules["np-goto"]))
		assert.Equal(t, []string{"-j KUBE-Y"}, stripped(rules["FORWARD"]))
		assert.Zero(t, tbl.WorkStats().RestoreErrors)
	})
}
