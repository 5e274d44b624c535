package iptables_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// recorder is a command.Runner that passes every call on and keeps the
// input of each restore (the Table's only write).
type recorder struct {
	r        command.Runner
	mu       sync.Mutex
	restores []string
}

func (r *recorder) Run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	if strings.Contains(name, "-restore") {
		in, err := io.ReadAll(stdin)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.restores = append(r.restores, string(in))
		r.mu.Unlock()
		stdin = strings.NewReader(string(in))
	}
	return r.r.Run(ctx, stdin, name, args...)
}

// take returns the restore inputs since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.restores
	r.restores = nil
	return out
}

// recKernel is a Table's Kernel whose runner records; recDoKernel also
// keeps the namespace's Do, so that the Table reads in process.
type recKernel struct{ rec *recorder }

func (k recKernel) Runner() command.Runner { return k.rec }

type recDoKernel struct {
	recKernel
	do func(func() error) error
}

func (k recDoKernel) Do(fn func() error) error { return k.do(fn) }

// recording returns k as a Table's Kernel whose restores are recorded.
func recording(k kernel.Commands) (kernel.Commands, *recorder) {
	rec := &recorder{r: k.Runner()}
	if d, ok := k.(interface{ Do(func() error) error }); ok {
		return recDoKernel{recKernel{rec}, d.Do}, rec
	}
	return recKernel{rec}, rec
}

// planEnv is where the property runs: a kernel for the Table and a way to
// run single iptables commands of the flavour (another writer).
type planEnv struct {
	b    iptables.Backend
	v    ipfamily.Family
	k    kernel.Commands
	exec func(args ...string) error
}

// inputObjects returns the objects a restore input writes: every chain it
// names, and of those the chains it declares (adds) and deletes.
func inputObjects(t *testing.T, input string) (names, added, deleted []string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		f := strings.Fields(line)
		switch {
		case line == "COMMIT" || strings.HasPrefix(line, "*"):
			continue
		case strings.HasPrefix(line, ":"):
			added = append(added, f[0][1:])
			names = append(names, f[0][1:])
		case len(f) >= 2:
			require.Contains(t, []string{"-A", "-R", "-D", "-I", "-F", "-X"}, f[0], line)
			names = append(names, f[1])
			if f[0] == "-X" {
				deleted = append(deleted, f[1])
			}
		default:
			t.Fatalf("unexpected restore line %q", line)
		}
	}
	return sortedSet(names), sortedSet(added), sortedSet(deleted)
}

// planObjects returns the same of a Plan: the chains its writes name (a
// chain, or the built-in chain of a group of rules), the chains it adds
// and those it deletes; and it checks that each object is written once.
func planObjects(t *testing.T, p dataplane.Plan) (names, added, deleted []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, w := range p.Writes {
		require.False(t, seen[string(w.Kind)+" "+w.Object], "written twice: %v", p)
		seen[string(w.Kind)+" "+w.Object] = true
		switch w.Kind {
		case "chain":
			names = append(names, w.Object)
			switch w.Op {
			case dataplane.WriteAdd:
				added = append(added, w.Object)
			case dataplane.WriteDelete:
				deleted = append(deleted, w.Object)
			}
		case "rule":
			chain, group, ok := strings.Cut(w.Object, " ")
			require.True(t, ok && (group == "top" || group == "bottom"), "%v", w)
			names = append(names, chain)
		default:
			t.Fatalf("unexpected kind in %v", w)
		}
		require.NotEmpty(t, w.Detail, "%v", w)
	}
	return sortedSet(names), sortedSet(added), sortedSet(deleted)
}

