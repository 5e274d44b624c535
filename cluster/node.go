package cluster

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Node is a message: a node of the cluster was added or changed. It carries
// both families; a manager of one family uses that family's fields and
// treats a node without them as having none of that family. The message
// for the manager's own node (its NodeName) configures the local end (the
// tunnel device, the WireGuard key it publishes); the others become
// remote ends. A later Node of the same Name replaces the earlier one
// whole.
type Node struct {
	// Name is the node's name. Required.
	Name string `json:"name"`
	// UnderlayV4 and UnderlayV6 are the node's underlay (host) addresses:
	// where encapsulated or encrypted packets to it go. Unset means none
	// of that family.
	UnderlayV4 netip.Addr `json:"underlayV4,omitzero"`
	UnderlayV6 netip.Addr `json:"underlayV6,omitzero"`
	// TunnelV4 and TunnelV6 are the addresses of the node's tunnel device
	// (VXLAN, IPIP or WireGuard): the VXLAN next hop of its blocks, the
	// address an IPIP device gets, a host route through WireGuard.
	TunnelV4 netip.Addr `json:"tunnelV4,omitzero"`
	TunnelV6 netip.Addr `json:"tunnelV6,omitzero"`
	// VXLANMACV4 and VXLANMACV6 are the MACs of the node's VXLAN devices
	// (one per family); zero means none.
	VXLANMACV4 MAC `json:"vxlanMACV4,omitzero"`
	VXLANMACV6 MAC `json:"vxlanMACV6,omitzero"`
	// WireGuardKeyV4 and WireGuardKeyV6 are the public keys of the node's
	// WireGuard devices (one per family, as the managers run one device
	// per family); zero means none.
	WireGuardKeyV4 WireGuardKey `json:"wireguardKeyV4,omitzero"`
	WireGuardKeyV6 WireGuardKey `json:"wireguardKeyV6,omitzero"`
}

// NodeRemove is a message: the node is gone, with everything the managers
// made for it.
type NodeRemove struct {
	// Name is the node's name. Required.
	Name string `json:"name"`
}

// Underlay returns the node's underlay address of family f (invalid when
// it has none).
func (n *Node) Underlay(f ipfamily.Family) netip.Addr {
	return pick(f, n.UnderlayV4, n.UnderlayV6)
}

// Tunnel returns the node's tunnel address of family f (invalid when it
// has none).
func (n *Node) Tunnel(f ipfamily.Family) netip.Addr {
	return pick(f, n.TunnelV4, n.TunnelV6)
}

// VXLANMAC returns the MAC of the node's VXLAN device of family f (zero
// when it has none).
func (n *Node) VXLANMAC(f ipfamily.Family) MAC {
	return pick(f, n.VXLANMACV4, n.VXLANMACV6)
}

// WireGuardKey returns the public key of the node's WireGuard device of
// family f (zero when it has none).
func (n *Node) WireGuardKey(f ipfamily.Family) WireGuardKey {
	return pick(f, n.WireGuardKeyV4, n.WireGuardKeyV6)
}

func pick[T any](f ipfamily.Family, v4, v6 T) T {
	switch f {
	case ipfamily.IPv4:
		return v4
	case ipfamily.IPv6:
		return v6
	}
	var zero T
	return zero
}

