package routetable_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/routetable"
)

// exampleKernel returns a fake namespace with interfaces np-a and np-b (veth
// pairs, up, with 192.168.1.1/24 and 192.168.2.1/24).
func exampleKernel() *kernelfake.Namespace {
	ns := kernelfake.New(kernelfake.Options{})
	exampleLink(ns, "np-a", 1)
	exampleLink(ns, "np-b", 2)
	return ns
}

// exampleLink creates interface name, as a CNI plugin would: a veth pair
// with 192.168.n.1/24, both ends up. It returns its index.
func exampleLink(ns *kernelfake.Namespace, name string, n int) int {
	admin := ns.Admin() // changes the namespace behind the Table's back
	ctx := context.Background()
	l, _ := admin.AddLink(ctx, kernel.Link{Name: name, Kind: kernel.KindVeth, Veth: &kernel.Veth{PeerName: "x" + name}})
	_ = admin.AddAddr(ctx, kernel.Addr{LinkIndex: l.Index, Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(n), 1}), 24)})
	peer, _ := admin.LinkByName(ctx, "x"+name)
	_ = admin.SetLinkUp(ctx, peer.Index, true)
	_ = admin.SetLinkUp(ctx, l.Index, true)
	return l.Index
}

// show prints the routes of table 254 of the fake namespace, as `ip route`
// would (roughly), except the kernel's own address routes.
func show(k *kernelfake.Namespace) {
	names := map[int]string{}
	links, _ := k.Admin().Links(context.Background())
	for _, l := range links {
		names[l.Index] = l.Name
	}
	for _, r := range k.Routes(routetable.IPv4, kernel.TableMain) {
		if r.Protocol != kernel.ProtoKernel {
			fmt.Println(" ", formatRoute(&r, names))
		}
	}
}

var (
	podA   = netip.MustParsePrefix("10.244.1.7/32")
	remote = netip.MustParsePrefix("10.244.2.0/24")
)

const (
	exLocal  routetable.RouteClass = 10
	exTunnel routetable.RouteClass = 20
)

// The one way to reach a namespace: open it with package kernel and give
// the Table its Kernel. This example only compiles: it needs root and an
// existing namespace.
func Example_namespace() {
	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	tbl, err := routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		fmt.Println(err)
	}
}

// A Table on a fake namespace: declare, apply, look.
func Example() {
	k := exampleKernel()
	tbl, err := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}})
	_ = tbl.SetRoutes(exTunnel, "np-b", []routetable.Target{{CIDR: remote, Type: routetable.TargetOnlink, Gateway: netip.MustParseAddr("192.168.0.2")}})
	_ = tbl.SetRoutes(exLocal, routetable.InterfaceNone, []routetable.Target{{CIDR: netip.MustParsePrefix("10.244.1.0/24"), Type: routetable.TargetBlackhole}})
	if _, err := tbl.Apply(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	show(k)
	fmt.Println("writes:", k.Writes())

	// A resync that finds everything in place writes nothing.
	k.ResetCounts()
	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	fmt.Println("writes after a resync:", k.Writes())
	// Output:
	//   10.244.1.0/24 blackhole proto 78
	//   10.244.1.7/32 unicast dev np-a proto 78
	//   10.244.2.0/24 unicast via 192.168.0.2 dev np-b onlink proto 78
	// writes: 3
	// writes after a resync: 0
}

// New validates the options and does no I/O.
func ExampleNew() {
	ns := kernelfake.New(kernelfake.Options{})
	_, err := routetable.New(routetable.Options{Kernel: ns})
	fmt.Println(errors.Is(err, routetable.ErrInvalidOptions), err)
	_, err = routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv6, Table: kernel.TableMain, InterfacePatterns: []string{"("}})
	fmt.Println(errors.Is(err, routetable.ErrInvalidOptions))
	tbl, err := routetable.New(routetable.Options{Kernel: ns, Family: routetable.IPv6, Table: 1000})
	fmt.Println(tbl.Name(), tbl.Index(), tbl.Family(), tbl.Phase(), err)
	// Output:
	// true routetable: invalid options: Family must be IPv4 or IPv6, not Family(0)
	// true
	// routetable-ipv6-1000 1000 IPv6 routes <nil>
}

