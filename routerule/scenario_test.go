package routerule_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
)

// env is where a scenario runs: a fake namespace (kernelfake) in unit
// tests, a fresh network namespace in kernel tests. Every scenario runs
// against both, for both families.
type env struct {
	// kern reaches the namespace directly, as an administrator or another
	// agent would (not counted).
	kern kernel.Rules
	fam  routerule.Family
}

// pick returns the prefix for the env's family.
func (e env) pick(v4, v6 string) netip.Prefix {
	if e.fam == routerule.IPv6 {
		return netip.MustParsePrefix(v6)
	}
	return netip.MustParsePrefix(v4)
}

// counter wraps a kernel.Rules, counts the calls of the Rules under test
// and injects failures.
type counter struct {
	inner kernel.Rules

	mu                sync.Mutex
	lists, adds, dels int
	// log records the writes: "add <priority>", "delete <priority>".
	log              []string
	failList         []error
	failAdd, failDel func(r *kernel.Rule) error
}

func (c *counter) Rules(ctx context.Context, family kernel.Family) ([]kernel.Rule, error) {
	c.mu.Lock()
	c.lists++
	var inject error
	if len(c.failList) > 0 {
		inject, c.failList = c.failList[0], c.failList[1:]
	}
	c.mu.Unlock()
	if inject != nil {
		return nil, inject
	}
	return c.inner.Rules(ctx, family)
}

func (c *counter) AddRule(ctx context.Context, r kernel.Rule) error {
	c.mu.Lock()
	c.adds++
	c.log = append(c.log, fmt.Sprintf("add %d", r.Priority))
	fail := c.failAdd
	c.mu.Unlock()
	if fail != nil {
		if err := fail(&r); err != nil {
			return err
		}
	}
	return c.inner.AddRule(ctx, r)
}

func (c *counter) DeleteRule(ctx context.Context, r kernel.Rule) error {
	c.mu.Lock()
	c.dels++
	c.log = append(c.log, fmt.Sprintf("delete %d", r.Priority))
	fail := c.failDel
	c.mu.Unlock()
	if fail != nil {
		if err := fail(&r); err != nil {
			return err
		}
	}
	return c.inner.DeleteRule(ctx, r)
}

// calls returns (lists, adds, deletes) and resets the counts.
func (c *counter) calls() (int, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, a, d := c.lists, c.adds, c.dels
	c.lists, c.adds, c.dels, c.log = 0, 0, 0, nil
	return l, a, d
}

// writes returns the writes logged since the last calls.
func (c *counter) writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// Owned priorities and tables of every scenario.
var (
	ownedPrios  = []uint32{100, 101, 102, 103, 104, 105}
	ownedTables = []uint32{100, 101, kernel.TableMain}
)

// newRules returns a Rules over a counter around e's kernel.
func newRules(t *testing.T, e env, mod ...func(*routerule.Options)) (*routerule.Rules, *counter) {
	t.Helper()
	c := &counter{inner: e.kern}
	o := routerule.Options{Family: e.fam, Kernel: c, Priorities: ownedPrios, Tables: ownedTables}
	for _, m := range mod {
		m(&o)
	}
	r, err := routerule.New(o)
	require.NoError(t, err)
	return r, c
}

// apply runs one Apply and fails the test on error.
func apply(t *testing.T, r *routerule.Rules) time.Duration {
	t.Helper()
	res, err := r.Apply(context.Background())
	require.NoError(t, err)
	return res.RetryAfter
}

// allKinds is one rule of every match and action kind for e's family.
func allKinds(e env) []routerule.Rule {
	src := e.pick("10.1.0.0/16", "fd00:1::/64")
	dst := e.pick("10.2.0.0/16", "fd00:2::/64")
	host := e.pick("10.3.0.7/32", "fd00:3::7/128")
	return []routerule.Rule{
		{Priority: 100, Src: src, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 100, Dst: dst, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 100, Src: src, Dst: dst, Action: routerule.ActionLookup{Table: 101}},
		{Priority: 100, Src: host, Action: &routerule.ActionLookup{Table: 101}},
		{Priority: 101, Mark: 0x10, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 101, Mark: 0x10, Mask: 0xf0, Action: routerule.ActionLookup{Table: 101}},
		{Priority: 101, Mask: 0x4, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 102, Mark: 0x1, Mask: 0x1, Invert: true, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 102, IIF: "lo", Action: routerule.ActionLookup{Table: 101}},
		{Priority: 102, OIF: "lo", Action: routerule.ActionLookup{Table: 100}},
		{Priority: 102, IIF: "lo", OIF: "lo", Invert: true, Action: routerule.ActionLookup{Table: 101}},
		{Priority: 103, Src: src, Action: routerule.ActionGoto{Priority: 105}},
		{Priority: 104, Dst: dst, Action: routerule.ActionBlackhole{}},
		{Priority: 104, Mark: 0x20, IIF: "lo", Action: routerule.ActionLookup{Table: kernel.TableMain}},
		{Priority: 105, Action: routerule.ActionLookup{Table: 100}},
	}
}

