package kubernetes_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
	"github.com/nodeplane/nodeplane/wireguard"
)

func k8sNode(name, ip, cidr string, ann map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec:       corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeInternalIP, Address: ip},
		}},
	}
}

func k8sPod(ns, name, node, ip string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func objects(t *testing.T) []runtime.Object {
	key, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	key6, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	ready, notReady := true, false
	node1 := "node1"
	return []runtime.Object{
		k8sNode("node1", "198.18.0.1", "10.244.1.0/24", nil),
		k8sNode("node2", "198.18.0.2", "10.244.2.0/24", map[string]string{
			kubernetes.AnnotationVTEPMAC:        "02:4e:00:00:00:02",
			kubernetes.AnnotationWireGuardKey:   key.Public().String(),
			kubernetes.AnnotationWireGuardKeyV6: key6.Public().String(),
		}),
		k8sPod("default", "web-1", "node1", "10.244.1.10"),
		k8sPod("default", "web-2", "node2", "10.244.2.10"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "host"},
			Spec:   corev1.PodSpec{NodeName: "node1", HostNetwork: true},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "198.18.0.1"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
				ExternalIPs: []string{"192.0.2.7"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080, TargetPort: intstr.FromInt32(8080)},
					{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromString("metrics")}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.8"}}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "headless"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		// Another proxy's (kube-proxy leaves it alone too).
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "others",
			Labels: map[string]string{"service.kubernetes.io/service-proxy-name": "other-proxy"}},
			Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.11", ClusterIPs: []string{"10.96.0.11"},
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}, {Name: ptr("metrics"), Port: ptr(int32(9100))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.1.10"}, NodeName: &node1, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
				{Addresses: []string{"10.244.2.10"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
			}},
	}
}

