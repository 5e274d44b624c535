package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policyv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
)

// slim is the informers' transform (cache.TransformFunc): their caches
// keep only what the Datastore reads of each object — no managed fields,
// no annotations but the agents' own on Nodes and the topology ones on
// Services, none of a pod's spec but its node,
// host network and container ports, none of its status but its phase and
// addresses (BenchmarkKubernetesDatastore10kPods measures the gain). It
// builds a new
// object (the one given stays as it was), it is idempotent, and what is
// not of a type it knows passes unchanged. TestSlimKeepsWhatTheDatastoreReads
// holds it to what the conversion reads.
func slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return slimPod(o), nil
	case *corev1.Node:
		return slimNode(o), nil
	case *corev1.Service:
		return slimService(o), nil
	case *discoveryv1.EndpointSlice:
		return slimEndpointSlice(o), nil
	case *corev1.Namespace:
		return &corev1.Namespace{TypeMeta: o.TypeMeta, ObjectMeta: slimMeta(o.ObjectMeta)}, nil
	case *networkingv1.NetworkPolicy:
		return &networkingv1.NetworkPolicy{TypeMeta: o.TypeMeta, ObjectMeta: slimMeta(o.ObjectMeta), Spec: o.Spec}, nil
	case *policyv1alpha1.AdminNetworkPolicy:
		return &policyv1alpha1.AdminNetworkPolicy{TypeMeta: o.TypeMeta, ObjectMeta: slimMeta(o.ObjectMeta), Spec: o.Spec}, nil
	case *policyv1alpha1.BaselineAdminNetworkPolicy:
		return &policyv1alpha1.BaselineAdminNetworkPolicy{TypeMeta: o.TypeMeta, ObjectMeta: slimMeta(o.ObjectMeta), Spec: o.Spec}, nil
	}
	return obj, nil
}

// slimMeta keeps an object's identity and its labels.
func slimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, DeletionTimestamp: m.DeletionTimestamp, Labels: m.Labels}
}

func slimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: slimMeta(p.ObjectMeta),
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs}}
	for _, c := range p.Spec.Containers {
		if len(c.Ports) > 0 {
			out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
		}
	}
	return out
}

// nodeAnnotations are the annotations of a Node the Datastore reads.
var nodeAnnotations = []string{AnnotationVTEPMAC, AnnotationVTEPMACV6, AnnotationWireGuardKey, AnnotationWireGuardKeyV6}

func slimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: slimMeta(n.ObjectMeta),
		Spec: corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs}}
	out.Annotations = keepAnnotations(n.Annotations, nodeAnnotations)
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
	return out
}

// serviceAnnotations are the annotations of a Service the Datastore reads:
// those that turn topology aware routing on.
var serviceAnnotations = []string{corev1.AnnotationTopologyMode, corev1.DeprecatedAnnotationTopologyAwareHints}

func slimService(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: slimMeta(s.ObjectMeta),
		Spec: corev1.ServiceSpec{Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ClusterIPs: s.Spec.ClusterIPs,
			ExternalIPs: s.Spec.ExternalIPs, ExternalTrafficPolicy: s.Spec.ExternalTrafficPolicy, Ports: s.Spec.Ports,
			InternalTrafficPolicy: s.Spec.InternalTrafficPolicy, HealthCheckNodePort: s.Spec.HealthCheckNodePort,
			SessionAffinity: s.Spec.SessionAffinity, SessionAffinityConfig: s.Spec.SessionAffinityConfig,
			LoadBalancerSourceRanges: s.Spec.LoadBalancerSourceRanges, TrafficDistribution: s.Spec.TrafficDistribution}}
	out.Annotations = keepAnnotations(s.Annotations, serviceAnnotations)
	for _, in := range s.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in.IP, IPMode: in.IPMode})
		}
	}
	return out
}

func slimEndpointSlice(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: slimMeta(s.ObjectMeta), AddressType: s.AddressType, Ports: s.Ports}
	// The service's name is the one label read.
	out.Labels = nil
	if name, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: name}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, 0, len(s.Endpoints))
	}
	for _, e := range s.Endpoints {
		// The conditions and the zone hints (not the node hints).
		var hints *discoveryv1.EndpointHints
		if e.Hints != nil && len(e.Hints.ForZones) > 0 {
			hints = &discoveryv1.EndpointHints{ForZones: e.Hints.ForZones}
		}
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{Addresses: e.Addresses, NodeName: e.NodeName,
			Conditions: e.Conditions, Hints: hints})
	}
	return out
}

// keepAnnotations returns the annotations of keys that all has, nil for
// none.
func keepAnnotations(all map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := all[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