// fmtRule formats a canonical desired rule the way fmtKernel formats a
// dumped one, so the two can be compared.
func fmtRule(r routerule.Rule) string {
	var action string
	switch a := r.Action.(type) {
	case routerule.ActionLookup:
		action = fmt.Sprintf("lookup %d", a.Table)
	case routerule.ActionGoto:
		action = fmt.Sprintf("goto %d", a.Priority)
	case routerule.ActionBlackhole:
		action = "blackhole"
	}
	return fmtLine(r.Priority, r.Invert, r.Src, r.Dst, r.Mark, r.Mask, r.IIF, r.OIF, action)
}

func fmtLine(prio uint32, invert bool, src, dst netip.Prefix, mark, mask uint32, iif, oif, action string) string {
	pfx := func(p netip.Prefix) string {
		if !p.IsValid() {
			return "all"
		}
		return p.String()
	}
	return fmt.Sprintf("%d not=%v from=%s to=%s fwmark=%#x/%#x iif=%q oif=%q %s",
		prio, invert, pfx(src), pfx(dst), mark, mask, iif, oif, action)
}

// fmtKernel formats a dumped rule; attributes routerule does not express
// are appended.
func fmtKernel(r kernel.Rule) string {
	action := map[uint8]string{kernel.RuleBlackhole: "blackhole", kernel.RuleUnreachable: "unreachable",
		kernel.RuleProhibit: "prohibit", kernel.RuleNop: "nop"}[r.Action]
	switch r.Action {
	case kernel.RuleLookup:
		action = fmt.Sprintf("lookup %d", r.Table)
	case kernel.RuleGoto:
		action = fmt.Sprintf("goto %d", r.Goto)
	}
	s := fmtLine(r.Priority, r.Invert, r.Src, r.Dst, r.Mark, r.Mask, r.IIF, r.OIF, action)
	if r.IPProto != 0 || r.DstPorts != (kernel.PortRange{}) || (r.Protocol != 0 && r.Protocol != routerule.Protocol) {
		s += fmt.Sprintf(" ipproto %d dport %v proto %d", r.IPProto, r.DstPorts, r.Protocol)
	}
	return s
}

// kernelRules returns the kernel's rules of e's family at prios (all when
// none given), formatted, in kernel order.
func kernelRules(t *testing.T, e env, prios ...uint32) []string {
	t.Helper()
	rules, err := e.kern.Rules(context.Background(), e.fam)
	require.NoError(t, err)
	var out []string
	for _, r := range rules {
		if len(prios) == 0 || slices.Contains(prios, r.Priority) {
			out = append(out, fmtKernel(r))
		}
	}
	return out
}

// expect formats the canonical forms of rules.
func expect(r *routerule.Rules) []string {
	var out []string
	for _, d := range r.Desired() {
		out = append(out, fmtRule(d))
	}
	return out
}

// kernelAdd adds a rule behind the Rules' back: a lookup of table (or, with
// table 0, whatever mod makes it).
func kernelAdd(t *testing.T, e env, prio, table uint32, mod func(*kernel.Rule)) {
	t.Helper()
	r := kernel.Rule{Family: e.fam, Priority: prio, Action: kernel.RuleLookup, Table: table}
	if mod != nil {
		mod(&r)
	}
	require.NoError(t, e.kern.AddRule(context.Background(), r), "adding %+v", r)
}

// kernelDel deletes a rule behind the Rules' back.
func kernelDel(t *testing.T, e env, r kernel.Rule) {
	t.Helper()
	r.Family = e.fam
	require.NoError(t, e.kern.DeleteRule(context.Background(), r), "deleting %+v", r)
}

