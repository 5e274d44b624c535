// Package vxlan is a node agent's VXLAN overlay: given the other nodes'
// tunnel endpoints (VTEPs) and pod blocks, pods on different nodes reach each
// other through one VXLAN device per IP family, and optionally directly
// when they share an underlay subnet (cross-subnet mode) or only directly
// (Never: a flat network).
//
// # What it owns
//
// A Driver owns, in one network namespace, the link named by its device
// name (np-vxlan and np-vxlan6 by default), the addresses of its family on
// it (link-local ones aside), and every permanent neighbour and FDB entry
// on it. It creates the device (VNI 4096 and UDP port 4789 by default,
// learning off, parent found from the local underlay address), keeps it in
// sync — the MTU, MAC, tunnel address and up state are changed in place;
// only what the kernel will not change in place in this package's kernel
// interface (VNI, port, parent, local address) re-creates it — and deletes
// it when nothing is declared (a Manager that is Disabled or in Never
// mode). A link of the device's name but of another kind is not the device:
// it is never deleted, and the device fails with an error that names it.
// The kernel gives a VNI and UDP port (per family) to one VXLAN device of
// the namespace: while another device holds them, the device fails with an
// error (wrapping ErrDevice and kernel.ErrExists) that names that device. Per remote VTEP it keeps a permanent neighbour entry (tunnel
// address → MAC) and an FDB entry (MAC → underlay address), diffed against
// what the kernel holds and written in one batch per kind
// (kernel.Neighbors.ApplyNeighbors, kernel.FDB.ApplyFDB), never one round
// trip per entry.
//
// A Manager owns nothing in the kernel itself: it declares the device and
// the remote VTEPs on its Driver, the routes of the blocks on a
// routetable.Table (remote blocks via the owner's tunnel address, onlink,
// on the device, with the device's MTU; same-subnet blocks via the owner's
// underlay address on the interface of that subnet; blackholes for this
// node's own blocks, so that unallocated pod addresses are dropped instead
// of looping — unless Options.NoBlackholes, or a connected subnet of a host
// interface holds the block, as a bridge CNI's bridge does: the block then
// gets none and the conflict is warned about once and counted in
// Stats.BlackholeConflicts), and one hash:net set of every node's underlay address plus
// Options.ExtraCIDRs on a netfilter.Sets, for rules that accept VXLAN only
// from known nodes.
//
// # How it is used
//
// One Manager per family, registered with the agent's dataplane.Loop with
// its Driver, beside the route Table and the set driver it declares on:
//
//	ns, _ := kernel.OpenCurrent()
//	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: vxlan.IPv4, Table: kernel.TableMain})
//	sets, _ := ipsets.New(ipsets.Options{Family: vxlan.IPv4, Prefix: "np4-", Kernel: ns})
//	m, _ := vxlan.New(vxlan.Options{Family: vxlan.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl, Sets: sets,
//		Mode: vxlan.CrossSubnet})
//	loop.AddManager(m)
//	loop.AddDriver(m.Driver()) // PhaseTunnelL2: before the routes through the device
//	loop.AddDriver(tbl)
//	loop.AddDriver(sets)
//	loop.Send(ctx, cluster.Node{Name: "node-b", UnderlayV4: …, TunnelV4: …, VXLANMACV4: …})
//	loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node-b"})
//
// Messages are cluster.Node and cluster.NodeRemove (a node's underlay
// address, tunnel address and VXLAN MAC of the family), cluster.Block and
// cluster.BlockRemove (pod blocks; a block of this node is local and gets
// a blackhole), and
// mtu.Result from an mtu.Monitor: the device MTU is the host MTU less the
// VXLAN overhead (50, 70 over IPv6), applied to the device and its routes
// live. Every message carries both families; each Manager takes its own.
// Whether a node shares a subnet with this one is computed, not supplied:
// from its underlay address and the prefixes of this host's interfaces,
// which the Manager reads (at the first pass, after OnLinkUpdate or OnAddrs
// reports a relevant change — wire ifacemonitor's callbacks to them — and at
// every resync). A node moving between subnets switches its routes in
// place, one replace each.
//
// OnUpdate records intent only, with no I/O; an invalid message (see each
// type's Validate) is rejected, counted in Stats and changes nothing.
// CompleteDeferredWork declares only what changed, so adding one node costs
// the same at ten thousand nodes as at ten. The Driver reads the kernel on
// its first Apply and after QueueResync (the loop's periodic resync),
// repairing entries deleted behind its back; OnLinkUpdate makes it check
// the device at once when the device is reported gone or down. One entry
// the kernel refuses never holds back the others: it is retried on its own
// backoff (dataplane.Retry) and reported in a dataplane.PartialError. A
// restarted agent adopts what it finds and writes nothing when nothing
// changed.
//
// # What it never touches
//
// Links other than its device, entries on other links, neighbour entries
// that are not permanent on its device (the kernel's own resolution
// attempts), routes other than through the Table it was given, sets other
// than the one named. New and NewDriver do no I/O and start no goroutines;
// the package starts none at all.
package vxlan
