// Package policy is network policy on the netfilter rule model: policies
// and profiles rendered into chains shared by the endpoints that use them,
// per-workload chains in tier order, and dispatch by interface that denies
// unknown workload interfaces, so that a new pod is isolated from its
// first packet (fail closed). One Manager per IP family renders onto any
// netfilter.Table — package iptables (legacy or nft) or package nftables —
// and the same packet gets the same verdict on each.
//
// # The model
//
// A Policy is an ordered list of ingress and egress Rules, each with an
// Action (Allow, Deny, Pass to the next tier, or Log and go on) and
// matches on protocol, ICMP type, source and destination networks,
// address sets, ports and port ranges (any number), named ports
// (address·protocol·port sets) and the negation of each. A Profile is an
// endpoint's fallback. A Workload lists its tiers in order, each with the
// policies that apply to it per direction and what a packet no policy
// decided meets at the tier's end (Deny, or Pass), then its profiles. An
// endpoint with no policy and no profile is denied.
//
// Sets are given resolved: SetUpdate with the members, SetDelta with the
// changes. The messages (PolicyUpdate, SetDelta, WorkloadUpdate …) are
// checked as they arrive: a Model holds what they left, and one bad
// message is refused alone, reported once by the next
// CompleteDeferredWork. Model.Explain says, from the model alone, which
// tier, policy and rule decide a packet at an endpoint: the answer to
// "why was this dropped" without reading chains. Manager.Counters reads,
// on nftables, how many packets and bytes each rule's action was taken
// for.
//
// # What it owns
//
// In its Filter table, under Options.ChainPrefix:
//
//   - "forward" and "input", jumped to from the top of FORWARD and INPUT
//     (rules of owner Options.Name, beside other managers' at the same
//     hooks): packets from and to interfaces with a WorkloadPrefixes
//     prefix go through the dispatch chains; the forward chain accepts
//     what the endpoint chains allowed;
//   - "fwd" and "twd", the dispatch by input and output interface, ending
//     in deny: a tree of chains (a chain per group of names beyond 16), or
//     on nftables with Options.Dispatch DispatchVerdictMap one lookup in
//     the verdict maps "fwd-map" and "twd-map" keyed by interface name;
//   - per workload "fw-<iface>" (egress) and "tw-<iface>" (ingress):
//     established and related flows accepted first, conntrack-invalid
//     denied (Options.AllowInvalid), ICMPv6 neighbour discovery allowed,
//     then each tier's policies, the profiles, and deny;
//   - "output", jumped to from OUTPUT, and for host endpoints the
//     dispatch trees "thd", "fhd" (traffic to and from the host) and
//     "thfwd", "fhfwd" (forwarded traffic), which fall through to the
//     wildcard host endpoint ("*") or return when there is none; per host
//     endpoint "th-", "fh-", "thfw-" and "fhfw-<iface>". Traffic to and
//     from the host starts with the failsafe chains ("failsafe-in",
//     "failsafe-out": Options.Failsafes, Felix's ports by default), which
//     no policy can close; like a workload, a host endpoint with no
//     policy and no profile for a direction denies it. Forwarded traffic
//     meets, in turn, the ForwardTiers ingress of the host endpoint it
//     came in through ("hep-fw-in"), the policy of the workloads it leaves
//     or reaches, and the ForwardTiers egress of the host endpoint it
//     leaves through ("hep-fw-out"); a host endpoint's forwarded stage
//     allows what no tier denied. Traffic to and from the host through a
//     workload interface or loopback never meets host endpoints, and the
//     host always reaches its own workloads; a workload's traffic to the
//     host meets the workload's egress policy, then EndpointToHost
//     (Options.WorkloadsReachHost skips the policy, as Kubernetes exempts
//     a pod's traffic to its node);
//   - per policy "pi-<id>" and "po-<id>", per profile "pri-<id>" and
//     "pro-<id>" (an ID that does not fit a chain name is hashed), shared by
//     every endpoint that uses them: Allow sets the accept mark and
//     returns, Pass the pass mark; a rule whose matches need OR or
//     negation is a block on the scratch mark.
//
// In its Sets driver, a set per SetUpdate (hash:net or hash:ip,port), named
// by the set's ID, or a hash of it when the driver refuses the ID. A rule
// that names a set not given yet matches as if the set were empty. A rule
// that names a set the driver refused (reported by CompleteDeferredWork),
// or a set of the wrong kind (addresses as NamedPorts, named ports as
// Sets), matches no packet, whether it names the set as an alternative
// (Sets, NamedPorts) or as an exception (NotSets, NotNamedPorts): a bad
// exception never widens an Allow, and both backends give the same
// verdict. Model.Explain judges by the same rules (a refused set once the
// Manager has declared it).
//
// # How it is used
//
//	layout, _ := markbits.NewLayout(markbits.LayoutOptions{})
//	filter, _ := iptables.New(iptables.Options{Table: "filter", Family: ipfamily.IPv4,
//		Backend: iptables.BackendNFT, ChainPrefix: "np-", Kernel: ns})
//	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
//	m, _ := policy.New(policy.Options{Family: ipfamily.IPv4, Filter: filter, Sets: sets,
//		Marks: layout, ChainPrefix: "np-", WorkloadPrefixes: []string{"npv"}})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(sets)
//	_ = loop.AddDriver(filter)
//
// On nftables, Filter is an *nftables.Table of the filter role and Sets an
// *nftables.IPSets made on it. A change costs what it changes: a policy
// updated re-renders its two chains, a workload its chains and the
// dispatch trees, a set member one element; the writers then write only
// the rules that differ.
//
// # What it never touches
//
// Routes, sysctls and interfaces (package endpoints), other managers'
// chains and hook rules, foreign rules, and conntrack: a flow established
// before a deny keeps going.
//
// # Untracked host policy
//
// With Options.Raw, host endpoints' UntrackedTiers are rendered in the raw
// table, before connection tracking ("raw-pre" and "raw-out", jumped to
// from PREROUTING and OUTPUT; dispatch "thud" and "fhud"; per endpoint
// "thu-" and "fhu-<iface>"; the raw failsafe chains, which also let the
// replies of the other direction's failsafe flows through): a packet such
// a policy allows is left untracked and accepted, in the raw table and
// again by the filter chains; one it denies is dropped; one it does not
// decide goes on to conntrack and the tracked policy. It is the host's
// own traffic's: a packet that arrives for an address that is not the
// host's (forwarded) returns from "raw-pre" before the dispatch, tracked.
// Untracked flows need their replies allowed too (an egress rule by
// source port). Only the policies the untracked tiers list are copied
// into Raw; one the table refuses (on nftables, a rule naming a set: the
// sets live in the filter table) drops every packet it sees (fail closed).
//
// # Pre-DNAT host policy
//
// With Options.Mangle, host endpoints' PreDNATTiers (ingress policies
// only) are rendered in the mangle table's PREROUTING, before destination
// NAT, so that they judge the address and port a client asked for — a
// node port, an external IP — not the backend it is sent to ("mangle-pre",
// which accepts established flows first and skips loopback and workload
// interfaces; dispatch "thpd"; per endpoint "thp-<iface>", after the
// failsafe chain "mangle-failsafe-in"). A packet such a policy allows is
// accepted past the endpoint's forwarded ingress (its ForwardTiers
// ingress); the workloads' policy and the forwarded egress still apply,
// and a packet to the host still meets the endpoint's Tiers. One it
// denies is dropped; one it does not decide goes on (pre-DNAT tiers have
// no end-of-tier deny). Only the policies the pre-DNAT tiers list are
// copied into Mangle.
package policy
