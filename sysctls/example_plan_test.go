package sysctls_test

import (
	"context"
	"fmt"

	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/sysctls"
)

// Plan reads the settings the next Apply would check and lists the ones
// it would write, with the value each replaces; it writes nothing.
func ExampleDriver_Plan() {
	ns := kernelfake.New(kernelfake.Options{}) // ip_forward is 0, rp_filter 0
	d, _ := sysctls.New(sysctls.Options{Kernel: ns, Settings: []sysctls.Setting{
		{Key: "net.ipv4.ip_forward", Value: "1"},
		{Key: "net.ipv4.conf.all.rp_filter", Value: "2", Accept: []string{"0"}},
	}})
	ctx := context.Background()
	plan, _ := d.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = d.Apply(ctx)
	plan, _ = d.Plan(ctx)
	fmt.Println(plan)
	// Output:
	// sysctls: 1 write
	// ~ sysctl net.ipv4.ip_forward = 1 (was 0)
	// writes while planning: 0
	// sysctls: no writes
}

// State reads every setting: the values the kernel holds, and those
// changed behind the Driver's back as drift.
func ExampleDriver_State() {
	ns := kernelfake.New(kernelfake.Options{})
	d, _ := sysctls.New(sysctls.Options{Kernel: ns, Settings: []sysctls.Setting{{Key: "net.ipv4.ip_forward", Value: "1"}}})
	ctx := context.Background()
	_, _ = d.Apply(ctx)
	_ = ns.Admin().SetSysctl(ctx, "net.ipv4.ip_forward", "0") // someone else
	st, _ := d.State(ctx)
	fmt.Println(st)
	fmt.Println("owned:", st.Owned)
	// Output:
	// sysctls: 1 owned, 1 drifted, 0 failing
	//   sysctl net.ipv4.ip_forward: want 1, have 0
	// owned: [sysctl net.ipv4.ip_forward = 0]
}
