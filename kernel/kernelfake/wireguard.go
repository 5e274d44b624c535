package kernelfake

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"golang.org/x/crypto/curve25519"

	"github.com/nodeplane/nodeplane/kernel"
)

// The WireGuard methods, for Fail, Refuse and Calls.
const (
	OpWireGuardDevice    Op = "WireGuardDevice"
	OpConfigureWireGuard Op = "ConfigureWireGuard"
)

// errNoWireGuard is the error of the WireGuard methods of a namespace
// whose Kinds lack kernel.KindWireGuard: a kernel without the module.
var errNoWireGuard = fmt.Errorf("kernelfake: no wireguard module (add kernel.KindWireGuard to Options.Kinds): %w", kernel.ErrNotSupported)

// WireGuardDevice implements kernel.WireGuard: the configuration of the
// link called name, which must be of kernel.KindWireGuard (else the error
// wraps kernel.ErrNotFound). A namespace whose Options.Kinds lack
// kernel.KindWireGuard has no WireGuard: every call fails with an error
// wrapping kernel.ErrNotSupported, as on a kernel without the module.
func (ns *Namespace) WireGuardDevice(ctx context.Context, name string) (kernel.WireGuardDevice, error) {
	unlock, err := ns.begin(ctx, OpWireGuardDevice)
	defer unlock()
	if err != nil {
		return kernel.WireGuardDevice{}, err
	}
	l, err := ns.s.wireGuardLink(name)
	if err != nil {
		return kernel.WireGuardDevice{}, err
	}
	return cloneWireGuard(l.wireGuard()), nil
}

// ConfigureWireGuard implements kernel.WireGuard with WireGuard's
// semantics: unset fields stay; a private key sets the public key (and
// removes a peer that has it); ReplacePeers removes every peer first;
// peers are then applied in order: Remove removes one, UpdateOnly skips
// one the device lacks, a peer with the device's own public key is
// ignored, ReplaceAllowedIPs clears the list before AllowedIPs are added,
// and an allowed IP given to one peer leaves any other. Invalid cfg
// (kernel.WireGuardConfig.Validate) fails with kernel.ErrInvalid and
// changes nothing.
//
// Each peer of cfg counts as one write in Calls and Writes, and the
// device's own fields as one more when any is set (a change of nothing
// counts one). A failure injected with Fail fails a whole call, before
// anything changes. Refuse sees each kernel.WireGuardPeerConfig before it is
// applied: a refusal ends the call there, with the peers before it
// applied, as the kernel stops at the first peer it refuses.
func (ns *Namespace) ConfigureWireGuard(ctx context.Context, name string, cfg kernel.WireGuardConfig) error {
	unlock, err := ns.begin(ctx, OpConfigureWireGuard)
	defer unlock()
	if !ns.admin {
		ns.s.calls[OpConfigureWireGuard] += wireGuardWrites(&cfg) - 1
	}
	if err != nil {
		return err
	}
	if err := cfg.Validate(name); err != nil {
		return fmt.Errorf("kernelfake: %w", err)
	}
	l, err := ns.s.wireGuardLink(name)
	if err != nil {
		return err
	}
	d := l.wireGuard()
	if cfg.PrivateKey != nil {
		d.PrivateKey, d.PublicKey = *cfg.PrivateKey, publicKey(*cfg.PrivateKey)
		if !d.PublicKey.IsZero() {
			d.Peers = slices.DeleteFunc(d.Peers, func(p kernel.WireGuardPeer) bool { return p.PublicKey == d.PublicKey })
		}
	}
	if cfg.ListenPort != nil {
		d.ListenPort = *cfg.ListenPort
	}
	if cfg.FirewallMark != nil {
		d.FirewallMark = *cfg.FirewallMark
	}
	if cfg.ReplacePeers {
		d.Peers = nil
	}
	for _, pc := range cfg.Peers {
		if err := ns.refused(OpConfigureWireGuard, pc); err != nil {
			return err
		}
		configurePeer(d, &pc)
	}
	return nil
}

