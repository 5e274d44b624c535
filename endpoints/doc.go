// Package endpoints is the node manager for local workload endpoints: the
// host side of each pod's interface, its routes, its static neighbours and
// its per-interface sysctls, kept right as interfaces come, go, flap and
// are re-created, with a status per endpoint.
//
// # What it owns
//
// For each endpoint of its IP family (a cluster.Endpoint: an ID, the
// host-side interface's name, the pod's addresses and MAC), one Manager:
//
//   - declares, on the route table it is given, a route to each address
//     through the interface (scope link), in its RouteClass, and with
//     Options.StaticNeighbors a permanent neighbour entry for each host
//     address (ARP or NDP), so the host never resolves the pod. The table
//     holds the routes while the interface is missing or down and writes
//     them when it comes (back) up;
//   - hands the interface's sysctls (DefaultSysctls: forwarding, strict
//     rp_filter, proxy_arp and proxy_delay for IPv4; forwarding, proxy_ndp
//     and accept_ra off for IPv6) to the sysctls.Driver it is given, as
//     one group per interface (sysctls.Driver.SetGroup), when the
//     interface appears, comes up, or is re-created (a new index has the
//     kernel's defaults again: RecheckGroup), and withdraws them when it
//     goes. The Driver reads each and writes only what differs, and the
//     loop's resync and retry cover them as any driver's;
//   - reports a Status per endpoint through Options.OnStatus whenever it
//     changes: StateProgrammed (interface up, sysctls set, routes written),
//     StateInterfaceMissing, StateInterfaceDown (routes held), or
//     StateError with the cause (an invalid endpoint, a sysctl or a route
//     the kernel refused; the drivers retry both on their own backoff).
//     The Manager learns the sysctls' outcome from the Driver
//     (sysctls.Driver.Watch).
//
// # How it is used
//
// Build the node's sysctls.Driver (one serves both families' Managers and
// the node's own settings, such as sysctls.Defaults), the family's route
// table, the Manager on them, and register the Manager, its RouteDriver
// (not the table: RouteDriver applies the table and tells the Manager what
// was written) and the sysctls.Driver. Wire the interface monitor to the
// loop once: the Manager is a dataplane.InterfaceObserver, so the loop
// hands it every link update, and the Manager passes them on to the table,
// which needs no wiring of its own (wiring it too is harmless):
//
//	sys, _ := sysctls.New(sysctls.Options{Kernel: ns, Host: sysctls.ProcSys{}, Settings: sysctls.Defaults(ipfamily.IPv4)})
//	routes, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4,
//		Table: kernel.TableMain, InterfacePatterns: []string{`^cali`}})
//	m, _ := endpoints.New(endpoints.Options{Family: ipfamily.IPv4, Kernel: ns, Routes: routes,
//		SysctlDriver: sys, StaticNeighbors: true, OnStatus: report})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(m.RouteDriver())
//	_ = loop.AddDriver(sys)
//	mon, _ := ifacemonitor.New(ifacemonitor.Options{Kernel: ns,
//		OnLinkState: func(u ifacemonitor.LinkUpdate) { loop.OnLink(u.Link(), u.State) },
//		OnAddrs:     loop.OnAddrs,
//		OnInSync:    loop.InterfacesInSync})
//	_ = loop.Send(ctx, cluster.Endpoint{ID: "default/web-0", Iface: "cali1234",
//		Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")}, MAC: podMAC})
//
// Messages are the cluster vocabulary's cluster.Endpoint (declare or
// change an endpoint, by ID; its floating IPs are the floatingips
// manager's) and cluster.EndpointRemove. Both families' managers can be
// given every message; each takes its own family's addresses, and an
// endpoint with none of them is not its. A malformed endpoint (no ID, an
// interface name the kernel refuses, an address with host bits set, a bad
// MAC or floating IP) changes nothing: its status is StateError and the
// next CompleteDeferredWork reports it once, wrapping ErrInvalidEndpoint
// and cluster.ErrInvalid. cluster.Endpoint.Validate checks a message before
// it is sent.
//
// OnUpdate and OnLink do no I/O. CompleteDeferredWork lists the interfaces
// on its first call and after QueueResync (the Manager is a
// dataplane.Resyncer), and declares routes and sysctls on the drivers,
// which write them; an inactive loop applies no driver, so a standby agent
// writes nothing.
//
// # What it never touches
//
// Interfaces themselves (it never creates, deletes, renames or sets one
// up), their addresses, sysctls other than Options.Sysctls of the
// endpoints' interfaces, and routes other than its own class's in its
// table, whose ownership rules (route protocol, interface patterns) keep
// everything else out of reach. A removed endpoint's routes and neighbours
// go; its interface's sysctls stay, as the interface usually goes with the
// pod. It starts no goroutine.
package endpoints
