// Command nodeagent is nodeplane's reference node agent: it programs one
// node's dataplane (routes to its pods, a VXLAN overlay to the other nodes,
// pod egress masquerade on iptables or native nftables, optional WireGuard
// encryption) from a cluster file or the Kubernetes API.
//
//	nodeagent run --node NAME --datastore file:cluster.yaml   # or --datastore kubernetes
//	nodeagent status                                          # the node's dataplane as a table
//	nodeagent plan --node NAME --datastore file:cluster.yaml  # what run would write now, writing nothing
//	nodeagent cleanup                                         # remove everything the agent made
//	nodeagent explain --from ns/a --to ns/b --port 80         # which NetworkPolicy rule decides a flow
//
// See README.md beside this file.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
	"github.com/nodeplane/nodeplane/iptables"
	"github.com/nodeplane/nodeplane/wireguard"
)

const usage = `nodeagent — nodeplane's reference node agent

Usage:
  nodeagent run     [flags]   program this node's dataplane until SIGINT/SIGTERM
  nodeagent status  [flags]   print the running agent's dataplane state as a table
  nodeagent plan    [flags]   print what "run" would write to the kernel now, writing nothing
  nodeagent cleanup [flags]   remove everything the agent put in the kernel
  nodeagent explain [flags]   say whether the cluster file's NetworkPolicies allow a flow, and why

Run "nodeagent COMMAND -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go exitAfterSignal(ctx, stop)
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(ctx, os.Args[2:])
	case "status":
		err = statusCmd(ctx, os.Args[2:], os.Stdout)
	case "plan":
		err = planCmd(ctx, os.Args[2:], os.Stdout)
	case "cleanup":
		err = cleanupCmd(ctx, os.Args[2:])
	case "explain":
		err = explainCmd(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "nodeagent: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "nodeagent:", err)
		}
		os.Exit(1)
	}
}

// shutdownGrace is how long the process may take to stop after SIGTERM or
// SIGINT: every command returns well within it (the agent stops its
// goroutines and leaves the dataplane in place); it is the bound, under
// Kubernetes' grace period, on one that does not.
const shutdownGrace = 1500 * time.Millisecond

// exitAfterSignal waits for the first signal (ctx ends), then gives the
// signals back to their default action, so that a second one ends the
// process at once, and ends the process itself when the command has not
// returned within shutdownGrace. The dataplane stays as it is either way.
func exitAfterSignal(ctx context.Context, stop context.CancelFunc) {
	<-ctx.Done()
	stop()
	time.Sleep(shutdownGrace)
	fmt.Fprintf(os.Stderr, "nodeagent: not stopped %v after the signal; exiting now (the dataplane stays as it is)\n", shutdownGrace)
	os.Exit(1)
}

// common are the flags run and cleanup share: what the agent owns.
type common struct {
	node, netns, stateDir, overlay, wgIface, podPrefix, logLevel, logFormat, bpfPinDir string
	ipv4, ipv6                                                                         bool
}

func (c *common) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.node, "node", host, "this node's name in the datastore")
	fs.StringVar(&c.netns, "netns", "", "network namespace to program (a path such as /run/netns/node1); empty: the agent's own")
	fs.StringVar(&c.stateDir, "state-dir", "/var/lib/nodeplane-agent", "directory of the pod MTU file and the WireGuard key")
	fs.StringVar(&c.overlay, "overlay", string(agent.OverlayVXLAN), "vxlan, vxlan-cross-subnet, ipip, ipip-cross-subnet or direct")
	fs.StringVar(&c.wgIface, "wireguard-interface", agent.DefaultWireGuardInterface, "WireGuard device name (unique per machine for userspace devices)")
	fs.StringVar(&c.podPrefix, "pod-interface-prefix", datastore.PodInterfacePrefix, "prefix of the pods' host-side interfaces")
	fs.BoolVar(&c.ipv6, "ipv6", false, "program IPv6 too (dual stack)")
	fs.BoolVar(&c.ipv4, "ipv4", true, "program IPv4; --ipv4=false with --ipv6 makes the node IPv6 only")
	fs.StringVar(&c.bpfPinDir, "bpf-pin-dir", agent.DefaultBPFPinDir, "bpffs directory of the BPF service proxy's maps and attachments")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
}

func (c *common) config() (agent.Config, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return agent.Config{}, err
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch c.logFormat {
	case "text":
		h = slog.NewTextHandler(os.Stderr, hopts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, hopts)
	default:
		return agent.Config{}, fmt.Errorf("unknown log format %q", c.logFormat)
	}
	return agent.Config{NodeName: c.node, NetNS: c.netns, StateDir: c.stateDir, Overlay: agent.Overlay(c.overlay),
		WireGuardInterface: c.wgIface, PodInterfacePrefix: c.podPrefix, IPv6: c.ipv6, NoIPv4: !c.ipv4, BPFPinDir: c.bpfPinDir,
		Logger: slog.New(h).With("node", c.node)}, nil
}

// cniFlags are the flags of the CNI plugin's installation (run) and removal
// (cleanup).
type cniFlags struct {
	install                 bool
	binDir, confDir, plugin string
}

func (f *cniFlags) register(fs *flag.FlagSet, run bool) {
	if run {
		fs.BoolVar(&f.install, "cni-install", false, "install the CNI plugin in --cni-bin-dir and write its configuration list (this node's pod CIDRs) in --cni-conf-dir")
		fs.StringVar(&f.plugin, "cni-plugin", "", "the CNI plugin binary to install; empty: "+agent.CNIPluginBinary+" next to this executable")
	} else {
		fs.BoolVar(&f.install, "cni-install", false, "also remove the CNI plugin and configuration list that run --cni-install installed")
	}
	fs.StringVar(&f.binDir, "cni-bin-dir", agent.DefaultCNIBinDir, "the runtime's CNI plugin directory")
	fs.StringVar(&f.confDir, "cni-conf-dir", agent.DefaultCNIConfDir, "the runtime's CNI configuration directory")
}

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var c common
	c.register(fs)
	ds := fs.String("datastore", "file:/etc/nodeplane/cluster.yaml", `"file:PATH" (a YAML cluster file, watched) or "kubernetes"`)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig for --datastore kubernetes; empty: in-cluster, then $KUBECONFIG")
	pools := fs.String("pools", "", "comma-separated pod IP pools (CIDRs) for --datastore kubernetes; empty: each node's pod CIDRs")
	listen := fs.String("listen", agent.DefaultListen, `local HTTP endpoint: /healthz /readyz /metrics /status ("-": none)`)
	masq := fs.Bool("masquerade", true, "masquerade pod traffic leaving the pools (pools with masquerade: true)")
	netfilter := fs.String("netfilter", string(agent.NetfilterAuto), "netfilter backend of the masquerade rules: auto (the iptables backend the node uses), iptables-legacy, iptables-nft or nftables")
	backend := fs.String("iptables-backend", "auto", "older form of --netfilter: auto, legacy (iptables-legacy) or nft (iptables-nft)")
	wg := fs.Bool("wireguard", false, "encrypt pod traffic between nodes with WireGuard")
	var wgMode wireguard.Mode
	fs.TextVar(&wgMode, "wireguard-mode", wireguard.ModeAuto, "auto (kernel module, else userspace), kernel or userspace")
	wgFailOpen := fs.Bool("wireguard-fail-open", false, "while the WireGuard device is gone (agent down), let traffic to the peers take the main table in plaintext instead of dropping it")
	noBlackholes := fs.Bool("no-blackholes", false, "give this node's pod blocks no blackhole route (a bridge CNI routes them)")
	vni := fs.Uint("vxlan-vni", 0, "VXLAN network identifier (0: 4096)")
	port := fs.Uint("vxlan-port", 0, "VXLAN UDP port (0: 4789)")
	resync := fs.Duration("resync-interval", 0, "how often every driver re-reads the kernel and repairs drift (0: 90s)")
	netpol := fs.Bool("network-policy", true, "enforce the cluster's NetworkPolicies (pods a policy selects are isolated; unknown pod interfaces are dropped)")
	bpfProxy := fs.Bool("bpf-proxy", false, "load-balance services with the BPF service proxy (cluster IPs from pods, NodePorts from other hosts)")
	hostIfaces := fs.String("host-interfaces", "", "comma-separated interfaces NodePort traffic arrives on; empty: the host MTU interface")
	nodeZone := fs.String("node-zone", "", "this node's zone for topology aware routing (--bpf-proxy); empty: the node's zone in the datastore (Kubernetes: its label topology.kubernetes.io/zone)")
	bpfMaglev := fs.Uint("bpf-maglev", 0, "pick the backends of connections from outside the node by Maglev consistent hashing, with tables of this size (a prime such as 1021 or 16381; the same on every node), so a client reaches the same backend through any node (--bpf-proxy); 0: at random")
	bpfLocalRedirect := fs.Bool("bpf-local-redirect", false, "send a pod's connection to a service backend on this node, and its replies, between the two pods' veths straight, past the node's routing and netfilter (--bpf-proxy; netfilter, where network policy is enforced, does not see those packets: needs --network-policy=false)")
	bpfDSR := fs.Bool("bpf-dsr", false, "direct server return for connections from outside the node to backends on other nodes: the backend's node answers the client itself, which sees no masquerading (--bpf-proxy; every node needs it, and the network must let a node answer with another node's address)")
	bpfTCPOnly := fs.Bool("bpf-cgroup-tcp-only", false, "translate only TCP at connect() (--bpf-cgroup); the node's UDP to services is translated per packet as it leaves, so a connected UDP socket follows its service's backends")
	bpfCgroupPods := fs.Bool("bpf-cgroup-pods", false, "translate at connect() the connections of the pods in --bpf-cgroup too, not only the node's own (then give the pods' cgroup, or the root one); session affinity, source ranges and services without endpoints stay per packet")
	bpfCgroup := fs.String("bpf-cgroup", "", "cgroup v2 directory whose processes' connections to services from the node's own namespace are translated at connect() (--bpf-proxy); empty: none")
	var cni cniFlags
	cni.register(fs, true)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if *bpfMaglev > math.MaxUint32 {
		return fmt.Errorf("--bpf-maglev %d: not a table size (see --help)", *bpfMaglev)
	}
	cfg.BPFProxy, cfg.BPFCgroup, cfg.NodeZone, cfg.BPFMaglev = *bpfProxy, *bpfCgroup, *nodeZone, uint32(*bpfMaglev)
	cfg.NetworkPolicy = *netpol
	cfg.BPFDSR, cfg.BPFCgroupTCPOnly, cfg.BPFLocalRedirect, cfg.BPFCgroupPods = *bpfDSR, *bpfTCPOnly, *bpfLocalRedirect, *bpfCgroupPods
	cfg.HostInterfaces = strings.FieldsFunc(*hostIfaces, func(r rune) bool { return r == ',' })
	cfg.Listen, cfg.WireGuard, cfg.ResyncInterval = *listen, *wg, *resync
	cfg.VXLANVNI, cfg.VXLANPort = uint32(*vni), uint16(*port)
	cfg.NoMasquerade = !*masq
	cfg.Netfilter = agent.Netfilter(*netfilter)
	if *backend != "auto" {
		if cfg.IPTablesBackend, err = iptables.ParseBackend(*backend); err != nil {
			return err
		}
	}
	cfg.WireGuardMode, cfg.WireGuardFailOpen, cfg.NoBlackholes = wgMode, *wgFailOpen, *noBlackholes
	switch {
	case strings.HasPrefix(*ds, "file:"):
		cfg.Datastore = &datastore.File{Path: strings.TrimPrefix(*ds, "file:"), Logger: cfg.Logger.With("component", "datastore")}
	case *ds == "kubernetes":
		rc, err := restConfig(*kubeconfig)
		if err != nil {
			return err
		}
		client, err := k8s.NewForConfig(rc)
		if err != nil {
			return err
		}
		// The admin network policies, read when the server serves them.
		policies, err := policyclient.NewForConfig(rc)
		if err != nil {
			return err
		}
		var ps []datastore.Pool
		for i, s := range strings.FieldsFunc(*pools, func(r rune) bool { return r == ',' }) {
			p, err := netip.ParsePrefix(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("--pools: %w", err)
			}
			ps = append(ps, datastore.Pool{Name: fmt.Sprintf("pool-%d", i), CIDR: p, Masquerade: true})
		}
		// client-go's own logs (klog) go with the agent's.
		kubernetes.RouteKlog(cfg.Logger.With("component", "client-go"))
		cfg.Datastore, err = kubernetes.New(kubernetes.Options{Client: client, Policies: policies, NodeName: cfg.NodeName, Pools: ps,
			Logger: cfg.Logger.With("component", "datastore")})
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf(`--datastore must be "file:PATH" or "kubernetes", not %q`, *ds)
	}
	if cni.install {
		cfg.Datastore = agent.WithCNIInstall(cfg.Datastore, agent.CNIInstallOptions{BinDir: cni.binDir, ConfDir: cni.confDir,
			NodeName: cfg.NodeName, IPv6: cfg.IPv6, Plugin: cni.plugin, MTUFile: filepath.Join(cfg.StateDir, agent.MTUFileName),
			Logger: cfg.Logger.With("component", "cni")})
	}
	return agent.Run(ctx, cfg)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		if rc, err := rest.InClusterConfig(); err == nil {
			return rc, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

func statusCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("addr", agent.DefaultListen, "the agent's local endpoint")
	asJSON := fs.Bool("json", false, "print the status document as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+*addr+"/status", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("is the agent running? %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, body)
	}
	if *asJSON {
		_, err = out.Write(body)
		return err
	}
	var s agent.Status
	if err := json.Unmarshal(body, &s); err != nil {
		return err
	}
	return agent.WriteTable(out, s, time.Now())
}

func cleanupCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	var c common
	c.register(fs)
	var cni cniFlags
	cni.register(fs, false)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	if cni.install {
		if err := agent.RemoveCNI(cni.binDir, cni.confDir); err != nil {
			return err
		}
	}
	if err := agent.Cleanup(ctx, cfg); err != nil {
		return err
	}
	fmt.Println("nodeagent: removed the agent's devices, routes, rules, iptables chains, nftables tables, ip sets and BPF proxy pins")
	return nil
}
