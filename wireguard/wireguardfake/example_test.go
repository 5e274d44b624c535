package wireguardfake_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

// A userspace device on a fake namespace: its tun link, its configuration
// kept by kernelfake (where writes are counted and failures injected).
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	u := wireguardfake.New(ns)
	ctx := context.Background()
	dev, err := u.Provider().Open(ctx, wireguard.DeviceSpec{Name: "wg0", MTU: 1420})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := ns.Link("wg0")
	fmt.Println(l.Kind, l.MTU)

	k1, _ := wireguard.GeneratePrivateKey()
	_ = dev.Configure(ctx, wireguard.DeviceConfig{Peers: []wireguard.PeerConfig{{
		PublicKey: k1.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}}}})
	d, _ := u.Devices().WireGuardDevice(ctx, "wg0")
	fmt.Println(len(d.Peers), u.Devices().Calls(kernelfake.OpConfigureWireGuard))

	u.Devices().Fail(kernelfake.OpConfigureWireGuard, 1, nil)
	fmt.Println(dev.Configure(ctx, wireguard.DeviceConfig{}))

	_ = dev.Close()
	_, found := ns.Link("wg0")
	fmt.Println(found)
	// Output:
	// tun 1420
	// 1 1
	// kernelfake: injected failure (input/output error)
	// false
}
