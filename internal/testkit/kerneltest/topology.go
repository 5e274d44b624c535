//go:build linux

package kerneltest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Limits of the address plan.
const (
	// MaxHosts is the largest TopologyOptions.Hosts.
	MaxHosts = 250
	// MaxPodsPerHost is the largest TopologyOptions.PodsPerHost.
	MaxPodsPerHost = 250
)

// Fixed names and addresses of the topology.
const (
	// UnderlayIf is the name of every host's underlay interface.
	UnderlayIf = "eth0"
	// PodIf is the name of the interface inside every pod.
	PodIf = "eth0"
	// BridgeName is the bridge inside the switch namespace.
	BridgeName = "br0"
	// DefaultPodIfacePrefix names the host side of pod veths: veth1, veth2…
	DefaultPodIfacePrefix = "veth"
	// GatewayMAC is the MAC address of every host-side pod veth; pods
	// reach their gateway addresses through permanent neighbour entries
	// pointing at it.
	GatewayMAC = "ee:ee:ee:ee:ee:ee"
)

var (
	gatewayV4     = netip.MustParseAddr("169.254.1.1")
	gatewayV6     = netip.MustParseAddr("fe80::1")
	gatewayMAC, _ = net.ParseMAC(GatewayMAC)
)

// Underlay says how the hosts of a Topology are connected.
type Underlay uint8

const (
	// UnderlayBridge connects every host by a veth pair to a bridge in a
	// separate switch namespace. It is the zero value.
	UnderlayBridge Underlay = iota
	// UnderlayVeth connects exactly two hosts by one veth pair.
	UnderlayVeth
)

// String returns "bridge" or "veth".
func (u Underlay) String() string {
	switch u {
	case UnderlayBridge:
		return "bridge"
	case UnderlayVeth:
		return "veth"
	}
	return fmt.Sprintf("Underlay(%d)", uint8(u))
}

// Stack selects the IP families a Topology configures.
type Stack uint8

const (
	// DualStack configures IPv4 and IPv6. It is the zero value.
	DualStack Stack = iota
	// IPv4Only configures IPv4 addresses and routes only.
	IPv4Only
	// IPv6Only configures IPv6 addresses and routes only.
	IPv6Only
)

// String returns "dual", "ipv4" or "ipv6".
func (s Stack) String() string {
	switch s {
	case DualStack:
		return "dual"
	case IPv4Only:
		return "ipv4"
	case IPv6Only:
		return "ipv6"
	}
	return fmt.Sprintf("Stack(%d)", uint8(s))
}

// IPv4 reports whether the stack includes IPv4.
func (s Stack) IPv4() bool { return s == DualStack || s == IPv4Only }

// IPv6 reports whether the stack includes IPv6.
func (s Stack) IPv6() bool { return s == DualStack || s == IPv6Only }

// TopologyOptions describes a Topology to build.
type TopologyOptions struct {
	// Hosts is the number of host namespaces, 1 to MaxHosts (exactly 2
	// with UnderlayVeth).
	Hosts int
	// PodsPerHost is the number of pod namespaces behind each host, 0 to
	// MaxPodsPerHost.
	PodsPerHost int
	// Underlay connects the hosts; the zero value is UnderlayBridge.
	Underlay Underlay
	// Stack selects the IP families; the zero value is DualStack.
	Stack Stack
	// PodIfacePrefix names the host side of pod veths, followed by the pod
	// number (veth1, veth2…); empty means DefaultPodIfacePrefix. Use it to
	// match a driver's interface pattern, e.g. "cali".
	PodIfacePrefix string
}

