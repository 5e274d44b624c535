package routetablefake_test

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"

	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/routetable/routetablefake"
)

// The fake behaves like the kernel for route writes, and fails on demand.
func Example() {
	k := routetablefake.New()
	idx, _ := k.AddLink("np-a") // created down, like a new veth
	route := routetable.KernelRoute{Family: routetable.IPv4, Dst: netip.MustParsePrefix("10.0.0.0/24"),
		Type: routetable.RTNUnicast, Scope: routetable.ScopeLink, OIF: idx}
	ops := []routetable.RouteOp{{Kind: routetable.OpAdd, Route: route}}

	fmt.Println(k.ApplyRoutes(context.Background(), ops))
	_ = k.SetLinkUp("np-a", true)
	fmt.Println(k.ApplyRoutes(context.Background(), ops))
	fmt.Println(k.ApplyRoutes(context.Background(), ops))

	k.Inject(routetablefake.Fault{Call: routetablefake.CallReplace, Err: syscall.ENODEV})
	fmt.Println(k.ApplyRoutes(context.Background(), []routetable.RouteOp{{Kind: routetable.OpReplace, Route: route}}))
	fmt.Println(len(k.Routes(routetable.IPv4, 0)), "route,", k.Writes(), "writes")
	// Output:
	// [routetablefake: add 10.0.0.0/24: network is down]
	// [<nil>]
	// [routetablefake: add 10.0.0.0/24: file exists]
	// [routetablefake: replace 10.0.0.0/24: no such device]
	// 1 route, 4 writes
}

// Going down takes the routes through a link with it, as in the kernel.
func ExampleKernel_SetLinkUp() {
	k := routetablefake.New()
	idx, _ := k.AddLink("np-a")
	_ = k.SetLinkUp("np-a", true)
	_ = k.AddRoute(routetable.KernelRoute{Family: routetable.IPv4, Dst: netip.MustParsePrefix("10.0.0.0/24"),
		Type: routetable.RTNUnicast, Scope: routetable.ScopeLink, OIF: idx})
	_ = k.SetLinkUp("np-a", false)
	fmt.Println(len(k.Routes(routetable.IPv4, 0)))
	// Output: 0
}
