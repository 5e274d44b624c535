//go:build linux

package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// TestKernelAgentPlan plans the agent on a fresh node namespace: the plan
// lists the route to the other node's pods, the blackhole of this node's
// block and the route to its pod, and nothing in the namespace changes
// (routes, rules, links, nftables, sysctls, as iproute2, nft and /proc
// show them). Then the agent runs, network policy on; a plan on the
// programmed node, while it runs and after it stopped, writes nothing in
// any driver (it deleted the local pod's route, before the pods' managers
// ran in a plan).
func TestKernelAgentPlan(t *testing.T) {
	kerneltest.RequireCommands(t, "ip", "nft")
	ns := newNode(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	c := datastore.Cluster{
		Nodes: []datastore.Node{
			{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}},
			{Name: "node2", UnderlayIPv4: netip.MustParseAddr("198.18.0.2"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")}},
		},
		Pools: []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16")}},
		Pods:  []datastore.Pod{{Namespace: "demo", Name: "a", Node: "node1", IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10")}}},
	}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	// The pod's interface, its peer left in the node's namespace.
	hostIf := c.Pods[0].HostInterface()
	for _, args := range [][]string{{"link", "add", hostIf, "type", "veth", "peer", "name", "plpod0"},
		{"link", "set", "plpod0", "up"}, {"link", "set", hostIf, "up"}} {
		if out, err := ns.Exec(context.Background(), "ip", args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	cfg := Config{NodeName: "node1", NetNS: ns.Path(), Listen: "-", StateDir: filepath.Join(dir, "state"), Overlay: OverlayDirect,
		Netfilter: NetfilterNFTables, WireGuardInterface: fmt.Sprintf("wgp%d", os.Getpid()%100000), NetworkPolicy: true,
		ResyncInterval: time.Hour, Datastore: &datastore.File{Path: file}}
	snapshot := func() string {
		t.Helper()
		var b strings.Builder
		for _, cmd := range [][]string{
			{"ip", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"}, {"ip", "rule"},
			{"ip", "link"}, {"ip", "neigh"}, {"nft", "list", "ruleset"},
			{"cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/conf/all/rp_filter"},
		} {
			out, err := ns.Exec(context.Background(), cmd[0], cmd[1:]...)
			if err != nil {
				t.Fatalf("%v: %v: %s", cmd, err, out)
			}
			b.Write(out)
		}
		return b.String()
	}
	routesOf := func(plans []dataplane.Plan) string {
		for _, p := range plans {
			if p.Driver == "routetable-ipv4-254" {
				return p.String()
			}
		}
		t.Fatalf("no plan of the main table in %v", plans)
		return ""
	}

	before := snapshot()
	ctx := context.Background()
	p, err := Plan(ctx, cfg)
	plans := p.Plans
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(); after != before {
		t.Fatalf("the plan changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if _, err := os.Stat(cfg.StateDir); !os.IsNotExist(err) {
		t.Errorf("the plan made the state directory: %v", err)
	}
	routes := routesOf(plans)
	for _, p := range plans {
		t.Logf("%s", p)
	}
	for _, want := range []string{
		"+ route 10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78",
		"+ route blackhole 10.244.1.0/24 proto 78",
		"+ route 10.244.1.10/32 dev " + hostIf,
	} {
		if !strings.Contains(routes, want) {
			t.Errorf("the plan lacks %q:\n%s", want, routes)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg) }()
	defer func() {
		cfg.Datastore = nil
		if err := Cleanup(context.Background(), cfg); err != nil {
			t.Error(err)
		}
	}()
	for start := time.Now(); !strings.Contains(snapshot(), "10.244.2.0/24 via 198.18.0.2 dev eth0 proto 78"); {
		if time.Since(start) > 30*time.Second {
			cancel()
			t.Fatalf("the agent did not route to node2's pods: %v", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Once the agent has programmed the node, a plan (a new set of
	// drivers adopting what the running agent wrote) writes nothing, in
	// any driver; and so after the agent stopped.
	var pending []string
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if pending = writingPlans(t, ctx, cfg); len(pending) == 0 || time.Since(start) > 30*time.Second {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(pending) == 0 {
		pending = writingPlans(t, ctx, cfg)
	}
	if len(pending) > 0 {
		t.Errorf("a plan on the programmed node writes:\n%s", strings.Join(pending, "\n\n"))
	}
}

// writingPlans plans the agent and returns the plans that write, and logs
// the drivers that cannot plan.
func writingPlans(t *testing.T, ctx context.Context, cfg Config) []string {
	t.Helper()
	p, err := Plan(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Unplanned) > 0 {
		t.Logf("drivers that cannot plan: %v", p.Unplanned)
	}
	var out []string
	for _, pl := range p.Plans {
		if !pl.Empty() {
			out = append(out, pl.String())
		}
	}
	return out
}