// Validate reports the first problem with o as an error wrapping ErrInvalid.
func (o TopologyOptions) Validate() error {
	switch {
	case o.Underlay != UnderlayBridge && o.Underlay != UnderlayVeth:
		return fmt.Errorf("%w: unknown underlay %v", ErrInvalid, o.Underlay)
	case o.Stack > IPv6Only:
		return fmt.Errorf("%w: unknown stack %v", ErrInvalid, o.Stack)
	case o.Hosts < 1 || o.Hosts > MaxHosts:
		return fmt.Errorf("%w: hosts %d out of range 1..%d", ErrInvalid, o.Hosts, MaxHosts)
	case o.Underlay == UnderlayVeth && o.Hosts != 2:
		return fmt.Errorf("%w: a veth underlay joins exactly 2 hosts, not %d", ErrInvalid, o.Hosts)
	case o.PodsPerHost < 0 || o.PodsPerHost > MaxPodsPerHost:
		return fmt.Errorf("%w: pods per host %d out of range 0..%d", ErrInvalid, o.PodsPerHost, MaxPodsPerHost)
	}
	prefix := o.podIfacePrefix()
	longest := fmt.Sprintf("%s%d", prefix, max(o.PodsPerHost, 1))
	if len(longest) > unix.IFNAMSIZ-1 {
		return fmt.Errorf("%w: pod interface name %q longer than %d bytes", ErrInvalid, longest, unix.IFNAMSIZ-1)
	}
	if strings.ContainsAny(prefix, "/:% \t\n") || strings.ContainsRune(prefix, 0) {
		return fmt.Errorf("%w: pod interface prefix %q contains characters not allowed in interface names", ErrInvalid, prefix)
	}
	return nil
}

func (o TopologyOptions) podIfacePrefix() string {
	if o.PodIfacePrefix == "" {
		return DefaultPodIfacePrefix
	}
	return o.PodIfacePrefix
}

// UnderlayPrefixes returns host number host's (1-based) underlay addresses:
// 198.18.0.<host>/24 and fd00:198:18::<host>/64 (host written in hex).
func UnderlayPrefixes(host int) (v4, v6 netip.Prefix, err error) {
	if host < 1 || host > MaxHosts {
		return v4, v6, fmt.Errorf("%w: host number %d out of range 1..%d", ErrInvalid, host, MaxHosts)
	}
	v4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, 0, byte(host)}), 24)
	v6 = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0x01, 0x98, 0, 0x18, 14: byte(host >> 8), 15: byte(host)}), 64)
	return v4, v6, nil
}

// PodCIDRs returns the pod ranges of host number host (1-based):
// 10.244.<host>.0/24 and fd00:10:244:<host>::/64 (host written in hex).
func PodCIDRs(host int) (v4, v6 netip.Prefix, err error) {
	if host < 1 || host > MaxHosts {
		return v4, v6, fmt.Errorf("%w: host number %d out of range 1..%d", ErrInvalid, host, MaxHosts)
	}
	v4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(host), 0}), 24)
	v6 = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 0, byte(host)}), 64)
	return v4, v6, nil
}

// PodAddrs returns the addresses of pod number pod on host number host (both
// 1-based): 10.244.<host>.<pod> and fd00:10:244:<host>::<pod> (numbers
// written in hex).
func PodAddrs(host, pod int) (v4, v6 netip.Addr, err error) {
	c4, c6, err := PodCIDRs(host)
	if err != nil {
		return v4, v6, err
	}
	if pod < 1 || pod > MaxPodsPerHost {
		return v4, v6, fmt.Errorf("%w: pod number %d out of range 1..%d", ErrInvalid, pod, MaxPodsPerHost)
	}
	b4, b6 := c4.Addr().As4(), c6.Addr().As16()
	b4[3] = byte(pod)
	b6[15] = byte(pod)
	return netip.AddrFrom4(b4), netip.AddrFrom16(b6), nil
}

// Topology is a set of namespaces wired like a small cluster: hosts on a
// shared underlay, pods behind each host. See the package documentation for
// the wiring and address plan.
type Topology struct {
	// Options are the options the topology was built with, defaults filled.
	Options TopologyOptions
	// Switch holds the bridge for UnderlayBridge, nil for UnderlayVeth.
	Switch *NS
	// Hosts are the hosts in order; Hosts[i] has number i+1.
	Hosts []*Host
}

