package wireguard

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// Validate checks u for a Manager of family f: a node name, a key and an
// endpoint as they may be (zero is allowed: the node then gets no peer),
// network prefixes without host bits set, and a tunnel address that is a
// plain address. Prefixes of the other family are allowed (a Manager
// ignores them). Errors wrap ErrInvalidUpdate.
func (u PeerUpdate) Validate() error {
	if u.Node == "" {
		return fmt.Errorf("%w: no node name", ErrInvalidUpdate)
	}
	if u.Endpoint.IsValid() && (!u.Endpoint.Addr().IsValid() || u.Endpoint.Addr().IsUnspecified() || u.Endpoint.Addr().Zone() != "") {
		return fmt.Errorf("%w: node %s: endpoint %s is not a plain unicast address", ErrInvalidUpdate, u.Node, u.Endpoint)
	}
	for _, p := range u.CIDRs {
		f := ipfamily.Of(p.Addr())
		if err := f.CheckNet(p); err != nil || f == 0 {
			return fmt.Errorf("%w: node %s: CIDR %s: %v", ErrInvalidUpdate, u.Node, p, err)
		}
	}
	if u.TunnelAddr.IsValid() && (u.TunnelAddr.IsUnspecified() || u.TunnelAddr.Zone() != "") {
		return fmt.Errorf("%w: node %s: tunnel address %s is not a plain address", ErrInvalidUpdate, u.Node, u.TunnelAddr)
	}
	return nil
}

// peerSpec is one peer the Manager wants.
type peerSpec struct {
	node     string
	key      PublicKey
	endpoint netip.AddrPort
	// allowed are the prefixes routed to the peer, sorted, unique.
	allowed []netip.Prefix
}

// desired is what the Manager wants, computed from the nodes' updates.
type desired struct {
	peers map[PublicKey]*peerSpec
	// routes are the peers' prefixes (through the device) and throws the
	// prefixes of nodes that are not peers; both sorted.
	routes, throws []netip.Prefix
	notPeers       []string
	conflicts      []Conflict
	byNode         map[string]PublicKey
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, comparePrefix)
	return slices.Compact(ps)
}

// computeDesired turns the nodes' updates into peers, routes and throws.
// self is this node's public key (zero before it is known).
func computeDesired(cfg *config, nodes map[string]PeerUpdate, self PublicKey) *desired {
	d := &desired{peers: map[PublicKey]*peerSpec{}, byNode: map[string]PublicKey{}}
	names := make([]string, 0, len(nodes))
	claims := map[PublicKey][]string{}
	if !self.IsZero() {
		claims[self] = []string{""}
	}
	for name, u := range nodes {
		names = append(names, name)
		if !u.PublicKey.IsZero() {
			claims[u.PublicKey] = append(claims[u.PublicKey], name)
		}
	}
	slices.Sort(names)
	for k, ns := range claims {
		if len(ns) > 1 {
			slices.Sort(ns)
			d.conflicts = append(d.conflicts, Conflict{PublicKey: k, Nodes: ns})
		}
	}
	slices.SortFunc(d.conflicts, func(a, b Conflict) int { return slices.Compare(a.Nodes, b.Nodes) })
	taken := map[netip.Prefix]bool{}
	var throws []netip.Prefix
	for _, name := range names {
		u := nodes[name]
		allowed := make([]netip.Prefix, 0, len(u.CIDRs)+2)
		for _, p := range u.CIDRs {
			if cfg.Family.ContainsPrefix(p) {
				allowed = append(allowed, p)
			}
		}
		if cfg.Family.Contains(u.TunnelAddr) {
			allowed = append(allowed, netip.PrefixFrom(u.TunnelAddr, u.TunnelAddr.BitLen()))
		}
		ep := u.Endpoint
		epOK := ep.IsValid() && cfg.Family.Contains(ep.Addr())
		if epOK && cfg.EncryptHostTraffic {
			allowed = append(allowed, netip.PrefixFrom(ep.Addr(), ep.Addr().BitLen()))
		}
		allowed = sortPrefixes(allowed)
		if u.PublicKey.IsZero() || len(claims[u.PublicKey]) != 1 || !epOK {
			d.notPeers = append(d.notPeers, name)
			throws = append(throws, allowed...)
			continue
		}
		if ep.Port() == 0 {
			ep = netip.AddrPortFrom(ep.Addr(), uint16(cfg.ListenPort))
		}
		// A prefix goes to one peer only (WireGuard would move it): the
		// first node by name keeps it.
		own := allowed[:0]
		for _, p := range allowed {
			if !taken[p] {
				taken[p] = true
				own = append(own, p)
			}
		}
		d.peers[u.PublicKey] = &peerSpec{node: name, key: u.PublicKey, endpoint: ep, allowed: own}
		d.byNode[name] = u.PublicKey
		d.routes = append(d.routes, own...)
	}
	d.routes = sortPrefixes(d.routes)
	for _, p := range sortPrefixes(throws) {
		if !taken[p] {
			d.throws = append(d.throws, p)
		}
	}
	return d
}

// keepalive returns the configured keepalive, whole seconds.
func (c *config) keepalive() time.Duration {
	return c.PersistentKeepalive.Truncate(time.Second)
}
