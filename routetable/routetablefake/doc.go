// Package routetablefake is an in-memory kernel for tests of code that uses
// package routetable: a routetable.Kernel that keeps routes per table,
// links, neighbour entries and conntrack flows, behaves like the kernel for
// what a Table emits, and fails on demand.
//
// # What it emulates
//
// Routes are keyed as the kernel keys them: family, table, destination,
// TOS and metric (one route per key; IPv6 routes that differ only in their
// interface are not modelled). OpAdd of a taken key fails with EEXIST;
// OpReplace creates or overwrites; OpDelete fails with ESRCH when no route
// matches, and fields set in the delete (type, protocol, interface; a
// scope other than RT_SCOPE_NOWHERE; an IPv4 metric other than 0) must
// match. A route through an interface that does not exist fails with
// ENODEV, through one that is down with ENETDOWN. When a link goes down,
// the routes through it vanish (IPv4 local routes excepted, as in the
// kernel) and so do its neighbour entries, but a multipath route keeps a
// dead next hop through it until all its next hops are dead; when it is
// deleted, everything through it vanishes (in IPv6, only the next hop of a
// multipath route). A link that loses its carrier (SetLinkCarrier) keeps
// its routes, marked linkdown, and accepts writes. TestKernelFakeMatchesKernel
// in package routetable checks these against the real kernel, flags
// included. Routes are stored as the kernel reports them: an MTU above
// 65520 is capped (routetable.MaxMTU); in IPv6, metric 0 becomes 1024, the
// scope is universe, and blackhole-like routes sit on lo. A destination
// with host bits set, or an unspecified gateway or source, is refused
// (EINVAL). Gateway reachability and preferred-source checks are not
// emulated.
//
// # Failure injection and inspection
//
// Inject makes calls fail (every kind of call, optionally only for one
// destination, once, N times or until ClearFaults), or makes a dump restart
// midway as an interrupted kernel dump does. Calls counts every call by
// kind; Routes, Route, Neighbors, Flows and LinkIndex show the state.
// AddRoute, DeleteRoute, AddLink, SetLinkUp, SetLinkCarrier, RenameLink,
// DeleteLink and AddFlow change it as an administrator or another agent
// would, without counting as calls. An injected failure's default error
// matches ErrInjected and EIO.
//
// The package owns nothing outside the Kernel value and touches no kernel
// state. A Kernel is safe for concurrent use.
package routetablefake
