package kernelfake

import (
	"github.com/nodeplane/nodeplane/internal/ifname"

	"cmp"
	"context"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/kernel"
)

// link is one interface of a namespace.
type link struct {
	kernel.Link
	ns *state
	// noCarrier forces the carrier off: SetCarrier(false), or a tun device
	// that no process has opened.
	noCarrier bool
	// peer is the other end of a veth pair (maybe in another namespace).
	peer *link
	// addrs are the interface's addresses, in the order they were added.
	addrs []*addr
	// ready is IPv6's IF_READY: the link has been running since it last
	// came up, so its link-local address and multicast route exist.
	ready bool
	// wg is a WireGuard link's device configuration (wireguard.go).
	wg *kernel.WireGuardDevice
}

// addr is one address of a link.
type addr struct {
	prefix netip.Prefix
	// tentative is set for an IPv6 address whose duplicate address
	// detection has not run yet (the link is not ready); it has no local
	// route until then.
	tentative bool
}

// MTU limits: Ethernet's minimum and maximum (ETH_MIN_MTU, ETH_MAX_MTU),
// and the headroom VXLAN reserves below its parent's MTU.
const (
	minMTU      = 68
	maxMTU      = 65535
	vxlanRoom4  = 50
	vxlanRoom6  = 70
	defaultMTU  = 1500
	ipv6MinMTU  = 1280
	loopbackIdx = 1
)

// newLink adds l (down) with the next index and its per-interface
// sysctls, and announces it. The caller holds the lock.
func (s *state) newLink(l kernel.Link) *link {
	s.lastIndex++
	l.Index = s.lastIndex
	l.AdminUp, l.Running = false, false
	l.Encap = encapOf(l)
	nl := &link{Link: l, ns: s, noCarrier: l.Kind == kernel.KindTUN}
	s.links[l.Index] = nl
	s.addLinkSysctls(nl)
	s.emitLink(nl, false)
	return nl
}

// encapOf is the link-layer type the kernel reports for a new link like l
// (a tun device of the fake is in tun mode: a tap one would report
// EncapEthernet).
func encapOf(l kernel.Link) string {
	switch {
	case l.Name == "lo":
		return "loopback"
	case l.Kind == kernel.KindTUN || l.Kind == kernel.KindWireGuard:
		return "none"
	case l.Kind == kernel.KindIPIP:
		return "ipip"
	}
	return kernel.EncapEthernet
}

// byName returns the link called name, or nil.
func (s *state) byName(name string) *link {
	for _, l := range s.links {
		if l.Name == name {
			return l
		}
	}
	return nil
}

// report returns l as a dump reports it: a copy that shares nothing.
func (l *link) report() kernel.Link {
	out := l.Link
	out.MAC = slices.Clone(l.MAC)
	out.Veth = nil
	if l.VXLAN != nil {
		v := *l.VXLAN
		out.VXLAN = &v
	}
	if l.IPTunnel != nil {
		t := *l.IPTunnel
		out.IPTunnel = &t
	}
	return out
}

// carrier reports whether l has a carrier: a veth has one while its peer
// is up.
func (l *link) carrier() bool {
	if l.noCarrier {
		return false
	}
	if l.Kind == kernel.KindVeth {
		return l.peer != nil && l.peer.AdminUp
	}
	return true
}

// mtuRange returns the MTUs l accepts.
func (l *link) mtuRange() (lo, hi int) {
	switch l.Kind {
	case kernel.KindDevice:
		return 0, 1<<31 - 1
	case kernel.KindVXLAN:
		if p := l.ns.links[l.VXLAN.ParentIndex]; p != nil {
			return minMTU, p.MTU - vxlanHeadroom(l.VXLAN)
		}
	}
	return minMTU, maxMTU
}

func vxlanHeadroom(v *kernel.VXLAN) int {
	if v.Local.Is6() {
		return vxlanRoom6
	}
	return vxlanRoom4
}

// ether reports whether l has an Ethernet address.
func (l *link) ether() bool { return etherKind(l.Kind) }

// etherKind reports whether links of kind have an Ethernet address.
func etherKind(kind string) bool {
	switch kind {
	case kernel.KindBridge, kernel.KindVeth, kernel.KindVXLAN:
		return true
	}
	return false
}

// Links implements kernel.Links: every interface, by index.
func (ns *Namespace) Links(ctx context.Context) ([]kernel.Link, error) {
	unlock, err := ns.begin(ctx, OpLinks)
	defer unlock()
	if err != nil {
		return nil, err
	}
	return ns.s.linkList(), nil
}

