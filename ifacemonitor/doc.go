// Package ifacemonitor tells a node agent which interfaces exist in one
// network namespace, whether they are up, their MTUs and addresses (and,
// optionally, the namespace's routes), and keeps telling it: a monitor that
// silently stops after a netlink overflow is the classic node-agent outage,
// and this one never goes deaf.
//
// # How it is used
//
// The namespace is opened once with package kernel and given to the
// monitor as its one kernel option:
//
//	ns, err := kernel.Open("/run/netns/blue") // or kernel.OpenCurrent()
//	if err != nil { … }
//	defer ns.Close()
//	m, err := ifacemonitor.New(ifacemonitor.Options{
//		Kernel:      ns,
//		Exclude:     []string{`^kube-ipvs0$`},
//		OnLinkState: func(u ifacemonitor.LinkUpdate) {
//			tbl.OnIfaceStateChanged(u.Name, u.Index, u.State) // a routetable.Table
//			mtuMonitor.Trigger()
//		},
//		OnAddrs:     func(name string, addrs []netip.Prefix) { /* … */ },
//		WatchRoutes: true, // a route someone else deletes is seen at once
//		OnRoute:     func(u ifacemonitor.RouteUpdate) { tbl.OnRouteUpdate(u.Route, u.Gone) },
//		OnInSync:    loop.InterfacesInSync,
//	})
//	go func() { errc <- m.Run(ctx) }() // returns once ctx ends
//
// Run subscribes to link and address events (and route events with
// WatchRoutes), lists what exists, reports it through the callbacks and then
// calls OnInSync, once. From then on it reports every change, until its
// context ends. Options.Kernel is anything that implements Kernel: a
// *kernel.Namespace for a real namespace, a *kernelfake.Namespace in tests.
//
// # Callbacks
//
// All callbacks are called from Run's goroutine, one at a time, in order;
// they must not block for long (hand work to another goroutine), because
// events queue up in the kernel meanwhile, and an overflow costs a full
// re-list. Every callback may be nil. A panicking callback is recovered,
// logged and counted in Stats; the monitor carries on.
//
//   - OnLinkState(LinkUpdate) reports a new interface, a change of its
//     state, MTU or kind, and an interface that is gone (kernel.LinkGone).
//   - OnAddrs(name, addrs) reports the full sorted set of an interface's
//     addresses, with their prefix lengths as netip.Prefix (use Addr() for
//     the bare IP), whenever it changes, and nil when the interface is gone.
//     Addresses of links that are down are reported too.
//   - OnRoute(RouteUpdate) reports new, changed and removed routes, of every
//     table and both families, as kernel.Route values, when WatchRoutes is
//     set.
//   - OnInSync is called once, after the first complete listing has been
//     reported. An agent wires it to dataplane.Loop.InterfacesInSync.
//
// Changes that arrive together (up to 1024 queued events) are applied
// together and reported once, as the state after all of them. A route that
// changed and changed back among them is still reported (removed if it
// came and went, again if it went and came back): a route table that wrote
// it keeps its own view, which the change may have left behind.
//
// # Up and down
//
// An interface's state is kernel.Link.State's: kernel.LinkUp when it is
// administratively up (IFF_UP) and operational (IFF_RUNNING: operational
// state up, or unknown for devices without a carrier, such as lo), else
// kernel.LinkDown. A link that is set up but has no carrier (a veth whose
// peer is down) is down. The same type carries the state on to
// routetable.Table.OnIfaceStateChanged, with no conversion.
//
// With FlapDampingWindow set, a change from up to down is held back for the
// window: if the interface comes back up within it, neither change is
// reported; if it stays down, the down report is made when the window ends
// (on the injected clock). Reports of interfaces that appear, come up,
// change MTU or disappear are never delayed.
//
// # Names
//
// Include and Exclude filter interfaces by name (regular expressions,
// unanchored). An empty Include includes every name and an empty Exclude
// excludes none: nothing is filtered by default, here as in package mtu.
// The consumer may key interfaces by name: the monitor never reports two
// interfaces under one name at once.
//
//   - A rename is reported as the old name gone (OnAddrs(old, nil) first,
//     if it had addresses) and then the new name, with OldName set and the
//     same Index, followed by OnAddrs(new, addrs). A rename across the
//     filter reports only the visible side.
//   - A name deleted and created again is reported gone with the old index,
//     then present with the new one.
//
// # Never deaf
//
// The subscription is the Kernel's (kernel.Events): one stream of link,
// address and route events in the kernel's order, a large receive buffer
// (Options.ReceiveBufferSize, 8 MiB by default; busy nodes raise it), and
// after an overflow (ENOBUFS), a closed socket or any subscription error, a
// renewed subscription and a Resync notice. On every Resync, and every
// ResyncInterval (default 90 s), the monitor lists the kernel again and
// compares the listing with what it has reported, so it reports exactly
// the differences: after recovery the consumer's view equals the kernel's,
// with nothing lost.
//
// Events older than a listing never overwrite it. Before it lists, the
// monitor places a barrier in the stream (kernel.BarrierFunc); the events
// of a listed kind that come before the barrier describe changes the
// listing shows already, and are dropped (Stats.StaleEvents). Events made
// while it lists come after the barrier and are applied: they repeat what
// the listing shows, or are newer. Where the kernel removes routes without
// a notification (a link going down or away, its last IPv4 address
// removed), the monitor re-lists the routes when that event arrives and the
// model holds IPv4 routes through the link, even if a listing already
// showed the link's change. A Kernel without barriers applies every event:
// older ones may then briefly show a past state, which the events that
// follow them correct, and they never make two interfaces share a name.
//
// An overflow storm (tens of thousands of changes at once) costs bounded
// work: a re-list starts no sooner than twice the previous one's duration
// (at most a second) after it ended, so re-listing takes about a third of
// the monitor's time at most, and the view converges shortly after the
// storm. A dump the kernel keeps interrupting is retried after 100 ms;
// other listing failures back off up to 5 s. Stats counts overflows,
// losses, re-lists and failures; Snapshot returns a copy of the reported
// view.
//
// # Routes
//
// With WatchRoutes, routes are reported as the kernel's dumps show them,
// told apart by table, destination, metric, TOS, type and first hop
// (routes of one destination and metric may coexist through different
// links). The kernel does not announce everything, and the monitor
// re-lists the routes when it has not: when a link goes down or away, or
// loses its last IPv4 address (its IPv4 routes go silently), and when an
// event does not say what it replaced (a route replaced through another
// next hop, a path dropped from an IPv6 multipath route). A route's state
// flags (linkdown, dead) change without a notification, so the reported
// Flags keep only kernel.WritableFlags; ask the link's state instead.
//
// # Testing without root
//
// Options.Kernel takes a kernelfake.Namespace, an in-memory namespace with
// the kernel's semantics and events (IPv6 addresses and routes going away
// with a link that goes down, IPv4 routes vanishing silently), Overflow to
// drop pending events as ENOBUFS does, and Fail(kernelfake.OpLinks, …) for
// failed listings. A downstream agent gives one to the monitor, with a
// clock.Fake as Options.Clock, and tests how its callbacks react to links
// and addresses coming and going:
//
//	ns := kernelfake.New(kernelfake.Options{})
//	m, _ := ifacemonitor.New(ifacemonitor.Options{Kernel: ns, Clock: fakeClock, OnLinkState: agent.OnLink})
//	go m.Run(ctx)                                          // agent.OnLink sees lo up
//	br, _ := ns.AddLink(ctx, kernel.Link{Name: "br0", Kind: kernel.KindBridge}) // then br0 down
//	_ = ns.SetLinkUp(ctx, br.Index, true)                  // then br0 up
//
// # What it never touches
//
// The monitor owns no kernel object. It only reads: listings and the event
// subscription of the Kernel it is given. It never changes a link, an
// address or a route, never closes the Kernel, and never falls back to the
// process's namespace. New does no I/O and starts no goroutines; Run's
// goroutines (the subscription's) stop with its context and have ended
// when it returns. A nil context is context.Background(). The package
// builds everywhere; a real namespace is Linux-only (kernel.Open).
package ifacemonitor
