//go:build linux

package nftables_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

const v4 = nftablesfake.IPv4

// declareBasic declares a small table: a chain reached from INPUT, a set, a
// verdict map sending a service to its chain.
func declareBasic(t testing.TB, tbl *nftables.Table) {
	t.Helper()
	require.NoError(t, tbl.SetSets(
		nftables.Set{Name: "nets", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true,
			Elements: []nftables.Element{nftables.Elem(nftables.Prefix(pfx("10.0.0.0/8"))), nftables.Elem(nftables.Prefix(pfx("192.168.0.0/16")))}},
		nftables.Set{Name: "svc", Key: svcKey, Verdict: true, Elements: []nftables.Element{svcElem("10.96.0.1", 80, "svc-a")}},
	))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8")}},
		netfilter.Chain{Name: "fw", Rules: []netfilter.Rule{
			{Matches: []netfilter.Match{netfilter.SourceIPSet("nets")}, Action: netfilter.Return()},
			{Action: netfilter.VerdictMap("svc", netfilter.Dst, netfilter.Dst)},
			acceptFrom("172.16.0.0/12"),
		}},
	))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("fw")}))
}

func TestApplyProgramsDeclaredState(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	declareBasic(t, tbl)
	apply(t, tbl)
	assert.Equal(t, []string{"ip np"}, ns.Tables(0))
	assert.Equal(t, []string{"nets", "svc"}, ns.Sets(v4, "np"))
	assert.ElementsMatch(t, []string{"INPUT", "fw", "svc-a"}, chainNames(ns, v4, "np"))
	assert.Len(t, comments(ns, v4, "np", "fw"), 3)
	assert.Equal(t, []string{"10.96.0.1 . tcp . 80 : goto svc-a"}, ns.Elements(v4, "np", "svc"))
	assert.Equal(t, []string{"10.0.0.0", "11.0.0.0 [end]", "192.168.0.0", "192.169.0.0 [end]"}, ns.Elements(v4, "np", "nets"))
	for _, c := range ns.Chains(v4, "np") {
		if c.Name == "INPUT" {
			assert.True(t, c.Base)
			assert.Equal(t, int32(-10), c.Priority)
			assert.Equal(t, "filter", c.Type)
		}
	}
	tx, committed, _, _ := ns.Counts()
	assert.Equal(t, 1, tx, "one transaction")
	assert.Equal(t, 1, committed)

	// Nothing changed: no system call at all.
	ns.ResetCounts()
	apply(t, tbl)
	tx, _, _, dumps := ns.Counts()
	assert.Zero(t, tx)
	assert.Zero(t, dumps)

	// A restarted agent declares the same state: it reads, and writes
	// nothing.
	again := newTable(t, fakeOpts(ns))
	declareBasic(t, again)
	apply(t, again)
	tx, _, _, dumps = ns.Counts()
	assert.Zero(t, tx, "adoption writes nothing")
	assert.NotZero(t, dumps)
	assert.Equal(t, 1, again.WorkStats().Reads)
}

func TestChangeOneRuleKeepsTheOthers(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	rules := []netfilter.Rule{acceptFrom("10.0.0.1/32"), acceptFrom("10.0.0.2/32"), acceptFrom("10.0.0.3/32"), acceptFrom("10.0.0.4/32")}
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: rules, ForceProgramming: true}))
	apply(t, tbl)
	before := handles(ns, v4, "np", "c")
	require.Len(t, before, 4)

	rules[2] = acceptFrom("10.0.0.33/32")
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: rules, ForceProgramming: true}))
	ns.ResetCounts()
	apply(t, tbl)
	after := handles(ns, v4, "np", "c")
	require.Len(t, after, 4)
	assert.Equal(t, before[:2], after[:2], "rules before the change keep their handles")
	assert.Equal(t, before[3], after[3], "and after it")
	assert.NotEqual(t, before[2], after[2])
	tx, _, reqs, _ := ns.Counts()
	assert.Equal(t, 1, tx)
	assert.Equal(t, 2, reqs, "one rule deleted, one inserted")

	// A rule inserted at the top writes one request.
	rules = append([]netfilter.Rule{acceptFrom("10.0.0.0/32")}, rules...)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: rules, ForceProgramming: true}))
	ns.ResetCounts()
	apply(t, tbl)
	_, _, reqs, _ = ns.Counts()
	assert.Equal(t, 1, reqs)
	assert.Equal(t, after, handles(ns, v4, "np", "c")[1:])

	// Reordering moves the fewest rules.
	rules[0], rules[4] = rules[4], rules[0]
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: rules, ForceProgramming: true}))
	apply(t, tbl)
	again := newTable(t, fakeOpts(ns))
	require.NoError(t, again.SetChains(netfilter.Chain{Name: "c", Rules: rules, ForceProgramming: true}))
	ns.ResetCounts()
	apply(t, again)
	tx, _, _, _ = ns.Counts()
	assert.Zero(t, tx, "the kernel holds the declared order")
}

