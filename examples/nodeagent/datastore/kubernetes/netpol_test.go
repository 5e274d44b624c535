package kubernetes_test

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

func TestWatchConvertsNetworkPolicies(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	http, from, end := intstr.FromString("http"), intstr.FromInt32(5000), int32(5010)
	pod := k8sPod("x", "web", "node2", "10.244.2.10")
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.Containers = []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080, Protocol: tcp}, {ContainerPort: 9090}}}}
	good := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"blue"}}}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &http}, {Protocol: &udp, Port: &from, EndPort: &end}},
			}},
		}}
	// A CIDR with host bits set, or IPv4 octets with leading zeros (the
	// API server stored them before its validation became strict): the
	// network Kubernetes reads.
	sloppy := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "sloppy"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.2.77/24", Except: []string{"010.244.002.128/25"}}}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	// A policy whose address block does not parse at all isolates the
	// pods it selects, in the directions it names, and allows nothing:
	// ignored, it left them open.
	bad := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "bad"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/x"}}}}}}}
	client := fake.NewClientset(
		k8sNode("node1", "198.18.0.1", "10.244.1.0/24", nil),
		k8sNode("node2", "198.18.0.2", "10.244.2.0/24", nil),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"team": "red"}}},
		pod, good, sloppy, bad)
	d, err := kubernetes.New(kubernetes.Options{Client: client, NodeName: "node1", Debounce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := watch(t, d)()
	if len(c.Namespaces) != 1 || c.Namespaces[0].Labels["team"] != "red" || c.Namespaces[0].Labels[datastore.NamespaceNameLabel] != "x" {
		t.Errorf("namespaces = %+v", c.Namespaces)
	}
	if len(c.Pods) != 1 || c.Pods[0].Labels["app"] != "web" || len(c.Pods[0].Ports) != 2 ||
		c.Pods[0].Ports[0] != (datastore.ContainerPort{Name: "http", Protocol: "TCP", Port: 8080}) {
		t.Errorf("pods = %+v", c.Pods)
	}
	if len(c.NetworkPolicies) != 3 {
		t.Fatalf("policies = %+v, want three", c.NetworkPolicies)
	}
	byName := map[string]datastore.NetworkPolicy{}
	for _, p := range c.NetworkPolicies {
		byName[p.Name] = p
	}
	if b := byName["sloppy"].Egress[0].Peers[0].IPBlock; b == nil || b.CIDR != netip.MustParsePrefix("10.244.2.0/24") ||
		len(b.Except) != 1 || b.Except[0] != netip.MustParsePrefix("10.244.2.128/25") {
		t.Errorf("the sloppy policy's block = %+v", byName["sloppy"].Egress[0].Peers[0].IPBlock)
	}
	if closed := byName["bad"]; len(closed.Ingress)+len(closed.Egress) != 0 || !reflect.DeepEqual(closed.PolicyTypes, []string{"Ingress"}) ||
		closed.PodSelector.MatchLabels["app"] != "web" {
		t.Errorf("the bad policy = %+v, want its pods isolated for ingress, nothing allowed", closed)
	}
	p := byName["allow"]
	if in, out := p.Types(); p.Key() != "x/allow" || !in || !out {
		t.Errorf("policy %s types = %v, %v", p.Key(), in, out)
	}
	r := p.Ingress[0]
	if len(r.Peers) != 2 || r.Peers[0].NamespaceSelector == nil || r.Peers[0].PodSelector != nil ||
		!reflect.DeepEqual(r.Peers[0].NamespaceSelector.MatchExpressions, []datastore.LabelRequirement{{Key: "team", Operator: "In", Values: []string{"blue"}}}) {
		t.Errorf("peer 0 = %+v", r.Peers[0])
	}
	if b := r.Peers[1].IPBlock; b == nil || b.CIDR != netip.MustParsePrefix("192.0.2.0/24") || b.Except[0] != netip.MustParsePrefix("192.0.2.128/25") {
		t.Errorf("peer 1 = %+v", r.Peers[1])
	}
	if len(r.Ports) != 2 || r.Ports[0].Port != "http" || r.Ports[1] != (datastore.NetworkPolicyPort{Protocol: "UDP", Port: "5000", EndPort: 5010}) {
		t.Errorf("ports = %+v", r.Ports)
	}
}