// Host is one host namespace of a Topology.
type Host struct {
	// Name is "host<Number>".
	Name string
	// Number is the 1-based host number used in its addresses.
	Number int
	// NS is the host's namespace.
	NS *NS
	// UnderlayIf is the underlay interface's name in NS (UnderlayIf).
	UnderlayIf string
	// UnderlayIPv4 and UnderlayIPv6 are the underlay addresses with
	// their prefix length; invalid when the family is off.
	UnderlayIPv4, UnderlayIPv6 netip.Prefix
	// PodCIDRv4 and PodCIDRv6 contain the host's pod addresses; invalid
	// when the family is off.
	PodCIDRv4, PodCIDRv6 netip.Prefix
	// Pods are the host's pods in order; Pods[i] has number i+1.
	Pods []*Pod
}

// UnderlayAddrs returns the host's valid underlay addresses, IPv4 first.
func (h *Host) UnderlayAddrs() []netip.Addr {
	return validAddrs(h.UnderlayIPv4.Addr(), h.UnderlayIPv6.Addr())
}

// Pod is one pod namespace of a Topology.
type Pod struct {
	// Name is "host<H>-pod<P>".
	Name string
	// Number is the 1-based pod number used in its addresses.
	Number int
	// Host is the pod's host.
	Host *Host
	// NS is the pod's namespace.
	NS *NS
	// Iface is the pod's interface inside NS (PodIf).
	Iface string
	// HostVeth is the host-side veth in Host.NS.
	HostVeth string
	// IPv4 and IPv6 are the pod's addresses; invalid when the family is
	// off.
	IPv4, IPv6 netip.Addr
}

// Addrs returns the pod's valid addresses, IPv4 first.
func (p *Pod) Addrs() []netip.Addr { return validAddrs(p.IPv4, p.IPv6) }

func validAddrs(addrs ...netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.IsValid() {
			out = append(out, a)
		}
	}
	return out
}

// Pods returns every pod of every host, host by host.
func (tp *Topology) Pods() []*Pod {
	var out []*Pod
	for _, h := range tp.Hosts {
		out = append(out, h.Pods...)
	}
	return out
}

// NewTopology builds the namespaces and links opts describes and returns
// them; every namespace is removed when the test ends. Hosts can reach each
// other over the underlay and their own pods; pods can reach their host and
// the other pods of their host. Nothing routes to another host's pods until
// AddPodRoutesViaUnderlay (or the package under test) installs routes.
// Invalid options or any setup failure fail the test; when the test fails, the
// wiring and each namespace's addresses and routes are logged.
func NewTopology(t testing.TB, opts TopologyOptions) *Topology {
	t.Helper()
	if err := opts.Validate(); err != nil {
		t.Fatalf("kerneltest: NewTopology: %v", err)
		return nil
	}
	RequireKernel(t)
	opts.PodIfacePrefix = opts.podIfacePrefix()
	tp := &Topology{Options: opts}
	if err := tp.build(t); err != nil {
		t.Logf("kerneltest: topology state at failure:\n%s", tp.Dump(t.Context()))
		t.Fatalf("kerneltest: NewTopology(%+v): %v", opts, err)
		return nil
	}
	// Registered after every namespace, so it runs before their removal.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kerneltest: topology state at failure:\n%s", tp.Dump(context.Background()))
		}
	})
	return tp
}

// build creates the namespaces (each with its cleanup) and wires them.
func (tp *Topology) build(t testing.TB) error {
	opts := tp.Options
	if opts.Underlay == UnderlayBridge {
		tp.Switch = NewNS(t)
		if err := tp.buildSwitch(); err != nil {
			return fmt.Errorf("switch %s: %w", tp.Switch, err)
		}
	}
	for i := range opts.Hosts {
		h, err := tp.newHost(t, i+1)
		if err != nil {
			return err
		}
		tp.Hosts = append(tp.Hosts, h)
	}
	if err := tp.buildUnderlay(); err != nil {
		return err
	}
	for _, h := range tp.Hosts {
		for j := range opts.PodsPerHost {
			p, err := tp.newPod(t, h, j+1)
			if err != nil {
				return err
			}
			h.Pods = append(h.Pods, p)
		}
	}
	return nil
}

