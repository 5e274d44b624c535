package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/nodeplane/nodeplane/cluster"
)

// families are the IP families of s: those of its cluster IPs, or when it
// has none, those of its external IPs and backends. Its NodePort answers
// on the node addresses of these families only.
// The result is indexed by famIndex.
func families(s cluster.Service) [2]bool {
	var fams [2]bool
	for _, a := range s.ClusterIPs {
		fams[famIndex(a)] = true
	}
	if len(s.ClusterIPs) > 0 {
		return fams
	}
	for _, a := range s.ExternalIPs {
		fams[famIndex(a)] = true
	}
	for _, b := range s.Backends {
		fams[famIndex(b.Addr.Addr())] = true
	}
	return fams
}

// frontend is one map entry a service wants, before its ID is known.
type frontend struct {
	key   feKey
	fam   int // famIndex
	flags uint32
}

// entries is what one service puts in the maps: its frontends and, per
// family (famIndex), its backends in ordinal order (local ones first) and
// how many of them are local.
type entries struct {
	frontends []frontend
	affinity  uint32 // session affinity timeout, seconds
	// sources are the source ranges per family (famIndex), service ID not
	// yet set.
	sources   [2][]srcKey
	backends  [2][]beVal
	local     [2]uint32
	localOnly [2]uint32 // how many of the local ones come first and serve local traffic alone
}

// famIndex is 0 for IPv4, 1 for IPv6: the index of entries' per-family
// arrays.
func famIndex(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// build computes the entries of s on a node with addresses nodeAddrs. s
// must be valid.
func build(s cluster.Service, nodeAddrs []netip.Addr) entries {
	var e entries
	proto := uint8(s.Protocol.OrTCP())
	add := func(a netip.Addr, port uint16, flags uint32) {
		e.frontends = append(e.frontends, frontend{
			key:   feKey{Addr: addr16(a), Port: port16(port), Proto: proto},
			fam:   famIndex(a),
			flags: flags,
		})
	}
	var external uint32
	if s.ExternalTrafficLocal {
		external = feExternalLocal
	}
	var internal uint32
	if s.InternalTrafficLocal {
		internal = feInternalLocal
	}
	e.affinity = uint32(s.AffinityTimeout / time.Second)
	for _, a := range s.ClusterIPs {
		add(a, s.Port, internal)
	}
	for _, a := range s.ExternalIPs {
		add(a, s.Port, external)
	}
	lb := external
	if len(s.SourceRanges) > 0 {
		lb |= feSourceRanges
		for _, p := range s.SourceRanges {
			e.sources[famIndex(p.Addr())] = append(e.sources[famIndex(p.Addr())], srcKeyOf(p))
		}
	}
	for _, a := range s.LoadBalancerIPs {
		add(a, s.Port, lb)
	}
	if s.NodePort != 0 {
		fams := families(s)
		for _, a := range nodeAddrs {
			if fams[famIndex(a)] {
				add(a, s.NodePort, feNodePort|external)
			}
		}
	}
	// One entry per frontend: an address that is both a cluster IP and an
	// external IP (or a node address) gets the flags of both.
	slices.SortFunc(e.frontends, func(a, b frontend) int { return compareFeKey(a.key, b.key) })
	merged := e.frontends[:0]
	for _, f := range e.frontends {
		if n := len(merged); n > 0 && merged[n-1].key == f.key {
			merged[n-1].flags |= f.flags
			continue
		}
		merged = append(merged, f)
	}
	e.frontends = merged

	// One backend per address (local if any listing says so, serving all
	// traffic if any says so), the local-only ones first, then the other
	// local ones, then the rest, each group in address order.
	bs := slices.Clone(s.Backends)
	slices.SortFunc(bs, func(a, b cluster.Backend) int { return a.Addr.Compare(b.Addr) })
	once := bs[:0]
	for _, b := range bs {
		if n := len(once); n > 0 && once[n-1].Addr == b.Addr {
			m := &once[n-1]
			m.Local = m.Local || b.Local
			m.LocalOnly = m.LocalOnly && b.LocalOnly
			continue
		}
		once = append(once, b)
	}
	bs = once
	slices.SortStableFunc(bs, func(a, b cluster.Backend) int { return cmp.Compare(backendGroup(a), backendGroup(b)) })
	for _, b := range bs {
		f := famIndex(b.Addr.Addr())
		e.backends[f] = append(e.backends[f], beVal{Addr: addr16(b.Addr.Addr()), Port: port16(b.Addr.Port())})
		if b.Local {
			e.local[f]++
		}
		if b.Local && b.LocalOnly {
			e.localOnly[f]++
		}
	}
	return e
}

// backendGroup is where backend b goes in a service's ordinals: 0 local
// only, 1 local, 2 elsewhere.
func backendGroup(b cluster.Backend) int {
	switch {
	case b.Local && b.LocalOnly:
		return 0
	case b.Local:
		return 1
	}
	return 2
}

// rangesHoldNode reports whether one of ranges holds one of the node's
// addresses: then the node's own processes may reach the service's
// source-ranged IPs (as kube-proxy lets them), which the connect-time
// programs, seeing no source address yet, check by this alone.
func rangesHoldNode(ranges []netip.Prefix, nodeAddrs []netip.Addr) bool {
	for _, r := range ranges {
		for _, a := range nodeAddrs {
			if r.Contains(a) {
				return true
			}
		}
	}
	return false
}

// outsideFrontend reports whether f, a frontend of s, serves clients
// outside the cluster: a node port, an external or a load-balancer IP.
func outsideFrontend(s cluster.Service, f frontend) bool {
	if f.flags&feNodePort != 0 {
		return true
	}
	a := fromAddr16(f.key.Addr)
	return slices.Contains(s.ExternalIPs, a) || slices.Contains(s.LoadBalancerIPs, a)
}

func compareFeKey(a, b feKey) int {
	if c := slices.Compare(a.Addr[:], b.Addr[:]); c != 0 {
		return c
	}
	if c := slices.Compare(a.Port[:], b.Port[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Proto, b.Proto)
}

// String is a frontend key as text, for errors and status.
func (k feKey) String() string {
	p := cluster.Protocol(k.Proto)
	return fmt.Sprintf("%v/%v", netip.AddrPortFrom(fromAddr16(k.Addr), fromPort16(k.Port)), p)
}
