package wireguard

import (
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/routetable"
)

// failClosed reports whether prefix p, which a peer wins, gets a blackhole
// behind its route through the device (every one, unless
// Options.FailOpen, but a node's endpoint address itself, routed through
// the device with host encryption), and which nodes' endpoint addresses
// the blackhole holds (a block so wide that it covers the underlay, which
// a cluster should not have). Each of those gets a throw at
// FailClosedMetric (escapeTarget), so that while the device is gone the
// host still reaches the other nodes, its control plane among them, and
// the rest of the block stays closed.
func (m *Manager) failClosed(p netip.Prefix) (hole bool, escapes []netip.Addr) {
	if m.cfg.FailOpen {
		return false, nil
	}
	eps := m.endpointsIn(p)
	if p.IsSingleIP() && len(eps) > 0 {
		return false, nil
	}
	return true, eps
}

// endpointsIn returns the nodes' endpoint addresses p holds (m.endpoints
// is sorted: those are one run of it).
func (m *Manager) endpointsIn(p netip.Prefix) []netip.Addr {
	p = p.Masked()
	i, _ := slices.BinarySearchFunc(m.endpoints, p.Addr(), netip.Addr.Compare)
	j := i
	for j < len(m.endpoints) && p.Contains(m.endpoints[j]) {
		j++
	}
	return m.endpoints[i:j]
}

// endpointAddrs returns the nodes' endpoint addresses, sorted.
func (m *Manager) endpointAddrs() []netip.Addr {
	var out []netip.Addr
	for _, n := range m.in.nodes {
		if a := n.Endpoint.Addr(); a.IsValid() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// failClosedTarget is the blackhole behind p's route through the device.
func failClosedTarget(p netip.Prefix) routetable.Target {
	return routetable.Target{CIDR: p, Type: routetable.TargetBlackhole, Metric: FailClosedMetric}
}

// escapeTarget is the throw that lets endpoint address a out of a
// blackhole that holds it, back to the main table; at FailClosedMetric,
// behind a route of a's own through the device (host encryption).
func escapeTarget(a netip.Addr) routetable.Target {
	return routetable.Target{CIDR: netip.PrefixFrom(a, a.BitLen()), Type: routetable.TargetThrow, Metric: FailClosedMetric}
}
