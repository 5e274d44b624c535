// Package wireguard encrypts pod traffic between nodes with WireGuard: one
// Manager per IP family keeps a WireGuard device, its key and its peers,
// a routing table and one rule in step with what the cluster's control plane
// says about the other nodes. Where the kernel has a WireGuard module the
// device is a kernel link; where it has none (this project's machines, many
// hardened or minimal kernels) the same Manager runs an embedded userspace
// WireGuard (golang.zx2c4.com/wireguard) over a TUN device instead of giving
// up.
//
// # What it owns
//
// In the namespace its Options.Kernel reaches, a Manager owns:
//
//   - the device named Options.InterfaceName (default wg-np, wg-np-v6 for
//     IPv6): its MTU (the host's less 60, or 80 for IPv6), admin state,
//     private key, listen port (51820, 51821 for IPv6), firewall mark,
//     peers and address: this node's tunnel address of the family (its own
//     cluster.Node message, Options.NodeName), alone, so that connections
//     masqueraded as they leave through the device carry an address the
//     peers accept from this node. Peers it did not configure are removed.
//   - the whole routing table Options.Table (from idalloc): a route through
//     the device for every prefix a peer carries, behind it a blackhole for
//     the same prefix at FailClosedMetric (fail-closed, see below), a
//     throw route for the prefixes of nodes that are not peers yet, so
//     their traffic falls back to the main table, and at FailClosedMetric
//     a throw for each node endpoint address a blackholed block holds
//     (routetable, ExclusivePolicy).
//   - one rule at Options.RulePriority (99): "not fwmark M/M lookup
//     Table", M being Options.FirewallMark (from markbits). The device's
//     own encrypted packets carry M and skip the table, so they leave
//     through the underlay (routerule).
//   - the private key file Options.KeyFile: mode 0600, replaced atomically.
//
// # How it is used
//
//	ns, err := kernel.OpenCurrent() // or kernel.Open("/run/netns/NAME")
//	layout, err := markbits.NewLayout(markbits.LayoutOptions{WireGuard: true})
//	table, err := tables.Grab() // an idalloc.IndexAllocator
//	wg, err := wireguard.New(wireguard.Options{
//		Family: ipfamily.IPv4, Kernel: ns,
//		FirewallMark: layout.WireGuard, Table: table,
//		HostMTU: host.MTU, // mtu.Detector
//		KeyFile: "/var/lib/agent/wireguard.key",
//		NodeName: self,
//		OnPublicKey: func(k wireguard.PublicKey) { publish(self, k) },
//	})
//	go wg.Run(ctx)      // the userspace device lives as long as ctx
//	loop.AddManager(wg) // OnUpdate, CompleteDeferredWork
//	for _, d := range wg.Drivers() {
//		loop.AddDriver(d) // the device (wg), its table, its rule
//	}
//	loop.Send(ctx, cluster.Node{Name: "n2", UnderlayV4: n2IP, WireGuardKeyV4: k2})
//	loop.Send(ctx, cluster.Block{CIDR: n2PodCIDR, Node: "n2"})
//
// Messages (OnUpdate; also usable without a dataplane.Loop, then apply the
// drivers yourself, phase by phase as a loop's pass does): cluster.Node says what a node offers (its WireGuard key
// and underlay address of the Manager's family, the endpoint, on
// Options.ListenPort; its tunnel address of the family, routed to it as a
// host prefix unless one of its blocks holds it); cluster.Block gives a
// pod block to a node (its peer's allowed IPs and routes are the blocks
// it owns); cluster.NodeRemove and cluster.BlockRemove withdraw them;
// RotateKey asks for a new key; SetEnabled turns encryption off and on.
//
// The Manager owns three drivers, each resynced and retried by the loop
// on its own (Drivers). The device's, the Manager itself (its Apply, in
// dataplane.PhaseTunnelL2), does, in this order, each step only once the
// one before succeeded: make or adopt the device (choosing the provider),
// set its MTU and bring it up; load the key (or make one, or keep the
// device's when the file is gone) and publish the public key; write the
// device settings and the peers that differ, in chunks of
// Options.PeerChunk; and declare the routes and throws on the table. The
// table (Table, a routetable.Table in dataplane.PhaseRoutes) writes those
// that differ. The rule driver (RuleDriver) adds the rule after them, once
// the device and every route are in place. Disabled, the rule driver
// removes the rule, then withdraws the routes (which the table removes in
// the same pass), then deletes the device.
//
// # Failures, stats, plan and state
//
// The device driver (the Manager) is on the one driver shape. A peer the
// device refuses is recorded in a dataplane.Ledger keyed by its public key
// (a refused chunk is written again one peer at a time): the other peers
// are written all the same, and Apply returns a *dataplane.PartialError
// whose *dataplane.ObjectError (kind "peer", the key as its Name, Reason
// ErrPeer) says which, with ApplyResult.RetryAfter for its retry. A
// failure of the device itself (it cannot be made, read or given its
// settings) fails the whole Apply, and the loop backs the driver off.
// Stats reports dataplane.DriverStats: the peers wanted, those the device
// holds, those failing, and the writes made. Plan lists the writes the
// next Apply would make — "+ device", "~ link" (MTU, up), "~ device" (key,
// port, mark), "+ peer KEY endpoint … allowed-ips …", "~ peer …", "- peer
// KEY", "~ sysctl" — decided by Apply's own code and writing nothing (not
// even the key file); State lists the device and its peers as they are,
// what drifted, and the failing peers. The table and rule drivers are
// routetable's and routerule's, Plan, State and Stats included.
//
// # Fail-closed
//
// Encryption never falls back to plaintext when the device is gone: a
// userspace device stops with its agent (and the rule and routes stay, for
// the next run to adopt), a kernel one can be deleted. The device's routes
// go with it, and the blackholes behind them remain, so traffic to the
// peers' pod CIDRs and tunnel addresses is dropped — not sent through the
// main table in clear — until a Manager brings the device back. The
// host must still reach the other nodes, its control plane among them, to
// come back: a peer's endpoint address routed through the device
// (Options.EncryptHostTraffic) gets no blackhole, and where a block holds
// endpoint addresses (a block so wide it covers the underlay, which a
// cluster should not have), the block keeps its blackhole and a throw at
// FailClosedMetric for each of those addresses sends them back to the main
// table (with the device up as well: an endpoint address is not the
// block's peer). Options.FailOpen turns this off (that traffic then takes
// the main table while the device is gone); disabling the Manager
// (SetEnabled) removes the blackholes and throws with the routes.
//
// Peers are diffed, never replaced wholesale (a replace-all blips every
// tunnel): a new node is one added peer, a changed node one update of what
// changed (endpoint, allowed IPs, keepalive), a removed node one removal.
// The Manager keeps its intent one node at a time, so a change costs what
// it touches, whatever the cluster's size. A node with no key, no endpoint
// of the family, or a key another node (or this one) also claims is not a
// peer (Status reports the conflicts), and its prefixes get throw routes.
//
// # Providers
//
// ModeAuto (the default) adopts the device it finds (a kernel wireguard
// link; a tun of that name belongs to a running process and is refused),
// else asks the kernel provider and, if the kernel answers that it has no
// WireGuard module, the userspace provider; Options.Mode forces one.
// Status reports the choice and why.
//
//   - Kernel (NewKernelProvider): a link of type wireguard made with
//     kernel.Links.AddLink, read and configured through the namespace's
//     kernel.WireGuard capability (a *kernel.Namespace speaks to the
//     kernel's WireGuard from inside the namespace; a kernelfake.Namespace
//     with the wireguard link kind models it). The device outlives the
//     agent: a restarted Manager adopts it, its key and peers, and writes
//     only the difference.
//   - Userspace (NewUserspaceProvider): the embedded implementation over a
//     TUN device made on a thread inside the namespace; its UDP sockets
//     and MTU queries are made inside it too, whichever goroutine needs
//     them. It is configured in process and serves the standard control
//     socket /var/run/wireguard/NAME.sock, so `wg show NAME` and wgctrl
//     work on it. That directory is one for the whole machine, not per
//     namespace: devices in different namespaces need different names. The
//     device lives as long as its Manager (Close, or Run's context) and
//     stops cleanly with it; a restarted Manager makes it again with the
//     same key, and the rule and throw routes it left are adopted.
//
// Unit tests run on a kernelfake.Namespace: with the wireguard link kind
// its kernel.WireGuard serves the kernel provider; without it (as on this
// project's machines) package wireguardfake's userspace provider stands in
// for the embedded device.
//
// # Status and metrics
//
// Status tells the provider, the public key, the peers, the nodes that are
// not peers and the key conflicts. PeerStats reads each peer's last
// handshake and byte counters and hands them to Options.Metrics.
//
// # What it never touches
//
// Other links, other tables' routes, rules at other priorities or for other
// tables, and any namespace but its Kernel's. It never logs or prints a
// private key (PrivateKey's String, Format and LogValue say "(redacted)"),
// never loads kernel modules, and never replaces every peer at once. New
// does no I/O and starts no goroutine; the userspace device's goroutines
// are started by Apply and stopped by Close. Host-to-host encryption
// (Options.EncryptHostTraffic) also sets net.ipv4.conf.all.src_valid_mark.
// The package builds everywhere; the userspace provider is Linux-only.
package wireguard