// Validate reports, with an error wrapping ErrInvalid that names the node,
// what is wrong with n: no name, an address of the wrong family or that is
// not a unicast host address (unspecified, loopback, multicast,
// link-local, broadcast), a MAC that is multicast.
func (n *Node) Validate() error {
	if n == nil || n.Name == "" {
		return fmt.Errorf("%w node: no name", ErrInvalid)
	}
	var problems []error
	for _, a := range []struct {
		what string
		f    ipfamily.Family
		addr netip.Addr
	}{
		{"IPv4 underlay", ipfamily.IPv4, n.UnderlayV4}, {"IPv6 underlay", ipfamily.IPv6, n.UnderlayV6},
		{"IPv4 tunnel address", ipfamily.IPv4, n.TunnelV4}, {"IPv6 tunnel address", ipfamily.IPv6, n.TunnelV6},
	} {
		if a.addr.IsValid() {
			if err := CheckHostAddr(a.f, a.addr); err != nil {
				problems = append(problems, fmt.Errorf("%s: %w", a.what, err))
			}
		}
	}
	for _, m := range []struct {
		what string
		mac  MAC
	}{{"IPv4 VXLAN MAC", n.VXLANMACV4}, {"IPv6 VXLAN MAC", n.VXLANMACV6}} {
		if m.mac.IsMulticast() {
			problems = append(problems, fmt.Errorf("%s %s is a multicast address", m.what, m.mac))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w node %q: %w", ErrInvalid, n.Name, errors.Join(problems...))
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalid, a removal without a
// name.
func (r *NodeRemove) Validate() error {
	if r == nil || r.Name == "" {
		return fmt.Errorf("%w node removal: no name", ErrInvalid)
	}
	return nil
}

// CheckHostAddr returns why a cannot be a node's underlay or tunnel
// address of family f: it must be a valid address of the family, and a
// unicast host address (not unspecified, loopback, multicast, link-local
// or the IPv4 broadcast address).
func CheckHostAddr(f ipfamily.Family, a netip.Addr) error {
	if !a.IsValid() {
		return errors.New("no address")
	}
	if !f.Contains(a) {
		return fmt.Errorf("%s is not an %s address", a, f)
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
		return fmt.Errorf("%s is not a unicast host address", a)
	}
	if a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return fmt.Errorf("%s is the broadcast address", a)
	}
	return nil
}

// MAC is an Ethernet address. Its text form is six colon-separated
// hexadecimal bytes ("02:00:00:00:00:01"); the zero value means none.
type MAC [6]byte

// ParseMAC parses the text form of a MAC (any form net.ParseMAC takes for
// 6 bytes). The error wraps ErrInvalid.
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return MAC{}, fmt.Errorf("%w MAC %q: not a 6-byte Ethernet address", ErrInvalid, s)
	}
	return MAC(hw), nil
}

// IsZero reports whether m is the zero MAC (none).
func (m MAC) IsZero() bool { return m == MAC{} }

// IsMulticast reports whether m is a multicast (or broadcast) address.
func (m MAC) IsMulticast() bool { return m[0]&1 != 0 }

// HardwareAddr returns m as a net.HardwareAddr, nil for the zero MAC.
func (m MAC) HardwareAddr() net.HardwareAddr {
	if m.IsZero() {
		return nil
	}
	return net.HardwareAddr(m[:])
}

// String returns the text form, "" for the zero MAC.
func (m MAC) String() string {
	if m.IsZero() {
		return ""
	}
	return net.HardwareAddr(m[:]).String()
}

// MarshalText implements encoding.TextMarshaler.
func (m MAC) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; empty text is the
// zero MAC.
func (m *MAC) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*m = MAC{}
		return nil
	}
	v, err := ParseMAC(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// WireGuardKey is a node's WireGuard public key (Curve25519, 32 bytes).
// Its text form is base64, as wg(8) prints it; the zero value means none.
type WireGuardKey [32]byte

// ParseWireGuardKey parses the base64 text form of a key (surrounding
// white space is not allowed). The error wraps ErrInvalid.
func ParseWireGuardKey(s string) (WireGuardKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(WireGuardKey{}) {
		return WireGuardKey{}, fmt.Errorf("%w WireGuard key: not 32 bytes in base64", ErrInvalid)
	}
	return WireGuardKey(b), nil
}

// IsZero reports whether k is the zero key (none).
func (k WireGuardKey) IsZero() bool { return k == WireGuardKey{} }

// String returns the base64 text form, "" for the zero key.
func (k WireGuardKey) String() string {
	if k.IsZero() {
		return ""
	}
	return base64.StdEncoding.EncodeToString(k[:])
}

// MarshalText implements encoding.TextMarshaler.
func (k WireGuardKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler; empty text is the
// zero key.
func (k *WireGuardKey) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*k = WireGuardKey{}
		return nil
	}
	v, err := ParseWireGuardKey(string(text))
	if err != nil {
		return err
	}
	*k = v
	return nil
}
