package kubernetes

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// serviceOf converts a service with a cluster IP and its endpoint slices
// (false: none to proxy: an ExternalName, a headless service, another
// proxy's).
// The result does not depend on the order of eps: the informers list
// their caches in no particular order, and the same state must give the
// same Service.
func serviceOf(s *corev1.Service, eps []*discoveryv1.EndpointSlice) (datastore.Service, bool) {
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return datastore.Service{}, false
	}
	if _, other := s.Labels[serviceProxyNameLabel]; other {
		return datastore.Service{}, false
	}
	out := datastore.Service{Namespace: s.Namespace, Name: s.Name, Type: string(s.Spec.Type),
		ExternalTrafficPolicy: string(s.Spec.ExternalTrafficPolicy)}
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil {
			out.ClusterIPs = append(out.ClusterIPs, a)
		}
	}
	if len(out.ClusterIPs) == 0 { // headless: nothing to load-balance
		return datastore.Service{}, false
	}
	// The API checks little of these (a load balancer's status only that
	// the address parses): one that cannot be a frontend is left out, and
	// the service keeps the others.
	for _, ip := range s.Spec.ExternalIPs {
		if a, err := netip.ParseAddr(ip); err == nil && frontendAddr(a) && !slices.Contains(out.ExternalIPs, a) {
			out.ExternalIPs = append(out.ExternalIPs, a)
		}
	}
	for _, in := range s.Status.LoadBalancer.Ingress {
		// An address of ipMode Proxy is the load balancer's own, which
		// forwards to node ports or pods: connections to it go there, not
		// to the backends straight (kube-proxy leaves it alone too).
		if in.IPMode != nil && *in.IPMode == corev1.LoadBalancerIPModeProxy {
			continue
		}
		if a, err := netip.ParseAddr(in.IP); err == nil && frontendAddr(a) && !slices.Contains(out.LoadBalancerIPs, a) {
			out.LoadBalancerIPs = append(out.LoadBalancerIPs, a)
		}
	}
	trafficSettings(&out, s)
	// The slices of IP addresses (an FQDN slice names no backend a proxy
	// can use, even when its names read as addresses), in name order
	// (unique in a namespace), so that whatever decides between them
	// decides alike every time.
	eps = slices.DeleteFunc(slices.Clone(eps), func(es *discoveryv1.EndpointSlice) bool {
		return es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6
	})
	slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range s.Spec.Ports {
		sp := datastore.ServicePort{Name: p.Name, Protocol: string(p.Protocol), Port: uint16(p.Port), NodePort: uint16(p.NodePort),
			TargetPort: targetPort(p, eps)}
		out.Ports = append(out.Ports, sp)
	}
	out.Endpoints = endpointsOf(out.Ports, eps)
	return out, true
}

