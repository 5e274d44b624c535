package iptables_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
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
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeOpts returns options for a filter/IPv4/nft table on k, with a fake
// clock and without rechecks (tests that need them set them).
func fakeOpts(k kernel.Commands) iptables.Options {
	return iptables.Options{
		Table:            "filter",
		Family:           ipfamily.IPv4,
		Backend:          iptables.BackendNFT,
		ChainPrefix:      "np-",
		Kernel:           k,
		Clock:            clock.NewFake(t0),
		PostWriteRecheck: []time.Duration{},
	}
}

func newTable(t *testing.T, opts iptables.Options) *iptables.Table {
	t.Helper()
	tbl, err := iptables.New(opts)
	require.NoError(t, err)
	return tbl
}

func apply(t *testing.T, tbl *iptables.Table) dataplane.ApplyResult {
	t.Helper()
	res, err := tbl.Apply(context.Background())
	require.NoError(t, err)
	return res
}

func src(cidr string) netfilter.Match { return netfilter.SourceNet(netip.MustParsePrefix(cidr)) }

// acceptFrom is a rule accepting packets from cidr.
func acceptFrom(cidr string) netfilter.Rule {
	return netfilter.Rule{Matches: []netfilter.Match{src(cidr)}, Action: netfilter.Accept()}
}

func jump(chain string) netfilter.Rule { return netfilter.Rule{Action: netfilter.Jump(chain)} }

// ours reports whether a rule spec carries the default hash comment.
func ours(spec string) bool { return strings.Contains(spec, `--comment "np:`) }

// stripHash removes our hash comment from a rule spec.
func stripHash(spec string) string {
	i := strings.Index(spec, `-m comment --comment "np:`)
	if i < 0 {
		return spec
	}
	end := i + len(`-m comment --comment "np:`) + iptables.HashLength + len(`" `)
	return spec[:i] + spec[end:]
}

func stripped(specs []string) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = stripHash(s)
	}
	return out
}

func TestNewValidatesOptions(t *testing.T) {
	ns, k := newFake()
	valid := fakeOpts(ns)
	tests := []struct {
		name string
		mod  func(o *iptables.Options)
	}{
		{"unknown table", func(o *iptables.Options) { o.Table = "bogus" }},
		{"empty table", func(o *iptables.Options) { o.Table = "" }},
		{"bad IP family", func(o *iptables.Options) { o.Family = 5 }},
		{"no backend", func(o *iptables.Options) { o.Backend = "" }},
		{"unknown backend", func(o *iptables.Options) { o.Backend = "auto" }},
		{"no prefix", func(o *iptables.Options) { o.ChainPrefix = "" }},
		{"prefix of a built-in chain", func(o *iptables.Options) { o.ChainPrefix = "FOR" }},
		{"prefix of a target", func(o *iptables.Options) { o.ChainPrefix = "ACC" }},
		{"prefix too long", func(o *iptables.Options) { o.ChainPrefix = strings.Repeat("x", iptables.MaxPrefixLength+1) }},
		{"prefix with blank", func(o *iptables.Options) { o.ChainPrefix = "n p" }},
		{"hash prefix with quote", func(o *iptables.Options) { o.HashPrefix = `np"` }},
		{"hash prefix with blank", func(o *iptables.Options) { o.HashPrefix = "n p:" }},
		{"hash prefix too long", func(o *iptables.Options) { o.HashPrefix = strings.Repeat("h", iptables.MaxHashPrefixLength+1) }},
		{"non-positive recheck", func(o *iptables.Options) { o.PostWriteRecheck = []time.Duration{time.Second, 0} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid
			tc.mod(&o)
			tbl, err := iptables.New(o)
			require.ErrorIs(t, err, iptables.ErrInvalidOptions)
			require.Nil(t, tbl)
		})
	}
	require.Zero(t, k.Count(iptablesfake.OpAny), "New must do no I/O")
}

func TestNewDefaults(t *testing.T) {
	tbl := newTable(t, iptables.Options{Table: "nat", Family: ipfamily.IPv6, Backend: iptables.BackendLegacy, ChainPrefix: "cali-"})
	o := tbl.Options()
	assert.Equal(t, "cali:", o.HashPrefix)
	assert.Equal(t, iptables.DefaultLockTimeout, o.LockTimeout)
	assert.Equal(t, iptables.DefaultPostWriteRecheck, o.PostWriteRecheck)
	assert.Nil(t, o.Kernel, "nil: the process's namespace")
	assert.Equal(t, "iptables-legacy-nat-v6", tbl.Name())
	assert.Equal(t, dataplane.PhaseTables, tbl.Phase())

	tbl = newTable(t, iptables.Options{Table: "raw", Family: ipfamily.IPv4, Backend: iptables.BackendNFT, ChainPrefix: "kr"})
	assert.Equal(t, "kr:", tbl.Options().HashPrefix)
}