// buildSwitch creates the bridge in the switch namespace. IPv6 is off there
// (the bridge only forwards frames) and multicast snooping is off, so
// neighbour discovery is flooded like any broadcast.
func (tp *Topology) buildSwitch() error {
	sw := tp.Switch
	if err := setSysctls(sw, []sysctl{{"net.ipv6.conf.all.disable_ipv6", "1"}, {"net.ipv6.conf.default.disable_ipv6", "1"}}); err != nil {
		return err
	}
	snooping := false
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName}, MulticastSnooping: &snooping}
	if err := sw.Handle().LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", BridgeName, err)
	}
	return setUp(sw, BridgeName)
}

// newHost creates host number n's namespace and its forwarding settings.
func (tp *Topology) newHost(t testing.TB, n int) (*Host, error) {
	stack := tp.Options.Stack
	h := &Host{Name: fmt.Sprintf("host%d", n), Number: n, NS: NewNS(t), UnderlayIf: UnderlayIf}
	u4, u6, err := UnderlayPrefixes(n)
	if err != nil {
		return nil, err
	}
	c4, c6, err := PodCIDRs(n)
	if err != nil {
		return nil, err
	}
	if stack.IPv4() {
		h.UnderlayIPv4, h.PodCIDRv4 = u4, c4
	}
	if stack.IPv6() {
		h.UnderlayIPv6, h.PodCIDRv6 = u6, c6
	}
	sysctls := append(noDADSysctls(), noICMPRateLimit()...)
	if stack.IPv4() {
		sysctls = append(sysctls, sysctl{"net.ipv4.ip_forward", "1"})
	}
	if stack.IPv6() {
		sysctls = append(sysctls, sysctl{"net.ipv6.conf.all.forwarding", "1"})
	}
	if err := setSysctls(h.NS, sysctls); err != nil {
		return nil, fmt.Errorf("%s: %w", h.Name, err)
	}
	return h, nil
}

// sysctl is a key and the value to write.
type sysctl struct{ key, value string }

// setSysctls writes each sysctl in ns, in order.
func setSysctls(ns *NS, sysctls []sysctl) error {
	for _, s := range sysctls {
		if err := ns.SetSysctl(s.key, s.value); err != nil {
			return err
		}
	}
	return nil
}

// noICMPRateLimit turns off the per-destination rate limit on ICMP errors,
// so a probe of an unreachable address gets its "unreachable" answer at once
// however many probes came before.
func noICMPRateLimit() []sysctl {
	return []sysctl{{"net.ipv4.icmp_ratelimit", "0"}, {"net.ipv6.icmp.ratelimit", "0"}}
}

// noDADSysctls turn off duplicate address detection for interfaces created
// afterwards, so IPv6 addresses (link-local ones too) are usable at once.
func noDADSysctls() []sysctl {
	return []sysctl{{"net.ipv6.conf.all.accept_dad", "0"}, {"net.ipv6.conf.default.accept_dad", "0"}}
}

// buildUnderlay connects the hosts and gives them their underlay addresses.
func (tp *Topology) buildUnderlay() error {
	if tp.Options.Underlay == UnderlayVeth {
		a, b := tp.Hosts[0], tp.Hosts[1]
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: a.UnderlayIf},
			PeerName:      b.UnderlayIf,
			PeerNamespace: netlink.NsFd(b.NS.NsHandle()),
		}
		if err := a.NS.Handle().LinkAdd(veth); err != nil {
			return fmt.Errorf("veth %s/%s <-> %s/%s: %w", a.Name, a.UnderlayIf, b.Name, b.UnderlayIf, err)
		}
	} else {
		for _, h := range tp.Hosts {
			port := fmt.Sprintf("h%d", h.Number)
			veth := &netlink.Veth{
				LinkAttrs:     netlink.LinkAttrs{Name: h.UnderlayIf},
				PeerName:      port,
				PeerNamespace: netlink.NsFd(tp.Switch.NsHandle()),
			}
			if err := h.NS.Handle().LinkAdd(veth); err != nil {
				return fmt.Errorf("veth %s/%s <-> switch/%s: %w", h.Name, h.UnderlayIf, port, err)
			}
			if err := enslave(tp.Switch, port, BridgeName); err != nil {
				return fmt.Errorf("switch: %w", err)
			}
		}
	}
	for _, h := range tp.Hosts {
		if err := setUp(h.NS, h.UnderlayIf); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		for _, p := range []netip.Prefix{h.UnderlayIPv4, h.UnderlayIPv6} {
			if err := addAddr(h.NS, h.UnderlayIf, p); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
		}
	}
	return nil
}

