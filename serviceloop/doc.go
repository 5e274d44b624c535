// Package serviceloop is the node manager that stops traffic to service
// ranges from looping: a packet to a service IP that no service proxy
// translated (an IP no service holds, a proxy not yet in sync) would follow
// the default route out of the node, and often straight back in, until its
// TTL runs out. The Manager drops (or rejects) such packets when they reach
// the forward path.
//
// # What it owns
//
// Through the netfilter.Table it is given (the family's filter table), one
// Manager per IP family declares one chain, Options.Chain, with one rule per
// service range: to that range, Drop (or Reject, ICMP administratively
// prohibited). Before them, for each of Options.RejectMarks, the rules
// that answer a packet a service proxy marked because its service has no
// ready backend, as kube-proxy does: TCP with a reset, others with ICMP
// port unreachable. It jumps to the chain from FORWARD, where Options.Jump (a
// netfilter.JumpPlacement) says: at its top (netfilter.JumpInsert, the
// default), at its bottom (netfilter.JumpAppend) or nowhere
// (netfilter.JumpNone, for an agent that jumps from chains of its own).
//
// Traffic a proxy handled is not touched: kube-proxy and its like translate
// the destination before routing (nat PREROUTING and OUTPUT), so by the
// time a handled packet reaches FORWARD its destination is a pod, not a
// service IP. Only what nothing translated still has a service destination
// there. Traffic the node itself sends to a service range (OUTPUT) and
// traffic proxies deliver locally (IPVS) do not pass FORWARD and are left
// alone.
//
// # How it is used
//
//	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4,
//		Backend: iptables.BackendNFT, ChainPrefix: "nps-", Kernel: ns})
//	m, _ := serviceloop.New(serviceloop.Options{Family: ipfamily.IPv4, Table: filter, Chain: "nps-svc-loop"})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(filter)
//	_ = loop.Send(ctx, serviceloop.ServiceCIDRs{CIDRs: []netip.Prefix{
//		netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/112")}})
//
// ServiceCIDRs carries the full set of ranges, both families; each message
// replaces the one before, and each Manager takes its own family's. A
// malformed message (a prefix with host bits set, a /0, IPv4 as IPv6)
// changes nothing and is reported once, by the next CompleteDeferredWork,
// with an error wrapping ErrInvalidCIDR; ServiceCIDRs.Validate checks a
// message before it is sent.
//
// The Manager takes a netfilter.Table, not a backend: it works on the
// iptables writer (legacy or nft) and on any other writer of the rule
// model. CompleteDeferredWork only declares desired state; the loop applies
// the Table, which writes only the difference. The Manager does no I/O of
// its own and is never a dataplane.Resyncer: an inactive loop runs it and
// writes nothing.
//
// # What it never touches
//
// Anything but its chain and its jump in the Table it is given, whose
// ownership rules (chain prefix, hash comments) keep every foreign rule and
// chain out of reach. It starts no goroutine.
package serviceloop
