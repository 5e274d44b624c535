package delta_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodeplane/nodeplane/routetable/internal/delta"
)

// route is a stand-in for what a route driver programs.
type route struct {
	Dev    string
	Metric int
}

// A driver's apply: resync from a dump, then delete what is not wanted and
// write what differs.
func Example() {
	tr := delta.NewComparable[netip.Prefix, route]()
	p := netip.MustParsePrefix

	// Intent, recorded without I/O.
	tr.Desired().Set(p("10.0.1.0/24"), route{Dev: "eth0"})
	tr.Desired().Set(p("10.0.2.0/24"), route{Dev: "eth1"})
	tr.Desired().Set(p("10.0.3.0/24"), route{Dev: "eth0"})

	// What a dump of the kernel found, fed in as the dump reports it.
	found := []struct {
		dst netip.Prefix
		r   route
	}{
		{p("10.0.1.0/24"), route{Dev: "eth0"}},                 // already right
		{p("10.0.2.0/24"), route{Dev: "eth0"}},                 // wrong device
		{p("192.168.0.0/16"), route{Dev: "eth9", Metric: 100}}, // not ours any more
	}
	err := tr.Dataplane().ReplaceAllIter(func(add func(netip.Prefix, route)) error {
		for _, f := range found {
			add(f.dst, f.r)
		}
		return nil // a dump error would leave the dataplane view unpruned
	})
	if err != nil {
		fmt.Println("dump:", err)
		return
	}

	var ops []string
	tr.PendingDeletions().Iter(func(dst netip.Prefix, r route) delta.IterAction {
		ops = append(ops, fmt.Sprintf("del %v dev %s", dst, r.Dev))
		return delta.IterActionUpdateDataplane // the kernel write succeeded
	})
	tr.PendingUpdates().Iter(func(dst netip.Prefix, r route) delta.IterAction {
		ops = append(ops, fmt.Sprintf("replace %v dev %s", dst, r.Dev))
		return delta.IterActionUpdateDataplane
	})
	slices.Sort(ops) // map order is random; sort for a stable output
	fmt.Println(strings.Join(ops, "\n"))
	fmt.Println("in sync:", tr.InSync())
	// Output:
	// del 192.168.0.0/16 dev eth9
	// replace 10.0.2.0/24 dev eth1
	// replace 10.0.3.0/24 dev eth0
	// in sync: true
}

// New takes an equality function, for values that are not comparable or
// where some fields do not count.
func ExampleNew() {
	tr := delta.New[string, []string](slices.Equal[[]string])
	tr.Desired().Set("set-a", []string{"10.0.0.1", "10.0.0.2"})
	tr.Dataplane().Set("set-a", []string{"10.0.0.1", "10.0.0.2"})
	fmt.Println("in sync:", tr.InSync())

	tr.Dataplane().Set("set-a", []string{"10.0.0.1"}) // changed behind our back
	v, _ := tr.PendingUpdates().Get("set-a")
	fmt.Println("rewrite set-a with", v)
	// Output:
	// in sync: true
	// rewrite set-a with [10.0.0.1 10.0.0.2]
}

// ReplaceAllIter feeds a dump straight into the dataplane view; a failed
// dump removes nothing.
func ExampleDataplane_ReplaceAllIter() {
	tr := delta.NewComparable[string, int]()
	tr.Desired().Set("a", 1)
	err := tr.Dataplane().ReplaceAllIter(func(add func(string, int)) error {
		add("a", 1)
		add("b", 2)
		return nil
	})
	fmt.Println(err, tr.PendingUpdates().Len(), tr.PendingDeletions().Len())
	// Output:
	// <nil> 0 1
}
