package wireguard_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// Plan says what the device driver's next Apply would write — the device,
// its link, its settings, its peers — and writes nothing; State says what
// the device holds and what drifted from the Manager's intent.
func ExampleManager_Plan() {
	ns := kernelfake.New(kernelfake.Options{Kinds: append(kernelfake.DefaultKinds(), kernel.KindWireGuard)})
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	m, _ := wireguard.New(wireguard.Options{Family: ipfamily.IPv4, Kernel: ns, FirewallMark: 0x100000, Table: 100, HostMTU: 1500,
		KeyFile: filepath.Join(dir, "wg.key")})
	defer m.Close()
	peer, _ := wireguard.ParsePublicKey("HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=")
	m.OnUpdate(cluster.Node{Name: "node2", UnderlayV4: netip.MustParseAddr("198.18.0.2"), WireGuardKeyV4: cluster.WireGuardKey(peer)})
	m.OnUpdate(cluster.Block{CIDR: netip.MustParsePrefix("10.244.2.0/24"), Node: "node2"})
	ctx := context.Background()

	plan, _ := m.Plan(ctx)
	fmt.Println(plan)
	fmt.Println("writes while planning:", ns.Writes())
	_, _ = m.Apply(ctx)
	plan, _ = m.Plan(ctx)
	fmt.Println(plan)

	// Someone else moves the peer's endpoint: after a resync, State shows
	// the drift and Plan the repair.
	_ = ns.Admin().ConfigureWireGuard(ctx, "wg-np", kernel.WireGuardConfig{Peers: []kernel.WireGuardPeerConfig{
		{PublicKey: kernel.WireGuardKey(peer), UpdateOnly: true, Endpoint: netip.MustParseAddrPort("198.18.0.9:4000")}}})
	m.QueueResync()
	st, _ := m.State(ctx)
	fmt.Println(st.Drift)
	plan, _ = m.Plan(ctx)
	fmt.Println(plan.Writes)
	// Output:
	// wireguard-IPv4: 4 writes
	// + device wg-np mtu 1440 (mode auto)
	// ~ link wg-np up
	// ~ device wg-np private-key (new) listen-port 51820 fwmark 0x100000 (was no private-key listen-port 0 fwmark 0x0)
	// + peer HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw= endpoint 198.18.0.2:51820 allowed-ips 10.244.2.0/24
	// writes while planning: 0
	// wireguard-IPv4: no writes
	// [peer HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=: want HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw= endpoint 198.18.0.2:51820 allowed-ips 10.244.2.0/24, have HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw= endpoint 198.18.0.9:4000 allowed-ips 10.244.2.0/24]
	// [~ peer HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw= endpoint 198.18.0.2:51820 allowed-ips 10.244.2.0/24 (was endpoint 198.18.0.9:4000 allowed-ips 10.244.2.0/24)]
}
