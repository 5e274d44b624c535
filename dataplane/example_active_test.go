package dataplane_test

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// standbyWatch is the agent's Metrics: it only looks at passes.
type standbyWatch struct {
	dataplane.NopMetrics // the methods it does not need
	loop                 *dataplane.Loop
	driver               *routeDriver
}

func (w *standbyWatch) PassCompleted(p dataplane.PassStats) {
	if !p.Active {
		fmt.Println("standby pass: desired", w.driver.desired, "written", w.driver.kernel)
		w.loop.SetActive(true) // say, leadership was just won
	}
}

// A standby instance: its managers run on every message, so its drivers
// hold the desired state, but nothing is written until SetActive(true),
// which needs no restart.
func ExampleLoop_SetActive() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drv := &routeDriver{}
	watch := &standbyWatch{driver: drv}
	loop, _ := dataplane.New(dataplane.Options{
		Inactive: true,
		Metrics:  watch,
		OnInSync: cancel,
	})
	watch.loop = loop
	_ = loop.AddManager(&routeManager{want: map[netip.Prefix]bool{}, driver: drv})
	_ = loop.AddDriver(drv)
	_ = loop.Send(ctx, RouteUpdate{netip.MustParsePrefix("10.0.1.0/24")})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	fmt.Println("active:", loop.Health().Active, "ready:", loop.Health().Ready)
	// Output:
	// manager: datastore in sync
	// standby pass: desired [10.0.1.0/24] written []
	// driver: routes now [10.0.1.0/24]
	// active: true ready: true
}

// applyCounter backs Metrics the way an agent backs it with Prometheus:
// a counter of applies by driver and outcome, and a sum of durations
// (a histogram in real life).
type applyCounter struct {
	dataplane.NopMetrics
	applies map[string]int
	total   time.Duration
}

func (c *applyCounter) DriverApplied(a dataplane.DriverApply) {
	c.applies[a.Driver+" "+a.Outcome.String()]++
	c.total += a.Duration
}

// The loop reports every driver's Apply with its outcome and duration.
func ExampleMetrics() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &applyCounter{applies: map[string]int{}}
	loop, _ := dataplane.New(dataplane.Options{
		Metrics:  m,
		Backoff:  dataplane.Backoff{Initial: time.Millisecond},
		OnInSync: cancel,
	})
	_ = loop.AddDriver(&flaky{}, dataplane.WithName("tables-v4"))
	_ = loop.AddDriver(&routeDriver{}, dataplane.WithName("routes-v4"))
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	var lines []string
	for k, n := range m.applies {
		lines = append(lines, fmt.Sprint(k, ": ", n))
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// flaky: resync queued
	// routes-v4 succeeded: 2
	// tables-v4 failed: 1
	// tables-v4 succeeded: 1
}
