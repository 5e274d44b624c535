package routetable_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
)

// Plan says what the next Apply would write, and writes nothing: here a
// leftover of an earlier run to delete, a route whose MTU someone changed
// to replace, a new route to add. The Apply after it makes exactly these
// writes; then the Plan is empty.
func ExampleTable_Plan() {
	ns := exampleKernel()
	ctx := context.Background()
	a, _ := ns.Admin().LinkByName(ctx, "np-a")
	for _, r := range []kernel.Route{
		{Dst: netip.MustParsePrefix("10.244.9.0/24"), OIF: a.Index}, // left by an earlier run
		{Dst: remote, OIF: a.Index, Gateway: netip.MustParseAddr("192.168.1.2"), MTU: 1400},
	} {
		r.Family, r.Table, r.Type, r.Protocol, r.Scope = routetable.IPv4, kernel.TableMain, kernel.RTNUnicast, routetable.DefaultProtocol, kernel.ScopeLink
		if r.Gateway.IsValid() {
			r.Scope = kernel.ScopeUniverse
		}
		_ = ns.Admin().ApplyRoutes(ctx, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: r}})
	}
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(10, "np-a", []routetable.Target{
		{CIDR: podA},
		{CIDR: remote, Gateway: netip.MustParseAddr("192.168.1.2")},
	})

	plan, _ := tbl.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = tbl.Apply(ctx)
	fmt.Println("writes of the Apply:", ns.Writes())
	plan, _ = tbl.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// routetable-ipv4-254: 3 writes
	// - route 10.244.9.0/24 dev np-a proto 78
	// + route 10.244.1.7/32 dev np-a proto 78
	// ~ route 10.244.2.0/24 via 192.168.1.2 dev np-a proto 78 (was 10.244.2.0/24 via 192.168.1.2 dev np-a mtu 1400 proto 78)
	// writes while planning: 0
	// writes of the Apply: 3
	// routetable-ipv4-254: no writes
}

// State says what the Table holds in the kernel, how that differs from
// what it wants (also what it waits to write: here a route whose key a
// foreign route holds), and what fails.
func ExampleTable_State() {
	ns := exampleKernel()
	ctx := context.Background()
	_ = ns.Admin().ApplyRoutes(ctx, []kernel.RouteOp{{Kind: kernel.OpAdd, Route: kernel.Route{Family: routetable.IPv4,
		Table: kernel.TableMain, Dst: remote, Type: kernel.RTNBlackhole, Protocol: kernel.ProtoBoot}}})
	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(10, "np-a", []routetable.Target{{CIDR: podA}, {CIDR: remote, Gateway: netip.MustParseAddr("192.168.1.2")}})
	_, err := tbl.Apply(ctx)
	fmt.Println("apply:", err)

	st, _ := tbl.State(ctx)
	fmt.Println(st)
	fmt.Println("owned:", st.Owned)
	// Output:
	// apply: routetable: 1 object(s) failed; replace route 10.244.2.0/24 dev np-a: route key held by a foreign route: not overwritten; delete it or give ours another metric
	// routetable-ipv4-254: 1 owned, 1 drifted, 1 failing
	//   route 10.244.2.0/24: missing (want 10.244.2.0/24 via 192.168.1.2 dev np-a proto 78)
	// ! routetable: replace route 10.244.2.0/24 dev np-a: route key held by a foreign route: not overwritten; delete it or give ours another metric
	// owned: [route 10.244.1.7/32 dev np-a proto 78]
}