func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// checkPlan checks the Plan properties on tbl as it stands: Plan and State
// write nothing; the Apply after Plan writes exactly its objects, in one
// restore (none when the Plan is empty); then Plan is empty, an Apply
// writes nothing and State agrees with the outcome. It returns the number
// of writes planned.
func checkPlan(t *testing.T, tbl *iptables.Table, rec *recorder, what string) int {
	t.Helper()
	ctx := context.Background()
	rec.take()
	plan, err := tbl.Plan(ctx)
	require.NoError(t, err, what)
	require.Empty(t, rec.take(), "%s: Plan wrote", what)
	require.Equal(t, tbl.Name(), plan.Driver)

	_, applyErr := tbl.Apply(ctx)
	if applyErr != nil {
		require.ErrorIs(t, applyErr, dataplane.ErrPartial, what)
	}
	inputs := rec.take()
	if plan.Empty() {
		require.Empty(t, inputs, "%s: an Apply whose Plan is empty wrote", what)
	} else {
		// The first restore is the planned transaction; a refused one is
		// followed by others (a re-read, objects left out), and then
		// Apply reports the refused objects.
		require.NotEmpty(t, inputs, "%s: Apply did not write its Plan:\n%v", what, plan)
		if len(inputs) > 1 {
			require.ErrorIs(t, applyErr, iptables.ErrRefused, "%s: more than one restore, yet nothing refused:\n%v", what, plan)
		}
		n, a, d := inputObjects(t, inputs[0])
		pn, pa, pd := planObjects(t, plan)
		require.Equal(t, n, pn, "%s: objects written vs planned:\n%s\n%v", what, inputs[0], plan)
		require.Equal(t, a, pa, "%s: chains added vs planned:\n%s\n%v", what, inputs[0], plan)
		require.Equal(t, d, pd, "%s: chains deleted vs planned:\n%s\n%v", what, inputs[0], plan)
	}

	after, err := tbl.Plan(ctx)
	require.NoError(t, err, what)
	require.True(t, after.Empty(), "%s: Plan after Apply:\n%v", what, after)
	_, err = tbl.Apply(ctx)
	require.Equal(t, applyErr == nil, err == nil, "%s: %v / %v", what, applyErr, err)
	require.Empty(t, rec.take(), "%s: an Apply whose Plan is empty wrote", what)

	st, serr := tbl.State(ctx)
	require.NoError(t, serr, what)
	require.Empty(t, rec.take(), "%s: State wrote", what)
	if applyErr == nil {
		require.True(t, st.InSync(), "%s: %v", what, st)
	} else {
		require.False(t, st.InSync(), "%s: failing objects yet in sync: %v", what, applyErr)
		var pe *dataplane.PartialError
		require.ErrorAs(t, applyErr, &pe)
		require.Len(t, st.Failing, len(pe.Objects()), what)
	}
	return len(plan.Writes)
}

