package mtu

import (
	"context"
	"fmt"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/ifname"
)

// FallbackMTU is the host MTU a Detector reports when no link qualifies:
// 1460, the smallest MTU in common use among clouds, so a pod MTU derived
// from it fits almost anywhere.
const FallbackMTU = 1460

// Link is what a Detector needs to know about one network interface.
type Link struct {
	// Name is the interface name, matched against the patterns.
	Name string
	// Index is the kernel's interface index.
	Index int
	// MTU is the interface's MTU.
	MTU int
	// Up reports that the link is administratively up and operational
	// (the kernel's IFF_UP and IFF_RUNNING flags: operational state up, or
	// unknown for devices that do not track a carrier).
	Up bool
	// Type is the kernel's link kind ("device", "veth", "bridge",
	// "vxlan"…), for information only.
	Type string
}

// LinkLister lists the links of one network namespace. NetlinkLister is
// the kernel implementation (Linux only) and FakeLister the one for tests.
type LinkLister interface {
	// Links returns every link. It should honour ctx's cancellation.
	Links(ctx context.Context) ([]Link, error)
}

// defaultExclude is the list behind DefaultExclude.
var defaultExclude = []string{
	`^lo$`,           // loopback
	`^veth`,          // pod and container veths
	`^cali`,          // Calico workload interfaces
	`^np-`,           // devices nodeplane-based agents create
	`^vxlan`,         // VXLAN tunnels (vxlan.calico, vxlan-v6.calico…)
	`^tunl`,          // IPIP tunnels
	`^ip6tnl`,        // IPv6 tunnels
	`^wg`,            // WireGuard (wireguard.cali is matched by ^wireguard)
	`^wireguard`,     // WireGuard
	`^kube-ipvs`,     // kube-proxy's IPVS dummy
	`^kube-bridge`,   // kube-router
	`^nodelocaldns`,  // NodeLocal DNSCache dummy
	`^docker`,        // Docker's bridge
	`^br-`,           // Docker's user-defined bridges
	`^virbr`,         // libvirt bridges
	`^cni`,           // CNI bridge plugin (cni0)
	`^flannel`,       // Flannel tunnels
	`^cilium_`,       // Cilium devices
	`^lxc`,           // Cilium and LXC endpoints
	`^genev_sys`,     // OVS Geneve
	`^ovs-system`,    // OVS internal port
	`^antrea-`,       // Antrea devices
	`^weave`,         // Weave Net
	`^tun`,           // tun devices (VPNs)
	`^tap`,           // tap devices (VMs)
	`^tailscale`,     // Tailscale VPN, MTU 1280
	`^dummy`,         // dummy devices
	`^kube-dummy-if`, // kube-router dummy
}

// DefaultExclude returns the Exclude patterns a Detector uses when
// DetectorOptions.Exclude is nil: loopback, veths, and the tunnels,
// bridges and helper devices that node agents (Calico, Flannel, Cilium,
// Antrea, Weave, kube-proxy, kube-router, nodeplane agents using the np-
// prefix), container runtimes (docker0, br-…, cni0), libvirt and VPNs
// create. They are not the node's uplinks, and their MTUs (a tunnel's is
// already reduced; lo's is 65536) would give a wrong host MTU. The result
// is a fresh copy: append to it to extend the defaults.
func DefaultExclude() []string {
	return append([]string(nil), defaultExclude...)
}

// DetectorOptions configure a Detector.
type DetectorOptions struct {
	// Include are regular expressions (Go syntax, unanchored unless the
	// pattern anchors itself) of the interface names to consider. A link
	// qualifies when it matches at least one. Empty means every name.
	Include []string
	// Exclude are regular expressions of interface names to skip even when
	// they match Include. nil means DefaultExclude(); an empty non-nil slice
	// excludes nothing.
	Exclude []string
	// IncludeDown considers links that are not up too. By default only up
	// links count: a link that is down carries no traffic, and its MTU
	// (often a driver default) says nothing about the network.
	IncludeDown bool
	// Fallback is the MTU reported when no link qualifies; zero means
	// FallbackMTU (1460). It must be between MinMTU and MaxMTU.
	Fallback int
	// Lister lists the links. Required.
	Lister LinkLister
}

// HostMTU is the result of a detection.
type HostMTU struct {
	// MTU is the smallest MTU among the qualifying links, or the fallback.
	MTU int
	// Interface names the link MTU came from; empty when FellBack.
	Interface string
	// FellBack reports that no link qualified and MTU is the fallback.
	FellBack bool
}

// Detector finds the host MTU: the smallest MTU among the links that are up
// and whose names match its Include patterns and none of its Exclude
// patterns. It is safe for concurrent use.
type Detector struct {
	filter      ifname.Filter
	includeDown bool
	fallback    int
	lister      LinkLister
}

// NewDetector validates o and returns a Detector. It fails, with an error
// wrapping ErrInvalid (and ErrInvalidPattern for a bad pattern), when a
// pattern does not compile, Fallback is out of range or Lister is nil. It
// does no I/O.
func NewDetector(o DetectorOptions) (*Detector, error) {
	if o.Lister == nil {
		return nil, invalidf(ErrInvalid, "DetectorOptions.Lister is required")
	}
	fallback := o.Fallback
	if fallback == 0 {
		fallback = FallbackMTU
	}
	if fallback < MinMTU || fallback > MaxMTU {
		return nil, invalidf(ErrInvalidMTU, "DetectorOptions.Fallback %d is outside %d–%d", o.Fallback, MinMTU, MaxMTU)
	}
	excludes := o.Exclude
	if excludes == nil {
		excludes = defaultExclude
	}
	filter, err := ifname.NewFilter(o.Include, excludes)
	if err != nil {
		return nil, invalidf(ErrInvalidPattern, "DetectorOptions.%w", err)
	}
	return &Detector{
		filter:      filter,
		includeDown: o.IncludeDown,
		fallback:    fallback,
		lister:      o.Lister,
	}, nil
}

// Matches reports whether an interface called name is considered by the
// Detector (matches Include and not Exclude), whatever its state. An agent
// can use it to ignore link events that cannot change the host MTU.
func (d *Detector) Matches(name string) bool { return d.filter.Matches(name) }

// Detect lists the links and returns the smallest MTU among those that
// qualify. Ties go to the lexically smallest name, so the result does not
// depend on listing order. When none qualifies it returns the fallback
// with FellBack set. A lister failure returns an error wrapping
// ErrListLinks and the lister's error. A nil ctx is taken as
// context.Background().
func (d *Detector) Detect(ctx context.Context) (HostMTU, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	links, err := d.lister.Links(ctx)
	if err != nil {
		if strings.HasPrefix(err.Error(), "mtu: ") { // NetlinkLister's errors name the package
			return HostMTU{}, errs.Also(err, ErrListLinks)
		}
		return HostMTU{}, fmt.Errorf("%w: %w", ErrListLinks, err)
	}
	return d.pick(links), nil
}

// pick chooses the host MTU among links.
func (d *Detector) pick(links []Link) HostMTU {
	best := HostMTU{MTU: d.fallback, FellBack: true}
	for _, l := range links {
		if l.MTU <= 0 || (!l.Up && !d.includeDown) || !d.Matches(l.Name) {
			continue
		}
		if best.FellBack || l.MTU < best.MTU || (l.MTU == best.MTU && l.Name < best.Interface) {
			best = HostMTU{MTU: l.MTU, Interface: l.Name}
		}
	}
	return best
}
