// Package floatingips is the node manager for floating IPs: an address the
// world uses for one endpoint (a pod), translated one to one to the
// endpoint's own address and back.
//
// # What it owns
//
// Through the netfilter.Table it is given (the family's nat table), one
// Manager per IP family declares two chains (see Manager.Chains):
//
//   - Options.DNATChain, jumped to from PREROUTING and OUTPUT: packets to a
//     floating IP have their destination translated to the endpoint's
//     address, so other hosts and this host reach the endpoint. Connection
//     tracking translates the replies back: they leave from the floating
//     IP.
//   - Options.SNATChain, jumped to from POSTROUTING: an endpoint that
//     reaches its own floating IP has its source translated to the floating
//     IP (it would otherwise get its own packet from its own address and
//     drop it); with Options.OutboundSNAT, every connection the endpoint
//     opens leaves from its floating IP (a full 1:1 NAT), except towards
//     Options.NoSNATSet (the pod pools, say).
//
// Options.Jump (a netfilter.JumpPlacement) puts the jumps at the top of
// the hooks (netfilter.JumpInsert, the default), at their bottom
// (netfilter.JumpAppend), or nowhere (netfilter.JumpNone, for an agent that
// jumps from chains of its own). Put the SNAT chain before any masquerade
// rule of the same hook, so a pod with a floating IP leaves from it.
//
// # How it is used
//
//	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4,
//		Backend: iptables.BackendNFT, ChainPrefix: "npf-", Kernel: ns})
//	m, _ := floatingips.New(floatingips.Options{Family: ipfamily.IPv4, Table: nat,
//		DNATChain: "npf-dnat", SNATChain: "npf-snat", OutboundSNAT: true})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(nat)
//	_ = loop.Send(ctx, cluster.Endpoint{ID: "default/web-0", Iface: "veth1234",
//		Addrs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/32")},
//		FloatingIPs: []cluster.NAT{{Floating: netip.MustParseAddr("198.51.100.10"),
//			Internal: netip.MustParseAddr("10.244.1.5")}}})
//
// Messages are the cluster vocabulary's: a cluster.Endpoint replaces the
// endpoint's floating IPs (its FloatingIPs, both families; each Manager
// takes its own, and nothing else of the endpoint) and a
// cluster.EndpointRemove withdraws them. The same messages go to the
// endpoint manager (package endpoints), which takes the interface and
// addresses. A malformed message (no ID, no interface, addresses of two
// families, an internal address that is none of the endpoint's) changes
// nothing and is reported once, by the next CompleteDeferredWork, with an
// error wrapping ErrInvalidEndpoint and cluster.ErrInvalid;
// cluster.Endpoint.Validate checks a message before it is sent. A floating
// IP or an internal address claimed twice goes to the first endpoint by ID;
// the other NAT is left out and reported (ErrConflict) until the conflict
// is gone. So is a floating IP that is an endpoint's own address (in its
// Addrs): its translation would take that endpoint's connections.
//
// The Manager takes a netfilter.Table, not a backend: it works on the
// iptables writer (legacy or nft) and on any other writer of the rule
// model. It does not route the floating IPs to the node (that is the
// network's, or a route's, business) and does not assign them to any
// interface. The node routes its own connections before OUTPUT translates
// them, so it reaches a floating IP only with a route towards it (its
// default route will do). CompleteDeferredWork only declares desired state; the loop
// applies the Table, which writes only the difference. The Manager does no
// I/O of its own and is never a dataplane.Resyncer: an inactive loop runs
// it and writes nothing.
//
// # What it never touches
//
// Anything but its two chains and their jumps in the Table it is given,
// whose ownership rules (chain prefix, hash comments) keep every foreign
// rule out of reach. It starts no goroutine.
package floatingips
