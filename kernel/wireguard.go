package kernel

import (
	"context"
	"encoding/base64"
	"net/netip"
	"time"

	"github.com/nodeplane/nodeplane/internal/ifname"
)

// WireGuard is the capability of a namespace whose WireGuard devices (its
// links of KindWireGuard) can be read and configured: *Namespace and
// kernelfake.Namespace implement it. A device is named by its interface
// name; it exists while the namespace has a link of KindWireGuard of that
// name (another kind of link, a userspace device's tun among them, is not
// one: those methods fail with an error wrapping ErrNotFound). Where the
// kernel has no WireGuard module, every method fails with an error
// wrapping ErrNotSupported, which is how a caller learns that the kernel
// cannot serve WireGuard (a userspace implementation may still).
type WireGuard interface {
	// WireGuardDevice reads the configuration of the device called name
	// and its peers' counters.
	WireGuardDevice(ctx context.Context, name string) (WireGuardDevice, error)
	// ConfigureWireGuard applies cfg to the device called name, with
	// WireGuard's semantics: fields left unset are not changed, peers not
	// named are left alone (unless ReplacePeers), and an allowed IP given
	// to one peer leaves any other. Invalid cfg fails with an error
	// wrapping ErrInvalid and changes nothing.
	ConfigureWireGuard(ctx context.Context, name string, cfg WireGuardConfig) error
}

// WireGuardKey is a WireGuard key (private or public): 32 bytes.
type WireGuardKey [32]byte

// String returns the key in base64, as wg(8) prints it.
func (k WireGuardKey) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether the key is all zeros (no key).
func (k WireGuardKey) IsZero() bool { return k == WireGuardKey{} }

// WireGuardDevice is a device's configuration as the kernel reports it.
type WireGuardDevice struct {
	// Name is the interface name.
	Name string
	// PrivateKey is the device's private key (zero when none).
	PrivateKey WireGuardKey
	// PublicKey is the public key of PrivateKey (zero when none).
	PublicKey WireGuardKey
	// ListenPort is the UDP port.
	ListenPort int
	// FirewallMark is the mark of the device's own packets (0: none).
	FirewallMark uint32
	// Peers are the device's peers, in the order the kernel lists them.
	Peers []WireGuardPeer
}

// WireGuardPeer is one peer of a device, with its counters.
type WireGuardPeer struct {
	// PublicKey names the peer.
	PublicKey WireGuardKey
	// Endpoint is the peer's endpoint (invalid when none).
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

// WireGuardConfig is a change to a device. Unset fields are left as they
// are.
type WireGuardConfig struct {
	// PrivateKey, when set, replaces the private key (a zero key removes
	// it).
	PrivateKey *WireGuardKey
	// ListenPort, when set, replaces the UDP port (0 picks a free one).
	ListenPort *int
	// FirewallMark, when set, replaces the mark of the device's own
	// packets (0 clears it).
	FirewallMark *uint32
	// ReplacePeers removes every peer first: those in Peers are then made
	// anew, with only what Peers gives them.
	ReplacePeers bool
	// Peers are the peers to add, change or remove, in order.
	Peers []WireGuardPeerConfig
}

// WireGuardPeerConfig is a change to one peer.
type WireGuardPeerConfig struct {
	// PublicKey names the peer.
	PublicKey WireGuardKey
	// Remove removes the peer (the other fields are ignored).
	Remove bool
	// UpdateOnly changes the peer only if the device has it.
	UpdateOnly bool
	// Endpoint, when valid, replaces the peer's endpoint.
	Endpoint netip.AddrPort
	// PersistentKeepalive, when set, replaces the keepalive interval (0
	// turns it off; whole seconds up to MaxWireGuardKeepalive).
	PersistentKeepalive *time.Duration
	// ReplaceAllowedIPs replaces the peer's allowed IPs with AllowedIPs
	// instead of adding to them.
	ReplaceAllowedIPs bool
	// AllowedIPs are prefixes routed to the peer (host bits are cleared,
	// as the kernel does). WireGuard gives a prefix to one peer at a time:
	// adding it to this peer takes it from the one that had it.
	AllowedIPs []netip.Prefix
}

// MaxWireGuardKeepalive is the longest persistent keepalive interval the
// kernel stores (a 16-bit count of seconds).
const MaxWireGuardKeepalive = 65535 * time.Second

// Validate reports whether cfg can be applied to the device called name,
// with an error wrapping ErrInvalid that says why not: a bad interface
// name, a listen port out of range, a keepalive that is negative, not
// whole seconds or above MaxWireGuardKeepalive, an endpoint without a
// port or with a zone, or an invalid allowed IP. Both implementations of
// WireGuard check it before anything is changed.
func (cfg *WireGuardConfig) Validate(name string) error {
	if err := ifname.Valid(name); err != nil {
		return invalid("wireguard device: %v", err)
	}
	if p := cfg.ListenPort; p != nil && (*p < 0 || *p > 65535) {
		return invalid("wireguard device %s: listen port %d out of range", name, *p)
	}
	for i := range cfg.Peers {
		p := &cfg.Peers[i]
		if p.Remove {
			continue
		}
		if ka := p.PersistentKeepalive; ka != nil && (*ka < 0 || *ka > MaxWireGuardKeepalive || *ka%time.Second != 0) {
			return invalid("wireguard device %s: peer %s: keepalive %v is not whole seconds from 0 to %v", name, p.PublicKey, *ka, MaxWireGuardKeepalive)
		}
		if e := p.Endpoint; e.IsValid() && (e.Port() == 0 || e.Addr().Zone() != "") {
			return invalid("wireguard device %s: peer %s: endpoint %s needs a port and no zone", name, p.PublicKey, e)
		}
		for _, a := range p.AllowedIPs {
			if !a.IsValid() || a.Addr().Zone() != "" {
				return invalid("wireguard device %s: peer %s: allowed IP %v", name, p.PublicKey, a)
			}
		}
	}
	return nil
}
