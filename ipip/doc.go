// Package ipip is the IP-in-IP device driver of nodeplane's overlay (IPv4
// only): one IPIP device. The overlay.Manager of an overlay.IPIP
// encapsulation declares the device on it from this node's cluster.Node,
// beside the routes of the blocks via each node's underlay address (see
// package overlay). IPIP needs no neighbour or FDB entries, since a
// route's next hop, the remote node's underlay address, is where the
// tunnel sends.
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
// # How it is used
//
// Through package overlay, usually:
//
//	m, _ := overlay.New(overlay.Options{Family: ipfamily.IPv4, NodeName: "node-a", Kernel: ns, Routes: tbl,
//		Encap: overlay.IPIP{}, CrossSubnet: true})
//	loop.AddManager(m)
//	loop.AddDriver(m.Driver()) // this package's *Driver, PhaseTunnelL2
//
// On its own, SetDevice declares the device (no I/O) and Apply writes the
// difference; OnLinkState makes the Driver check the device at once when
// it is reported gone or down, and QueueResync at the next Apply.
//
// Plan (dataplane.Planner) says what the next Apply would write — the
// device ("link") created, deleted, or changed in place (MTU, address, up)
// — from Apply's own pass run dry, writing nothing; State
// (dataplane.Stater) says what the Driver holds, how it differs from what
// is declared, and what fails; Stats reports dataplane.DriverStats.
//
// On a kernel without the ipip module (this project's machines) the
// device fails with an error wrapping ErrDevice and kernel.ErrNotSupported:
// a *dataplane.ObjectError of kind "link" in the Driver's dataplane.Ledger,
// reported in the Ledger's dataplane.PartialError and retried on its own
// backoff; an overlay's direct routes and blackholes are written all the
// same, and its tunnel routes wait, held by the Table, for a device that
// never comes.
//
// # What it never touches
//
// Links other than its device, addresses other than its device's IPv4
// ones. NewDriver does no I/O and starts no goroutines.
package ipip
