// Size: the agent's configuration and its assembly of every manager and driver, read top to bottom in one place.

// Package agent is the reference node agent assembled from nodeplane: a
// dataplane.Loop driving route tables, ip sets, an overlay (VXLAN by default;
// IPIP, cross-subnet or direct routing by option), optional WireGuard
// encryption, the local pods (package endpoints: routes, neighbours,
// interface sysctls), their floating IPs, pod egress masquerade, the service
// loop guard, the host-address set and the node's sysctls, fed by an
// interface monitor, an MTU monitor and a datastore, with health, readiness,
// Prometheus metrics and a status document on a local HTTP endpoint. It
// programs a kernel.Kernel: a real namespace, or a kernelfake one in tests.
//
// Run assembles and runs it until its context ends and leaves the dataplane
// in place (a restarted agent adopts it and writes nothing); Cleanup removes
// everything the agent owns.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodeplane/nodeplane/bpf/proxy"
	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/endpoints"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/floatingips"
	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/idalloc"
	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/ipsets"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/markbits"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/mtu"
	"github.com/nodeplane/nodeplane/netfilter"
	"github.com/nodeplane/nodeplane/nftables"
	"github.com/nodeplane/nodeplane/overlay"
	"github.com/nodeplane/nodeplane/policy"
	"github.com/nodeplane/nodeplane/routetable"
	"github.com/nodeplane/nodeplane/serviceloop"
	"github.com/nodeplane/nodeplane/sysctls"
	"github.com/nodeplane/nodeplane/vxlan"
	"github.com/nodeplane/nodeplane/wireguard"
)

// Overlay says how pods on different nodes reach each other.
type Overlay string

// The overlays.
const (
	// OverlayVXLAN sends every remote block through the VXLAN device.
	OverlayVXLAN Overlay = "vxlan"
	// OverlayVXLANCrossSubnet routes nodes on a shared subnet directly and
	// the others through VXLAN.
	OverlayVXLANCrossSubnet Overlay = "vxlan-cross-subnet"
	// OverlayIPIP sends every remote IPv4 block through the IPIP device
	// (where the kernel has the ipip module).
	OverlayIPIP Overlay = "ipip"
	// OverlayIPIPCrossSubnet routes nodes on a shared subnet directly and
	// the others through IPIP.
	OverlayIPIPCrossSubnet Overlay = "ipip-cross-subnet"
	// OverlayDirect encapsulates nothing: nodes on a shared subnet are
	// routed directly (a flat L2 network).
	OverlayDirect Overlay = "direct"
)

// Overlays lists the valid overlays.
var Overlays = []Overlay{OverlayVXLAN, OverlayVXLANCrossSubnet, OverlayIPIP, OverlayIPIPCrossSubnet, OverlayDirect}

// Ownership: the names that mark what the agent owns in the kernel.
const (
	// SetPrefixV4 and SetPrefixV6 start the names of the agent's ip sets.
	SetPrefixV4 = "np4-"
	SetPrefixV6 = "np6-"
	// DefaultWireGuardInterface is the WireGuard device's default name.
	DefaultWireGuardInterface = "wg-np"
	// ChainPrefix starts the names of the agent's iptables chains.
	ChainPrefix = "npm-"
	// MasqueradeChain is the masquerade manager's chain.
	MasqueradeChain = ChainPrefix + "masq"
	// FloatingDNATChain and FloatingSNATChain are the floating IP manager's
	// chains (package floatingips), in the nat table.
	FloatingDNATChain = ChainPrefix + "fip-dnat"
	FloatingSNATChain = ChainPrefix + "fip-snat"
	// ServiceLoopChain is the service loop manager's chain (package
	// serviceloop), in the filter table: it drops forwarded traffic to a
	// service range that no proxy translated.
	ServiceLoopChain = ChainPrefix + "svc-loop"
	// DefaultBPFPinDir holds the BPF service proxy's pins.
	DefaultBPFPinDir = "/sys/fs/bpf/nodeplane"
	// DefaultListen is the default address of the local HTTP endpoint.
	DefaultListen = "127.0.0.1:9765"
	// MTUFileName is the file in the state directory that holds the pod
	// MTU, for the CNI plugin.
	MTUFileName = "mtu"
	// KeyFileName is the file in the state directory that holds the
	// WireGuard private key.
	KeyFileName = "wireguard.key"
)