// SetRoutes replaces everything one (class, interface) pair wants; bad
// input changes nothing.
func ExampleTable_SetRoutes() {
	k := exampleKernel()
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{
		{CIDR: netip.MustParsePrefix("10.0.1.0/24")},
		{CIDR: netip.MustParsePrefix("10.0.2.0/24"), Metric: 100, MTU: 1400},
	})
	_, _ = tbl.Apply(context.Background())
	show(k)

	fmt.Println("replace the pair's routes:")
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: netip.MustParsePrefix("10.0.3.0/24")}})
	_, _ = tbl.Apply(context.Background())
	show(k)

	err := tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: netip.MustParsePrefix("10.0.4.0/24"), Type: routetable.TargetBlackhole}})
	fmt.Println(errors.Is(err, routetable.ErrInvalidTarget), err)
	// Output:
	//   10.0.1.0/24 unicast dev np-a proto 78
	//   10.0.2.0/24 metric 100 unicast dev np-a mtu 1400 proto 78
	// replace the pair's routes:
	//   10.0.3.0/24 unicast dev np-a proto 78
	// true routetable: invalid target: 10.0.4.0/24: blackhole routes have no interface: declare them under InterfaceNone
}

// Two producers want the same destination: the lower class wins; when it
// withdraws, the other takes over with one replace.
func ExampleTable_RouteUpdate() {
	k := exampleKernel()
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.RouteUpdate(exTunnel, "np-b", routetable.Target{CIDR: podA, Gateway: netip.MustParseAddr("10.0.0.2")})
	_ = tbl.RouteUpdate(exLocal, "np-a", routetable.Target{CIDR: podA})
	_, _ = tbl.Apply(context.Background())
	show(k)
	// Output:
	//   10.244.1.7/32 unicast dev np-a proto 78
}

// RouteRemove withdraws one route of a pair.
func ExampleTable_RouteRemove() {
	k := exampleKernel()
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.RouteUpdate(exTunnel, "np-b", routetable.Target{CIDR: podA})
	_ = tbl.RouteUpdate(exLocal, "np-a", routetable.Target{CIDR: podA})
	_, _ = tbl.Apply(context.Background())

	k.ResetCounts()
	_ = tbl.RouteRemove(exLocal, "np-a", routetable.RouteKey{CIDR: podA})
	_, _ = tbl.Apply(context.Background())
	show(k)
	fmt.Println("route writes:", k.Calls(kernelfake.OpApplyRoutes)) // one replace, no delete
	// Output:
	//   10.244.1.7/32 unicast dev np-b proto 78
	// route writes: 1
}

// Routes for an interface that does not exist yet are held, and written
// when the interface monitor reports it up.
func ExampleTable_OnIfaceStateChanged() {
	k := kernelfake.New(kernelfake.Options{})
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(exLocal, "np-new", []routetable.Target{{CIDR: podA}})
	_, _ = tbl.Apply(context.Background())
	fmt.Println("before:", len(k.Routes(routetable.IPv4, kernel.TableMain)), "routes")

	idx := exampleLink(k, "np-new", 1)                    // the CNI plugin creates the veth…
	tbl.OnIfaceStateChanged("np-new", idx, kernel.LinkUp) // …and ifacemonitor reports it
	_, _ = tbl.Apply(context.Background())
	show(k)
	// Output:
	// before: 0 routes
	//   10.244.1.7/32 unicast dev np-new proto 78
}

