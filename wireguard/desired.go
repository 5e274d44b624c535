package wireguard

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// nodePeer is what the Manager knows of a remote node, of its family: the
// node's key, endpoint, blocks and tunnel address, gathered from its
// cluster.Node and the cluster.Blocks it owns.
type nodePeer struct {
	// Node is the node's name.
	Node string
	// PublicKey is the node's key; zero for none (no peer: its prefixes
	// get throw routes).
	PublicKey PublicKey
	// Endpoint is the node's underlay address; port 0 means the
	// Manager's ListenPort. Invalid for none (no peer).
	Endpoint netip.AddrPort
	// CIDRs are the node's blocks.
	CIDRs []netip.Prefix
	// TunnelAddr, when valid, is routed to the node as a host prefix.
	TunnelAddr netip.Addr
}

// peerSpec is one peer the Manager wants.
type peerSpec struct {
	node     string
	key      PublicKey
	endpoint netip.AddrPort
	// allowed are the prefixes routed to the peer, sorted, unique.
	allowed []netip.Prefix
}

func (p *peerSpec) equal(o *peerSpec) bool {
	return p.node == o.node && p.key == o.key && p.endpoint == o.endpoint && slices.Equal(p.allowed, o.allowed)
}

// selfNode stands for this node in the claims of a key.
const selfNode = ""

// intent is what the Manager wants, kept up to date one node at a time so
// that a change costs what it touches, not what the cluster holds.
//
// A node is eligible (a peer) when it has a key no one else claims (this
// node included) and an endpoint of the family. Each of a node's prefixes
// (its CIDRs of the family, its tunnel address, its endpoint address with
// host encryption) goes to the first eligible node, by name, that lists
// it: a route through the device, and an allowed IP of that peer
// (WireGuard gives a prefix to one peer only). A prefix that only
// ineligible nodes list gets a throw route, so its traffic takes the main
// table.
type intent struct {
	cfg   *config
	nodes map[string]nodePeer
	// prefixes are each node's prefixes, sorted.
	prefixes map[string][]netip.Prefix
	eligible map[string]bool
	// claims are the nodes (selfNode for this one) that claim each key,
	// and owners the nodes that list each prefix, both sorted.
	claims map[PublicKey][]string
	owners map[netip.Prefix][]string
	// winner is the node a prefix is routed to; "" for a throw route;
	// absent for no route.
	winner map[netip.Prefix]string
	// won are the prefixes each eligible node wins.
	won    map[string]map[netip.Prefix]struct{}
	peers  map[PublicKey]*peerSpec
	peerOf map[string]PublicKey
	self   PublicKey

	// dirtyKeys are the peers whose spec changed since the device was
	// last written, dirtyPrefixes the prefixes whose route changed since
	// the table was last told.
	dirtyKeys     map[PublicKey]struct{}
	dirtyPrefixes map[netip.Prefix]struct{}
}

