//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

// Links, addresses and conntrack go through the netlink library, bound to
// the namespace; its types are converted to and from this package's here.

// Links lists every interface, retrying interrupted dumps.
func (ns *Namespace) Links(ctx context.Context) ([]Link, error) {
	ctx = orBackground(ctx)
	var out []Link
	err := ns.withHandle(ctx, unix.NETLINK_ROUTE, func(h *netlink.Handle) error {
		ls, err := nlutil.LinkList(ctx, h)
		if err != nil {
			return classify(fmt.Errorf("kernel: %w", err))
		}
		out = make([]Link, len(ls))
		for i, l := range ls {
			out[i] = linkFromNetlink(l)
		}
		return nil
	})
	return out, err
}

// LinkByName returns the interface called name; a missing one wraps
// ErrNotFound, an invalid name ErrInvalid.
func (ns *Namespace) LinkByName(ctx context.Context, name string) (Link, error) {
	if err := checkIfName("link", name); err != nil {
		return Link{}, err
	}
	ctx = orBackground(ctx)
	var out Link
	err := ns.withHandle(ctx, unix.NETLINK_ROUTE, func(h *netlink.Handle) (err error) {
		out, err = linkByName(h, name)
		return err
	})
	return out, err
}

func linkByName(h *netlink.Handle, name string) (Link, error) {
	l, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return Link{}, errs.Also(fmt.Errorf("kernel: link %q: %w", name, err), ErrNotFound)
	}
	if err != nil {
		return Link{}, classify(fmt.Errorf("kernel: link %q: %w", name, err))
	}
	return linkFromNetlink(l), nil
}

// AddLink creates l (Link.Validate) administratively down and returns it
// as the kernel reports it. A taken name wraps ErrExists; a kind this
// kernel lacks (no ipip or wireguard module: the kernel answers
// EOPNOTSUPP, which iproute2 prints as "Unknown device type") wraps
// ErrNotSupported. A veth whose Veth.PeerNamespaceFD is set gets its peer
// created in that namespace.
func (ns *Namespace) AddLink(ctx context.Context, l Link) (Link, error) {
	if err := l.Validate(); err != nil {
		return Link{}, err
	}
	ctx = orBackground(ctx)
	var out Link
	err := ns.withHandle(ctx, unix.NETLINK_ROUTE, func(h *netlink.Handle) error {
		if err := h.LinkAdd(linkToNetlink(&l)); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) {
				return classify(fmt.Errorf("kernel: add %s link %q: this kernel has no %s links (no module?): %w", l.Kind, l.Name, l.Kind, err))
			}
			return classify(fmt.Errorf("kernel: add %s link %q: %w", l.Kind, l.Name, err))
		}
		var err error
		out, err = linkByName(h, l.Name)
		return err
	})
	return out, err
}

// device names an existing interface for the netlink library's setters.
func device(index int) *netlink.Device {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
}

// linkCall runs one change of the interface with index (> 0) and
// classifies its error (a missing interface wraps ErrNotFound).
func (ns *Namespace) linkCall(ctx context.Context, what string, index int, fn func(h *netlink.Handle, d *netlink.Device) error) error {
	if index <= 0 {
		return invalid("%s: interface index %d", what, index)
	}
	return ns.withHandle(orBackground(ctx), unix.NETLINK_ROUTE, func(h *netlink.Handle) error {
		if err := fn(h, device(index)); err != nil {
			return classify(fmt.Errorf("kernel: %s of interface %d: %w", what, index, err))
		}
		return nil
	})
}

// DeleteLink deletes the interface with index (a veth takes its peer with
// it); a missing one wraps ErrNotFound.
func (ns *Namespace) DeleteLink(ctx context.Context, index int) error {
	return ns.linkCall(ctx, "delete", index, func(h *netlink.Handle, d *netlink.Device) error { return h.LinkDel(d) })
}

// SetLinkUp sets the interface administratively up or down.
func (ns *Namespace) SetLinkUp(ctx context.Context, index int, up bool) error {
	return ns.linkCall(ctx, "set up/down", index, func(h *netlink.Handle, d *netlink.Device) error {
		if up {
			return h.LinkSetUp(d)
		}
		return h.LinkSetDown(d)
	})
}

// SetLinkMTU sets the interface's MTU (> 0, else ErrInvalid; the kernel
// refuses one out of the device's range with EINVAL).
func (ns *Namespace) SetLinkMTU(ctx context.Context, index, mtu int) error {
	if mtu <= 0 {
		return invalid("set MTU of interface %d: MTU %d", index, mtu)
	}
	return ns.linkCall(ctx, "set MTU", index, func(h *netlink.Handle, d *netlink.Device) error { return h.LinkSetMTU(d, mtu) })
}

// SetLinkMAC sets the interface's link-layer address (1 to 32 bytes, else
// ErrInvalid).
func (ns *Namespace) SetLinkMAC(ctx context.Context, index int, mac net.HardwareAddr) error {
	if len(mac) == 0 || len(mac) > maxLinkAddrLen {
		return invalid("set MAC of interface %d: address of %d bytes", index, len(mac))
	}
	return ns.linkCall(ctx, "set MAC", index, func(h *netlink.Handle, d *netlink.Device) error { return h.LinkSetHardwareAddr(d, mac) })
}

