// Package wireguardfake is an in-memory WireGuard for tests of package
// wireguard and of agents built on it: a Kernel holds devices with
// WireGuard's configuration semantics and offers both ways the Manager
// reaches a device — a wgctrl-style client for the kernel provider
// (NewClient, with a kernelfake.Namespace that knows the wireguard link
// kind) and a userspace-style provider (Provider) that makes a tun link in
// a kernelfake.Namespace.
//
// # What it models
//
// A device has a private key (its public key derived), a listen port,
// a firewall mark and peers with endpoint, keepalive, allowed IPs and
// counters. A configuration change applies as WireGuard applies it:
// unset fields stay, ReplacePeers removes the peers not named, Remove
// removes a peer, UpdateOnly skips an unknown peer, ReplaceAllowedIPs
// replaces the list, and an allowed IP given to one peer leaves any other
// peer. A device's state goes with its link: the kernel client sees a
// device only while the namespace has a wireguard link of that name, and
// a userspace device disappears (link and state) when it is closed.
//
// # Failure injection and inspection
//
// Fail(op, n, err) makes the next n calls of an Op fail (n < 0: until
// ClearFailures). Calls counts calls; Log records every configuration
// change written (ResetLog starts over), so a test can check what was
// sent: how many peers per write, that nothing was written. State shows a
// device as it is; SetPeerStats sets a peer's handshake time and counters,
// as traffic would.
//
// It touches no kernel state and starts no goroutines. A Kernel is safe
// for concurrent use.
package wireguardfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/wireguard"
)

// ErrInjected is what a call made to fail by Fail with a nil error returns.
var ErrInjected = errors.New("wireguardfake: injected failure")

// Op names a call for Fail and Calls.
type Op string

// The calls.
const (
	// OpOpen is Provider's Open and the kernel client's opening.
	OpOpen Op = "Open"
	// OpState is a read of a device (State, Device).
	OpState Op = "State"
	// OpConfigure is a write of a device (Configure, ConfigureDevice).
	OpConfigure Op = "Configure"
)

// Write is one configuration change a device received.
type Write struct {
	// Device is the device's name.
	Device string
	// Config is the change.
	Config wireguard.DeviceConfig
}

// Kernel is the in-memory WireGuard of one fake machine.
type Kernel struct {
	ns *kernelfake.Namespace

	mu       sync.Mutex
	devs     map[string]*dev
	fails    map[Op][]error
	failEver map[Op]error
	calls    map[Op]int
	log      []Write
}

type dev struct {
	index     int
	userspace bool
	st        wireguard.DeviceState
}

// New returns a Kernel whose devices live in ns: the kernel client finds
// a device while ns has a wireguard link of its name, and Provider makes
// tun links there. ns may be nil for a Kernel used through Provider alone…
// which then cannot make links: pass a namespace.
func New(ns *kernelfake.Namespace) *Kernel {
	return &Kernel{ns: ns, devs: map[string]*dev{}, fails: map[Op][]error{}, failEver: map[Op]error{}, calls: map[Op]int{}}
}

// Fail makes the next n calls of op fail with err (nil: ErrInjected); n < 0
// fails every call until ClearFailures.
func (k *Kernel) Fail(op Op, n int, err error) {
	if err == nil {
		err = ErrInjected
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if n < 0 {
		k.failEver[op] = err
		return
	}
	for range n {
		k.fails[op] = append(k.fails[op], err)
	}
}

// ClearFailures removes every queued failure.
func (k *Kernel) ClearFailures() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fails, k.failEver = map[Op][]error{}, map[Op]error{}
}

// Calls returns how many calls of op were made, failed ones included.
func (k *Kernel) Calls(op Op) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[op]
}

// Log returns the configuration changes written so far, in order.
func (k *Kernel) Log() []Write {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.log)
}

// ResetLog forgets the changes written and the call counts.
func (k *Kernel) ResetLog() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log, k.calls = nil, map[Op]int{}
}

// State returns the device called name as it is, and false if there is none.
func (k *Kernel) State(name string) (wireguard.DeviceState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.lookup(name)
	if d == nil {
		return wireguard.DeviceState{}, false
	}
	return clone(d.st), true
}

// SetPeerStats sets a peer's last handshake and counters, as traffic would.
// It reports whether the device has that peer.
func (k *Kernel) SetPeerStats(name string, peer wireguard.PublicKey, handshake time.Time, rx, tx int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.lookup(name)
	if d == nil {
		return false
	}
	for i := range d.st.Peers {
		if d.st.Peers[i].PublicKey == peer {
			d.st.Peers[i].LastHandshake, d.st.Peers[i].ReceiveBytes, d.st.Peers[i].TransmitBytes = handshake, rx, tx
			return true
		}
	}
	return false
}

// call counts op and returns its injected failure, if any.
func (k *Kernel) call(op Op) error {
	k.calls[op]++
	if err := k.failEver[op]; err != nil {
		return err
	}
	if q := k.fails[op]; len(q) > 0 {
		k.fails[op] = q[1:]
		return q[0]
	}
	return nil
}

