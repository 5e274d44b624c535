package kernel_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/kernel"
)

// WireGuardDevice reads a WireGuard device of the namespace; a kernel
// without the WireGuard module says so with ErrNotSupported. It needs
// root.
func ExampleNamespace_WireGuardDevice() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		return
	}
	defer ns.Close()
	d, err := ns.WireGuardDevice(context.Background(), "wg0")
	switch {
	case errors.Is(err, kernel.ErrNotSupported):
		fmt.Println("no WireGuard in this kernel: use a userspace device")
	case errors.Is(err, kernel.ErrNotFound):
		fmt.Println("no device wg0")
	case err == nil:
		fmt.Println(d.Name, d.ListenPort, len(d.Peers), "peers")
	}
}