func TestProgramsOnlyReferencedChains(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-top", Rules: []netfilter.Rule{jump("np-a")}},
		netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
		netfilter.Chain{Name: "np-unused", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}},
		netfilter.Chain{Name: "np-forced", Rules: []netfilter.Rule{acceptFrom("10.2.0.0/16")}, ForceProgramming: true},
	))
	apply(t, tbl)
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "np-forced"}, k.Chains(iptablesfake.BackendNFT, ipfamily.IPv4, "filter"),
		"only the forced chain is programmed while nothing jumps to the others")

	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("np-top")}))
	apply(t, tbl)
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "np-a", "np-forced", "np-top"}, k.Chains(iptablesfake.BackendNFT, ipfamily.IPv4, "filter"))
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT"}, stripped(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a")))
	assert.Equal(t, []string{"-j np-top"}, stripped(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "FORWARD")))
	st := tbl.WorkStats()
	assert.Equal(t, 3, st.Chains)
	assert.Equal(t, 4, st.Rules)

	// Unhooking removes the chains again, jump first.
	require.NoError(t, tbl.InsertRules("test", "FORWARD", nil))
	apply(t, tbl)
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "np-forced"}, k.Chains(iptablesfake.BackendNFT, ipfamily.IPv4, "filter"))
	assert.Empty(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "FORWARD"))
}

func TestEveryRuleCarriesAPositionalHash(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	same := acceptFrom("10.0.0.0/8")
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{same, same}, ForceProgramming: true}))
	apply(t, tbl)
	rules := k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a")
	require.Len(t, rules, 2)
	for _, r := range rules {
		assert.True(t, ours(r), r)
	}
	assert.NotEqual(t, rules[0], rules[1], "equal rules at different positions get different hashes")
	// The hash comment sits where iptables-save prints the first match:
	// after the header criteria.
	assert.True(t, strings.HasPrefix(rules[0], `-s 10.0.0.0/8 -m comment --comment "np:`), rules[0])
}

func TestNoopApplyRunsNothing(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a")}))
	apply(t, tbl)
	require.Equal(t, 1, k.Count(iptablesfake.OpRestore))
	calls := k.Count(iptablesfake.OpAny)

	apply(t, tbl)
	// Setting the same content again is not a change either.
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a")}))
	apply(t, tbl)
	assert.Equal(t, calls, k.Count(iptablesfake.OpAny), "a no-op Apply runs no binary at all")

	// A resync re-reads but writes nothing when the kernel is right.
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, 1, k.Count(iptablesfake.OpRestore))
	assert.Equal(t, 2, k.Count(iptablesfake.OpSave))
	st := tbl.WorkStats()
	assert.Equal(t, 1, st.Restores)
	assert.Equal(t, 2, st.Saves)
	assert.Equal(t, 3, st.LinesWritten) // :np-a, -A np-a, -I INPUT
}

func TestRestartAdoptsWithoutWriting(t *testing.T) {
	for _, group := range []string{"insert", "append"} {
		t.Run(group, func(t *testing.T) {
			ns, k := newFake()
			require.NoError(t, k.Exec(iptablesfake.BackendNFT, ipfamily.IPv4, "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP"))
			declare := func(tbl *iptables.Table) {
				require.NoError(t, tbl.SetChains(
					netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), jump("np-b")}},
					netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}},
				))
				hook := []netfilter.Rule{jump("np-fw")}
				if group == "insert" {
					require.NoError(t, tbl.InsertRules("test", "FORWARD", hook))
				} else {
					hook = append(hook, netfilter.Rule{Action: netfilter.Drop()})
				}
				require.NoError(t, tbl.AppendRules("test", "FORWARD", hook))
			}
			opts := fakeOpts(ns)
			first := newTable(t, opts)
			declare(first)
			apply(t, first)
			before := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "FORWARD")
			k.ResetCalls()

			second := newTable(t, opts)
			declare(second)
			apply(t, second)
			assert.Equal(t, 0, k.Count(iptablesfake.OpRestore), "a restarted table adopts identical state without writing")
			assert.Equal(t, 1, k.Count(iptablesfake.OpSave))
			assert.Equal(t, before, k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "FORWARD"))
		})
	}
}

func TestChangingOneRuleReplacesOnlyThatRule(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	var rules []netfilter.Rule
	for i := range 10 {
		rules = append(rules, acceptFrom(fmt.Sprintf("10.0.%d.0/24", i)))
	}
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: rules, ForceProgramming: true}))
	apply(t, tbl)
	before := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a")

	changed := append([]netfilter.Rule(nil), rules...)
	changed[9] = acceptFrom("10.9.9.0/24")
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: changed, ForceProgramming: true}))
	apply(t, tbl)
	after := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a")
	require.Len(t, after, 10)
	for i := range 9 {
		assert.Equal(t, before[i], after[i], "rule %d is unchanged and keeps its identity (counters)", i)
	}
	assert.NotEqual(t, before[9].Serial, after[9].Serial)
	assert.Equal(t, "-s 10.9.9.0/24 -j ACCEPT", stripHash(after[9].Spec))
	calls := k.Calls()
	last := calls[len(calls)-1]
	assert.Equal(t, iptablesfake.OpRestore, last.Op)
	assert.Equal(t, 1, strings.Count(last.Stdin, "\n-R np-a 10 "), last.Stdin)
	assert.Equal(t, 3, strings.Count(last.Stdin, "\n"), "only *filter, the replacement and COMMIT: %q", last.Stdin)

	// Shrinking deletes from the end; growing appends.
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: rules[:7], ForceProgramming: true}))
	apply(t, tbl)
	assert.Equal(t, before[:7], k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a"))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: rules, ForceProgramming: true}))
	apply(t, tbl)
	got := k.ListRules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "np-a")
	assert.Equal(t, before[:7], got[:7])
	assert.Equal(t, stripped(specs(before)), stripped(specs(got)))
}

