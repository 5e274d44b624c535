package wireguard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/internal/tunnel"
	"github.com/nodeplane/nodeplane/kernel"
)

// The kinds of the device driver's objects in its Plan, State and errors.
const (
	// kindPeer is a peer of the device, named by its public key.
	kindPeer dataplane.ObjectKind = "peer"
	// kindDevice is the device itself: its making and its own settings
	// (private key, listen port, firewall mark).
	kindDevice dataplane.ObjectKind = "device"
	// kindLink is the device's interface: its MTU and admin state.
	kindLink dataplane.ObjectKind = "link"
	// kindSysctl is the sysctl host encryption needs.
	kindSysctl dataplane.ObjectKind = "sysctl"
)

// peerOp is the kind of write a peer change is.
func peerOp(pc *PeerConfig) dataplane.WriteOp {
	switch {
	case pc.Remove:
		return dataplane.WriteDelete
	case pc.UpdateOnly:
		return dataplane.WriteReplace
	}
	return dataplane.WriteAdd
}

// view is the device as the next Apply will find it, read without a
// write.
type view struct {
	// link is the device's interface (for a device to make, as it will be
	// made: down, with the Manager's MTU).
	link kernel.Link
	// create says there is no device: Apply makes one.
	create bool
	// cache is the device's configuration (empty for one to make).
	cache *devCache
	// full says Apply compares every peer (after a read of the device).
	full bool
}

// view reads the device where the next Apply reads it: the Manager's own
// device (read again when a resync is due; that read serves the Apply), a
// kernel device it will adopt (read through kernel.WireGuard), or none. A
// link of that name the Manager cannot adopt is an error wrapping
// ErrForeignDevice, as Apply's. The caller holds the lock.
func (m *Manager) view(ctx context.Context) (view, error) {
	name := m.cfg.InterfaceName
	l, err := m.cfg.Kernel.LinkByName(ctx, name)
	if err != nil && !errors.Is(err, kernel.ErrNotFound) {
		return view{}, err
	}
	exists := err == nil
	switch {
	case m.dev != nil && exists && l.Index == m.linkIndex:
		if m.resync || m.cache == nil {
			st, err := m.dev.State(ctx)
			if err != nil {
				return view{}, fmt.Errorf("%w: reading %s: %w", ErrDevice, name, err)
			}
			m.cache = newCache(st)
			m.resync, m.fullDiff = false, true
		}
		return view{link: l, cache: m.cache, full: m.fullDiff}, nil
	case !exists:
		return view{link: kernel.Link{Name: name, Kind: kernel.KindWireGuard, MTU: m.cfg.mtu}, create: true,
			cache: newCache(DeviceState{}), full: true}, nil
	case l.Kind != kernel.KindWireGuard || m.cfg.Mode == ModeUserspace:
		return view{}, fmt.Errorf("%w: %s is a %s link", ErrForeignDevice, name, l.Kind)
	}
	kd, err := m.cfg.Kernel.WireGuardDevice(ctx, name)
	if err != nil {
		return view{}, fmt.Errorf("%w: reading %s: %w", ErrDevice, name, err)
	}
	return view{link: l, cache: newCache(fromKernelDevice(&kd)), full: true}, nil
}

