// Package overlay is a node agent's pod network across nodes: given every
// node's addresses (cluster.Node) and pod blocks (cluster.Block), pods on
// different nodes reach each other through a tunnel device of the
// encapsulation chosen (VXLAN or IPIP), directly when they share an
// underlay subnet (Options.CrossSubnet), or only directly, without
// encapsulation (None: a flat network).
//
// One Manager per family does it, whatever the encapsulation:
//
//	overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl, Sets: sets,
//		Encap: overlay.VXLAN{VNI: 4096, Port: 4789}, CrossSubnet: true})
//
// with Encap one of VXLAN{VNI, Port, Device}, IPIP{Device} (IPv4 only) or
// None{}. The Manager computes the routes and the node-address set and
// declares the device of its encapsulation on its Driver, which owns the
// device: a vxlan.Driver (with the permanent neighbour and FDB entry of
// every remote node) or an ipip.Driver; None has none. The Manager imports
// the drivers; they know nothing of it.
//
// # What it owns
//
// The Manager owns nothing in the kernel itself. It declares the routes of
// the blocks on the routetable.Table it is given (Options.Routes): a
// remote block through the device, onlink, via its node's tunnel address
// (VXLAN) or underlay address (IPIP), with the device's MTU; a block of a
// node on one of this host's subnets, with CrossSubnet or None, via the
// node's underlay address on that subnet's interface; a blackhole for each
// of this node's blocks, so that traffic to an unallocated pod address is
// dropped rather than sent back out — unless Options.NoBlackholes, or a
// connected subnet of a host interface holds the block, as a bridge CNI's
// bridge does (the block then gets none, and the conflict is warned about
// once and counted in Stats.BlackholeConflicts). A block, this node's or
// another's, that holds a node's underlay address, or overlaps a connected
// subnet of the host that holds one (a 0.0.0.0/0, say), gets no route
// either (routed through the tunnel, or blackholed, it would take the
// tunnel's own packets, or the underlay's, with it): warned about once and
// counted in Stats.UnderlayConflicts, it is routed once the conflict ends. It declares one hash:net
// set of every node's underlay address plus Options.ExtraCIDRs on the
// netfilter.Sets it is given, for rules that accept encapsulated traffic only
// from known nodes. Its Driver owns the device (see packages vxlan and
// ipip). While a link of another kind holds the device's name (someone
// else's veth called np-vxlan, say), the Driver leaves it alone and fails,
// and the Manager declares no route through the device: the remote blocks
// behind the tunnel wait rather than go out of that link unencapsulated.
//
// # How it is used
//
// Register the Manager with the agent's dataplane.Loop, with its Driver
// (when there is one), the route Table and the set driver:
//
//	m, _ := overlay.New(overlay.Options{…})
//	loop.AddManager(m) // also an InterfaceObserver: the loop hands it the interface updates
//	loop.AddDriver(m.Driver()) // PhaseTunnelL2: before the routes through the device; nil for None
//	loop.AddDriver(tbl)
//	loop.AddDriver(sets)
//	loop.Send(ctx, cluster.Node{Name: "node-b", UnderlayV4: …, TunnelV4: …, VXLANMACV4: …})
//	loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node-b"})
//
// Messages are cluster.Node and cluster.NodeRemove (a node's underlay
// address, and for VXLAN its tunnel address and VXLAN MAC, of the family;
// this node's configures the device), cluster.Block and
// cluster.BlockRemove, and mtu.Result from an mtu.Monitor: the device MTU
// is the host MTU less the encapsulation's overhead, applied to the device
// and its routes live. Every message carries both families; each Manager
// takes its own. Whether a node shares a subnet with this one is computed,
// not supplied: from its underlay address and the prefixes of this host's
// interfaces, which the Manager reads at the first pass, after the loop
// reports a relevant change (OnLink, OnAddrs: the Manager is a
// dataplane.InterfaceObserver, so wire the interface monitor to the loop),
// and at every resync of its Driver. A node moving between subnets
// switches its routes in place, one replace each.
//
// OnUpdate records intent only, with no I/O; an invalid message (see each
// type's Validate) is rejected, counted in Stats and changes nothing.
// CompleteDeferredWork declares only what changed, so adding one node
// costs the same at ten thousand nodes as at ten. A restarted agent adopts
// what it finds and writes nothing when nothing changed. A Disabled
// Manager only removes the device of its encapsulation (left by an earlier
// run).
//
// # What it never touches
//
// Routes other than through the Table it was given, sets other than the
// one named, and, through its Driver, links other than the device and
// entries other than the device's. New does no I/O and starts no
// goroutines; the package starts none at all.
package overlay
