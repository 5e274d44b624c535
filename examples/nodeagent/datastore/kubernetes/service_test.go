package kubernetes_test

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// svcObject is a ClusterIP service "default/s" with one TCP port, changed
// by f.
func svcObject(f func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if f != nil {
		f(s)
	}
	return s
}

// lbLocal makes a service a LoadBalancer with externalTrafficPolicy Local.
func lbLocal(s *corev1.Service) {
	s.Spec.Type = corev1.ServiceTypeLoadBalancer
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
}

// sliceObject is an EndpointSlice of "default/s" named name.
// Its one port is the one the EndpointSlice controller writes for
// svcObject's unnamed port 80: named "", port 80.
func sliceObject(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: "s"}}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
		Ports: []discoveryv1.EndpointPort{{Name: ptr(""), Port: ptr(int32(80)), Protocol: ptr(corev1.ProtocolTCP)}}}
}

// conditions are an endpoint's conditions, nil where a is -1.
func conditions(ready, serving, terminating int) discoveryv1.EndpointConditions {
	b := func(v int) *bool {
		if v < 0 {
			return nil
		}
		return ptr(v == 1)
	}
	return discoveryv1.EndpointConditions{Ready: b(ready), Serving: b(serving), Terminating: b(terminating)}
}

func ep(ip string, c discoveryv1.EndpointConditions, zones ...string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr("node1"), Conditions: c}
	if len(zones) > 0 {
		e.Hints = &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "node1"}}}
		for _, z := range zones {
			e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
	}
	return e
}

func dsEP(ip string, f func(*datastore.Endpoint)) datastore.Endpoint {
	e := datastore.Endpoint{IP: netip.MustParseAddr(ip), Node: "node1"}
	if f != nil {
		f(&e)
	}
	return e
}

