package routerule_test

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routerule"
)

// Plan says what the next Apply would add and delete, and writes nothing:
// here the rule of an earlier run at an owned priority goes, the new one
// comes first (make before break), and the foreign rule stays.
func ExampleRules_Plan() {
	ns := kernelfake.New(kernelfake.Options{})
	ctx := context.Background()
	_ = ns.Admin().AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 200, Mark: 0x4})
	_ = ns.Admin().AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 300})

	rules := newExampleRules(ns)
	_ = rules.SetRule(routerule.Rule{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 200}})
	plan, _ := rules.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = rules.Apply(ctx)
	fmt.Println("writes of the Apply:", ns.Writes())
	plan, _ = rules.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// routerule-v4: 2 writes
	// + rule 100: from all fwmark 0x8 lookup 200
	// - rule 100: from all fwmark 0x4 lookup 200
	// writes while planning: 0
	// writes of the Apply: 2
	// routerule-v4: no writes
}

// State lists the rules of the instance in the kernel (not the foreign
// one), the drift from the desired rules, and the failing writes.
func ExampleRules_State() {
	ns := kernelfake.New(kernelfake.Options{})
	ctx := context.Background()
	_ = ns.Admin().AddRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 300})
	rules := newExampleRules(ns)
	_ = rules.SetRules([]routerule.Rule{
		{Priority: 100, Mark: 0x8, Action: routerule.ActionLookup{Table: 200}},
		{Priority: 101, Action: routerule.ActionBlackhole{}},
	})
	_, _ = rules.Apply(ctx)
	_ = ns.Admin().DeleteRule(ctx, kernel.Rule{Family: kernel.IPv4, Priority: 101, Action: kernel.RuleBlackhole})
	rules.QueueResync()

	st, _ := rules.State(ctx)
	fmt.Println(st)
	fmt.Println("owned:", st.Owned)
	// Output:
	// routerule-v4: 1 owned, 1 drifted, 0 failing
	//   rule 101: from all blackhole: missing (want 101: from all blackhole)
	// owned: [rule 100: from all fwmark 0x8 lookup 200]
}
