package agent

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
)

// serviceMasqMark names the mark bit the BPF proxy sets on connections
// from other hosts that it sends to a backend on another node; the
// masquerade chain masquerades what carries it.
const serviceMasqMark = "service-masq"

// proxyServices turns the datastore's services into the proxy's: one per
// service port, named "namespace/name:port", with the ready endpoints as
// backends (local when they run on node self).
func proxyServices(c datastore.Cluster, self string) map[string]cluster.Service {
	out := map[string]cluster.Service{}
	for _, s := range c.Services {
		for _, p := range s.Ports {
			port := p.Name
			if port == "" {
				port = fmt.Sprint(p.Port)
			}
			ps := cluster.Service{
				Name:                 fmt.Sprintf("%s/%s:%s", orDefault(s.Namespace, "default"), s.Name, port),
				Port:                 p.Port,
				ClusterIPs:           s.ClusterIPs,
				ExternalIPs:          s.ExternalIPs,
				ExternalTrafficLocal: s.ExternalTrafficPolicy == "Local",
			}
			switch strings.ToUpper(p.Protocol) {
			case "", "TCP":
				ps.Protocol = cluster.TCP
			case "UDP":
				ps.Protocol = cluster.UDP
			default:
				continue // SCTP: not translated
			}
			if s.Type == "NodePort" || s.Type == "LoadBalancer" {
				ps.NodePort = p.NodePort
			}
			target := p.TargetPort
			if target == 0 {
				target = p.Port
			}
			for _, e := range s.Endpoints {
				if e.NotReady {
					continue
				}
				ps.Backends = append(ps.Backends, cluster.Backend{Addr: netip.AddrPortFrom(e.IP, target), Local: e.Node == self})
			}
			out[ps.Name] = ps
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// serviceMessages returns the proxy messages that take it from the
// previous cluster to c: removed services, changed ones, and this node's
// addresses (where NodePorts answer).
func (t *translator) serviceMessages(c datastore.Cluster) []any {
	var out []any
	want := proxyServices(c, t.self)
	for name := range t.services {
		if _, ok := want[name]; !ok {
			out = append(out, cluster.ServiceRemove{Name: name})
			delete(t.services, name)
		}
	}
	for name, s := range want {
		if old, ok := t.services[name]; !ok || !reflect.DeepEqual(old, s) {
			out = append(out, s)
			t.services[name] = s
		}
	}
	var addrs []netip.Addr
	if self, ok := c.Node(t.self); ok {
		for _, a := range []netip.Addr{self.UnderlayIPv4, self.UnderlayIPv6} {
			if a.IsValid() {
				addrs = append(addrs, a)
			}
		}
	}
	if !reflect.DeepEqual(addrs, t.nodeAddrs) {
		out = append(out, cluster.NodeAddrs{Addrs: addrs})
		t.nodeAddrs = addrs
	}
	return out
}
