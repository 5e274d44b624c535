// Package routetable keeps the routes a node agent owns in one kernel
// routing table equal to what its producers declare: the "route sync with
// orphan cleanup" every CNI writes by hand, done once.
//
// # What it owns
//
// A Table owns, for one IP family in one routing table of one network
// namespace, the routes its OwnershipPolicy calls its own. The default
// policy (DefaultPolicy) owns the routes that carry its route protocol
// (Options.Protocol, by default DefaultProtocol, 0x4e, "proto 78" in
// iproute2) and the routes on interfaces whose names match
// Options.InterfacePatterns (such as `^np-`), except the kernel's own
// address routes (RTPROT_KERNEL). ExclusivePolicy owns a whole dedicated
// table. Routes in other tables, of the other family, with a TOS selector,
// or that the policy does not claim are foreign: they are never changed or
// deleted, and a desired route whose key a foreign route holds is not
// written (the Table reports ErrForeignRoute until the foreign route is
// gone). Ours that nobody wants are deleted, and every route the Table
// writes carries its protocol, so a restarted agent recognises them.
//
// Static neighbour entries (ARP or NDP, NUD_PERMANENT) are written for
// targets with a DestMAC, marked with the Table's protocol (NDA_PROTOCOL,
// Linux 5.0 and later), and deleted when no longer wanted. A neighbour
// entry names no routing table, so a Table knows its own by its routes:
// besides those it wants or wrote, an entry with its protocol is its own
// when a host route with its protocol to the entry's address through the
// entry's interface is in its table and it no longer wants that route
// there, so that a restarted Table deletes the entries of targets
// withdrawn while the agent was down. Entries of another Table (in another
// routing table, with the same protocol and patterns) are never read as
// its own: Tables of one family in several routing tables coexist, and
// none deletes the other's entries. Two Tables that want an entry for the
// same address on the same interface share the one the kernel holds:
// declare it in one of them. An entry without its protocol is never
// deleted (one where the Table wants an entry is replaced by its own).
// Conntrack entries are deleted for addresses whose host route
// moves or disappears. Nothing else is touched: no link, address or rule.
//
// # How it is used
//
// Open the namespace once with package kernel and give the Table its
// Kernel (in tests, a kernelfake.Namespace). One Table per (table, family),
// in a table of the agent's own or in the main table; ExclusivePolicy (and
// any policy that owns the kernel's own routes) is refused for the
// reserved tables 253 to 255. Producers declare routes by route class and
// interface:
//
//	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
//	if err != nil { … }
//	defer ns.Close()
//	tbl, err := routetable.New(routetable.Options{
//		Kernel:            ns,
//		Family:            routetable.IPv4,
//		Table:             kernel.TableMain, // required: 0 is refused
//		InterfacePatterns: []string{`^np-`},
//	})
//	err = tbl.SetRoutes(classLocal, "np-1234", []routetable.Target{{CIDR: pod}})
//	err = tbl.SetRoutes(classTunnel, routetable.InterfaceNone, []routetable.Target{{
//		CIDR: remotePods, NextHops: []routetable.NextHop{{Iface: "eth0", Gateway: gw1}, {Iface: "eth1", Gateway: gw2}},
//	}})
//	res, err := tbl.Apply(ctx)
//
// SetRoutes replaces everything a (class, interface) pair wants;
// RouteUpdate and RouteRemove change one route. A Target is a destination
// with a type (unicast through the interface, via a gateway, onlink, local,
// blackhole, unreachable, prohibit, throw), an optional gateway, source,
// MTU, metric, multipath next hops and destination MAC. Routes without an
// interface (blackhole and the like, and multipath routes) are declared
// under InterfaceNone. These calls validate their input and record intent
// only: bad input is an error wrapping ErrInvalidTarget (or
// ErrInvalidInterface, ErrDuplicateRoute) and changes nothing. Input the
// kernel would store in another form is bad input too, so that what the
// Table compares is what the kernel holds: a destination with host bits set
// (10.0.0.1/24; the error names it), an MTU above MaxMTU (the kernel caps
// it), an unspecified gateway or source.
//
// Several producers may want the same RouteKey (destination and metric):
// the lowest RouteClass wins, and within a class the candidate on the
// interface with the highest index, so the choice is deterministic. Only
// candidates whose interfaces are up take part: when the winner goes away,
// the next candidate's route replaces it in place in the same Apply
// (kernel.OpReplace), so there is no moment without a route.
//
// A Table is a dataplane.Driver (phase PhaseRoutes): register it with a
// dataplane.Loop, which calls Apply on every pass and QueueResync every
// dataplane.Options.ResyncInterval and after a failed read. A Table used
// without a loop re-reads the kernel only when its user calls QueueResync.
// It is also a dataplane.Wakeable: the loop hands it its wake function, and
// OnIfaceStateChanged and OnRouteUpdate, which are called from outside the
// loop, wake the loop. A nil context is context.Background().
//
// # Interfaces
//
// Routes name their interfaces; the Table maps names to indexes and
// states. Wire ifacemonitor to it, with its routes, and the Table and the
// monitor to the loop:
//
//	err = loop.AddDriver(tbl) // the loop hands tbl its wake function
//	mon, err := ifacemonitor.New(ifacemonitor.Options{
//		Kernel: ns,
//		OnLinkState: func(u ifacemonitor.LinkUpdate) {
//			tbl.OnIfaceStateChanged(u.Name, u.Index, u.State) // a kernel.LinkState
//		},
//		WatchRoutes: true,
//		OnRoute: func(u ifacemonitor.RouteUpdate) {
//			tbl.OnRouteUpdate(u.Route, u.Gone) // a kernel.Route
//		},
//		OnInSync: loop.InterfacesInSync,
//	})
//
// OnIfaceStateChanged and OnRouteUpdate only queue the change and wake the
// loop (they never wait for an Apply); the loop's next pass applies it.
// With the routes wired, a route of ours that someone deletes or changes
// is written again by that pass (within milliseconds, measured), and a
// foreign route that goes frees its key for ours, without a read of the
// table: the Table keeps its view of the table up to date from the events
// (a route of another table or family, or with a TOS, is dropped at once;
// events older than a re-read of the table are dropped by it). Without
// them, such changes are found at the next resync. Routes on an
// interface that does not exist yet, or is down, are held: kept in the
// Table, not written, and written when the interface comes up. The kernel
// removes routes through an interface that goes down or away, but keeps
// them (marked linkdown) when only its carrier goes; the Table leaves such
// kept routes in place while the interface is down. When an interface
// comes up, the next Apply re-reads the routes through it
// (Kernel.DumpInterfaceRoutes; one read of the whole table instead when
// more than a few came up at once) and writes only what is missing or
// differs, and a route someone else added to it meanwhile is found then,
// not at the next resync. A name that comes back with a new index gets
// its routes on the new index. What the Table knew of the routes through
// an interface that goes away goes with it, foreign ones included (the
// kernel deletes them), so a route of ours whose key a foreign route
// through it held (a flannel.1 the agent replaces with its own) is written
// by the next Apply. A rename is the old name gone and the new name up.
// Every resync also lists the links, so a Table without a monitor still
// learns the interfaces at start and at every resync.
//
// # Apply
//
// Apply writes only the difference between the winners and the kernel,
// many route messages per netlink send with the acknowledgements drained
// in bulk (Options.BatchSize per Kernel.ApplyRoutes call; package kernel
// batches them). Neighbour entries are written first, in one batch; then
// the deletes, routes via gateways before direct ones; then the deletion
// of the conntrack entries of the host routes deleted; then the replaces,
// direct routes before routes via gateways (each in order of key); then
// the neighbour deletions.
//
// Plan lists those writes without making them: it runs Apply's own write
// pass dry, after the read Apply would make, so the Apply after it makes
// exactly the writes it lists, in its order, and an Apply whose Plan is
// empty writes nothing. State gives the routes and neighbour entries of
// the Table in the kernel, every difference from the desired ones and the
// failing objects (dataplane.Planner and dataplane.Stater; a Loop's Plan
// and State collect them).
//
// Failures are per object: one route the kernel keeps refusing (a gateway
// reachable on no link) never holds back the others, nor the loop. The
// others are still written in the same Apply; the failed ones stay
// pending, each on its own exponential backoff (100 ms, doubling up to
// 30 s), and are not tried again on the passes in between; the Table keeps
// them in a dataplane.Ledger. Apply returns a *dataplane.PartialError,
// which wraps dataplane.ErrPartial (so a dataplane.Loop reports the failed
// objects in its Health and neither backs the Table off nor forces a
// resync) and classifies each failure (a *dataplane.ObjectError wrapping
// ErrIfaceDown, ErrIfaceGone or ErrRouteFailed and the kernel's error),
// and asks through ApplyResult.RetryAfter for the earliest retry. A route
// whose key a foreign route holds, or that waits for a conntrack deletion,
// is reported too, without a backoff of its own. A route stays reported
// while it waits. Declaring a failed route anew (changing or withdrawing
// it) or its interface coming up ends its backoff: the next Apply writes
// it, or forgets it. Neighbour entries and conntrack deletions back off
// the same way. An interface error makes the next Apply list the links
// first; a refused route does not make it re-read the table.
//
// Apply re-reads the table (a streamed dump, restarted if the kernel
// interrupts it) on its first call, after QueueResync and after a failed
// read. A failed read is an error of the whole Table
// (wrapping ErrDump, not ErrPartial): nothing is written. A resync that
// finds the kernel as expected writes nothing, and a new Table on a kernel
// that already holds its routes (a restarted agent) writes nothing either.
//
// Unwanted routes that someone else wrote (another protocol) on an
// interface with a grace period (by default, the ones matching
// InterfacePatterns) are left alone for Options.GracePeriod (10 s), on the
// injected clock, because a CNI plugin may add a pod's route before the
// agent learns about the pod; the grace period ends at once when the
// interface has declared routes. Unwanted routes with our protocol go at
// once.
//
// When the interface of a host route (/32, /128) changes, or the route
// disappears, the address's conntrack entries are deleted through the
// Kernel (kernel.Namespace uses netlink, not the conntrack binary; wrap the
// Kernel to replace it), and a moved route is written only after that; if
// the deletion fails, the route waits.
//
// # Memory
//
// Keys are stored in a 24-byte pointer-free form and interface names once
// per interface; about 350 bytes of heap per route at 100k routes, for the
// declared candidates, the winners and the kernel view together.
//
// # Tests
//
// A kernelfake.Namespace is an in-memory namespace with the kernel's
// semantics (EEXIST, ENODEV, ENETDOWN, unreachable gateways, routes
// vanishing with their interface or kept linkdown without carrier, dumps,
// conntrack flows, neighbours), proven against the kernel by its
// differential test, with failure injection (Fail, Refuse) and call
// counting (Calls, Writes): pass it as Options.Kernel, in this package's
// tests and in its users'.
//
// # What it never touches
//
// Foreign routes (see above), routes of other tables and families, links,
// addresses, rules, and the neighbour entries it neither wants nor wrote,
// except those with its protocol that served routes of its own it no
// longer wants (see above). New does no I/O and starts no goroutines; the
// Table starts none at all. The package builds everywhere; a real
// namespace (kernel.Open) is Linux-only.
package routetable