// lookup returns the device called name, dropping it when its link is gone
// or was replaced.
func (k *Kernel) lookup(name string) *dev {
	d := k.devs[name]
	if k.ns == nil {
		return d
	}
	l, ok := k.ns.Link(name)
	if !ok || (d != nil && d.index != l.Index) {
		delete(k.devs, name)
		d = nil
	}
	if d == nil && ok && l.Kind == kernel.KindWireGuard {
		d = &dev{index: l.Index, st: wireguard.DeviceState{Name: name}}
		k.devs[name] = d
	}
	return d
}

func clone(st wireguard.DeviceState) wireguard.DeviceState {
	st.Peers = slices.Clone(st.Peers)
	for i := range st.Peers {
		st.Peers[i].AllowedIPs = slices.Clone(st.Peers[i].AllowedIPs)
	}
	return st
}

// configure applies cfg to d with WireGuard's semantics.
func configure(d *dev, cfg wireguard.DeviceConfig) {
	if cfg.PrivateKey != nil {
		d.st.PrivateKey = *cfg.PrivateKey
		d.st.PublicKey = cfg.PrivateKey.Public()
		if cfg.PrivateKey.IsZero() {
			d.st.PublicKey = wireguard.PublicKey{}
		}
	}
	if cfg.ListenPort != nil {
		d.st.ListenPort = *cfg.ListenPort
	}
	if cfg.FirewallMark != nil {
		d.st.FirewallMark = *cfg.FirewallMark
	}
	if cfg.ReplacePeers {
		keep := map[wireguard.PublicKey]bool{}
		for _, p := range cfg.Peers {
			keep[p.PublicKey] = true
		}
		d.st.Peers = slices.DeleteFunc(d.st.Peers, func(p wireguard.PeerState) bool { return !keep[p.PublicKey] })
	}
	for _, pc := range cfg.Peers {
		i := slices.IndexFunc(d.st.Peers, func(p wireguard.PeerState) bool { return p.PublicKey == pc.PublicKey })
		if pc.Remove {
			if i >= 0 {
				d.st.Peers = slices.Delete(d.st.Peers, i, i+1)
			}
			continue
		}
		if i < 0 {
			if pc.UpdateOnly {
				continue
			}
			d.st.Peers = append(d.st.Peers, wireguard.PeerState{PublicKey: pc.PublicKey})
			i = len(d.st.Peers) - 1
		}
		p := &d.st.Peers[i]
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
			for j := range d.st.Peers {
				if j != i {
					d.st.Peers[j].AllowedIPs = slices.DeleteFunc(d.st.Peers[j].AllowedIPs, func(b netip.Prefix) bool { return b == a })
				}
			}
			if !slices.Contains(p.AllowedIPs, a) {
				p.AllowedIPs = append(p.AllowedIPs, a)
			}
		}
	}
}

func cloneConfig(cfg wireguard.DeviceConfig) wireguard.DeviceConfig {
	cfg.Peers = slices.Clone(cfg.Peers)
	for i := range cfg.Peers {
		cfg.Peers[i].AllowedIPs = slices.Clone(cfg.Peers[i].AllowedIPs)
	}
	return cfg
}

// write applies a change to the device called name.
func (k *Kernel) write(name string, cfg wireguard.DeviceConfig) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.call(OpConfigure); err != nil {
		return err
	}
	d := k.lookup(name)
	if d == nil {
		return fmt.Errorf("wireguardfake: %s: %w", name, os.ErrNotExist)
	}
	configure(d, cfg)
	k.log = append(k.log, Write{Device: name, Config: cloneConfig(cfg)})
	return nil
}

// read returns the device called name.
func (k *Kernel) read(name string) (wireguard.DeviceState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.call(OpState); err != nil {
		return wireguard.DeviceState{}, err
	}
	d := k.lookup(name)
	if d == nil {
		return wireguard.DeviceState{}, fmt.Errorf("wireguardfake: %s: %w", name, os.ErrNotExist)
	}
	return clone(d.st), nil
}

// NewClient opens a wgctrl-style client on the namespace's kernel devices,
// for wireguard.KernelProviderOptions.NewClient. Its Device fails with an
// error wrapping os.ErrNotExist unless the namespace has a wireguard link
// of that name.
func (k *Kernel) NewClient() (wireguard.WGClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.call(OpOpen); err != nil {
		return nil, err
	}
	return &client{k: k}, nil
}

type client struct{ k *Kernel }

func (c *client) Close() error { return nil }

