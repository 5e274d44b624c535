package kubernetes_test

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// keptAnnotations are the annotations the datastore reads: those the agents
// publish on their Nodes and those that turn topology aware routing on for a
// Service.
var keptAnnotations = []string{kubernetes.AnnotationVTEPMAC, kubernetes.AnnotationVTEPMACV6, kubernetes.AnnotationWireGuardKey,
	kubernetes.AnnotationWireGuardKeyV6, corev1.AnnotationTopologyMode, corev1.DeprecatedAnnotationTopologyAwareHints}

// edgeObjects are objects with the fields the conversion reads in their
// less usual forms.
func edgeObjects() []k8sruntime.Object {
	pending, udp := corev1.PodPending, corev1.ProtocolUDP
	return []k8sruntime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dual", Annotations: map[string]string{
			kubernetes.AnnotationVTEPMACV6: "02:4e:00:00:00:66", "other": "x"}},
			Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.9.0/24", "fd00:9::/64"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
				{Type: corev1.NodeInternalIP, Address: "198.18.9.1"}, {Type: corev1.NodeInternalIP, Address: "fd00::9"},
				{Type: corev1.NodeHostName, Address: "dual"}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Spec: corev1.NodeSpec{PodCIDR: "10.244.8.0/24"},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.18.8.1"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "multi", Labels: map[string]string{"app": "multi"},
			Annotations: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{NodeName: "dual",
				InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{Name: "init", ContainerPort: 1}}}},
				Containers: []corev1.Container{
					{Name: "one", Image: "one", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: udp}}},
					{Name: "two", Image: "two"},
					{Name: "three", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, HostPort: 9090}}}}},
			Status: corev1.PodStatus{Phase: pending, PodIP: "10.244.9.7"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dual-stack"}, Spec: corev1.PodSpec{NodeName: "dual"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.9.20", PodIPs: []corev1.PodIP{{IP: "10.244.9.20"}, {IP: "fd00:9::20"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "done"}, Spec: corev1.PodSpec{NodeName: "dual"},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIPs: []corev1.PodIP{{IP: "10.244.9.8"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "unscheduled"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb", Annotations: map[string]string{"a": "b"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.9.1", ExternalIPs: []string{"192.0.2.1"},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster, Selector: map[string]string{"app": "multi"},
				Ports: []corev1.ServicePort{{Name: "dns", Protocol: udp, Port: 53, NodePort: 30053}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
				{Hostname: "lb.example.org"}, {IP: "192.0.2.9", Hostname: "also"},
				{IP: "192.0.2.11", IPMode: ptr(corev1.LoadBalancerIPModeProxy)}}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lb-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "lb", "other": "x"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("dns"), Port: ptr(int32(5353))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.9.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true)},
					Hostname: ptr("multi"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "multi"}},
				{Addresses: []string{"10.244.9.10", "10.244.9.11"}, NodeName: ptr("dual")}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local",
			Annotations: map[string]string{corev1.AnnotationTopologyMode: "Auto", "a": "b"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.9.2",
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 32100,
				InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyLocal), SessionAffinity: corev1.ServiceAffinityClientIP,
				SessionAffinityConfig:    &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(60))}},
				LoadBalancerSourceRanges: []string{"192.0.2.0/24"}, LoadBalancerClass: ptr("example.com/lb"),
				Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "local"}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.9.20"}, NodeName: ptr("dual"), Zone: ptr("zone-a"),
					Conditions: discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)},
					Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}, ForNodes: []discoveryv1.ForNode{{Name: "dual"}}}},
				{Addresses: []string{"10.244.9.21"}, Hints: &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "dual"}}}}}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orphan"},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.9.12"}}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"team": "x"},
			Annotations: map[string]string{"a": "b"}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "block", Annotations: map[string]string{"a": "b"}},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8"}}}}}}}},
	}
}

// convert converts the objects as Watch does.
func convert(t *testing.T, d *kubernetes.Datastore, objs []k8sruntime.Object) datastore.Cluster {
	t.Helper()
	var (
		nodes      []*corev1.Node
		pods       []*corev1.Pod
		services   []*corev1.Service
		slices     []*discoveryv1.EndpointSlice
		namespaces []*corev1.Namespace
		policies   []*networkingv1.NetworkPolicy
	)
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, o)
		case *corev1.Pod:
			pods = append(pods, o)
		case *corev1.Service:
			services = append(services, o)
		case *discoveryv1.EndpointSlice:
			slices = append(slices, o)
		case *corev1.Namespace:
			namespaces = append(namespaces, o)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, o)
		default:
			t.Fatalf("no conversion of %T", o)
		}
	}
	return d.Convert(nodes, pods, services, slices, namespaces, policies)
}

