package mtu

import "fmt"

// MTU limits used by PodMTU, WriteFile and ReadFile.
const (
	// MinMTU is the smallest MTU an IPv4 link may have (RFC 791).
	// WriteFile and ReadFile reject anything smaller.
	MinMTU = 68
	// MinPodMTUIPv4 is the smallest pod MTU PodMTU accepts when pods use
	// only IPv4. IPv4 would work down to MinMTU, but a pod MTU below 576
	// (the datagram size every IPv4 host must accept, RFC 1122) is in
	// practice always a misconfigured override or overhead, so it is
	// reported rather than used.
	MinPodMTUIPv4 = 576
	// MinIPv6MTU is the smallest MTU a link carrying IPv6 may have
	// (RFC 8200). PodMTU enforces it when pods use IPv6.
	MinIPv6MTU = 1280
	// MaxMTU is the largest MTU an IP packet (and a veth) can use. PodMTU
	// never returns more; WriteFile and ReadFile reject more.
	MaxMTU = 65535
)

// Per-packet overheads of the predefined encapsulations, in bytes, for an
// IPv4 and an IPv6 outer header.
const (
	// IPIPOverheadV4 is the outer IPv4 header of IP-in-IP.
	IPIPOverheadV4 = 20
	// IPIPOverheadV6 is the outer IPv6 header of IP-in-IPv6 (ip6tnl).
	IPIPOverheadV6 = 40
	// VXLANOverheadV4 is outer IPv4 (20) + UDP (8) + VXLAN (8) + inner
	// Ethernet (14).
	VXLANOverheadV4 = 50
	// VXLANOverheadV6 is VXLANOverheadV4 with a 40-byte IPv6 outer header.
	VXLANOverheadV6 = 70
	// WireGuardOverheadV4 is outer IPv4 (20) + UDP (8) + WireGuard data
	// header (16) + authentication tag (16).
	WireGuardOverheadV4 = 60
	// WireGuardOverheadV6 is WireGuardOverheadV4 with a 40-byte IPv6
	// outer header.
	WireGuardOverheadV6 = 80
)

// Encap describes an encapsulation by the bytes it adds to every packet.
// The predefined IPIP, VXLAN and WireGuard cover nodeplane's tunnels; any
// other encapsulation is described with an Encap of its own.
type Encap struct {
	// Name identifies the encapsulation in error messages.
	Name string
	// V4 is the overhead in bytes when the outer header is IPv4.
	V4 int
	// V6 is the overhead in bytes when the outer header is IPv6.
	V6 int
}

// The predefined encapsulations. Treat them as constants.
var (
	// IPIP is IP-in-IP (outer IPv4) or IP-in-IPv6 (outer IPv6).
	IPIP = Encap{Name: "ipip", V4: IPIPOverheadV4, V6: IPIPOverheadV6}
	// VXLAN is VXLAN over UDP.
	VXLAN = Encap{Name: "vxlan", V4: VXLANOverheadV4, V6: VXLANOverheadV6}
	// WireGuard is WireGuard over UDP.
	WireGuard = Encap{Name: "wireguard", V4: WireGuardOverheadV4, V6: WireGuardOverheadV6}
)

// Overhead returns the bytes e adds to every packet when its outer header
// is IPv6 (ipv6 true) or IPv4.
func (e Encap) Overhead(ipv6 bool) int {
	if ipv6 {
		return e.V6
	}
	return e.V4
}

// String returns e's name.
func (e Encap) String() string { return e.Name }

// validate checks e, an element of field's Encaps.
func (e Encap) validate(field string) error {
	if e.V4 < 0 || e.V6 < 0 || e.V4 > MaxMTU || e.V6 > MaxMTU {
		return invalidf(ErrInvalidOptions, "%s.Encaps: encapsulation %q: overheads must be between 0 and %d, got %d (IPv4) and %d (IPv6)",
			field, e.Name, MaxMTU, e.V4, e.V6)
	}
	return nil
}

