package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dumpRetries bounds how often a netlink dump the kernel interrupted (the
// table changed while it was read) is read again.
const dumpRetries = 5

// dump reads a netlink dump, again when the kernel says it was interrupted.
func dump[T any](read func() (T, error)) (T, error) {
	var v T
	var err error
	for range dumpRetries {
		v, err = read()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// linkByName returns the link called name, or nil when there is none.
func linkByName(h *netlink.Handle, name string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up interface %s: %w", name, err)
	}
	return l, nil
}

// deleteLink deletes l; one already gone is no error.
func deleteLink(h *netlink.Handle, l netlink.Link) error {
	if err := h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("deleting interface %s: %w", l.Attrs().Name, err)
	}
	return nil
}

// clearHostName makes name free for a new attachment of network to
// container: a veth the plugin made for an earlier attachment of network
// (a sandbox of the same pod whose DEL never came: another container) is
// deleted. An interface that is not the plugin's is an error, and so is
// one of this container's (the same attachment added again, or the
// network on another interface of the pod: the pod has one host-side
// name): both are left alone.
func clearHostName(h *netlink.Handle, name, network, container string) error {
	l, err := linkByName(h, name)
	if err != nil || l == nil {
		return err
	}
	a, err := parseAlias(l.Attrs().Alias)
	if err != nil || a.network != network {
		return fmt.Errorf("host-side interface %s exists and is not this network's (alias %q): left alone", name, l.Attrs().Alias)
	}
	if a.containerID == container {
		return fmt.Errorf("network %s is attached to this container already, as %s (host side %s): "+
			"a pod gets one attachment of it; DEL that one first", network, a.ifName, name)
	}
	return deleteLink(h, l)
}

// deleteAttachment deletes the host-side veth marked alias (the kernel
// deletes its pod side with it): the interface called name when it bears
// the mark, else any interface that does. Nothing marked is no error.
func deleteAttachment(h *netlink.Handle, name, alias string) error {
	if name != "" {
		l, err := linkByName(h, name)
		if err != nil {
			return err
		}
		if l != nil && l.Attrs().Alias == alias {
			return deleteLink(h, l)
		}
	}
	links, err := dump(h.LinkList)
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	var errs []error
	for _, l := range links {
		if l.Attrs().Alias == alias {
			errs = append(errs, deleteLink(h, l))
		}
	}
	return errors.Join(errs...)
}

// createVeth makes the veth pair of an attachment in one request, the host
// side name (MAC HostMAC) in the current namespace and the pod side ifName
// in podNS, both with MTU m (0: the kernel's default), then marks the host
// side with alias and brings it up. The link it returns is the host side
// whenever the pair was made, also with an error of a later step: the
// caller deletes it then. When the request fails nothing was made.
func createVeth(h *netlink.Handle, podNS ns.NetNS, name, ifName, alias string, m int) (netlink.Link, error) {
	la := netlink.NewLinkAttrs()
	la.Name, la.MTU, la.HardwareAddr = name, m, HostMAC
	v := &netlink.Veth{LinkAttrs: la, PeerName: ifName, PeerNamespace: netlink.NsFd(int(podNS.Fd())), PeerMTU: uint32(m)}
	if err := h.LinkAdd(v); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("creating veth %s (pod side %s): an interface of either name exists already: %w", name, ifName, err)
		}
		return nil, fmt.Errorf("creating veth %s (pod side %s): %w", name, ifName, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		// Made a moment ago under this name: it is this pair's.
		return v, fmt.Errorf("reading veth %s back: %w", name, err)
	}
	// The kernel ignores an alias in the request that creates a link.
	if err := h.LinkSetAlias(l, alias); err != nil {
		return l, fmt.Errorf("marking %s: %w", name, err)
	}
	if err := noDAD(name); err != nil {
		return l, err
	}
	if err := h.LinkSetUp(l); err != nil {
		return l, fmt.Errorf("bringing %s up: %w", name, err)
	}
	l.Attrs().Alias = alias
	return l, nil
}

// noDAD turns duplicate address detection off on the host side name,
// before it is up: its link-local address, from which the node asks the
// pod's IPv6 address, is then usable at once, where detection would keep
// the pod unreachable over IPv6 for a second or two (a veth has one peer,
// nothing to detect). Without IPv6 on the node there is nothing to do.
func noDAD(name string) error {
	err := os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", name, "accept_dad"), []byte("0"), 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turning duplicate address detection off on %s: %w", name, err)
	}
	return nil
}

// gateway returns the gateway of a's family.
func gateway(a netip.Addr) netip.Addr {
	if a.Is4() {
		return Gateway4
	}
	return Gateway6
}

// family returns a's netlink family.
func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// ipNet returns p as a net.IPNet (a 4-byte IP for IPv4).
func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// defaultDst is the destination of a's family's default route.
func defaultDst(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
}

// configurePod sets up the pod side ifName (in the namespace of ph): up,
// each address as a host prefix (IPv6 without duplicate address detection),
// and per family a permanent neighbour entry for the gateway to hostMAC and
// the default route via it (onlink for IPv4).
func configurePod(ph *netlink.Handle, ifName string, addrs []netip.Addr, hostMAC net.HardwareAddr) (netlink.Link, error) {
	l, err := ph.LinkByName(ifName)
	if err != nil {
		return nil, fmt.Errorf("pod side %s: %w", ifName, err)
	}
	if err := ph.LinkSetUp(l); err != nil {
		return nil, fmt.Errorf("bringing pod side %s up: %w", ifName, err)
	}
	families := map[netip.Addr]bool{}
	for _, a := range addrs {
		addr := &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, a.BitLen()))}
		if a.Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := ph.AddrAdd(l, addr); err != nil {
			return nil, fmt.Errorf("adding %s to pod side %s: %w", a, ifName, err)
		}
		families[gateway(a)] = true
	}
	for _, gw := range []netip.Addr{Gateway4, Gateway6} {
		if !families[gw] {
			continue
		}
		n := &netlink.Neigh{LinkIndex: l.Attrs().Index, Family: family(gw), State: netlink.NUD_PERMANENT,
			IP: gw.AsSlice(), HardwareAddr: hostMAC}
		if err := ph.NeighAdd(n); err != nil {
			return nil, fmt.Errorf("adding neighbour %s (%s) on pod side %s: %w", gw, hostMAC, ifName, err)
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(defaultDst(gw)), Gw: gw.AsSlice()}
		if gw.Is4() {
			r.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := ph.RouteAdd(r); err != nil {
			return nil, fmt.Errorf("adding default route via %s on pod side %s: %w", gw, ifName, err)
		}
	}
	return l, nil
}
