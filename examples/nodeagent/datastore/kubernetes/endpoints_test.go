package kubernetes_test

import (
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore/kubernetes"
)

// withPorts gives slice s the ports, name then port.
func withPorts(s *discoveryv1.EndpointSlice, ports ...any) *discoveryv1.EndpointSlice {
	for i := 0; i+1 < len(ports); i += 2 {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr(ports[i].(string)), Port: ptr(int32(ports[i+1].(int)))})
	}
	return s
}

// permutations returns every order of the slices.
func permutations(in []*discoveryv1.EndpointSlice) [][]*discoveryv1.EndpointSlice {
	if len(in) <= 1 {
		return [][]*discoveryv1.EndpointSlice{in}
	}
	var out [][]*discoveryv1.EndpointSlice
	for i := range in {
		rest := append(append([]*discoveryv1.EndpointSlice{}, in[:i]...), in[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]*discoveryv1.EndpointSlice{in[i]}, p...))
		}
	}
	return out
}

// TestEndpointSlicesInAnyOrder: the informers list their caches in no
// particular order; the same slices in every order convert to the same
// Cluster, so an unchanged state gives no update. What the order used to
// decide: the target port of a port the slices disagree on, the form of an
// endpoint in two slices, the order of an endpoint's zones. An address in
// two slices at different ports is two backends, as kube-proxy keeps each
// address and port.
func TestEndpointSlicesInAnyOrder(t *testing.T) {
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	svc := svcObject(func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}}
	})
	slices := []*discoveryv1.EndpointSlice{
		withPorts(sliceObject("s-a", ep("10.0.0.1", conditions(1, 1, 0), "zone-b", "zone-a"), ep("10.0.0.2", conditions(0, 0, 1))), "http", 8080),
		withPorts(sliceObject("s-b", ep("10.0.0.3", conditions(1, 1, 0)), ep("10.0.0.2", conditions(1, 1, 0))), "http", 8081),
		withPorts(sliceObject("s-c", ep("10.0.0.4", conditions(1, 1, 0), "zone-a", "zone-b"), ep("10.0.0.1", conditions(1, 1, 0))), "http", 8082),
		withPorts(sliceObject("s-aa", ep("10.0.0.3", conditions(0, 0, 1))), "http", 8081), // s-b's endpoint, not ready here
	}
	var first datastore.Cluster
	for i, order := range permutations(slices) {
		objs := []k8sruntime.Object{svc}
		for _, s := range order {
			objs = append(objs, s)
		}
		c := convert(t, d, objs)
		if i == 0 {
			first = c
			continue
		}
		if !reflect.DeepEqual(c, first) {
			t.Fatalf("order %d gives\n%+v\nnot\n%+v", i, c.Services, first.Services)
		}
	}
	if len(first.Services) != 1 {
		t.Fatalf("services = %+v", first.Services)
	}
	s := first.Services[0]
	// The lowest of the ports the slices give is the service port's; the
	// endpoints of the other slices carry their own.
	own := func(port uint16) func(*datastore.Endpoint) {
		return func(e *datastore.Endpoint) { e.Ports = []datastore.EndpointPort{{Name: "http", Port: port}} }
	}
	want := []datastore.Endpoint{
		dsEP("10.0.0.1", func(e *datastore.Endpoint) { e.ForZones = []string{"zone-a", "zone-b"} }), // s-a's, at 8080
		dsEP("10.0.0.1", own(8082)), // s-c's
		dsEP("10.0.0.2", func(e *datastore.Endpoint) { e.NotReady, e.Terminating = true, true }), // s-a's, at 8080
		dsEP("10.0.0.2", own(8081)), // s-b's
		dsEP("10.0.0.3", own(8081)), // s-b's: the ready form, not s-aa's
		dsEP("10.0.0.4", func(e *datastore.Endpoint) { own(8082)(e); e.ForZones = []string{"zone-a", "zone-b"} }),
	}
	if len(s.Ports) != 1 || s.Ports[0].TargetPort != 8080 || !reflect.DeepEqual(s.Endpoints, want) {
		t.Errorf("ports %+v, endpoints\n%+v\nwant\n%+v", s.Ports, s.Endpoints, want)
	}
	if err := first.Validate(); err != nil {
		t.Error(err)
	}
}

