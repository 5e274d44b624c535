package wireguard

import (
	"context"
	"net/netip"
	"strconv"
	"time"
)

// Mode selects the provider of the device.
type Mode uint8

const (
	// ModeAuto tries the kernel provider and falls back to the userspace
	// one when the kernel has no WireGuard module. It is the zero value.
	ModeAuto Mode = iota
	// ModeKernel uses the kernel's WireGuard (a netlink link of type
	// wireguard, configured through kernel.WireGuard) and nothing else.
	ModeKernel
	// ModeUserspace uses the embedded userspace WireGuard
	// (golang.zx2c4.com/wireguard over a TUN device) and nothing else.
	ModeUserspace
)

// String returns "auto", "kernel" or "userspace".
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeKernel:
		return "kernel"
	case ModeUserspace:
		return "userspace"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Provider makes and adopts devices of one kind: kernel or userspace.
// The Manager takes one of each (Options.KernelProvider,
// Options.UserspaceProvider); NewKernelProvider and NewUserspaceProvider
// build the real ones, and package wireguardfake a userspace fake.
type Provider interface {
	// Mode returns ModeKernel or ModeUserspace.
	Mode() Mode
	// Open returns the device called spec.Name: the existing one if this
	// provider can adopt it (a kernel wireguard link, for the kernel
	// provider), else a new one with spec's MTU, administratively down.
	// A provider that cannot run here fails with an error wrapping
	// ErrNotSupported; a link of that name that it cannot adopt with
	// ErrForeignDevice.
	Open(ctx context.Context, spec DeviceSpec) (Device, error)
}

// DeviceSpec is what a Provider needs to make a device.
type DeviceSpec struct {
	// Name is the interface name.
	Name string
	// MTU is the interface MTU.
	MTU int
}

// Device is one open WireGuard device.
type Device interface {
	// Name returns the interface name.
	Name() string
	// Mode returns the provider's mode.
	Mode() Mode
	// State reads the device's configuration and its peers' counters.
	State(ctx context.Context) (DeviceState, error)
	// Configure applies cfg with WireGuard's semantics: fields left
	// unset are not changed, and peers not named are left alone.
	Configure(ctx context.Context, cfg DeviceConfig) error
	// Close releases the handle. A kernel device stays in the kernel (a
	// restarted agent adopts it); a userspace device stops and its
	// interface disappears.
	Close() error
	// Delete removes the device from the kernel and releases the handle.
	Delete(ctx context.Context) error
}

// DeviceConfig is a change to a device. Zero fields are left unchanged.
type DeviceConfig struct {
	// PrivateKey, when set, replaces the device's private key.
	PrivateKey *PrivateKey
	// ListenPort, when set, replaces the UDP port.
	ListenPort *int
	// FirewallMark, when set, replaces the mark of the device's own
	// packets (0 clears it).
	FirewallMark *uint32
	// ReplacePeers removes every peer first (those in Peers are made
	// anew). The Manager never sets it (it would blip every tunnel); it is
	// here for the floor in benchmarks and for completeness.
	ReplacePeers bool
	// Peers are the peers to add, change or remove.
	Peers []PeerConfig
}

// PeerConfig is a change to one peer.
type PeerConfig struct {
	// PublicKey names the peer.
	PublicKey PublicKey
	// Remove removes the peer.
	Remove bool
	// UpdateOnly changes the peer only if it exists.
	UpdateOnly bool
	// Endpoint, when valid, replaces the peer's endpoint.
	Endpoint netip.AddrPort
	// PersistentKeepalive, when set, replaces the keepalive interval (0
	// turns it off).
	PersistentKeepalive *time.Duration
	// ReplaceAllowedIPs replaces the peer's allowed IPs with AllowedIPs
	// instead of adding to them.
	ReplaceAllowedIPs bool
	// AllowedIPs are the prefixes routed to the peer. WireGuard gives a
	// prefix to one peer at a time: adding it to this peer takes it from
	// the one that had it.
	AllowedIPs []netip.Prefix
}

// DeviceState is a device's configuration as read back.
type DeviceState struct {
	// Name is the interface name.
	Name string
	// PrivateKey is the device's private key (zero when none).
	PrivateKey PrivateKey
	// PublicKey is its public key (zero when none).
	PublicKey PublicKey
	// ListenPort is the UDP port.
	ListenPort int
	// FirewallMark is the mark of the device's own packets.
	FirewallMark uint32
	// Peers are the device's peers.
	Peers []PeerState
}

// PeerState is one peer of a device, with its counters.
type PeerState struct {
	// PublicKey names the peer.
	PublicKey PublicKey
	// Endpoint is the peer's current endpoint (invalid when none).
	Endpoint netip.AddrPort
	// PersistentKeepalive is the keepalive interval (0: off).
	PersistentKeepalive time.Duration
	// AllowedIPs are the prefixes routed to the peer.
	AllowedIPs []netip.Prefix
	// LastHandshake is the time of the last completed handshake (zero:
	// never).
	LastHandshake time.Time
	// ReceiveBytes and TransmitBytes count the peer's traffic.
	ReceiveBytes, TransmitBytes int64
}

// RotateKey asks for a new private key at the next Apply: a message for
// Manager.OnUpdate. The new public key is published through
// Options.OnPublicKey; peers reach this node again once their agents have
// it.
type RotateKey struct{}

// SetEnabled turns encryption on or off: a message for Manager.OnUpdate.
// Turning it off removes the rule, then the routes, then the device, in that
// order, at the next Apply. A Manager starts enabled unless
// Options.Disabled is set.
type SetEnabled struct {
	// Enabled is the new state.
	Enabled bool
}

// PeerStats are one peer's counters, as Manager.PeerStats reports them and
// Metrics receives them.
type PeerStats struct {
	// Node is the peer's node name ("" for a peer the Manager did not
	// configure).
	Node string
	// PublicKey names the peer.
	PublicKey PublicKey
	// LastHandshake is the time of the last completed handshake (zero:
	// never).
	LastHandshake time.Time
	// ReceiveBytes and TransmitBytes count the peer's traffic.
	ReceiveBytes, TransmitBytes int64
}

// Metrics receives per-peer counters; Manager.PeerStats feeds it. Bridge it
// to Prometheus (or anything else) in the agent.
type Metrics interface {
	// ObservePeer records one peer's counters.
	ObservePeer(s PeerStats)
}

// Conflict is a public key that several nodes claim: none of them becomes
// a peer.
type Conflict struct {
	// PublicKey is the key.
	PublicKey PublicKey
	// Nodes are the nodes that claim it, sorted ("" stands for this node).
	Nodes []string
}

// Status is what a Manager reports about itself.
type Status struct {
	// Enabled is the desired state.
	Enabled bool
	// Mode is the provider in use (ModeAuto before the device exists).
	Mode Mode
	// ModeReason says why that provider was chosen (for ModeAuto: why the
	// kernel provider was not).
	ModeReason string
	// Device is the interface name.
	Device string
	// PublicKey is this node's public key (zero before the first Apply).
	PublicKey PublicKey
	// Peers is the number of nodes that are peers.
	Peers int
	// NotPeers are the nodes that are not peers (no key, no endpoint, a
	// conflicting key), sorted; their traffic takes the main table.
	NotPeers []string
	// Conflicts are the public keys claimed by several nodes.
	Conflicts []Conflict
	// RuleInstalled reports whether the routing rule is in place.
	RuleInstalled bool
}
