//go:build linux

// Package rtnl is a small, fast rtnetlink route layer: it writes routes in
// batches and streams route dumps, encoding and decoding RTM_NEWROUTE and
// RTM_DELROUTE itself. It is the kernel side of the routetable driver.
//
// # What it owns
//
// One NETLINK_ROUTE socket per Conn, bound to one network namespace (Open
// takes the namespace handle; OpenCurrent uses the caller's). Nothing else:
// it keeps no route state and has no opinion about which routes are whose.
//
// # How it is used
//
//	c, err := rtnl.Open(nsHandle)
//	defer c.Close()
//	errs := c.ApplyRoutes(ctx, []rtnl.RouteOp{{Kind: rtnl.OpReplace, Route: r}, …})
//	err = c.DumpRoutes(ctx, unix.AF_INET, 100, func(r *rtnl.Route) error { … }, reset)
//
// ApplyRoutes packs many requests into one sendmsg (up to 64 KiB), each with
// NLM_F_ACK and its own sequence number, then drains the acknowledgements
// in bulk and returns one classified error per operation (a unix.Errno
// inside an *OpError). It never queues more acknowledgements than the
// socket receive buffer holds (8 MiB asked for, forced when the process has
// CAP_NET_ADMIN), so none is dropped. Bad input fails its own operation
// with ErrInvalidRoute and is never sent.
//
// DumpRoutes decodes routes straight from a reused receive buffer into a
// reused Route and hands each to a callback: no per-route allocation except
// the NextHops of multipath routes. It filters by table in the kernel
// (strict dump checking) where available, and restarts dumps the kernel
// marks as interrupted, calling the caller's reset function first.
//
// # What it never touches
//
// Links, addresses, rules, neighbours, or any namespace other than the
// one its socket was created in. It subscribes to no multicast group. It
// never falls back to the process's namespace for a bad handle.
//
// Linux only.
package rtnl
