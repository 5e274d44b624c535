package wireguard

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nodeplane/nodeplane/ipfamily"
)

// referenceIntent computes from scratch what the incremental intent keeps:
// the peers (key → spec) and the routes (prefix → winner, "" for throw).
func referenceIntent(cfg *config, nodes map[string]nodePeer, self PublicKey) (map[PublicKey]*peerSpec, map[netip.Prefix]string) {
	in := &intent{cfg: cfg}
	claims := map[PublicKey]int{}
	if !self.IsZero() {
		claims[self]++
	}
	for _, u := range nodes {
		if !u.PublicKey.IsZero() {
			claims[u.PublicKey]++
		}
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	eligible := func(n string) bool {
		u := nodes[n]
		return !u.PublicKey.IsZero() && claims[u.PublicKey] == 1 && u.Endpoint.IsValid() && cfg.Family.Contains(u.Endpoint.Addr())
	}
	routes := map[netip.Prefix]string{}
	peers := map[PublicKey]*peerSpec{}
	for _, n := range names {
		u := nodes[n]
		if eligible(n) {
			ep := u.Endpoint
			if ep.Port() == 0 {
				ep = netip.AddrPortFrom(ep.Addr(), uint16(cfg.ListenPort))
			}
			peers[u.PublicKey] = &peerSpec{node: n, key: u.PublicKey, endpoint: ep, allowed: []netip.Prefix{}}
		}
	}
	for _, n := range names {
		u := nodes[n]
		for _, p := range in.prefixesOf(&u) {
			w, seen := routes[p]
			if !seen || (w == "" && eligible(n)) {
				if eligible(n) {
					routes[p] = n
				} else if !seen {
					routes[p] = ""
				}
			}
		}
	}
	for p, w := range routes {
		if w != "" {
			k := nodes[w].PublicKey
			peers[k].allowed = append(peers[k].allowed, p)
		}
	}
	for _, s := range peers {
		slices.SortFunc(s.allowed, comparePrefix)
	}
	return peers, routes
}

func TestIntentMatchesAFromScratchComputation(t *testing.T) {
	cfg := &config{Options: Options{Family: ipfamily.IPv4, ListenPort: 51820, EncryptHostTraffic: true}}
	keys := []PublicKey{{}, {1}, {2}, {3}, {4}}
	eps := []netip.AddrPort{{}, netip.MustParseAddrPort("198.18.0.1:0"), netip.MustParseAddrPort("198.18.0.2:4000"),
		netip.MustParseAddrPort("[fd00::1]:0")}
	pfxs := []netip.Prefix{netip.MustParsePrefix("10.0.1.0/24"), netip.MustParsePrefix("10.0.2.0/24"),
		netip.MustParsePrefix("10.0.3.0/24"), netip.MustParsePrefix("fd00:1::/64"), netip.MustParsePrefix("198.18.0.1/32")}
	names := []string{"a", "b", "c", "d", "e"}
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		in := newIntent(cfg)
		nodes := map[string]nodePeer{}
		var self PublicKey
		// What a device and a table would hold if only the dirty keys and
		// prefixes were written after each step.
		dev := map[PublicKey]*cachedPeer{}
		tbl := map[netip.Prefix]string{}
		for step := 0; step < 30; step++ {
			switch r.IntN(10) {
			case 0:
				n := names[r.IntN(len(names))]
				delete(nodes, n)
				in.set(n, nil)
			case 1:
				self = keys[r.IntN(len(keys))]
				in.setSelf(self)
			default:
				u := nodePeer{Node: names[r.IntN(len(names))], PublicKey: keys[r.IntN(len(keys))], Endpoint: eps[r.IntN(len(eps))]}
				for _, p := range pfxs {
					if r.IntN(3) == 0 {
						u.CIDRs = append(u.CIDRs, p)
					}
				}
				if r.IntN(4) == 0 {
					u.TunnelAddr = netip.MustParseAddr("10.9.9.9")
				}
				nodes[u.Node] = u
				in.set(u.Node, &u)
			}
			wantPeers, wantRoutes := referenceIntent(cfg, nodes, self)
			require.Equal(t, wantRoutes, in.winner, "seed %d step %d", seed, step)
			require.Equal(t, len(wantPeers), len(in.peers), "seed %d step %d", seed, step)
			for k, w := range wantPeers {
				require.NotNil(t, in.peers[k], "seed %d step %d", seed, step)
				require.True(t, w.equal(in.peers[k]), "seed %d step %d: %+v != %+v", seed, step, w, in.peers[k])
			}
			c := &devCache{peers: dev}
			c.apply(diffKeys(in.dirtyKeys, in.peers, dev, 0))
			clear(in.dirtyKeys)
			require.Empty(t, diffPeers(in.peers, dev, 0), "seed %d step %d: dirty keys missed a change", seed, step)
			for p := range in.dirtyPrefixes {
				if w, ok := in.winner[p]; ok {
					tbl[p] = w
				} else {
					delete(tbl, p)
				}
			}
			clear(in.dirtyPrefixes)
			require.Equal(t, wantRoutes, tbl, "seed %d step %d: dirty prefixes missed a change", seed, step)
		}
	}
}
