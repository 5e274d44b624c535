package agent

import (
	"context"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// A plan for an agent that runs the BPF proxy plans the rules for the
// proxy's marks (the masquerade of what it marks, the rejects of services
// without a ready backend), as run writes them, though it leaves the
// proxy's programs out: without them, a plan on such a node listed those
// rules for deletion.
func TestPlanWithTheBPFProxy(t *testing.T) {
	c := datastore.Cluster{
		Nodes: []datastore.Node{{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"),
			PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}},
		Pools:        []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}},
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")},
	}
	plan := func(proxy bool) string {
		node := newFakeNode(t, c.Nodes[0])
		dir := t.TempDir()
		file := filepath.Join(dir, "cluster.yaml")
		if err := datastore.WriteFile(file, c); err != nil {
			t.Fatal(err)
		}
		p, err := Plan(context.Background(), Config{NodeName: "node1", Kernel: node.k, Listen: "-", StateDir: dir, BPFProxy: proxy,
			Netfilter: NetfilterIPTablesLegacy, BPFPinDir: filepath.Join(dir, "bpf"), Datastore: &datastore.File{Path: file}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WritePlan(&b, p); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	without, with := plan(false), plan(true)
	// The service loop chain gains the two rejects of what the proxy
	// marked (as run writes it, in TestKernelBPFProxyOnAndOff's agent).
	chain := regexp.MustCompile(`chain npm-svc-loop \((\d+) rules?\)`)
	count := func(plan string) int {
		m := chain.FindStringSubmatch(plan)
		if m == nil {
			t.Fatalf("no service loop chain in the plan:\n%s", plan)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if w, wo := count(with), count(without); w != wo+2 {
		t.Errorf("the service loop chain has %d rules with the proxy, %d without; want 2 more:\n%s", w, wo, with)
	}
}
