package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sds "github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// wgRX returns the bytes n's WireGuard device received (sysfs shows the
// host's namespace, so ip -s -j reads them).
func wgRX(n *node, dev string) (int64, error) {
	out, err := exec.Command("ip", "-n", n.ns, "-s", "-j", "link", "show", "dev", dev).Output()
	if err != nil {
		return 0, fmt.Errorf("ip -n %s link show dev %s: %w", n.ns, dev, err)
	}
	var links []struct {
		Stats struct {
			RX struct {
				Bytes int64 `json:"bytes"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("ip -s -j link show dev %s: %s: %v", dev, out, err)
	}
	return links[0].Stats.RX.Bytes, nil
}

// stepWireGuard restarts both agents with --wireguard: they adopt the
// dataplane they left, publish the public keys of their WireGuard devices
// (one per family) on their Nodes, and pod traffic across nodes, IPv4 and
// IPv6, goes through the WireGuard device of its family.
func (e *env) stepWireGuard(t *testing.T) {
	e.waitPods(t)
	start := time.Now()
	for i, n := range e.nodes {
		e.startAgent(n, "--wireguard", "--wireguard-interface", fmt.Sprintf("wgnp%d", i+1))
	}
	for _, n := range e.nodes {
		if err := waitFor(60*time.Second, func() error {
			if n.agent.exited() {
				return fmt.Errorf("agent %s exited (see %s)", n.name, n.agent.log)
			}
			return agentReady(n)
		}); err != nil {
			t.Fatal(err)
		}
		if err := waitFor(30*time.Second, func() error {
			obj, err := e.cs.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, a := range []string{k8sds.AnnotationWireGuardKey, k8sds.AnnotationWireGuardKeyV6} {
				if obj.Annotations[a] == "" {
					return fmt.Errorf("node %s has no %s yet", n.name, a)
				}
			}
			if obj.Annotations[k8sds.AnnotationWireGuardKey] == obj.Annotations[k8sds.AnnotationWireGuardKeyV6] {
				return fmt.Errorf("node %s has the same key for both families", n.name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.timing("agents restarted with --wireguard → ready, keys on the Nodes", time.Since(start))
	n2 := e.node("node2")
	// Each family's pings go through node2's WireGuard device of that
	// family: what it received grows.
	through := func(fam, dev string, to netip.Addr) error {
		var before int64
		if err := waitFor(30*time.Second, func() (err error) { before, err = wgRX(n2, dev); return err }); err != nil {
			return err
		}
		st := time.Now()
		var after int64
		if err := waitFor(30*time.Second, func() (err error) {
			if err := ping(e.pod("pod-1a").ns, to); err != nil {
				return err
			}
			if after, err = wgRX(n2, dev); err != nil {
				return err
			}
			if after <= before {
				return fmt.Errorf("the %s ping did not come through node2's WireGuard device %s (rx %d → %d)", fam, dev, before, after)
			}
			return nil
		}); err != nil {
			return err
		}
		what := "WireGuard on → ping across nodes through the WireGuard device"
		if fam == "IPv6" {
			what += " (IPv6)"
		}
		e.timing(what, time.Since(st))
		t.Logf("%s ping pod-1a → pod-2a %s with --wireguard: answered; node2's %s received %d bytes meanwhile", fam, to, dev, after-before)
		return nil
	}
	if err := through("IPv4", "wgnp2", e.pod("pod-2a").ip); err != nil {
		t.Fatal(err)
	}
	if ip6 := e.pod("pod-2a").ip6; ip6.IsValid() {
		if err := through("IPv6", "wgnp2-v6", ip6); err != nil {
			t.Fatalf("IPv6 with --wireguard: %v", err)
		}
	}
	// The services, both families, from a pod.
	if err := e.servicesWork(); err != nil {
		t.Errorf("after the restart with --wireguard: %v", err)
	}
	// The NodePort, both families: every backend through every node. A
	// node masquerades what it sends to the other node's backend; that
	// leaves through its WireGuard device of the family, whose address
	// (the node's tunnel address) the other node's WireGuard accepts from
	// it.
	for _, n := range e.nodes {
		if _, ok := e.services["echo-np"]; !ok {
			break
		}
		for _, to := range []netip.AddrPort{netip.AddrPortFrom(n.underlay, nodePort), netip.AddrPortFrom(n.underlay6, nodePort)} {
			got, err := everyBackend(e.ext, to, 20, 15*time.Second, "pod-1a", "pod-2a")
			if err != nil {
				t.Errorf("after the restart with --wireguard: external client → %s %v: %v", n.name, to, err)
				continue
			}
			t.Logf("with --wireguard: external client → %s %v: 20 connections answered by %v", n.name, to, got)
		}
	}
}
