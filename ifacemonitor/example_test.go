//go:build linux

package ifacemonitor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// New checks the options before anything runs: a handle and a namespace
// are required, and every pattern must compile.
func ExampleNew() {
	_, err := ifacemonitor.New(ifacemonitor.Options{})
	fmt.Println(errors.Is(err, ifacemonitor.ErrInvalidOptions))

	self, err := netns.Get() // the caller's own namespace
	if err != nil {
		fmt.Println(err)
		return
	}
	defer self.Close()
	_, err = ifacemonitor.New(ifacemonitor.Options{Handle: &netlink.Handle{}, Namespace: self, Exclude: []string{"kube-ipvs0("}})
	fmt.Println(errors.Is(err, ifacemonitor.ErrInvalidOptions))
	// Output:
	// true
	// true
}

// A monitor on the process's own namespace, which it only reads: wait for
// the first listing, look at the view, stop.
func ExampleMonitor_Start() {
	self, err := netns.Get()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer self.Close()
	h, err := netlink.NewHandleAt(self)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Close()

	inSync := make(chan struct{})
	m, err := ifacemonitor.New(ifacemonitor.Options{
		Handle:    h,
		Namespace: self,
		Include:   []string{"^lo$"},
		OnInSync:  func() { close(inSync) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := m.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	select {
	case <-inSync:
	case <-time.After(10 * time.Second):
		fmt.Println("not in sync")
	}
	lo, ok := m.Snapshot().Interface("lo")
	fmt.Println("lo:", ok, lo.State, lo.Addrs[0])
	fmt.Println("in sync:", m.Stats().InSync)
	cancel()
	<-m.Done() // every goroutine has ended
	// Output:
	// lo: true up 127.0.0.1/8
	// in sync: true
}

// How an agent wires the monitor: link changes make the MTU monitor look
// again, and the first complete listing releases the dataplane loop, which
// applies nothing before the interfaces are known. The namespace is the
// agent's own; it needs no root to run, but it is not run here.
func Example_agentWiring() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	self, err := netns.Get()
	if err != nil {
		panic(err)
	}
	defer self.Close()
	h, err := netlink.NewHandleAt(self)
	if err != nil {
		panic(err)
	}
	defer h.Close()

	loop, err := dataplane.New(dataplane.Options{})
	if err != nil {
		panic(err)
	}
	det, err := mtu.NewDetector(mtu.DetectorOptions{Lister: mtu.NetlinkLister{Handle: h}})
	if err != nil {
		panic(err)
	}
	mtuMonitor, err := mtu.NewMonitor(mtu.MonitorOptions{
		Detector: det,
		PodMTU:   mtu.PodMTUOptions{Encaps: []mtu.Encap{mtu.VXLAN}},
		OnChange: func(old, cur mtu.Result) { slog.Info("pod MTU", "old", old.PodMTU, "new", cur.PodMTU) },
	})
	if err != nil {
		panic(err)
	}

	mon, err := ifacemonitor.New(ifacemonitor.Options{
		Handle:            h,
		Namespace:         self,
		Exclude:           []string{`^kube-ipvs0$`},
		FlapDampingWindow: 100 * time.Millisecond,
		OnLinkState: func(u ifacemonitor.LinkUpdate) {
			mtuMonitor.Trigger() // never blocks
			// An agent also hands u to its managers, e.g. loop.TrySend(u).
		},
		OnAddrs: func(name string, addrs []netip.Prefix) {
			// Hand the new set to the managers that need it, without
			// blocking: loop.TrySend(yourAddrsMessage{name, addrs}).
		},
		OnInSync: loop.InterfacesInSync,
	})
	if err != nil {
		panic(err)
	}

	go func() { _ = mtuMonitor.Run(ctx) }()
	go func() { _ = loop.Run(ctx) }()
	if err := mon.Start(ctx); err != nil {
		panic(err)
	}
	// … the agent runs until ctx is cancelled.
}

func ExampleMonitor_Matches() {
	self, err := netns.Get()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer self.Close()
	m, err := ifacemonitor.New(ifacemonitor.Options{
		Handle:    &netlink.Handle{}, // not used until Start
		Namespace: self,
		Include:   []string{"^eth", "^ens"},
		Exclude:   []string{"^eth9$"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"eth0", "ens3", "eth9", "veth1"} {
		fmt.Println(name, m.Matches(name))
	}
	// Output:
	// eth0 true
	// ens3 true
	// eth9 false
	// veth1 false
}

func ExampleState_String() {
	fmt.Println(ifacemonitor.StateUp, ifacemonitor.StateDown, ifacemonitor.StateGone)
	// Output:
	// up down gone
}

// Address lists come sorted in this order.
func ExampleSortPrefixes() {
	ps := []netip.Prefix{
		netip.MustParsePrefix("fd00::1/64"),
		netip.MustParsePrefix("10.0.0.1/32"),
		netip.MustParsePrefix("10.0.0.1/24"),
	}
	ifacemonitor.SortPrefixes(ps)
	fmt.Println(ps)
	// Output:
	// [10.0.0.1/24 10.0.0.1/32 fd00::1/64]
}

// A consumer keeps routes by key: an update with the same key replaces the
// route, Gone removes it.
func ExampleRoute_Key() {
	routes := map[ifacemonitor.RouteKey]ifacemonitor.Route{}
	apply := func(u ifacemonitor.RouteUpdate) {
		if u.Gone {
			delete(routes, u.Route.Key())
			return
		}
		routes[u.Route.Key()] = u.Route
	}
	r := ifacemonitor.Route{Table: unix.RT_TABLE_MAIN, Dst: netip.MustParsePrefix("10.2.0.0/16"), LinkIndex: 3}
	apply(ifacemonitor.RouteUpdate{Route: r})
	r.Gw = netip.MustParseAddr("10.0.0.1")
	apply(ifacemonitor.RouteUpdate{Route: r})
	fmt.Println(len(routes), routes[r.Key()].Gw)
	apply(ifacemonitor.RouteUpdate{Route: r, Gone: true})
	fmt.Println(len(routes))
	// Output:
	// 1 10.0.0.1
	// 0
}
