// Size: the demo is one script: setup, each check in the order it runs, teardown.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/agent"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/masquerade"
	"github.com/nodeplane/nodeplane/wireguard"
)

// NamePrefix starts the name of every network namespace the demo makes;
// the process ID follows, so a later run can tell a dead run's leftovers.
const NamePrefix = "npdemo-"

// Scenario is one run of the demo: three nodes on a bridge underlay, two
// pods each, one agent per node on a cluster file, and the checks.
type Scenario struct {
	// Agent is the nodeagent binary.
	Agent string
	// Out receives the progress lines and the final tables.
	Out io.Writer
	// WorkDir holds the cluster file, the agents' state and logs; it is
	// made (and removed) by Run when empty.
	WorkDir string
	// Resync is the agents' refresh interval; zero means 10 s.
	Resync time.Duration
	// Nodes is the number of nodes; zero means 3.
	Nodes int
	// IdleWindow is how long idle CPU is measured; zero means 5 s.
	IdleWindow time.Duration
	// Services is the number of services in the cluster file (each with
	// every pod as a backend); zero means 1. Every agent's BPF proxy
	// programs them all.
	Services int

	prefix string
	bpfDir string // the bpffs of the agents' BPF pins
	// cgroupDir is the cgroup v2 hierarchy, mounted for the nodes' cgroups.
	cgroupDir string
	// listeners are the pods' name servers.
	listeners []net.Listener
	nodes     []*node
	ext       string // the external host's namespace
	extIP     netip.Addr
	spaces    []string // namespaces made, in order
	results   []result
	// statusTable is node1's `nodeagent status` before its cleanup.
	statusTable string
	figures     [][2]string
	step        int
	steps       int
	file        string
	cluster     datastore.Cluster
	mu          sync.Mutex
}

type node struct {
	num      int
	name, ns string
	underlay netip.Addr
	podCIDR  netip.Prefix
	pods     []*pod
	stateDir string
	wgIface  string
	wgKey    wireguard.PublicKey
	cmd      *exec.Cmd
	exited   chan struct{}
	started  time.Time
	// flags are the extra flags of the agent's last start: a restart
	// keeps them.
	flags []string
}

type pod struct {
	name, ns, hostIf string
	ip               netip.Addr
	node             *node
}

type result struct {
	check, outcome, detail string
}

// errCheck marks a failed check (the demo goes on to clean up and exits 1).
var errCheck = errors.New("check failed")

func (s *Scenario) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.Out, format, args...)
}

// check runs one numbered check, prints its progress line and records it.
func (s *Scenario) check(name string, fn func() (string, error)) error {
	s.step++
	s.printf("[%d/%d] %s …\n", s.step, s.steps, name)
	start := time.Now()
	detail, err := fn()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		s.results = append(s.results, result{name, "FAIL", err.Error()})
		s.printf("      FAIL after %v: %v\n", took, err)
		return fmt.Errorf("%w: %s: %v", errCheck, name, err)
	}
	s.results = append(s.results, result{name, "ok", detail})
	s.printf("      ok (%v) %s\n", took, detail)
	return nil
}

// Run sets the demo up, runs every check and tears everything down, also
// when a check fails or ctx is cancelled (Ctrl-C). It returns an error
// wrapping errCheck when a check failed.
func (s *Scenario) Run(ctx context.Context) (err error) {
	if s.Resync == 0 {
		s.Resync = 10 * time.Second
	}
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	if s.Services == 0 {
		s.Services = 1
	}
	s.prefix = fmt.Sprintf("%s%d-", NamePrefix, os.Getpid())
	sweepLeftovers(ctx, s.Out)
	ownWorkDir := s.WorkDir == ""
	if ownWorkDir {
		if s.WorkDir, err = os.MkdirTemp("", "nodeplane-demo-"); err != nil {
			return err
		}
	}
	defer func() {
		s.teardown(err != nil)
		if ownWorkDir {
			_ = os.RemoveAll(s.WorkDir)
		}
	}()
	checks := []struct {
		name string
		fn   func(context.Context) (string, error)
	}{
		{"build the underlay: 3 nodes on a bridge, 2 pods each, an external host", s.setup},
		{"start one agent per node on the cluster file; all ready", s.startAll},
		{"pod↔pod across nodes over VXLAN (every pair)", s.checkVXLAN},
		{"the same over WireGuard (agents restarted with --wireguard)", s.checkWireGuard},
		{"WireGuard off again: rule and device gone, VXLAN carries the pods", s.checkWireGuardOff},
		{"pod egress masqueraded to the node's address; pod to pod keeps the pod's", s.checkMasquerade},
		{"a ClusterIP service reached from a pod, spread over backends on all nodes (BPF proxy)", s.checkClusterIP},
		{"a NodePort reached from another node (BPF proxy)", s.checkNodePort},
		{"a ClusterIP reached from a node's own namespace (BPF proxy, at connect())", s.checkHostClusterIP},
		{"a service without endpoints refuses at once (TCP reset); a ClientIP-affine service keeps each client on its backend (BPF proxy)", s.checkRejectAndAffinity},
		{"the same on native nftables (agents restarted with --netfilter nftables); no npm- chain left in iptables", s.checkNFTables},
		{"network policy (agents restarted with --network-policy): a pod selected by a NetworkPolicy takes only the clients it allows, across nodes, on nftables and iptables", s.checkNetworkPolicy},
		{"agent restarted during a 10 ms ping loses at most one refresh; a connection through a service survives it", s.checkRestart},
		{"idle agents: memory and CPU", s.measureIdle},
		{"a node removed from the file loses its routes on the others", s.checkNodeRemoved},
		{"nodeagent cleanup removes everything of ours", s.checkCleanup},
	}
	s.steps = len(checks)
	s.printf("nodeplane demo: %d nodes, %d pods each, one reference agent per node (work dir %s)\n\n", s.Nodes, 2, s.WorkDir)
	var failed error
	for _, c := range checks {
		if err := s.check(c.name, func() (string, error) { return c.fn(ctx) }); err != nil {
			failed = err
			break
		}
		if ctx.Err() != nil {
			failed = context.Cause(ctx)
			break
		}
	}
	if s.statusTable != "" {
		s.printf("\nwhat the agent on %s saw before its cleanup (nodeagent status):\n\n%s", s.nodes[0].name, s.statusTable)
	}
	s.printTable(failed)
	return failed
}

