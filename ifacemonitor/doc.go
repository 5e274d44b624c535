//go:build linux

// Package ifacemonitor tells a node agent which interfaces exist in one
// network namespace, whether they are up, their MTUs and addresses (and,
// optionally, the namespace's routes), and keeps telling it: a monitor that
// silently stops after a netlink overflow is the classic node-agent outage,
// and this one never goes deaf.
//
// # How it is used
//
//	m, err := ifacemonitor.New(ifacemonitor.Options{
//		Handle:    h,  // netlink handle bound to the namespace
//		Namespace: ns, // the same namespace, for the subscriptions
//		Exclude:   []string{`^kube-ipvs0$`},
//		OnLinkState: func(u ifacemonitor.LinkUpdate) { mtuMonitor.Trigger() },
//		OnAddrs:     func(name string, addrs []netip.Prefix) { /* … */ },
//		OnInSync:    loop.InterfacesInSync,
//	})
//	err = m.Start(ctx) // cancel ctx to stop; <-m.Done() waits for it
//
// Start subscribes to link and address events (and route events with
// WatchRoutes), lists what exists, reports it through the callbacks and then
// calls OnInSync, once. From then on it reports every change.
//
// # Callbacks
//
// All callbacks are called from one goroutine, one at a time, in order;
// they must not block for long (hand work to another goroutine), because
// events queue up in the kernel meanwhile, and an overflow costs a full
// re-list. Every callback may be nil. A panicking callback is recovered,
// logged and counted in Stats; the monitor carries on.
//
//   - OnLinkState(LinkUpdate) reports a new interface, a change of its
//     state, MTU or type, and an interface that is gone (StateGone).
//   - OnAddrs(name, addrs) reports the full sorted set of an interface's
//     addresses, with their prefix lengths as netip.Prefix (use Addr() for
//     the bare IP), whenever it changes, and nil when the interface is gone.
//     Addresses of links that are down are reported too.
//   - OnRoute(RouteUpdate) reports new, changed and removed routes, of every
//     table and both families, when WatchRoutes is set.
//   - OnInSync is called once, after the first complete listing has been
//     reported. An agent wires it to dataplane.Loop.InterfacesInSync.
//
// Changes that arrive together (up to 1024 queued events) are applied
// together and reported once, as the state after all of them.
//
// # Up and down
//
// An interface is StateUp when it is administratively up (IFF_UP) and
// operational (IFF_RUNNING: operational state up, or unknown for devices
// without a carrier, such as lo), the same rule as the mtu package's. A
// link that is set up but has no carrier (a veth whose peer is down) is
// StateDown.
//
// With FlapDampingWindow set, a change from up to down is held back for the
// window: if the interface comes back up within it, neither change is
// reported; if it stays down, the down report is made when the window ends
// (on the injected clock). Reports of interfaces that appear, come up,
// change MTU or disappear are never delayed.
//
// # Names
//
// Include and Exclude filter interfaces by name (regular expressions). The
// consumer may key interfaces by name: the monitor never reports two
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
// The subscriptions come from nlutil.Watcher: a large receive buffer, and
// after an overflow (ENOBUFS), a closed socket or any subscription error,
// a renewed subscription and a Resync notice. On every Resync, and every
// ResyncInterval (default 90 s), the monitor lists the kernel again and
// compares the listing with what it has reported, so it reports exactly the
// differences: after recovery the consumer's view equals the kernel's, with
// nothing lost. Events that arrive after a listing but are older than it
// are applied too; they may briefly show a past state, which the events
// that follow them correct, and they never make two interfaces share a
// name.
//
// An overflow storm (tens of thousands of changes at once) costs bounded
// work: a subscription that keeps dying is renewed after a short backoff
// (at most a second), and a re-list starts no sooner than twice the
// previous one's duration (at most a second) after it ended, so re-listing
// takes about a third of the monitor's time at most; the view converges
// shortly after the storm.
// A dump the kernel keeps interrupting is retried after 100 ms; other dump
// failures back off up to 5 s. Stats counts overflows, losses, re-lists
// and failures; Snapshot returns a copy of the reported view.
//
// Routes are keyed by RouteKey (table, destination, metric, TOS, output
// interface). IPv4 routes that the kernel drops without a notification (when
// their interface goes down or away) are found by a route re-list that
// such link changes trigger. Routes appended with NLM_F_APPEND that differ
// only in their gateway are collapsed into one.
//
// # Testing without root
//
// Options.Source replaces the kernel with any Source: a stream of netlink
// messages (Event) and listings. Package ifacemonitorfake has one, an
// in-memory kernel whose events and listings stay consistent as the
// kernel's do, with the kernel's side effects (IPv6 addresses and routes
// going away with a link that goes down, IPv4 routes vanishing silently),
// Overflow to drop pending events as ENOBUFS does, and FailNextList for
// failed dumps. A downstream agent sets it as Options.Source, with a
// clock.Fake as Options.Clock, and tests how its callbacks react to links
// and addresses coming and going:
//
//	k := ifacemonitorfake.New()
//	_, _ = k.AddLink("eth0", "veth", 1500)
//	_ = k.SetUp("eth0")
//	m, _ := ifacemonitor.New(ifacemonitor.Options{Source: k, Clock: fakeClock, OnLinkState: agent.OnLink})
//	_ = m.Start(ctx) // agent.OnLink sees eth0 up
//	_ = k.SetDown("eth0") // then eth0 down
//
// # What it never touches
//
// The monitor owns no kernel object. It only reads: dumps through the caller's handle and multicast
// subscriptions in the caller's namespace. It never changes a link, an
// address or a route, never closes the handle or the namespace descriptor,
// and never falls back to the process's namespace (with Options.Source it
// touches no kernel state at all). New does no I/O and
// starts no goroutines; Start's goroutines stop with its context, and Done
// is closed once they all have. The package is Linux-only.
package ifacemonitor