// Config configures an agent. NodeName, Datastore (for Run) and StateDir are
// required; every other zero field takes the default its comment names.
type Config struct {
	// NodeName is this node's name in the datastore.
	NodeName string
	// Datastore is where the cluster comes from.
	Datastore datastore.Datastore
	// NetNS is the network namespace to program (a path such as
	// /run/netns/node1); empty means the agent's own. Ignored when Kernel
	// is set.
	NetNS string
	// Kernel is the network namespace to program, already open: a
	// *kernel.Namespace, or a kernelfake.Namespace in tests. Nil means
	// NetNS, opened by Run and Cleanup and closed when they return. What
	// runs inside the namespace (the BPF proxy, a WireGuard device) needs
	// a Kernel whose Do works; on one whose Do is not supported
	// (kernelfake's), those features are refused.
	Kernel kernel.Kernel
	// Listen is the local HTTP endpoint (health, readiness, metrics,
	// status); empty means DefaultListen, "-" none.
	Listen string
	// StateDir holds the pod MTU file and the WireGuard key.
	StateDir string
	// Overlay is OverlayVXLAN when empty.
	Overlay Overlay
	// IPv6 also programs the IPv6 dataplane (a second route table, set
	// driver and overlay manager).
	IPv6 bool
	// NoIPv4, with IPv6, makes the node IPv6 only: no IPv4 dataplane at
	// all (no IPv4 forwarding, sets, rules, routes or tunnel devices).
	NoIPv4 bool
	// planning is set by Plan: the BPF proxy, which loads its programs as
	// it starts, is left out, and the rules for its marks are planned.
	planning bool
	// VXLANVNI and VXLANPort are the VXLAN device's; 0 means the vxlan
	// package's defaults (4096, 4789).
	VXLANVNI  uint32
	VXLANPort uint16
	// WireGuard encrypts pod traffic between nodes. Off, the agent removes
	// what an earlier run with it on left.
	WireGuard bool
	// WireGuardInterface is the device's name; empty means
	// DefaultWireGuardInterface. A userspace device's control socket is
	// one per machine: agents in several namespaces of one machine need
	// several names.
	WireGuardInterface string
	// WireGuardMode chooses the kernel or the userspace implementation
	// (ModeAuto: the kernel's when it has the module).
	WireGuardMode wireguard.Mode
	// WireGuardFailOpen lets traffic to the peers take the main table in
	// plaintext while the device is gone (wireguard.Options.FailOpen); by
	// default it is dropped.
	WireGuardFailOpen bool
	// NoBlackholes gives this node's pod blocks no blackhole route
	// (overlay.Options.NoBlackholes).
	NoBlackholes bool
	// NetworkPolicy enforces the cluster's NetworkPolicies (package
	// policy, on the netfilter backend): a pod a policy selects is denied,
	// per direction of the policy, what no policy allows; pods no policy
	// selects are open (their namespace's allow-all profile); and a pod
	// interface the datastore does not list is dropped (fail closed).
	NetworkPolicy bool
	// NoMasquerade turns pod egress masquerade off (the pools' Masquerade
	// flags then do nothing); off, the agent removes its rules.
	NoMasquerade bool
	// Netfilter is the netfilter backend of the masquerade rules:
	// NetfilterIPTablesLegacy, NetfilterIPTablesNFT or NetfilterNFTables;
	// empty or NetfilterAuto detects the iptables backend the node uses
	// (iptables.DetectBackend). At start the agent removes what an earlier
	// run left on the other backends.
	Netfilter Netfilter
	// IPTablesBackend is the older way to choose an iptables backend:
	// iptables.BackendLegacy or BackendNFT mean Netfilter
	// NetfilterIPTablesLegacy or NetfilterIPTablesNFT (a Netfilter that
	// says otherwise is an error); empty leaves the choice to Netfilter.
	IPTablesBackend iptables.Backend
	// PodInterfacePrefix starts the names of the pods' host-side
	// interfaces; empty means datastore.PodInterfacePrefix ("npv").
	PodInterfacePrefix string
	// BPFProxy load-balances the datastore's services with the BPF
	// service proxy (package bpf/proxy): cluster IPs from pods, NodePorts
	// from other hosts. Off, the agent removes what a run with it on left.
	BPFProxy bool
	// BPFPinDir is the bpffs directory of the proxy's maps and
	// attachments; empty means DefaultBPFPinDir. When it is not on a bpffs
	// the agent mounts one there (in its own mount namespace: mount it
	// beforehand for the dataplane to outlive the agent).
	BPFPinDir string
	// HostInterfaces are the interfaces NodePort traffic arrives on; empty
	// means the interface the host MTU was detected on.
	HostInterfaces []string
	// NodeZone is this node's zone for topology aware routing: a
	// service's connections go to the endpoints hinted for it (see
	// selectEndpoints). Empty means the node's zone in the datastore (the
	// Kubernetes datastore reads its label topology.kubernetes.io/zone).
	NodeZone string
	// BPFCgroup is a cgroup v2 directory whose processes' connections to
	// services from the node's own namespace (hostNetwork pods, the
	// kubelet) the BPF proxy translates at connect(); empty: none.
	BPFCgroup string
	// BPFMaglev gives the BPF proxy Maglev tables (proxy.MaglevOptions)
	// of this size, for connections from outside the node; 0: none.
	// Every node must use the same size.
	BPFMaglev uint32
	// BPFDSR turns on the BPF proxy's direct server return
	// (proxy.Options.DSR) for connections from outside the node to
	// backends on other nodes; every node needs it.
	BPFDSR bool
	// BPFLocalRedirect sends a pod's connection to a backend pod on this
	// node, and its replies, between the two pods' veths straight, past
	// the node's routing and netfilter (proxy.Options.LocalRedirect:
	// netfilter network policy does not see those packets, so the agent
	// refuses it together with NetworkPolicy).
	BPFLocalRedirect bool
	// BPFCgroupTCPOnly leaves UDP out of the connect-time translation
	// (proxy.Options.ConnectTimeTCPOnly): the node's datagrams to a
	// service are translated per packet, so a connected UDP socket
	// follows its service's backends.
	BPFCgroupTCPOnly bool
	// BPFCgroupPods translates at connect() the connections of the pods
	// in BPFCgroup too, not only the node's own
	// (proxy.Options.ConnectTimePods): BPFCgroup must then hold the pods
	// (the kubepods cgroup, or the root one). Needs BPFCgroup.
	BPFCgroupPods bool
	// ResyncInterval is how often every driver re-reads the kernel and
	// repairs drift; zero means dataplane.DefaultResyncInterval.
	ResyncInterval time.Duration
	// Logger receives the agent's structured logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the agent's metrics (and the Go and process
	// collectors); nil means a new registry.
	Registry *prometheus.Registry
}

