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

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// TestKernelAgentRoutesRepairedAtOnce runs the agent in a fresh namespace
// with the periodic resync an hour away, deletes its route to another
// node's pods with iproute2, and waits for the route to come back: only
// the interface monitor's route events, which the agent hands its route
// tables, can bring it back in time.
func TestKernelAgentRoutesRepairedAtOnce(t *testing.T) {
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
	}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeName: "node1", NetNS: ns.Path(), Listen: "-", StateDir: dir, Overlay: OverlayDirect,
		Netfilter: NetfilterNFTables, WireGuardInterface: fmt.Sprintf("wgr%d", os.Getpid()%100000),
		ResyncInterval: time.Hour, Datastore: &datastore.File{Path: file}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		cfg.Datastore = nil
		if err := Cleanup(context.Background(), cfg); err != nil {
			t.Error(err)
		}
	}()
	routed := func() bool {
		out, err := ns.Exec(context.Background(), "ip", "route", "show", "10.244.2.0/24", "proto", "78")
		return err == nil && strings.Contains(string(out), "10.244.2.0/24 via 198.18.0.2 dev eth0")
	}
	wait := func(what string) time.Duration {
		t.Helper()
		start := time.Now()
		for !routed() {
			select {
			case err := <-done:
				t.Fatalf("the agent stopped: %v", err)
			default:
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: no route to node2's pods", what)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(start)
	}
	wait("at the start")
	if out, err := ns.Exec(context.Background(), "ip", "route", "del", "10.244.2.0/24", "proto", "78"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("the route deleted by another process was back after %v", wait("after it was deleted"))
}
