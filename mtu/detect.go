package mtu

import (
	"context"
	"fmt"
	"reflect"

	"github.com/nodeplane/nodeplane/internal/ifname"
	"github.com/nodeplane/nodeplane/kernel"
)

// FallbackMTU is the host MTU a Detector reports when no link qualifies:
// 1460, the smallest MTU in common use among clouds, so a pod MTU derived
// from it fits almost anywhere.
const FallbackMTU = 1460

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

// DefaultExclude returns the Exclude patterns a node agent's Detector
// wants unless it names its uplinks with Include: loopback, veths, and the
// tunnels, bridges and helper devices that node agents (Calico, Flannel,
// Cilium, Antrea, Weave, kube-proxy, kube-router, nodeplane agents using
// the np- prefix), container runtimes (docker0, br-…, cni0), libvirt and
// VPNs create. They are not the node's uplinks, and their MTUs (a pod
// veth's is the pod MTU; a tunnel's is already reduced) would give a wrong
// host MTU. The result is a fresh copy: append to it to extend the list.
func DefaultExclude() []string {
	return append([]string(nil), defaultExclude...)
}

// DetectorOptions configure a Detector.
type DetectorOptions struct {
	// Kernel lists the links of the namespace whose host MTU is wanted: a
	// *kernel.Namespace (kernel.Open, kernel.OpenCurrent) or, in tests, a
	// *kernelfake.Namespace. Required: there is no fallback to the
	// process's namespace. The Detector only calls Links.
	Kernel kernel.Links
	// Include are regular expressions (Go syntax, unanchored unless the
	// pattern anchors itself) of the interface names to consider. A link
	// qualifies when it matches at least one. Empty includes every name.
	Include []string
	// Exclude are regular expressions of interface names to skip even when
	// they match Include. Empty excludes none: Include and Exclude mean
	// what they mean in ifacemonitor, and nothing is filtered by default.
	// A node agent that does not name its uplinks with Include passes
	// DefaultExclude() (extended as it needs), or the pod veths and tunnels
	// would make the host MTU the pod MTU.
	Exclude []string
	// IncludeDown considers links that are not up too. By default only up
	// links count: a link that is down carries no traffic, and its MTU
	// (often a driver default) says nothing about the network.
	IncludeDown bool
	// Fallback is the MTU reported when no link qualifies; zero means
	// FallbackMTU (1460). It must be between MinMTU and MaxMTU.
	Fallback int
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
	k           kernel.Links
}

// NewDetector validates o and returns a Detector. It fails, with an error
// wrapping ErrInvalidOptions (and ErrInvalidPattern for a bad pattern,
// ErrInvalidMTU for a Fallback out of range), when Kernel is nil, a
// pattern does not compile or Fallback is out of range. It does no I/O.
func NewDetector(o DetectorOptions) (*Detector, error) {
	if o.Kernel == nil || isNilPointer(o.Kernel) {
		return nil, invalidf(ErrInvalidOptions, "DetectorOptions.Kernel is required (the namespace to list: kernel.Open, kernel.OpenCurrent, or a kernelfake.Namespace)")
	}
	fallback := o.Fallback
	if fallback == 0 {
		fallback = FallbackMTU
	}
	if fallback < MinMTU || fallback > MaxMTU {
		return nil, invalidf(ErrInvalidMTU, "DetectorOptions.Fallback %d is outside %d–%d", o.Fallback, MinMTU, MaxMTU)
	}
	filter, err := ifname.NewFilter(o.Include, o.Exclude)
	if err != nil {
		return nil, invalidf(ErrInvalidPattern, "DetectorOptions.%w", err)
	}
	return &Detector{
		filter:      filter,
		includeDown: o.IncludeDown,
		fallback:    fallback,
		k:           o.Kernel,
	}, nil
}

// isNilPointer reports whether v holds a nil pointer, which would fail on
// the first call instead of in the constructor.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// Matches reports whether an interface called name is considered by the
// Detector (matches Include and not Exclude), whatever its state. An agent
// can use it to ignore link events that cannot change the host MTU.
func (d *Detector) Matches(name string) bool { return d.filter.Matches(name) }

// Detect lists the links and returns the smallest MTU among those that
// qualify: up (kernel.LinkUp: administratively up and operational, unless
// IncludeDown), with a positive MTU, matching Include and not Exclude.
// Ties go to the lexically smallest name, so the result does not depend on
// listing order. When none qualifies it returns the fallback with FellBack
// set. A listing failure returns an error wrapping ErrListLinks and the
// Kernel's error. A nil ctx is taken as context.Background().
func (d *Detector) Detect(ctx context.Context) (HostMTU, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	links, err := d.k.Links(ctx)
	if err != nil {
		return HostMTU{}, fmt.Errorf("%w: %w", ErrListLinks, err)
	}
	return d.pick(links), nil
}

// pick chooses the host MTU among links.
func (d *Detector) pick(links []kernel.Link) HostMTU {
	best := HostMTU{MTU: d.fallback, FellBack: true}
	for i := range links {
		l := &links[i]
		if l.MTU <= 0 || (l.State() != kernel.LinkUp && !d.includeDown) || !d.Matches(l.Name) {
			continue
		}
		if best.FellBack || l.MTU < best.MTU || (l.MTU == best.MTU && l.Name < best.Interface) {
			best = HostMTU{MTU: l.MTU, Interface: l.Name}
		}
	}
	return best
}
