// Package overlay is what nodeplane's overlay managers (vxlan, ipip) share,
// written once: the host view (which local interface holds which subnet,
// which one holds the node's underlay address), the route calculation
// (remote blocks through the tunnel or directly on the same subnet,
// blackholes for the node's own blocks unless turned off or held by a
// connected subnet, a conflict reported once) declared incrementally on a
// routetable.Table, the node-address ip set, the tunnel device
// reconciliation, and the per-object retry bookkeeping of the drivers;
// above these, the options' validation, message dispatch, notifications
// and counters of a manager (Manager) and the device half of a driver
// (DeviceDriver), which the packages' public types wrap.
//
// # What it owns
//
// Nothing of its own in the kernel. Routes go through the route table the
// manager was given (its classes and interfaces), set members through the
// netfilter.Sets it was given, and the device through EnsureDevice, which
// touches only the link whose name it is given.
//
// # How it is used
//
// A package's Manager checks its options with ManagerOptions.Validate and
// keeps a Manager, which keeps a Core; its Driver keeps a DeviceDriver,
// which the Manager's notifications and resyncs reach. The Manager feeds
// the Core nodes, blocks and host MTUs from the package's typed messages
// (OnUpdate, through the package's handlers: no I/O), and calls Sync from
// CompleteDeferredWork: Sync re-reads the host's links and addresses only
// when told they changed (MarkHostDirty) and declares only the routes and
// members whose inputs changed, so adding one node at 10k costs what it
// costs at 10.
//
// # What it never touches
//
// Links other than the named device, addresses other than the device's own
// (of its family, link-local ones excepted), routes other than through the
// table, and sets other than the one named.
package overlay
