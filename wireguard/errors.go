package wireguard

import "errors"

// Sentinel errors. Every error the package returns wraps one of them (and,
// for a kernel or device refusal, the cause), so callers test with
// errors.Is. An error's text names the package once.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("wireguard: invalid options")
	// ErrInvalidKey reports a key that is not 32 bytes of base64 (or
	// hex, in the UAPI), or a private key file that holds no valid key.
	ErrInvalidKey = errors.New("wireguard: invalid key")
	// ErrNotSupported reports a provider that cannot run here: the kernel
	// has no WireGuard module (kernel provider), or the platform has no
	// TUN device (userspace provider outside Linux).
	ErrNotSupported = errors.New("wireguard: provider not supported here")
	// ErrNoProvider reports that no provider could make the device: in
	// ModeAuto both failed (the error wraps both causes).
	ErrNoProvider = errors.New("wireguard: no provider could make the device")
	// ErrForeignDevice reports a link with the device's name that is not
	// a device this Manager can adopt: another kind of link, or a tun
	// device that another process serves.
	ErrForeignDevice = errors.New("wireguard: device name taken by a foreign link")
	// ErrDevice reports a failed read or write of the device's
	// configuration (the kernel or the userspace device refused it).
	ErrDevice = errors.New("wireguard: device configuration failed")
	// ErrPeer is the Reason of a peer the device refused (a
	// *dataplane.ObjectError of kind "peer" in the Apply's
	// *dataplane.PartialError): the others are written all the same, and
	// it is retried on its own backoff.
	ErrPeer = errors.New("wireguard: peer not written")
	// ErrControlSocket reports that the userspace device's UAPI control
	// socket (/var/run/wireguard/NAME.sock) could not be served, usually
	// because a device of the same name in another namespace serves it.
	ErrControlSocket = errors.New("wireguard: control socket unavailable")
	// ErrKeyFile reports a private key file that could not be read or
	// written.
	ErrKeyFile = errors.New("wireguard: key file")
	// ErrClosed reports a call on a closed Manager.
	ErrClosed = errors.New("wireguard: manager closed")
)