// Plan returns the writes the device driver's next Apply would make, in
// its order: the device to make ("+ device", kernel or userspace as Apply
// chooses), its link's MTU and admin state ("~ link"), its own settings
// ("~ device": private key, listen port, firewall mark), its peers ("+
// peer KEY endpoint … allowed-ips …", "~ peer …" with what it was, "-
// peer KEY") and the sysctl of host encryption. It decides with Apply's
// own code (linkChanges, chooseKey, settingsChange, peerOps, sysctlDue)
// on the device as Apply will find it, and writes nothing, the key file
// included: a key still to be made is "private-key (new)". Peers waiting
// for their retry are not in it. Disabled, it is empty: the rule driver
// takes the rule, the routes and then the device down. It implements
// dataplane.Planner. A nil ctx is context.Background().
func (m *Manager) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := dataplane.Plan{Driver: m.Name()}
	if m.closed {
		return p, ErrClosed
	}
	m.failed.Begin()
	if !m.enabled {
		return p, nil
	}
	v, err := m.view(ctx)
	if err != nil {
		return p, err
	}
	name := m.cfg.InterfaceName
	add := func(op dataplane.WriteOp, kind dataplane.ObjectKind, obj, detail string) {
		p.Writes = append(p.Writes, dataplane.Write{Op: op, Kind: kind, Object: obj, Detail: detail})
	}
	if v.create {
		add(dataplane.WriteAdd, kindDevice, fmt.Sprintf("%s mtu %d", name, m.cfg.mtu), "mode "+m.cfg.Mode.String())
	}
	if mtu, up := m.linkChanges(v.link); mtu || up {
		if mtu {
			add(dataplane.WriteReplace, kindLink, fmt.Sprintf("%s mtu %d", name, m.cfg.mtu), fmt.Sprintf("was %d", v.link.MTU))
		}
		if up {
			add(dataplane.WriteReplace, kindLink, name+" up", "")
		}
	}
	if m.addrDue || m.resync {
		if _, err := tunnel.SyncAddr(ctx, m.cfg.Kernel, name, v.link.Index, m.cfg.Family, m.selfPrefix(), &p.Writes); err != nil {
			return dataplane.Plan{Driver: m.Name()}, fmt.Errorf("%w: %w", ErrDevice, err)
		}
	}
	kc, err := m.chooseKey(v.cache.priv)
	if err != nil {
		return dataplane.Plan{Driver: m.Name()}, err
	}
	if set := m.settingsChange(v.cache, kc.key, kc.fresh); set.PrivateKey != nil || set.ListenPort != nil || set.FirewallMark != nil {
		obj, was := settingsText(name, &set, v.cache, kc.fresh)
		add(dataplane.WriteReplace, kindDevice, obj, was)
	}
	for _, pc := range m.peerOps(v.cache, v.full) {
		obj, detail := m.peerWriteText(&pc, v.cache)
		add(peerOp(&pc), kindPeer, obj, detail)
	}
	if m.sysctlDue() {
		add(dataplane.WriteReplace, kindSysctl, srcValidMark+" = 1", "")
	}
	if err := ctx.Err(); err != nil {
		return dataplane.Plan{Driver: m.Name()}, fmt.Errorf("wireguard: %s: %w", m.Name(), err)
	}
	return p, nil
}

// State returns the device and its peers as the kernel holds them, the
// peers and settings that differ from what the Manager wants (a device
// that does not exist: every peer missing), and the peers failing. It
// reads the device as Plan does, and writes nothing. Disabled, the
// Manager wants nothing: what the device holds is drift. It implements
// dataplane.Stater. A nil ctx is context.Background().
func (m *Manager) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := dataplane.State{Driver: m.Name()}
	if m.closed {
		return st, ErrClosed
	}
	v, err := m.view(ctx)
	if err != nil {
		return st, err
	}
	name := m.cfg.InterfaceName
	want := map[PublicKey]string{}
	wantDev := ""
	if m.enabled {
		for k, p := range m.in.peers {
			want[k] = peerText(k, p.endpoint, m.cfg.keepalive(), p.allowed)
		}
		wantDev = m.deviceText(m.pub, m.cfg.ListenPort, m.cfg.FirewallMark)
	}
	if !v.create {
		c := v.cache
		haveDev := m.deviceText(c.priv.Public(), c.listenPort, c.fwmark)
		if c.priv.IsZero() {
			haveDev = m.deviceText(PublicKey{}, c.listenPort, c.fwmark)
		}
		st.Owned = append(st.Owned, dataplane.Object{Kind: kindDevice, Text: haveDev})
		if m.pub.IsZero() && m.enabled { // the key is not loaded yet: compare the rest
			wantDev = m.deviceText(c.priv.Public(), m.cfg.ListenPort, m.cfg.FirewallMark)
			if c.priv.IsZero() {
				wantDev = m.deviceText(PublicKey{}, m.cfg.ListenPort, m.cfg.FirewallMark)
			}
		}
		if haveDev != wantDev {
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindDevice, Name: name, Want: wantDev, Have: haveDev})
		}
		for k, h := range c.peers {
			have := peerText(k, h.endpoint, h.keepalive, h.allowed)
			st.Owned = append(st.Owned, dataplane.Object{Kind: kindPeer, Text: have})
			if w := want[k]; w != have {
				st.Drift = append(st.Drift, dataplane.Drift{Kind: kindPeer, Name: k.String(), Want: w, Have: have})
			}
		}
	} else if m.enabled {
		st.Drift = append(st.Drift, dataplane.Drift{Kind: kindDevice, Name: name, Want: wantDev})
	}
	for k, w := range want {
		if v.create || v.cache.peers[k] == nil {
			st.Drift = append(st.Drift, dataplane.Drift{Kind: kindPeer, Name: k.String(), Want: w})
		}
	}
	st.Failing = m.failed.Errors()
	dataplane.SortState(&st)
	return st, nil
}

