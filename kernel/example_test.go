//go:build linux

package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/kernel"
)

// The whole cycle in a named network namespace: write routes in one batch,
// then read the table back. It needs root and the namespace, so it has no
// Output.
func Example() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	ctx := context.Background()
	v0, err := ns.LinkByName(ctx, "v0")
	if err != nil {
		fmt.Println(err)
		return
	}
	var ops []kernel.RouteOp
	for i := range 1000 {
		ops = append(ops, kernel.RouteOp{Kind: kernel.OpReplace, Route: kernel.Route{
			Family: kernel.IPv4, Table: 100, Type: kernel.RTNUnicast, Protocol: 80, Scope: kernel.ScopeLink,
			Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32),
			OIF: v0.Index,
		}})
	}
	for i, err := range ns.ApplyRoutes(ctx, ops) {
		if err != nil {
			fmt.Println("route", i, err)
		}
	}
	n := 0
	err = ns.DumpRoutes(ctx, kernel.IPv4, 100, func(r *kernel.Route) error {
		if r.Protocol == 80 {
			n++
		}
		return nil
	}, func() { n = 0 })
	fmt.Println(n, err)
}

// Open fails on a path that does not exist; it never falls back to the
// process's namespace.
func ExampleOpen() {
	_, err := kernel.Open("/run/netns/no-such-namespace")
	fmt.Println(errors.Is(err, kernel.ErrNotFound))
	// Output: true
}

// OpenFD duplicates the descriptor it is given; one that is not a
// network namespace is refused.
func ExampleOpenFD() {
	_, err := kernel.OpenFD(-1)
	fmt.Println(errors.Is(err, kernel.ErrInvalid))
	// Output: true
}

// OpenCurrent opens the calling thread's namespace; reading it needs no
// privilege.
func ExampleOpenCurrent() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	lo, err := ns.LinkByName(context.Background(), "lo")
	fmt.Println(lo.Name, lo.Kind, err)
	// Output: lo device <nil>
}

// DumpRoutes streams a table; here the local table of the process's own
// namespace (read only), which always routes 127.0.0.1 to lo.
func ExampleNamespace_DumpRoutes() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	loopback := netip.MustParsePrefix("127.0.0.1/32")
	err = ns.DumpRoutes(context.Background(), kernel.IPv4, kernel.TableLocal, func(r *kernel.Route) error {
		if r.Dst == loopback { // r is reused: copy *r to keep it
			fmt.Println("local route:", r.Dst, r.Type == kernel.RTNLocal, r.Scope == kernel.ScopeHost, r.Table)
		}
		return nil
	}, nil)
	fmt.Println(err)
	// Output:
	// local route: 127.0.0.1/32 true true 255
	// <nil>
}

// ApplyRoutes returns one error per operation; invalid routes are refused
// before anything is sent (so this example writes nothing).
func ExampleNamespace_ApplyRoutes() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	errs := ns.ApplyRoutes(context.Background(), []kernel.RouteOp{
		{Kind: kernel.OpReplace, Route: kernel.Route{Family: kernel.IPv4, Table: 100, Type: kernel.RTNUnicast,
			Dst: netip.MustParsePrefix("10.1.2.3/16"), OIF: 2}},
		{Kind: kernel.OpAdd, Route: kernel.Route{Family: kernel.IPv6, Table: 100, Type: kernel.RTNBlackhole,
			Dst: netip.MustParsePrefix("2001:db8::/32"), OIF: 2}},
	})
	for _, err := range errs {
		fmt.Println(errors.Is(err, kernel.ErrInvalid), err)
	}
	// Output:
	// true kernel: replace route 10.1.2.3/16 table 100: kernel: invalid input: destination 10.1.2.3/16 has host bits set (the network is 10.1.0.0/16)
	// true kernel: add route 2001:db8::/32 table 100: kernel: invalid input: a blackhole route takes no interface, gateway or next hops
}

func ExampleRoute_Validate() {
	r := kernel.Route{Family: kernel.IPv4, Table: 100, Type: kernel.RTNUnicast, Dst: netip.MustParsePrefix("10.0.0.0/8")}
	fmt.Println(r.Validate())
	r.Gateway = netip.MustParseAddr("fd00::1") // IPv4 over an IPv6 next hop (RTA_VIA)
	fmt.Println(r.Validate())
	r.MTU = 70000
	fmt.Println(errors.Is(r.Validate(), kernel.ErrInvalid))
	// Output:
	// kernel: invalid input: a unicast route needs an interface, a gateway or next hops
	// <nil>
	// true
}

// ApplyNeighbors writes ARP/NDP entries in batches (permanent unless
// the Neighbor says otherwise). It needs root and a namespace.
func ExampleNamespace_ApplyNeighbors() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	errs := ns.ApplyNeighbors(context.Background(), []kernel.NeighborOp{
		{Kind: kernel.OpReplace, Neighbor: kernel.Neighbor{LinkIndex: 2, IP: netip.MustParseAddr("10.0.0.2"),
			MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 2}}},
	})
	fmt.Println(errs)
}

// ApplyFDB programs a VXLAN device's remote VTEPs: a unicast MAC towards
// one VTEP, and the all-zeros MAC (flooding) towards every VTEP listed.
func ExampleNamespace_ApplyFDB() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	vx, err := ns.LinkByName(context.Background(), "vxlan.np")
	if err != nil {
		return
	}
	flood := make(net.HardwareAddr, 6)
	errs := ns.ApplyFDB(context.Background(), []kernel.FDBOp{
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx.Index, MAC: net.HardwareAddr{0x02, 0, 0, 0, 0, 7},
			Dst: netip.MustParseAddr("192.0.2.7"), Permanent: true}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx.Index, MAC: flood, Dst: netip.MustParseAddr("192.0.2.7"), Permanent: true}},
		{Kind: kernel.OpReplace, Entry: kernel.FDBEntry{LinkIndex: vx.Index, MAC: flood, Dst: netip.MustParseAddr("192.0.2.8"), Permanent: true}},
	})
	fmt.Println(errs)
}

