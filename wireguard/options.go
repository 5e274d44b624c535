package wireguard

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/routetable"
)

// Defaults for the zero fields of Options.
const (
	// DefaultInterfaceName and DefaultInterfaceNameV6 name the IPv4 and
	// IPv6 Managers' devices.
	DefaultInterfaceName   = "wg-np"
	DefaultInterfaceNameV6 = "wg-np-v6"
	// DefaultListenPort and DefaultListenPortV6 are the UDP ports; the
	// two families' devices of one node need two ports.
	DefaultListenPort   = 51820
	DefaultListenPortV6 = 51821
	// DefaultRulePriority is the priority of the routing rule.
	DefaultRulePriority = 99
	// DefaultPeerChunk is how many peers one device write carries.
	DefaultPeerChunk = 100
)

// Kernel is what a Manager needs of the node's network namespace: links
// (the device's state, MTU and admin state; deleting a kernel device),
// routes for its table (routetable.Kernel), rules, sysctls (for host
// encryption), the kernel's WireGuard (kernel.WireGuard, through which the
// kernel provider reads and configures a kernel device) and work on a
// thread inside it (kernel.Doer), on which the userspace provider runs its
// device. A *kernel.Namespace implements it, and so does a
// kernelfake.Namespace (whose Do fails: give it wireguardfake's userspace
// provider; its WireGuard needs kernel.KindWireGuard among its Kinds).
type Kernel interface {
	routetable.Kernel
	kernel.Addrs
	kernel.Rules
	kernel.Sysctls
	kernel.Doer
	kernel.WireGuard
}

// Options configure a Manager. Family, Kernel, FirewallMark, Table, KeyFile
// and one of MTU and HostMTU are required.
type Options struct {
	// Family is IPv4 or IPv6: one Manager, device and table per family.
	Family ipfamily.Family
	// Kernel is the node's namespace: a *kernel.Namespace, or a
	// kernelfake.Namespace in tests (then give a userspace provider, from
	// wireguardfake, where the kernel lacks WireGuard). A userspace
	// device opens its sockets through it for as long as it runs: close
	// the Manager before the namespace.
	Kernel Kernel
	// Mode chooses the provider; ModeAuto (the zero value) prefers the
	// kernel and falls back to userspace.
	Mode Mode
	// KernelProvider and UserspaceProvider replace the real providers
	// (NewKernelProvider, NewUserspaceProvider built on Kernel). Tests on
	// a kernelfake.Namespace pass wireguardfake's userspace provider.
	KernelProvider, UserspaceProvider Provider
	// InterfaceName is the device's name; empty means
	// DefaultInterfaceName (DefaultInterfaceNameV6 for IPv6). A userspace
	// device's control socket is /var/run/wireguard/NAME.sock, one
	// directory for every namespace of the machine: give devices in
	// different namespaces different names.
	InterfaceName string
	// ListenPort is the UDP port; 0 means DefaultListenPort
	// (DefaultListenPortV6 for IPv6).
	ListenPort int
	// FirewallMark is the mark bit (or bits) the device puts on its own
	// encrypted packets, allocated with markbits; required. The rule
	// "not fwmark M/M lookup Table" keeps them out of the table.
	FirewallMark uint32
	// MTU is the device's MTU; 0 derives it from HostMTU less
	// mtu.WireGuardOverheadV4 (60) or, for IPv6, mtu.WireGuardOverheadV6
	// (80).
	MTU int
	// HostMTU is the underlay's MTU (mtu.Detector), used when MTU is 0.
	HostMTU int
	// Table is the routing table the peers' routes go to, allocated with
	// idalloc; required. The Manager owns the whole table.
	Table uint32
	// RulePriority is the priority of the rule; 0 means
	// DefaultRulePriority.
	RulePriority uint32
	// KeyFile is where the private key is kept (mode 0600, replaced
	// atomically); required. Its directory must exist.
	KeyFile string
	// OnPublicKey, if set, is called with this node's public key when it is
	// first known and whenever it changes (key rotation), for the agent to
	// publish to the other nodes. It is called from Apply, once the device
	// has the key, outside the Manager's lock (it may call the Manager).
	OnPublicKey func(PublicKey)
	// NodeName is this node's name: updates for it are ignored.
	NodeName string
	// EncryptHostTraffic also sends host-to-host traffic through the
	// tunnel: each peer's endpoint address is routed to it.
	EncryptHostTraffic bool
	// FailOpen turns fail-closed off. By default the table also holds,
	// behind each route through the device, a blackhole for the same
	// prefix at FailClosedMetric: when the device is gone — a userspace
	// device stops with its agent, a kernel one can be deleted — its routes
	// go with it and the blackholes remain, so traffic to the peers' pod
	// CIDRs and tunnel addresses is dropped instead of leaving through the
	// main table in plaintext. The peers' endpoint addresses get none, and
	// a throw at that metric lets them out of a block that holds them: the
	// host must still reach the other nodes, its control plane among them,
	// to bring the device back (see the package doc). With FailOpen
	// that traffic takes the main table while the device is gone.
	// Disabling the Manager (SetEnabled, Options.Disabled) removes the
	// blackholes with the routes.
	FailOpen bool
	// PersistentKeepalive, when positive, keeps each tunnel alive with a
	// packet at this interval (whole seconds).
	PersistentKeepalive time.Duration
	// PeerChunk is the most peers one device write carries; 0 means
	// DefaultPeerChunk.
	PeerChunk int
	// Disabled starts the Manager with encryption off: Apply then removes
	// what an earlier run left (rule, routes, device).
	Disabled bool
	// Metrics, if set, receives per-peer counters from PeerStats.
	Metrics Metrics
	// Logger receives logs; nil discards them. Private keys are never
	// logged.
	Logger *slog.Logger
	// Clock is the time source of the route and rule drivers' backoff; nil
	// means clock.Real().
	Clock clock.Clock
}