// A route of ours that someone else deletes is written again by the next
// Apply once the interface monitor reports it gone, without a read of the
// table.
func ExampleTable_OnRouteUpdate() {
	k := exampleKernel()
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}})
	_, _ = tbl.Apply(context.Background())
	dumps := k.Calls(kernelfake.OpDumpRoutes)

	for _, r := range k.Routes(routetable.IPv4, kernel.TableMain) {
		if r.Dst == podA { // an administrator deletes it…
			_ = k.Admin().ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kernel.OpDelete, Route: r}})
			tbl.OnRouteUpdate(r, true) // …and ifacemonitor reports it (OnRoute)
		}
	}
	_, _ = tbl.Apply(context.Background())
	show(k)
	fmt.Println("table reads:", k.Calls(kernelfake.OpDumpRoutes)-dumps)
	// Output:
	//   10.244.1.7/32 unicast dev np-a proto 78
	// table reads: 0
}

// Apply reports per-route failures, classified; the rest is written and
// the failed route is retried on its own backoff, when Apply asks for it.
func ExampleTable_Apply() {
	k := exampleKernel()
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain, Clock: clk})
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}, {CIDR: remote}})
	refused := false // the kernel refuses podA's route once
	k.Refuse(func(_ kernelfake.Op, obj any) error {
		if op, ok := obj.(kernel.RouteOp); ok && op.Route.Dst == podA && !refused {
			refused = true
			return syscall.ENETDOWN
		}
		return nil
	})

	res, err := tbl.Apply(context.Background())
	var pe *dataplane.PartialError
	if errors.As(err, &pe) {
		fmt.Println("failed:", pe.Failed, "interface down:", errors.Is(err, routetable.ErrIfaceDown),
			"partial:", errors.Is(err, dataplane.ErrPartial))
		fmt.Println(pe.Objects()[0])
	}
	fmt.Println("call again in", res.RetryAfter)
	show(k)

	clk.Advance(res.RetryAfter)
	_, err = tbl.Apply(context.Background())
	fmt.Println("retry:", err)
	show(k)
	// Output:
	// failed: 1 interface down: true partial: true
	// routetable: replace route 10.244.1.7/32 dev np-a: interface down: kernel: replace route 10.244.1.7/32 table 254: kernelfake: ApplyRoutes refused: network is down
	// call again in 100ms
	//   10.244.2.0/24 unicast dev np-a proto 78
	// retry: <nil>
	//   10.244.1.7/32 unicast dev np-a proto 78
	//   10.244.2.0/24 unicast dev np-a proto 78
}

// QueueResync makes the next Apply re-read the table, repairing what
// changed behind the Table's back. A dataplane.Loop calls it every
// ResyncInterval; without a loop, call it yourself.
func ExampleTable_QueueResync() {
	k := exampleKernel()
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}})
	_, _ = tbl.Apply(context.Background())

	_ = k.Admin().ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kernel.OpDelete, Route: kernel.Route{Family: kernel.IPv4, Dst: podA}}})
	fmt.Println("deleted by hand:", podA, "gone")

	tbl.QueueResync()
	_, _ = tbl.Apply(context.Background())
	show(k)
	// Output:
	// deleted by hand: 10.244.1.7/32 gone
	//   10.244.1.7/32 unicast dev np-a proto 78
}

// A route another agent added on one of our interfaces is left alone for
// the grace period, then deleted.
func ExampleOptions_gracePeriod() {
	k := exampleKernel()
	a, _ := k.Link("np-a")
	_ = k.Admin().ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kernel.OpAdd, Route: kernel.Route{Family: kernel.IPv4,
		Dst: podA, Type: kernel.RTNUnicast, Protocol: 3, Scope: kernel.ScopeLink, OIF: a.Index}}})
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain, InterfacePatterns: []string{`^np-`}, Clock: clk})

	res, _ := tbl.Apply(context.Background())
	fmt.Println("call again in", res.RetryAfter)
	show(k)
	clk.Advance(res.RetryAfter)
	_, _ = tbl.Apply(context.Background())
	fmt.Println("after the grace period:")
	show(k)
	// Output:
	// call again in 10s
	//   10.244.1.7/32 unicast dev np-a proto 3
	// after the grace period:
}