func specs(rs []iptablesfake.Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Spec
	}
	return out
}

func TestForeignRulesInBuiltinChainSurvive(t *testing.T) {
	tests := []struct {
		group string // where our rules other than the last DROP go
		want  []string
	}{
		{"insert", []string{"-j np-fw", "-s 192.0.2.1/32 -j DROP", "-s 192.0.2.2/32 -j DROP", "-j DROP"}},
		{"append", []string{"-s 192.0.2.1/32 -j DROP", "-s 192.0.2.2/32 -j DROP", "-j np-fw", "-j DROP"}},
	}
	for _, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			ns, k := newFake()
			b, v := iptables.BackendNFT, ipfamily.IPv4
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.2", "-j", "DROP"))
			tbl := newTable(t, fakeOpts(ns))
			require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}))
			// declare sets our rules: inserted, or appended before the DROP.
			declare := func(rules ...netfilter.Rule) {
				if tc.group == "insert" {
					require.NoError(t, tbl.InsertRules("test", "FORWARD", rules))
					require.NoError(t, tbl.AppendRules("test", "FORWARD", []netfilter.Rule{{Action: netfilter.Drop()}}))
					return
				}
				require.NoError(t, tbl.AppendRules("test", "FORWARD", append(rules, netfilter.Rule{Action: netfilter.Drop()})))
			}
			declare(jump("np-fw"))
			apply(t, tbl)
			assert.Equal(t, tc.want, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")))
			foreign := func() []iptablesfake.Rule {
				var out []iptablesfake.Rule
				for _, r := range k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD") {
					if !ours(r.Spec) {
						out = append(out, r)
					}
				}
				return out
			}
			before := foreign()
			require.Len(t, before, 2)

			// Change our rules: foreign ones keep their identity.
			declare(acceptFrom("10.9.0.0/16"), jump("np-fw"))
			apply(t, tbl)
			assert.Equal(t, before, foreign())

			// Another agent inserts at the top and appends at the bottom
			// later; a resync puts ours back in place around them and
			// leaves theirs.
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-I", "FORWARD", "1", "-s", "192.0.2.3", "-j", "ACCEPT"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.4", "-j", "ACCEPT"))
			tbl.QueueResync()
			apply(t, tbl)
			got := stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD"))
			require.Len(t, got, 7)
			assert.Equal(t, "-j DROP", got[6], "append rules stay last")
			if tc.group == "insert" {
				assert.Equal(t, []string{"-s 10.9.0.0/16 -j ACCEPT", "-j np-fw"}, got[:2], "ours first again")
			} else {
				assert.Equal(t, []string{"-s 10.9.0.0/16 -j ACCEPT", "-j np-fw"}, got[4:6])
			}
			assert.Len(t, foreign(), 4)
			assert.Subset(t, foreign(), before)

			// Removing all of ours leaves exactly the foreign rules.
			require.NoError(t, tbl.InsertRules("test", "FORWARD", nil))
			require.NoError(t, tbl.AppendRules("test", "FORWARD", nil))
			apply(t, tbl)
			assert.Equal(t, []string{"-s 192.0.2.3/32 -j ACCEPT", "-s 192.0.2.1/32 -j DROP", "-s 192.0.2.2/32 -j DROP", "-s 192.0.2.4/32 -j ACCEPT"},
				k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD"))
		})
	}
}

func TestRemovesLeftoverChainsAndRules(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	// A previous run left chains and a hook; a foreign chain sits beside.
	old := newTable(t, fakeOpts(ns))
	require.NoError(t, old.SetChains(
		netfilter.Chain{Name: "np-old", Rules: []netfilter.Rule{jump("np-old2")}},
		netfilter.Chain{Name: "np-old2", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
	))
	require.NoError(t, old.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-old")}))
	apply(t, old)
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-FOO"))
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "KUBE-FOO", "-j", "ACCEPT"))
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "INPUT", "-j", "KUBE-FOO"))

	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-new", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-new")}))
	apply(t, tbl)
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "KUBE-FOO", "np-new"}, k.Chains(iptablesfake.Backend(b), v, "filter"))
	assert.Equal(t, []string{"-j np-new", "-j KUBE-FOO"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
	assert.Equal(t, []string{"-j ACCEPT"}, k.Rules(iptablesfake.Backend(b), v, "filter", "KUBE-FOO"))

	// Chains and hooks all gone when nothing is declared.
	empty := newTable(t, fakeOpts(ns))
	apply(t, empty)
	assert.Equal(t, []string{"INPUT", "FORWARD", "OUTPUT", "KUBE-FOO"}, k.Chains(iptablesfake.Backend(b), v, "filter"))
	assert.Equal(t, []string{"-j KUBE-FOO"}, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"))
}

func TestChainReferencedByForeignRuleIsKept(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	opts := fakeOpts(ns)
	clk := opts.Clock.(*clock.Fake)
	tbl := newTable(t, opts)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}, ForceProgramming: true}))
	apply(t, tbl)
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "OUTPUT", "-j", "np-a"))

	// A foreign jump keeps a declared chain programmed even unforced…
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, []string{"-s 10.1.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "np-a")))

	// …and a removed chain that a foreign rule jumps to is flushed, not
	// deleted (deleting it would fail the whole transaction); Apply says
	// so, and comes back for it.
	require.NoError(t, tbl.RemoveChains("np-a"))
	res, err := tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
	assert.Equal(t, time.Second, res.RetryAfter)
	assert.Contains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")
	assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "np-a"))
	assert.Equal(t, []string{"-j np-a"}, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"))
	k.ResetCalls()
	_, err = tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
	assert.Zero(t, k.Count(iptablesfake.OpAny), "nothing to do before the retry")

	// Still referenced at the retry: kept, and the next retry is later.
	clk.Advance(time.Second)
	res, err = tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-a": iptables.ErrChainInUse})
	assert.Equal(t, 2*time.Second, res.RetryAfter)
	assert.Zero(t, k.Count(iptablesfake.OpRestore))

	// Once the foreign jump is gone, the retry deletes the chain.
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-D", "OUTPUT", "-j", "np-a"))
	clk.Advance(2 * time.Second)
	apply(t, tbl)
	assert.NotContains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), "np-a")
}

