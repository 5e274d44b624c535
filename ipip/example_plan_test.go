package ipip_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipip"
)

// Plan says what the next Apply would write, and writes nothing: here
// tunl0 created, given its tunnel address and MTU, and set up, on a fake
// namespace that models the ipip module. The Apply after it makes exactly
// these writes; then the Plan is empty and State in sync.
func ExampleDriver_Plan() {
	ctx := context.Background()
	ns := exampleHost(true)
	d, _ := ipip.NewDriver(ipip.DriverOptions{Kernel: ns})
	_ = d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1"), Address: netip.MustParseAddr("10.244.1.250"), MTU: 1480})

	plan, _ := d.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = d.Apply(ctx)
	fmt.Println("writes of the Apply:", ns.Writes())
	plan, _ = d.Plan(ctx)
	fmt.Println(plan)
	st, _ := d.State(ctx)
	fmt.Println(st)
	// Output:
	// ipip-tunl0: 3 writes
	// + link tunl0 ipip mtu 1480
	// ~ link tunl0 addr add 10.244.1.250/32
	// ~ link tunl0 up (was down)
	// writes while planning: 0
	// writes of the Apply: 3
	// ipip-tunl0: no writes
	// ipip-tunl0: 1 owned, 0 drifted, 0 failing
}

// State on a kernel without the ipip module (this project's machines): the
// device is missing and fails, with the kernel's error.
func ExampleDriver_State() {
	ctx := context.Background()
	ns := exampleHost(false)
	d, _ := ipip.NewDriver(ipip.DriverOptions{Kernel: ns})
	_ = d.SetDevice(&ipip.Device{Local: netip.MustParseAddr("198.18.0.1")})
	_, _ = d.Apply(ctx)
	st, _ := d.State(ctx)
	fmt.Println(st.Drift[0])
	fmt.Println(len(st.Failing), "failing:", st.Failing[0].Kind, st.Failing[0].Name, st.Failing[0].Attempts)
	// Output:
	// link tunl0: missing (want tunl0 ipip)
	// 1 failing: link tunl0 1
}
