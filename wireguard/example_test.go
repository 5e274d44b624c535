package wireguard_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
	"github.com/nodeplane/nodeplane/wireguard/wireguardfake"
)

// A Manager and its drivers on a loop, on a fake node whose kernel has no
// WireGuard module: it falls back to the (fake) userspace provider, makes a
// key and configures the peers; the table writes the routes, and the rule
// driver the rule, after them.
func Example() {
	ns := kernelfake.New(kernelfake.Options{}) // no wireguard link kind, as on this project's machines
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	m, err := wireguard.New(wireguard.Options{
		Family: ipfamily.IPv4, Kernel: ns, FirewallMark: 0x100000, Table: 100, HostMTU: 1500,
		KeyFile:           filepath.Join(dir, "wg.key"),
		UserspaceProvider: wireguardfake.New(ns).Provider(),
		OnPublicKey:       func(wireguard.PublicKey) { fmt.Println("public key published") },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loop, _ := dataplane.New(dataplane.Options{OnInSync: cancel}) // stop after the first pass
	_ = loop.AddManager(m)
	for _, d := range m.Drivers() { // the device, the table, the rule
		_ = loop.AddDriver(d)
	}
	k, _ := wireguard.GeneratePrivateKey()
	_ = loop.Send(ctx, cluster.Node{Name: "node2", UnderlayV4: netip.MustParseAddr("198.18.0.2"), WireGuardKeyV4: cluster.WireGuardKey(k.Public())})
	_ = loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node2"})
	_ = loop.Send(ctx, cluster.Node{Name: "node3", UnderlayV4: netip.MustParseAddr("198.18.0.3")}) // no key yet
	_ = loop.Send(ctx, cluster.Block{CIDR: netip.MustParsePrefix("10.244.3.0/24"), Node: "node3"})
	loop.DatastoreInSync()
	loop.InterfacesInSync()
	_ = loop.Run(ctx)
	st := m.Status()
	fmt.Println("provider:", st.Mode, "device:", st.Device, "peers:", st.Peers, "not peers:", st.NotPeers, "rule:", st.RuleInstalled)
	for _, r := range ns.Routes(kernel.IPv4, 100) {
		fmt.Println("route", r.Dst, map[uint8]string{kernel.RTNUnicast: "dev " + st.Device, kernel.RTNThrow: "throw",
			kernel.RTNBlackhole: "blackhole"}[r.Type], "metric", r.Priority)
	}
	// Output:
	// public key published
	// provider: userspace device: wg-np peers: 1 not peers: [node3] rule: true
	// route 10.244.2.0/24 dev wg-np metric 0
	// route 10.244.2.0/24 blackhole metric 4096
	// route 10.244.3.0/24 throw metric 0
}

// In an agent: the node's namespace, and the Manager's lifetime tied to
// the agent's context (the userspace device stops with it). This example
// only compiles: it needs root.
func Example_namespace() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := kernel.OpenCurrent()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	m, err := wireguard.New(wireguard.Options{Family: ipfamily.IPv4, Kernel: ns, FirewallMark: 0x100000, Table: 100,
		HostMTU: 1500, KeyFile: "/var/lib/agent/wireguard.key"})
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = m.Run(ctx) }()
	for _, d := range m.Drivers() { // as a loop's pass applies them
		if _, err := d.Apply(ctx); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(m.Status().Mode, m.Status().ModeReason)
}

// The kernel provider on a fake kernel that has WireGuard (the wireguard
// link kind and the kernel.WireGuard capability).
func ExampleNewKernelProvider() {
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	p := wireguard.NewKernelProvider(wireguard.KernelProviderOptions{Links: ns, WireGuard: ns})
	dev, err := p.Open(context.Background(), wireguard.DeviceSpec{Name: "wg-np", MTU: 1440})
	if err != nil {
		fmt.Println(err)
		return
	}
	port := 51820
	_ = dev.Configure(context.Background(), wireguard.DeviceConfig{ListenPort: &port})
	st, _ := dev.State(context.Background())
	l, _ := ns.Link("wg-np")
	fmt.Println(dev.Mode(), l.Kind, l.MTU, st.ListenPort)

	// Without the module, the provider says so.
	bare := kernelfake.New(kernelfake.Options{})
	_, err = wireguard.NewKernelProvider(wireguard.KernelProviderOptions{Links: bare, WireGuard: bare}).
		Open(context.Background(), wireguard.DeviceSpec{Name: "wg-np", MTU: 1440})
	fmt.Println(err != nil && errorsIs(err, wireguard.ErrNotSupported))
	// Output:
	// kernel wireguard 1440 51820
	// true
}

// The userspace provider makes the device inside a namespace. This example
// only compiles: it needs root and /dev/net/tun.
func ExampleNewUserspaceProvider() {
	ns, err := kernel.Open("/run/netns/blue")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Close()
	p := wireguard.NewUserspaceProvider(wireguard.UserspaceProviderOptions{Links: ns, Doer: ns})
	dev, err := p.Open(context.Background(), wireguard.DeviceSpec{Name: "wg-blue", MTU: 1420})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer dev.Close() // the device and its control socket go
	// `wg show wg-blue` works from here on.
}

// Keys: generate, store, read back; the private key never prints.
func ExampleWriteKeyFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "wg.key")
	k, _ := wireguard.GeneratePrivateKey()
	if err := wireguard.WriteKeyFile(path, k); err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := os.Stat(path)
	back, _ := wireguard.ReadKeyFile(path)
	fmt.Println(fi.Mode().Perm(), back == k, k)
	// Output: -rw------- true (redacted)
}

// Public keys travel as base64, as wg(8) prints them.
func ExampleParsePublicKey() {
	k, err := wireguard.ParsePublicKey("HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=")
	fmt.Println(k, err)
	_, err = wireguard.ParsePublicKey("not a key")
	fmt.Println(err)
	// Output:
	// HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw= <nil>
	// wireguard: invalid key: want 32 bytes of base64
}
