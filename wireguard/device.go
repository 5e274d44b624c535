package wireguard

// The device half of the Manager: the interface, its configuration and the
// private key.

import (
	"context"
	"errors"
	"fmt"
	"os"

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
		if l, err = m.cfg.Kernel.LinkByName(ctx, m.cfg.InterfaceName); err != nil {
			return fmt.Errorf("%w: %s made but not found: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.linkIndex = l.Index
		m.resync = true
		m.table.QueueResync()
	}
	if l.MTU != m.cfg.mtu {
		if err := m.cfg.Kernel.SetLinkMTU(ctx, l.Index, m.cfg.mtu); err != nil {
			return fmt.Errorf("%w: MTU of %s: %w", ErrDevice, l.Name, err)
		}
	}
	if !l.AdminUp {
		if err := m.cfg.Kernel.SetLinkUp(ctx, l.Index, true); err != nil {
			return fmt.Errorf("%w: bringing %s up: %w", ErrDevice, l.Name, err)
		}
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
// settings and peers that differ.
func (m *Manager) ensureConfig(ctx context.Context) error {
	if m.resync || m.cache == nil {
		st, err := m.dev.State(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.cache = newCache(st)
		m.resync, m.fullDiff = false, true
	}
	if err := m.ensureKey(); err != nil {
		return err
	}
	var set DeviceConfig
	if m.cache.priv != m.key {
		k := m.key
		set.PrivateKey = &k
	}
	if m.cache.listenPort != m.cfg.ListenPort {
		p := m.cfg.ListenPort
		set.ListenPort = &p
	}
	if m.cache.fwmark != m.cfg.FirewallMark {
		f := m.cfg.FirewallMark
		set.FirewallMark = &f
	}
	if set.PrivateKey != nil || set.ListenPort != nil || set.FirewallMark != nil {
		if err := m.dev.Configure(ctx, set); err != nil {
			return fmt.Errorf("%w: settings of %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.cache.priv, m.cache.listenPort, m.cache.fwmark = m.key, m.cfg.ListenPort, m.cfg.FirewallMark
	}
	if pub := m.pub; pub != m.published {
		m.cfg.Logger.Info("wireguard: public key", "device", m.cfg.InterfaceName, "public_key", pub.String())
		m.toPublish = &pub
		m.published = pub
	}
	var ops []PeerConfig
	if m.fullDiff {
		ops = diffPeers(m.in.peers, m.cache.peers, m.cfg.keepalive())
	} else {
		ops = diffKeys(m.in.dirtyKeys, m.in.peers, m.cache.peers, m.cfg.keepalive())
	}
	for _, c := range chunk(ops, m.cfg.PeerChunk) {
		if err := m.dev.Configure(ctx, DeviceConfig{Peers: c}); err != nil {
			return fmt.Errorf("%w: peers of %s: %w", ErrDevice, m.cfg.InterfaceName, err)
		}
		m.cache.apply(c)
	}
	clear(m.in.dirtyKeys)
	m.fullDiff = false
	return nil
}

// ensureKey loads the key file (once), making a key when there is none, and
// rotates the key when asked.
func (m *Manager) ensureKey() error {
	if m.key.IsZero() {
		k, err := ReadKeyFile(m.cfg.KeyFile)
		switch {
		case err == nil:
			if fi, serr := os.Stat(m.cfg.KeyFile); serr == nil && fi.Mode().Perm()&^KeyFileMode != 0 {
				m.cfg.Logger.Warn("wireguard: key file readable by others, tightening it", "path", m.cfg.KeyFile, "mode", fi.Mode().Perm().String())
				if cerr := os.Chmod(m.cfg.KeyFile, KeyFileMode); cerr != nil {
					return fmt.Errorf("%w: %w", ErrKeyFile, cerr)
				}
			}
		case isNotExist(err):
			if k = m.cache.priv; k.IsZero() {
				if k, err = GeneratePrivateKey(); err != nil {
					return err
				}
				m.cfg.Logger.Info("wireguard: generated a private key", "path", m.cfg.KeyFile)
			} else {
				m.cfg.Logger.Info("wireguard: keeping the device's private key", "path", m.cfg.KeyFile)
			}
			if err := WriteKeyFile(m.cfg.KeyFile, k); err != nil {
				return err
			}
		default:
			return err
		}
		m.key, m.pub = k, k.Public()
		m.in.setSelf(m.pub) // our own key takes part in conflicts
	}
	if m.rotate {
		k, err := GeneratePrivateKey()
		if err != nil {
			return err
		}
		if err := WriteKeyFile(m.cfg.KeyFile, k); err != nil {
			return err
		}
		m.cfg.Logger.Info("wireguard: rotated the private key", "path", m.cfg.KeyFile)
		m.key, m.pub, m.rotate = k, k.Public(), false
		m.in.setSelf(m.pub)
	}
	return nil
}