// requireObjects checks that err is a partial failure naming exactly the
// objects of want, each with its reason.
func requireObjects(t *testing.T, err error, want map[string]error) *dataplane.PartialError {
	t.Helper()
	require.ErrorIs(t, err, dataplane.ErrPartial)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	got := map[string]error{}
	for _, o := range pe.Objects() {
		require.Equal(t, "iptables", o.Driver)
		require.Equal(t, dataplane.ObjectKind("chain"), o.Kind)
		got[o.Name] = o.Reason
		require.ErrorIs(t, err, o.Reason)
	}
	require.Equal(t, want, got, "objects not written: %v", err)
	require.True(t, strings.HasPrefix(err.Error(), "iptables: "), err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), "iptables:"), err.Error())
	return pe
}

// TestDriftRepairedOnResync: between reads a Table trusts what it wrote,
// whatever the time (periodic resync is the loop's: Apply asks for no
// refresh); QueueResync makes the next Apply re-read and repair.
func TestDriftRepairedOnResync(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	opts := fakeOpts(ns)
	clk := clock.NewFake(t0)
	opts.Clock = clk
	tbl := newTable(t, opts)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), acceptFrom("10.1.0.0/16")}}))
	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{jump("np-a")}))
	res := apply(t, tbl)
	assert.Zero(t, res.RetryAfter, "no periodic refresh of its own")
	want := k.Save(iptablesfake.Backend(b), v, "filter")

	drifts := []struct {
		name  string
		drift func()
	}{
		{"our rule deleted from a built-in chain", func() {
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-D", "FORWARD", k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")[0]))
		}},
		{"our chain flushed", func() { require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-F", "np-a")) }},
		{"one rule of our chain deleted", func() { require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-D", "np-a", "1")) }},
		{"foreign rule added to our chain", func() { require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-I", "np-a", "2", "-j", "DROP")) }},
		{"empty rule inserted in our chain", func() { require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-I", "np-a", "1")) }},
		{"the whole table flushed", func() {
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-F"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-X"))
		}},
	}
	for _, d := range drifts {
		t.Run(d.name, func(t *testing.T) {
			d.drift()
			require.NotEqual(t, want, k.Save(iptablesfake.Backend(b), v, "filter"))
			// Without a resync nothing runs, however long it has been.
			k.ResetCalls()
			clk.Advance(time.Hour)
			res := apply(t, tbl)
			assert.Zero(t, res.RetryAfter)
			assert.Zero(t, k.Count(iptablesfake.OpAny))
			// A resync re-reads and repairs.
			tbl.QueueResync()
			apply(t, tbl)
			assert.Equal(t, want, k.Save(iptablesfake.Backend(b), v, "filter"))
			assert.Equal(t, 1, k.Count(iptablesfake.OpRestore))
		})
	}
}

func TestPostWriteRechecksCatchAClobber(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	opts := fakeOpts(ns)
	clk := clock.NewFake(t0)
	opts.Clock = clk
	opts.PostWriteRecheck = []time.Duration{time.Second, 10 * time.Second}
	tbl := newTable(t, opts)
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	res := apply(t, tbl)
	assert.Equal(t, time.Second, res.RetryAfter, "first recheck soon after the write")

	// First recheck: nothing changed; the next one is further away.
	clk.Advance(time.Second)
	k.ResetCalls()
	res = apply(t, tbl)
	assert.Equal(t, 1, k.Count(iptablesfake.OpSave))
	assert.Zero(t, k.Count(iptablesfake.OpRestore))
	assert.Equal(t, 10*time.Second, res.RetryAfter)

	// Someone flushes INPUT; the second recheck repairs it and restarts
	// the schedule.
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-F", "INPUT"))
	clk.Advance(10 * time.Second)
	res = apply(t, tbl)
	assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"), 1)
	assert.Equal(t, time.Second, res.RetryAfter)

	// After the last recheck nothing is due: periodic resync is the
	// loop's.
	clk.Advance(time.Second)
	apply(t, tbl)
	clk.Advance(10 * time.Second)
	res = apply(t, tbl)
	assert.Zero(t, res.RetryAfter)
	clk.Advance(time.Hour)
	k.ResetCalls()
	res = apply(t, tbl)
	assert.Zero(t, res.RetryAfter)
	assert.Zero(t, k.Count(iptablesfake.OpAny))
}

// TestWholeRestoreFailureIsReturned: a restore that fails without naming
// a line (the binary failed as a whole) is the Table's failure: Apply
// returns it (the dataplane loop retries with backoff) and the next Apply
// re-reads and converges.
func TestWholeRestoreFailureIsReturned(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	k.FailNext(iptablesfake.OpRestore, 1)
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrRestore)
	require.NotErrorIs(t, err, dataplane.ErrPartial)
	var re *command.RestoreError
	require.ErrorAs(t, err, &re)
	assert.Zero(t, re.Line)
	assert.Equal(t, []string{"iptables-nft-restore", "-w", "5", "--noflush"}, re.Argv)
	var ce *command.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.ExitCode)
	assert.Contains(t, err.Error(), "injected failure")
	assert.Equal(t, 1, k.Count(iptablesfake.OpRestore), "no retry inside Apply: the loop owns it")

	apply(t, tbl)
	assert.Len(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"), 1)
	st := tbl.WorkStats()
	assert.Equal(t, [2]int{2, 1}, [2]int{st.Restores, st.RestoreErrors})
	assert.Equal(t, 2, st.Saves, "the next Apply re-read")
}

func TestSaveFailure(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	k.FailNext(iptablesfake.OpSave, 1)
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrSave)
	assert.Zero(t, k.Count(iptablesfake.OpRestore))
	apply(t, tbl)
	assert.Len(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"), 1)
}

func TestApplyStopsWhenContextEnds(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	ctx, cancel := context.WithCancel(context.Background())
	k.OnCall(func(c iptablesfake.Call) {
		if c.Op == iptablesfake.OpRestore {
			cancel()
		}
	})
	_, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestConcurrentWriterBetweenSaveAndRestore(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8"), acceptFrom("10.1.0.0/16")}))
	apply(t, tbl)

	// Between our save and our restore another agent deletes one of our
	// rules (our delete-by-text fails) and inserts its own at the top.
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.2.0.0/16")}))
	tbl.QueueResync()
	k.OnCall(func(c iptablesfake.Call) {
		if c.Op == iptablesfake.OpRestore {
			k.OnCall(nil)
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-D", "INPUT", "2"))
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-I", "INPUT", "1", "-j", "ACCEPT"))
		}
	})
	apply(t, tbl)
	assert.Equal(t, []string{"-s 10.2.0.0/16 -j ACCEPT", "-j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
	assert.Equal(t, 1, tbl.WorkStats().RestoreErrors, "the first restore failed and the retry converged")
}

func TestDuplicatedRuleOfOursIsCleanedUp(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8"), acceptFrom("10.1.0.0/16")}))
	apply(t, tbl)
	// Someone re-appends a copy of our first rule (as restore --noflush of
	// an old dump would).
	first := k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")[0]
	require.NoError(t, k.Restore(iptablesfake.Backend(b), v, "*filter\n-A INPUT "+first+"\nCOMMIT\n", true))
	require.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"), 3)
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT", "-s 10.1.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
}

// TestInsertAndAppendSwitch moves our rules from the top of a built-in
// chain to its bottom and back, each by a new Table (as a restarted agent
// that changed its mind): the foreign rule stays.
func TestInsertAndAppendSwitch(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "INPUT", "-s", "192.0.2.1", "-j", "DROP"))
	declare := func(set func(*iptables.Table, string, netfilter.Hook, []netfilter.Rule) error) {
		tbl := newTable(t, fakeOpts(ns))
		require.NoError(t, set(tbl, "test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
		apply(t, tbl)
	}
	declare((*iptables.Table).InsertRules)
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT", "-s 192.0.2.1/32 -j DROP"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
	declare((*iptables.Table).AppendRules)
	assert.Equal(t, []string{"-s 192.0.2.1/32 -j DROP", "-s 10.0.0.0/8 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
	declare((*iptables.Table).InsertRules)
	assert.Equal(t, []string{"-s 10.0.0.0/8 -j ACCEPT", "-s 192.0.2.1/32 -j DROP"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
}

func TestBadInputChangesNothing(t *testing.T) {
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	good := netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}, ForceProgramming: true}
	require.NoError(t, tbl.SetChains(good))
	apply(t, tbl)
	saved := k.Save(iptablesfake.BackendNFT, ipfamily.IPv4, "filter")
	k.ResetCalls()

	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"chain without prefix", func() error { return tbl.SetChains(netfilter.Chain{Name: "other"}) }, iptables.ErrNotOwned},
		{"chain name too long", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-" + strings.Repeat("x", netfilter.MaxChainNameLength)})
		}, netfilter.ErrInvalidChainName},
		{"chain name with blank", func() error { return tbl.SetChains(netfilter.Chain{Name: "np-a b"}) }, netfilter.ErrInvalidChainName},
		{"IPv6 rule in an IPv4 table", func() error {
			return tbl.SetChains(good, netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("2001:db8::/32")}})
		}, netfilter.ErrWrongFamily},
		{"rule without action", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{src("10.0.0.0/8")}}}})
		}, netfilter.ErrInvalidRule},
		{"nil criterion", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{nil}, Action: netfilter.Accept()}}})
		}, netfilter.ErrInvalidRule},
		{"comment with newline", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Accept(), Comments: []string{"a\nb"}}}})
		}, netfilter.ErrInvalidRule},
		{"jump to invalid name", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{jump("bad name")}})
		}, netfilter.ErrInvalidChainName},
		{"jump to built-in chain", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{jump("INPUT")}})
		}, netfilter.ErrInvalidRule},
		{"duplicate chain", func() error { return tbl.SetChains(good, good) }, iptables.ErrDuplicateChain},
		{"remove chain without prefix", func() error { return tbl.RemoveChains("np-a", "INPUT") }, iptables.ErrNotOwned},
		{"hook on a chain of another table", func() error {
			return tbl.InsertRules("test", "PREROUTING", []netfilter.Rule{acceptFrom("10.0.0.0/8")})
		}, iptables.ErrNotBuiltin},
		{"hook on an owned chain", func() error { return tbl.AppendRules("test", "np-a", []netfilter.Rule{acceptFrom("10.0.0.0/8")}) }, iptables.ErrNotBuiltin},
		{"bad hook rule", func() error {
			return tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8"), {}})
		}, netfilter.ErrInvalidRule},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
			apply(t, tbl)
			assert.Zero(t, k.Count(iptablesfake.OpAny), "nothing changed, so nothing runs")
			assert.Equal(t, saved, k.Save(iptablesfake.BackendNFT, ipfamily.IPv4, "filter"))
		})
	}
}

