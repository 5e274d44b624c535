package kernelfake_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
)

// A fake kernel with WireGuard: a device's configuration lives with its
// wireguard link; without the module every call says ErrNotSupported.
func ExampleNamespace_ConfigureWireGuard() {
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	l, _ := ns.AddLink(ctx, kernel.Link{Name: "wg0", Kind: kernel.KindWireGuard})
	port := 51820
	a, b := kernel.WireGuardKey{1}, kernel.WireGuardKey{2}
	_ = ns.ConfigureWireGuard(ctx, "wg0", kernel.WireGuardConfig{ListenPort: &port, Peers: []kernel.WireGuardPeerConfig{
		{PublicKey: a, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}},
		{PublicKey: b, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}}, // taken from a
	}})
	d, _ := ns.WireGuardDevice(ctx, "wg0")
	fmt.Println(d.ListenPort, d.Peers[0].AllowedIPs, d.Peers[1].AllowedIPs, ns.Calls(kernelfake.OpConfigureWireGuard))

	_ = ns.DeleteLink(ctx, l.Index)
	_, err := ns.WireGuardDevice(ctx, "wg0")
	fmt.Println(errors.Is(err, kernel.ErrNotFound))
	_, err = kernelfake.New(kernelfake.Options{}).WireGuardDevice(ctx, "wg0")
	fmt.Println(errors.Is(err, kernel.ErrNotSupported))
	// Output:
	// 51820 [] [10.0.1.0/24] 3
	// true
	// true
}
