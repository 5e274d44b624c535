package routerule_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/drivertest"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routerule"
)

// TestConformance runs the driver conformance suite on a fake namespace.
func TestConformance(t *testing.T) { drivertest.Run(t, drivertest.Fake, confSubject) }

// TestKernelConformance runs the driver conformance suite in fresh network
// namespaces of the running kernel.
func TestKernelConformance(t *testing.T) { drivertest.Run(t, drivertest.Kernel, confSubject) }

// The identity of every instance: owned priorities and tables.
var (
	confPrios  = []uint32{100, 101, 102, 103, 104, 105}
	confTables = []uint32{100, 101}
)

// confPfx returns 10.<a>.<b>.0/24 or fd00:<a>:<b>::/64.
func confPfx(fam routerule.Family, a, b int) netip.Prefix {
	if fam == routerule.IPv6 {
		return netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, byte(a), 0, byte(b)}), 64)
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(a), byte(b), 0}), 24)
}

// confRules is the representative state: every match and action kind,
// and a crowd of source rules at one priority.
func confRules(fam routerule.Family) []routerule.Rule {
	src, dst := confPfx(fam, 1, 0), confPfx(fam, 2, 0)
	rules := []routerule.Rule{
		{Priority: 100, Src: src, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 100, Dst: dst, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 100, Src: src, Dst: dst, Action: routerule.ActionLookup{Table: 101}},
		{Priority: 101, Mark: 0x10, Mask: 0xffffffff, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 101, Mark: 0x10, Mask: 0xf0, Action: routerule.ActionLookup{Table: 101}},
		{Priority: 101, Mask: 0x4, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 102, Mark: 0x1, Mask: 0x1, Invert: true, Action: routerule.ActionLookup{Table: 100}},
		{Priority: 102, IIF: "lo", Action: routerule.ActionLookup{Table: 101}},
		{Priority: 102, OIF: "lo", Action: routerule.ActionLookup{Table: 100}},
		{Priority: 103, Src: src, Action: routerule.ActionGoto{Priority: 105}},
		{Priority: 103, Dst: dst, Action: routerule.ActionBlackhole{}},
		{Priority: 105, Action: routerule.ActionLookup{Table: 100}},
	}
	for i := range 24 {
		rules = append(rules, routerule.Rule{Priority: 104, Src: confPfx(fam, 7, i), Action: routerule.ActionLookup{Table: 101}})
	}
	return rules
}