func TestIdenticalRulesAreKeptApart(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	r := acceptFrom("10.0.0.1/32")
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: []netfilter.Rule{r, r, r}, ForceProgramming: true}))
	apply(t, tbl)
	cs := comments(ns, v4, "np", "c")
	require.Len(t, cs, 3)
	assert.NotEqual(t, cs[0], cs[1])
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "c", Rules: []netfilter.Rule{r, r}, ForceProgramming: true}))
	apply(t, tbl)
	assert.Equal(t, cs[:2], comments(ns, v4, "np", "c"))
}

func TestElementsChangeIncrementally(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	declareBasic(t, tbl)
	apply(t, tbl)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "svc-b", Rules: []netfilter.Rule{acceptFrom("10.1.0.0/16")}}))
	require.NoError(t, tbl.AddElements("svc", svcElem("10.96.0.2", 443, "svc-b")))
	ns.ResetCounts()
	apply(t, tbl)
	tx, _, reqs, _ := ns.Counts()
	assert.Equal(t, 1, tx)
	assert.Equal(t, 3, reqs, "the chain, its rule, the element")
	assert.Equal(t, []string{"10.96.0.1 . tcp . 80 : goto svc-a", "10.96.0.2 . tcp . 443 : goto svc-b"}, ns.Elements(v4, "np", "svc"))

	// An element that changes its verdict is deleted and added again.
	require.NoError(t, tbl.AddElements("svc", svcElem("10.96.0.1", 80, "svc-b")))
	apply(t, tbl)
	assert.Equal(t, []string{"10.96.0.1 . tcp . 80 : goto svc-b", "10.96.0.2 . tcp . 443 : goto svc-b"}, ns.Elements(v4, "np", "svc"))
	assert.NotContains(t, chainNames(ns, v4, "np"), "svc-a", "declared, but nothing jumps to it any more")

	require.NoError(t, tbl.DeleteElements("svc", nftables.Elem(nftables.Addr(addr("10.96.0.2")), nftables.Proto(netfilter.ProtoTCP), nftables.Port(443))))
	apply(t, tbl)
	assert.Equal(t, []string{"10.96.0.1 . tcp . 80 : goto svc-b"}, ns.Elements(v4, "np", "svc"))

	// Interval sets merge adjacent and overlapping ranges.
	require.NoError(t, tbl.AddElements("nets", nftables.Elem(nftables.Prefix(pfx("11.0.0.0/8"))), nftables.Elem(nftables.Prefix(pfx("10.1.0.0/16")))))
	apply(t, tbl)
	assert.Equal(t, []string{"10.0.0.0", "12.0.0.0 [end]", "192.168.0.0", "192.169.0.0 [end]"}, ns.Elements(v4, "np", "nets"))
	require.NoError(t, tbl.DeleteElements("nets", nftables.Elem(nftables.Prefix(pfx("11.0.0.0/8")))))
	apply(t, tbl)
	assert.Equal(t, []string{"10.0.0.0", "11.0.0.0 [end]", "192.168.0.0", "192.169.0.0 [end]"}, ns.Elements(v4, "np", "nets"))
}

