// Package vxlan is the VXLAN device driver of nodeplane's overlay: one
// VXLAN device per IP family, with a permanent neighbour and FDB entry per
// remote node. The overlay.Manager of an overlay.VXLAN encapsulation
// declares the device and the remote nodes on it, from cluster.Node
// messages, beside the routes of the blocks (see package overlay); a
// Driver can also be used on its own.
//
// # What it owns
//
// A Driver owns, in one network namespace, the link named by its device
// name (np-vxlan and np-vxlan6 by default), the addresses of its family on
// it (link-local ones aside), and every permanent neighbour and FDB entry
// on it (the others, added by someone else or learnt, are left alone). It
// creates the device (VNI 4096 and UDP port 4789 by default,
// learning off, parent found from the local underlay address), keeps it in
// sync — the MTU, MAC, tunnel address and up state are changed in place;
// only what the kernel will not change in place in this package's kernel
// interface (VNI, port, parent, local address) re-creates it — and deletes
// it when nothing is declared (an overlay that is Disabled, or whose node
// has no tunnel address). A link of the device's name but of another kind
// is not the device: it is never deleted, and the device fails with an
// error that names it. The kernel gives a VNI and UDP port (per family) to
// one VXLAN device of the namespace: while another device holds them, the
// device fails with an error (wrapping ErrDevice and kernel.ErrExists)
// that names that device. Per remote node it keeps a permanent neighbour
// entry (tunnel address → MAC) and an FDB entry (MAC → underlay address),
// diffed against what the kernel holds and written in one batch per kind
// (kernel.Neighbors.ApplyNeighbors, kernel.FDB.ApplyFDB), never one round
// trip per entry.
//
// # How it is used
//
// Through package overlay, usually:
//
//	m, _ := overlay.New(overlay.Options{Family: vxlan.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
//		Encap: overlay.VXLAN{VNI: 4096, Port: 4789}})
//	loop.AddManager(m)
//	loop.AddDriver(m.Driver()) // this package's *Driver, PhaseTunnelL2
//
// On its own, SetDevice and SetRemote declare the device and the remote
// nodes (no I/O), and Apply writes the difference. The Driver reads the
// kernel on its first Apply and after QueueResync (the loop's periodic
// resync), repairing entries deleted behind its back; OnLinkState makes it
// check the device at once when the device is reported gone or down. One
// entry the kernel refuses never holds back the others: it is recorded in
// the Driver's dataplane.Ledger (the device, each FDB entry and each
// neighbour is one object), retried on its own backoff and reported as a
// *dataplane.ObjectError (kind "link", "fdb" or "neighbour") in the
// Ledger's dataplane.PartialError. A restarted agent adopts what it finds
// and writes nothing when nothing changed.
//
// Plan (dataplane.Planner) says what the next Apply would write, in its
// order — the device ("link": created, deleted, or changed in place), then
// the FDB and neighbour entries — from Apply's own pass run dry, writing
// nothing; an Apply right after makes exactly those writes. State
// (dataplane.Stater) says what the Driver holds on its device, what
// drifted from what is declared and what fails; Stats reports
// dataplane.DriverStats.
//
// # What it never touches
//
// Links other than its device, entries on other links, neighbour entries
// that are not permanent on its device (the kernel's own resolution
// attempts). NewDriver does no I/O and starts no goroutines; the package
// starts none at all.
package vxlan
