package vxlan

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is; its text names the package once.
var (
	// ErrInvalidOptions reports an Options or DriverOptions value out of
	// range.
	ErrInvalidOptions = errors.New("vxlan: invalid options")
	// ErrInvalidInput reports a message, device or remote VTEP that is
	// malformed or of the wrong family. Nothing changes.
	ErrInvalidInput = errors.New("vxlan: invalid input")
	// ErrDevice reports that the VXLAN device could not be created,
	// re-created or changed. The driver retries it on its own backoff;
	// the neighbour and FDB entries wait for it.
	ErrDevice = errors.New("vxlan: device not in sync")
	// ErrNoParent reports that no interface holds the device's local
	// (underlay) address, so the device has no parent to be created on.
	ErrNoParent = errors.New("vxlan: no interface holds the local address")
	// ErrNeighbor reports a neighbour entry (tunnel address to MAC) the
	// kernel refused. It is retried on its own backoff.
	ErrNeighbor = errors.New("vxlan: neighbour entry not written")
	// ErrFDB reports a forwarding-database entry (MAC to underlay
	// address) the kernel refused. It is retried on its own backoff.
	ErrFDB = errors.New("vxlan: FDB entry not written")
	// ErrRead reports a failed read of the kernel (the device, its
	// neighbours, its FDB, the host's links and addresses): the driver or
	// manager fails as a whole and reads again next time.
	ErrRead = errors.New("vxlan: kernel read failed")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInput}, args...)...)
}