// TestUnknownChainAndLoopAreIsolated: a jump to an undeclared owned chain
// or a loop (which only Apply can see: the target may be declared later)
// holds back the object holding the jump, not the table; declaring what
// is missing lets it through.
func TestUnknownChainAndLoopAreIsolated(t *testing.T) {
	b, v := iptables.BackendNFT, ipfamily.IPv4
	tests := []struct {
		name   string
		chains []netfilter.Chain
		held   map[string]error
		fix    netfilter.Chain
	}{
		{"jump to undeclared chain", []netfilter.Chain{{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), jump("np-missing")}}},
			map[string]error{"np-a": iptables.ErrUnknownChain}, netfilter.Chain{Name: "np-missing"}},
		{"loop", []netfilter.Chain{
			{Name: "np-a", Rules: []netfilter.Rule{jump("np-b")}},
			{Name: "np-b", Rules: []netfilter.Rule{jump("np-c")}},
			{Name: "np-c", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), jump("np-a")}},
		}, map[string]error{"np-c": iptables.ErrChainLoop}, netfilter.Chain{Name: "np-c", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, k := newFake()
			tbl := newTable(t, fakeOpts(ns))
			require.NoError(t, tbl.SetChains(tc.chains...))
			require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a")}))
			require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
			res, err := tbl.Apply(context.Background())
			requireObjects(t, err, tc.held)
			assert.Zero(t, res.RetryAfter, "no retry of its own: only a new declaration helps")
			// Everything else is written; the held chain exists, empty,
			// so that the jumps to it are valid.
			assert.Equal(t, []string{"-j np-a"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
			assert.Equal(t, []string{"-s 10.1.0.0/16 -j ACCEPT"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT")))
			for name := range tc.held {
				assert.Contains(t, k.Chains(iptablesfake.Backend(b), v, "filter"), name)
				assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", name))
			}
			k.ResetCalls()
			_, err = tbl.Apply(context.Background())
			requireObjects(t, err, tc.held)
			assert.Zero(t, k.Count(iptablesfake.OpAny))
			// Declaring what was missing lets the held chain through.
			require.NoError(t, tbl.SetChains(tc.fix))
			apply(t, tbl)
			tbl.QueueResync()
			k.ResetCalls()
			apply(t, tbl)
			assert.Zero(t, k.Count(iptablesfake.OpRestore), "converged")
		})
	}
	// A hook that jumps to an undeclared chain is held back the same way.
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8"), jump("np-missing")}))
	require.NoError(t, tbl.InsertRules("test", "OUTPUT", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	_, err := tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"INPUT": iptables.ErrUnknownChain})
	assert.Empty(t, k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT"))
	assert.Len(t, k.Rules(iptablesfake.Backend(b), v, "filter", "OUTPUT"), 1)

	// An unreferenced loop is not programmed, so it is no error.
	ns, k = newFake()
	tbl = newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{jump("np-b")}}, netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{jump("np-a")}}))
	apply(t, tbl)
	// Foreign chains may be jumped to; the kernel checks they exist.
	require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-N", "KUBE-X"))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("KUBE-X")}))
	apply(t, tbl)
	assert.Equal(t, []string{"-j KUBE-X"}, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "INPUT")))
}

