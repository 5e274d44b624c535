// Package masquerade is the node manager for outgoing NAT of pod traffic:
// traffic from a pool that masquerades to anything outside every pool
// leaves the node with the address of the interface it leaves by, while
// traffic between pools keeps its pod addresses.
//
// # What it owns
//
// Through the drivers it is given, one Manager per IP family declares:
//
//   - two ip sets (hash:net) in its Sets driver: every pool (AllPoolsSet,
//     "all-pools" by default) and the pools that masquerade
//     (MasqPoolsSet, "masq-pools"); a pool of every address (a /0, which
//     a hash:net set cannot hold) is its two halves there;
//   - one chain in its nat Table, Options.Chain, holding one rule:
//     from a masquerading pool, to a destination in no pool, MASQUERADE
//     with --random-fully (Options.NoRandomFully leaves it out for old
//     kernels and iptables);
//   - the jump to that chain from POSTROUTING, placed by Options.Jump (a
//     netfilter.JumpPlacement): at its top (netfilter.JumpInsert, the
//     default), at its bottom (netfilter.JumpAppend) or nowhere
//     (netfilter.JumpNone, for an agent that jumps from chains of its own).
//
// # How it is used
//
// Build the family's drivers, the Manager on them, and register all three
// with the loop; then send the pools as messages:
//
//	sets, _ := ipsets.New(ipsets.Options{Family: ipfamily.IPv4, Prefix: "np4-", Kernel: ns})
//	nat, _ := iptables.New(iptables.Options{Table: "nat", Family: ipfamily.IPv4,
//		Backend: iptables.BackendNFT, ChainPrefix: "npm-", Kernel: ns})
//	m, _ := masquerade.New(masquerade.Options{Family: ipfamily.IPv4, Sets: sets, Table: nat, Chain: "npm-masq"})
//	_ = loop.AddManager(m)
//	_ = loop.AddDriver(sets)
//	_ = loop.AddDriver(nat)
//	_ = loop.Send(ctx, cluster.Pool{ID: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true})
//
// Both families' managers can be given every message: each takes the pools
// of its own family. Messages are the cluster vocabulary's cluster.Pool
// (declare or change a pool, by ID) and cluster.PoolRemove. A malformed one
// (no ID, a CIDR with host bits set) changes nothing and is reported once,
// by the next CompleteDeferredWork, with an error wrapping ErrInvalidPool
// and cluster.ErrInvalid; cluster.Pool.Validate checks a message before it
// is sent.
//
// The Manager takes a netfilter.Table, not a backend: it works on the
// iptables writer (legacy or nft) and on any other writer of the rule model.
// Its rule matches its sets by name, so Sets must hold the sets that Table's
// rules match: the kernel's ip sets (an *ipsets.IPSets) for iptables; for a
// native nftables Table, whose rules match the sets of its own nftables
// table, an *nftables.IPSets made on that same Table, which writes the sets
// in the Table's transaction:
//
//	nat, _ := nftables.New(nftables.Options{Name: "npm-nat", Family: ipfamily.IPv4, Role: nftables.NAT,
//		ChainPrefix: "npm-", Kernel: ns})
//	sets, _ := nftables.NewIPSets(nat, nftables.IPSetsOptions{})
//	m, _ := masquerade.New(masquerade.Options{Family: ipfamily.IPv4, Sets: sets, Table: nat, Chain: "npm-masq"})
//
// and register the Manager, sets and nat with the loop as above.
// The jump is declared as the rules of owner Options.Chain, so managers
// that share the Table (floatingips, serviceloop) keep each other's jumps;
// two Tables that both insert at the top of POSTROUTING keep moving in front
// of each other, so give at most one of them netfilter.JumpInsert.
//
// CompleteDeferredWork only declares desired state on the drivers: the loop
// applies them (sets before the rule that uses them) and they write only
// the difference. The Manager does no I/O of its own and is never a
// dataplane.Resyncer: an inactive loop runs it and writes nothing.
//
// # What it never touches
//
// Anything but what it declares on its drivers; the drivers' ownership
// rules (set prefix, chain prefix and hash comments) keep everything else
// out of reach. It starts no goroutine.
package masquerade
