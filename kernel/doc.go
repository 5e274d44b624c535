// Package kernel is nodeplane's one way to reach the Linux kernel: it opens
// a network namespace once and gives every driver and monitor what it
// needs there, in nodeplane's own types.
//
// # What it owns
//
// A Namespace owns the sockets and descriptors it opened for one network
// namespace: a NETLINK_ROUTE socket for batched route, neighbour, FDB and
// rule writes and streaming dumps (its own codec), netlink-library handles
// for links, addresses and conntrack, and a duplicate of the namespace
// descriptor, through which it runs binaries (Runner), sysctl reads and
// writes, and any other work that must happen inside the namespace (Do:
// a userspace WireGuard device, BPF attachments). It also opens
// NETLINK_NETFILTER sockets inside the namespace for package nftables
// (OpenNFTablesSocket, the NFTables capability), each for its caller to
// keep, and a client of the kernel's WireGuard (WireGuardDevice and
// ConfigureWireGuard, the WireGuard capability; a kernel without the
// module answers ErrNotSupported), closed with the Namespace. Sockets are opened on first
// use, each from a thread inside the namespace. It keeps no kernel state
// of its own and has no opinion about which objects are whose: ownership
// is the drivers' business.
//
// # How it is used
//
//	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
//	if err != nil { … }
//	defer ns.Close()
//	tbl, err := routetable.New(routetable.Options{Kernel: ns, …})
//	sets, err := ipsets.New(ipsets.Options{Kernel: ns, …})
//
// Drivers and monitors take the narrow interface they use (Routes, Links,
// Rules, Neighbors, FDB, Sysctls, Conntrack, Events, Commands, and the
// capabilities Doer, NFTables and WireGuard); a
// *Namespace implements every one, and so does kernelfake.Namespace, an
// in-memory namespace with kernel semantics for unit tests. Objects have
// one type each — Link, Addr, Route, NextHop, Rule, Neighbor, FDBEntry —
// and LinkState carries interface state between packages.
//
// Writes of many objects (ApplyRoutes, ApplyNeighbors, ApplyFDB) are
// batched: many requests per sendmsg, acknowledgements drained in bulk, one
// error per operation, so one refused object never hides the others. Bad
// input is refused before anything is sent, with the same checks in the
// fake (Route.Validate, Neighbor.Validate, FDBEntry.Validate,
// Rule.Validate, Link.Validate, Addr.Validate). Dumps retry when the kernel
// reports them interrupted by a concurrent change, and subscriptions
// resubscribe and announce a Resync after an overflow, so no watcher goes
// deaf; a subscription streams every kind in the kernel's order, with a
// receive buffer of the caller's choice (SubscribeOptions), and places
// barriers that tell the events older than a listing from the newer ones. Kernel refusals keep their errno and carry the package's sentinel
// where one applies (EEXIST is ErrExists; ENOENT, ESRCH, ENODEV and
// EADDRNOTAVAIL are ErrNotFound; EOPNOTSUPP is ErrNotSupported).
//
// Namespaces are Linux-only: elsewhere the package builds, its pure checks
// work, and Open fails with ErrNotSupported.
//
// # What it never touches
//
// Nothing on its own: every change is a call its user made. It never falls
// back to the process's namespace when a namespace is closed or invalid
// (calls after Close fail with ErrClosed, and Close waits for the calls in
// progress), and never moves the calling goroutine's thread into another
// namespace.
package kernel