func TestIncompatibleTable(t *testing.T) {
	ns, k := newFake()
	require.NoError(t, k.SetIncompatible(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", true))
	tbl := newTable(t, fakeOpts(ns))
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, iptables.ErrIncompatible)
	assert.Zero(t, k.Count(iptablesfake.OpRestore))
}

// firstHook is the first built-in chain of each table.
var firstHook = map[string]netfilter.Hook{"filter": netfilter.HookInput, "nat": netfilter.HookPrerouting,
	"mangle": netfilter.HookPrerouting, "raw": netfilter.HookPrerouting}

func TestTablesAreIndependent(t *testing.T) {
	ns, k := newFake()
	var tables []*iptables.Table
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			for _, name := range []string{"filter", "nat", "mangle", "raw"} {
				opts := fakeOpts(ns)
				opts.Backend, opts.Family, opts.Table = b, v, name
				tbl := newTable(t, opts)
				chain := firstHook[name]
				require.NoError(t, tbl.InsertRules("test", chain, []netfilter.Rule{{Action: netfilter.Return()}}))
				tables = append(tables, tbl)
			}
		}
	}
	for _, tbl := range tables {
		apply(t, tbl)
	}
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			for _, name := range []string{"filter", "nat", "mangle", "raw"} {
				chain := firstHook[name]
				assert.Equal(t, []string{"-j RETURN"}, stripped(k.Rules(iptablesfake.Backend(b), v, name, string(chain))), "%s %v %s", b, v, name)
			}
		}
	}
	restores := map[string]int{}
	for _, c := range k.Calls() {
		if c.Op == iptablesfake.OpRestore {
			restores[c.Binary]++
		}
	}
	assert.Equal(t, map[string]int{
		"iptables-legacy-restore": 4, "ip6tables-legacy-restore": 4,
		"iptables-nft-restore": 4, "ip6tables-nft-restore": 4,
	}, restores)
}