// newPod creates pod number n behind host h: a namespace, a veth pair, the
// pod's addresses and default routes via the link-local gateways, and host
// routes to the pod's addresses.
func (tp *Topology) newPod(t testing.TB, h *Host, n int) (*Pod, error) {
	p := &Pod{
		Name:     fmt.Sprintf("%s-pod%d", h.Name, n),
		Number:   n,
		Host:     h,
		NS:       NewNS(t),
		Iface:    PodIf,
		HostVeth: fmt.Sprintf("%s%d", tp.Options.PodIfacePrefix, n),
	}
	v4, v6, err := PodAddrs(h.Number, n)
	if err != nil {
		return nil, err
	}
	if tp.Options.Stack.IPv4() {
		p.IPv4 = v4
	}
	if tp.Options.Stack.IPv6() {
		p.IPv6 = v6
	}
	if err := p.wire(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return p, nil
}

func (p *Pod) wire() error {
	if err := setSysctls(p.NS, append(noDADSysctls(), noICMPRateLimit()...)); err != nil {
		return err
	}
	hostNS := p.Host.NS
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.HostVeth, HardwareAddr: gatewayMAC},
		PeerName:      p.Iface,
		PeerNamespace: netlink.NsFd(p.NS.NsHandle()),
	}
	if err := hostNS.Handle().LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s/%s <-> %s: %w", p.Host.Name, p.HostVeth, p.Iface, err)
	}
	if err := setUp(hostNS, p.HostVeth); err != nil {
		return err
	}
	if err := setUp(p.NS, p.Iface); err != nil {
		return err
	}
	podLink, err := p.NS.Handle().LinkByName(p.Iface)
	if err != nil {
		return fmt.Errorf("find %s: %w", p.Iface, err)
	}
	hostLink, err := hostNS.Handle().LinkByName(p.HostVeth)
	if err != nil {
		return fmt.Errorf("find %s: %w", p.HostVeth, err)
	}
	for _, fam := range []struct {
		addr netip.Addr
		gw   netip.Addr
	}{{p.IPv4, gatewayV4}, {p.IPv6, gatewayV6}} {
		if !fam.addr.IsValid() {
			continue
		}
		host := netip.PrefixFrom(fam.addr, fam.addr.BitLen())
		if err := addAddr(p.NS, p.Iface, host); err != nil {
			return err
		}
		neigh := &netlink.Neigh{
			LinkIndex:    podLink.Attrs().Index,
			Family:       family(fam.gw),
			State:        netlink.NUD_PERMANENT,
			IP:           fam.gw.AsSlice(),
			HardwareAddr: gatewayMAC,
		}
		if err := p.NS.Handle().NeighAdd(neigh); err != nil {
			return fmt.Errorf("gateway neighbour %s: %w", fam.gw, err)
		}
		def := &netlink.Route{LinkIndex: podLink.Attrs().Index, Gw: fam.gw.AsSlice(), Family: family(fam.gw)}
		if fam.gw.Is4() {
			def.Flags = int(netlink.FLAG_ONLINK)
		}
		if err := p.NS.Handle().RouteAdd(def); err != nil {
			return fmt.Errorf("default route via %s: %w", fam.gw, err)
		}
		toPod := &netlink.Route{LinkIndex: hostLink.Attrs().Index, Dst: prefixNet(host)}
		if fam.addr.Is4() {
			toPod.Scope = netlink.SCOPE_LINK
		}
		if err := hostNS.Handle().RouteAdd(toPod); err != nil {
			return fmt.Errorf("host route %s dev %s: %w", host, p.HostVeth, err)
		}
	}
	return nil
}