// watch starts Watch and returns a function that waits for the next update.
func watch(t *testing.T, d *kubernetes.Datastore) func() datastore.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan datastore.Cluster, 10)
	done := make(chan error, 1)
	go func() { done <- d.Watch(ctx, func(c datastore.Cluster) { updates <- c }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	return func() datastore.Cluster {
		t.Helper()
		select {
		case c := <-updates:
			return c
		case err := <-done:
			t.Fatalf("Watch returned early: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("no update within 30 s")
		}
		return datastore.Cluster{}
	}
}

func TestWatchConvertsTheCluster(t *testing.T) {
	client := fake.NewClientset(objects(t)...)
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	next := watch(t, d)
	c := next()
	if len(c.Nodes) != 2 {
		t.Fatalf("nodes: %+v", c.Nodes)
	}
	n1, n2 := c.Nodes[0], c.Nodes[1]
	if n1.UnderlayIPv4 != netip.MustParseAddr("198.18.0.1") || len(n1.PodCIDRs) != 1 || n1.PodCIDRs[0] != netip.MustParsePrefix("10.244.1.0/24") {
		t.Errorf("node1 = %+v", n1)
	}
	if n2.VTEPMAC.String() != "02:4e:00:00:00:02" || n2.WireGuardPublicKey == "" {
		t.Errorf("node2's published MAC and key not read: %+v", n2)
	}
	if n2.WireGuardPublicKeyV6 == "" || n2.WireGuardPublicKeyV6 == n2.WireGuardPublicKey {
		t.Errorf("node2's published IPv6 key not read apart from the IPv4 one: %+v", n2)
	}
	if n1.WireGuardPublicKey != "" || n1.WireGuardPublicKeyV6 != "" {
		t.Errorf("node1 published no keys: %+v", n1)
	}
	// Every node's pods (network policies select peers anywhere), not
	// host-network ones.
	if len(c.Pods) != 2 || c.Pods[0].Key() != "default/web-1" || c.Pods[0].IPs[0] != netip.MustParseAddr("10.244.1.10") ||
		c.Pods[1].Key() != "default/web-2" || c.Pods[1].Node != "node2" {
		t.Errorf("pods = %+v", c.Pods)
	}
	// Pools default to the nodes' CIDRs.
	if len(c.Pools) != 2 || !c.Pools[0].Masquerade {
		t.Errorf("pools = %+v", c.Pools)
	}
	// The headless service is left out; the other has both endpoints.
	if len(c.Services) != 1 {
		t.Fatalf("services = %+v", c.Services)
	}
	s := c.Services[0]
	if s.Type != "NodePort" || s.ClusterIPs[0] != netip.MustParseAddr("10.96.0.10") || s.Ports[0].NodePort != 30080 || s.Ports[0].TargetPort != 8080 {
		t.Errorf("service = %+v", s)
	}
	if len(s.Ports) != 2 || s.Ports[1].TargetPort != 9100 {
		t.Errorf("a named target port takes the EndpointSlice's port: %+v", s.Ports)
	}
	if !slices.Equal(s.ExternalIPs, []netip.Addr{netip.MustParseAddr("192.0.2.7")}) ||
		!slices.Equal(s.LoadBalancerIPs, []netip.Addr{netip.MustParseAddr("192.0.2.8")}) || s.ExternalTrafficPolicy != "Local" {
		t.Errorf("external IPs, load balancer IPs and policy: %v %v %q", s.ExternalIPs, s.LoadBalancerIPs, s.ExternalTrafficPolicy)
	}
	if len(s.Endpoints) != 2 || s.Endpoints[0].Node != "node1" || s.Endpoints[0].NotReady || !s.Endpoints[1].NotReady {
		t.Errorf("endpoints = %+v", s.Endpoints)
	}

	// A change is delivered: a third node joins.
	ctx := context.Background()
	if _, err := client.CoreV1().Nodes().Create(ctx, k8sNode("node3", "198.18.0.3", "10.244.3.0/24", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); len(c.Nodes) != 3; c = next() {
	}
	// A node removed is gone.
	if err := client.CoreV1().Nodes().Delete(ctx, "node2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for c = next(); len(c.Nodes) != 2; c = next() {
	}
	if _, ok := c.Node("node2"); ok {
		t.Errorf("node2 still there: %+v", c.Nodes)
	}
}

// TestPublish: the agent's VTEP MAC and WireGuard keys (one per family)
// land on its Node as annotations, and the watch delivers them back; a
// key published later joins the others without removing them.
func TestPublish(t *testing.T) {
	client := fake.NewClientset(objects(t)...)
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	next := watch(t, d)
	if c := next(); len(c.Nodes[0].VTEPMAC) != 0 {
		t.Fatalf("node1 has a MAC before publishing: %+v", c.Nodes[0])
	}
	key, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	key6, err := wireguard.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	mac := datastore.DefaultVTEPMAC("node1", 4)
	ctx := context.Background()
	if err := d.Publish(ctx, datastore.NodeInfo{Name: "node1", VTEPMAC: mac, WireGuardKey: key.Public()}); err != nil {
		t.Fatal(err)
	}
	n, err := client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations[kubernetes.AnnotationVTEPMAC] != mac.String() || n.Annotations[kubernetes.AnnotationWireGuardKey] != key.Public().String() {
		t.Fatalf("annotations = %v", n.Annotations)
	}
	if _, ok := n.Annotations[kubernetes.AnnotationWireGuardKeyV6]; ok {
		t.Fatalf("an IPv6 key annotation though none was published: %v", n.Annotations)
	}
	c := next()
	for c.Nodes[0].VTEPMAC.String() != mac.String() {
		c = next()
	}
	if c.Nodes[0].WireGuardPublicKey != key.Public().String() {
		t.Errorf("published key not read back: %+v", c.Nodes[0])
	}
	// The IPv6 device's key, alone: the others stay.
	if err := d.Publish(ctx, datastore.NodeInfo{Name: "node1", WireGuardKeyV6: key6.Public()}); err != nil {
		t.Fatal(err)
	}
	if n, err = client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n.Annotations[kubernetes.AnnotationWireGuardKeyV6] != key6.Public().String() ||
		n.Annotations[kubernetes.AnnotationWireGuardKey] != key.Public().String() || n.Annotations[kubernetes.AnnotationVTEPMAC] != mac.String() {
		t.Fatalf("annotations after the IPv6 key = %v", n.Annotations)
	}
	for c = next(); c.Nodes[0].WireGuardPublicKeyV6 == ""; c = next() {
	}
	if c.Nodes[0].WireGuardPublicKeyV6 != key6.Public().String() || c.Nodes[0].WireGuardPublicKey != key.Public().String() {
		t.Errorf("published IPv6 key not read back: %+v", c.Nodes[0])
	}
	// Publishing nothing changes nothing; an unknown node is an error.
	if err := d.Publish(ctx, datastore.NodeInfo{Name: "node1"}); err != nil {
		t.Errorf("empty publish: %v", err)
	}
	if err := d.Publish(ctx, datastore.NodeInfo{Name: "nope", VTEPMAC: mac}); err == nil {
		t.Error("publish on a missing node succeeded")
	}
}

func ptr[T any](v T) *T { return &v }