// wireGuardWrites is how many writes cfg counts as: one per peer, and
// one for the device's own fields when any is set or no peer is.
func wireGuardWrites(cfg *kernel.WireGuardConfig) int {
	n := len(cfg.Peers)
	if cfg.PrivateKey != nil || cfg.ListenPort != nil || cfg.FirewallMark != nil || cfg.ReplacePeers || n == 0 {
		n++
	}
	return n
}

// wireGuardLink returns the WireGuard link called name. The caller holds
// the lock.
func (s *state) wireGuardLink(name string) (*link, error) {
	if !s.kinds[kernel.KindWireGuard] {
		return nil, errNoWireGuard
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	l := s.byName(name)
	if l == nil || l.Kind != kernel.KindWireGuard {
		return nil, errnof(syscall.ENODEV, "wireguard device %q", name)
	}
	return l, nil
}

// wireGuard returns l's device state, made empty on first use: it lives
// and dies with the link.
func (l *link) wireGuard() *kernel.WireGuardDevice {
	if l.wg == nil {
		l.wg = &kernel.WireGuardDevice{Name: l.Name}
	}
	return l.wg
}

// configurePeer applies one peer's change to d.
func configurePeer(d *kernel.WireGuardDevice, pc *kernel.WireGuardPeerConfig) {
	if !d.PublicKey.IsZero() && pc.PublicKey == d.PublicKey {
		return // the kernel ignores a peer with the device's own key
	}
	i := slices.IndexFunc(d.Peers, func(p kernel.WireGuardPeer) bool { return p.PublicKey == pc.PublicKey })
	if pc.Remove {
		if i >= 0 {
			d.Peers = slices.Delete(d.Peers, i, i+1)
		}
		return
	}
	if i < 0 {
		if pc.UpdateOnly {
			return
		}
		d.Peers = append(d.Peers, kernel.WireGuardPeer{PublicKey: pc.PublicKey})
		i = len(d.Peers) - 1
	}
	p := &d.Peers[i]
	if pc.Endpoint.IsValid() {
		p.Endpoint = pc.Endpoint
	}
	if pc.PersistentKeepalive != nil {
		p.PersistentKeepalive = *pc.PersistentKeepalive
	}
	if pc.ReplaceAllowedIPs {
		p.AllowedIPs = nil
	}
	for _, a := range pc.AllowedIPs {
		a = a.Masked()
		for j := range d.Peers {
			if j != i {
				d.Peers[j].AllowedIPs = slices.DeleteFunc(d.Peers[j].AllowedIPs, func(b netip.Prefix) bool { return b == a })
			}
		}
		if !slices.Contains(p.AllowedIPs, a) {
			p.AllowedIPs = append(p.AllowedIPs, a)
		}
	}
}

// publicKey derives the public key of a private one (zero for zero).
func publicKey(priv kernel.WireGuardKey) kernel.WireGuardKey {
	if priv.IsZero() {
		return kernel.WireGuardKey{}
	}
	pub, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		return kernel.WireGuardKey{} // a low-order key: the kernel has no identity either
	}
	return kernel.WireGuardKey(pub)
}

func cloneWireGuard(d *kernel.WireGuardDevice) kernel.WireGuardDevice {
	out := *d
	out.Peers = slices.Clone(d.Peers)
	for i := range out.Peers {
		out.Peers[i].AllowedIPs = slices.Clone(out.Peers[i].AllowedIPs)
	}
	return out
}

// SetWireGuardPeerStats sets the last handshake and the counters of the
// peer of the WireGuard device called name, as traffic would. It reports
// whether the device has that peer. It is for tests: not counted, never
// failed.
func (ns *Namespace) SetWireGuardPeerStats(name string, peer kernel.WireGuardKey, handshake time.Time, rx, tx int64) bool {
	defer ns.lock()()
	l, err := ns.s.wireGuardLink(name)
	if err != nil {
		return false
	}
	d := l.wireGuard()
	for i := range d.Peers {
		if p := &d.Peers[i]; p.PublicKey == peer {
			p.LastHandshake, p.ReceiveBytes, p.TransmitBytes = handshake, rx, tx
			return true
		}
	}
	return false
}

var _ kernel.WireGuard = (*Namespace)(nil)
