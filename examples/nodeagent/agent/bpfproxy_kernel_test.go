//go:build linux

package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
)

// TestKernelBPFProxyOnAndOff runs the agent with --bpf-proxy, then without:
// the first run pins the proxy's maps and its attachment to the host
// interface, which stay when it stops; the second removes them.
func TestKernelBPFProxyOnAndOff(t *testing.T) {
	ns := newNode(t)
	dir := t.TempDir()
	pins := filepath.Join(bpftest.Dir(t), "node1")
	file := filepath.Join(dir, "cluster.yaml")
	c := datastore.Cluster{
		Nodes: []datastore.Node{{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}},
		Services: []datastore.Service{{Namespace: "demo", Name: "web", Type: "NodePort", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
			Ports:     []datastore.ServicePort{{Port: 80, NodePort: 30080, TargetPort: 8080}},
			Endpoints: []datastore.Endpoint{{IP: netip.MustParseAddr("10.244.1.10"), Node: "node1"}}}},
	}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(pins, name))
		return err == nil
	}
	run := func(t *testing.T, proxy bool, until func() bool) {
		cf := Config{NodeName: "node1", NetNS: ns.Path(), Listen: "-", StateDir: dir, Overlay: OverlayDirect,
			WireGuardInterface: fmt.Sprintf("wgt%d", os.Getpid()%100000), BPFProxy: proxy, BPFPinDir: pins,
			HostInterfaces: []string{"eth0"}, Datastore: &datastore.File{Path: file}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cf) }()
		deadline := time.Now().Add(30 * time.Second)
		for !until() {
			select {
			case err := <-done:
				cancel()
				t.Fatalf("the agent stopped: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("not reached in 30 s (proxy %v)", proxy)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	run(t, true, func() bool { return exists("np_fe") && exists("links/ingress_eth0") && exists("links/egress_eth0") })
	if !exists("np_fe") || !exists("links/ingress_eth0") {
		t.Fatal("a stopped agent's pins are gone")
	}
	run(t, false, func() bool {
		return !exists("np_fe") && !exists("np_be") && !exists("np_ct") && !exists("links/ingress_eth0")
	})
}