func TestLockTimeoutArgument(t *testing.T) {
	tests := []struct {
		timeout time.Duration
		want    []string
	}{
		{0, []string{"-w", "5", "--noflush"}},
		{1500 * time.Millisecond, []string{"-w", "2", "--noflush"}},
		{-1, []string{"-w", "--noflush"}},
	}
	for _, tc := range tests {
		ns, k := newFake()
		opts := fakeOpts(ns)
		opts.LockTimeout = tc.timeout
		tbl := newTable(t, opts)
		require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
		apply(t, tbl)
		calls := k.Calls()
		assert.Equal(t, tc.want, calls[len(calls)-1].Args)
	}
}

func TestCustomHashPrefix(t *testing.T) {
	ns, k := newFake()
	b, v := iptables.BackendNFT, ipfamily.IPv4
	// Two agents with different prefixes share FORWARD without touching
	// each other's rules (one inserts, one appends, so they agree on the
	// order).
	mk := func(chainPrefix, hashPrefix string) *iptables.Table {
		opts := fakeOpts(ns)
		opts.ChainPrefix, opts.HashPrefix = chainPrefix, hashPrefix
		return newTable(t, opts)
	}
	a, c := mk("aa-", "aa_x"), mk("cc-", "")
	require.NoError(t, a.AppendRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.0.0.0/8")}))
	require.NoError(t, c.InsertRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.1.0.0/16")}))
	apply(t, a)
	apply(t, c)
	rules := k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")
	require.Len(t, rules, 2)
	assert.Contains(t, rules[0], `--comment "cc:`)
	assert.Contains(t, rules[1], "--comment aa_x", "a prefix of plain characters is printed unquoted")
	a.QueueResync()
	c.QueueResync()
	k.ResetCalls()
	apply(t, a)
	apply(t, c)
	assert.Zero(t, k.Count(iptablesfake.OpRestore), "each recognises its own rules, quoted or not")
}

func TestIPv6Table(t *testing.T) {
	ns, k := newFake()
	opts := fakeOpts(ns)
	opts.Family = ipfamily.IPv6
	tbl := newTable(t, opts)
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("2001:db8::/32")}))
	apply(t, tbl)
	assert.Equal(t, []string{"-s 2001:db8::/32 -j ACCEPT"}, stripped(k.Rules(iptablesfake.BackendNFT, ipfamily.IPv6, "filter", "INPUT")))
	assert.Empty(t, k.Rules(iptablesfake.BackendNFT, ipfamily.IPv4, "filter", "INPUT"))
	require.ErrorIs(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{acceptFrom("10.0.0.0/8")}), netfilter.ErrWrongFamily)
}

func TestUnknownRunnerErrorIsWrapped(t *testing.T) {
	boom := errors.New("boom")
	opts := fakeOpts(nil)
	opts.Kernel = commands(command.RunnerFunc(func(context.Context, io.Reader, string, ...string) ([]byte, error) { return nil, boom }))
	tbl := newTable(t, opts)
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, iptables.ErrSave)
}