// TestSlimKeepsWhatTheDatastoreReads: the cluster converted from the
// informers' slim objects is the one converted from the whole objects; the
// transform leaves its argument as it was and is idempotent.
func TestSlimKeepsWhatTheDatastoreReads(t *testing.T) {
	objs := append(benchCluster(4, 3, 120), objects(t)...)
	objs = append(objs, edgeObjects()...)
	admin := anp("guard", 10, policyv1alpha1.AdminNetworkPolicySpec{Subject: nsSubject("team", "blue"), Ingress: denyFrom("team", "red")})
	admin.Annotations = map[string]string{"a": "b"}
	baseline := banp("default", policyv1alpha1.BaselineAdminNetworkPolicySpec{Subject: nsSubject()})
	baseline.Status.Conditions = []metav1.Condition{{Type: "Ready"}}

	var thin []k8sruntime.Object
	for _, o := range append(objs, admin, baseline) {
		before := o.DeepCopyObject()
		s, err := kubernetes.Slim(o)
		if err != nil {
			t.Fatalf("Slim(%T): %v", o, err)
		}
		if !reflect.DeepEqual(o, before) {
			t.Errorf("Slim changed the %T it was given", o)
		}
		if again, err := kubernetes.Slim(s); err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("Slim is not idempotent on %T: %v", o, err)
		}
		m, ok := s.(metav1.ObjectMetaAccessor)
		if !ok {
			t.Fatalf("Slim(%T) = %T", o, s)
		}
		meta := m.GetObjectMeta()
		if meta.GetManagedFields() != nil {
			t.Errorf("Slim(%T %s) kept the managed fields", o, meta.GetName())
		}
		for k := range meta.GetAnnotations() {
			if !slices.Contains(keptAnnotations, k) {
				t.Errorf("Slim(%T %s) kept the annotation %s", o, meta.GetName(), k)
			}
		}
		thin = append(thin, s.(k8sruntime.Object))
	}
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	full, slim := convert(t, d, objs), convert(t, d, thin[:len(objs)])
	if len(full.Pods) < 120 || len(full.Services) < 30 || len(full.Nodes) < 8 || len(full.NetworkPolicies) < 6 {
		t.Fatalf("the conversion lost most objects: %d pods, %d services, %d nodes, %d policies",
			len(full.Pods), len(full.Services), len(full.Nodes), len(full.NetworkPolicies))
	}
	for name, pair := range map[string][2]any{
		"nodes": {full.Nodes, slim.Nodes}, "pods": {full.Pods, slim.Pods}, "pools": {full.Pools, slim.Pools},
		"services": {full.Services, slim.Services}, "namespaces": {full.Namespaces, slim.Namespaces},
		"network policies": {full.NetworkPolicies, slim.NetworkPolicies},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s differ:\nwhole %+v\n slim %+v", name, pair[0], pair[1])
		}
	}
	if !reflect.DeepEqual(full, slim) {
		t.Error("the clusters differ")
	}
	// The traffic settings and the endpoints' conditions and hints are
	// among what the slim objects keep.
	i := slices.IndexFunc(slim.Services, func(s datastore.Service) bool { return s.Key() == "default/local" })
	if i < 0 {
		t.Fatal("service default/local left out")
	}
	if s := slim.Services[i]; s.HealthCheckNodePort != 32100 || s.InternalTrafficPolicy != "Local" || s.SessionAffinityTimeoutSeconds != 60 ||
		len(s.LoadBalancerSourceRanges) != 1 || s.TrafficDistribution == "" || len(s.Endpoints) != 2 ||
		!s.Endpoints[0].ServingTerminating() || !slices.Equal(s.Endpoints[0].ForZones, []string{"zone-a"}) {
		t.Errorf("default/local = %+v", s)
	}
	fullAdmin := d.AdminPoliciesOf([]*policyv1alpha1.AdminNetworkPolicy{admin}, []*policyv1alpha1.BaselineAdminNetworkPolicy{baseline})
	slimAdmin := d.AdminPoliciesOf([]*policyv1alpha1.AdminNetworkPolicy{thin[len(objs)].(*policyv1alpha1.AdminNetworkPolicy)},
		[]*policyv1alpha1.BaselineAdminNetworkPolicy{thin[len(objs)+1].(*policyv1alpha1.BaselineAdminNetworkPolicy)})
	if len(fullAdmin.AdminNetworkPolicies) != 1 || !reflect.DeepEqual(fullAdmin, slimAdmin) {
		t.Errorf("admin policies differ:\nwhole %+v\n slim %+v", fullAdmin, slimAdmin)
	}
	// The pods shrink: none of what the conversion does not read is kept.
	for _, o := range thin {
		if p, ok := o.(*corev1.Pod); ok && (p.Spec.Volumes != nil || p.Status.Conditions != nil || p.OwnerReferences != nil ||
			p.Spec.InitContainers != nil || len(p.Spec.Containers) > 0 && p.Spec.Containers[0].Image != "") {
			t.Errorf("pod %s kept what the conversion does not read: %+v", p.Name, p)
		}
	}
}
