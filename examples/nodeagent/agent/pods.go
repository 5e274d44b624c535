package agent

import (
	"net"
	"net/netip"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/hostips"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable"
)

// ClassLocalPod is the route class of the routes to local pods (the
// endpoints manager's): the lowest of the agent's, so a pod's host route
// wins over any block route.
const ClassLocalPod routetable.RouteClass = 10

// endpointOf returns local pod p as the endpoints and floating IP managers
// take it: its host-side interface, a host prefix per address, its MAC and
// its floating IPs. An address no pod can own (link-local, loopback,
// multicast: cluster.CheckHostAddr) is left out, and the pod keeps the
// others.
func endpointOf(p datastore.Pod) cluster.Endpoint {
	e := cluster.Endpoint{ID: p.Key(), Iface: p.HostInterface()}
	for _, ip := range p.IPs {
		if cluster.CheckHostAddr(ipfamily.Of(ip), ip) != nil {
			continue
		}
		e.Addrs = append(e.Addrs, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if len(p.MAC) != 0 {
		e.MAC = net.HardwareAddr(p.MAC)
	}
	for _, f := range p.FloatingIPs {
		e.FloatingIPs = append(e.FloatingIPs, cluster.NAT{Floating: f.Floating, Internal: f.Internal})
	}
	return e
}

// hostAddrs is the hostips Manager as the loop's interface observer: the
// loop hands it every interface's addresses, as the interface monitor
// reports them, from the loop's goroutine.
type hostAddrs struct{ *hostips.Manager }

// OnLink implements dataplane.InterfaceObserver: a link's state is not the
// set's business (a gone interface's addresses come as OnAddrs nil).
func (hostAddrs) OnLink(kernel.Link, kernel.LinkState) {}

// OnAddrs implements dataplane.InterfaceObserver.
func (h hostAddrs) OnAddrs(name string, addrs []netip.Prefix) {
	h.OnUpdate(hostips.InterfaceAddrs{Name: name, Addrs: addrs})
}
