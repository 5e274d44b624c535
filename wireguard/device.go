package wireguard

// The device half of the Manager: the interface, its configuration and the
// private key.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
)

// ensureDevice opens the device if the Manager has none (or it vanished),
// sets its MTU and brings it up.
func (m *Manager) ensureDevice(ctx context.Context) error {
	l, err := m.cfg.Kernel.LinkByName(ctx, m.cfg.InterfaceName)
	if err != nil && !errors.Is(err, kernel.ErrNotFound) {
		return err
	}
	exists := err == nil
	if m.dev != nil && (!exists || l.Index != m.linkIndex) {
		// Deleted (or replaced) behind our back: start again.
		m.cfg.Logger.Warn("wireguard: device vanished, making it again", "device", m.cfg.InterfaceName)
		_ = m.dev.Close()
		m.dev, m.cache = nil, nil
	}
	if m.dev == nil {
		if err := m.openDevice(ctx, l, exists); err != nil {
			return err
		}
		if !exists {
			m.writes++
		}
		if l, err = m.cfg.Kernel.LinkByName(ctx, m.cfg.InterfaceName); err != nil {
			return fmt.Errorf("%w: %s made but not found: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.linkIndex = l.Index
		m.resync = true
		m.table.QueueResync()
	}
	mtu, up := m.linkChanges(l)
	if mtu {
		if err := m.cfg.Kernel.SetLinkMTU(ctx, l.Index, m.cfg.mtu); err != nil {
			return fmt.Errorf("%w: MTU of %s: %w", ErrDevice, l.Name, err)
		}
		m.writes++
	}
	if up {
		if err := m.cfg.Kernel.SetLinkUp(ctx, l.Index, true); err != nil {
			return fmt.Errorf("%w: bringing %s up: %w", ErrDevice, l.Name, err)
		}
		m.writes++
		if l, err = m.cfg.Kernel.LinkByName(ctx, m.cfg.InterfaceName); err != nil {
			return err
		}
	}
	if l.Index != m.told.Index || l.State() != m.told.State() {
		m.table.OnIfaceStateChanged(l.Name, l.Index, l.State())
		m.told = l
	}
	return nil
}

// linkChanges decides the link's writes: its MTU, and bringing it up.
func (m *Manager) linkChanges(l kernel.Link) (mtu, up bool) {
	return l.MTU != m.cfg.mtu, !l.AdminUp
}

func (m *Manager) openDevice(ctx context.Context, l kernel.Link, exists bool) error {
	spec := DeviceSpec{Name: m.cfg.InterfaceName, MTU: m.cfg.mtu}
	try := func(p Provider, reason string) error {
		if p == nil {
			return fmt.Errorf("%w: no provider given", ErrNotSupported)
		}
		dev, err := p.Open(ctx, spec)
		if err != nil {
			return err
		}
		m.dev, m.mode, m.modeReason = dev, p.Mode(), reason
		m.cfg.Logger.Info("wireguard: device ready", "device", spec.Name, "mode", p.Mode().String(), "reason", reason)
		return nil
	}
	switch m.cfg.Mode {
	case ModeKernel:
		return try(m.cfg.KernelProvider, "mode kernel asked for")
	case ModeUserspace:
		return try(m.cfg.UserspaceProvider, "mode userspace asked for")
	}
	if exists {
		switch l.Kind {
		case kernel.KindWireGuard:
			return try(m.cfg.KernelProvider, "adopted the kernel device")
		case kernel.KindTUN:
			return try(m.cfg.UserspaceProvider, "a tun device of that name exists")
		default:
			return fmt.Errorf("%w: %s is a %s link", ErrForeignDevice, l.Name, l.Kind)
		}
	}
	kerr := try(m.cfg.KernelProvider, "the kernel has WireGuard")
	if kerr == nil {
		return nil
	}
	if !errors.Is(kerr, ErrNotSupported) {
		return kerr
	}
	uerr := try(m.cfg.UserspaceProvider, "kernel provider: "+kerr.Error())
	if uerr != nil {
		return fmt.Errorf("%w: kernel: %w; userspace: %w", ErrNoProvider, kerr, uerr)
	}
	return nil
}

// ensureConfig reads the device when due, settles the key and writes the
// settings and peers that differ. A peer the device refuses is recorded in
// the ledger and the others are written all the same.
func (m *Manager) ensureConfig(ctx context.Context) error {
	if m.resync || m.cache == nil {
		st, err := m.dev.State(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.cache = newCache(st)
		m.resync, m.fullDiff = false, true
	}
	kc, err := m.chooseKey(m.cache.priv)
	if err != nil {
		return err
	}
	if err := m.ensureKey(kc); err != nil {
		return err
	}
	if set := m.settingsChange(m.cache, m.key, false); set.PrivateKey != nil || set.ListenPort != nil || set.FirewallMark != nil {
		if err := m.dev.Configure(ctx, set); err != nil {
			return fmt.Errorf("%w: settings of %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.writes++
		m.cache.priv, m.cache.listenPort, m.cache.fwmark = m.key, m.cfg.ListenPort, m.cfg.FirewallMark
	}
	if pub := m.pub; pub != m.published {
		m.cfg.Logger.Info("wireguard: public key", "device", m.cfg.InterfaceName, "public_key", pub.String())
		m.toPublish = &pub
		m.published = pub
	}
	for _, c := range chunk(m.peerOps(m.cache, m.fullDiff), m.cfg.PeerChunk) {
		if err := m.writePeers(ctx, c); err != nil {
			return err
		}
	}
	m.failed.Retain(func(k PublicKey) bool {
		_, want := m.in.peers[k]
		_, have := m.cache.peers[k]
		return want || have
	})
	clear(m.in.dirtyKeys)
	m.fullDiff = false
	return nil
}

// writePeers writes a chunk of peer changes in one write; when the device
// refuses it, it writes them one at a time, so that one peer the device
// refuses (recorded in the ledger, retried on its backoff) never holds
// back the others. An error that is the device's and not a peer's (the
// device is gone, the handle closed) ends the Apply.
func (m *Manager) writePeers(ctx context.Context, c []PeerConfig) error {
	err := m.dev.Configure(ctx, DeviceConfig{Peers: c})
	if err == nil {
		m.wrotePeers(c)
		return nil
	}
	if deviceError(err) {
		return fmt.Errorf("%w: peers of %s: %w", ErrDevice, m.cfg.InterfaceName, err)
	}
	for i := range c {
		one := c[i : i+1]
		err := m.dev.Configure(ctx, DeviceConfig{Peers: one})
		switch {
		case err == nil:
			m.wrotePeers(one)
		case deviceError(err):
			return fmt.Errorf("%w: peers of %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		default:
			k := c[i].PublicKey
			if _, dirty := m.in.dirtyKeys[k]; dirty {
				m.failed.Forget(k) // a new declaration starts its backoff over
			}
			m.failed.Fail(k, &dataplane.ObjectError{Driver: "wireguard", Op: peerOp(&c[i]).String(), Kind: kindPeer,
				Name: k.String(), Object: k, Reason: ErrPeer, Err: err})
			m.cfg.Logger.Warn("wireguard: peer not written", "device", m.cfg.InterfaceName, "peer", k.String(), "err", err)
		}
	}
	return nil
}

// wrotePeers records peer changes the device accepted.
func (m *Manager) wrotePeers(c []PeerConfig) {
	m.cache.apply(c)
	m.writes += uint64(len(c))
	for i := range c {
		m.failed.Forget(c[i].PublicKey)
	}
}

// deviceError reports whether err is the device's rather than one peer's:
// the device is gone or cannot be reached.
func deviceError(err error) bool {
	return errors.Is(err, kernel.ErrNotFound) || errors.Is(err, kernel.ErrNotSupported) || errors.Is(err, kernel.ErrClosed) ||
		errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// settingsChange decides the device's own settings to write: the private
// key (newKey: one still to be made), the listen port and the firewall
// mark, each only when it differs from c. Nothing set means no write.
func (m *Manager) settingsChange(c *devCache, key PrivateKey, newKey bool) DeviceConfig {
	var set DeviceConfig
	if newKey || c.priv != key {
		k := key
		set.PrivateKey = &k
	}
	if c.listenPort != m.cfg.ListenPort {
		p := m.cfg.ListenPort
		set.ListenPort = &p
	}
	if c.fwmark != m.cfg.FirewallMark {
		f := m.cfg.FirewallMark
		set.FirewallMark = &f
	}
	return set
}

// peerOps decides the peer writes against the device's view c: every peer
// (full, after a read of the device) or those declared anew since the last
// Apply and those failing, less the failing ones whose retry is not due
// and that were not declared anew.
func (m *Manager) peerOps(c *devCache, full bool) []PeerConfig {
	var ops []PeerConfig
	if full {
		ops = diffPeers(m.in.peers, c.peers, m.cfg.keepalive())
	} else {
		keys := maps.Clone(m.in.dirtyKeys)
		if keys == nil {
			keys = map[PublicKey]struct{}{}
		}
		for _, e := range m.failed.Errors() {
			if k, ok := e.Object.(PublicKey); ok {
				keys[k] = struct{}{}
			}
		}
		ops = diffKeys(keys, m.in.peers, c.peers, m.cfg.keepalive())
	}
	return slices.DeleteFunc(ops, func(pc PeerConfig) bool {
		_, dirty := m.in.dirtyKeys[pc.PublicKey]
		return !dirty && m.failed.Waiting(pc.PublicKey)
	})
}

// keyChoice is the private key an Apply uses, as chooseKey decides it.
type keyChoice struct {
	// key is the key; zero when fresh.
	key PrivateKey
	// fresh says a new key is to be made (none yet, or a rotation).
	fresh bool
	// save says the key file is to be written with key (the device kept a
	// key the file lost).
	save bool
	// loose says the key file is readable by others: tighten it.
	loose bool
}

// chooseKey decides the key, reading the key file (once: the Manager keeps
// the key it loaded) and nothing else: the file's key; if there is no
// file, the device's own key devPriv, or a new one; a new one when a
// rotation is asked for.
func (m *Manager) chooseKey(devPriv PrivateKey) (keyChoice, error) {
	kc := keyChoice{key: m.key}
	if kc.key.IsZero() {
		k, err := ReadKeyFile(m.cfg.KeyFile)
		switch {
		case err == nil:
			kc.key = k
			if fi, serr := os.Stat(m.cfg.KeyFile); serr == nil && fi.Mode().Perm()&^KeyFileMode != 0 {
				kc.loose = true
			}
		case isNotExist(err):
			kc.key, kc.save, kc.fresh = devPriv, !devPriv.IsZero(), devPriv.IsZero()
		default:
			return kc, err
		}
	}
	if m.rotate {
		kc.key, kc.save, kc.fresh = PrivateKey{}, false, true
	}
	return kc, nil
}

// ensureKey carries out what chooseKey decided: it tightens or writes the
// key file, makes a new key when one is due, and takes the key.
func (m *Manager) ensureKey(kc keyChoice) error {
	if kc.loose {
		m.cfg.Logger.Warn("wireguard: key file readable by others, tightening it", "path", m.cfg.KeyFile)
		if err := os.Chmod(m.cfg.KeyFile, KeyFileMode); err != nil {
			return fmt.Errorf("%w: %w", ErrKeyFile, err)
		}
	}
	k := kc.key
	if kc.fresh {
		var err error
		if k, err = GeneratePrivateKey(); err != nil {
			return err
		}
		kc.save = true
		m.cfg.Logger.Info("wireguard: made a private key", "path", m.cfg.KeyFile, "rotation", m.rotate)
	} else if kc.save {
		m.cfg.Logger.Info("wireguard: keeping the device's private key", "path", m.cfg.KeyFile)
	}
	if kc.save {
		if err := WriteKeyFile(m.cfg.KeyFile, k); err != nil {
			return err
		}
	}
	if k != m.key {
		m.key, m.pub = k, k.Public()
		m.in.setSelf(m.pub) // our own key takes part in conflicts
	}
	m.rotate = false
	return nil
}
