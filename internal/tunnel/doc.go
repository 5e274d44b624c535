// Package tunnel is what the tunnel device drivers (vxlan, ipip) share,
// written once: the device reconciliation (EnsureDevice, RemoveDevice),
// which also runs dry to plan its writes (kind "link", LinkText); the
// device half of a driver (DeviceDriver: the device wanted, the driver's
// dataplane.Ledger of failing objects by Key, the link last seen, the
// count of writes and the notifications); and the checks of their inputs.
// The overlay manager (package overlay) declares devices on those
// drivers; it does not import this package's device code.
//
// # What it owns
//
// Nothing of its own in the kernel: EnsureDevice and RemoveDevice touch
// only the link whose name and kind they are given, and its addresses of
// the family (link-local ones excepted).
//
// # What it never touches
//
// Links other than the named device of the given kind, addresses other
// than the device's own.
package tunnel
