package nftables_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/nftablesfake"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
)

// Plan says what the next Apply would write, and writes nothing: here the
// table, a chain with its rule, the hook's base chain with its jump, and
// then, once someone deleted the chain's rule, that rule alone. The Apply
// after a Plan makes exactly its writes; then the Plan is empty.
func ExampleTable_Plan() {
	ns := nftablesfake.New()
	ctx := context.Background()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns, PostWriteRecheck: []time.Duration{}})
	defer tbl.Close()
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{Action: netfilter.Accept(), Comments: []string{"all"}}}})
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}})

	plan, _ := tbl.Plan(ctx)
	fmt.Println(plan)
	_, committed, _, _ := ns.Counts()
	fmt.Println("transactions while planning:", committed)
	_, _ = tbl.Apply(ctx)

	_ = ns.Admin().DeleteRule(nftablesfake.IPv4, "np-filter", "np-fw", 0)
	tbl.QueueResync()
	plan, _ = tbl.Plan(ctx)
	fmt.Println(plan)
	_, _ = tbl.Apply(ctx)
	plan, _ = tbl.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// nftables-ip-np-filter: 5 writes
	// + table ip np-filter
	// + chain INPUT { type filter hook input priority -10 policy accept }
	// + chain np-fw
	// + rule INPUT np:qR0SGEHTzRq0tKVj
	// + rule np-fw np:tXFNxRiTaLJTwl0b all
	// transactions while planning: 0
	// nftables-ip-np-filter: 1 write
	// + rule np-fw np:tXFNxRiTaLJTwl0b all
	// nftables-ip-np-filter: no writes
}

// State says what the Table holds in the kernel, how that differs from
// what it declares, and what fails: here a base chain with a jump to a
// chain the Table does not declare, which it cannot write (it stands
// empty, so that the rest is written).
func ExampleTable_State() {
	ns := nftablesfake.New()
	ctx := context.Background()
	tbl, _ := nftables.New(nftables.Options{Name: "np-filter", Family: ipfamily.IPv4, Role: nftables.Filter, Kernel: ns, PostWriteRecheck: []time.Duration{}})
	defer tbl.Close()
	_ = tbl.SetChains(netfilter.Chain{Name: "np-fw", Rules: []netfilter.Rule{{Action: netfilter.Accept()}}})
	_ = tbl.InsertRules("test", netfilter.HookInput, []netfilter.Rule{{Action: netfilter.Jump("np-fw")}, {Action: netfilter.Jump("np-missing")}})
	_, err := tbl.Apply(ctx)
	fmt.Println("apply:", err)

	st, _ := tbl.State(ctx)
	fmt.Println(st)
	fmt.Println("owned:", st.Owned)
	// Output:
	// apply: nftables: 1 object(s) failed; chain INPUT: jump to an undeclared chain: it jumps to np-missing, which the table does not declare
	// nftables-ip-np-filter: 3 owned, 1 drifted, 1 failing
	//   chain INPUT: want INPUT { type filter hook input priority -10 policy accept }, 2 rules, have INPUT { type filter hook input priority -10 policy accept }, 0 rules
	// ! nftables: chain INPUT: jump to an undeclared chain: it jumps to np-missing, which the table does not declare
	// owned: [chain INPUT { type filter hook input priority -10 policy accept } chain np-fw rule np-fw np:ON_HOFNlpSWhr-9e]
}