func TestExternalChangesAreRepairedOnResync(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	declareBasic(t, tbl)
	apply(t, tbl)
	want := ns.Dump()
	admin := ns.Admin()
	require.NoError(t, admin.DeleteRule(v4, "np", "fw", 1))
	require.NoError(t, admin.DeleteElement(v4, "np", "svc", 0))
	require.NoError(t, admin.AddRule(v4, "np", "fw", "someone else's"))
	require.NoError(t, admin.AddChain(v4, "np", "stray"))
	require.NoError(t, admin.SetTableFlags(v4, "np", 1))

	apply(t, tbl)
	assert.NotEqual(t, want, ns.Dump(), "without a resync the Table trusts its last write")

	tbl.QueueResync()
	apply(t, tbl)
	got := ns.Dump()
	assert.NotContains(t, got, "someone else's")
	assert.NotContains(t, got, "stray")
	assert.NotContains(t, got, "table ip np flags")
	assert.Len(t, comments(ns, v4, "np", "fw"), 3)
	assert.Equal(t, []string{"10.96.0.1 . tcp . 80 : goto svc-a"}, ns.Elements(v4, "np", "svc"))

	// A chain deleted behind our back comes back.
	require.NoError(t, admin.DeleteRule(v4, "np", "INPUT", 0))
	require.NoError(t, admin.DeleteChain(v4, "np", "INPUT"))
	tbl.QueueResync()
	apply(t, tbl)
	assert.Contains(t, chainNames(ns, v4, "np"), "INPUT")

	// The whole table deleted behind our back comes back.
	require.NoError(t, admin.DeleteTable(v4, "np"))
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, strings.Count(want, "\n"), strings.Count(ns.Dump(), "\n"))

	// A resync when nothing changed reads nothing: the generation is the
	// same.
	st := tbl.WorkStats()
	tbl.QueueResync()
	apply(t, tbl)
	assert.Equal(t, st.Reads, tbl.WorkStats().Reads)
	assert.Equal(t, st.GenChecks+1, tbl.WorkStats().GenChecks)
}

func TestForeignTablesAreUntouched(t *testing.T) {
	ns := nftablesfake.New()
	admin := ns.Admin()
	require.NoError(t, admin.AddTable(v4, "kube-proxy"))
	require.NoError(t, admin.AddChain(v4, "kube-proxy", "services"))
	require.NoError(t, admin.AddRule(v4, "kube-proxy", "services", "theirs"))
	require.NoError(t, admin.AddTable(nftablesfake.IPv6, "np"))
	before := ns.Dump()
	tbl := newTable(t, fakeOpts(ns))
	declareBasic(t, tbl)
	apply(t, tbl)
	require.NoError(t, nftables.RemoveTable(context.Background(), ns, ipfamily.IPv4, "np"))
	assert.Equal(t, before, ns.Dump())
}

func TestRefusedObjectDoesNotHoldBackTheOthers(t *testing.T) {
	ns := nftablesfake.New()
	opts := fakeOpts(ns)
	clk := opts.Clock.(*clock.Fake)
	tbl := newTable(t, opts)
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newrule" && r.Chain == "bad" {
			return syscall.EINVAL
		}
		if r.Op == "newsetelem" && len(r.Key) == 4 && r.Key[3] == 66 {
			return syscall.E2BIG
		}
		return 0
	})
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "ips", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{
		nftables.Elem(nftables.Addr(addr("10.0.0.65"))), nftables.Elem(nftables.Addr(addr("10.0.0.66"))), nftables.Elem(nftables.Addr(addr("10.0.0.67")))}}))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "bad", Rules: []netfilter.Rule{acceptFrom("10.0.0.1/32")}},
		netfilter.Chain{Name: "good", Rules: []netfilter.Rule{acceptFrom("10.0.0.2/32")}},
	))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("bad"), jump("good")}))
	res, err := tbl.Apply(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, dataplane.ErrPartial)
	assert.ErrorIs(t, err, nftables.ErrRefused)
	assert.ErrorIs(t, err, syscall.EINVAL)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Objects(), 2, err.Error())
	// In the order they failed: the element's request comes first in the
	// transaction.
	assert.Equal(t, nftables.KindElement, pe.Objects()[0].Kind)
	assert.Equal(t, "ips 10.0.0.66", pe.Objects()[0].Name)
	assert.Equal(t, nftables.KindChain, pe.Objects()[1].Kind)
	assert.Equal(t, "bad", pe.Objects()[1].Name)
	assert.Equal(t, "nftables", pe.Objects()[1].Driver)
	assert.Equal(t, time.Second, res.RetryAfter)
	assert.Equal(t, []string{}, comments(ns, v4, "np", "bad"), "created empty, so the jump to it stays valid")
	assert.Len(t, comments(ns, v4, "np", "good"), 1)
	assert.Len(t, comments(ns, v4, "np", "INPUT"), 2)
	assert.Equal(t, []string{"10.0.0.65", "10.0.0.67"}, ns.Elements(v4, "np", "ips"))

	// Until the retry is due, Apply returns the same error and writes
	// nothing.
	ns.ResetCounts()
	_, err = tbl.Apply(context.Background())
	assert.ErrorIs(t, err, dataplane.ErrPartial)
	tx, _, _, _ := ns.Counts()
	assert.Zero(t, tx)

	// The kernel takes them now: the retry writes them.
	ns.Refuse(nil)
	clk.Advance(time.Second)
	res = apply(t, tbl)
	assert.Zero(t, res.RetryAfter)
	assert.Len(t, comments(ns, v4, "np", "bad"), 1)
	assert.Equal(t, []string{"10.0.0.65", "10.0.0.66", "10.0.0.67"}, ns.Elements(v4, "np", "ips"))
}