// TestEndpointSlicePorts: the backends' ports as the slices give them per
// service port: one port the slices agree on is the service port's target
// port; two slices that map one named port to different target ports keep
// both, each endpoint with its own; a slice without a service port's name
// serves it with none of its endpoints, and so does a slice without ports
// or whose port has no name (nil; kube-proxy takes a slice's endpoints
// port by port, and ignores such a port); an FQDN slice serves nothing,
// even when its names read as addresses.
func TestEndpointSlicePorts(t *testing.T) {
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	svc := svcObject(func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")},
			{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9100)},
		}
	})
	ready := conditions(1, 1, 0)
	objs := []k8sruntime.Object{svc,
		withPorts(sliceObject("v1", ep("10.0.0.1", ready), ep("10.0.0.2", ready)), "http", 8080, "metrics", 9100),
		withPorts(sliceObject("v2", ep("10.0.0.3", ready)), "http", 8081, "metrics", 9100),
		withPorts(sliceObject("no-metrics", ep("10.0.0.4", ready)), "http", 8080),
		withPorts(sliceObject("other", ep("10.0.0.5", ready)), "grpc", 5000),
		func() *discoveryv1.EndpointSlice { // no ports at all
			s := sliceObject("bare", ep("10.0.0.6", ready))
			s.Ports = nil
			return s
		}(),
		func() *discoveryv1.EndpointSlice { // a port without a name
			s := sliceObject("nil-name", ep("10.0.0.8", ready))
			s.Ports = []discoveryv1.EndpointPort{{Port: ptr(int32(8080))}}
			return s
		}(),
		func() *discoveryv1.EndpointSlice {
			s := withPorts(sliceObject("fqdn", ep("10.0.0.7", ready)), "http", 8080, "metrics", 9100)
			s.AddressType = discoveryv1.AddressTypeFQDN
			return s
		}(),
	}
	for _, objs := range [][]k8sruntime.Object{objs, slimAll(t, objs)} {
		c := convert(t, d, objs)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if len(c.Services) != 1 {
			t.Fatalf("services = %+v", c.Services)
		}
		s := c.Services[0]
		if len(s.Ports) != 2 || s.Ports[0].TargetPort != 8080 || s.Ports[1].TargetPort != 9100 {
			t.Errorf("ports = %+v", s.Ports)
		}
		// Each backend of each service port at its port.
		got := map[string][]netip.AddrPort{}
		for _, p := range s.Ports {
			for _, e := range s.Endpoints {
				if port, ok := e.Port(p); ok {
					got[p.Name] = append(got[p.Name], netip.AddrPortFrom(e.IP, port))
				}
			}
		}
		want := map[string][]netip.AddrPort{
			"http": {netip.MustParseAddrPort("10.0.0.1:8080"), netip.MustParseAddrPort("10.0.0.2:8080"),
				netip.MustParseAddrPort("10.0.0.3:8081"), netip.MustParseAddrPort("10.0.0.4:8080")},
			"metrics": {netip.MustParseAddrPort("10.0.0.1:9100"), netip.MustParseAddrPort("10.0.0.2:9100"),
				netip.MustParseAddrPort("10.0.0.3:9100")},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("backends\n%v\nwant\n%v", got, want)
		}
		// Only the endpoints whose ports differ carry them.
		for _, e := range s.Endpoints {
			if carries := len(e.Ports) > 0; carries != (e.IP.String() == "10.0.0.3" || e.IP.String() == "10.0.0.4") {
				t.Errorf("endpoint %s carries ports %+v", e.IP, e.Ports)
			}
		}
	}
}

// TestEndpointFirstAddressOnly: an endpoint is its first address; the
// others (the API gives them no meaning, the EndpointSlice controller
// never writes them) are no backends, as kube-proxy reads the first alone;
// an endpoint whose first address is no IP address is none.
func TestEndpointFirstAddressOnly(t *testing.T) {
	d, err := kubernetes.New(kubernetes.Options{Client: fake.NewClientset(), NodeName: "node1"})
	if err != nil {
		t.Fatal(err)
	}
	ready := conditions(1, 1, 0)
	two := ep("10.0.0.1", ready)
	two.Addresses = append(two.Addresses, "10.0.0.2", "10.0.0.3")
	bad := ep("10.0.0.4", ready)
	bad.Addresses = []string{"not-an-ip", "10.0.0.5"}
	c := convert(t, d, []k8sruntime.Object{svcObject(nil), sliceObject("s-a", two, bad, ep("10.0.0.6", ready))})
	if len(c.Services) != 1 {
		t.Fatalf("services = %+v", c.Services)
	}
	var got []netip.Addr
	for _, e := range c.Services[0].Endpoints {
		got = append(got, e.IP)
	}
	if want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.6")}; !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
}
