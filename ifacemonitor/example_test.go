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
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/mtu"
)

// New checks the options before anything runs: a Kernel is required, and
// every pattern must compile.
func ExampleNew() {
	_, err := ifacemonitor.New(ifacemonitor.Options{})
	fmt.Println(errors.Is(err, ifacemonitor.ErrInvalidOptions))

	ns := kernelfake.New(kernelfake.Options{})
	_, err = ifacemonitor.New(ifacemonitor.Options{Kernel: ns, Exclude: []string{"kube-ipvs0("}})
	fmt.Println(err)
	// Output:
	// true
	// ifacemonitor: invalid options: Exclude pattern "kube-ipvs0(": error parsing regexp: missing closing ): `kube-ipvs0(`
}

// A monitor on a fake namespace: Run blocks, so it runs in a goroutine;
// OnInSync says when the first listing has been reported. Then every
// change is reported as it happens.
func ExampleMonitor_Run() {
	ns := kernelfake.New(kernelfake.Options{})
	updates := make(chan ifacemonitor.LinkUpdate, 16)
	inSync := make(chan struct{})
	m, err := ifacemonitor.New(ifacemonitor.Options{
		Kernel:      ns,
		OnLinkState: func(u ifacemonitor.LinkUpdate) { updates <- u },
		OnInSync:    func() { close(inSync) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	<-inSync
	lo, _ := m.Snapshot().Interface("lo")
	fmt.Println("in sync; lo:", lo.State, lo.Addrs)
	show := func() { u := <-updates; fmt.Println(u.Name, u.Kind, u.State) }
	show() // lo

	br, err := ns.AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge})
	if err != nil {
		fmt.Println(err)
		return
	}
	show()
	if err := ns.SetLinkUp(ctx, br.Index, true); err != nil {
		fmt.Println(err)
		return
	}
	show()
	if err := ns.SetLinkUp(ctx, br.Index, false); err != nil {
		fmt.Println(err)
		return
	}
	show()
	if err := ns.DeleteLink(ctx, br.Index); err != nil {
		fmt.Println(err)
		return
	}
	show()

	cancel()
	fmt.Println("Run:", <-errc) // every goroutine has ended
	// Output:
	// in sync; lo: up [127.0.0.1/8 ::1/128]
	// lo device up
	// br0 bridge down
	// br0 bridge up
	// br0 bridge down
	// br0 bridge gone
	// Run: <nil>
}

// How an agent wires the monitor to the namespace it manages: link changes
// make the MTU monitor look again, links and addresses go to the dataplane
// loop, which hands them to its managers and drivers, and the first
// complete listing releases the loop, which applies nothing before the
// interfaces are known. The namespace is the agent's own; it is not run here.
func Example_agentWiring() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := kernel.OpenCurrent() // or kernel.Open("/run/netns/NAME")
	if err != nil {
		panic(err)
	}
	defer ns.Close()

	loop, err := dataplane.New(dataplane.Options{})
	if err != nil {
		panic(err)
	}
	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: mtu.DefaultExclude()})
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
		Kernel:            ns,
		Exclude:           []string{`^kube-ipvs0$`},
		FlapDampingWindow: 100 * time.Millisecond,
		OnLinkState: func(u ifacemonitor.LinkUpdate) {
			mtuMonitor.Trigger() // never blocks
			// The loop hands u to every manager and driver that is a
			// dataplane.InterfaceObserver; it never blocks either.
			loop.OnLink(u.Link(), u.State)
		},
		OnAddrs:  loop.OnAddrs, // the same for the addresses
		OnInSync: loop.InterfacesInSync,
	})
	if err != nil {
		panic(err)
	}

	go func() { _ = mtuMonitor.Run(ctx) }()
	go func() { _ = loop.Run(ctx) }()
	go func() {
		if err := mon.Run(ctx); err != nil {
			slog.Error("interface monitor stopped", "err", err)
		}
	}()
	// … the agent runs until ctx is cancelled.
}

func ExampleMonitor_Matches() {
	m, err := ifacemonitor.New(ifacemonitor.Options{
		Kernel:  kernelfake.New(kernelfake.Options{}), // not used until Run
		Include: []string{"^eth", "^ens"},
		Exclude: []string{"^eth9$"},
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

// A consumer keeps routes by destination and first hop: an update of the
// same route replaces it, Gone removes it.
func ExampleRouteUpdate() {
	type key struct {
		table uint32
		dst   netip.Prefix
		oif   int
	}
	routes := map[key]kernel.Route{}
	apply := func(u ifacemonitor.RouteUpdate) {
		k := key{u.Route.Table, u.Route.Dst, u.Route.OIF}
		if u.Gone {
			delete(routes, k)
			return
		}
		routes[k] = u.Route
	}
	r := kernel.Route{Family: kernel.IPv4, Table: kernel.TableMain, Dst: netip.MustParsePrefix("10.2.0.0/16"), OIF: 3}
	apply(ifacemonitor.RouteUpdate{Route: r})
	r.Protocol = kernel.ProtoBoot
	apply(ifacemonitor.RouteUpdate{Route: r})
	fmt.Println(len(routes), routes[key{kernel.TableMain, r.Dst, 3}].Protocol)
	apply(ifacemonitor.RouteUpdate{Route: r, Gone: true})
	fmt.Println(len(routes))
	// Output:
	// 1 3
	// 0
}