func TestUnknownChainAndLoopAreObjectErrors(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "a", Rules: []netfilter.Rule{jump("b")}},
		netfilter.Chain{Name: "b", Rules: []netfilter.Rule{jump("a")}},
		netfilter.Chain{Name: "c", Rules: []netfilter.Rule{jump("missing")}},
	))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("a"), jump("c")}))
	_, err := tbl.Apply(context.Background())
	assert.ErrorIs(t, err, nftables.ErrChainLoop)
	assert.ErrorIs(t, err, nftables.ErrUnknownChain)
	var pe *dataplane.PartialError
	require.ErrorAs(t, err, &pe)
	require.Len(t, pe.Objects(), 2)
	assert.Equal(t, "b", pe.Objects()[0].Name)
	assert.Equal(t, "c", pe.Objects()[1].Name)
	assert.True(t, pe.Objects()[0].RetryAt.IsZero())
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "missing"}, netfilter.Chain{Name: "b"}))
	apply(t, tbl)
}

func TestRebuildAfterRepeatedFailures(t *testing.T) {
	ns := nftablesfake.New()
	opts := fakeOpts(ns)
	opts.RebuildAfter = 2
	tbl := newTable(t, opts)
	declareBasic(t, tbl)
	apply(t, tbl)
	require.NoError(t, ns.Admin().AddChain(v4, "np", "stray"))
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{acceptFrom("10.2.0.0/16")}}))
	ns.FailTransactions(2, syscall.EIO)
	for range 2 {
		_, err := tbl.Apply(context.Background())
		require.ErrorIs(t, err, nftables.ErrWrite)
		require.NotErrorIs(t, err, dataplane.ErrPartial)
	}
	ns.ResetCounts()
	apply(t, tbl)
	assert.Equal(t, 1, tbl.WorkStats().Rebuilds)
	tx, committed, _, _ := ns.Counts()
	assert.Equal(t, 1, tx, "delete and add in one transaction")
	assert.Equal(t, 1, committed)
	assert.NotContains(t, chainNames(ns, v4, "np"), "stray")
	again := newTable(t, fakeOpts(ns))
	declareBasic(t, again)
	require.NoError(t, again.SetChains(netfilter.Chain{Name: "svc-a", Rules: []netfilter.Rule{acceptFrom("10.2.0.0/16")}}))
	ns.ResetCounts()
	apply(t, again)
	tx, _, _, _ = ns.Counts()
	assert.Zero(t, tx)
}

// A port set matched with no protocol to say where the port is: iptables
// gives it a meaning (any protocol's port field), nftables cannot, and says
// so with ErrUnsupported.
func TestPortSetWithoutProtocolUnsupported(t *testing.T) {
	tbl := newTable(t, fakeOpts(nftablesfake.New()))
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "ports", Key: []nftables.KeyType{nftables.TypePort}}))
	err := tbl.SetChains(netfilter.Chain{Name: "a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.IPSet("ports", netfilter.Dst)}, Action: netfilter.Drop()}}})
	require.ErrorIs(t, err, netfilter.ErrUnsupported)
	require.ErrorIs(t, err, netfilter.ErrInvalidRule)
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{
		netfilter.Protocol(netfilter.ProtoUDP), netfilter.IPSet("ports", netfilter.Dst)}, Action: netfilter.Drop()}}}))
}