// serviceProxyNameLabel names the proxy that serves a service, when it is
// not the cluster's default one: kube-proxy leaves such a service to that
// proxy, and so does the datastore.
const serviceProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// slicePort returns the port slice es gives the service port called name,
// when it gives a valid one. A port without a name (nil, not "": the
// EndpointSlice controller names every port, "" for an unnamed service
// port) is none, as kube-proxy ignores it.
func slicePort(es *discoveryv1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range es.Ports {
		if p.Name != nil && *p.Name == name && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// targetPort returns the backends' port of service port p: the one port the
// EndpointSlices give its name (so a target port given by name works), else
// the spec's number, else, when the slices give several (a target port name
// that resolves to different container ports on different pods), the lowest
// of them (the endpoints at another carry their own, see endpointsOf); 0
// (the port itself) when nothing says.
func targetPort(p corev1.ServicePort, eps []*discoveryv1.EndpointSlice) uint16 {
	var ports []uint16
	for _, es := range eps {
		if port, ok := slicePort(es, p.Name); ok {
			ports = append(ports, port)
		}
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	switch {
	case len(ports) == 1:
		return ports[0]
	case p.TargetPort.IntVal > 0 && p.TargetPort.IntVal <= 65535:
		return uint16(p.TargetPort.IntVal)
	case len(ports) > 1:
		return ports[0]
	}
	return 0
}

// endpointPorts returns the ports the endpoints of slice es carry for the
// service's ports: none (nil) when the slice's ports are the service
// ports' target ports, else the slice's port of each service port it
// names. serves is false when the slice names none of the service's ports
// (or has no ports at all): its endpoints are backends of none, as
// kube-proxy takes a slice's endpoints port by port.
func endpointPorts(ports []datastore.ServicePort, es *discoveryv1.EndpointSlice) (own []datastore.EndpointPort, serves bool) {
	differs := false
	for _, p := range ports {
		port, ok := slicePort(es, p.Name)
		if !ok {
			differs = true
			continue
		}
		own = append(own, datastore.EndpointPort{Name: p.Name, Port: port})
		if target, _ := (datastore.Endpoint{}).Port(p); port != target {
			differs = true
		}
	}
	switch {
	case !differs:
		return nil, true
	case len(own) == 0:
		return nil, false
	}
	return own, true
}

// endpointsOf converts the endpoints of a service's slices, sorted by name:
// each backend (an endpoint's first address and its own ports) once,
// with its conditions, its zone hints (sorted, each once) and, when its
// slice's ports are not the service ports' target ports, its own ports;
// sorted by address. An
// address in several slices at the same ports (while they are rewritten)
// is kept in the form of the first slice that has it, or of the first that
// has it ready when one does, as kube-proxy prefers the ready form; at
// other ports (host-network pods of one node) it is another backend, as
// kube-proxy keeps each address and port.
func endpointsOf(ports []datastore.ServicePort, eps []*discoveryv1.EndpointSlice) []datastore.Endpoint {
	var out []datastore.Endpoint
	at := map[string]int{} // by BackendKey
	for _, es := range eps {
		own, serves := endpointPorts(ports, es)
		if !serves {
			continue
		}
		for _, e := range es.Endpoints {
			// The conditions as the API defines their nil values (ready
			// and serving: true; terminating: false).
			c := e.Conditions
			ready := c.Ready == nil || *c.Ready
			serving := c.Serving == nil || *c.Serving
			terminating := c.Terminating != nil && *c.Terminating
			ep := datastore.Endpoint{NotReady: !ready, Terminating: terminating, Serving: serving && terminating, Ports: slices.Clone(own)}
			if e.NodeName != nil {
				ep.Node = *e.NodeName
			}
			if e.Hints != nil {
				for _, z := range e.Hints.ForZones {
					if z.Name != "" && !slices.Contains(ep.ForZones, z.Name) {
						ep.ForZones = append(ep.ForZones, z.Name)
					}
				}
				slices.Sort(ep.ForZones)
			}
			// The first address alone: the API gives the others no
			// meaning, and kube-proxy reads only the first.
			if len(e.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(e.Addresses[0])
			if err != nil || !ip.IsValid() || ip.IsUnspecified() {
				continue
			}
			ep.IP = ip
			k := ep.BackendKey()
			if i, ok := at[k]; ok {
				if ready && out[i].NotReady {
					out[i] = ep
				}
				continue
			}
			at[k] = len(out)
			out = append(out, ep)
		}
	}
	slices.SortStableFunc(out, func(a, b datastore.Endpoint) int { return a.IP.Compare(b.IP) })
	return out
}

// trafficSettings copies what decides where the service's traffic goes:
// the internal traffic policy, the health check port, session affinity,
// the source ranges and whether topology aware routing is on.
func trafficSettings(out *datastore.Service, s *corev1.Service) {
	if p := s.Spec.InternalTrafficPolicy; p != nil {
		out.InternalTrafficPolicy = string(*p)
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		s.Spec.HealthCheckNodePort > 0 && s.Spec.HealthCheckNodePort <= 65535 {
		out.HealthCheckNodePort = uint16(s.Spec.HealthCheckNodePort)
	}
	out.SessionAffinity = string(s.Spec.SessionAffinity)
	if c := s.Spec.SessionAffinityConfig; s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP && c != nil && c.ClientIP != nil &&
		c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		out.SessionAffinityTimeoutSeconds = uint32(*c.ClientIP.TimeoutSeconds)
	}
	// Source ranges as kube-proxy reads them: the field (not the older
	// annotation, which the cloud providers read), masked; one that does
	// not parse (the API server validates them) is left out.
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, r := range s.Spec.LoadBalancerSourceRanges {
			if p, err := netip.ParsePrefix(strings.TrimSpace(r)); err == nil && !slices.Contains(out.LoadBalancerSourceRanges, p.Masked()) {
				out.LoadBalancerSourceRanges = append(out.LoadBalancerSourceRanges, p.Masked())
			}
		}
	}
	if topologyAware(s) {
		out.TrafficDistribution = datastore.TrafficDistributionPreferSameZone
	}
}

// topologyAware reports whether the service asks for topology aware
// routing: spec.trafficDistribution is PreferSameZone, PreferClose (its
// older name) or PreferSameNode (which the EndpointSlice controller also
// gives zone hints for; the agent routes by zone only), or the annotation
// service.kubernetes.io/topology-mode (or the deprecated
// service.kubernetes.io/topology-aware-hints) is Auto or another value but
// Disabled (a value of another implementation that writes hints).
func topologyAware(s *corev1.Service) bool {
	if d := s.Spec.TrafficDistribution; d != nil {
		switch *d {
		case corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameNode:
			return true
		}
	}
	for _, k := range serviceAnnotations {
		switch s.Annotations[k] {
		case "", "Disabled", "disabled":
		default:
			return true
		}
	}
	return false
}

// frontendAddr reports whether a can take a service's traffic: a unicast
// address that is not unspecified, loopback or link-local, given in its
// own family and without zone.
func frontendAddr(a netip.Addr) bool {
	return a.IsValid() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!a.Is4In6() && a.Zone() == "" && a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}