// PodMTUOptions are the inputs of PodMTU.
type PodMTUOptions struct {
	// HostMTU is the MTU of the path out of the node, usually from
	// Detector.Detect. It must be positive unless Override is set. A
	// Monitor fills it in from each detection.
	HostMTU int
	// Encaps are the enabled encapsulations. The pod MTU must fit the one
	// with the largest overhead. Empty means pods talk without
	// encapsulation.
	Encaps []Encap
	// UnderlayIPv6 says the tunnels' outer header is IPv6, so the IPv6
	// overheads apply. When some tunnels run over IPv4 and others over
	// IPv6 (dual stack), set it: the IPv6 overheads are the larger ones,
	// so the result fits both.
	UnderlayIPv6 bool
	// PodIPv6 says pods use IPv6, so the pod MTU must be at least
	// MinIPv6MTU (1280). Without it the floor is MinPodMTUIPv4 (576).
	PodIPv6 bool
	// Extra is an overhead added to every encapsulation's, and subtracted
	// even when none is enabled, for example a cloud's own encapsulation
	// or host encryption. It must not be negative.
	Extra int
	// Override, when positive, is the pod MTU, whatever the host MTU and
	// the encapsulations. It must still be between the floor (see
	// PodIPv6) and MaxMTU. Zero means no override; negative is an error.
	Override int
}

// floor returns the smallest pod MTU o accepts.
func (o PodMTUOptions) floor() int {
	if o.PodIPv6 {
		return MinIPv6MTU
	}
	return MinPodMTUIPv4
}

// validateStatic checks everything but HostMTU, which a Monitor supplies
// later. field names o in the errors.
func (o PodMTUOptions) validateStatic(field string) error {
	if o.Extra < 0 {
		return invalidf(ErrInvalidOptions, "%s.Extra overhead must not be negative, got %d", field, o.Extra)
	}
	for _, e := range o.Encaps {
		if err := e.validate(field); err != nil {
			return err
		}
	}
	if o.Override < 0 {
		return invalidf(ErrInvalidMTU, "%s.Override must not be negative, got %d", field, o.Override)
	}
	if o.Override > 0 && (o.Override < o.floor() || o.Override > MaxMTU) {
		return invalidf(ErrInvalidMTU, "%s.Override %d is outside %d–%d%s",
			field, o.Override, o.floor(), MaxMTU, o.familyNote())
	}
	return nil
}

func (o PodMTUOptions) familyNote() string {
	if o.PodIPv6 {
		return " (pods use IPv6, which needs at least 1280)"
	}
	return ""
}

// PodMTU returns the MTU for pod interfaces: Override when it is set;
// otherwise the smallest of HostMTU−Extra−overhead over the enabled
// encapsulations (with their IPv6 overheads when UnderlayIPv6 is set), or
// HostMTU−Extra when none is enabled, capped at MaxMTU.
//
// Bad options (a negative or missing HostMTU, a negative Extra, Override or
// encapsulation overhead, an Override out of range) return an error
// wrapping ErrInvalidOptions (and ErrInvalidMTU for the Override). A result below the floor of the pods' IP families
// (MinIPv6MTU with PodIPv6, MinPodMTUIPv4 otherwise) returns an error
// wrapping ErrMTUTooSmall.
func PodMTU(o PodMTUOptions) (int, error) {
	if err := o.validateStatic("PodMTUOptions"); err != nil {
		return 0, err
	}
	if o.Override > 0 {
		return o.Override, nil
	}
	if o.HostMTU <= 0 {
		return 0, invalidf(ErrInvalidOptions, "PodMTUOptions.HostMTU must be positive (or Override set), got %d", o.HostMTU)
	}
	mtu := o.HostMTU - o.Extra
	limitedBy := "the host MTU"
	if o.Extra > 0 {
		limitedBy = fmt.Sprintf("the host MTU minus %d extra", o.Extra)
	}
	for _, e := range o.Encaps {
		if m := o.HostMTU - o.Extra - e.Overhead(o.UnderlayIPv6); m < mtu {
			mtu = m
			limitedBy = fmt.Sprintf("%s (overhead %d)", e.Name, e.Overhead(o.UnderlayIPv6))
			if o.Extra > 0 {
				limitedBy += fmt.Sprintf(" plus %d extra", o.Extra)
			}
		}
	}
	if mtu < o.floor() {
		return 0, fmt.Errorf("%w: host MTU %d leaves %d for pods after %s, below the minimum of %d%s",
			ErrMTUTooSmall, o.HostMTU, mtu, limitedBy, o.floor(), o.familyNote())
	}
	return min(mtu, MaxMTU), nil
}