// Stats returns the device driver's dataplane.DriverStats: the peers the
// Manager wants (none when disabled), the peers the device holds as last
// read or written, the peers failing, and the kernel writes it made (the
// device's making, link, settings and sysctl writes, one per peer written,
// the device's deletion). It implements dataplane.StatsReporter.
func (m *Manager) Stats() dataplane.DriverStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := dataplane.DriverStats{Failing: m.failed.Len(), Writes: m.writes}
	if m.enabled {
		s.Desired = len(m.in.peers)
	}
	if m.dev != nil && m.cache != nil {
		s.InKernel = len(m.cache.peers)
	}
	return s
}

// peerText is a peer in the driver's canonical text: "KEY endpoint E
// allowed-ips P,Q" and, when on, " keepalive Ns".
func peerText(k PublicKey, endpoint netip.AddrPort, keepalive time.Duration, allowed []netip.Prefix) string {
	var b strings.Builder
	b.WriteString(k.String())
	b.WriteString(" endpoint ")
	if endpoint.IsValid() {
		b.WriteString(endpoint.String())
	} else {
		b.WriteString("none")
	}
	b.WriteString(" allowed-ips ")
	b.WriteString(prefixesText(allowed))
	if keepalive > 0 {
		b.WriteString(" keepalive " + keepalive.String())
	}
	return b.String()
}

func prefixesText(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// peerWriteText is the Object and Detail of a peer write in a Plan: the
// peer as it will be (its key alone for a removal) and, for a change, what
// it was.
func (m *Manager) peerWriteText(pc *PeerConfig, c *devCache) (obj, detail string) {
	if pc.Remove {
		return pc.PublicKey.String(), ""
	}
	w := m.in.peers[pc.PublicKey]
	obj = peerText(pc.PublicKey, w.endpoint, m.cfg.keepalive(), w.allowed)
	if h := c.peers[pc.PublicKey]; h != nil && pc.UpdateOnly {
		detail = "was " + peerText(pc.PublicKey, h.endpoint, h.keepalive, h.allowed)[len(pc.PublicKey.String())+1:]
	}
	return obj, detail
}

// deviceText is the device in the driver's canonical text: "NAME
// public-key K listen-port P fwmark 0xM".
func (m *Manager) deviceText(pub PublicKey, port int, mark uint32) string {
	key := "none"
	if !pub.IsZero() {
		key = pub.String()
	}
	return fmt.Sprintf("%s public-key %s listen-port %d fwmark %#x", m.cfg.InterfaceName, key, port, mark)
}

// settingsText is the Object and Detail of a settings write: the fields
// set, and what they were.
func settingsText(name string, set *DeviceConfig, c *devCache, fresh bool) (obj, was string) {
	var now, before []string
	if set.PrivateKey != nil {
		if fresh {
			now = append(now, "private-key (new)")
		} else {
			now = append(now, "private-key (public-key "+set.PrivateKey.Public().String()+")")
		}
		if c.priv.IsZero() {
			before = append(before, "no private-key")
		} else {
			before = append(before, "private-key (public-key "+c.priv.Public().String()+")")
		}
	}
	if set.ListenPort != nil {
		now = append(now, fmt.Sprintf("listen-port %d", *set.ListenPort))
		before = append(before, fmt.Sprintf("listen-port %d", c.listenPort))
	}
	if set.FirewallMark != nil {
		now = append(now, fmt.Sprintf("fwmark %#x", *set.FirewallMark))
		before = append(before, fmt.Sprintf("fwmark %#x", c.fwmark))
	}
	return name + " " + strings.Join(now, " "), "was " + strings.Join(before, " ")
}

var (
	_ dataplane.Planner       = (*Manager)(nil)
	_ dataplane.Stater        = (*Manager)(nil)
	_ dataplane.StatsReporter = (*Manager)(nil)
)