// printTable prints the final table of checks and figures.
func (s *Scenario) printTable(failed error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.Out)
	w := tabwriter.NewWriter(s.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "#\tCHECK\tRESULT\tDETAIL")
	for i, r := range s.results {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", i+1, r.check, r.outcome, r.detail)
	}
	for i := len(s.results); i < s.steps; i++ {
		fmt.Fprintf(w, "%d\t-\tnot run\t\n", i+1)
	}
	_ = w.Flush()
	if len(s.figures) > 0 {
		fmt.Fprintln(s.Out)
		w = tabwriter.NewWriter(s.Out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(w, "FIGURE\tVALUE")
		for _, f := range s.figures {
			fmt.Fprintf(w, "%s\t%s\n", f[0], f[1])
		}
		_ = w.Flush()
	}
	fmt.Fprintln(s.Out)
	switch {
	case failed == nil:
		fmt.Fprintf(s.Out, "all %d checks passed\n", len(s.results))
	default:
		fmt.Fprintf(s.Out, "demo FAILED: %v\n", failed)
	}
}

func (s *Scenario) figure(name, value string) {
	s.figures = append(s.figures, [2]string{name, value})
}

// addNS makes a namespace with lo up and remembers it for the teardown.
func (s *Scenario) addNS(ctx context.Context, short string) (string, error) {
	name := s.prefix + short
	if err := ip(ctx, "netns", "add", name); err != nil {
		return "", err
	}
	s.spaces = append(s.spaces, name)
	return name, ip(ctx, "-n", name, "link", "set", "lo", "up")
}

// setup builds the switch, the nodes, the pods, the external host and the
// cluster file.
func (s *Scenario) setup(ctx context.Context) (string, error) {
	if err := s.mountBPFFS(); err != nil {
		return "", err
	}
	if err := s.mountCgroup(); err != nil {
		return "", err
	}
	sw, err := s.addNS(ctx, "sw")
	if err != nil {
		return "", err
	}
	if err := ip(ctx, "-n", sw, "link", "add", "br0", "type", "bridge"); err != nil {
		return "", err
	}
	if err := ip(ctx, "-n", sw, "link", "set", "br0", "up"); err != nil {
		return "", err
	}
	plug := func(ns string, port string, addr netip.Prefix) error {
		if err := ip(ctx, "-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			return err
		}
		if err := ip(ctx, "-n", sw, "link", "set", port, "master", "br0", "up"); err != nil {
			return err
		}
		if err := ip(ctx, "-n", ns, "addr", "add", addr.String(), "dev", "eth0"); err != nil {
			return err
		}
		return ip(ctx, "-n", ns, "link", "set", "eth0", "up")
	}
	for i := 1; i <= s.Nodes; i++ {
		n := &node{num: i, name: fmt.Sprintf("node%d", i),
			underlay: netip.AddrFrom4([4]byte{198, 18, 0, byte(i)}),
			podCIDR:  netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24),
			stateDir: filepath.Join(s.WorkDir, fmt.Sprintf("node%d", i)),
			wgIface:  fmt.Sprintf("wgd%dn%d", os.Getpid()%100000, i)}
		if n.ns, err = s.addNS(ctx, n.name); err != nil {
			return "", err
		}
		if err := plug(n.ns, fmt.Sprintf("h%d", i), netip.PrefixFrom(n.underlay, 24)); err != nil {
			return "", err
		}
		if err := os.MkdirAll(n.stateDir, 0o755); err != nil {
			return "", err
		}
		// The WireGuard key, made beforehand so the cluster file can name
		// every node's public key (a file datastore cannot be published to).
		k, err := wireguard.GeneratePrivateKey()
		if err != nil {
			return "", err
		}
		if err := wireguard.WriteKeyFile(filepath.Join(n.stateDir, agent.KeyFileName), k); err != nil {
			return "", err
		}
		n.wgKey = k.Public()
		for j, letter := range []string{"a", "b"} {
			p := &pod{name: fmt.Sprintf("pod%d%s", i, letter), node: n,
				ip: netip.AddrFrom4([4]byte{10, 244, byte(i), byte(10 + j)})}
			p.hostIf = datastore.PodInterface("demo", p.name)
			if p.ns, err = s.addNS(ctx, p.name); err != nil {
				return "", err
			}
			if err := s.plugPod(ctx, p); err != nil {
				return "", err
			}
			if err := s.serveBackends(p); err != nil {
				return "", err
			}
			n.pods = append(n.pods, p)
		}
		s.nodes = append(s.nodes, n)
	}
	// An external host on the underlay, outside every pool.
	if s.ext, err = s.addNS(ctx, "ext"); err != nil {
		return "", err
	}
	s.extIP = netip.MustParseAddr("198.18.0.100")
	if err := plug(s.ext, "h100", netip.PrefixFrom(s.extIP, 24)); err != nil {
		return "", err
	}
	// The external host is the nodes' router, as a real network has one:
	// a packet no rule of ours handled (one to a service without
	// endpoints, refused in FORWARD) has a route out.
	for _, n := range s.nodes {
		if err := ip(ctx, "-n", n.ns, "route", "add", "default", "via", s.extIP.String()); err != nil {
			return "", err
		}
	}
	s.cluster = s.clusterFile(s.nodes)
	s.file = filepath.Join(s.WorkDir, "cluster.yaml")
	if err := datastore.WriteFile(s.file, s.cluster); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d namespaces, underlay 198.18.0.0/24 (the external host the nodes' router), pods in 10.244.N.0/24, cluster file %s",
		len(s.spaces), s.file), nil
}