// TestBuiltinChainEditsKeepUnchangedRules checks that editing our rules in
// a built-in chain rewrites only what changed: the rules around a changed
// one keep their identity (and counters), foreign rules are never touched.
func TestBuiltinChainEditsKeepUnchangedRules(t *testing.T) {
	b, v := iptables.BackendNFT, ipfamily.IPv4
	r := func(i int) netfilter.Rule { return acceptFrom(fmt.Sprintf("10.%d.0.0/16", i)) }
	tests := []struct {
		name          string
		before, after []netfilter.Rule // front group
		backBefore    []netfilter.Rule
		backAfter     []netfilter.Rule
		rewritten     int // our rules created by the second apply
	}{
		{"change the middle front rule", []netfilter.Rule{r(1), r(2), r(3)}, []netfilter.Rule{r(1), r(9), r(3)}, nil, nil, 1},
		{"grow the front", []netfilter.Rule{r(1), r(2)}, []netfilter.Rule{r(1), r(2), r(3)}, nil, nil, 1},
		{"shrink the front", []netfilter.Rule{r(1), r(2), r(3)}, []netfilter.Rule{r(1), r(2)}, nil, nil, 0},
		{"change the middle back rule", nil, nil, []netfilter.Rule{r(1), r(2), r(3)}, []netfilter.Rule{r(1), r(9), r(3)}, 1},
		{"grow the back", nil, nil, []netfilter.Rule{r(1), r(2)}, []netfilter.Rule{r(1), r(2), r(3)}, 1},
		{"change front and back", []netfilter.Rule{r(1), r(2)}, []netfilter.Rule{r(5), r(2)}, []netfilter.Rule{r(3), r(4)}, []netfilter.Rule{r(3), r(6)}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns, k := newFake()
			require.NoError(t, k.Exec(iptablesfake.Backend(b), v, "-A", "FORWARD", "-s", "192.0.2.1", "-j", "DROP"))
			tbl := newTable(t, fakeOpts(ns))
			require.NoError(t, tbl.InsertRules("test", "FORWARD", tc.before))
			require.NoError(t, tbl.AppendRules("test", "FORWARD", tc.backBefore))
			apply(t, tbl)
			before := map[uint64]bool{}
			for _, r := range k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD") {
				before[r.Serial] = true
			}
			require.NoError(t, tbl.InsertRules("test", "FORWARD", tc.after))
			require.NoError(t, tbl.AppendRules("test", "FORWARD", tc.backAfter))
			apply(t, tbl)
			created := 0
			for _, r := range k.ListRules(iptablesfake.Backend(b), v, "filter", "FORWARD") {
				if !before[r.Serial] {
					created++
				}
			}
			assert.Equal(t, tc.rewritten, created)

			// The result is what a fresh table writes from scratch.
			var want []string
			for _, r := range tc.after {
				args, err := iptables.RuleArgs(r, v)
				require.NoError(t, err)
				want = append(want, strings.Join(args, " "))
			}
			want = append(want, "-s 192.0.2.1/32 -j DROP")
			for _, r := range tc.backAfter {
				args, err := iptables.RuleArgs(r, v)
				require.NoError(t, err)
				want = append(want, strings.Join(args, " "))
			}
			assert.Equal(t, want, stripped(k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")))
			tbl.QueueResync()
			k.ResetCalls()
			apply(t, tbl)
			assert.Zero(t, k.Count(iptablesfake.OpRestore), "converged")
		})
	}
}

// TestBuiltinChainRepairsStrayRules puts stale and misplaced rules of ours
// into a built-in chain; one Apply deletes or moves exactly those.
func TestBuiltinChainRepairsStrayRules(t *testing.T) {
	b, v := iptables.BackendNFT, ipfamily.IPv4
	ns, k := newFake()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.InsertRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.1.0.0/16"), acceptFrom("10.2.0.0/16")}))
	require.NoError(t, tbl.AppendRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.3.0.0/16"), acceptFrom("10.4.0.0/16")}))
	apply(t, tbl)
	want := k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")

	// A stale rule of ours from an old declaration (rendered through a
	// throwaway fake), put in the middle and in the trailing run, and a
	// foreign rule between our front rules.
	ns2, k2 := newFake()
	old := newTable(t, fakeOpts(ns2))
	require.NoError(t, old.AppendRules("test", "FORWARD", []netfilter.Rule{acceptFrom("10.9.0.0/16")}))
	apply(t, old)
	stale := k2.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")[0]
	require.NoError(t, k.Restore(iptablesfake.Backend(b), v, "*filter\n-I FORWARD 2 -j ACCEPT\n-I FORWARD 4 "+stale+"\n-A FORWARD "+stale+"\nCOMMIT\n", true))
	tbl.QueueResync()
	apply(t, tbl)
	got := k.Rules(iptablesfake.Backend(b), v, "filter", "FORWARD")
	assert.Equal(t, []string{want[0], want[1], "-j ACCEPT", want[2], want[3]}, got)
}

func TestStatsCountObjects(t *testing.T) {
	ns, _ := newFake()
	tbl := newTable(t, fakeOpts(ns))
	assert.Equal(t, dataplane.DriverStats{}, tbl.Stats())
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
		netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{jump("np-missing")}},
		netfilter.Chain{Name: "np-unused"},
	))
	require.NoError(t, tbl.InsertRules("test", "INPUT", []netfilter.Rule{jump("np-a"), jump("np-b")}))
	_, err := tbl.Apply(context.Background())
	requireObjects(t, err, map[string]error{"np-b": iptables.ErrUnknownChain})
	st := tbl.Stats()
	// np-unused is declared but not programmed (nothing jumps to it); np-b
	// exists, empty, for the jump to it.
	assert.Equal(t, 3, st.Desired, "np-a, np-b and INPUT")
	assert.Equal(t, 3, st.InKernel, "np-a, np-b and INPUT")
	assert.Equal(t, 1, st.Failing)
	assert.Equal(t, uint64(tbl.WorkStats().LinesWritten), st.Writes)
	assert.NotZero(t, st.Writes)

	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-missing"}, netfilter.Chain{Name: "np-unused", Rules: []netfilter.Rule{acceptFrom("10.2.0.0/16")}}))
	require.NoError(t, tbl.AppendRules("test", "OUTPUT", []netfilter.Rule{jump("np-unused")}))
	apply(t, tbl)
	after := tbl.Stats()
	assert.Equal(t, dataplane.DriverStats{Desired: 6, InKernel: 6, Writes: after.Writes}, after)
	assert.Greater(t, after.Writes, st.Writes)

	// A no-op Apply writes nothing; removing our rules from a hook drops
	// it, and the chain only it jumped to, from the objects.
	apply(t, tbl)
	assert.Equal(t, after, tbl.Stats())
	require.NoError(t, tbl.AppendRules("test", "OUTPUT", nil))
	apply(t, tbl)
	assert.Equal(t, 4, tbl.Stats().Desired)
	assert.Equal(t, 4, tbl.Stats().InKernel)
}
