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

// newNode makes a fresh namespace (the harness removes it when the test
// ends) with an underlay interface: a veth whose peer stays inside.
func newNode(t *testing.T) *kerneltest.NS {
	t.Helper()
	ns := kerneltest.NewNS(t)
	for _, args := range [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"},
		{"addr", "add", "198.18.0.1/24", "dev", "eth0"},
		{"link", "set", "eth0p", "up"},
		{"link", "set", "eth0", "up"},
	} {
		if _, err := ns.Exec(context.Background(), "ip", args...); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for the links to settle (carrier, IPv6 link-local routes), so
	// that tests comparing the namespace before and after see only what
	// they did; on a busy machine this takes a while.
	deadline := time.Now().Add(20 * time.Second)
	for {
		links, _ := ns.Exec(context.Background(), "ip", "link")
		routes, _ := ns.Exec(context.Background(), "ip", "-6", "route", "show", "table", "all")
		settled := !strings.Contains(string(links), "NO-CARRIER") &&
			strings.Contains(string(routes), "fe80::/64 dev eth0 ") && strings.Contains(string(routes), "fe80::/64 dev eth0p ") &&
			strings.Contains(string(routes), "ff00::/8 dev eth0 ") && strings.Contains(string(routes), "ff00::/8 dev eth0p ")
		if settled {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node's links never settled:\n%s\n%s", links, routes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKernelNetfilterSwitch runs the agent in a fresh namespace on each
// netfilter backend in turn — nftables, iptables-nft, iptables-legacy,
// nftables again — and checks after each start that the masquerade rule
// and the service loop guard's jump are on that backend alone: switching
// leaves nothing of the one before (its nftables tables, its npm- chains).
// The cleanup then removes everything.
func TestKernelNetfilterSwitch(t *testing.T) {
	kerneltest.RequireCommands(t, "ip", "nft", "ipset", "iptables-nft-save", "iptables-legacy-save", "iptables-nft-restore", "iptables-legacy-restore")
	ns := newNode(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "cluster.yaml")
	c := datastore.Cluster{
		Nodes: []datastore.Node{{Name: "node1", UnderlayIPv4: netip.MustParseAddr("198.18.0.1"), PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}},
		Pools: []datastore.Pool{{Name: "default", CIDR: netip.MustParsePrefix("10.244.0.0/16"), Masquerade: true}},
	}
	c.Normalize()
	if err := datastore.WriteFile(file, c); err != nil {
		t.Fatal(err)
	}
	in := func(args ...string) (string, error) {
		out, err := ns.Exec(context.Background(), args[0], args[1:]...)
		return string(out), err
	}
	// where says which backends hold the masquerade rule (and the nftables
	// table, or a chain of ours). An error can be a race with the agent
	// (the table listed, then gone before it is read): ask again.
	where := func() (map[Netfilter]bool, error) {
		out := map[Netfilter]bool{}
		s, err := in("nft", "list", "tables")
		if err != nil {
			return nil, err
		}
		// nftables: the masquerade rule in our nat table, and our filter
		// table (the service loop guard's).
		nat, filter := strings.Contains(s, "table ip "+NFTablesTable+"\n"), strings.Contains(s, "table ip "+NFTablesFilterTable+"\n")
		if nat || filter {
			masq := false
			if nat {
				if s, err = in("nft", "list", "table", "ip", NFTablesTable); err != nil {
					return nil, err
				}
				masq = strings.Contains(s, "masquerade")
			}
			out[NetfilterNFTables] = masq && filter
		}
		for nf, save := range map[Netfilter]string{NetfilterIPTablesNFT: "iptables-nft-save", NetfilterIPTablesLegacy: "iptables-legacy-save"} {
			s, err := in(save)
			if err != nil {
				return nil, err
			}
			if strings.Contains(s, ChainPrefix) {
				out[nf] = strings.Contains(s, "-A "+MasqueradeChain) && strings.Contains(s, "MASQUERADE") &&
					strings.Contains(s, "-j "+ServiceLoopChain)
			}
		}
		return out, nil
	}
	cfg := func(nf Netfilter) Config {
		return Config{NodeName: "node1", NetNS: ns.Path(), Listen: "-", StateDir: dir, Overlay: OverlayDirect,
			Netfilter: nf, WireGuardInterface: fmt.Sprintf("wgt%d", os.Getpid()%100000)}
	}
	for _, nf := range []Netfilter{NetfilterNFTables, NetfilterIPTablesNFT, NetfilterIPTablesLegacy, NetfilterNFTables} {
		t.Run(string(nf), func(t *testing.T) {
			cf := cfg(nf)
			cf.Datastore = &datastore.File{Path: file}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cf) }()
			deadline := time.Now().Add(30 * time.Second)
			want := map[Netfilter]bool{nf: true}
			for {
				got, err := where()
				if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
					break
				}
				select {
				case err := <-done:
					cancel()
					t.Fatalf("the agent stopped: %v", err)
				default:
				}
				if time.Now().After(deadline) {
					cancel()
					<-done
					t.Fatalf("on %s: the masquerade rule is on %v (%v), want %v", nf, got, err, want)
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			// A stopped agent leaves its dataplane as it is.
			if got, err := where(); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("after the agent stopped: %v (%v), want %v", got, err, want)
			}
		})
	}
	if err := Cleanup(context.Background(), cfg("")); err != nil {
		t.Fatal(err)
	}
	if got, err := where(); err != nil || len(got) != 0 {
		t.Errorf("after the cleanup: %v (%v)", got, err)
	}
	if s, err := in("ipset", "list", "-n"); err != nil || strings.Contains(s, SetPrefixV4) {
		t.Errorf("ip sets after the cleanup: %s (%v)", s, err)
	}
}
