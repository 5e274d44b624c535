package proxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Protocol is a service's transport protocol.
type Protocol uint8

// The protocols the NAT program translates.
const (
	// TCP is the default: the zero Protocol means TCP.
	TCP Protocol = 6
	// UDP services are translated per datagram flow.
	UDP Protocol = 17
)

// String returns "TCP" or "UDP" (or the number of an unknown protocol).
func (p Protocol) String() string {
	switch p.orTCP() {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

func (p Protocol) orTCP() Protocol {
	if p == 0 {
		return TCP
	}
	return p
}

// Service is one port of a Kubernetes-style service: the frontends it is
// reached at and the backends it spreads new connections over. A
// Kubernetes Service with several ports is several Services here, one per
// port (name them "namespace/name:port").
type Service struct {
	// Name identifies the service; required, unique. The Proxy derives the
	// service's ID in the maps from it and keeps that ID across restarts.
	Name string
	// Protocol is TCP (the zero value) or UDP.
	Protocol Protocol
	// Port is the service port on ClusterIPs and ExternalIPs; required.
	Port uint16
	// ClusterIPs are the service's virtual addresses (IPv4, IPv6 or both).
	ClusterIPs []netip.Addr
	// ExternalIPs are further addresses the service answers on, at Port,
	// for traffic from other hosts.
	ExternalIPs []netip.Addr
	// NodePort, when not zero, makes the service reachable at this port on
	// every node address (see NodeAddrsUpdate) of the service's families:
	// those of its cluster IPs, or without any, of its external IPs and
	// backends.
	NodePort uint16
	// ExternalTrafficLocal sends traffic that arrives from other hosts (at
	// a NodePort or an external IP) to this node's backends only, keeping
	// the client's address; without it such traffic goes to any backend
	// and, when that backend is elsewhere, is masqueraded (see
	// Options.MasqueradeMark).
	ExternalTrafficLocal bool
	// Backends are the ready endpoints. A frontend reaches the backends of
	// its own family; a service without any backend of a frontend's family
	// drops that frontend's new connections.
	Backends []Backend
}

// Backend is one endpoint of a service.
type Backend struct {
	// Addr is the endpoint's address and target port.
	Addr netip.AddrPort
	// Local says the endpoint runs on this node.
	Local bool
}

// Validate reports what is wrong with s, as an error wrapping
// ErrInvalidService, or nil.
func (s Service) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: service %q: %s", ErrInvalidService, s.Name, fmt.Sprintf(format, args...))
	}
	if s.Name == "" {
		return fmt.Errorf("%w: empty name", ErrInvalidService)
	}
	if p := s.Protocol.orTCP(); p != TCP && p != UDP {
		return bad("protocol %d is neither TCP nor UDP", uint8(s.Protocol))
	}
	if s.Port == 0 {
		return bad("port 0")
	}
	for _, a := range slices.Concat(s.ClusterIPs, s.ExternalIPs) {
		if err := checkFrontendAddr(a); err != nil {
			return bad("%v", err)
		}
	}
	for _, b := range s.Backends {
		a := b.Addr.Addr()
		if !b.Addr.IsValid() || b.Addr.Port() == 0 {
			return bad("backend %v: no address or port 0", b.Addr)
		}
		if a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || (a.Is4In6()) {
			return bad("backend %v: not a unicast address without zone", b.Addr)
		}
	}
	return nil
}

// checkFrontendAddr refuses addresses no frontend can have.
func checkFrontendAddr(a netip.Addr) error {
	if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.Is4In6() {
		return fmt.Errorf("frontend address %v: not a unicast address without zone", a)
	}
	return nil
}

// families are the IP families of s: those of its cluster IPs, or when it
// has none, those of its external IPs and backends. Its NodePort answers
// on the node addresses of these families only.
// The result is indexed by famIndex.
func (s Service) families() [2]bool {
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
	backends  [2][]beVal
	local     [2]uint32
}

// famIndex is 0 for IPv4, 1 for IPv6: the index of entries' per-family
// arrays.
func famIndex(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// boolOrder sorts true before false.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// build computes the entries of s on a node with addresses nodeAddrs. s
// must be valid.
func build(s Service, nodeAddrs []netip.Addr) entries {
	var e entries
	proto := uint8(s.Protocol.orTCP())
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
	for _, a := range s.ClusterIPs {
		add(a, s.Port, 0)
	}
	for _, a := range s.ExternalIPs {
		add(a, s.Port, external)
	}
	if s.NodePort != 0 {
		fams := s.families()
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

	// One backend per address (local if any listing says so), local ones
	// first, each group in address order.
	bs := slices.Clone(s.Backends)
	slices.SortFunc(bs, func(a, b Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return boolOrder(a.Local, b.Local)
	})
	bs = slices.CompactFunc(bs, func(a, b Backend) bool { return a.Addr == b.Addr })
	slices.SortStableFunc(bs, func(a, b Backend) int { return boolOrder(a.Local, b.Local) })
	for _, b := range bs {
		f := famIndex(b.Addr.Addr())
		e.backends[f] = append(e.backends[f], beVal{Addr: addr16(b.Addr.Addr()), Port: port16(b.Addr.Port())})
		if b.Local {
			e.local[f]++
		}
	}
	return e
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
	p := Protocol(k.Proto)
	return fmt.Sprintf("%v/%v", netip.AddrPortFrom(fromAddr16(k.Addr), fromPort16(k.Port)), p)
}