// config is Options with defaults filled in.
type config struct {
	Options
	mtu int
}

func (o Options) config() (config, error) {
	c := config{Options: o}
	bad := func(format string, a ...any) (config, error) {
		return config{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, a...)...)
	}
	if o.Family != ipfamily.IPv4 && o.Family != ipfamily.IPv6 {
		return bad("family %d is neither IPv4 nor IPv6", o.Family)
	}
	if o.Kernel == nil {
		return bad("no Kernel")
	}
	if o.Mode > ModeUserspace {
		return bad("unknown mode %d", o.Mode)
	}
	if c.InterfaceName == "" {
		c.InterfaceName = DefaultInterfaceName
		if o.Family == ipfamily.IPv6 {
			c.InterfaceName = DefaultInterfaceNameV6
		}
	}
	if err := ifname.Valid(c.InterfaceName); err != nil {
		return bad("interface name: %v", err)
	}
	if c.ListenPort == 0 {
		c.ListenPort = DefaultListenPort
		if o.Family == ipfamily.IPv6 {
			c.ListenPort = DefaultListenPortV6
		}
	}
	if c.ListenPort < 1 || c.ListenPort > 65535 {
		return bad("listen port %d out of range", c.ListenPort)
	}
	if o.FirewallMark == 0 {
		return bad("no FirewallMark (allocate one with markbits)")
	}
	if o.Table == 0 || o.Table >= kernel.TableDefault && o.Table <= kernel.TableLocal {
		return bad("table %d: need a table of the agent's own (idalloc)", o.Table)
	}
	if c.RulePriority == 0 {
		c.RulePriority = DefaultRulePriority
	}
	c.mtu = o.MTU
	if c.mtu == 0 {
		if o.HostMTU == 0 {
			return bad("neither MTU nor HostMTU")
		}
		c.mtu = o.HostMTU - mtu.WireGuardOverheadV4
		if o.Family == ipfamily.IPv6 {
			c.mtu = o.HostMTU - mtu.WireGuardOverheadV6
		}
	}
	min := mtu.MinPodMTUIPv4
	if o.Family == ipfamily.IPv6 {
		min = mtu.MinIPv6MTU
	}
	if c.mtu < min || c.mtu > mtu.MaxMTU {
		return bad("device MTU %d out of range (%d to %d)", c.mtu, min, mtu.MaxMTU)
	}
	if o.KeyFile == "" {
		return bad("no KeyFile")
	}
	if o.PersistentKeepalive < 0 || o.PersistentKeepalive > 65535*time.Second {
		return bad("persistent keepalive %v out of range", o.PersistentKeepalive)
	}
	if c.PeerChunk == 0 {
		c.PeerChunk = DefaultPeerChunk
	}
	if c.PeerChunk < 0 {
		return bad("peer chunk %d", c.PeerChunk)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c, nil
}