func (c *Config) defaults() error {
	if c.NodeName == "" {
		return errors.New("agent: a node name is required")
	}
	if c.StateDir == "" {
		return errors.New("agent: a state directory is required")
	}
	if c.Overlay == "" {
		c.Overlay = OverlayVXLAN
	}
	valid := false
	for _, o := range Overlays {
		valid = valid || o == c.Overlay
	}
	if !valid {
		return fmt.Errorf("agent: unknown overlay %q (want one of %v)", c.Overlay, Overlays)
	}
	if c.IPv6 && c.ipip() {
		return fmt.Errorf("agent: overlay %s is IPv4 only", c.Overlay)
	}
	if c.NoIPv4 && !c.IPv6 {
		return errors.New("agent: without IPv4 the node needs IPv6: no family would be programmed")
	}
	if c.BPFLocalRedirect && c.NetworkPolicy {
		// The redirected packets never reach netfilter, where the policy is:
		// refuse rather than let same-node service traffic past it.
		return errors.New("agent: BPF local redirect bypasses netfilter, where NetworkPolicy is enforced: turn one of them off")
	}
	if c.BPFDSR && (c.ipip() || c.WireGuard) {
		// The backend's node must find the frontend's option on an
		// interface with Ethernet headers, where the programs run.
		return errors.New("agent: direct server return needs the packets between nodes on Ethernet devices: not behind IPIP or WireGuard")
	}
	if (c.BPFCgroupPods || c.BPFCgroupTCPOnly) && c.BPFCgroup == "" {
		return errors.New("agent: connect-time translation of pods or of TCP only needs a BPF cgroup")
	}
	if err := c.resolveNetfilter(); err != nil {
		return err
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.WireGuardInterface == "" {
		c.WireGuardInterface = DefaultWireGuardInterface
	}
	if c.PodInterfacePrefix == "" {
		c.PodInterfacePrefix = datastore.PodInterfacePrefix
	}
	if c.BPFPinDir == "" {
		c.BPFPinDir = DefaultBPFPinDir
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	return nil
}

func (c *Config) ipip() bool { return c.Overlay == OverlayIPIP || c.Overlay == OverlayIPIPCrossSubnet }

func (c *Config) families() []ipfamily.Family {
	switch {
	case c.IPv6 && c.NoIPv4:
		return []ipfamily.Family{ipfamily.IPv6}
	case c.IPv6:
		return []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	return []ipfamily.Family{ipfamily.IPv4}
}

// encaps are the encapsulations the pod MTU must leave room for.
func (c *Config) encaps() []mtu.Encap {
	var e []mtu.Encap
	switch c.Overlay {
	case OverlayVXLAN, OverlayVXLANCrossSubnet:
		e = append(e, mtu.VXLAN)
	case OverlayIPIP, OverlayIPIPCrossSubnet:
		e = append(e, mtu.IPIP)
	}
	if c.WireGuard {
		e = append(e, mtu.WireGuard)
	}
	return e
}

// proxyHostInterfaces are the interfaces the BPF proxy serves as host
// interfaces: HostInterfaces and, with direct server return behind the
// VXLAN overlay, its devices, on which another node's forwarded packets
// (the frontend in their option) arrive.
func (c *Config) proxyHostInterfaces() []string {
	out := slices.Clone(c.HostInterfaces)
	if c.BPFDSR && (c.Overlay == OverlayVXLAN || c.Overlay == OverlayVXLANCrossSubnet) {
		for _, f := range c.families() {
			dev := vxlan.DefaultDeviceV4
			if f == ipfamily.IPv6 {
				dev = vxlan.DefaultDeviceV6
			}
			out = append(out, dev)
		}
	}
	return out
}

// podMTU is how the pod MTU follows the host's: less the overheads of the
// encapsulations. With IPv6 the overlay's and WireGuard's IPv6 tunnels run
// over the IPv6 underlay, whose larger overheads the pods' one MTU must
// fit too.
func (c *Config) podMTU() mtu.PodMTUOptions {
	return mtu.PodMTUOptions{Encaps: c.encaps(), PodIPv6: c.IPv6, UnderlayIPv6: c.IPv6}
}

func (c *Config) wgInterface(fam ipfamily.Family) string {
	if fam == ipfamily.IPv6 {
		n := c.WireGuardInterface + "-v6"
		if len(n) > 15 {
			n = n[:12] + "-v6"
		}
		return n
	}
	return c.WireGuardInterface
}

// plane is the assembled dataplane: the loop and what the monitors feed.
type plane struct {
	loop    *dataplane.Loop
	tables  map[ipfamily.Family]*routetable.Table
	wg      []*wireguard.Manager
	wgTable uint32
	devices map[string]string // device name → kind, for the status
	// netfilter is the backend of the masquerade rules (resolved: never
	// NetfilterAuto; empty for a cleanup).
	netfilter Netfilter
	// nftTables are the nftables Tables, whose sockets close releases.
	nftTables []*nftables.Table
	// proxy is the BPF service proxy, nil when off.
	proxy *proxy.Proxy
	// overlays are the overlay managers, one per family (a plan runs
	// their deferred work after its standby pass).
	overlays []*overlay.Manager
	// endpoints are the local pods' managers, which read the links as
	// they declare (see Plan).
	endpoints []*endpoints.Manager
}

// close releases the nftables Tables' sockets and the proxy's file
// descriptors (its pins keep it working).
func (p *plane) close() {
	for _, t := range p.nftTables {
		_ = t.Close()
	}
	if p.proxy != nil {
		_ = p.proxy.Close()
	}
}

// build assembles the loop on ns. With cleanup, every manager is disabled
// and nothing is declared, so the drivers delete exactly what is ours.
func build(ctx context.Context, ns kernel.Kernel, cfg *Config, opts dataplane.Options, hostMTU int, cleanup bool, onKey func(ipfamily.Family, wireguard.PublicKey)) (*plane, error) {
	log := cfg.Logger
	loop, err := dataplane.New(opts)
	if err != nil {
		return nil, err
	}
	p := &plane{loop: loop, tables: map[ipfamily.Family]*routetable.Table{}, devices: map[string]string{}}
	// Mark bits and a routing table for WireGuard, allocated the same way at
	// every start so that a restarted agent finds its own.
	layout, err := markbits.NewLayout(markbits.LayoutOptions{WireGuard: true, Extra: []string{serviceMasqMark, serviceRejectMark},
		Reserved: map[string]uint32{"kube-proxy": markbits.KubeProxyMarks}})
	if err != nil {
		return nil, err
	}
	// The BPF service proxy marks what netfilter must masquerade for it.
	svcMark := layout.Extra[serviceMasqMark]
	// It marks the connections to a service without a ready backend, which
	// the service loop chain rejects as kube-proxy does.
	rejectMark := layout.Extra[serviceRejectMark]
	var masqMarks, rejectMarks []netfilter.MatchMark
	inside := canDo(ns)
	if cfg.BPFProxy && !cleanup && !cfg.planning {
		if err = needDo(ns, "the BPF proxy"); err != nil {
			return nil, err
		}
		p.proxy, err = proxy.New(proxy.Options{Kernel: ns, PinDir: cfg.BPFPinDir, HostInterfaces: cfg.proxyHostInterfaces(),
			PodInterfacePrefixes: []string{cfg.PodInterfacePrefix}, MasqueradeMark: svcMark, MasqueradeMask: svcMark,
			RejectMark: rejectMark, RejectMask: rejectMark,
			Cgroup: cfg.BPFCgroup, Maglev: proxy.MaglevOptions{Enabled: cfg.BPFMaglev != 0, TableSize: cfg.BPFMaglev}, DSR: cfg.BPFDSR, LocalRedirect: cfg.BPFLocalRedirect,
			ConnectTimeTCPOnly: cfg.BPFCgroupTCPOnly, ConnectTimePods: cfg.BPFCgroupPods,
			Logger: log.With("component", "bpf-proxy")})
		if err != nil {
			return nil, err
		}
	}
	if cfg.BPFProxy && !cleanup {
		// The rules the proxy's marks need, also in a plan (which leaves
		// the proxy out).
		masqMarks = []netfilter.MatchMark{{Mark: svcMark, Mask: svcMark}}
		rejectMarks = []netfilter.MatchMark{{Mark: rejectMark, Mask: rejectMark}}
	}
	tables, err := idalloc.NewIndexAllocator(idalloc.IndexOptions{})
	if err != nil {
		return nil, err
	}
	if p.wgTable, err = tables.Grab(); err != nil {
		return nil, err
	}
	add := func(m dataplane.Manager, drivers ...dataplane.Driver) error {
		if m != nil {
			if err := loop.AddManager(m); err != nil {
				return err
			}
		}
		for _, d := range drivers {
			if err := loop.AddDriver(d); err != nil {
				return err
			}
		}
		return nil
	}
	families := cfg.families()
	if cleanup {
		families = []ipfamily.Family{ipfamily.IPv4, ipfamily.IPv6}
	}
	// The netfilter backends of the masquerade rules: the configured or
	// detected one; for a cleanup, nftables and every iptables
	// backend whose binaries the namespace's runner finds.
	var backends []iptables.Backend
	nft := false
	if cleanup {
		for _, b := range []iptables.Backend{iptables.BackendLegacy, iptables.BackendNFT} {
			// Without -t, save creates no table.
			if _, err := ns.Runner().Run(ctx, nil, b.SaveCommand(ipfamily.IPv4)); !errors.Is(err, exec.ErrNotFound) {
				backends = append(backends, b)
			}
		}
		nft = true
	} else {
		if p.netfilter, err = detectNetfilter(ctx, ns, cfg); err != nil {
			return nil, err
		}
		if b, ok := p.netfilter.iptablesBackend(); ok {
			backends = []iptables.Backend{b}
		} else {
			nft = true
		}
	}
	// addNetfilter adds the netfilter managers of family fam on one
	// backend's sets and nat and filter tables; none for a cleanup.
	addNetfilter := func(fam ipfamily.Family, sets netfilter.Sets, nat, filter netfilter.Table, policySets netfilter.Sets) error {
		if cleanup {
			return nil
		}
		if cfg.NetworkPolicy {
			// On nftables, a verdict map finds a pod's chains in one lookup.
			dispatch := policy.DispatchTree
			if _, ok := filter.(*nftables.Table); ok {
				dispatch = policy.DispatchVerdictMap
			}
			pm, err := policy.New(policy.Options{Family: fam, Filter: filter, Sets: policySets, Marks: layout,
				ChainPrefix: ChainPrefix, WorkloadPrefixes: []string{cfg.PodInterfacePrefix}, Dispatch: dispatch,
				WorkloadsReachHost: true, // Kubernetes: a pod's traffic to its node is always allowed
				Logger:             log.With("component", "policy", "family", fam.String())})
			if err != nil {
				return err
			}
			if err := add(pm); err != nil {
				return err
			}
		}
		if !cfg.NoMasquerade {
			m, err := masquerade.New(masquerade.Options{Family: fam, Sets: sets, Table: nat, Chain: MasqueradeChain,
				Marks: masqMarks, Logger: log.With("component", "masquerade", "family", fam.String())})
			if err != nil {
				return err
			}
			if err := add(m); err != nil {
				return err
			}
		}
		fip, err := floatingips.New(floatingips.Options{Family: fam, Table: nat, DNATChain: FloatingDNATChain, SNATChain: FloatingSNATChain,
			Logger: log.With("component", "floatingips", "family", fam.String())})
		if err != nil {
			return err
		}
		svc, err := serviceloop.New(serviceloop.Options{Family: fam, Table: filter, Chain: ServiceLoopChain, RejectMarks: rejectMarks,
			Logger: log.With("component", "serviceloop", "family", fam.String())})
		if err != nil {
			return err
		}
		if err := add(fip); err != nil {
			return err
		}
		return add(svc)
	}
	// The node's forwarding and reverse-path filter (the namespace's
	// sysctls of sysctls.Defaults; machine-wide ones are not the agent's),
	// and the pod interfaces' sysctls, which the endpoints managers hand
	// to the same driver.
	var sc *sysctls.Driver
	if !cleanup {
		var settings []sysctls.Setting
		for _, s := range sysctls.Defaults(families...) {
			if strings.HasPrefix(s.Key, "net.") {
				settings = append(settings, s)
			}
		}
		if sc, err = sysctls.New(sysctls.Options{Kernel: ns, Settings: settings, Logger: log.With("component", "sysctls")}); err != nil {
			return nil, err
		}
		if err := add(nil, sc); err != nil {
			return nil, err
		}
	}
	for _, fam := range families {
		topts := routetable.Options{Kernel: ns, Family: fam, Table: kernel.TableMain,
			InterfacePatterns: []string{"^" + regexp.QuoteMeta(cfg.PodInterfacePrefix)},
			Logger:            log.With("component", "routetable", "family", fam.String())}
		if cleanup {
			// Only what carries our protocol: a pod route the CNI plugin
			// wrote is not ours to delete.
			topts.InterfacePatterns, topts.GracePeriod = nil, -1
		}
		tbl, err := routetable.New(topts)
		if err != nil {
			return nil, err
		}
		p.tables[fam] = tbl
		prefix := SetPrefixV4
		if fam == ipfamily.IPv6 {
			prefix = SetPrefixV6
		}
		sopts := ipsets.Options{Family: fam, Prefix: prefix, Kernel: ns, Logger: log.With("component", "ipsets", "family", fam.String())}
		if cleanup {
			sopts.MaxDestroysPerApply = 1 << 20 // every set of ours in the one pass
		}
		sets, err := ipsets.New(sopts)
		if err != nil {
			return nil, err
		}
		// The overlay: VXLAN (removing only its device on a cleanup or
		// beside IPIP), IPIP (IPv4), or none for direct routing.
		oo := overlay.Options{Family: fam, NodeName: cfg.NodeName, Kernel: ns, Routes: tbl, Sets: sets,
			Encap:       overlay.VXLAN{VNI: cfg.VXLANVNI, Port: cfg.VXLANPort},
			CrossSubnet: cfg.Overlay == OverlayVXLANCrossSubnet || cfg.Overlay == OverlayIPIPCrossSubnet,
			Disabled:    cleanup || cfg.ipip(), NoBlackholes: cfg.NoBlackholes}
		switch {
		case cfg.ipip() && fam == ipfamily.IPv4 && !cleanup:
			oo.Encap, oo.Disabled = overlay.IPIP{}, false
		case cfg.Overlay == OverlayDirect && !cleanup:
			oo.Encap = overlay.None{}
		}
		oo.Logger = log.With("component", oo.Encap.String(), "family", fam.String())
		ov, err := overlay.New(oo)
		if err != nil {
			return nil, err
		}
		p.overlays = append(p.overlays, ov)
		if dev := ov.Device(); dev != "" {
			p.devices[dev] = oo.Encap.String()
		}
		ovDrivers := []dataplane.Driver{sets}
		if d := ov.Driver(); d != nil { // none without encapsulation
			ovDrivers = append([]dataplane.Driver{d}, ovDrivers...)
		}
		if err := add(ov, ovDrivers...); err != nil {
			return nil, err
		}
		// The local pods: their routes (through the table), static
		// neighbours and interface sysctls. The endpoints manager's route
		// driver applies the table; a cleanup applies the table alone.
		if cleanup {
			if err := add(nil, tbl); err != nil {
				return nil, err
			}
		} else {
			ep, err := endpoints.New(endpoints.Options{Family: fam, Kernel: ns, Routes: tbl, RouteClass: ClassLocalPod,
				StaticNeighbors: true, SysctlDriver: sc, Logger: log.With("component", "endpoints", "family", fam.String())})
			if err != nil {
				return nil, err
			}
			if err := add(ep, ep.RouteDriver()); err != nil {
				return nil, err
			}
			p.endpoints = append(p.endpoints, ep)
			// The host's own addresses, in a set rules can match.
			hm, err := hostips.New(hostips.Options{Family: fam, Sets: sets, Exclude: []string{"^" + regexp.QuoteMeta(cfg.PodInterfacePrefix)},
				Logger: log.With("component", "hostips", "family", fam.String())})
			if err != nil {
				return nil, err
			}
			if err := add(hostAddrs{hm}); err != nil {
				return nil, err
			}
		}
		// The netfilter managers of the family, on a nat and a filter table
		// of our own per backend: pod egress masquerade, floating IPs and
		// the service loop guard. A cleanup declares none: the tables
		// remove our rules.
		for _, b := range backends {
			var nat, filter *iptables.Table
			for _, t := range []struct {
				name string
				tbl  **iptables.Table
			}{{"nat", &nat}, {"filter", &filter}} {
				if *t.tbl, err = iptables.New(iptables.Options{Table: t.name, Family: fam, Backend: b, ChainPrefix: ChainPrefix, Kernel: ns,
					Logger: log.With("component", "iptables", "table", t.name, "family", fam.String(), "backend", b.String())}); err != nil {
					return nil, err
				}
			}
			if err := add(nil, nat, filter); err != nil {
				return nil, err
			}
			if err := addNetfilter(fam, sets, nat, filter, sets); err != nil {
				return nil, err
			}
		}
		// On nftables: tables of our own (none declared: the table goes),
		// the masquerade sets inside the nat one.
		if nft {
			var tables [2]*nftables.Table
			for i, t := range []struct {
				name string
				role nftables.Role
			}{{NFTablesTable, nftables.NAT}, {NFTablesFilterTable, nftables.Filter}} {
				if tables[i], err = nftables.New(nftables.Options{Name: t.name, Family: fam, Role: t.role, ChainPrefix: ChainPrefix,
					Kernel: ns, Logger: log.With("component", "nftables", "table", t.name, "family", fam.String())}); err != nil {
					return nil, err
				}
				p.nftTables = append(p.nftTables, tables[i])
			}
			nat, filter := tables[0], tables[1]
			var sets netfilter.Sets
			drivers := []dataplane.Driver{nat, filter}
			if !cleanup && !cfg.NoMasquerade {
				s, err := nftables.NewIPSets(nat, nftables.IPSetsOptions{})
				if err != nil {
					return nil, err
				}
				sets, drivers = s, append(drivers, s)
			}
			// The policy sets live in the filter table, where its rules are.
			var policySets netfilter.Sets
			if !cleanup && cfg.NetworkPolicy {
				s, err := nftables.NewIPSets(filter, nftables.IPSetsOptions{})
				if err != nil {
					return nil, err
				}
				policySets, drivers = s, append(drivers, s)
			}
			if err := add(nil, drivers...); err != nil {
				return nil, err
			}
			if err := addNetfilter(fam, sets, nat, filter, policySets); err != nil {
				return nil, err
			}
		}
		// WireGuard: always registered, disabled when off, so that turning
		// it off removes what a run with it on left.
		port := wireguard.DefaultListenPort
		if fam == ipfamily.IPv6 {
			port = wireguard.DefaultListenPortV6
		}
		wopts := wireguard.Options{Family: fam, Kernel: ns, Mode: cfg.WireGuardMode,
			InterfaceName: cfg.wgInterface(fam), ListenPort: port, FirewallMark: layout.WireGuard,
			HostMTU: hostMTU, Table: p.wgTable, KeyFile: filepath.Join(cfg.StateDir, KeyFileName),
			NodeName: cfg.NodeName, Disabled: cleanup || !cfg.WireGuard, FailOpen: cfg.WireGuardFailOpen,
			Logger: log.With("component", "wireguard", "family", fam.String())}
		if onKey != nil {
			wopts.OnPublicKey = func(k wireguard.PublicKey) { onKey(fam, k) }
		}
		if fam == ipfamily.IPv6 {
			wopts.KeyFile = filepath.Join(cfg.StateDir, "wireguard-v6.key")
		}
		// A WireGuard device is the kernel's (its WireGuard capability) or
		// a userspace one, which runs inside the namespace (Do).
		usable := inside || hasKernelWireGuard(ctx, ns, cfg.wgInterface(fam))
		if !usable && cfg.WireGuard && !cleanup {
			return nil, needDo(ns, "WireGuard (the kernel has none)")
		}
		if !usable {
			// Neither can have made a device: there is none of ours to
			// remove.
			continue
		}
		wg, err := wireguard.New(wopts)
		if err != nil {
			return nil, err
		}
		p.wg = append(p.wg, wg)
		p.devices[cfg.wgInterface(fam)] = "wireguard"
		if err := add(wg, wg.Drivers()...); err != nil {
			return nil, err
		}
	}
	if p.proxy != nil {
		if err := add(p.proxy, p.proxy); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Agent is a running reference agent; see Run.
type Agent struct {
	cfg     Config
	ns      kernel.Kernel
	plane   *plane
	metrics *Metrics
	started time.Time
	// healthChecks answers load balancers' health checks; nil without the
	// BPF proxy (the node then proxies no service).
	healthChecks *HealthChecks
	// publisher keeps this node's VTEP MACs and WireGuard key on the
	// datastore.
	publisher *publisher

	mu       sync.Mutex
	health   dataplane.Health
	cluster  datastore.Cluster
	synced   bool
	inSyncAt time.Time
	mtu      mtu.Result
	lastErrs []string
}

// Run assembles the agent and runs it until ctx ends. It returns once every
// goroutine it started has stopped; the dataplane stays as it was (a
// userspace WireGuard device lives in the process and goes with it).
func Run(ctx context.Context, cfg Config) error { return run(ctx, cfg, nil) }

// run is Run; built, if set, is called with the agent once its dataplane
// is assembled, before anything runs (a test follows its loop's health).
func run(ctx context.Context, cfg Config, built func(*Agent)) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	if cfg.Datastore == nil {
		return errors.New("agent: a datastore is required")
	}
	log := cfg.Logger
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("agent: state directory: %w", err)
	}
	ns, closeNS, err := openKernel(&cfg)
	if err != nil {
		return err
	}
	defer closeNS()
	a := &Agent{cfg: cfg, ns: ns, started: time.Now()}

	// The host MTU, once now (WireGuard's device needs it at construction)
	// and then by the monitor.
	exclude := append(mtu.DefaultExclude(), "^"+regexp.QuoteMeta(cfg.PodInterfacePrefix), "^"+regexp.QuoteMeta(cfg.WireGuardInterface))
	det, err := mtu.NewDetector(mtu.DetectorOptions{Kernel: ns, Exclude: exclude})
	if err != nil {
		return err
	}
	host, err := det.Detect(ctx)
	if err != nil {
		return err
	}
	log.Info("host MTU", "mtu", host.MTU, "interface", host.Interface, "fellBack", host.FellBack)
	if cfg.BPFProxy {
		if err := needDo(ns, "the BPF proxy"); err != nil {
			return err // before a bpffs is mounted for it
		}
		if len(cfg.HostInterfaces) == 0 && host.Interface != "" {
			cfg.HostInterfaces = []string{host.Interface}
		}
		if err := ensureBPFFS(cfg.BPFPinDir, log); err != nil {
			return err
		}
	}

	if a.metrics, err = NewMetrics(cfg.Registry); err != nil {
		return err
	}
	// The datastore's link to its server (the Kubernetes datastore's) is
	// a gauge too.
	a.metrics.datastore.set(connectionReporter(cfg.Datastore))
	if err := cfg.Registry.Register(collectors.NewGoCollector()); err != nil {
		return err
	}
	if err := cfg.Registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}
	// What this node tells the others: the WireGuard key each family's
	// manager reports (from the loop's goroutine: never waits) and, with a
	// VXLAN overlay, the VTEP MACs.
	a.publisher = newPublisher(cfg.Datastore, cfg.NodeName, !cfg.ipip() && cfg.Overlay != OverlayDirect,
		log.With("component", "publisher"), a.noteError)
	onKey := a.publisher.key
	lopts := dataplane.Options{Logger: log.With("component", "loop"), ResyncInterval: cfg.ResyncInterval,
		Metrics: a.metrics, OnHealth: a.onHealth,
		OnInSync: func() {
			now := time.Now()
			a.mu.Lock()
			a.inSyncAt = now
			a.mu.Unlock()
			log.Info("dataplane in sync: first apply done", "since_start", now.Sub(a.started).Round(time.Millisecond))
		}}
	a.plane, err = build(ctx, ns, &cfg, lopts, host.MTU, false, onKey)
	if err != nil {
		return err
	}
	defer a.plane.close()
	if a.plane.proxy != nil {
		if err := a.metrics.serviceCounters(a.plane.proxy.Counters); err != nil {
			return fmt.Errorf("agent: metrics: %w", err)
		}
	}
	loop := a.plane.loop
	if built != nil {
		built(a)
	}
	// Switching backend leaves nothing of the other ones.
	if err := removeOtherBackends(ctx, ns, a.plane.netfilter, log); err != nil {
		log.Warn("what another netfilter backend holds of ours was not all removed", "err", err)
		a.noteError(err)
	}
	// With the BPF proxy off, what a run with it on left goes.
	if !cfg.BPFProxy {
		if err := cleanupProxy(ctx, &cfg, ns); err != nil {
			log.Warn("the BPF proxy's pins were not all removed", "dir", cfg.BPFPinDir, "err", err)
			a.noteError(err)
		}
	}

	mtuMon, err := mtu.NewMonitor(mtu.MonitorOptions{Detector: det, Logger: log.With("component", "mtu"),
		PodMTU: cfg.podMTU(),
		OnChange: func(_, cur mtu.Result) {
			a.mu.Lock()
			a.mtu = cur
			a.mu.Unlock()
			if err := mtu.WriteFile(filepath.Join(cfg.StateDir, MTUFileName), cur.PodMTU); err != nil {
				log.Warn("pod MTU file not written", "err", err)
			}
			_ = loop.Send(ctx, cur) // the overlay devices follow the host MTU
		}})
	if err != nil {
		return err
	}
	mon, err := ifacemonitor.New(ifacemonitor.Options{Kernel: ns, Logger: log.With("component", "ifacemonitor"),
		// The loop hands link and address updates to every manager and
		// driver that observes interfaces (the route tables, the overlay
		// managers, the BPF proxy).
		OnLinkState: func(u ifacemonitor.LinkUpdate) {
			loop.OnLink(u.Link(), u.State)
			if det.Matches(u.Name) {
				mtuMon.Trigger()
			}
		},
		OnAddrs: loop.OnAddrs,
		// Routes too: a route of ours someone deletes is written again at
		// once, not at the next resync.
		WatchRoutes: true,
		OnRoute: func(u ifacemonitor.RouteUpdate) {
			for _, t := range a.plane.tables {
				t.OnRouteUpdate(u.Route, u.Gone)
			}
		},
		OnInSync: loop.InterfacesInSync,
	})
	if err != nil {
		return err
	}

	if cfg.BPFProxy {
		// The health check ports of the services the proxy serves, on the
		// node's addresses inside its namespace.
		a.healthChecks = NewHealthChecks(HealthCheckOptions{Listen: listenInside(ns),
			Logger: log.With("component", "healthchecks")})
	}

	var srv *http.Server
	var lis net.Listener
	if cfg.Listen != "-" {
		if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("agent: listen: %w", err)
		}
		srv = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				log.Error("component failed; stopping", "component", name, "err", err)
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	goRun("loop", loop.Run)
	goRun("ifacemonitor", mon.Run)
	if a.plane.proxy != nil {
		goRun("bpf-proxy-conntrack", a.plane.proxy.Run)
	}
	goRun("mtu", mtuMon.Run)
	for _, w := range a.plane.wg {
		goRun(w.Name(), w.Run)
	}
	goRun("publisher", func(ctx context.Context) error { a.publisher.run(ctx); return nil })
	if a.healthChecks != nil {
		goRun("healthchecks", a.healthChecks.Run)
	}
	goRun("datastore", func(ctx context.Context) error {
		tr := newTranslator(cfg.NodeName)
		tr.zone = cfg.NodeZone
		if cfg.NetworkPolicy {
			tr.netpol = newNetpolTranslator(cfg.NodeName)
		}
		return cfg.Datastore.Watch(ctx, func(c datastore.Cluster) { a.onCluster(ctx, tr, c) })
	})
	if srv != nil {
		goRun("http", func(ctx context.Context) error {
			go func() { <-ctx.Done(); _ = srv.Close() }()
			if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	log.Info("agent started", "node", cfg.NodeName, "overlay", cfg.Overlay, "wireguard", cfg.WireGuard,
		"masquerade", !cfg.NoMasquerade, "netfilter", a.plane.netfilter, "bpfProxy", cfg.BPFProxy,
		"ipv6", cfg.IPv6, "ipv4", !cfg.NoIPv4, "listen", cfg.Listen, "netns", cfg.NetNS)
	<-ctx.Done()
	cause := context.Cause(ctx)
	cancel(nil)
	wg.Wait()
	if cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	log.Info("agent stopped; the dataplane stays as it is")
	return nil
}

// errNoDo reports a feature that needs work to run inside the namespace
// on a Kernel that cannot (kernelfake's).
var errNoDo = errors.New("the kernel cannot run work inside its namespace (Do is not supported)")

// canDo reports whether ns runs work inside its namespace: a real
// namespace does, kernelfake's fails every Do with kernel.ErrNotSupported.
func canDo(ns kernel.Kernel) bool {
	return !errors.Is(ns.Do(func() error { return nil }), kernel.ErrNotSupported)
}

// hasKernelWireGuard reports whether ns's kernel has WireGuard: its
// kernel.WireGuard capability answers anything but kernel.ErrNotSupported
// (a missing device is fine). It writes nothing.
func hasKernelWireGuard(ctx context.Context, ns kernel.Kernel, name string) bool {
	_, err := ns.WireGuardDevice(ctx, name)
	return !errors.Is(err, kernel.ErrNotSupported)
}

// needDo returns nil when ns runs work inside its namespace, else an error
// wrapping errNoDo that names what needs it.
func needDo(ns kernel.Kernel, what string) error {
	if canDo(ns) {
		return nil
	}
	return fmt.Errorf("agent: %s: %w", what, errNoDo)
}

// openKernel returns cfg.Kernel, or opens cfg.NetNS; close releases what it
// opened.
func openKernel(cfg *Config) (k kernel.Kernel, close func(), err error) {
	if cfg.Kernel != nil {
		return cfg.Kernel, func() {}, nil
	}
	var ns *kernel.Namespace
	if cfg.NetNS == "" {
		ns, err = kernel.OpenCurrent()
	} else {
		ns, err = kernel.Open(cfg.NetNS)
	}
	if err != nil {
		return nil, nil, err
	}
	return ns, func() { _ = ns.Close() }, nil
}

// onCluster turns a new cluster into messages for the loop. It is called from
// the datastore's goroutine.
func (a *Agent) onCluster(ctx context.Context, tr *translator, c datastore.Cluster) {
	log := a.cfg.Logger
	if _, ok := c.Node(a.cfg.NodeName); !ok {
		log.Warn("this node is not in the datastore: no tunnel device, no blackholes", "node", a.cfg.NodeName)
	}
	msgs := tr.messages(c)
	for _, err := range tr.netpolErrs {
		log.Warn("network policy input left out", "err", err)
	}
	for _, err := range tr.nodeErrs {
		log.Warn("node address left out", "err", err)
	}
	for _, m := range msgs {
		if err := a.plane.loop.Send(ctx, m); err != nil {
			return
		}
	}
	if a.healthChecks != nil {
		a.healthChecks.Update(nodeAddrs(c, a.cfg.NodeName), healthCheckServices(c, a.cfg.NodeName))
	}
	local := 0
	for _, p := range c.Pods {
		if p.Node == a.cfg.NodeName {
			local++
		}
	}
	a.metrics.cluster(len(c.Nodes), local, len(c.Services))
	a.mu.Lock()
	first := !a.synced
	a.cluster, a.synced = c, true
	a.mu.Unlock()
	log.Info("cluster update", "messages", len(msgs), "nodes", len(c.Nodes), "localPods", local, "services", len(c.Services))
	if first {
		a.plane.loop.DatastoreInSync()
	}
	// The publisher, on its own goroutine, puts back what this node's
	// entry lacks (a Node created again has no annotations).
	a.publisher.observe(c)
}

func (a *Agent) noteError(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastErrs = append(a.lastErrs, time.Now().UTC().Format(time.RFC3339)+" "+err.Error())
	if len(a.lastErrs) > 10 {
		a.lastErrs = a.lastErrs[len(a.lastErrs)-10:]
	}
}

// onHealth is the loop's health callback: quick, from the loop's goroutine.
func (a *Agent) onHealth(h dataplane.Health) {
	a.metrics.health(h)
	if a.plane != nil && a.plane.proxy != nil {
		a.metrics.proxy(a.plane.proxy.Status())
	}
	a.mu.Lock()
	a.health = h
	a.mu.Unlock()
}

// handler serves the local endpoint.
//
// /readyz follows the dataplane alone: an agent whose datastore has lost
// its server (the API server down) stays ready, for its dataplane keeps
// forwarding with the last cluster it learned, and restarting or
// withdrawing it would not bring the server back. The body says it, as do
// /status and the gauge nodeplane_agent_datastore_connected.
func (a *Agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		live := a.health.Live
		a.mu.Unlock()
		if !live {
			http.Error(w, "dataplane loop not running", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		a.mu.Lock()
		h := a.health
		a.mu.Unlock()
		if !h.Ready {
			http.Error(w, fmt.Sprintf("not ready: datastore in sync %v, interfaces in sync %v, applies %d, last error: %v",
				h.DatastoreInSync, h.InterfacesInSync, h.Applies, h.LastError), http.StatusServiceUnavailable)
			return
		}
		if d := a.datastoreStatus(); d != nil && !d.Connected {
			_, _ = fmt.Fprintf(w, "ok; the datastore is disconnected (since %s): the dataplane keeps the last cluster it learned\n",
				d.Since.UTC().Format(time.RFC3339))
			return
		} else if d != nil && len(d.Stale) > 0 {
			_, _ = fmt.Fprintf(w, "ok; the datastore has not read %s again since an outage: their last state stands\n",
				strings.Join(d.Stale, ", "))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.cfg.Registry, promhttp.HandlerOpts{Registry: a.cfg.Registry}))
	mux.HandleFunc("GET /status", a.serveStatus)
	return mux
}
