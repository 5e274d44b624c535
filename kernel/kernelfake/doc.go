// Package kernelfake is nodeplane's one fake kernel: a Namespace is an
// in-memory network namespace that implements kernel.Kernel with the
// kernel's semantics, for unit tests of drivers, monitors and agents, in
// this repository and in its users'. It needs no root, no namespace and
// no particular OS.
//
// # What it models
//
// A New namespace is what `ip netns add` and `ip link set lo up` leave:
// lo (index 1, up, running, MTU 65536) with 127.0.0.1/8 and ::1/128 and
// their routes, the default rules, the sysctls of a fresh namespace, the
// iptables and ipset fakes behind Runner (IPTables, IPSets) and an
// nf_tables behind OpenNFTablesSocket (NFTables, the kernel.NFTables
// capability). TestKernelFakeMatchesKernel
// runs the same scripts on a Namespace and on a real namespace and
// compares what they report.
//
//   - Links. Indexes increase and are never reused; a veth's peer is
//     created first, in this namespace or in another one of the same
//     machine (NewNamespace, FD). Names are checked as the kernel does; a
//     taken one wraps kernel.ErrExists. Kinds outside Options.Kinds (by
//     default ipip and wireguard, whose modules this project's machines
//     lack) wrap kernel.ErrNotSupported. A VXLAN device runs as soon as
//     it is up; a veth while both ends are up; a bridge (which has no
//     ports here) runs when up if it chose its own MAC, but never once it
//     was given one (at creation or with SetLinkMAC), since the kernel
//     recomputes an empty bridge's carrier only then; a tun device
//     (AddTUN) runs once SetCarrier gives it a carrier. A VXLAN device
//     takes its parent's MTU less 50 (70 with an IPv6 local address),
//     clamps a larger one at creation, refuses it later, and goes with its
//     parent. Deleting a link deletes its veth peer, its addresses,
//     routes, neighbours, FDB entries and per-interface sysctls.
//   - Addresses and the routes the kernel adds for them. IPv4: a local
//     route in table local at once (source: the subnet's primary address);
//     while the link is up, for each primary address, the prefix route in
//     main (scope link, protocol kernel) and the subnet's broadcast route
//     (prefixes shorter than /31). A second address of a subnet is a
//     secondary; deleting the primary deletes its secondaries unless
//     promote_secondaries is set. IPv6: the prefix route (metric 256)
//     while the link is up, and the local route in table local once
//     duplicate address detection has run, which the fake does at once
//     when the link is ready (running since it came up) or when
//     accept_dad is below 1. A link that becomes ready gets the
//     ff00::/8 multicast route in table local and, with addr_gen_mode 0,
//     its EUI-64 link-local address with the fe80::/64 route. With IPv6
//     forwarding on, each address's subnet-router anycast address gets an
//     anycast route in table local.
//   - Link state. Down: IPv4 addresses stay with their local routes, the
//     other IPv4 routes through the link go (a multipath route keeps a
//     dead next hop until every one is dead); IPv6 drops every route
//     through the link and its addresses, unless keep_addr_on_down keeps
//     the global ones (which get their routes back when it comes up);
//     neighbours and non-permanent FDB entries go. Losing its last IPv4
//     address does to the link's IPv4 routes what going down does, host
//     scope included. A dead next hop revives when its link comes up or
//     gets an address (IPv4), or is ready again (IPv6). Without carrier: the
//     routes through the link are flagged linkdown but stay, writes
//     through it still work, and non-permanent neighbours go. Deleted:
//     an IPv4 multipath route through it goes whole, an IPv6 one loses
//     that next hop.
//   - Routes are stored as the kernel stores them (table 0 is main; IPv6:
//     metric 0 is 1024, scope universe, protocol 0 is boot, a
//     blackhole-like route sits on lo; a single next hop is a plain
//     route; state flags are dropped) and keyed by table, destination,
//     TOS and metric: OpAdd of a taken key fails with EEXIST, OpReplace
//     replaces the first route of the key. Routes of one key made by the
//     kernel (fe80::/64 on each link) coexist. Writes are validated with
//     kernel.Route.Validate (errors wrap kernel.ErrInvalid), then refused
//     with the kernel's errno inside a *kernel.OpError: ENODEV for a
//     missing link, ENETDOWN for a down one, ENETUNREACH (IPv4) or
//     EHOSTUNREACH (IPv6) for a gateway on no connected route unless
//     onlink (looked up in the route's table, then through the rules, so
//     a blackhole rule makes it EINVAL), EINVAL for a bad scope, a local
//     gateway or a preferred source that is not a local address. OpDelete
//     deletes the first route whose fields match those the request sets
//     (an IPv6 gateway deletes that next hop alone) or fails with ESRCH.
//   - Rules (fib.go, over the rule semantics in internal/fib that the
//     routerule driver shares): one ordered list per family, the kernel's defaults
//     at creation, adds after the rules of the same priority (priority 0:
//     the kernel's choice), EEXIST and delete matching as the kernel
//     compares, and the lookup walk that gateway checks use.
//   - Neighbours and FDB entries, written in batches with one error per
//     operation (ENODEV, EEXIST, ENOENT), listed by family and interface.
//   - Sysctls: the net.* keys of a fresh namespace on this project's
//     machines (sysctl_defaults.txt), with per-interface keys that appear
//     and go with their link (copied from default); integer keys take
//     integers; IPv4 and IPv6 forwarding propagate as in the kernel.
//   - Conntrack: entries added with AddFlow, deleted by address.
//   - WireGuard (the kernel.WireGuard capability, wireguard.go), when
//     Options.Kinds has kernel.KindWireGuard (else every call wraps
//     kernel.ErrNotSupported, as on a kernel without the module): a
//     device's configuration lives with its link of that kind and goes
//     with it; ConfigureWireGuard has WireGuard's semantics (unset fields
//     stay, ReplacePeers, Remove, UpdateOnly, ReplaceAllowedIPs, an
//     allowed IP given to one peer leaves any other, the public key
//     derived from the private one); SetWireGuardPeerStats sets a peer's
//     handshake and counters, as traffic would.
//   - Events: Subscribe streams a Resync, then every change in order,
//     announcing what the kernel announces (not the IPv4 routes that go
//     with a link going down); Overflow drops what is queued and sends a
//     Resync wrapping kernel.ErrOverflow; Fail(OpSubscribe, …) starts the
//     stream with an Err event, a failed attempt that was retried.
//   - Commands: Runner serves iptables*/ip6tables* from IPTables and ipset
//     from IPSets; any other binary is missing. A rule that matches an ip
//     set is refused, as iptables refuses it, unless IPSets has the set,
//     of the rule's family or of none.
//
// # What it does not model
//
// Bridge ports and masters, links moving between namespaces, renames,
// timers (DAD delays, neighbour aging, route expiry), kernel-made
// neighbour and FDB entries, IPv6 being disabled below MTU 1280 or by
// disable_ipv6 on a link that is already up, link-local address modes
// other than EUI-64 and none, IPv6 addresses on lo other than ::1 getting
// a prefix route, explicit IPv4 broadcast addresses, route caches,
// packet-level lookups (only a gateway check's lookup is modelled: no
// source, no mark, from lo), interface groups other than 0, the kernel's
// multicast neighbour entries, any sysctl outside net, and WireGuard's
// traffic, handshakes and port choice (a listen port of 0 stays 0). Nothing runs
// inside a fake namespace: Do (kernel.Doer) fails with ErrNoThread.
//
// # Failure injection and inspection
//
// One vocabulary for every method: an Op names a method of kernel.Kernel
// (OpApplyRoutes, OpAddLink, OpRules, OpSubscribe, OpConfigureWireGuard…). Fail(op, n, err)
// makes the next n calls fail (n < 0: until ClearFailures; the batched
// writes fail per operation); Fail with ErrInterrupted restarts a route dump
// halfway. Refuse installs a hook that refuses chosen objects on every
// write. Calls(op) counts calls, Writes counts the writes, ResetCounts
// starts over. Admin returns a view whose calls are neither counted nor
// failed, to change the namespace as an administrator or another agent
// would; SetCarrier, AddTUN and AddFlow do what only the outside world
// can. Link, LinkAddrs, Routes, Flows and Dump show the state without
// counting.
//
// The package owns nothing outside its values and touches no kernel
// state. A Namespace is safe for concurrent use; a subscription's
// goroutine ends with its context.
package kernelfake