// planProperty draws declarations (owned chains jumping to one another,
// to undeclared chains and to a foreign chain that comes and goes; rules
// of two owners at the top and bottom of built-in chains) and foreign
// drift (rules and chains of another writer, ours deleted, flushed or
// copied, leftover chains of ours), over rounds, and checks the Plan
// properties after each. It returns the writes planned.
func planProperty(t *testing.T, e planEnv, seed uint64, rounds int) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 21))
	k, rec := recording(e.k)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl, err := iptables.New(iptables.Options{
		Table: "filter", Family: e.v, Backend: e.b, ChainPrefix: "np-",
		Kernel: k, Clock: clk, PostWriteRecheck: []time.Duration{},
	})
	require.NoError(t, err)
	net := func() string {
		if e.v == ipfamily.IPv6 {
			return fmt.Sprintf("2001:db8:%x::/48", r.IntN(8))
		}
		return fmt.Sprintf("10.%d.0.0/16", r.IntN(8))
	}
	names := []string{"np-a", "np-b", "np-c", "np-d", "np-e"}
	target := func(after int) string {
		switch n := r.IntN(10); {
		case n == 0:
			return "np-zz" // never declared
		case n == 1:
			return "FOREIGN"
		case after+1 < len(names):
			return names[after+1+r.IntN(len(names)-after-1)]
		}
		return "RETURN"
	}
	rule := func(after int) netfilter.Rule {
		if r.IntN(3) == 0 {
			if t := target(after); t != "RETURN" {
				return jump(t)
			}
		}
		return acceptFrom(net())
	}
	rules := func(after, n int) []netfilter.Rule {
		out := make([]netfilter.Rule, r.IntN(n+1))
		for i := range out {
			out[i] = rule(after)
		}
		return out
	}
	hooks := []netfilter.Hook{netfilter.HookInput, netfilter.HookForward, netfilter.HookOutput}
	run := func(args ...string) { _ = e.exec(args...) } // the kernel may refuse a drawn command

	total := 0
	for round := range rounds {
		// Declarations.
		for i, n := range names {
			switch r.IntN(4) {
			case 0:
				require.NoError(t, tbl.RemoveChains(n))
			case 1, 2:
				require.NoError(t, tbl.SetChains(netfilter.Chain{Name: n, Rules: rules(i, 4), ForceProgramming: r.IntN(4) == 0}))
			}
		}
		for _, h := range hooks {
			for _, owner := range []string{"o1", "o2"} {
				if r.IntN(2) == 0 {
					continue
				}
				set := tbl.InsertRules
				if r.IntN(2) == 0 {
					set = tbl.AppendRules
				}
				require.NoError(t, set(owner, h, rules(-1, 3)))
			}
		}
		// Another writer.
		if r.IntN(2) == 0 {
			for range r.IntN(5) {
				switch r.IntN(8) {
				case 0:
					run("-N", "FOREIGN")
				case 1:
					run("-F", "FOREIGN")
					run("-X", "FOREIGN")
				case 2:
					run("-I", string(hooks[r.IntN(3)]), "-s", net(), "-j", "DROP")
				case 3:
					run("-A", string(hooks[r.IntN(3)]), "-s", net(), "-j", "ACCEPT")
				case 4:
					run("-D", names[r.IntN(len(names))], "1")
				case 5:
					run("-F", names[r.IntN(len(names))])
				case 6:
					run("-N", "np-old")
					run("-A", "np-old", "-s", net(), "-j", "ACCEPT")
				case 7:
					run("-D", string(hooks[r.IntN(3)]), "1")
				}
			}
			tbl.QueueResync()
		}
		if r.IntN(3) == 0 {
			clk.Advance(time.Duration(r.IntN(3)) * time.Second)
		}
		total += checkPlan(t, tbl, rec, fmt.Sprintf("seed %d round %d", seed, round))
	}
	return total
}

// TestPlanProperty checks the Plan properties on the fake, for both
// backends and families, over several seeds.
func TestPlanProperty(t *testing.T) {
	for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
		for _, v := range []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6} {
			t.Run(fmt.Sprintf("%s-%v", b, v), func(t *testing.T) {
				writes := 0
				for seed := range uint64(12) {
					ns, k := newFake()
					e := planEnv{b: b, v: v, k: ns, exec: func(args ...string) error { return k.Exec(iptablesfake.Backend(b), v, args...) }}
					writes += planProperty(t, e, seed, 15)
				}
				require.Positive(t, writes, "the property planned nothing")
				t.Logf("%d writes planned", writes)
			})
		}
	}
}

// planLines returns the lines of a Plan's text after its header.
func planLines(p dataplane.Plan) []string { return strings.Split(p.String(), "\n")[1:] }

