package agent

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"

	"github.com/nodeplane/nodeplane/cluster"
	"github.com/nodeplane/nodeplane/examples/nodeagent/datastore"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/serviceloop"
	"github.com/nodeplane/nodeplane/wireguard"
)

// translator turns successive Cluster snapshots into the typed messages the
// managers take: for each node, one cluster.Node (underlay and tunnel
// addresses, VXLAN MACs, WireGuard key) and a cluster.Block per pod CIDR,
// which the overlay and WireGuard managers share; for each local pod, a
// cluster.Endpoint (the endpoints and floating IP managers'); for each pool,
// a cluster.Pool; the service ranges (the service loop managers'). It
// remembers what it sent and sends only what changed, removals included.
type translator struct {
	self string
	// zone is this node's zone for topology aware routing when configured
	// (--node-zone); empty means the node's zone in the datastore.
	zone  string
	nodes map[string]nodeMsgs
	pods  map[string]cluster.Endpoint
	pools map[string]datastore.Pool
	// serviceCIDRs are the service ranges sent, sorted.
	serviceCIDRs []netip.Prefix
	// services and nodeAddrs are what the BPF proxy was sent.
	services  map[string]cluster.Service
	nodeAddrs []netip.Addr
	// netpol translates network policy when the agent enforces it (nil
	// otherwise); netpolErrs are what it left out of the last messages.
	netpol     *netpolTranslator
	netpolErrs []error
	// nodeErrs are the node addresses the last messages left out (see
	// nodeOf), for the agent to log.
	nodeErrs []error
}

// nodeMsgs is what one node contributes.
type nodeMsgs struct {
	node   cluster.Node
	blocks []netip.Prefix
}

func newTranslator(self string) *translator {
	return &translator{self: self, nodes: map[string]nodeMsgs{},
		pods: map[string]cluster.Endpoint{}, pools: map[string]datastore.Pool{}, services: map[string]cluster.Service{}}
}

// nodeOf returns node n as the managers take it: its underlay addresses,
// the first address of its pod CIDR of each family as the tunnel address,
// the VXLAN MACs it published (or DefaultVTEPMAC) and the WireGuard keys
// it published, one per family (a key that does not parse is left out).
// An address of one family that cannot be a node's (a link-local IPv6
// underlay, say: cluster.CheckHostAddr) is left out with what depends on
// it, so that the node keeps the other family: the managers refuse a
// whole cluster.Node for one bad address.
func nodeOf(n datastore.Node) cluster.Node {
	v := cluster.Node{Name: n.Name, UnderlayV4: n.UnderlayIPv4, UnderlayV6: n.UnderlayIPv6}
	for _, c := range n.PodCIDRs {
		switch {
		case c.Addr().Is4() && !v.TunnelV4.IsValid():
			v.TunnelV4 = datastore.TunnelAddr(c)
		case c.Addr().Is6() && !v.TunnelV6.IsValid():
			v.TunnelV6 = datastore.TunnelAddr(c)
		}
	}
	for _, a := range []struct {
		f    ipfamily.Family
		addr *netip.Addr
	}{{ipfamily.IPv4, &v.UnderlayV4}, {ipfamily.IPv6, &v.UnderlayV6}, {ipfamily.IPv4, &v.TunnelV4}, {ipfamily.IPv6, &v.TunnelV6}} {
		if a.addr.IsValid() && cluster.CheckHostAddr(a.f, *a.addr) != nil {
			*a.addr = netip.Addr{}
		}
	}
	if v.TunnelV4.IsValid() && v.UnderlayV4.IsValid() {
		v.VXLANMACV4 = macOr(n.VTEPMAC, datastore.DefaultVTEPMAC(n.Name, 4))
	} else {
		v.TunnelV4 = netip.Addr{}
	}
	if v.TunnelV6.IsValid() && v.UnderlayV6.IsValid() {
		v.VXLANMACV6 = macOr(n.VTEPMACV6, datastore.DefaultVTEPMAC(n.Name, 6))
	} else {
		v.TunnelV6 = netip.Addr{}
	}
	if k, err := wireguard.ParsePublicKey(n.WireGuardPublicKey); err == nil {
		v.WireGuardKeyV4 = cluster.WireGuardKey(k)
	}
	if k, err := wireguard.ParsePublicKey(n.WireGuardPublicKeyV6); err == nil {
		v.WireGuardKeyV6 = cluster.WireGuardKey(k)
	}
	return v
}

