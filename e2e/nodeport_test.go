package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// nodePort is the NodePort service's node port (in the API server's
// default range, 30000-32767).
const nodePort = 30080

// nodePortTargets are every node's addresses, IPv4 and IPv6, at the node
// port.
func (e *env) nodePortTargets() []netip.AddrPort {
	var out []netip.AddrPort
	for _, n := range e.nodes {
		out = append(out, netip.AddrPortFrom(n.underlay, nodePort), netip.AddrPortFrom(n.underlay6, nodePort))
	}
	return out
}

// stepNodePort: a dual-stack NodePort service with backends on both nodes,
// reached from a host of the underlay that is no node (the external
// client's namespace) at each node's IPv4 and IPv6 address. Every backend
// answers through every node: a node sends the connections it gives the
// other node's backend there masqueraded, so their replies come back
// through it (the client would not take them from another address).
func (e *env) stepNodePort(t *testing.T) {
	e.waitPods(t)
	e.createServiceWith(t, "echo-np", svcOpts{dualStack: true, nodePort: nodePort}, "pod-1a", "pod-2a")
	created := time.Now()
	targets := e.nodePortTargets()
	took, err := firstAnswers(e.ext, targets, created, 30*time.Second, "pod-1a", "pod-2a")
	if err != nil {
		t.Fatal(err)
	}
	for i, to := range targets {
		e.timing(fmt.Sprintf("NodePort service created → first answer at %s %v", e.nodes[i/2].name, to), took[to])
	}
	for i, to := range targets {
		st := time.Now()
		got, err := everyBackend(e.ext, to, 20, 15*time.Second, "pod-1a", "pod-2a")
		if err != nil {
			t.Fatalf("external client → %s %v: %v", e.nodes[i/2].name, to, err)
		}
		t.Logf("external client → %s %v: 20 connections answered by %v (in %v)", e.nodes[i/2].name, to, got,
			time.Since(st).Round(time.Millisecond))
	}
}