// plugPod plays the CNI plugin: a veth from the node to the pod, the pod's
// address, and its default route via 169.254.1.1, which resolves to the
// host side's fixed MAC through a permanent neighbour entry (so the node
// needs no gateway address and no proxy ARP).
func (s *Scenario) plugPod(ctx context.Context, p *pod) error {
	const gwMAC, podMTU = "ee:ee:ee:ee:ee:ee", "1450"
	steps := [][]string{
		{"-n", p.node.ns, "link", "add", p.hostIf, "type", "veth", "peer", "name", "eth0", "netns", p.ns},
		{"-n", p.node.ns, "link", "set", p.hostIf, "address", gwMAC, "mtu", podMTU, "up"},
		{"-n", p.ns, "link", "set", "eth0", "mtu", podMTU, "up"},
		{"-n", p.ns, "addr", "add", p.ip.String() + "/32", "dev", "eth0"},
		{"-n", p.ns, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0", "onlink"},
		{"-n", p.ns, "neigh", "add", "169.254.1.1", "lladdr", gwMAC, "dev", "eth0", "nud", "permanent"},
	}
	for _, a := range steps {
		if err := ip(ctx, a...); err != nil {
			return err
		}
	}
	return nil
}

// clusterFile describes nodes, their pods, one pool and one service.
func (s *Scenario) clusterFile(nodes []*node) datastore.Cluster {
	c := datastore.Cluster{Pools: []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}}}
	svc := datastore.Service{Namespace: "demo", Name: "echo", ClusterIPs: []netip.Addr{clusterIP},
		Type: "NodePort", Ports: []datastore.ServicePort{{Protocol: "TCP", Port: servicePort, NodePort: nodePort, TargetPort: backendPort},
			{Name: "stream", Protocol: "TCP", Port: streamServicePort, TargetPort: streamBackendPort}}}
	for _, n := range nodes {
		c.Nodes = append(c.Nodes, datastore.Node{Name: n.name, UnderlayIPv4: n.underlay,
			PodCIDRs: []netip.Prefix{n.podCIDR}, WireGuardPublicKey: n.wgKey.String()})
		for _, p := range n.pods {
			c.Pods = append(c.Pods, datastore.Pod{Namespace: "demo", Name: p.name, Node: n.name, IPs: []netip.Addr{p.ip}})
			svc.Endpoints = append(svc.Endpoints, datastore.Endpoint{IP: p.ip, Node: n.name})
		}
	}
	// A service without endpoints (refused at once) and a session-affine
	// one (each client keeps its backend).
	empty := datastore.Service{Namespace: "demo", Name: "empty", ClusterIPs: []netip.Addr{emptyIP},
		Ports: []datastore.ServicePort{{Protocol: "TCP", Port: servicePort, TargetPort: backendPort}}}
	sticky := svc
	sticky.Name, sticky.Type, sticky.ClusterIPs = "sticky", "ClusterIP", []netip.Addr{stickyIP}
	sticky.Ports = []datastore.ServicePort{{Protocol: "TCP", Port: servicePort, TargetPort: backendPort}}
	sticky.SessionAffinity, sticky.SessionAffinityTimeoutSeconds = "ClientIP", 600
	c.Services = []datastore.Service{svc, empty, sticky}
	for i := 1; i < s.Services; i++ {
		more := svc
		more.Name = fmt.Sprintf("svc-%d", i)
		more.Type = "ClusterIP"
		more.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(1 + i/250), byte(1 + i%250)})}
		more.Ports = []datastore.ServicePort{{Protocol: "TCP", Port: servicePort, TargetPort: backendPort}}
		c.Services = append(c.Services, more)
	}
	c.Normalize()
	return c
}

// start starts n's agent with extra flags, its output appended to its log.
func (s *Scenario) start(n *node, extra ...string) error {
	cgroup, err := s.nodeCgroup(n)
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(n.stateDir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"netns", "exec", n.ns, s.Agent, "run", "--node", n.name,
		"--datastore", "file:" + s.file, "--state-dir", n.stateDir, "--listen", agent.DefaultListen,
		"--resync-interval", s.Resync.String(), "--wireguard-interface", n.wgIface, "--log-format", "json",
		"--bpf-proxy", "--bpf-pin-dir", s.pinDir(n), "--bpf-cgroup", cgroup}, extra...)
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a Ctrl-C reaches the demo alone and the
	// demo stops the agents in order; and gone with the demo if the demo
	// is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	n.started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	n.cmd, n.exited, n.flags = cmd, make(chan struct{}), extra
	go func(c *exec.Cmd, done chan struct{}) {
		_ = c.Wait()
		logf.Close()
		close(done)
	}(cmd, n.exited)
	return nil
}