var confSubject = drivertest.Subject[*routerule.Rules, routerule.Family]{
	Variants: []routerule.Family{routerule.IPv4, routerule.IPv6},
	New: func(k kernel.Kernel, clk clock.Clock, fam routerule.Family) (*routerule.Rules, error) {
		return routerule.New(routerule.Options{Family: fam, Kernel: k, Priorities: confPrios, Tables: confTables, Clock: clk})
	},
	Declare:  func(r *routerule.Rules, fam routerule.Family) error { return r.SetRules(confRules(fam)) },
	Withdraw: func(r *routerule.Rules, _ routerule.Family) error { return r.SetRules(nil) },
	Check: func(t testing.TB, k kernel.Kernel, fam routerule.Family) {
		var want, got []string
		for _, r := range confRules(fam) {
			want = append(want, drivertest.FormatRule(confKernelForm(fam, r)))
		}
		rules, err := k.Rules(context.Background(), fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if slices.Contains(confPrios, r.Priority) && r.Protocol != kernel.ProtoKernel &&
				(r.Action != kernel.RuleLookup || slices.Contains(confTables, r.Table)) {
				got = append(got, drivertest.FormatRule(r))
			}
		}
		drivertest.SameLines(t, "our rules", got, want)
	},
	Dump: func(t testing.TB, k kernel.Kernel, fam routerule.Family) []string { return drivertest.Rules(t, k, fam) },
	Foreign: func(t testing.TB, k kernel.Kernel, fam routerule.Family, at drivertest.Stage) {
		lookup := func(prio, table uint32) kernel.Rule {
			return kernel.Rule{Family: fam, Priority: prio, Action: kernel.RuleLookup, Table: table}
		}
		var rules []kernel.Rule
		switch at {
		case drivertest.BeforeApply:
			// Our selectors at our priority, looking up a foreign table;
			// our table at a foreign priority; a foreign goto and drop.
			sameSrc := lookup(100, 200)
			sameSrc.Src = confPfx(fam, 1, 0)
			marked := lookup(101, 200)
			marked.Mark, marked.Mask, marked.Protocol = 0x10, 0xffffffff, 4
			jump := kernel.Rule{Family: fam, Priority: 99, Action: kernel.RuleGoto, Goto: 300}
			drop := kernel.Rule{Family: fam, Priority: 98, Action: kernel.RuleBlackhole, Src: confPfx(fam, 9, 0)}
			rules = []kernel.Rule{sameSrc, marked, lookup(300, 100), jump, drop}
		case drivertest.AfterApply:
			iif := lookup(102, 200)
			iif.IIF = "lo"
			rules = []kernel.Rule{lookup(100, 201), iif, lookup(104, 201)}
		case drivertest.InPlace:
			// Where Delete removed ours: the same selectors, a foreign
			// table.
			r := lookup(104, 202)
			r.Src = confPfx(fam, 7, 3)
			rules = []kernel.Rule{r}
		}
		for _, r := range rules {
			if err := k.AddRule(context.Background(), r); err != nil {
				t.Fatalf("adding foreign rule %+v: %v", r, err)
			}
		}
	},
	Delete: func(t testing.TB, k kernel.Kernel, fam routerule.Family) {
		for _, r := range []kernel.Rule{
			{Family: fam, Priority: 104, Src: confPfx(fam, 7, 3), Action: kernel.RuleLookup, Table: 101},
			{Family: fam, Priority: 101, Mark: 0x10, Mask: 0xf0, Action: kernel.RuleLookup, Table: 101},
		} {
			if err := k.DeleteRule(context.Background(), r); err != nil {
				t.Fatalf("deleting %+v: %v", r, err)
			}
		}
	},
	BadInputs: []drivertest.BadInput[*routerule.Rules, routerule.Family]{
		{Name: "priority not owned", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 200, Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "priority 0", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "table not owned", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 100, Action: routerule.ActionLookup{Table: 300}})
		}},
		{Name: "table 0", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 100, Action: routerule.ActionLookup{}})
		}},
		{Name: "no action", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 100})
		}},
		{Name: "other family", Declare: func(r *routerule.Rules, fam routerule.Family) error {
			other := routerule.IPv6
			if fam == routerule.IPv6 {
				other = routerule.IPv4
			}
			return r.SetRule(routerule.Rule{Priority: 100, Src: confPfx(other, 1, 0), Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "host bits", Declare: func(r *routerule.Rules, fam routerule.Family) error {
			p := confPfx(fam, 1, 0)
			return r.SetRule(routerule.Rule{Priority: 100, Src: netip.PrefixFrom(p.Addr().Next(), p.Bits()), Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "goto backwards", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 103, Action: routerule.ActionGoto{Priority: 101}})
		}},
		{Name: "mark outside mask", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 101, Mark: 0x30, Mask: 0x10, Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "invert without a match", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 102, Invert: true, Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "bad interface name", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.SetRule(routerule.Rule{Priority: 102, IIF: "a/b", Action: routerule.ActionLookup{Table: 100}})
		}},
		{Name: "a good rule with a bad one", Declare: func(r *routerule.Rules, fam routerule.Family) error {
			return r.SetRules(append(confRules(fam)[:3:3], routerule.Rule{Priority: 200, Action: routerule.ActionLookup{Table: 100}}))
		}},
		{Name: "two rules the kernel cannot hold at once", Declare: func(r *routerule.Rules, fam routerule.Family) error {
			a := routerule.Rule{Priority: 102, IIF: "lo", Action: routerule.ActionLookup{Table: 100}}
			b := a
			b.Invert = true
			return r.SetRules(append(confRules(fam), a, b))
		}},
		{Name: "removing an invalid rule", Declare: func(r *routerule.Rules, _ routerule.Family) error {
			return r.RemoveRule(routerule.Rule{Priority: 100})
		}},
	},
}

// confKernelForm returns the kernel rule a declared rule becomes.
func confKernelForm(fam routerule.Family, r routerule.Rule) kernel.Rule {
	k := kernel.Rule{Family: fam, Priority: r.Priority, Src: r.Src, Dst: r.Dst, Mark: r.Mark, Mask: r.Mask,
		Invert: r.Invert, IIF: r.IIF, OIF: r.OIF, Protocol: routerule.Protocol}
	if k.Mark != 0 && k.Mask == 0 {
		k.Mask = 0xffffffff
	}
	switch a := r.Action.(type) {
	case routerule.ActionLookup:
		k.Action, k.Table = kernel.RuleLookup, a.Table
	case routerule.ActionGoto:
		k.Action, k.Goto = kernel.RuleGoto, a.Priority
	case routerule.ActionBlackhole:
		k.Action = kernel.RuleBlackhole
	}
	return k
}