func TestBadInputChangesNothing(t *testing.T) {
	ns := nftablesfake.New()
	opts := fakeOpts(ns)
	opts.ChainPrefix = "np-"
	tbl := newTable(t, opts)
	v6net := netfilter.SourceNet(pfx("fd00::/8"))
	tests := []struct {
		name string
		do   func() error
		is   []error
	}{
		{"chain without prefix", func() error { return tbl.SetChains(netfilter.Chain{Name: "fw"}) }, []error{nftables.ErrNotOwned}},
		{"chain name too long", func() error { return tbl.SetChains(netfilter.Chain{Name: "np-" + strings.Repeat("x", 40)}) }, []error{netfilter.ErrInvalidChainName}},
		{"base chain name", func() error { return tbl.RemoveChains("INPUT") }, []error{nftables.ErrNotOwned}},
		{"wrong family", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{v6net}, Action: netfilter.Accept()}}})
		}, []error{netfilter.ErrInvalidRule, netfilter.ErrWrongFamily}},
		{"unknown set", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Matches: []netfilter.Match{netfilter.SourceIPSet("nope")}, Action: netfilter.Accept()}}})
		}, []error{nftables.ErrUnknownSet}},
		{"unknown verdict map", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.VerdictMap("nope", netfilter.Dst)}}})
		}, []error{nftables.ErrUnknownSet}},
		{"reject in nat only rules", func() error {
			return tbl.InsertRules("test", netfilter.HookPrerouting, nil)
		}, []error{nftables.ErrNoSuchHook}},
		{"masquerade in filter", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Masquerade()}}})
		}, []error{netfilter.ErrInvalidRule}},
		{"reject at forward of a chain of another hook", func() error {
			return tbl.InsertRules("test", netfilter.HookForward, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.InInterface("eth0"), netfilter.OutInterface("eth1")}, Action: netfilter.Reject(0)}})
		}, nil},
		{"output interface at input", func() error {
			return tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Matches: []netfilter.Match{netfilter.OutInterface("eth1")}, Action: netfilter.Accept()}})
		}, []error{netfilter.ErrInvalidRule}},
		{"comment too long", func() error {
			return tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{{Action: netfilter.Accept(), Comments: []string{strings.Repeat("c", 120)}}}})
		}, []error{netfilter.ErrInvalidRule}},
		{"duplicate chain", func() error { return tbl.SetChains(netfilter.Chain{Name: "np-a"}, netfilter.Chain{Name: "np-a"}) }, []error{nftables.ErrDuplicate}},
		{"set name too long", func() error {
			return tbl.SetSets(nftables.Set{Name: strings.Repeat("s", 40), Key: []nftables.KeyType{nftables.TypeAddr}})
		}, []error{nftables.ErrInvalidSet}},
		{"set without key", func() error { return tbl.SetSets(nftables.Set{Name: "s"}) }, []error{nftables.ErrInvalidSet}},
		{"key too long", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypeIface, nftables.TypeIface, nftables.TypeIface, nftables.TypeIface, nftables.TypeIface}})
		}, []error{nftables.ErrInvalidSet}},
		{"element of the other family", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Addr(addr("fd00::1")))}})
		}, []error{nftables.ErrInvalidElement, netfilter.ErrWrongFamily}},
		{"prefix in a set without intervals", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Prefix(pfx("10.0.0.0/8")))}})
		}, []error{nftables.ErrInvalidElement}},
		{"prefix with host bits", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypeAddr}, Interval: true, Elements: []nftables.Element{nftables.Elem(nftables.Prefix(pfx("10.0.0.1/8")))}})
		}, []error{nftables.ErrInvalidElement}},
		{"wrong key type", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{nftables.Elem(nftables.Port(80))}})
		}, []error{nftables.ErrInvalidElement}},
		{"verdict map element without verdict", func() error {
			return tbl.SetSets(nftables.Set{Name: "s", Key: []nftables.KeyType{nftables.TypePort}, Verdict: true, Elements: []nftables.Element{nftables.Elem(nftables.Port(80))}})
		}, []error{nftables.ErrInvalidElement}},
		{"elements of an unknown set", func() error { return tbl.AddElements("nope", nftables.Elem(nftables.Port(80))) }, []error{nftables.ErrUnknownSet}},
		{"unknown hook", func() error { return tbl.SetPolicy(netfilter.HookPostrouting, nftables.PolicyDrop) }, []error{nftables.ErrNoSuchHook}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if tc.is == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, is := range tc.is {
				assert.ErrorIs(t, err, is)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "nftables: "), err.Error())
			assert.Equal(t, 1, strings.Count(err.Error(), "nftables: "), err.Error())
		})
	}
	_ = tbl.InsertRules("test", netfilter.HookForward, nil)
	ns.ResetCounts()
	apply(t, tbl)
	assert.Empty(t, chainNames(ns, v4, "np"), "nothing bad was declared")

	for _, o := range []nftables.Options{
		{Family: ipfamily.IPv4, Role: nftables.Filter},
		{Name: "1np", Family: ipfamily.IPv4, Role: nftables.Filter},
		{Name: strings.Repeat("n", 65), Family: ipfamily.IPv4, Role: nftables.Filter},
		{Name: "n p", Family: ipfamily.IPv4, Role: nftables.Filter},
		{Name: "np", Role: nftables.Filter},
		{Name: "np", Family: ipfamily.IPv4},
		{Name: "np", Family: ipfamily.IPv4, Role: "security"},
		{Name: "np", Family: ipfamily.IPv4, Role: nftables.NAT, HashPrefix: "a b"},
		{Name: "np", Family: ipfamily.IPv4, Role: nftables.NAT, ChainPrefix: "-x"},
		{Name: "np", Family: ipfamily.IPv4, Role: nftables.NAT, PostWriteRecheck: []time.Duration{0}},
	} {
		_, err := nftables.New(o)
		assert.ErrorIs(t, err, nftables.ErrInvalidOptions, "%+v", o)
	}
}

