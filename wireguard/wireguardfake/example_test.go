package wireguardfake_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

// A userspace-style device on a fake namespace, its writes recorded, a
// failure injected.
func Example() {
	ns := kernelfake.New(kernelfake.Options{})
	wg := wireguardfake.New(ns)
	dev, err := wg.Provider().Open(context.Background(), wireguard.DeviceSpec{Name: "wg0", MTU: 1420})
	if err != nil {
		fmt.Println(err)
		return
	}
	k1, _ := wireguard.GeneratePrivateKey()
	_ = dev.Configure(context.Background(), wireguard.DeviceConfig{Peers: []wireguard.PeerConfig{{
		PublicKey: k1.Public(), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24")}}}})
	st, _ := wg.State("wg0")
	fmt.Println(len(st.Peers), len(wg.Log()))

	wg.Fail(wireguardfake.OpConfigure, 1, nil)
	fmt.Println(dev.Configure(context.Background(), wireguard.DeviceConfig{}))

	_ = dev.Close()
	_, found := ns.Link("wg0")
	fmt.Println(found)
	// Output:
	// 1 1
	// wireguardfake: injected failure
	// false
}