// linkToNetlink converts a validated Link to the netlink library's form.
func linkToNetlink(l *Link) netlink.Link {
	attrs := netlink.LinkAttrs{Name: l.Name, MTU: l.MTU, HardwareAddr: l.MAC, MasterIndex: l.MasterIndex}
	switch l.Kind {
	case KindVeth:
		v := &netlink.Veth{LinkAttrs: attrs, PeerName: l.Veth.PeerName}
		if l.Veth.PeerNamespaceFD > 0 {
			v.PeerNamespace = netlink.NsFd(l.Veth.PeerNamespaceFD)
		}
		return v
	case KindVXLAN:
		x := l.VXLAN
		return &netlink.Vxlan{LinkAttrs: attrs, VxlanId: int(x.VNI), Port: int(x.Port), VtepDevIndex: x.ParentIndex,
			SrcAddr: ipOf(x.Local), Learning: x.Learning}
	case KindIPIP:
		t := &netlink.Iptun{LinkAttrs: attrs, PMtuDisc: 1} // as `ip link add … type ipip`
		if l.IPTunnel != nil {
			t.Local, t.Remote, t.Link = ipOf(l.IPTunnel.Local), ipOf(l.IPTunnel.Remote), uint32(l.IPTunnel.ParentIndex)
		}
		return t
	case KindWireGuard:
		return &netlink.Wireguard{LinkAttrs: attrs}
	}
	return &netlink.Bridge{LinkAttrs: attrs}
}

// linkFromNetlink converts a link of the netlink library.
func linkFromNetlink(nl netlink.Link) Link {
	a := nl.Attrs()
	l := Link{
		Index:       a.Index,
		Name:        a.Name,
		Kind:        kindOf(nl.Type()),
		Encap:       a.EncapType,
		MTU:         a.MTU,
		AdminUp:     a.Flags&net.FlagUp != 0,
		Running:     a.RawFlags&unix.IFF_RUNNING != 0,
		MasterIndex: a.MasterIndex,
	}
	if len(a.HardwareAddr) > 0 {
		l.MAC = a.HardwareAddr
	}
	switch v := nl.(type) {
	case *netlink.Vxlan:
		l.VXLAN = &VXLAN{VNI: uint32(v.VxlanId), Port: uint16(v.Port), ParentIndex: v.VtepDevIndex, Local: addrOfIP(v.SrcAddr), Learning: v.Learning}
	case *netlink.Iptun:
		l.IPTunnel = &IPTunnel{Local: addrOfIP(v.Local), Remote: addrOfIP(v.Remote), ParentIndex: int(v.Link)}
	}
	return l
}

// kindOf maps the netlink library's link type to a Kind.
func kindOf(typ string) string {
	if typ == "tuntap" {
		return KindTUN
	}
	return typ // "device", "bridge", "veth", "vxlan", "wireguard", "ipip" …
}

// ipOf converts an address for the netlink library (nil when unset).
func ipOf(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return a.AsSlice()
}

// addrOfIP converts a net.IP (4 or 16 bytes) to an Addr, IPv4 unmapped;
// nil is the zero Addr.
func addrOfIP(ip net.IP) netip.Addr {
	if ip4 := ip.To4(); ip4 != nil {
		return netip.AddrFrom4([4]byte(ip4))
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// prefixOfIPNet converts a net.IPNet (address and mask) to a Prefix.
func prefixOfIPNet(n *net.IPNet) netip.Prefix {
	if n == nil {
		return netip.Prefix{}
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addrOfIP(n.IP), ones)
}

// ipNetOf converts a Prefix to a net.IPNet, host bits kept.
func ipNetOf(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Addrs lists the addresses of family on every interface, retrying
// interrupted dumps.
func (ns *Namespace) Addrs(ctx context.Context, family Family) ([]Addr, error) {
	if !family.Valid() {
		return nil, invalid("address dump: %v is neither IPv4 nor IPv6", family)
	}
	ctx = orBackground(ctx)
	var out []Addr
	err := ns.withHandle(ctx, unix.NETLINK_ROUTE, func(h *netlink.Handle) error {
		as, err := nlutil.AddrList(ctx, h, nil, family.AF())
		if err != nil {
			return classify(fmt.Errorf("kernel: %w", err))
		}
		out = make([]Addr, 0, len(as))
		for _, a := range as {
			if p := prefixOfIPNet(a.IPNet); family.ContainsPrefix(p) {
				out = append(out, Addr{LinkIndex: a.LinkIndex, Prefix: p})
			}
		}
		return nil
	})
	return out, err
}

// AddAddr assigns a.Prefix to the interface (Addr.Validate), with the
// kernel's defaults (an IPv6 address goes through duplicate address
// detection unless the interface's accept_dad says otherwise). One already
// assigned wraps ErrExists; a missing interface ErrNotFound.
func (ns *Namespace) AddAddr(ctx context.Context, a Addr) error {
	return ns.addrCall(ctx, "add", a, (*netlink.Handle).AddrAdd)
}

// DeleteAddr removes a.Prefix from the interface; a missing address or
// interface wraps ErrNotFound.
func (ns *Namespace) DeleteAddr(ctx context.Context, a Addr) error {
	return ns.addrCall(ctx, "delete", a, (*netlink.Handle).AddrDel)
}

func (ns *Namespace) addrCall(ctx context.Context, what string, a Addr, fn func(*netlink.Handle, netlink.Link, *netlink.Addr) error) error {
	if err := a.Validate(); err != nil {
		return err
	}
	return ns.withHandle(orBackground(ctx), unix.NETLINK_ROUTE, func(h *netlink.Handle) error {
		if err := fn(h, device(a.LinkIndex), &netlink.Addr{IPNet: ipNetOf(a.Prefix)}); err != nil {
			return classify(fmt.Errorf("kernel: %s address %s on interface %d: %w", what, a.Prefix, a.LinkIndex, err))
		}
		return nil
	})
}
