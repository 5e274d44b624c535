package wireguard

import (
	"bytes"
	"net/netip"
	"slices"
	"time"
)

// devCache is the Manager's view of the device: what it read at the last
// resync and wrote since.
type devCache struct {
	priv       PrivateKey
	listenPort int
	fwmark     uint32
	peers      map[PublicKey]*cachedPeer
	// owner is the peer each allowed IP belongs to (WireGuard gives one
	// to a single peer).
	owner map[netip.Prefix]PublicKey
}

type cachedPeer struct {
	endpoint  netip.AddrPort
	keepalive time.Duration
	allowed   []netip.Prefix // sorted
}

func newCache(st DeviceState) *devCache {
	c := &devCache{priv: st.PrivateKey, listenPort: st.ListenPort, fwmark: st.FirewallMark,
		peers: make(map[PublicKey]*cachedPeer, len(st.Peers)), owner: map[netip.Prefix]PublicKey{}}
	for _, p := range st.Peers {
		cp := &cachedPeer{endpoint: unmapAddrPort(p.Endpoint), keepalive: p.PersistentKeepalive,
			allowed: sortPrefixes(slices.Clone(p.AllowedIPs))}
		c.peers[p.PublicKey] = cp
		for _, a := range cp.allowed {
			c.owner[a] = p.PublicKey
		}
	}
	return c
}

func unmapAddrPort(ap netip.AddrPort) netip.AddrPort {
	if !ap.IsValid() {
		return ap
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

func compareKeys(a, b PublicKey) int { return bytes.Compare(a[:], b[:]) }

// diffPeers returns the peer writes that turn have into want: removals
// first, then changes of existing peers (only what differs), then new
// peers; each group ordered by key.
func diffPeers(want map[PublicKey]*peerSpec, have map[PublicKey]*cachedPeer, keepalive time.Duration) []PeerConfig {
	keys := make(map[PublicKey]struct{}, len(want)+len(have))
	for k := range want {
		keys[k] = struct{}{}
	}
	for k := range have {
		keys[k] = struct{}{}
	}
	return diffKeys(keys, want, have, keepalive)
}

// diffKeys is diffPeers limited to keys.
func diffKeys(keys map[PublicKey]struct{}, want map[PublicKey]*peerSpec, have map[PublicKey]*cachedPeer, keepalive time.Duration) []PeerConfig {
	var removes, updates, adds []PeerConfig
	for k := range keys {
		w, h := want[k], have[k]
		switch {
		case w == nil && h == nil:
		case w == nil:
			removes = append(removes, PeerConfig{PublicKey: k, Remove: true})
		case h == nil:
			ka := keepalive
			adds = append(adds, PeerConfig{PublicKey: k, Endpoint: w.endpoint, PersistentKeepalive: &ka,
				ReplaceAllowedIPs: true, AllowedIPs: slices.Clone(w.allowed)})
		default:
			pc := PeerConfig{PublicKey: k, UpdateOnly: true}
			changed := false
			if h.endpoint != w.endpoint {
				pc.Endpoint, changed = w.endpoint, true
			}
			if h.keepalive != keepalive {
				ka := keepalive
				pc.PersistentKeepalive, changed = &ka, true
			}
			if !slices.Equal(h.allowed, w.allowed) {
				pc.ReplaceAllowedIPs, pc.AllowedIPs, changed = true, slices.Clone(w.allowed), true
			}
			if changed {
				updates = append(updates, pc)
			}
		}
	}
	byKey := func(a, b PeerConfig) int { return compareKeys(a.PublicKey, b.PublicKey) }
	slices.SortFunc(removes, byKey)
	slices.SortFunc(updates, byKey)
	slices.SortFunc(adds, byKey)
	return append(append(removes, updates...), adds...)
}

// apply records in the cache what a successful write of peers did, with
// WireGuard's semantics: an allowed IP given to one peer leaves any other.
func (c *devCache) apply(peers []PeerConfig) {
	if c.owner == nil {
		c.owner = map[netip.Prefix]PublicKey{}
		for k, p := range c.peers {
			for _, a := range p.allowed {
				c.owner[a] = k
			}
		}
	}
	for i := range peers {
		pc := &peers[i]
		p := c.peers[pc.PublicKey]
		if pc.Remove {
			if p != nil {
				c.disown(pc.PublicKey, p.allowed)
				delete(c.peers, pc.PublicKey)
			}
			continue
		}
		if p == nil {
			if pc.UpdateOnly {
				continue
			}
			p = &cachedPeer{}
			c.peers[pc.PublicKey] = p
		}
		if pc.Endpoint.IsValid() {
			p.endpoint = pc.Endpoint
		}
		if pc.PersistentKeepalive != nil {
			p.keepalive = *pc.PersistentKeepalive
		}
		if pc.ReplaceAllowedIPs {
			c.disown(pc.PublicKey, p.allowed)
			p.allowed = nil
		}
		if len(pc.AllowedIPs) == 0 {
			continue
		}
		for _, a := range pc.AllowedIPs {
			a = a.Masked()
			if prev, ok := c.owner[a]; ok && prev != pc.PublicKey {
				if o := c.peers[prev]; o != nil {
					o.allowed = slices.DeleteFunc(o.allowed, func(b netip.Prefix) bool { return b == a })
				}
			}
			c.owner[a] = pc.PublicKey
			p.allowed = append(p.allowed, a)
		}
		p.allowed = sortPrefixes(p.allowed)
	}
}

// disown forgets that k holds prefixes.
func (c *devCache) disown(k PublicKey, prefixes []netip.Prefix) {
	for _, a := range prefixes {
		if c.owner[a] == k {
			delete(c.owner, a)
		}
	}
}

// chunk splits peers into slices of at most n.
func chunk(peers []PeerConfig, n int) [][]PeerConfig {
	var out [][]PeerConfig
	for len(peers) > n {
		out = append(out, peers[:n])
		peers = peers[n:]
	}
	if len(peers) > 0 {
		out = append(out, peers)
	}
	return out
}
