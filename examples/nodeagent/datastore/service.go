package datastore

import (
	"fmt"
	"slices"
)

// problems lists what is wrong with the service on its own, each as a
// phrase for Validate (which checks what spans services: the health check
// ports).
func (s Service) problems() []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, f := range []struct{ field, value string }{
		{"externalTrafficPolicy", s.ExternalTrafficPolicy},
		{"internalTrafficPolicy", s.InternalTrafficPolicy},
	} {
		if f.value != "" && f.value != "Cluster" && f.value != "Local" {
			bad("%s %q is neither Cluster nor Local", f.field, f.value)
		}
	}
	lb := s.Type == "LoadBalancer"
	if s.HealthCheckNodePort != 0 && (!lb || s.ExternalTrafficPolicy != "Local") {
		bad("healthCheckNodePort %d needs type LoadBalancer and externalTrafficPolicy Local", s.HealthCheckNodePort)
	}
	switch s.SessionAffinity {
	case "", "None":
		if s.SessionAffinityTimeoutSeconds != 0 {
			bad("sessionAffinityTimeoutSeconds needs sessionAffinity ClientIP")
		}
	case "ClientIP":
		if s.SessionAffinityTimeoutSeconds > MaxSessionAffinityTimeoutSeconds {
			bad("sessionAffinityTimeoutSeconds %d is over %d", s.SessionAffinityTimeoutSeconds, MaxSessionAffinityTimeoutSeconds)
		}
	default:
		bad("sessionAffinity %q is neither None nor ClientIP", s.SessionAffinity)
	}
	if len(s.LoadBalancerSourceRanges) > 0 && !lb {
		bad("loadBalancerSourceRanges need type LoadBalancer")
	}
	for _, p := range s.LoadBalancerSourceRanges {
		if !p.IsValid() || p.Masked() != p {
			bad("load balancer source range %s is not a network (%s?)", p, p.Masked())
		}
	}
	for _, a := range s.LoadBalancerIPs {
		if !a.IsValid() || a.IsUnspecified() {
			bad("load balancer IP %s is not an address", a)
		}
	}
	switch s.TrafficDistribution {
	case "", TrafficDistributionPreferSameZone, TrafficDistributionPreferClose:
	default:
		bad("trafficDistribution %q is none of %s and %s", s.TrafficDistribution, TrafficDistributionPreferSameZone, TrafficDistributionPreferClose)
	}
	// Each port a number and a protocol, no number twice for one
	// protocol, and each name (or its absence: the proxy names an unnamed
	// port by its number) once.
	names := map[string]bool{}
	type portKey struct {
		port     uint16
		protocol string
	}
	numbers := map[portKey]bool{}
	for i, p := range s.Ports {
		k := portKey{p.Port, p.Protocol}
		if k.protocol == "" {
			k.protocol = "TCP"
		}
		switch {
		case !protocolValid(p.Protocol):
			bad("port %d: protocol %q is none of TCP, UDP and SCTP", i, p.Protocol)
		case p.Port == 0:
			bad("port %d: the port is 0", i)
		case p.Name != "" && !validServicePortName(p.Name):
			bad("port %d: %q is not a port name", i, p.Name)
		case names[p.Name] && p.Name == "":
			bad("port %d (%d/%s): another port has no name either", i, p.Port, k.protocol)
		case names[p.Name]:
			bad("port name %q is used twice", p.Name)
		case numbers[k]:
			bad("port %d/%s is listed twice", p.Port, k.protocol)
		}
		names[p.Name], numbers[k] = true, true
	}
	for i, p := range s.Ports {
		if n := fmt.Sprint(p.Port); p.Name == "" && names[n] {
			bad("port %d (%d, no name): another port is named %q, as the proxy names this one", i, p.Port, n)
		}
	}
	seen := map[string]bool{}
	for i, e := range s.Endpoints {
		key := e.BackendKey()
		switch {
		case !e.IP.IsValid() || e.IP.IsUnspecified():
			bad("endpoint %d: IP %s is not an address", i, e.IP)
		case seen[key]:
			bad("endpoint %s is listed twice", e.IP)
		}
		seen[key] = true
		if e.Serving && !e.Terminating {
			bad("endpoint %s: serving is for a terminating endpoint (one that is not serves when it is ready)", e.IP)
		}
		for j, z := range e.ForZones {
			if z == "" || slices.Contains(e.ForZones[:j], z) {
				bad("endpoint %s: zone %q is empty or repeated", e.IP, z)
			}
		}
		for j, p := range e.Ports {
			switch {
			case !names[p.Name]:
				bad("endpoint %s: port %q names no port of the service", e.IP, p.Name)
			case p.Port == 0:
				bad("endpoint %s: port %q is 0", e.IP, p.Name)
			case slices.ContainsFunc(e.Ports[:j], func(o EndpointPort) bool { return o.Name == p.Name }):
				bad("endpoint %s: port %q is listed twice", e.IP, p.Name)
			}
		}
	}
	return out
}
