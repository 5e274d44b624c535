package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	k8sds "github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// stepReady: both agents ready, their VTEP MACs on their Nodes; an agent
// may not annotate another node (admission-policy.yaml).
func (e *env) stepReady(t *testing.T, start time.Time) {
	for _, n := range e.nodes {
		if err := waitFor(90*time.Second, func() error {
			if n.agent.exited() {
				return fmt.Errorf("agent %s exited (see %s)", n.name, n.agent.log)
			}
			return agentReady(n)
		}); err != nil {
			t.Fatal(err)
		}
		e.timing(n.name+" agent start → /readyz 200", time.Since(start))
		var mac string
		if err := waitFor(30*time.Second, func() (err error) { mac, err = e.annotation(n.name); return err }); err != nil {
			t.Fatal(err)
		}
		e.timing(n.name+" agent start → Node annotated", time.Since(start))
		t.Logf("%s: %s=%s", n.name, k8sds.AnnotationVTEPMAC, mac)
	}
	// node1's agent may not change node2, nor another annotation of its own Node.
	ctx := context.Background()
	patch := []byte(`{"metadata":{"annotations":{"nodeplane.io/vxlan-mac":"02:00:00:00:00:99"}}}`)
	dry := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := e.nodes[0].client.CoreV1().Nodes().Patch(ctx, "node2", types.MergePatchType, patch, dry)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("node1's agent patching node2: want Forbidden, got %v", err)
	} else {
		t.Logf("node1's agent patching node2: refused: %v", err)
	}
	_, err = e.nodes[0].client.CoreV1().Nodes().Patch(ctx, "node1", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"example.com/other":"x"}}}`), dry)
	if err == nil {
		t.Errorf("node1's agent set a foreign annotation on node1")
	}
}

// waitPods waits until the stand-ins gave every pod its IP and the backends listen.
func (e *env) waitPods(t *testing.T) {
	if err := waitFor(60*time.Second, func() error {
		for _, ps := range podSpecs {
			if e.pod(ps.name) == nil {
				return fmt.Errorf("pod %s has no network yet", ps.name)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Every pod answers TCP connections to backendPort with its name.
	for _, ps := range podSpecs {
		if e.serving[ps.name] {
			continue
		}
		ln, err := serveName(e.pod(ps.name).ns, backendPort, ps.name)
		if err != nil {
			t.Fatal(err)
		}
		e.serving[ps.name] = true
		e.t.Cleanup(func() { ln.Close() })
	}
}

func (e *env) stepPodToPod(t *testing.T) {
	e.waitPods(t)
	var last time.Duration
	for _, ps := range podSpecs {
		last = max(last, e.pod(ps.name).reported.Sub(e.podsAt))
	}
	e.timing("pods created → all 4 have IPs in their status (CNI ADD + status)", last)
	for _, ps := range podSpecs {
		pn := e.pod(ps.name)
		t.Logf("%s on %s: %v (netns %s, host veth %s, set up in %v)", ps.name, ps.node, pn.ip, pn.ns,
			datastore.PodInterface(podNamespace, ps.name), pn.took.Round(time.Millisecond))
	}
	for _, pair := range [][2]string{{"pod-1a", "pod-2a"}, {"pod-2b", "pod-1b"}} {
		from, to := e.pod(pair[0]), e.pod(pair[1])
		st := time.Now()
		if err := waitFor(30*time.Second, func() error { return ping(from.ns, to.ip) }); err != nil {
			t.Fatal(err)
		}
		e.timing(fmt.Sprintf("first ping %s → %s across nodes", pair[0], pair[1]), time.Since(st))
		got, err := whoami(from.ns, netip.AddrPortFrom(to.ip, backendPort), 2*time.Second)
		if err != nil || got != pair[1] {
			t.Fatalf("TCP %s → %s: %q, %v", pair[0], pair[1], got, err)
		}
	}
}

func (e *env) stepService(t *testing.T) {
	e.waitPods(t)
	ip := e.createService(t, "echo", "pod-1a", "pod-2a")
	to := netip.AddrPortFrom(ip, 80)
	client := e.pod("pod-1b")
	st := time.Now()
	if err := waitFor(30*time.Second, func() error { _, err := whoami(client.ns, to, time.Second); return err }); err != nil {
		t.Fatal(err)
	}
	e.timing("service created → first connection to its cluster IP", time.Since(st))
	var got map[string]int
	if err := waitFor(10*time.Second, func() (err error) {
		got, err = spread(client.ns, to, 20)
		if err == nil && (got["pod-1a"] == 0 || got["pod-2a"] == 0) {
			err = fmt.Errorf("answers %v: not both nodes' backends", got)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod-1b → %v: 20 connections answered by %v (backends on node1 and node2)", to, got)
}

func (e *env) stepPolicy(t *testing.T) {
	e.waitPods(t)
	ctx := context.Background()
	iso, client, other := e.pod("pod-2b"), e.pod("pod-1a"), e.pod("pod-1b")
	to := netip.AddrPortFrom(iso.ip, backendPort)
	if _, err := whoami(other.ns, to, 2*time.Second); err != nil {
		t.Fatalf("before the policy pod-1b → pod-2b: %v", err)
	}
	proto := corev1.ProtocolTCP
	port := intstr.FromString("http")
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "iso"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "iso"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &proto, Port: &port}}}}}}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(podNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := time.Now()
	if err := waitFor(30*time.Second, func() error {
		if _, err := whoami(other.ns, to, 500*time.Millisecond); err == nil {
			return errors.New("pod-1b still reaches pod-2b")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.timing("NetworkPolicy created → pod-1b denied", time.Since(st))
	if got, err := whoami(client.ns, to, 2*time.Second); err != nil || got != "pod-2b" {
		t.Errorf("the client pod-1a → pod-2b: %q, %v", got, err)
	}
	if got, err := whoami(other.ns, netip.AddrPortFrom(e.pod("pod-2a").ip, backendPort), 2*time.Second); err != nil || got != "pod-2a" {
		t.Errorf("pod-1b → pod-2a (no policy selects it): %q, %v", got, err)
	}
	for range 3 {
		if _, err := whoami(other.ns, to, 500*time.Millisecond); err == nil {
			t.Errorf("pod-1b reached the isolated pod-2b")
		}
	}

	// Egress isolation too, allowing nothing: pod-2b reaches no pod, but
	// still its own node (Kubernetes exempts the traffic between a pod and
	// its node: the kubelet's probes, a node-local DNS cache).
	node := e.nodeOf(t, "pod-2b")
	ln, err := serveName(node.ns, nodeServerPort, node.name)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "iso-egress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "iso"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	if _, err := e.cs.NetworkingV1().NetworkPolicies(podNamespace).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	toOther := netip.AddrPortFrom(e.pod("pod-2a").ip, backendPort)
	if err := waitFor(30*time.Second, func() error {
		if _, err := whoami(iso.ns, toOther, 500*time.Millisecond); err == nil {
			return errors.New("pod-2b still reaches pod-2a")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := whoami(iso.ns, netip.AddrPortFrom(node.underlay, nodeServerPort), 2*time.Second); err != nil || got != node.name {
		t.Errorf("egress-isolated pod-2b → its node %s: %q, %v", node.name, got, err)
	}
}

// nodeServerPort is where a node's namespace answers with its name in
// stepPolicy.
const nodeServerPort = 9911

// nodeOf returns the node whose kubelet runs the pod.
func (e *env) nodeOf(t *testing.T, pod string) *node {
	t.Helper()
	for _, n := range e.nodes {
		if n.kubelet.get(podNamespace+"/"+pod) != nil {
			return n
		}
	}
	t.Fatalf("pod %s runs on no node", pod)
	return nil
}

// dataplaneWorks pings across nodes over IPv4 and IPv6, connects through
// the services made so far and, from the external client, to the NodePort
// at every node address.
func (e *env) dataplaneWorks() error {
	from, to := e.pod("pod-1a"), e.pod("pod-2a")
	for _, ip := range []netip.Addr{to.ip, to.ip6} {
		if ip.IsValid() {
			if err := ping(from.ns, ip); err != nil {
				return err
			}
		}
	}
	if err := e.servicesWork(); err != nil {
		return err
	}
	if _, ok := e.services["echo-np"]; ok {
		for _, to := range e.nodePortTargets() {
			if _, err := whoami(e.ext, to, 2*time.Second); err != nil {
				return fmt.Errorf("NodePort from the external client: %w", err)
			}
		}
	}
	return nil
}

// servicesWork connects from pod-1b to the services made so far: the IPv4
// one, the dual-stack one over IPv6.
func (e *env) servicesWork() error {
	for _, s := range []struct {
		name string
		v    int
	}{{"echo", 4}, {"echo-ds", 6}} {
		if ip, ok := e.clusterIP(s.name, s.v); ok {
			if _, err := whoami(e.pod("pod-1b").ns, netip.AddrPortFrom(ip, 80), 2*time.Second); err != nil {
				return fmt.Errorf("service %s: %w", s.name, err)
			}
		}
	}
	return nil
}