// TestPlanAndStateText checks what Plan and State say of owned chains,
// groups of our rules, a leftover chain and an object whose declaration
// cannot be written.
func TestPlanAndStateText(t *testing.T) {
	ctx := context.Background()
	ns, k := newFake()
	b, v := iptablesfake.BackendNFT, ipfamily.IPv4
	require.NoError(t, k.Exec(b, v, "-N", "np-old"))
	require.NoError(t, k.Exec(b, v, "-A", "np-old", "-j", "ACCEPT"))
	require.NoError(t, k.Exec(b, v, "-A", "INPUT", "-s", "192.0.2.1/32", "-j", "DROP"))
	require.NoError(t, k.Exec(b, v, "-A", "OUTPUT", "-s", "192.0.2.2/32", "-j", "DROP"))
	tbl := newTable(t, fakeOpts(ns))
	require.NoError(t, tbl.SetChains(
		netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), acceptFrom("10.1.0.0/16")}},
		netfilter.Chain{Name: "np-b", Rules: []netfilter.Rule{acceptFrom("10.2.0.0/16")}, ForceProgramming: true},
	))
	require.NoError(t, tbl.InsertRules("o1", netfilter.HookInput, []netfilter.Rule{jump("np-a")}))
	require.NoError(t, tbl.AppendRules("o1", netfilter.HookOutput, []netfilter.Rule{acceptFrom("10.3.0.0/16")}))

	k.ResetCalls()
	plan, err := tbl.Plan(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{
		"+ chain np-a (2 rules)",
		"+ chain np-b (1 rule)",
		"+ rule INPUT top (1 rule)",
		"+ rule OUTPUT bottom (1 rule)",
		"- chain np-old (was 1 rule)",
	}, planLines(plan))
	st, err := tbl.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []dataplane.Object{{Kind: "chain", Text: "np-old"}}, st.Owned)
	require.Equal(t, []dataplane.Drift{
		{Kind: "chain", Name: "np-a", Want: "2 rules"},
		{Kind: "chain", Name: "np-b", Want: "1 rule"},
		{Kind: "chain", Name: "np-old", Have: "1 rule"},
		{Kind: "rule", Name: "INPUT top", Want: "1 rule"},
		{Kind: "rule", Name: "OUTPUT bottom", Want: "1 rule"},
	}, st.Drift)
	require.Zero(t, k.Count(iptablesfake.OpRestore), "Plan and State wrote")

	apply(t, tbl)
	st, err = tbl.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []dataplane.Object{
		{Kind: "chain", Text: "np-a"}, {Kind: "chain", Text: "np-b"},
		{Kind: "rule", Text: "INPUT top"}, {Kind: "rule", Text: "OUTPUT bottom"},
	}, st.Owned)
	require.True(t, st.InSync(), "%v", st)

	// A changed chain is replaced whole; a group declared empty goes (a
	// rule of ours no longer declared belongs to the bottom group when a
	// foreign rule comes before it).
	require.NoError(t, tbl.SetChains(netfilter.Chain{Name: "np-a", Rules: []netfilter.Rule{acceptFrom("10.0.0.0/8"), acceptFrom("10.4.0.0/16"), acceptFrom("10.5.0.0/16")}}))
	require.NoError(t, tbl.AppendRules("o1", netfilter.HookOutput, nil))
	plan, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{
		"~ chain np-a (3 rules, was 2 rules)",
		"- rule OUTPUT bottom (was 1 rule)",
	}, planLines(plan))
	apply(t, tbl)

	// A jump to an undeclared chain: the group is held back, so the Plan
	// leaves it out, and State reports it as drifted and failing.
	require.NoError(t, tbl.InsertRules("o1", netfilter.HookInput, []netfilter.Rule{jump("np-a"), jump("np-zz")}))
	plan, err = tbl.Plan(ctx)
	require.NoError(t, err)
	require.True(t, plan.Empty(), "%v", plan)
	_, err = tbl.Apply(ctx)
	require.ErrorIs(t, err, iptables.ErrUnknownChain)
	st, err = tbl.State(ctx)
	require.NoError(t, err)
	require.Equal(t, []dataplane.Drift{{Kind: "rule", Name: "INPUT top", Want: "2 rules", Have: "1 rule"}}, st.Drift)
	require.Len(t, st.Failing, 1)
	require.ErrorIs(t, st.Failing[0], iptables.ErrUnknownChain)
	require.Equal(t, "INPUT", st.Failing[0].Name)
}
