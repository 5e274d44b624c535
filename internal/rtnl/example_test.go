//go:build linux

package rtnl_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/rtnl"
)

// The whole cycle in a named network namespace: write routes in one batch,
// then read the table back. It needs root and the namespace, so it has no
// Output.
func Example() {
	ns, err := netns.GetFromName("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	c, err := rtnl.Open(ns)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx := context.Background()
	var ops []rtnl.RouteOp
	for i := range 1000 {
		ops = append(ops, rtnl.RouteOp{Kind: rtnl.OpReplace, Route: rtnl.Route{
			Family: unix.AF_INET, Table: 100, Type: unix.RTN_UNICAST, Protocol: 80, Scope: unix.RT_SCOPE_LINK,
			Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 32),
			OIF: 2,
		}})
	}
	for i, err := range c.ApplyRoutes(ctx, ops) {
		if err != nil {
			fmt.Println("route", i, err)
		}
	}
	n := 0
	err = c.DumpRoutes(ctx, unix.AF_INET, 100, func(r *rtnl.Route) error {
		if r.Protocol == 80 {
			n++
		}
		return nil
	}, func() { n = 0 })
	fmt.Println(n, err)
}

// Open needs an open namespace handle; it never falls back to the caller's
// namespace.
func ExampleOpen() {
	_, err := rtnl.Open(netns.None())
	fmt.Println(errors.Is(err, rtnl.ErrInvalidArgument))
	// Output: true
}

// OpenCurrent opens a socket in the calling thread's namespace (no
// privilege is needed to read).
func ExampleOpenCurrent() {
	c, err := rtnl.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Close())
	// Output: <nil>
}

// DumpRoutes streams a table; here the local table of the process's own
// namespace (read only), which always routes 127.0.0.1 to lo.
func ExampleConn_DumpRoutes() {
	c, err := rtnl.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	loopback := netip.MustParsePrefix("127.0.0.1/32")
	err = c.DumpRoutes(context.Background(), unix.AF_INET, unix.RT_TABLE_LOCAL, func(r *rtnl.Route) error {
		if r.Dst == loopback { // r is reused: copy *r to keep it
			fmt.Println("local route:", r.Dst, "type", r.Type == unix.RTN_LOCAL, "scope host", r.Scope == unix.RT_SCOPE_HOST, "table", r.Table)
		}
		return nil
	}, nil)
	fmt.Println(err)
	// Output:
	// local route: 127.0.0.1/32 type true scope host true table 255
	// <nil>
}

// ApplyRoutes returns one error per operation; invalid routes are refused
// before anything is sent (so this example writes nothing).
func ExampleConn_ApplyRoutes() {
	c, err := rtnl.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	errs := c.ApplyRoutes(context.Background(), []rtnl.RouteOp{
		{Kind: rtnl.OpReplace, Route: rtnl.Route{Family: unix.AF_INET, Table: 100, Type: unix.RTN_UNICAST,
			Dst: netip.MustParsePrefix("10.1.2.3/16"), OIF: 2}},
		{Kind: rtnl.OpAdd, Route: rtnl.Route{Family: unix.AF_INET6, Table: 100, Type: unix.RTN_BLACKHOLE,
			Dst: netip.MustParsePrefix("2001:db8::/32"), OIF: 2}},
	})
	for _, err := range errs {
		fmt.Println(errors.Is(err, rtnl.ErrInvalidRoute), err)
	}
	// Output:
	// true rtnl: replace 10.1.2.3/16 table 100: rtnl: invalid route: destination 10.1.2.3/16 has host bits set (want 10.1.0.0/16)
	// true rtnl: add 2001:db8::/32 table 100: rtnl: invalid route: a blackhole route takes no interface, gateway or next hops
}

// A closed Conn fails every call with ErrClosed.
func ExampleConn_Close() {
	c, err := rtnl.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Close(), c.Close())
	err = c.DumpRoutes(context.Background(), unix.AF_INET, 0, func(*rtnl.Route) error { return nil }, nil)
	fmt.Println(errors.Is(err, rtnl.ErrClosed))
	// Output:
	// <nil> <nil>
	// true
}

func ExampleRoute_Validate() {
	r := rtnl.Route{Family: unix.AF_INET, Table: 100, Type: unix.RTN_UNICAST, Dst: netip.MustParsePrefix("10.0.0.0/8")}
	fmt.Println(r.Validate())
	r.Gateway = netip.MustParseAddr("fd00::1") // IPv4 over an IPv6 next hop (RTA_VIA)
	fmt.Println(r.Validate())
	// Output:
	// rtnl: invalid route: a unicast route needs an interface, a gateway or next hops
	// <nil>
}

func ExampleOpKind_String() {
	fmt.Println(rtnl.OpReplace, rtnl.OpAdd, rtnl.OpDelete)
	// Output: replace add delete
}

// A kernel refusal is an *OpError wrapping the errno, so callers classify
// with errors.Is.
func ExampleOpError() {
	err := error(&rtnl.OpError{Kind: rtnl.OpReplace, Dst: netip.MustParsePrefix("10.0.0.0/24"), Table: 100,
		Err: unix.ENETDOWN, Message: "Device for nexthop is not up"})
	switch {
	case errors.Is(err, unix.ENETDOWN):
		fmt.Println("interface down:", err)
	case errors.Is(err, unix.ENODEV):
		fmt.Println("interface gone:", err)
	}
	// Output: interface down: rtnl: replace 10.0.0.0/24 table 100: network is down (Device for nexthop is not up)
}
