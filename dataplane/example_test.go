package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
)

// RouteUpdate and RouteRemove are the consumer's own typed messages.
type RouteUpdate struct{ Dst netip.Prefix }
type RouteRemove struct{ Dst netip.Prefix }

// routeManager turns route messages into desired state on a routeDriver.
type routeManager struct {
	want   map[netip.Prefix]bool
	dirty  bool
	driver *routeDriver
}

func (m *routeManager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case RouteUpdate:
		m.want[msg.Dst], m.dirty = true, true
	case RouteRemove:
		delete(m.want, msg.Dst)
		m.dirty = true
	case dataplane.DatastoreInSync:
		fmt.Println("manager: datastore in sync")
	}
	// Other types are somebody else's.
}

func (m *routeManager) CompleteDeferredWork(context.Context) error {
	if !m.dirty {
		return nil
	}
	var routes []string
	for p := range m.want {
		routes = append(routes, p.String())
	}
	sort.Strings(routes)
	m.driver.desired, m.dirty = routes, false
	return nil
}

// routeDriver stands in for a kernel route table.
type routeDriver struct{ desired, kernel []string }

func (d *routeDriver) Phase() dataplane.Phase { return dataplane.PhaseRoutes }
func (d *routeDriver) QueueResync()           {}
func (d *routeDriver) Apply(context.Context) (dataplane.ApplyResult, error) {
	if strings.Join(d.desired, ",") != strings.Join(d.kernel, ",") {
		d.kernel = append([]string(nil), d.desired...)
		fmt.Println("driver: routes now", d.kernel)
	}
	return dataplane.ApplyResult{}, nil
}

// A manager and a driver on a Loop. Messages sent before the in-sync
// markers accumulate; the first pass runs once both markers are in, and
// OnInSync reports it.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, err := dataplane.New(dataplane.Options{
		OnInSync: func() { fmt.Println("loop: in sync"); cancel() },
	})
	if err != nil {
		panic(err)
	}
	drv := &routeDriver{}
	if err := loop.AddManager(&routeManager{want: map[netip.Prefix]bool{}, driver: drv}); err != nil {
		panic(err)
	}
	if err := loop.AddDriver(drv); err != nil {
		panic(err)
	}

	// The consumer's snapshot, then its in-sync; the interface monitor's.
	for _, p := range []string{"10.0.1.0/24", "10.0.2.0/24", "fd00:1::/64"} {
		_ = loop.Send(ctx, RouteUpdate{netip.MustParsePrefix(p)})
	}
	_ = loop.Send(ctx, RouteRemove{netip.MustParsePrefix("10.0.2.0/24")})
	loop.DatastoreInSync()
	loop.InterfacesInSync()

	fmt.Println("Run returned", loop.Run(ctx))
	fmt.Println("ready:", loop.Health().Ready)
	// Output:
	// manager: datastore in sync
	// driver: routes now [10.0.1.0/24 fd00:1::/64]
	// loop: in sync
	// Run returned <nil>
	// ready: true
}

// printDriver prints each call; ipSets also applies deletions.
type printDriver struct {
	name  string
	phase dataplane.Phase
	mu    *sync.Mutex
	log   *[]string
}

func (d *printDriver) Name() string           { return d.name }
func (d *printDriver) Phase() dataplane.Phase { return d.phase }
func (d *printDriver) QueueResync()           {}
func (d *printDriver) Apply(context.Context) (dataplane.ApplyResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.log = append(*d.log, d.name+" apply")
	return dataplane.ApplyResult{}, nil
}

type ipSets struct{ printDriver }

func (d *ipSets) ApplyDeletions(context.Context) (dataplane.ApplyResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.log = append(*d.log, d.name+" delete")
	return dataplane.ApplyResult{}, nil
}