func newIntent(cfg *config) *intent {
	return &intent{cfg: cfg, nodes: map[string]nodePeer{}, prefixes: map[string][]netip.Prefix{}, eligible: map[string]bool{},
		claims: map[PublicKey][]string{}, owners: map[netip.Prefix][]string{}, winner: map[netip.Prefix]string{},
		won: map[string]map[netip.Prefix]struct{}{}, peers: map[PublicKey]*peerSpec{}, peerOf: map[string]PublicKey{},
		dirtyKeys: map[PublicKey]struct{}{}, dirtyPrefixes: map[netip.Prefix]struct{}{}}
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

func insertSorted(s []string, v string) []string {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

func removeSorted(s []string, v string) []string {
	if i, found := slices.BinarySearch(s, v); found {
		return slices.Delete(s, i, i+1)
	}
	return s
}

// prefixesOf returns the prefixes of u this family's Manager routes.
func (in *intent) prefixesOf(u *nodePeer) []netip.Prefix {
	fam := in.cfg.Family
	out := make([]netip.Prefix, 0, len(u.CIDRs)+2)
	for _, p := range u.CIDRs {
		if fam.ContainsPrefix(p) {
			out = append(out, p)
		}
	}
	if fam.Contains(u.TunnelAddr) {
		out = append(out, netip.PrefixFrom(u.TunnelAddr, u.TunnelAddr.BitLen()))
	}
	if in.cfg.EncryptHostTraffic && u.Endpoint.IsValid() && fam.Contains(u.Endpoint.Addr()) {
		out = append(out, netip.PrefixFrom(u.Endpoint.Addr(), u.Endpoint.Addr().BitLen()))
	}
	return sortPrefixes(out)
}

type nodeSet map[string]struct{}
type prefixSet map[netip.Prefix]struct{}

// set records node's update (nil: the node is gone) and updates what
// depends on it.
func (in *intent) set(node string, u *nodePeer) {
	affN, affP := nodeSet{node: {}}, prefixSet{}
	if old, had := in.nodes[node]; had {
		for _, p := range in.prefixes[node] {
			affP[p] = struct{}{}
			if in.owners[p] = removeSorted(in.owners[p], node); len(in.owners[p]) == 0 {
				delete(in.owners, p)
			}
		}
		in.unclaim(old.PublicKey, node, affN)
		delete(in.nodes, node)
		delete(in.prefixes, node)
	}
	if u != nil {
		in.nodes[node] = *u
		ps := in.prefixesOf(u)
		in.prefixes[node] = ps
		for _, p := range ps {
			affP[p] = struct{}{}
			in.owners[p] = insertSorted(in.owners[p], node)
		}
		in.claim(u.PublicKey, node, affN)
	}
	in.refresh(affN, affP)
}

// setSelf records this node's own public key, which no other node may
// claim.
func (in *intent) setSelf(k PublicKey) {
	if k == in.self {
		return
	}
	affN := nodeSet{}
	in.unclaim(in.self, selfNode, affN)
	in.self = k
	in.claim(k, selfNode, affN)
	in.refresh(affN, prefixSet{})
}

func (in *intent) claim(k PublicKey, node string, affN nodeSet) {
	if k.IsZero() {
		return
	}
	in.claims[k] = insertSorted(in.claims[k], node)
	for _, n := range in.claims[k] {
		affN[n] = struct{}{}
	}
}

func (in *intent) unclaim(k PublicKey, node string, affN nodeSet) {
	if k.IsZero() {
		return
	}
	if in.claims[k] = removeSorted(in.claims[k], node); len(in.claims[k]) == 0 {
		delete(in.claims, k)
	}
	for _, n := range in.claims[k] {
		affN[n] = struct{}{}
	}
}

func (in *intent) isEligible(node string) bool {
	u, ok := in.nodes[node]
	return ok && !u.PublicKey.IsZero() && len(in.claims[u.PublicKey]) == 1 &&
		u.Endpoint.IsValid() && in.cfg.Family.Contains(u.Endpoint.Addr())
}

// refresh recomputes the eligibility of the affected nodes, the winners of
// the affected prefixes (and of the prefixes of nodes whose eligibility
// changed), and the peers of every node touched.
func (in *intent) refresh(affN nodeSet, affP prefixSet) {
	delete(affN, selfNode)
	for n := range affN {
		e := in.isEligible(n)
		if e != in.eligible[n] {
			for _, p := range in.prefixes[n] {
				affP[p] = struct{}{}
			}
		}
		if e {
			in.eligible[n] = true
		} else {
			delete(in.eligible, n)
		}
	}
	for p := range affP {
		owners := in.owners[p]
		w, routed := "", len(owners) > 0
		for _, n := range owners {
			if in.eligible[n] {
				w = n
				break
			}
		}
		prev, had := in.winner[p]
		if had == routed && prev == w {
			continue
		}
		in.dirtyPrefixes[p] = struct{}{}
		if had && prev != "" {
			delete(in.won[prev], p)
			affN[prev] = struct{}{}
		}
		if !routed {
			delete(in.winner, p)
			continue
		}
		in.winner[p] = w
		if w != "" {
			if in.won[w] == nil {
				in.won[w] = map[netip.Prefix]struct{}{}
			}
			in.won[w][p] = struct{}{}
			affN[w] = struct{}{}
		}
	}
	for n := range affN {
		in.refreshPeer(n)
	}
}

// refreshPeer makes node's peer (or its absence) match its state.
func (in *intent) refreshPeer(node string) {
	oldKey, had := in.peerOf[node]
	if !in.eligible[node] {
		delete(in.won, node)
		if had {
			if p := in.peers[oldKey]; p != nil && p.node == node {
				delete(in.peers, oldKey)
			}
			delete(in.peerOf, node)
			in.dirtyKeys[oldKey] = struct{}{}
		}
		return
	}
	u := in.nodes[node]
	ep := u.Endpoint
	if ep.Port() == 0 {
		ep = netip.AddrPortFrom(ep.Addr(), uint16(in.cfg.ListenPort))
	}
	spec := &peerSpec{node: node, key: u.PublicKey, endpoint: ep, allowed: make([]netip.Prefix, 0, len(in.won[node]))}
	for p := range in.won[node] {
		spec.allowed = append(spec.allowed, p)
	}
	slices.SortFunc(spec.allowed, comparePrefix)
	if had && oldKey != u.PublicKey {
		if p := in.peers[oldKey]; p != nil && p.node == node {
			delete(in.peers, oldKey)
		}
		in.dirtyKeys[oldKey] = struct{}{}
	}
	if cur := in.peers[u.PublicKey]; cur == nil || !cur.equal(spec) {
		in.peers[u.PublicKey] = spec
		in.dirtyKeys[u.PublicKey] = struct{}{}
	}
	in.peerOf[node] = u.PublicKey
}

// notPeers returns the nodes that are not peers, sorted.
func (in *intent) notPeers() []string {
	var out []string
	for n := range in.nodes {
		if !in.eligible[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// conflicts returns the keys several nodes claim.
func (in *intent) conflicts() []Conflict {
	var out []Conflict
	for k, ns := range in.claims {
		if len(ns) > 1 {
			out = append(out, Conflict{PublicKey: k, Nodes: slices.Clone(ns)})
		}
	}
	slices.SortFunc(out, func(a, b Conflict) int { return slices.Compare(a.Nodes, b.Nodes) })
	return out
}

// keepalive returns the configured keepalive, whole seconds.
func (c *config) keepalive() time.Duration {
	return c.PersistentKeepalive.Truncate(time.Second)
}