// The default policy: our protocol, or our interfaces (but never the
// kernel's address routes).
func ExampleNewDefaultPolicy() {
	p, _ := routetable.NewDefaultPolicy(routetable.DefaultProtocol, []string{`^np-`})
	for _, c := range []struct {
		proto uint8
		iface string
	}{{routetable.DefaultProtocol, "eth0"}, {3, "np-1"}, {kernel.ProtoKernel, "np-1"}, {3, "eth0"}} {
		fmt.Println(c.proto, c.iface, p.RouteIsOurs(&kernel.Route{Protocol: c.proto}, c.iface))
	}
	// Output:
	// 78 eth0 true
	// 3 np-1 true
	// 2 np-1 false
	// 3 eth0 false
}

// ExclusivePolicy owns a whole table dedicated to the Table.
func ExampleExclusivePolicy() {
	k := exampleKernel()
	_ = k.Admin().ApplyRoutes(context.Background(), []kernel.RouteOp{{Kind: kernel.OpAdd, Route: kernel.Route{Family: kernel.IPv4,
		Table: 200, Dst: remote, Type: kernel.RTNBlackhole, Protocol: 4}}})
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: 200, Ownership: routetable.ExclusivePolicy{}})
	_, _ = tbl.Apply(context.Background())
	fmt.Println(len(k.Routes(routetable.IPv4, 200)), "routes left in table 200")
	// Output: 0 routes left in table 200
}

// Keys are normalised: IPv6 metric 0 is 1024, the kernel's default.
func ExampleTarget_Key() {
	fmt.Println(routetable.Target{CIDR: netip.MustParsePrefix("10.1.0.0/16"), Metric: 5}.Key())
	fmt.Println(routetable.Target{CIDR: netip.MustParsePrefix("fd00::/64")}.Key())
	// Output:
	// 10.1.0.0/16 metric 5
	// fd00::/64 metric 1024
}

// A destination with host bits set is refused, as `ip route` refuses it;
// the error names it, and matches both sentinels it speaks of.
func ExampleTarget_hostBits() {
	tbl, _ := routetable.New(routetable.Options{Kernel: exampleKernel(), Family: routetable.IPv4, Table: kernel.TableMain})
	err := tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: netip.MustParsePrefix("10.0.0.1/24")}})
	fmt.Println(err)
	fmt.Println(errors.Is(err, routetable.ErrInvalidTarget), errors.Is(err, ipfamily.ErrHostBits))
	// Output:
	// routetable: invalid target: 10.0.0.1/24: host bits set (the network is 10.0.0.0/24)
	// true true
}

// recordingConntrack is a Kernel whose conntrack deletion is replaced (to
// count deletions, say, or skip them): it records the addresses and
// deletes nothing. Everything else is the embedded Kernel's.
type recordingConntrack struct {
	routetable.Kernel
	deleted []netip.Addr
}

func (k *recordingConntrack) DeleteConntrack(_ context.Context, _ kernel.Family, addrs []netip.Addr) (int, error) {
	k.deleted = append(k.deleted, addrs...)
	return 0, nil
}

// A Kernel is an interface: wrap one to count, break or replace a part of
// it, here the conntrack deletion of an address whose route moves.
func ExampleKernel() {
	k := &recordingConntrack{Kernel: exampleKernel()}
	tbl, _ := routetable.New(routetable.Options{Kernel: k, Family: routetable.IPv4, Table: kernel.TableMain})
	_ = tbl.SetRoutes(exLocal, "np-a", []routetable.Target{{CIDR: podA}})
	_, _ = tbl.Apply(context.Background())
	_ = tbl.SetRoutes(exLocal, "np-b", []routetable.Target{{CIDR: podA}}) // the pod's address moves
	_ = tbl.SetRoutes(exLocal, "np-a", nil)
	_, _ = tbl.Apply(context.Background())
	fmt.Println(k.deleted)
	// Output: [10.244.1.7]
}