func ExampleFDBEntry_Validate() {
	e := kernel.FDBEntry{LinkIndex: 4, MAC: net.HardwareAddr{2, 0, 0, 0, 1}}
	fmt.Println(e.Validate())
	// Output: kernel: invalid input: MAC of 5 bytes (want 6)
}

func ExampleNeighbor_Validate() {
	n := kernel.Neighbor{LinkIndex: 4, IP: netip.MustParseAddr("10.0.0.9")}
	fmt.Println(n.Validate())
	// Output: kernel: invalid input: link-layer address of 0 bytes (want 1 to 32)
}

// A Rule's unset suppressors are -1, not 0 (suppress_prefixlength 0 is a
// real selector).
func ExampleRule_Validate() {
	r := kernel.Rule{Family: kernel.IPv4, Priority: 100, Action: kernel.RuleLookup, Table: 200}
	fmt.Println(r.Validate())
	r.Action, r.Goto = kernel.RuleGoto, 50
	fmt.Println(r.Validate())
	// Output:
	// <nil>
	// kernel: invalid input: goto 50 does not jump forward from priority 100
}

func ExampleLink_Validate() {
	l := kernel.Link{Name: "vxlan.calico", Kind: kernel.KindVXLAN, VXLAN: &kernel.VXLAN{VNI: 4096, Port: 4789}}
	fmt.Println(l.Validate())
	l.Name = "a-name-longer-than-15"
	fmt.Println(errors.Is(l.Validate(), kernel.ErrInvalid))
	// Output:
	// <nil>
	// true
}

func ExampleAddr_Validate() {
	a := kernel.Addr{LinkIndex: 3, Prefix: netip.MustParsePrefix("10.0.0.5/24")}
	fmt.Println(a.Validate(), a.Family())
	// Output: <nil> IPv4
}

// Sysctl keys are checked before anything is read: only net.* keys, which
// are per namespace.
func ExampleNamespace_Sysctl() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	_, err = ns.Sysctl(context.Background(), "kernel.hostname")
	fmt.Println(err)
	// Output: kernel: invalid input: sysctl "kernel.hostname" is not a per-namespace net.* key
}

// AddLink checks the link before anything is sent.
func ExampleNamespace_AddLink() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	_, err = ns.AddLink(context.Background(), kernel.Link{Name: "np0", Kind: kernel.KindVeth})
	fmt.Println(err)
	// Output: kernel: invalid input: link "np0": Veth is set for, and only for, a veth
}

// A closed Namespace fails every call with ErrClosed.
func ExampleNamespace_Close() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ns.Close(), ns.Close(), ns.FD())
	_, err = ns.Links(context.Background())
	fmt.Println(errors.Is(err, kernel.ErrClosed))
	// Output:
	// <nil> <nil> -1
	// true
}

// Do runs work that must happen inside the namespace (sockets created
// there stay there) on a thread of its own; the caller's thread never
// moves.
func ExampleNamespace_Do() {
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	err = ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
	fmt.Println(err)
	// Output: <nil>
}

// Runner's processes start inside the namespace (iptables-restore, ipset,
// nft). It needs root.
func ExampleNamespace_Runner() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	out, err := ns.Runner().Run(context.Background(), nil, "ip", "-o", "link", "show")
	fmt.Println(string(out), err)
}

// OpenNFTablesSocket opens a netfilter netlink socket inside the
// namespace, for package nftables (its Options.Kernel takes the
// Namespace). It needs root.
func ExampleNamespace_OpenNFTablesSocket() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	s, err := ns.OpenNFTablesSocket()
	if err != nil {
		return
	}
	defer s.Close()
}

// Subscribe streams changes; every Resync (the first event, and one after
// lost events) means "list again".
func ExampleNamespace_Subscribe() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := ns.Subscribe(ctx, kernel.EventLinks|kernel.EventRoutes)
	if err != nil {
		return
	}
	for ev := range events {
		switch {
		case ev.Resync != nil:
			links, err := ns.Links(ctx)
			fmt.Println("resync:", len(links), err, errors.Is(ev.Resync.Reason, kernel.ErrOverflow))
		case ev.Link != nil:
			fmt.Println("link", ev.Link.Link.Name, ev.Link.Link.State(), "deleted", ev.Link.Deleted)
		case ev.Route != nil:
			fmt.Println("route", ev.Route.Route.Dst, "deleted", ev.Route.Deleted)
		}
	}
}

// A kernel refusal is an *OpError wrapping the errno (and the package's
// sentinel where one applies), so callers classify with errors.Is.
func ExampleOpError() {
	err := error(&kernel.OpError{Op: "replace route", Object: "10.0.0.0/24 table 100",
		Err: unix.ENETDOWN, Message: "Device for nexthop is not up"})
	switch {
	case errors.Is(err, unix.ENETDOWN):
		fmt.Println("interface down:", err)
	case errors.Is(err, kernel.ErrNotFound):
		fmt.Println("interface gone:", err)
	}
	// Output: interface down: kernel: replace route 10.0.0.0/24 table 100: network is down (Device for nexthop is not up)
}

func ExampleOpKind_String() {
	fmt.Println(kernel.OpReplace, kernel.OpAdd, kernel.OpDelete)
	// Output: replace add delete
}

func ExampleLinkState_String() {
	l := kernel.Link{AdminUp: true}
	fmt.Println(kernel.LinkGone, l.State())
	// Output: gone down
}
