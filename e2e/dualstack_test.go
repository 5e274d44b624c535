package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	k8sds "github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// family names an address's IP family as Kubernetes does.
func family(a netip.Addr) corev1.IPFamily {
	if a.Is4() {
		return corev1.IPv4Protocol
	}
	return corev1.IPv6Protocol
}

// svcOpts say what createServiceWith makes beyond a single-stack ClusterIP
// service on port 80.
type svcOpts struct {
	// dualStack asks for ipFamilyPolicy RequireDualStack: a cluster IP of
	// each family, IPv4 first.
	dualStack bool
	// nodePort, when not zero, makes a NodePort service with this node
	// port.
	nodePort int32
}

// createService makes a single-stack (IPv4) ClusterIP service with the
// given backends and returns its cluster IP.
func (e *env) createService(t *testing.T, name string, backends ...string) netip.Addr {
	return e.createServiceWith(t, name, svcOpts{}, backends...)[0]
}

// createServiceWith makes service name (selector app=echo, port 80 to the
// pods' port "http") and, standing in for the EndpointSlice controller, one
// EndpointSlice per IP family of the service, with the given backends'
// addresses of that family, as Kubernetes writes them. It returns the
// service's cluster IPs, in the order of its ipFamilies.
func (e *env) createServiceWith(t *testing.T, name string, o svcOpts, backends ...string) []netip.Addr {
	t.Helper()
	ctx := context.Background()
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": "echo"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}}
	if o.dualStack {
		policy := corev1.IPFamilyPolicyRequireDualStack
		spec.IPFamilyPolicy = &policy
		spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	if o.nodePort != 0 {
		spec.Type = corev1.ServiceTypeNodePort
		spec.Ports[0].NodePort = o.nodePort
	}
	svc, err := e.cs.CoreV1().Services(podNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ips []netip.Addr
	for _, s := range svc.Spec.ClusterIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			t.Fatalf("service %s: cluster IP %q: %v", name, s, err)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 0 || (o.dualStack && (len(ips) != 2 || !ips[0].Is4() || !ips[1].Is6())) {
		t.Fatalf("service %s: cluster IPs %v, families %v", name, svc.Spec.ClusterIPs, svc.Spec.IPFamilies)
	}
	pname, port, proto := "http", int32(backendPort), corev1.ProtocolTCP
	ready := true
	for _, ip := range ips {
		fam := family(ip)
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-e2e-" + strings.ToLower(string(fam)),
			Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressType(fam),
			Ports: []discoveryv1.EndpointPort{{Name: &pname, Port: &port, Protocol: &proto}}}
		for _, b := range backends {
			pn := e.pod(b)
			addr := pn.ip
			if fam == corev1.IPv6Protocol {
				addr = pn.ip6
			}
			if !addr.IsValid() {
				t.Fatalf("service %s: backend %s has no %s address", name, b, fam)
			}
			nodeName := ""
			for _, ps := range podSpecs {
				if ps.name == b {
					nodeName = ps.node
				}
			}
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr.String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}, NodeName: &nodeName,
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: podNamespace, Name: b}})
		}
		if _, err := e.cs.DiscoveryV1().EndpointSlices(podNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.services[name] = ips
	return ips
}

