// Package ipip is a node agent's IP-in-IP overlay (IPv4 only): given the
// other nodes' underlay addresses and pod blocks, pods on different nodes
// reach each other through one IPIP device, and optionally directly when
// they share an underlay subnet (cross-subnet mode) or only directly
// (Never).
//
// It has the shape of package vxlan and shares its route calculation,
// same-subnet logic and blackholes (written once, in an internal package);
// IPIP needs no neighbour or FDB entries, since a route's next hop, the
// remote node's underlay address, is where the tunnel sends.
//
// # What it owns
//
// A Driver owns the link named by its device name, tunl0 by default: the
// kernel's catch-all IPIP device, which the ipip module creates in every
// namespace and which cannot be deleted — the Driver adopts it, and when
// nothing is declared it only removes its address. Another name is created
// as an IPIP device with this node's underlay address as its local end. The
// Driver keeps the device's MTU (the host MTU less 20), its tunnel address
// (/32; other IPv4 addresses go) and its up state, in place. A link of the
// device's name but of another kind is not the device: it is never
// deleted, and the device fails with an error that names it; so does a
// device the kernel refuses because another IPIP device has its ends (the
// error names that device).
//
// A Manager declares the device on its Driver, the routes of the blocks on
// a routetable.Table (remote blocks via the owner's underlay address,
// onlink, on the device; same-subnet blocks via the same address on the
// interface of that subnet; blackholes for this node's blocks, unless
// turned off or a connected subnet holds the block: see
// Options.NoBlackholes), and a
// hash:net set of every node's underlay address plus Options.ExtraCIDRs on
// a netfilter.Sets.
//
// # How it is used
//
//	ns, _ := kernel.OpenCurrent()
//	tbl, _ := routetable.New(routetable.Options{Kernel: ns, Family: ipfamily.IPv4, Table: kernel.TableMain})
//	m, _ := ipip.New(ipip.Options{NodeName: "node-a", Kernel: ns, Routes: tbl, Mode: ipip.CrossSubnet})
//	loop.AddManager(m)
//	loop.AddDriver(m.Driver()) // PhaseTunnelL2: before the routes through the device
//	loop.AddDriver(tbl)
//	loop.Send(ctx, cluster.Node{Name: "node-b", UnderlayV4: netip.MustParseAddr("192.0.2.12")})
//	loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node-b"})
//
// Messages are cluster.Node and cluster.NodeRemove (a node's IPv4
// underlay address, the next hop of its blocks; this node's IPv4 tunnel
// address is the device's), cluster.Block and cluster.BlockRemove, and
// mtu.Result (the host MTU, applied to the device and its routes live).
// OnUpdate does no I/O; invalid messages are rejected and counted.
// OnLinkUpdate and OnAddrs take ifacemonitor's reports.
//
// On a kernel without the ipip module (this project's machines) the
// device fails with an error wrapping ErrDevice and kernel.ErrNotSupported,
// reported as a dataplane.PartialError and retried on its own backoff; the
// direct routes and the blackholes are written all the same, and tunnel
// routes wait, held by the Table, for a device that never comes.
//
// # What it never touches
//
// Links other than its device, addresses other than its device's IPv4
// ones, routes other than through the Table it was given, sets other than
// the one named. New and NewDriver do no I/O and start no goroutines.
package ipip