// TestServiceConversion: the EndpointSlices' conditions and zone hints and
// the services' traffic settings, as the datastore converts them.
func TestServiceConversion(t *testing.T) {
	const (
		unset = -1
		no    = 0
		yes   = 1
	)
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		// want is the service converted; nil: left out.
		want func(*datastore.Service)
		gone bool
	}{{
		name: "conditions",
		svc:  svcObject(nil),
		slices: []*discoveryv1.EndpointSlice{sliceObject("a",
			ep("10.0.0.6", conditions(unset, unset, unset)),              // nil ready: ready
			ep("10.0.0.5", conditions(no, yes, yes)),                     // terminating, serving
			ep("10.0.0.4", conditions(no, no, yes)),                      // terminating, not serving
			ep("10.0.0.3", conditions(no, unset, unset)),                 // not ready; serving means nothing
			ep("10.0.0.2", conditions(yes, yes, no)),                     // ready
			ep("10.0.0.1", conditions(no, yes, unset)),                   // not ready, not terminating
			discoveryv1.Endpoint{Addresses: []string{"nope", "0.0.0.0"}}, // no usable address
		)},
		want: func(s *datastore.Service) {
			s.Endpoints = []datastore.Endpoint{
				dsEP("10.0.0.1", func(e *datastore.Endpoint) { e.NotReady = true }),
				dsEP("10.0.0.2", nil),
				dsEP("10.0.0.3", func(e *datastore.Endpoint) { e.NotReady = true }),
				dsEP("10.0.0.4", func(e *datastore.Endpoint) { e.NotReady, e.Terminating = true, true }),
				dsEP("10.0.0.5", func(e *datastore.Endpoint) { e.NotReady, e.Terminating, e.Serving = true, true, true }),
				dsEP("10.0.0.6", nil),
			}
		},
	}, {
		name: "an address in two slices: the ready form wins",
		svc:  svcObject(nil),
		slices: []*discoveryv1.EndpointSlice{
			sliceObject("a", ep("10.0.0.1", conditions(no, yes, yes)), ep("10.0.0.2", conditions(yes, yes, no))),
			sliceObject("b", ep("10.0.0.1", conditions(yes, yes, no)), ep("10.0.0.2", conditions(no, no, yes))),
		},
		want: func(s *datastore.Service) {
			s.Endpoints = []datastore.Endpoint{dsEP("10.0.0.1", nil), dsEP("10.0.0.2", nil)}
		},
	}, {
		// kube-proxy ignores a slice port without a name; the service's
		// unnamed port matches the controller's "" only. The ready
		// endpoint of a slice with no ports (and of the FQDN slice) backs
		// no port either.
		name: "slices whose ports do not serve: no name, none, FQDN",
		svc:  svcObject(nil),
		slices: []*discoveryv1.EndpointSlice{
			func() *discoveryv1.EndpointSlice {
				s := sliceObject("a", ep("10.0.0.1", conditions(yes, yes, no)))
				s.Ports[0].Name = nil
				return s
			}(),
			func() *discoveryv1.EndpointSlice {
				s := sliceObject("b", ep("10.0.0.2", conditions(yes, yes, no)))
				s.Ports = nil
				return s
			}(),
			func() *discoveryv1.EndpointSlice {
				s := sliceObject("c", ep("10.0.0.3", conditions(yes, yes, no)))
				s.AddressType = discoveryv1.AddressTypeFQDN
				return s
			}(),
			sliceObject("d", ep("10.0.0.4", conditions(yes, yes, no))),
		},
		want: func(s *datastore.Service) { s.Endpoints = []datastore.Endpoint{dsEP("10.0.0.4", nil)} },
	}, {
		name: "zone hints: names once, node hints left",
		svc:  svcObject(nil),
		slices: []*discoveryv1.EndpointSlice{sliceObject("a",
			ep("10.0.0.1", conditions(yes, yes, no), "zone-a", "", "zone-b", "zone-a"),
			ep("10.0.0.2", conditions(yes, yes, no)))},
		want: func(s *datastore.Service) {
			s.Endpoints = []datastore.Endpoint{
				dsEP("10.0.0.1", func(e *datastore.Endpoint) { e.ForZones = []string{"zone-a", "zone-b"} }),
				dsEP("10.0.0.2", nil),
			}
		},
	}, {
		name: "traffic settings of a load balancer",
		svc: svcObject(func(s *corev1.Service) {
			lbLocal(s)
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}
			s.Spec.LoadBalancerSourceRanges = []string{" 192.0.2.0/24", "198.51.100.7/16", "bad", "2001:db8::/32", "192.0.2.0/24"}
			s.Spec.ExternalIPs = []string{"203.0.113.1", "224.0.0.1"}
			// Addresses that cannot be frontends (the API admits them in a
			// status) are left out; the service keeps the others.
			// One of ipMode Proxy is the load balancer's to receive.
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.9"}, {Hostname: "lb.example"}, {IP: "203.0.113.9"},
				{IP: "239.1.2.3"}, {IP: "0.0.0.0"}, {IP: "ff05::1"}, {IP: "::ffff:203.0.113.10"}, {IP: "127.0.0.1"}, {IP: "fe80::1"},
				{IP: "203.0.113.11", IPMode: ptr(corev1.LoadBalancerIPModeProxy)},
				{IP: "203.0.113.12", IPMode: ptr(corev1.LoadBalancerIPModeVIP)}}
		}),
		want: func(s *datastore.Service) {
			s.Type, s.ExternalTrafficPolicy, s.HealthCheckNodePort = "LoadBalancer", "Local", 32000
			s.InternalTrafficPolicy, s.SessionAffinity, s.SessionAffinityTimeoutSeconds = "Local", "ClientIP", 600
			s.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.0.0/16"),
				netip.MustParsePrefix("2001:db8::/32")}
			s.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.1")}
			s.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("203.0.113.12")}
		},
	}, {
		name: "ClientIP without a timeout: the default is the agent's",
		svc:  svcObject(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }),
		want: func(s *datastore.Service) { s.SessionAffinity = "ClientIP" },
	}, {
		name: "no health check port or source ranges on a Cluster policy NodePort",
		svc: svcObject(func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.LoadBalancerSourceRanges = []string{"192.0.2.0/24"}
			s.Spec.SessionAffinity = corev1.ServiceAffinityNone
		}),
		want: func(s *datastore.Service) { s.Type, s.SessionAffinity = "NodePort", "None" },
	}, {
		name: "trafficDistribution PreferClose",
		svc: svcObject(func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferClose)
		}),
		want: func(s *datastore.Service) { s.TrafficDistribution = datastore.TrafficDistributionPreferSameZone },
	}, {
		name: "trafficDistribution PreferSameNode: by zone",
		svc: svcObject(func(s *corev1.Service) {
			s.Spec.TrafficDistribution = ptr(corev1.ServiceTrafficDistributionPreferSameNode)
		}),
		want: func(s *datastore.Service) { s.TrafficDistribution = datastore.TrafficDistributionPreferSameZone },
	}, {
		name: "an unknown trafficDistribution",
		svc:  svcObject(func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr("example.com/nearest") }),
		want: func(*datastore.Service) {},
	}, {
		name: "topology-mode Auto",
		svc: svcObject(func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Auto"}
		}),
		want: func(s *datastore.Service) { s.TrafficDistribution = datastore.TrafficDistributionPreferSameZone },
	}, {
		name: "topology-aware-hints of another implementation",
		svc: svcObject(func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.DeprecatedAnnotationTopologyAwareHints: "example.com/lowest-rtt"}
		}),
		want: func(s *datastore.Service) { s.TrafficDistribution = datastore.TrafficDistributionPreferSameZone },
	}, {
		name: "topology-mode Disabled",
		svc: svcObject(func(s *corev1.Service) {
			s.Annotations = map[string]string{corev1.AnnotationTopologyMode: "Disabled"}
		}),
		want: func(*datastore.Service) {},
	}, {
		name: "a setting the datastore refuses leaves the service out",
		svc:  svcObject(func(s *corev1.Service) { s.Spec.SessionAffinity = "Sticky" }),
		gone: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
			if err != nil {
				t.Fatal(err)
			}
			objs := []k8sruntime.Object{tc.svc}
			for _, s := range tc.slices {
				objs = append(objs, s)
			}
			// The slim objects convert alike.
			for _, objs := range [][]k8sruntime.Object{objs, slimAll(t, objs)} {
				c := convert(t, d, objs)
				if tc.gone {
					if len(c.Services) != 0 {
						t.Errorf("services = %+v, want none", c.Services)
					}
					continue
				}
				want := datastore.Service{Namespace: "default", Name: "s", Type: "ClusterIP",
					ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}, Ports: []datastore.ServicePort{{Protocol: "TCP", Port: 80}}}
				if len(tc.slices) > 0 {
					want.Ports[0].TargetPort = 80 // the slices' port (sliceObject)
				}
				tc.want(&want)
				if len(c.Services) != 1 || !reflect.DeepEqual(c.Services[0], want) {
					t.Errorf("services =\n%+v\nwant\n%+v", c.Services, want)
				}
			}
		})
	}
}

// slimAll returns the informers' slim copies of objs.
func slimAll(t *testing.T, objs []k8sruntime.Object) []k8sruntime.Object {
	t.Helper()
	var out []k8sruntime.Object
	for _, o := range objs {
		s, err := kubernetes.Slim(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s.(k8sruntime.Object))
	}
	return out
}

// TestNodeZone: a Node's zone is its topology.kubernetes.io/zone label.
func TestNodeZone(t *testing.T) {
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	zoned := k8sNode("node1", "198.18.0.1", "10.244.1.0/24", nil)
	zoned.Labels = map[string]string{corev1.LabelTopologyZone: "zone-a", "other": "x"}
	objs := []k8sruntime.Object{zoned, k8sNode("node2", "198.18.0.2", "10.244.2.0/24", nil)}
	for _, objs := range [][]k8sruntime.Object{objs, slimAll(t, objs)} {
		c := convert(t, d, objs)
		if len(c.Nodes) != 2 || c.Nodes[0].Zone != "zone-a" || c.Nodes[1].Zone != "" {
			t.Errorf("nodes = %+v", c.Nodes)
		}
	}
}