func (s *state) linkList() []kernel.Link {
	out := make([]kernel.Link, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l.report())
	}
	slices.SortFunc(out, func(a, b kernel.Link) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// LinkByName implements kernel.Links.
func (ns *Namespace) LinkByName(ctx context.Context, name string) (kernel.Link, error) {
	unlock, err := ns.begin(ctx, OpLinkByName)
	defer unlock()
	if err != nil {
		return kernel.Link{}, err
	}
	if err := checkName(name); err != nil {
		return kernel.Link{}, err
	}
	l := ns.s.byName(name)
	if l == nil {
		return kernel.Link{}, errnof(syscall.ENODEV, "link %q", name)
	}
	return l.report(), nil
}

// Link returns the interface called name as Links reports it, and false
// if there is none. It is for inspection: not counted, never failed.
func (ns *Namespace) Link(name string) (kernel.Link, bool) {
	defer ns.lock()()
	l := ns.s.byName(name)
	if l == nil {
		return kernel.Link{}, false
	}
	return l.report(), true
}

// AddLink implements kernel.Links. A veth's peer is created first (it
// gets the lower index, as in the kernel), in this namespace or, with
// PeerNamespaceFD, in the namespace of the same machine with that FD. A
// VXLAN device with a parent gets the parent's MTU less 50 (70 with an
// IPv6 local address), and is clamped to it when created with a larger
// one; without a parent its MTU is 1500. A kind outside Options.Kinds
// fails with an error wrapping kernel.ErrNotSupported and EOPNOTSUPP. A bridge has no ports, and so no carrier once it is given an
// address (here or with SetLinkMAC): the kernel recomputes an empty
// bridge's carrier then, and only then. A tun device has no carrier until
// SetCarrier gives it one (no process has it open).
func (ns *Namespace) AddLink(ctx context.Context, l kernel.Link) (kernel.Link, error) {
	unlock, err := ns.begin(ctx, OpAddLink)
	defer unlock()
	if err != nil {
		return kernel.Link{}, err
	}
	s := ns.s
	if err := l.Validate(); err != nil {
		return kernel.Link{}, err
	}
	if !s.kinds[l.Kind] {
		return kernel.Link{}, errnof(syscall.EOPNOTSUPP, "add link %q: unknown device type %q", l.Name, l.Kind)
	}
	if err := ns.refused(OpAddLink, l); err != nil {
		return kernel.Link{}, err
	}
	if s.byName(l.Name) != nil {
		return kernel.Link{}, errnof(syscall.EEXIST, "add link %q: name taken", l.Name)
	}
	peerNS := s
	if v := l.Veth; v != nil {
		if v.PeerNamespaceFD > 0 {
			if peerNS = s.h.byFD[v.PeerNamespaceFD]; peerNS == nil {
				return kernel.Link{}, errnof(syscall.EBADF, "add link %q: no fake namespace with descriptor %d", l.Name, v.PeerNamespaceFD)
			}
		}
		if peerNS.byName(v.PeerName) != nil || (peerNS == s && v.PeerName == l.Name) {
			return kernel.Link{}, errnof(syscall.EEXIST, "add link %q: peer name %q taken", l.Name, v.PeerName)
		}
	}
	if v := l.VXLAN; v != nil && v.ParentIndex != 0 && s.links[v.ParentIndex] == nil {
		return kernel.Link{}, errnof(syscall.ENODEV, "add link %q: no parent link %d", l.Name, v.ParentIndex)
	}
	if err := s.checkTunnelEnds(&l); err != nil {
		return kernel.Link{}, err
	}
	if err := s.checkNewMTU(&l); err != nil {
		return kernel.Link{}, err
	}
	l.MAC = slices.Clone(l.MAC)
	l.MasterIndex = 0
	var peer *link
	if v := l.Veth; v != nil {
		peer = peerNS.newLink(kernel.Link{Name: v.PeerName, Kind: kernel.KindVeth, MTU: l.MTU, MAC: peerNS.newMAC()})
	}
	l.Veth = nil
	if l.VXLAN != nil {
		v := *l.VXLAN
		l.VXLAN = &v
	}
	// A bridge given its address recomputes its carrier, which an empty
	// bridge does not have; one that chose its own address keeps the
	// carrier it was born with.
	noCarrier := l.Kind == kernel.KindBridge && l.MAC != nil
	if l.MAC == nil && etherKind(l.Kind) {
		l.MAC = s.newMAC()
	}
	nl := s.newLink(l)
	nl.noCarrier = noCarrier
	if peer != nil {
		nl.peer, peer.peer = peer, nl
	}
	return nl.report(), nil
}

// checkTunnelEnds refuses, as the kernel does with EEXIST, a tunnel whose
// ends another link of the namespace holds: a VXLAN device whose VNI and
// UDP port (of the same family) another VXLAN device has, whatever their
// parents and local addresses; an IPIP device whose local and remote
// addresses and parent another IPIP device has.
func (s *state) checkTunnelEnds(l *kernel.Link) error {
	var zero kernel.IPTunnel
	for _, o := range s.links {
		switch {
		case l.Kind == kernel.KindVXLAN && o.Kind == kernel.KindVXLAN && l.VXLAN != nil && o.VXLAN != nil:
			a, b := l.VXLAN, o.VXLAN
			if a.VNI == b.VNI && a.Port == b.Port && a.Local.Is6() == b.Local.Is6() {
				return errnof(syscall.EEXIST, "add link %q: A VXLAN device with the specified VNI already exists", l.Name)
			}
		case l.Kind == kernel.KindIPIP && o.Kind == kernel.KindIPIP:
			a, b := l.IPTunnel, o.IPTunnel
			if a == nil {
				a = &zero
			}
			if b == nil {
				b = &zero
			}
			if a.Local == b.Local && a.Remote == b.Remote && a.ParentIndex == b.ParentIndex {
				return errnof(syscall.EEXIST, "add link %q: a tunnel with these ends exists", l.Name)
			}
		}
	}
	return nil
}

// newMAC returns a fresh, locally administered unicast MAC address,
// unique on the machine (the kernel chooses a random one).
func (s *state) newMAC() net.HardwareAddr {
	s.macSeq++
	return net.HardwareAddr{0x02, 0xfa, byte(s.id >> 8), byte(s.id), byte(s.macSeq >> 8), byte(s.macSeq)}
}

// checkNewMTU fills in the default MTU of a new link and checks a given
// one, as the kernel does: a VXLAN device clamps one above its parent's
// MTU less its headroom (a later SetLinkMTU refuses it).
func (s *state) checkNewMTU(l *kernel.Link) error {
	lo, hi, def := minMTU, maxMTU, defaultMTU
	if v := l.VXLAN; v != nil {
		room := vxlanHeadroom(v)
		hi -= room
		if p := s.links[v.ParentIndex]; p != nil {
			hi, def = p.MTU-room, p.MTU-room
		}
	}
	if l.MTU == 0 {
		l.MTU = def
		return nil
	}
	if l.VXLAN != nil && l.MTU > hi {
		l.MTU = hi // a VXLAN device clamps what it is created with
	}
	if l.MTU < lo || l.MTU > hi {
		return errnof(syscall.EINVAL, "add link %q: MTU %d outside %d-%d", l.Name, l.MTU, lo, hi)
	}
	return nil
}

// AddTUN creates a tun device called name, down and without carrier, as
// a process that opens /dev/net/tun (wireguard-go, say) does: it is how a
// test makes one when AddLink does not create tun devices. SetCarrier
// gives it a carrier, as the process attaching would.
func (ns *Namespace) AddTUN(name string) (kernel.Link, error) {
	defer ns.lock()()
	if err := checkName(name); err != nil {
		return kernel.Link{}, err
	}
	if ns.s.byName(name) != nil {
		return kernel.Link{}, errnof(syscall.EEXIST, "add tun %q: name taken", name)
	}
	return ns.s.newLink(kernel.Link{Name: name, Kind: kernel.KindTUN, MTU: defaultMTU}).report(), nil
}

// checkName validates an interface name as the kernel's dev_valid_name
// does.
func checkName(name string) error {
	if err := ifname.Valid(name); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// linkAt returns the link with index, or an error wrapping ErrNotFound
// and ENODEV.
func (s *state) linkAt(what string, index int) (*link, error) {
	if index <= 0 {
		return nil, invalidf("%s: interface index %d", what, index)
	}
	l := s.links[index]
	if l == nil {
		return nil, errnof(syscall.ENODEV, "%s: no link with index %d", what, index)
	}
	return l, nil
}

// DeleteLink implements kernel.Links. A veth's peer goes with it, and so
// does every VXLAN device whose parent it is. lo cannot be deleted
// (EOPNOTSUPP).
func (ns *Namespace) DeleteLink(ctx context.Context, index int) error {
	unlock, err := ns.begin(ctx, OpDeleteLink)
	defer unlock()
	if err != nil {
		return err
	}
	l, err := ns.s.linkAt("delete link", index)
	if err != nil {
		return err
	}
	if err := ns.refused(OpDeleteLink, l.report()); err != nil {
		return err
	}
	if l.Kind == kernel.KindDevice {
		return errnof(syscall.EOPNOTSUPP, "delete link %q", l.Name)
	}
	ns.s.deleteLink(l)
	return nil
}

// deleteLink removes l and what goes with it. The caller holds the lock.
func (s *state) deleteLink(l *link) {
	if s.links[l.Index] != l {
		return // already gone with its peer or parent
	}
	s.setAdmin(l, false)
	s.unregister(l)
	delete(s.links, l.Index)
	s.removeLinkSysctls(l)
	s.emitLink(l, true)
	if p := l.peer; p != nil {
		l.peer, p.peer = nil, nil
		p.ns.deleteLink(p)
	}
	for _, c := range s.sortedLinks() {
		if c.VXLAN != nil && c.VXLAN.ParentIndex == l.Index {
			s.deleteLink(c)
		}
	}
}

func (s *state) sortedLinks() []*link {
	out := make([]*link, 0, len(s.links))
	for _, l := range s.links {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *link) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// SetLinkUp implements kernel.Links. See the package documentation for
// what going up and down does to addresses, routes and neighbours.
func (ns *Namespace) SetLinkUp(ctx context.Context, index int, up bool) error {
	unlock, err := ns.begin(ctx, OpSetLinkUp)
	defer unlock()
	if err != nil {
		return err
	}
	l, err := ns.s.linkAt("set link up", index)
	if err != nil {
		return err
	}
	if err := ns.refused(OpSetLinkUp, l.report()); err != nil {
		return err
	}
	ns.s.setAdmin(l, up)
	return nil
}

// SetLinkMTU implements kernel.Links. An MTU outside what the device
// takes (68-65535; a VXLAN device at most its parent's MTU less its
// headroom) fails with EINVAL.
func (ns *Namespace) SetLinkMTU(ctx context.Context, index, mtu int) error {
	unlock, err := ns.begin(ctx, OpSetLinkMTU)
	defer unlock()
	if err != nil {
		return err
	}
	if mtu <= 0 {
		return invalidf("set link MTU: MTU %d", mtu)
	}
	l, err := ns.s.linkAt("set link MTU", index)
	if err != nil {
		return err
	}
	if err := ns.refused(OpSetLinkMTU, l.report()); err != nil {
		return err
	}
	if lo, hi := l.mtuRange(); mtu < lo || mtu > hi {
		return errnof(syscall.EINVAL, "set link %q MTU %d: outside %d-%d", l.Name, mtu, lo, hi)
	}
	if l.MTU != mtu {
		l.MTU = mtu
		ns.s.setLinkSysctl(l, "net/ipv6/conf", "mtu", itoa(mtu))
		ns.s.emitLink(l, false)
	}
	return nil
}

// SetLinkMAC implements kernel.Links. A multicast or all-zero address
// fails with EADDRNOTAVAIL; a tun device, which has no link-layer
// address, with EOPNOTSUPP (lo takes one). A bridge given a new address loses its carrier
// (it has no ports), and any link its neighbour entries (permanent ones
// too), as in the kernel.
func (ns *Namespace) SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error {
	unlock, err := ns.begin(ctx, OpSetLinkMAC)
	defer unlock()
	if err != nil {
		return err
	}
	l, err := ns.s.linkAt("set link MAC", index)
	if err != nil {
		return err
	}
	if len(mac) == 0 || len(mac) > 32 {
		return invalidf("set link %q MAC: %d bytes", l.Name, len(mac))
	}
	if err := ns.refused(OpSetLinkMAC, l.report()); err != nil {
		return err
	}
	if !l.ether() && l.Kind != kernel.KindDevice {
		return errnof(syscall.EOPNOTSUPP, "set link %q MAC", l.Name)
	}
	if len(mac) != 6 {
		return errnof(syscall.EINVAL, "set link %q MAC: %d bytes (want 6)", l.Name, len(mac))
	}
	if mac[0]&1 != 0 || slices.Equal(mac, make(net.HardwareAddr, 6)) {
		return errnof(syscall.EADDRNOTAVAIL, "set link %q MAC %v", l.Name, mac)
	}
	if !slices.Equal(l.MAC, mac) {
		l.MAC = slices.Clone(mac)
		// The kernel flushes the link's neighbour entries, permanent ones
		// included, when its address changes (NETDEV_CHANGEADDR).
		ns.s.flushNeighbors(l, true)
		ns.s.emitLink(l, false)
		if l.Kind == kernel.KindBridge {
			l.noCarrier = true // see AddLink
			ns.s.carrierChanged(l)
		}
	}
	return nil
}

// SetCarrier gives the link called name its carrier or takes it away, as
// a cable, a switch port or (for tun) the owning process would: without a
// carrier a link that is up is not running, the routes through it are
// marked linkdown (but kept, and writes through it still work) and its
// neighbour entries are flushed. For a veth, use SetLinkUp on its peer.
// It is an administrator's action: not counted, never failed.
func (ns *Namespace) SetCarrier(name string, on bool) error {
	defer ns.lock()()
	l := ns.s.byName(name)
	if l == nil {
		return errnof(syscall.ENODEV, "set carrier: no link %q", name)
	}
	l.noCarrier = !on
	ns.s.carrierChanged(l)
	return nil
}