// stop stops n's agent gracefully (SIGTERM), then for good after 10 s.
func (s *Scenario) stop(n *node) error {
	if n.cmd == nil {
		return nil
	}
	defer func() { n.cmd = nil }()
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
		return fmt.Errorf("%s: agent did not stop within 10 s of SIGTERM", n.name)
	}
	if code := n.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("%s: agent exited with status %d (see %s)", n.name, code, filepath.Join(n.stateDir, "agent.log"))
	}
	return nil
}

// status asks n's agent for its status document.
func (s *Scenario) status(ctx context.Context, n *node) (agent.Status, error) {
	var st agent.Status
	out, err := inNS(ctx, n.ns, s.Agent, "status", "--json")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// waitReady waits until n's agent reports ready.
func (s *Scenario) waitReady(ctx context.Context, n *node) error {
	return eventually(ctx, 30*time.Second, func() error {
		select {
		case <-n.exited:
			return fmt.Errorf("%s: agent exited: %s", n.name, s.logTail(n, 5))
		default:
		}
		st, err := s.status(ctx, n)
		if err != nil {
			return err
		}
		if !st.Ready {
			return fmt.Errorf("%s not ready: %s", n.name, st.LastError)
		}
		return nil
	})
}

func (s *Scenario) logTail(n *node, lines int) string {
	b, _ := os.ReadFile(filepath.Join(n.stateDir, "agent.log"))
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// startAll starts every agent and measures the time from the start to the
// first successful cross-node pod ping.
func (s *Scenario) startAll(ctx context.Context) (string, error) {
	for _, n := range s.nodes {
		if err := s.start(n); err != nil {
			return "", err
		}
	}
	start := s.nodes[0].started
	a, b := s.nodes[0].pods[0], s.nodes[1].pods[0]
	// A tight probe (100 ms reply timeout) for the measurement.
	var first time.Duration
	if err := eventually(ctx, 30*time.Second, func() error {
		sent := time.Now()
		_, err := inNS(ctx, a.ns, "ping", "-n", "-q", "-c", "1", "-W", "0.1", b.ip.String())
		first = sent.Sub(start)
		return err
	}); err != nil {
		return "", fmt.Errorf("%s → %s: %w", a.name, b.name, err)
	}
	var ready []string
	var programmed time.Duration
	for _, n := range s.nodes {
		if err := s.waitReady(ctx, n); err != nil {
			return "", err
		}
		ready = append(ready, n.name)
		if st, err := s.status(ctx, n); err == nil && !st.InSyncAt.IsZero() {
			programmed = max(programmed, st.InSyncAt.Sub(st.StartedAt))
		}
	}
	s.figure("agent process start → dataplane programmed (first apply; slowest node)", programmed.Round(time.Millisecond).String())
	s.figure("agent start → first cross-node pod ping", "≤ "+first.Round(time.Millisecond).String()+" (the successful ping's send time; probes every ~100 ms)")
	return fmt.Sprintf("%s ready; first %s → %s ping %v after start", strings.Join(ready, ", "), a.name, b.name, first.Round(time.Millisecond)), nil
}

// allPairs pings every pod from every pod of another node.
func (s *Scenario) allPairs(ctx context.Context, timeout time.Duration) (int, error) {
	n := 0
	for _, from := range s.nodes {
		for _, to := range s.nodes {
			if from == to {
				continue
			}
			for _, a := range from.pods {
				for _, b := range to.pods {
					if err := eventually(ctx, timeout, func() error { return ping(ctx, a.ns, b.ip) }); err != nil {
						return n, fmt.Errorf("%s (%s) → %s (%s): %w", a.name, a.ip, b.name, b.ip, err)
					}
					n++
				}
			}
		}
	}
	return n, nil
}

func (s *Scenario) counters(ctx context.Context, link func(*node) string) (map[*node]uint64, error) {
	out := map[*node]uint64{}
	for _, n := range s.nodes {
		c, err := txPackets(ctx, n.ns, link(n))
		if err != nil {
			return nil, err
		}
		out[n] = c
	}
	return out, nil
}

func vxlanDev(*node) string { return "np-vxlan" }
func wgDev(n *node) string  { return n.wgIface }

// traffic is one device of every node: its packet counter read before
// and after pinging.
type traffic struct {
	before, after map[*node]uint64
}

// moved checks that every node's counter grew by at least min.
func (t traffic) moved(min uint64, what string) error {
	for n, b := range t.before {
		if t.after[n] < b+min {
			return fmt.Errorf("%s on %s sent %d packets, want ≥ %d", what, n.name, t.after[n]-b, min)
		}
	}
	return nil
}

// sent is how many packets the nodes' devices sent in all.
func (t traffic) sent() uint64 {
	var sum uint64
	for n, b := range t.before {
		sum += t.after[n] - b
	}
	return sum
}

// countedPairs pings every pair (allPairs) between two readings of each
// node's counter of every device devs names, and returns the pairs that
// answer and each device's traffic.
func (s *Scenario) countedPairs(ctx context.Context, devs ...func(*node) string) (int, []traffic, error) {
	t := make([]traffic, len(devs))
	var err error
	for i, dev := range devs {
		if t[i].before, err = s.counters(ctx, dev); err != nil {
			return 0, nil, err
		}
	}
	pairs, err := s.allPairs(ctx, 10*time.Second)
	if err != nil {
		return 0, nil, err
	}
	for i, dev := range devs {
		if t[i].after, err = s.counters(ctx, dev); err != nil {
			return 0, nil, err
		}
	}
	return pairs, t, nil
}

// pairsOverVXLAN pings every pair and checks that every node's np-vxlan
// device carried them; it returns the pairs that answer.
func (s *Scenario) pairsOverVXLAN(ctx context.Context) (int, error) {
	pairs, t, err := s.countedPairs(ctx, vxlanDev)
	if err != nil {
		return 0, err
	}
	return pairs, t[0].moved(4, "np-vxlan")
}

// eventuallyOn waits, node by node, until check succeeds on each of
// nodes, for up to timeout each.
func eventuallyOn(ctx context.Context, nodes []*node, timeout time.Duration, check func(n *node) error) error {
	for _, n := range nodes {
		if err := eventually(ctx, timeout, func() error { return check(n) }); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scenario) checkVXLAN(ctx context.Context) (string, error) {
	n, err := s.pairsOverVXLAN(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d pod pairs answer; every node's np-vxlan device carried them", n), nil
}

// restartAll restarts every agent with extra flags and waits until ready.
func (s *Scenario) restartAll(ctx context.Context, extra ...string) error {
	for _, n := range s.nodes {
		if err := s.stop(n); err != nil {
			return err
		}
		if err := s.start(n, extra...); err != nil {
			return err
		}
	}
	for _, n := range s.nodes {
		if err := s.waitReady(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scenario) checkWireGuard(ctx context.Context) (string, error) {
	if err := s.restartAll(ctx, "--wireguard", "--wireguard-mode", "userspace"); err != nil {
		return "", err
	}
	// Every agent has every other node as a peer.
	if err := eventuallyOn(ctx, s.nodes, 20*time.Second, func(n *node) error {
		st, err := s.status(ctx, n)
		if err != nil {
			return err
		}
		for _, w := range st.WireGuardDevices {
			if w.Enabled && w.Peers == len(s.nodes)-1 && w.RuleInstalled {
				return nil
			}
		}
		return fmt.Errorf("%s: WireGuard not ready: %+v", n.name, st.WireGuardDevices)
	}); err != nil {
		return "", err
	}
	pairs, t, err := s.countedPairs(ctx, wgDev, vxlanDev)
	if err != nil {
		return "", err
	}
	if err := t[0].moved(4, "the WireGuard device"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d pod pairs answer through the WireGuard devices (userspace); np-vxlan carried %d packets meanwhile", pairs, t[1].sent()), nil
}

func (s *Scenario) checkWireGuardOff(ctx context.Context) (string, error) {
	if err := s.restartAll(ctx); err != nil {
		return "", err
	}
	if err := eventuallyOn(ctx, s.nodes, 20*time.Second, func(n *node) error {
		out, err := run(ctx, "ip", "-n", n.ns, "rule", "show", "priority", strconv.Itoa(wireguard.DefaultRulePriority))
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "" {
			return fmt.Errorf("%s still has the WireGuard rule: %s", n.name, out)
		}
		if _, err := run(ctx, "ip", "-n", n.ns, "link", "show", "dev", n.wgIface); err == nil {
			return fmt.Errorf("%s still has %s", n.name, n.wgIface)
		}
		return nil
	}); err != nil {
		return "", err
	}
	pairs, err := s.pairsOverVXLAN(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("no WireGuard rule or device left; %d pod pairs answer over VXLAN", pairs), nil
}

func (s *Scenario) checkMasquerade(ctx context.Context) (string, error) {
	return s.verifyMasquerade(ctx)
}

// verifyMasquerade checks on node1 that a pod reaches the external host,
// which has no route to the pods, and that conntrack shows the pod's
// address translated to the node's; pod to pod keeps the pod's address.
// It first forgets the flows of an earlier check, so that what conntrack
// shows is the translation of the rules in place now.
func (s *Scenario) verifyMasquerade(ctx context.Context) (string, error) {
	n := s.nodes[0]
	p, other := n.pods[0], s.nodes[1].pods[0]
	_, haveConntrack := exec.LookPath("conntrack")
	if haveConntrack == nil {
		for _, dst := range []netip.Addr{s.extIP, other.ip} {
			// Exit status 1 when there was nothing to forget.
			_, _ = inNS(ctx, n.ns, "conntrack", "-D", "-p", "icmp", "-s", p.ip.String(), "-d", dst.String())
		}
	}
	// The external host has no route to the pods: its reply comes back
	// only if the node translated the pod's address to its own.
	if err := eventually(ctx, 10*time.Second, func() error { return ping(ctx, p.ns, s.extIP) }); err != nil {
		return "", fmt.Errorf("%s → external host %s: %w", p.name, s.extIP, err)
	}
	if err := ping(ctx, p.ns, other.ip); err != nil {
		return "", fmt.Errorf("%s → %s: %w", p.name, other.name, err)
	}
	if haveConntrack != nil {
		return fmt.Sprintf("%s reaches the external host %s, which has no route to the pods (install conntrack to see the translation)", p.name, s.extIP), nil
	}
	// conntrack shows it: the reply to the external host's packets goes to
	// the node's address; the reply from the other pod to the pod's.
	out, err := inNS(ctx, n.ns, "conntrack", "-L", "-p", "icmp", "-s", p.ip.String(), "-d", s.extIP.String())
	if err != nil {
		return "", err
	}
	if !strings.Contains(out, fmt.Sprintf("src=%s dst=%s ", s.extIP, n.underlay)) {
		return "", fmt.Errorf("no translation to %s in %s's conntrack: %s", n.underlay, n.name, out)
	}
	out, err = inNS(ctx, n.ns, "conntrack", "-L", "-p", "icmp", "-s", p.ip.String(), "-d", other.ip.String())
	if err != nil {
		return "", err
	}
	if !strings.Contains(out, fmt.Sprintf("src=%s dst=%s ", other.ip, p.ip)) {
		return "", fmt.Errorf("pod-to-pod traffic translated in %s's conntrack: %s", n.name, out)
	}
	return fmt.Sprintf("%s → external %s leaves as %s (conntrack); %s → %s keeps %s", p.name, s.extIP, n.underlay, p.name, other.name, p.ip), nil
}

// iptablesSaves are the save commands of both iptables backends that are
// installed.
func iptablesSaves() []string {
	var out []string
	for _, save := range []string{"iptables-legacy-save", "iptables-nft-save"} {
		if _, err := exec.LookPath(save); err == nil {
			out = append(out, save)
		}
	}
	return out
}

// checkNFTables restarts every agent on the nftables backend: the agents
// remove their iptables chains (both backends) and program the masquerade
// in a table of their own, its sets inside it.
func (s *Scenario) checkNFTables(ctx context.Context) (string, error) {
	if err := s.restartAll(ctx, "--netfilter", "nftables"); err != nil {
		return "", err
	}
	_, haveNFT := exec.LookPath("nft")
	if err := eventuallyOn(ctx, s.nodes, 20*time.Second, func(n *node) error {
		st, err := s.status(ctx, n)
		if err != nil {
			return err
		}
		if st.Masquerade != string(agent.NetfilterNFTables) {
			return fmt.Errorf("%s: status says masquerade %q", n.name, st.Masquerade)
		}
		for _, save := range iptablesSaves() {
			out, err := inNS(ctx, n.ns, save)
			if err != nil {
				return err
			}
			if strings.Contains(out, agent.ChainPrefix) {
				return fmt.Errorf("%s: %s still holds %s chains:\n%s", n.name, save, agent.ChainPrefix, out)
			}
		}
		if haveNFT != nil {
			return nil
		}
		out, err := inNS(ctx, n.ns, "nft", "list", "table", "ip", agent.NFTablesTable)
		if err != nil {
			return err
		}
		for _, want := range []string{"set " + masquerade.DefaultAllPoolsSet + " {", "set " + masquerade.DefaultMasqPoolsSet + " {",
			"10.244.0.0/16", "ip saddr @" + masquerade.DefaultMasqPoolsSet + " ip daddr != @" + masquerade.DefaultAllPoolsSet, "masquerade"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("%s: table ip %s lacks %q:\n%s", n.name, agent.NFTablesTable, want, out)
			}
		}
		return nil
	}); err != nil {
		return "", err
	}
	detail, err := s.verifyMasquerade(ctx)
	if err != nil {
		return "", err
	}
	where := fmt.Sprintf("table ip %s (sets %s, %s) on %d nodes", agent.NFTablesTable, masquerade.DefaultAllPoolsSet, masquerade.DefaultMasqPoolsSet, len(s.nodes))
	if haveNFT != nil {
		where = fmt.Sprintf("status masquerade nftables on %d nodes (install nft to list the table)", len(s.nodes))
	}
	return fmt.Sprintf("%s; %s; no %s chain in %s", where, detail, agent.ChainPrefix, strings.Join(iptablesSaves(), ", ")), nil
}

// checkNetworkPolicy labels one pod of node 2 app=db and one of node 1
// role=client, and adds a NetworkPolicy that lets only role=client pods
// reach app=db pods. On each backend (nftables, then the iptables one the
// node uses), with the agents enforcing policy: the client reaches the db
// pod, a pod of node 3 no longer does, and reaches the client (no policy
// selects it). Then the policy goes and the agents run as before.
func (s *Scenario) checkNetworkPolicy(ctx context.Context) (string, error) {
	client, db, other := s.nodes[0].pods[0], s.nodes[1].pods[0], s.nodes[2].pods[0]
	before := s.nodes[0].flags
	c := s.clusterFile(s.nodes)
	for i := range c.Pods {
		switch c.Pods[i].Name {
		case client.name:
			c.Pods[i].Labels = map[string]string{"role": "client"}
		case db.name:
			c.Pods[i].Labels = map[string]string{"app": "db"}
		}
	}
	c.Namespaces = []datastore.Namespace{{Name: "demo"}}
	c.NetworkPolicies = []datastore.NetworkPolicy{{Namespace: "demo", Name: "db-from-clients",
		PodSelector: datastore.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress: []datastore.NetworkPolicyRule{{Peers: []datastore.NetworkPolicyPeer{
			{PodSelector: &datastore.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}}}}
	c.Normalize()
	if err := datastore.WriteFile(s.file, c); err != nil {
		return "", err
	}
	var seen []string
	for _, flags := range [][]string{{"--netfilter", "nftables"}, nil} {
		if err := s.restartAll(ctx, append(flags, "--network-policy")...); err != nil {
			return "", err
		}
		st, err := s.status(ctx, s.nodes[1])
		if err != nil {
			return "", err
		}
		if err := eventually(ctx, 20*time.Second, func() error { return ping(ctx, client.ns, db.ip) }); err != nil {
			return "", fmt.Errorf("%s: the allowed client %s → %s: %w", st.Masquerade, client.name, db.name, err)
		}
		if err := eventually(ctx, 20*time.Second, func() error {
			if ping(ctx, other.ns, db.ip) == nil {
				return fmt.Errorf("%s → %s still answers", other.name, db.name)
			}
			return nil
		}); err != nil {
			return "", fmt.Errorf("%s: the policy does not isolate %s: %w", st.Masquerade, db.name, err)
		}
		if err := eventually(ctx, 20*time.Second, func() error { return ping(ctx, other.ns, client.ip) }); err != nil {
			return "", fmt.Errorf("%s: %s (no policy) → %s: %w", st.Masquerade, other.name, client.name, err)
		}
		seen = append(seen, st.Masquerade)
	}
	// nodeagent explain says why, from the cluster file.
	why, err := run(ctx, s.Agent, "explain", "--datastore", "file:"+s.file, "--from", "demo/"+other.name, "--to", "demo/"+db.name, "--port", "80")
	if err != nil {
		return "", fmt.Errorf("nodeagent explain: %w", err)
	}
	if !strings.Contains(why, "denied") || !strings.Contains(why, "end of tier") {
		return "", fmt.Errorf("nodeagent explain does not say the policy's tier denies %s → %s:\n%s", other.name, db.name, why)
	}
	s.printf("      nodeagent explain: %s", why)
	if err := datastore.WriteFile(s.file, s.clusterFile(s.nodes)); err != nil {
		return "", err
	}
	if err := s.restartAll(ctx, before...); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s → %s allowed, %s → %s denied (explain: end of tier k8s), %s → %s allowed, on %s", client.name, db.name,
		other.name, db.name, other.name, client.name, strings.Join(seen, " and ")), nil
}

func (s *Scenario) checkRestart(ctx context.Context) (string, error) {
	from, to := s.nodes[0].pods[0], s.nodes[1].pods[0]
	victim := s.nodes[1]
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(pctx, "ip", "netns", "exec", from.ns, "ping", "-n", "-q", "-i", "0.01", "-W", "1", to.ip.String())
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) } // ping prints its summary
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	// A long connection through the service, from a pod on the node whose
	// agent restarts: its translation lives in the pinned maps.
	st, err := openStream(ctx, victim.pods[0].ns)
	if err != nil {
		return "", err
	}
	defer st.conn.Close()
	if err := st.echo(); err != nil {
		return "", err
	}
	time.Sleep(time.Second)
	restart := time.Now()
	if err := s.stop(victim); err != nil {
		return "", err
	}
	if err := s.start(victim, victim.flags...); err != nil {
		return "", err
	}
	if err := s.waitReady(ctx, victim); err != nil {
		return "", err
	}
	took := time.Since(restart)
	if err := st.echo(); err != nil {
		return "", fmt.Errorf("the connection %s → %v:%d (backend %s) broke across the restart: %w",
			victim.pods[0].name, clusterIP, streamServicePort, st.backend, err)
	}
	time.Sleep(time.Second)
	cancel()
	_ = cmd.Wait()
	sent, lost, err := pingLoss(out.String())
	if err != nil {
		return "", err
	}
	budget := int(s.Resync / (10 * time.Millisecond))
	if lost > budget {
		return "", fmt.Errorf("%d of %d pings lost across the restart, more than one refresh (%v = %d pings)", lost, sent, s.Resync, budget)
	}
	s.figure("pings lost while an agent restarted (10 ms interval)", fmt.Sprintf("%d of %d (restart to ready: %v)", lost, sent, took.Round(time.Millisecond)))
	return fmt.Sprintf("%s restarted (stop → ready in %v) during %s → %s at 10 ms: %d of %d lost (budget %d); %s's connection through %v:%d to %s still echoes",
		victim.name, took.Round(time.Millisecond), from.name, to.name, lost, sent, budget, victim.pods[0].name, clusterIP, streamServicePort, st.backend), nil
}

func (s *Scenario) measureIdle(ctx context.Context) (string, error) {
	window := s.IdleWindow
	if window <= 0 {
		window = 5 * time.Second
	}
	type sample struct {
		rss uint64
		cpu time.Duration
	}
	first := map[*node]sample{}
	for _, n := range s.nodes {
		rss, cpu, err := procStats(n.cmd.Process.Pid)
		if err != nil {
			return "", err
		}
		first[n] = sample{rss, cpu}
	}
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	var parts []string
	var maxRSS uint64
	var maxCPU float64
	for _, n := range s.nodes {
		rss, cpu, err := procStats(n.cmd.Process.Pid)
		if err != nil {
			return "", err
		}
		pct := 100 * (cpu - first[n].cpu).Seconds() / window.Seconds()
		parts = append(parts, fmt.Sprintf("%s %.1f MiB %.2f%%", n.name, float64(rss)/(1<<20), pct))
		maxRSS, maxCPU = max(maxRSS, rss), max(maxCPU, pct)
	}
	s.figure(fmt.Sprintf("agent RSS (largest of the nodes; services in the file: %d)", s.Services), fmt.Sprintf("%.1f MiB", float64(maxRSS)/(1<<20)))
	s.figure(fmt.Sprintf("agent idle CPU over %v (largest; refresh every %v; services in the BPF proxy: %d)", window, s.Resync, s.Services), fmt.Sprintf("%.2f%% of one core", maxCPU))
	return strings.Join(parts, "; "), nil
}

func (s *Scenario) checkNodeRemoved(ctx context.Context) (string, error) {
	gone := s.nodes[len(s.nodes)-1]
	rest := s.nodes[:len(s.nodes)-1]
	// Before: every other node routes gone's block.
	for _, n := range rest {
		r, err := routes(ctx, n.ns, gone.podCIDR)
		if err != nil {
			return "", err
		}
		if len(r) == 0 {
			return "", fmt.Errorf("%s has no route to %s before the removal", n.name, gone.podCIDR)
		}
	}
	if err := datastore.WriteFile(s.file, s.clusterFile(rest)); err != nil {
		return "", err
	}
	edited := time.Now()
	if err := eventuallyOn(ctx, rest, 20*time.Second, func(n *node) error {
		r, err := routes(ctx, n.ns, gone.podCIDR)
		if err != nil {
			return err
		}
		if len(r) > 0 {
			return fmt.Errorf("%s still routes %s: %s", n.name, gone.podCIDR, r[0])
		}
		return nil
	}); err != nil {
		return "", err
	}
	took := time.Since(edited)
	if err := ping(ctx, rest[0].pods[0].ns, gone.pods[0].ip); err == nil {
		return "", fmt.Errorf("%s still reaches %s", rest[0].pods[0].name, gone.pods[0].name)
	}
	// The others still reach each other.
	a, b := rest[0].pods[0], rest[1].pods[1]
	if err := eventually(ctx, 10*time.Second, func() error { return ping(ctx, a.ns, b.ip) }); err != nil {
		return "", fmt.Errorf("%s → %s after the removal: %w", a.name, b.name, err)
	}
	s.figure("file edit → removed node's routes gone on every other node", took.Round(time.Millisecond).String())
	return fmt.Sprintf("%s removed from the file: its route %s gone on %d nodes %v later, its pods unreachable, the others still reach each other",
		gone.name, gone.podCIDR, len(rest), took.Round(time.Millisecond)), nil
}

func (s *Scenario) checkCleanup(ctx context.Context) (string, error) {
	n := s.nodes[0]
	if out, err := inNS(ctx, n.ns, s.Agent, "status"); err == nil {
		s.statusTable = out
	}
	if err := s.stop(n); err != nil {
		return "", err
	}
	// What the agent left (it leaves the dataplane working when stopped).
	if err := ping(ctx, n.pods[0].ns, s.extIP); err != nil {
		return "", fmt.Errorf("the stopped agent's dataplane does not work: %w", err)
	}
	leftRoutes, err := run(ctx, "ip", "-n", n.ns, "route", "show", "proto", "78")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(leftRoutes) == "" {
		return "", fmt.Errorf("%s: no route of ours before the cleanup", n.name)
	}
	if len(s.pinsLeft(n)) == 0 {
		return "", fmt.Errorf("%s: no BPF pin of ours before the cleanup", n.name)
	}
	if _, err := inNS(ctx, n.ns, s.Agent, "cleanup", "--node", n.name, "--state-dir", n.stateDir, "--wireguard-interface", n.wgIface,
		"--bpf-pin-dir", s.pinDir(n)); err != nil {
		return "", err
	}
	var problems []string
	if out, _ := run(ctx, "ip", "-n", n.ns, "route", "show", "proto", "78"); strings.TrimSpace(out) != "" {
		problems = append(problems, "routes: "+out)
	}
	if _, err := run(ctx, "ip", "-n", n.ns, "link", "show", "dev", "np-vxlan"); err == nil {
		problems = append(problems, "np-vxlan still exists")
	}
	if out, err := inNS(ctx, n.ns, "ipset", "list", "-n"); err != nil || strings.Contains(out, agent.SetPrefixV4) {
		problems = append(problems, fmt.Sprintf("ip sets: %s %v", out, err))
	}
	for _, save := range iptablesSaves() {
		if out, err := inNS(ctx, n.ns, save, "-t", "nat"); err != nil || strings.Contains(out, agent.ChainPrefix) {
			problems = append(problems, fmt.Sprintf("%s: %s %v", save, out, err))
		}
	}
	nftNote := "no nftables table of ours"
	if _, err := exec.LookPath("nft"); err == nil {
		if out, err := inNS(ctx, n.ns, "nft", "list", "tables"); err != nil || strings.Contains(out, agent.NFTablesTable) {
			problems = append(problems, fmt.Sprintf("nft list tables: %s %v", out, err))
		}
	} else {
		nftNote = "(install nft to check the nftables table)"
	}
	if left := s.pinsLeft(n); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("BPF pins: %v", left))
	}
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	// Pods' interfaces are the CNI plugin's: still there.
	if _, err := run(ctx, "ip", "-n", n.ns, "link", "show", "dev", n.pods[0].hostIf); err != nil {
		return "", fmt.Errorf("cleanup removed a pod interface: %w", err)
	}
	return fmt.Sprintf("on %s: no np-vxlan, no route with proto 78, no np4- ip set, no npm- chain, %s, no BPF pin; pod interfaces untouched", n.name, nftNote), nil
}

// teardown stops every agent and deletes every namespace the demo made.
func (s *Scenario) teardown(failed bool) {
	for _, n := range s.nodes {
		if failed && n.cmd != nil {
			s.printf("\nlast lines of %s's agent log:\n%s\n", n.name, s.logTail(n, 8))
		}
		_ = s.stop(n)
		_ = os.Remove(filepath.Join("/var/run/wireguard", n.wgIface+".sock"))
	}
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	s.listeners = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := len(s.spaces) - 1; i >= 0; i-- {
		if err := ip(ctx, "netns", "delete", s.spaces[i]); err != nil {
			s.printf("teardown: %v\n", err)
		}
	}
	s.unmountCgroup()
	s.unmountBPFFS()
	s.printf("\ncleaned up: agents stopped, %d namespaces deleted, BPF pins unmounted\n", len(s.spaces))
	s.spaces = nil
}

// demoPID is the process ID in a name the demo gave (NamePrefix, the
// process ID, a dash, the rest).
func demoPID(name string) (int, bool) {
	if !strings.HasPrefix(name, NamePrefix) {
		return 0, false
	}
	rest := strings.TrimPrefix(name, NamePrefix)
	pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
	return pid, err == nil
}

// processAlive says whether process pid runs.
func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// sweepLeftovers deletes the namespaces of earlier demo runs whose process
// is gone (a run killed before it could clean up).
func sweepLeftovers(ctx context.Context, out io.Writer) {
	list, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pid, ok := demoPID(f[0])
		if !ok || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		if err := ip(ctx, "netns", "delete", f[0]); err == nil {
			fmt.Fprintf(out, "removed namespace %s left by an earlier run\n", f[0])
		}
	}
}