func TestApplyFailsAsAWholeWhenTheKernelCannotBeRead(t *testing.T) {
	ns := nftablesfake.New()
	tbl := newTable(t, fakeOpts(ns))
	declareBasic(t, tbl)
	apply(t, tbl)
	require.NoError(t, ns.Admin().DeleteRule(v4, "np", "fw", 0))
	tbl.QueueResync()
	ns.FailDumps(1)
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, nftables.ErrRead)
	assert.False(t, errors.Is(err, dataplane.ErrPartial))
	apply(t, tbl)
	assert.Len(t, comments(ns, v4, "np", "fw"), 3)
}

func TestStatsCountObjects(t *testing.T) {
	ns := nftablesfake.New()
	opts := fakeOpts(ns)
	clk := opts.Clock.(*clock.Fake)
	tbl := newTable(t, opts)
	assert.Equal(t, dataplane.DriverStats{}, tbl.Stats())
	ns.Refuse(func(r nftablesfake.Request) syscall.Errno {
		if r.Op == "newrule" && r.Chain == "bad" || r.Op == "newsetelem" && len(r.Key) == 4 && r.Key[3] == 66 {
			return syscall.EINVAL
		}
		return 0
	})
	require.NoError(t, tbl.SetSets(nftables.Set{Name: "ips", Key: []nftables.KeyType{nftables.TypeAddr}, Elements: []nftables.Element{
		nftables.Elem(nftables.Addr(addr("10.0.0.65"))), nftables.Elem(nftables.Addr(addr("10.0.0.66")))}}))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "bad", Rules: []netfilter.Rule{acceptFrom("10.0.0.1/32")}},
		netfilter.Chain{Name: "good", Rules: []netfilter.Rule{acceptFrom("10.0.0.2/32")}},
		netfilter.Chain{Name: "unused"},
	))
	require.NoError(t, tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{jump("bad"), jump("good")}))
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, dataplane.ErrPartial)
	st := tbl.Stats()
	// unused is declared but not programmed (nothing jumps to it); bad
	// exists, empty, for the jump to it.
	assert.Equal(t, 4, st.Desired, "bad, good, the base chain and the set")
	assert.Equal(t, 4, st.InKernel)
	assert.Equal(t, 2, st.Failing, "the chain bad and one element")
	assert.Equal(t, uint64(tbl.WorkStats().Messages), st.Writes)
	assert.NotZero(t, st.Writes)

	ns.Refuse(nil)
	clk.Advance(time.Second)
	apply(t, tbl)
	after := tbl.Stats()
	assert.Equal(t, dataplane.DriverStats{Desired: 4, InKernel: 4, Writes: after.Writes}, after)
	assert.Greater(t, after.Writes, st.Writes)
	apply(t, tbl)
	assert.Equal(t, after, tbl.Stats(), "a no-op Apply writes nothing")
}