// clusterIP returns the cluster IP of IP version v (4 or 6) of a service
// the test made.
func (e *env) clusterIP(name string, v int) (netip.Addr, bool) {
	for _, ip := range e.services[name] {
		if (v == 4) == ip.Is4() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// spread connects from ns to to n times and returns the answers by backend.
func spread(ns string, to netip.AddrPort, n int) (map[string]int, error) {
	got := map[string]int{}
	for range n {
		name, err := whoami(ns, to, 2*time.Second)
		if err != nil {
			return got, err
		}
		got[name]++
	}
	return got, nil
}

// firstAnswers connects from ns to every target, each on its own, until it
// answered once (with one of want, when want is not empty), within
// timeout; it returns how long each took from start. Attempts are short
// and frequent (a connection to a frontend not translated yet may hang
// rather than fail), so the times are within about 0.25 s.
func firstAnswers(ns string, targets []netip.AddrPort, start time.Time, timeout time.Duration, want ...string) (map[netip.AddrPort]time.Duration, error) {
	took := make([]time.Duration, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, to := range targets {
		wg.Go(func() {
			errs[i] = waitEvery(timeout, 50*time.Millisecond, func() error {
				got, err := whoami(ns, to, 200*time.Millisecond)
				switch {
				case err != nil:
					return err
				case len(want) > 0 && !slices.Contains(want, got):
					return fmt.Errorf("%v answered %q, not one of %v", to, got, want)
				}
				took[i] = time.Since(start)
				return nil
			})
		})
	}
	wg.Wait()
	out := map[netip.AddrPort]time.Duration{}
	for i, to := range targets {
		out[to] = took[i]
	}
	return out, errors.Join(errs...)
}

// everyBackend connects from ns to to until n connections in a row reach
// every one of backends (within timeout) and returns their answers.
func everyBackend(ns string, to netip.AddrPort, n int, timeout time.Duration, backends ...string) (map[string]int, error) {
	var got map[string]int
	err := waitFor(timeout, func() (err error) {
		got, err = spread(ns, to, n)
		if err != nil {
			return err
		}
		for _, b := range backends {
			if got[b] == 0 {
				return fmt.Errorf("%v: answers %v: none from %s", to, got, b)
			}
		}
		if len(got) != len(backends) {
			return fmt.Errorf("%v: answers %v: not only from %v", to, got, backends)
		}
		return nil
	})
	return got, err
}

// stepPodToPod6: the pods have IPv6 addresses too, the agents published
// their IPv6 VTEP MACs, and pods reach each other across nodes over IPv6
// (the IPv6 VXLAN overlay). A node reaches a new pod over IPv6 only once
// duplicate address detection of its side of the pod's veth is done (its
// link-local address is tentative for 1–2 s after the CNI ADD, and no
// neighbour solicitation leaves before): the first ping waits for that.
func (e *env) stepPodToPod6(t *testing.T) {
	e.waitPods(t)
	for _, n := range e.nodes {
		var mac string
		if err := waitFor(30*time.Second, func() error {
			obj, err := e.cs.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if mac = obj.Annotations[k8sds.AnnotationVTEPMACV6]; mac == "" {
				return fmt.Errorf("node %s has no %s", n.name, k8sds.AnnotationVTEPMACV6)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s=%s", n.name, k8sds.AnnotationVTEPMACV6, mac)
	}
	for _, ps := range podSpecs {
		pn := e.pod(ps.name)
		if !pn.ip6.IsValid() {
			t.Fatalf("%s has no IPv6 address (the CNI plugin gave only %v)", ps.name, pn.ip)
		}
		t.Logf("%s on %s: %v and %v", ps.name, ps.node, pn.ip, pn.ip6)
	}
	for _, pair := range [][2]string{{"pod-1a", "pod-2a"}, {"pod-2b", "pod-1b"}} {
		from, to := e.pod(pair[0]), e.pod(pair[1])
		st := time.Now()
		if err := waitFor(30*time.Second, func() error { return ping(from.ns, to.ip6) }); err != nil {
			t.Fatal(err)
		}
		e.timing(fmt.Sprintf("first ping %s → %s across nodes (IPv6)", pair[0], pair[1]), time.Since(st))
		t.Logf("%s → %s over IPv6: first answer %v after %s's CNI ADD", pair[0], pair[1],
			time.Since(to.reported).Round(time.Millisecond), pair[1])
		got, err := whoami(from.ns, netip.AddrPortFrom(to.ip6, backendPort), 2*time.Second)
		if err != nil || got != pair[1] {
			t.Fatalf("TCP over IPv6 %s → %s: %q, %v", pair[0], pair[1], got, err)
		}
	}
	// Where node1 sends pod-2a's IPv6 address: the IPv6 overlay.
	n1, to := e.node("node1"), e.pod("pod-2a").ip6
	if out, err := exec.Command("ip", "-n", n1.ns, "-6", "route", "get", to.String()).CombinedOutput(); err == nil {
		t.Logf("node1: ip -6 route get %v: %s", to, strings.TrimSpace(string(out)))
	}
}

// stepDualStackService: a RequireDualStack ClusterIP service (an IPv4 and
// an IPv6 cluster IP, one EndpointSlice per family) with backends on both
// nodes, reached from a pod over IPv4 and over IPv6 through the BPF proxy.
func (e *env) stepDualStackService(t *testing.T) {
	e.waitPods(t)
	ips := e.createServiceWith(t, "echo-ds", svcOpts{dualStack: true}, "pod-1a", "pod-2a")
	created := time.Now()
	client := e.pod("pod-1b")
	var targets []netip.AddrPort
	for _, ip := range ips {
		targets = append(targets, netip.AddrPortFrom(ip, 80))
	}
	took, err := firstAnswers(client.ns, targets, created, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range targets {
		e.timing(fmt.Sprintf("dual-stack service created → first connection to its %s cluster IP", family(to.Addr())), took[to])
	}
	for _, to := range targets {
		got, err := everyBackend(client.ns, to, 20, 10*time.Second, "pod-1a", "pod-2a")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("pod-1b → %v (%s): 20 connections answered by %v (backends on node1 and node2)", to, family(to.Addr()), got)
	}
}