// A driver that implements DeletionApplier is registered once and runs in
// two phases: its updates before the tables that use the sets, its
// deletions after them.
func ExampleDeletionApplier() {
	var mu sync.Mutex
	var log []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel})
	_ = loop.AddDriver(&printDriver{"filter-table", dataplane.PhaseTables, &mu, &log})
	_ = loop.AddDriver(&ipSets{printDriver{"ipsets", dataplane.PhaseIPSetsUpdate, &mu, &log}})
	_ = loop.AddDriver(&printDriver{"vxlan-fdb", dataplane.PhaseTunnelL2, &mu, &log})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	fmt.Println(strings.Join(log, "\n"))
	// Output:
	// ipsets apply
	// vxlan-fdb apply
	// filter-table apply
	// ipsets delete
}

// New rejects options out of range.
func ExampleNew() {
	_, err := dataplane.New(dataplane.Options{Backoff: dataplane.Backoff{Initial: time.Minute, Max: time.Second}})
	fmt.Println(errors.Is(err, dataplane.ErrInvalidOptions))
	fmt.Println(err)
	// Output:
	// true
	// dataplane: invalid options: Backoff.Max 1s is below Backoff.Initial 1m0s
}

// TrySend never blocks: it reports a full queue instead. The in-sync
// markers never block either; they keep their place after what was sent.
func ExampleLoop_TrySend() {
	loop, _ := dataplane.New(dataplane.Options{QueueSize: 2})
	fmt.Println(loop.TrySend("first"))
	fmt.Println(loop.TrySend("second"))
	fmt.Println(loop.TrySend("third"))
	loop.DatastoreInSync()
	// Output:
	// <nil>
	// <nil>
	// dataplane: input queue full
}

// Send waits for room in the queue, or for its context.
func ExampleLoop_Send() {
	loop, _ := dataplane.New(dataplane.Options{QueueSize: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	fmt.Println(loop.Send(ctx, "fits"))
	fmt.Println(loop.Send(ctx, "waits until the deadline")) // Run is not draining
	// Output:
	// <nil>
	// context deadline exceeded
}

// flaky fails its first Apply by panicking.
type flaky struct{ calls int }

func (f *flaky) Phase() dataplane.Phase { return dataplane.PhaseTables }
func (f *flaky) QueueResync()           { fmt.Println("flaky: resync queued") }
func (f *flaky) Apply(context.Context) (dataplane.ApplyResult, error) {
	if f.calls++; f.calls == 1 {
		panic("bug")
	}
	return dataplane.ApplyResult{}, nil
}

// A panicking driver becomes an error in the health report; the loop queues
// a resync on that driver, retries after the backoff and converges.
func ExampleLoop_Health() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{
		Backoff:  dataplane.Backoff{Initial: time.Millisecond},
		OnInSync: cancel,
		OnHealth: func(h dataplane.Health) {
			if h.ConsecutiveFailures > 0 {
				fmt.Println("failure:", errors.Is(h.LastError, dataplane.ErrPanic), h.LastError)
			}
		},
	})
	_ = loop.AddDriver(&flaky{})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	h := loop.Health()
	fmt.Println("live:", h.Live, "ready:", h.Ready, "applies:", h.Applies, "failures now:", h.ConsecutiveFailures)
	// Output:
	// flaky: resync queued
	// failure: true dataplane: driver *dataplane_test.flaky (tables): dataplane: panic: bug
	// live: false ready: true applies: 2 failures now: 0
}

// AddDriver options name a driver and change its resync interval.
func ExampleLoop_AddDriver() {
	loop, _ := dataplane.New(dataplane.Options{})
	err := loop.AddDriver(&routeDriver{},
		dataplane.WithName("routes-v4"),
		dataplane.WithResyncInterval(30*time.Second))
	fmt.Println(err)
	err = loop.AddDriver(&routeDriver{}, dataplane.WithName(""))
	fmt.Println(err)
	// Output:
	// <nil>
	// dataplane: invalid options: empty driver name
}

// Phases print their names.
func ExamplePhase_String() {
	for p := dataplane.PhaseIPSetsUpdate; p <= dataplane.PhaseIPSetsDelete; p++ {
		fmt.Println(int(p), p)
	}
	// Output:
	// 1 ipsets-update
	// 2 tunnel-l2
	// 3 tables
	// 4 routes
	// 5 ipsets-delete
}