type scenario struct {
	name string
	run  func(t *testing.T, e env)
}

var scenarios = []scenario{
	{"EveryKindProgrammedThenNoOp", func(t *testing.T, e env) {
		r, c := newRules(t, e)
		require.NoError(t, r.SetRules(allKinds(e)))
		apply(t, r)
		want := expect(r)
		assert.ElementsMatch(t, want, kernelRules(t, e, ownedPrios...))
		lists, adds, dels := c.calls()
		assert.Equal(t, 1, lists, "the first Apply reads the kernel once")
		assert.Equal(t, len(want), adds)
		assert.Zero(t, dels)

		// Nothing changed: no netlink I/O at all.
		apply(t, r)
		lists, adds, dels = c.calls()
		assert.Zero(t, lists+adds+dels, "a no-op Apply must not touch netlink")
	}},

	{"RestartAdoptsWithoutWrites", func(t *testing.T, e env) {
		first, _ := newRules(t, e)
		require.NoError(t, first.SetRules(allKinds(e)))
		apply(t, first)
		before := kernelRules(t, e)

		second, c := newRules(t, e)
		require.NoError(t, second.SetRules(allKinds(e)))
		apply(t, second)
		lists, adds, dels := c.calls()
		assert.Equal(t, 1, lists)
		assert.Zero(t, adds+dels, "a new instance over a programmed kernel writes nothing")
		assert.Equal(t, before, kernelRules(t, e), "kernel order and content unchanged")
	}},

	{"ForeignRulesSurvive", func(t *testing.T, e env) {
		src := e.pick("10.9.0.0/16", "fd00:9::/64")
		// Same priority, foreign table; our table at a foreign priority;
		// a foreign goto and a foreign drop rule at other priorities.
		kernelAdd(t, e, 100, 200, nil)
		kernelAdd(t, e, 100, 200, func(r *kernel.Rule) { r.Src = src })
		kernelAdd(t, e, 300, 100, nil)
		kernelAdd(t, e, 99, 0, func(r *kernel.Rule) { r.Action, r.Table, r.Goto = kernel.RuleGoto, 0, 300 })
		kernelAdd(t, e, 98, 0, func(r *kernel.Rule) { r.Action, r.Table = kernel.RuleBlackhole, 0 })
		foreign := kernelRules(t, e)

		r, _ := newRules(t, e)
		require.NoError(t, r.SetRules(allKinds(e)))
		apply(t, r)
		var ours []string
		for _, k := range kernelRules(t, e) {
			if !slices.Contains(foreign, k) {
				ours = append(ours, k)
			}
		}
		assert.ElementsMatch(t, expect(r), ours)
		assert.Subset(t, kernelRules(t, e), foreign)

		// Declaring nothing removes ours and only ours.
		require.NoError(t, r.SetRules(nil))
		apply(t, r)
		assert.Equal(t, foreign, kernelRules(t, e))
	}},

	{"KernelDefaultRulesNeverOurs", func(t *testing.T, e env) {
		// Owning the priorities and tables of the kernel's own rules
		// (lookup main, default; priority 0, lookup local's, cannot be
		// owned) does not make them ours: without them the host does not
		// route.
		before := kernelRules(t, e)
		require.NotEmpty(t, before)
		r, _ := newRules(t, e, func(o *routerule.Options) {
			o.Priorities = []uint32{32766, 32767, 100}
			o.Tables = []uint32{kernel.TableLocal, kernel.TableMain, kernel.TableDefault, 100}
		})
		mine := routerule.Rule{Priority: 100, Mark: 0x1, Mask: math.MaxUint32, Action: routerule.ActionLookup{Table: 100}}
		require.NoError(t, r.SetRule(mine))
		apply(t, r)
		assert.Equal(t, slices.Concat(before[:1], []string{fmtRule(mine)}, before[1:]), kernelRules(t, e))
		require.NoError(t, r.SetRules(nil))
		apply(t, r)
		assert.Equal(t, before, kernelRules(t, e))
	}},

	{"OurRuleEqualToTheKernelsIsDeletedAlone", func(t *testing.T, e env) {
		// A rule of ours equal to one of the kernel's own ("32766: lookup
		// main"): withdrawing it deletes ours, never the kernel's, also
		// through a resync after it.
		before := kernelRules(t, e)
		r, _ := newRules(t, e, func(o *routerule.Options) {
			o.Priorities = []uint32{32766}
			o.Tables = []uint32{kernel.TableMain}
		})
		main := routerule.Rule{Priority: 32766, Action: routerule.ActionLookup{Table: kernel.TableMain}}
		require.NoError(t, r.SetRule(main))
		apply(t, r)
		assert.Len(t, kernelRules(t, e, 32766), 2, "the kernel's and ours")
		require.NoError(t, r.SetRules(nil))
		apply(t, r)
		assert.Equal(t, before, kernelRules(t, e))
		r.QueueResync()
		apply(t, r)
		assert.Equal(t, before, kernelRules(t, e), "the kernel's rule is not ours at a resync either")
	}},

	{"UnmarkedDuplicateOfTheKernelsIsNotDeletedInItsPlace", func(t *testing.T, e env) {
		// A rule of ours without a protocol (written by hand, or by a
		// version before Protocol) equal to the kernel's "lookup main":
		// a delete request for it would hit the kernel's rule, which comes
		// first, so it is refused as ambiguous and the kernel's stays.
		kernelAdd(t, e, 32766, kernel.TableMain, nil)
		before := kernelRules(t, e)
		r, _ := newRules(t, e, func(o *routerule.Options) {
			o.Priorities = []uint32{32766}
			o.Tables = []uint32{kernel.TableMain}
		})
		_, err := r.Apply(context.Background())
		require.ErrorIs(t, err, routerule.ErrAmbiguous)
		assert.Equal(t, before, kernelRules(t, e))
	}},

	{"LeftoversOfOursAreDeleted", func(t *testing.T, e env) {
		// Left by an earlier run: an undesired lookup of an owned table,
		// a goto, a blackhole and a prohibit rule (an action routerule
		// does not write), and rules with attributes routerule does not
		// express.
		kernelAdd(t, e, 100, 100, nil)
		kernelAdd(t, e, 101, 0, func(r *kernel.Rule) { r.Action, r.Goto = kernel.RuleGoto, 200 })
		kernelAdd(t, e, 102, 0, func(r *kernel.Rule) { r.Action = kernel.RuleBlackhole })
		kernelAdd(t, e, 103, 0, func(r *kernel.Rule) { r.Action = kernel.RuleProhibit })
		kernelAdd(t, e, 104, 101, func(r *kernel.Rule) { r.IPProto = syscall.IPPROTO_TCP })
		kernelAdd(t, e, 105, 100, func(r *kernel.Rule) {
			r.IPProto, r.DstPorts = syscall.IPPROTO_TCP, kernel.PortRange{Start: 80, End: 80}
		})
		keep := routerule.Rule{Priority: 100, Mark: 0x1, Action: routerule.ActionLookup{Table: 100}}

		r, _ := newRules(t, e)
		require.NoError(t, r.SetRule(keep))
		apply(t, r)
		assert.Equal(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"ExternalDeletionRepairedOnResync", func(t *testing.T, e env) {
		r, c := newRules(t, e)
		rules := allKinds(e)
		require.NoError(t, r.SetRules(rules))
		apply(t, r)
		want := kernelRules(t, e)

		// systemd-networkd deletes two of our rules.
		for _, i := range []int{0, 7} {
			kernelDel(t, e, kernel.Rule{Priority: rules[i].Priority, Src: rules[i].Src, Mark: rules[i].Mark,
				Mask: rules[i].Mask, Invert: rules[i].Invert, Action: kernel.RuleLookup,
				Table: rules[i].Action.(routerule.ActionLookup).Table})
		}
		c.calls()
		apply(t, r)
		lists, adds, dels := c.calls()
		assert.Zero(t, lists+adds+dels, "without a resync Apply trusts its model")

		r.QueueResync()
		apply(t, r)
		lists, adds, dels = c.calls()
		assert.Equal(t, 1, lists)
		assert.Equal(t, 2, adds)
		assert.Zero(t, dels)
		assert.ElementsMatch(t, want, kernelRules(t, e))
	}},

	{"InvertAndGotoTargetReplace", func(t *testing.T, e env) {
		r, _ := newRules(t, e)
		plain := routerule.Rule{Priority: 102, Mark: 0x1, Mask: 0x1, Action: routerule.ActionLookup{Table: 100}}
		jump := routerule.Rule{Priority: 101, Src: e.pick("10.5.0.0/16", "fd00:5::/64"), Action: routerule.ActionGoto{Priority: 103}}
		require.NoError(t, r.SetRules([]routerule.Rule{plain, jump}))
		apply(t, r)

		inverted := plain
		inverted.Invert = true
		further := jump
		further.Action = routerule.ActionGoto{Priority: 105}
		require.NoError(t, r.SetRule(inverted))
		require.NoError(t, r.SetRule(further))
		require.Len(t, r.Desired(), 2, "same kernel identity: replaced, not added")
		apply(t, r)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"CatchAllAfterNarrowerRule", func(t *testing.T, e env) {
		// The kernel refuses "lookup 100" while "from X lookup 100"
		// exists at the same priority: the group is rebuilt.
		r, _ := newRules(t, e)
		narrow := routerule.Rule{Priority: 100, Src: e.pick("10.6.0.0/16", "fd00:6::/64"), Action: routerule.ActionLookup{Table: 100}}
		all := routerule.Rule{Priority: 100, Action: routerule.ActionLookup{Table: 100}}
		require.NoError(t, r.SetRule(narrow))
		apply(t, r)
		require.NoError(t, r.SetRule(all))
		apply(t, r)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))

		// And back: the narrower rule alone.
		require.NoError(t, r.RemoveRule(all))
		apply(t, r)
		assert.Equal(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"DeleteThatWouldHitAnEarlierRule", func(t *testing.T, e env) {
		// "iif lo lookup 100" then "lookup 100": deleting the second by
		// its fields would delete the first (the kernel treats the unset
		// iif as a wildcard).
		r, _ := newRules(t, e)
		lo := routerule.Rule{Priority: 100, IIF: "lo", Action: routerule.ActionLookup{Table: 100}}
		all := routerule.Rule{Priority: 100, Action: routerule.ActionLookup{Table: 100}}
		require.NoError(t, r.SetRule(lo))
		apply(t, r)
		require.NoError(t, r.SetRule(all))
		apply(t, r)
		require.Equal(t, []string{fmtRule(lo), fmtRule(all)}, kernelRules(t, e, 100))

		require.NoError(t, r.RemoveRule(all))
		apply(t, r)
		assert.Equal(t, []string{fmtRule(lo)}, kernelRules(t, e, 100))

		// A fresh instance (no model of the order) does the same.
		require.NoError(t, r.SetRules([]routerule.Rule{lo, all}))
		apply(t, r)
		fresh, _ := newRules(t, e)
		require.NoError(t, fresh.SetRule(lo))
		apply(t, fresh)
		assert.Equal(t, []string{fmtRule(lo)}, kernelRules(t, e, 100))
	}},

	{"FailedWriteConvergesOnRetry", func(t *testing.T, e env) {
		fc := clock.NewFake(time.Unix(1000, 0))
		r, c := newRules(t, e, func(o *routerule.Options) { o.Clock = fc })
		rules := allKinds(e)
		require.NoError(t, r.SetRules(rules))
		c.failAdd = func(n *kernel.Rule) error {
			if n.Priority == 102 {
				return syscall.ENOBUFS
			}
			return nil
		}
		res, err := r.Apply(context.Background())
		require.ErrorIs(t, err, syscall.ENOBUFS)
		require.ErrorIs(t, err, dataplane.ErrPartial, "the rest was written")
		// Other priorities were written regardless.
		var others []string
		for _, d := range r.Desired() {
			if d.Priority != 102 {
				others = append(others, fmtRule(d))
			}
		}
		assert.ElementsMatch(t, others, kernelRules(t, e, 100, 101, 103, 104, 105))
		assert.Empty(t, kernelRules(t, e, 102))

		c.failAdd = nil
		c.calls()
		_, err = r.Apply(context.Background())
		require.ErrorIs(t, err, dataplane.ErrPartial)
		lists, adds, dels := c.calls()
		assert.Zero(t, lists+adds+dels, "the refused rules wait for their retry")

		fc.Advance(res.RetryAfter)
		apply(t, r)
		lists, adds, dels = c.calls()
		assert.Zero(t, lists, "a refused rule says nothing against the model: no re-read")
		assert.Equal(t, 4, adds)
		assert.Zero(t, dels)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"RefusedRuleBacksOffAlone", func(t *testing.T, e env) {
		// The kernel keeps refusing one rule: the others, at its priority
		// and elsewhere, are written at once, and so is a rule declared
		// later; the refused rule is retried on its own backoff, not on
		// the passes in between, and withdrawing it ends its failure.
		fc := clock.NewFake(time.Unix(1000, 0))
		r, c := newRules(t, e, func(o *routerule.Options) { o.Clock = fc })
		rules := allKinds(e)
		refused := rules[4] // 101: fwmark 0x10 lookup 100
		c.failAdd = func(n *kernel.Rule) error {
			if n.Priority == 101 && n.Mark == 0x10 && n.Mask == math.MaxUint32 {
				return syscall.EINVAL
			}
			return nil
		}
		require.NoError(t, r.SetRules(rules))
		res, err := r.Apply(context.Background())
		require.ErrorIs(t, err, dataplane.ErrPartial)
		require.ErrorIs(t, err, syscall.EINVAL)
		var pe *dataplane.PartialError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 1, pe.Failed)
		assert.Contains(t, err.Error(), refused.String())
		oeText := "add rule " + refused.String() + ": rule write failed: "
		assert.Equal(t, "routerule: 1 object(s) failed; "+oeText, err.Error()[:len("routerule: 1 object(s) failed; ")+len(oeText)],
			"the prefix once, then the rule")
		assert.Equal(t, 100*time.Millisecond, res.RetryAfter)
		require.Len(t, pe.Objects(), 1)
		oe := pe.Objects()[0]
		assert.Equal(t, "add rule "+refused.String(), oe.Op+" "+string(oe.Kind)+" "+oe.Name)
		assert.ErrorIs(t, oe, routerule.ErrRuleFailed)
		assert.Equal(t, 1, oe.Attempts)
		assert.Equal(t, fc.Now().Add(100*time.Millisecond), oe.RetryAt)
		st := r.Stats()
		assert.Equal(t, dataplane.DriverStats{Desired: len(rules), InKernel: len(rules) - 1, Failing: 1, Writes: uint64(len(rules) - 1)}, st)
		var others []string
		for _, d := range r.Desired() {
			if d != (routerule.Rule{Priority: 101, Mark: 0x10, Mask: math.MaxUint32, Action: routerule.ActionLookup{Table: 100}}) {
				others = append(others, fmtRule(d))
			}
		}
		assert.ElementsMatch(t, others, kernelRules(t, e, ownedPrios...), "everything else is written")

		later := routerule.Rule{Priority: 101, IIF: "lo", Action: routerule.ActionLookup{Table: 100}}
		require.NoError(t, r.SetRule(later))
		c.calls()
		_, err = r.Apply(context.Background())
		require.ErrorIs(t, err, dataplane.ErrPartial)
		lists, adds, dels := c.calls()
		assert.Equal(t, []int{0, 1, 0}, []int{lists, adds, dels}, "the new rule only: the refused one waits")
		assert.Contains(t, kernelRules(t, e, 101), fmtRule(later))

		fc.Advance(res.RetryAfter)
		res, err = r.Apply(context.Background())
		require.ErrorIs(t, err, dataplane.ErrPartial)
		_, adds, _ = c.calls()
		assert.Equal(t, 1, adds, "retried when due")
		assert.Equal(t, 200*time.Millisecond, res.RetryAfter, "then backs off further")

		require.NoError(t, r.RemoveRule(refused))
		_, err = r.Apply(context.Background())
		require.NoError(t, err, "withdrawn: no longer failing")
		_, adds, _ = c.calls()
		assert.Zero(t, adds)
		assert.Zero(t, r.Stats().Failing)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"FailedDeleteConvergesOnRetry", func(t *testing.T, e env) {
		fc := clock.NewFake(time.Unix(1000, 0))
		r, c := newRules(t, e, func(o *routerule.Options) { o.Clock = fc })
		require.NoError(t, r.SetRules(allKinds(e)))
		apply(t, r)
		c.failDel = func(*kernel.Rule) error { return syscall.EBUSY }
		require.NoError(t, r.SetRules(nil))
		res, err := r.Apply(context.Background())
		require.ErrorIs(t, err, syscall.EBUSY)
		require.ErrorIs(t, err, dataplane.ErrPartial)
		c.failDel = nil
		fc.Advance(res.RetryAfter)
		apply(t, r)
		assert.Empty(t, kernelRules(t, e, ownedPrios...))
	}},

	{"InterruptedDumpWritesNothing", func(t *testing.T, e env) {
		// The kernel package retries an interrupted dump; one that stays
		// interrupted is a failed read: nothing is written, and the next
		// Apply reads again.
		r, c := newRules(t, e)
		c.failList = []error{fmt.Errorf("injected: %w", kernel.ErrDumpInterrupted)}
		require.NoError(t, r.SetRules(allKinds(e)))
		_, err := r.Apply(context.Background())
		require.ErrorIs(t, err, kernel.ErrDumpInterrupted)
		require.False(t, errors.Is(err, dataplane.ErrPartial), "a failed read is an error of the whole instance")
		_, adds, dels := c.calls()
		assert.Zero(t, adds+dels)
		apply(t, r)
		lists, _, _ := c.calls()
		assert.Equal(t, 1, lists)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"ListFailureWritesNothing", func(t *testing.T, e env) {
		r, c := newRules(t, e)
		c.failList = []error{syscall.EPERM}
		require.NoError(t, r.SetRules(allKinds(e)))
		_, err := r.Apply(context.Background())
		require.ErrorIs(t, err, syscall.EPERM)
		_, adds, dels := c.calls()
		assert.Zero(t, adds+dels)
		apply(t, r)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},

	{"RuleAlreadyGoneAsksForAQuickResync", func(t *testing.T, e env) {
		r, c := newRules(t, e)
		rule := routerule.Rule{Priority: 103, IIF: "lo", Action: routerule.ActionLookup{Table: 100}}
		require.NoError(t, r.SetRule(rule))
		assert.Zero(t, apply(t, r), "nothing failed: no retry")
		kernelDel(t, e, kernel.Rule{Priority: 103, Action: kernel.RuleLookup, Table: 100, IIF: "lo"})

		require.NoError(t, r.RemoveRule(rule))
		retry := apply(t, r)
		assert.Positive(t, retry, "the model was stale: come back soon")
		c.calls()
		assert.Zero(t, apply(t, r))
		lists, adds, dels := c.calls()
		assert.Equal(t, 1, lists)
		assert.Zero(t, adds+dels)
		assert.Empty(t, kernelRules(t, e, ownedPrios...))
	}},

	{"UnmaskedKernelRuleIsAdopted", func(t *testing.T, e env) {
		// A rule added by hand with host bits in its source (the kernel
		// keeps them) matches the same packets as the canonical one:
		// adopted, then deleted correctly when no longer wanted. Declared
		// with host bits, it is refused.
		raw := e.pick("10.8.1.2/16", "fd00:8::1/64")
		kernelAdd(t, e, 101, 100, func(r *kernel.Rule) { r.Src = raw })
		r, c := newRules(t, e)
		err := r.SetRule(routerule.Rule{Priority: 101, Src: raw, Action: routerule.ActionLookup{Table: 100}})
		require.ErrorIs(t, err, routerule.ErrInvalidRule)
		require.ErrorIs(t, err, ipfamily.ErrHostBits)
		require.NoError(t, r.SetRule(routerule.Rule{Priority: 101, Src: raw.Masked(), Action: routerule.ActionLookup{Table: 100}}))
		apply(t, r)
		_, adds, dels := c.calls()
		assert.Zero(t, adds+dels)
		require.NoError(t, r.SetRules(nil))
		apply(t, r)
		_, adds, dels = c.calls()
		assert.Zero(t, adds)
		assert.Equal(t, 1, dels)
		assert.Empty(t, kernelRules(t, e, ownedPrios...))
	}},

	{"ManyRulesOnePriority", func(t *testing.T, e env) {
		r, c := newRules(t, e)
		var rules []routerule.Rule
		for i := range 64 {
			var src netip.Prefix
			if e.fam == routerule.IPv4 {
				src = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 7, byte(i), 0}), 24)
			} else {
				src = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 7, byte(i)}), 64)
			}
			rules = append(rules, routerule.Rule{Priority: 104, Src: src, Action: routerule.ActionLookup{Table: 101}})
		}
		require.NoError(t, r.SetRules(rules))
		apply(t, r)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
		// Replace half: adds first, then deletes, no rebuild needed.
		require.NoError(t, r.SetRules(rules[32:]))
		c.calls()
		apply(t, r)
		_, adds, dels := c.calls()
		assert.Zero(t, adds)
		assert.Equal(t, 32, dels)
		assert.ElementsMatch(t, expect(r), kernelRules(t, e, ownedPrios...))
	}},
}