// AddPodRoutesViaUnderlay installs, on every host, a route to each other
// host's pod CIDRs via that host's underlay address, so pods on different
// hosts reach each other. It is what the packages under test (routetable,
// vxlan…) normally do; use it to test the topology end to end. It may be
// called again (routes are replaced).
func (tp *Topology) AddPodRoutesViaUnderlay() error {
	for _, h := range tp.Hosts {
		link, err := h.NS.Handle().LinkByName(h.UnderlayIf)
		if err != nil {
			return fmt.Errorf("kerneltest: %s: find %s: %w", h.Name, h.UnderlayIf, err)
		}
		for _, o := range tp.Hosts {
			if o == h {
				continue
			}
			for _, r := range []struct{ dst, via netip.Prefix }{{o.PodCIDRv4, o.UnderlayIPv4}, {o.PodCIDRv6, o.UnderlayIPv6}} {
				if !r.dst.IsValid() {
					continue
				}
				route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(r.dst), Gw: r.via.Addr().AsSlice()}
				if err := h.NS.Handle().RouteReplace(route); err != nil {
					return fmt.Errorf("kerneltest: %s: route %s via %s: %w", h.Name, r.dst, r.via.Addr(), err)
				}
			}
		}
	}
	return nil
}

// Dump returns, for the switch and every host and pod, its name and the
// output of `ip addr`, `ip route` and `ip -6 route` inside it, for debugging.
// NewTopology logs it automatically when the test fails.
func (tp *Topology) Dump(ctx context.Context) string {
	var b strings.Builder
	section := func(label string, ns *NS) {
		fmt.Fprintf(&b, "=== %s (netns %s)\n", label, ns.Name())
		for _, args := range [][]string{{"-br", "addr"}, {"route"}, {"-6", "route"}} {
			out, err := ns.Exec(ctx, "ip", args...)
			if err != nil {
				fmt.Fprintf(&b, "ip %s: %v\n", strings.Join(args, " "), err)
				continue
			}
			fmt.Fprintf(&b, "$ ip %s\n%s", strings.Join(args, " "), out)
		}
	}
	if tp.Switch != nil {
		section("switch", tp.Switch)
	}
	for _, h := range tp.Hosts {
		section(h.Name, h.NS)
		for _, p := range h.Pods {
			section(p.Name, p.NS)
		}
	}
	return b.String()
}

// setUp brings the named link up in ns.
func setUp(ns *NS, name string) error {
	link, err := ns.Handle().LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	if err := ns.Handle().LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// enslave attaches the named port to the named bridge in ns and brings it up.
func enslave(ns *NS, port, bridge string) error {
	h := ns.Handle()
	p, err := h.LinkByName(port)
	if err != nil {
		return fmt.Errorf("find %s: %w", port, err)
	}
	br, err := h.LinkByName(bridge)
	if err != nil {
		return fmt.Errorf("find %s: %w", bridge, err)
	}
	if err := h.LinkSetMaster(p, br); err != nil {
		return fmt.Errorf("attach %s to %s: %w", port, bridge, err)
	}
	return setUp(ns, port)
}

// addAddr adds p to the named link in ns without duplicate address
// detection; an invalid p (family off) is skipped.
func addAddr(ns *NS, name string, p netip.Prefix) error {
	if !p.IsValid() {
		return nil
	}
	link, err := ns.Handle().LinkByName(name)
	if err != nil {
		return fmt.Errorf("find %s: %w", name, err)
	}
	addr := &netlink.Addr{IPNet: prefixNet(p)}
	if p.Addr().Is6() {
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := ns.Handle().AddrAdd(link, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", p, name, err)
	}
	return nil
}

// prefixNet converts p (address kept, not masked) to a *net.IPNet.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// family returns the netlink family of a.
func family(a netip.Addr) int {
	if a.Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}