func macOr(m datastore.MAC, def net.HardwareAddr) cluster.MAC {
	if len(m) == 6 {
		return cluster.MAC(m)
	}
	return cluster.MAC(def)
}

func (t *translator) nodeMsgs(n datastore.Node) nodeMsgs {
	return nodeMsgs{node: nodeOf(n), blocks: slices.Clone(n.PodCIDRs)}
}

// messages returns the messages that take the managers from the previous
// cluster to c, removals first, the BPF proxy's last.
func (t *translator) messages(c datastore.Cluster) []any {
	var out []any
	seen := map[string]bool{}
	t.nodeErrs = nil
	for _, n := range c.Nodes {
		seen[n.Name] = true
		for _, a := range []struct {
			f    ipfamily.Family
			addr netip.Addr
		}{{ipfamily.IPv4, n.UnderlayIPv4}, {ipfamily.IPv6, n.UnderlayIPv6}} {
			if err := cluster.CheckHostAddr(a.f, a.addr); a.addr.IsValid() && err != nil {
				t.nodeErrs = append(t.nodeErrs, fmt.Errorf("node %s: %v underlay: %w: left out, the node keeps its other family", n.Name, a.f, err))
			}
		}
	}
	// Removals: pods, then blocks, then nodes (references before targets).
	for key := range t.pods {
		if still := findPod(c, key); still == nil || still.Node != t.self {
			out = append(out, cluster.EndpointRemove{ID: key})
			delete(t.pods, key)
		}
	}
	for name, old := range t.nodes {
		if seen[name] {
			continue
		}
		for _, b := range old.blocks {
			out = append(out, cluster.BlockRemove{CIDR: b})
		}
		out = append(out, cluster.NodeRemove{Name: name})
		delete(t.nodes, name)
	}
	for name := range t.pools {
		if !slices.ContainsFunc(c.Pools, func(q datastore.Pool) bool { return q.Name == name }) {
			out = append(out, poolRemove(name))
			delete(t.pools, name)
		}
	}
	// Updates.
	for _, p := range c.Pools {
		if old, ok := t.pools[p.Name]; !ok || old != p {
			out = append(out, poolUpdate(p))
			t.pools[p.Name] = p
		}
	}
	for _, n := range c.Nodes {
		m := t.nodeMsgs(n)
		old, had := t.nodes[n.Name]
		if !had || old.node != m.node {
			out = append(out, m.node)
		}
		for _, b := range old.blocks {
			if !slices.Contains(m.blocks, b) {
				out = append(out, cluster.BlockRemove{CIDR: b})
			}
		}
		for _, b := range m.blocks {
			if !had || !slices.Contains(old.blocks, b) {
				out = append(out, cluster.Block{CIDR: b, Node: n.Name})
			}
		}
		t.nodes[n.Name] = m
	}
	for _, p := range c.Pods {
		if p.Node != t.self {
			continue
		}
		e := endpointOf(p)
		if old, ok := t.pods[e.ID]; !ok || !reflect.DeepEqual(old, e) {
			out = append(out, e)
			t.pods[e.ID] = e
		}
	}
	cidrs := slices.Clone(c.ServiceCIDRs)
	slices.SortFunc(cidrs, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	if !slices.Equal(cidrs, t.serviceCIDRs) {
		out = append(out, serviceloop.ServiceCIDRs{CIDRs: cidrs})
		t.serviceCIDRs = cidrs
	}
	out = append(out, t.serviceMessages(c)...)
	if t.netpol != nil {
		var msgs []any
		msgs, t.netpolErrs = t.netpol.messages(c)
		out = append(out, msgs...)
	}
	return out
}

func findPod(c datastore.Cluster, key string) *datastore.Pod {
	for i := range c.Pods {
		if c.Pods[i].Key() == key {
			return &c.Pods[i]
		}
	}
	return nil
}

func poolUpdate(p datastore.Pool) any {
	return cluster.Pool{ID: p.Name, CIDR: p.CIDR, Masquerade: p.Masquerade}
}

func poolRemove(name string) any { return cluster.PoolRemove{ID: name} }