func (c *client) Device(name string) (*wgtypes.Device, error) {
	st, err := c.k.read(name)
	if err != nil {
		return nil, err
	}
	wd := &wgtypes.Device{Name: name, Type: wgtypes.LinuxKernel, PrivateKey: wgtypes.Key(st.PrivateKey),
		PublicKey: wgtypes.Key(st.PublicKey), ListenPort: st.ListenPort, FirewallMark: int(st.FirewallMark)}
	for _, p := range st.Peers {
		wp := wgtypes.Peer{PublicKey: wgtypes.Key(p.PublicKey), PersistentKeepaliveInterval: p.PersistentKeepalive,
			LastHandshakeTime: p.LastHandshake, ReceiveBytes: p.ReceiveBytes, TransmitBytes: p.TransmitBytes}
		if p.Endpoint.IsValid() {
			wp.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
		}
		for _, a := range p.AllowedIPs {
			wp.AllowedIPs = append(wp.AllowedIPs, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
		}
		wd.Peers = append(wd.Peers, wp)
	}
	return wd, nil
}

func (c *client) ConfigureDevice(name string, wc wgtypes.Config) error {
	var cfg wireguard.DeviceConfig
	if wc.PrivateKey != nil {
		k := wireguard.PrivateKey(*wc.PrivateKey)
		cfg.PrivateKey = &k
	}
	cfg.ListenPort = wc.ListenPort
	if wc.FirewallMark != nil {
		m := uint32(*wc.FirewallMark)
		cfg.FirewallMark = &m
	}
	cfg.ReplacePeers = wc.ReplacePeers
	for _, wp := range wc.Peers {
		pc := wireguard.PeerConfig{PublicKey: wireguard.PublicKey(wp.PublicKey), Remove: wp.Remove, UpdateOnly: wp.UpdateOnly,
			PersistentKeepalive: wp.PersistentKeepaliveInterval, ReplaceAllowedIPs: wp.ReplaceAllowedIPs}
		if wp.Endpoint != nil {
			ap := wp.Endpoint.AddrPort()
			pc.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
		for _, n := range wp.AllowedIPs {
			a, _ := netip.AddrFromSlice(n.IP)
			ones, bits := n.Mask.Size()
			if bits == 32 {
				a = a.Unmap()
			}
			pc.AllowedIPs = append(pc.AllowedIPs, netip.PrefixFrom(a, ones))
		}
		cfg.Peers = append(cfg.Peers, pc)
	}
	return c.k.write(name, cfg)
}

// Provider returns a userspace-style provider: Open makes a tun link in
// the Kernel's namespace (kernelfake.Namespace.AddTUN, with its carrier, as
// the attached process gives it) and a device for it; the device's Close
// and Delete remove both, as a userspace device's end does. A name already
// taken fails with an error wrapping wireguard.ErrForeignDevice.
func (k *Kernel) Provider() wireguard.Provider { return &provider{k: k} }

type provider struct{ k *Kernel }

func (p *provider) Mode() wireguard.Mode { return wireguard.ModeUserspace }

func (p *provider) Open(ctx context.Context, spec wireguard.DeviceSpec) (wireguard.Device, error) {
	k := p.k
	k.mu.Lock()
	err := k.call(OpOpen)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if k.ns == nil {
		return nil, fmt.Errorf("wireguardfake: a Kernel without a namespace cannot make links")
	}
	admin := k.ns.Admin()
	if _, ok := k.ns.Link(spec.Name); ok {
		return nil, fmt.Errorf("%w: %s exists", wireguard.ErrForeignDevice, spec.Name)
	}
	l, err := admin.AddTUN(spec.Name)
	if err != nil {
		return nil, err
	}
	if spec.MTU > 0 {
		if err := admin.SetLinkMTU(ctx, l.Index, spec.MTU); err != nil {
			return nil, err
		}
	}
	if err := admin.SetCarrier(spec.Name, true); err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.devs[spec.Name] = &dev{index: l.Index, userspace: true, st: wireguard.DeviceState{Name: spec.Name}}
	k.mu.Unlock()
	return &userDev{k: k, name: spec.Name, index: l.Index}, nil
}

type userDev struct {
	k      *Kernel
	name   string
	index  int
	mu     sync.Mutex
	closed bool
}

func (d *userDev) Name() string         { return d.name }
func (d *userDev) Mode() wireguard.Mode { return wireguard.ModeUserspace }

func (d *userDev) State(context.Context) (wireguard.DeviceState, error) {
	if d.isClosed() {
		return wireguard.DeviceState{}, wireguard.ErrClosed
	}
	return d.k.read(d.name)
}

func (d *userDev) Configure(_ context.Context, cfg wireguard.DeviceConfig) error {
	if d.isClosed() {
		return wireguard.ErrClosed
	}
	return d.k.write(d.name, cfg)
}

func (d *userDev) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

func (d *userDev) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.k.mu.Lock()
	if cur := d.k.devs[d.name]; cur != nil && cur.index == d.index {
		delete(d.k.devs, d.name)
	}
	d.k.mu.Unlock()
	err := d.k.ns.Admin().DeleteLink(context.Background(), d.index)
	if errors.Is(err, kernel.ErrNotFound) || errors.Is(err, syscall.ENODEV) {
		err = nil
	}
	return err
}

func (d *userDev) Delete(context.Context) error { return d.Close() }
