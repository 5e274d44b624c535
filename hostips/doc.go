// Package hostips is the node manager that keeps an ip set of the host's
// own addresses current: the set that rules match to tell traffic to (or
// from) this node apart, whatever its addresses are at the moment.
//
// # What it owns
//
// One hash:ip set (Options.SetName, "host-ips" by default) in the Sets
// driver it is given, one Manager per IP family. The set holds every
// address of the family on every interface the monitor reports, except
// those of excluded interfaces (Options.Exclude, such as a service proxy's
// dummy interface) and link-local ones (unless IncludeLinkLocal). An
// address on two interfaces is one member, kept until it is on none.
//
// # How it is used
//
// Wire ifacemonitor's OnAddrs to the loop, and the monitor's in-sync to the
// loop's, so the first pass sees every interface:
//
//	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
//	m, _ := hostips.New(hostips.Options{Family: ipfamily.IPv4, Sets: sets, Exclude: []string{`^kube-ipvs0$`}})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(sets)
//	mon, _ := ifacemonitor.New(ifacemonitor.Options{
//		Kernel: ns,
//		OnAddrs: func(name string, addrs []netip.Prefix) {
//			_ = loop.Send(ctx, hostips.InterfaceAddrs{Name: name, Addrs: addrs})
//		},
//		OnInSync: loop.InterfacesInSync,
//	})
//	go mon.Run(ctx)
//
// Each InterfaceAddrs replaces what was known of that interface (nil: it
// has no address, or is gone); both families' managers can be given every
// message. A malformed one (no name, an invalid address) changes nothing
// and is reported once, by the next CompleteDeferredWork, with an error
// wrapping ErrInvalidMessage.
//
// CompleteDeferredWork only declares the set on the driver; the loop
// applies it, and the driver writes only the members that changed. The
// Manager does no I/O of its own and is never a dataplane.Resyncer: an
// inactive loop runs it and writes nothing.
//
// # What it never touches
//
// Anything but its one set, through the Sets driver, whose prefix keeps
// every other set out of reach. It reads no interface itself: it knows
// only what it is sent. It starts no goroutine.
package hostips
