package wireguard

import (
	"log/slog"

	"github.com/nodeplane/nodeplane/kernel"
)

// UserspaceProviderOptions configure NewUserspaceProvider.
type UserspaceProviderOptions struct {
	// Links reaches the namespace's links. Required.
	Links kernel.Links
	// Doer runs the TUN device's creation, and every socket the device
	// opens later (its UDP port, its MTU queries), on a thread inside the
	// namespace, so nothing of it lands in another one. Required.
	Doer kernel.Doer
	// NoControlSocket turns off the UAPI control socket
	// (/var/run/wireguard/NAME.sock). With it on (the default), `wg show
	// NAME` and wgctrl read and change the device; the directory is one
	// for every namespace of the machine, so a name served by another
	// namespace's device fails the Open with ErrControlSocket.
	NoControlSocket bool
	// Logger receives the device's own logs (debug and warnings); nil
	// discards them.
	Logger *slog.Logger
}

// NewUserspaceProvider returns the userspace provider: the embedded
// WireGuard implementation (golang.zx2c4.com/wireguard) over a TUN device
// made inside the namespace, configured in process, and serving the
// standard control socket so `wg` and wgctrl work on it. The device lives
// until its Close (Manager.Close): then its goroutines stop, its socket is
// removed and its interface disappears. It is Linux-only: elsewhere Open
// fails with ErrNotSupported.
func NewUserspaceProvider(o UserspaceProviderOptions) Provider {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &userspaceProvider{o: o}
}

type userspaceProvider struct{ o UserspaceProviderOptions }

func (p *userspaceProvider) Mode() Mode { return ModeUserspace }
