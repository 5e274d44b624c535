package overlay

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// hostKernel is what reading the host view needs: its links and addresses.
type hostKernel interface {
	kernel.Links
	kernel.Addrs
}

// subnet is one connected subnet of the host: a prefix (masked) that an
// interface's address implies.
type subnet struct {
	// Prefix is the network, host bits cleared.
	Prefix netip.Prefix
	// Iface and Index name the interface that holds it.
	Iface string
	Index int
}

// hostView is the host's view of one family: its links, the addresses of the
// family and the subnets they imply. A hostView is immutable once read.
type hostView struct {
	family  ipfamily.Family
	links   map[int]kernel.Link
	byName  map[string]int
	addrs   []kernel.Addr
	subnets []subnet
}

// readHost lists the links and the addresses of family. Interfaces for
// which skip returns true (the tunnel device itself) hold no subnet.
func readHost(ctx context.Context, k hostKernel, family ipfamily.Family, skip func(name string) bool) (*hostView, error) {
	links, err := k.Links(ctx)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	addrs, err := k.Addrs(ctx, family)
	if err != nil {
		return nil, fmt.Errorf("list %s addresses: %w", family, err)
	}
	return newHost(family, links, addrs, skip), nil
}

// newHost builds a hostView from listings (see readHost).
func newHost(family ipfamily.Family, links []kernel.Link, addrs []kernel.Addr, skip func(name string) bool) *hostView {
	h := &hostView{family: family, links: make(map[int]kernel.Link, len(links)), byName: make(map[string]int, len(links))}
	for _, l := range links {
		h.links[l.Index] = l
		h.byName[l.Name] = l.Index
	}
	for _, a := range addrs {
		if !family.ContainsPrefix(a.Prefix) {
			continue
		}
		h.addrs = append(h.addrs, a)
		l, ok := h.links[a.LinkIndex]
		p := a.Prefix.Masked()
		if !ok || p.Bits() == p.Addr().BitLen() || p.Addr().IsLinkLocalUnicast() || p.Addr().IsLoopback() ||
			(skip != nil && skip(l.Name)) {
			continue
		}
		h.subnets = append(h.subnets, subnet{Prefix: p, Iface: l.Name, Index: l.Index})
	}
	// Longest prefix first, then lowest index: the interface a direct route
	// leaves through is chosen the same way on every read.
	slices.SortFunc(h.subnets, func(a, b subnet) int {
		if c := cmp.Compare(b.Prefix.Bits(), a.Prefix.Bits()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Index, b.Index); c != 0 {
			return c
		}
		return a.Prefix.Addr().Compare(b.Prefix.Addr())
	})
	h.subnets = slices.CompactFunc(h.subnets, func(a, b subnet) bool { return a == b })
	return h
}

// Family returns the family the hostView was read for.
func (h *hostView) Family() ipfamily.Family { return h.family }

// SubnetOf returns the interface whose subnet contains ip (the longest such
// prefix), or false when ip is on no connected subnet.
func (h *hostView) SubnetOf(ip netip.Addr) (subnet, bool) {
	if h == nil || !ip.IsValid() {
		return subnet{}, false
	}
	for _, s := range h.subnets {
		if s.Prefix.Contains(ip) {
			return s, true
		}
	}
	return subnet{}, false
}

// Holding returns the connected subnet that holds p (the longest subnet
// that contains p or equals it), or false when none does.
func (h *hostView) Holding(p netip.Prefix) (subnet, bool) {
	if h == nil || !p.IsValid() {
		return subnet{}, false
	}
	for _, s := range h.subnets {
		if s.Prefix.Bits() <= p.Bits() && s.Prefix.Contains(p.Addr()) {
			return s, true
		}
	}
	return subnet{}, false
}

// Holder returns the link that holds ip as one of its addresses.
func (h *hostView) Holder(ip netip.Addr) (kernel.Link, bool) {
	if h == nil || !ip.IsValid() {
		return kernel.Link{}, false
	}
	for _, a := range h.addrs {
		if a.Prefix.Addr() == ip {
			l, ok := h.links[a.LinkIndex]
			return l, ok
		}
	}
	return kernel.Link{}, false
}

// Link returns the link called name.
func (h *hostView) Link(name string) (kernel.Link, bool) {
	if h == nil {
		return kernel.Link{}, false
	}
	i, ok := h.byName[name]
	if !ok {
		return kernel.Link{}, false
	}
	return h.links[i], true
}

// Subnets returns the host's subnets, longest prefix first.
func (h *hostView) Subnets() []subnet {
	if h == nil {
		return nil
	}
	return slices.Clone(h.subnets)
}

// SameSubnets reports whether h and o have the same subnets on the same
// interfaces, so that no same-subnet decision can differ between them.
func (h *hostView) SameSubnets(o *hostView) bool {
	if h == nil || o == nil {
		return h == o
	}
	return slices.Equal(h.subnets, o.subnets)
}

// ifaceSubnets returns the subnets the prefixes imply, as newHost computes
// them for one interface (full-length, link-local and loopback prefixes
// imply none), sorted: to compare an interface's reported addresses with a
// hostView.
func ifaceSubnets(family ipfamily.Family, prefixes []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range prefixes {
		if !family.ContainsPrefix(p) {
			continue
		}
		m := p.Masked()
		if m.Bits() == m.Addr().BitLen() || m.Addr().IsLinkLocalUnicast() || m.Addr().IsLoopback() {
			continue
		}
		out = append(out, m)
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

// SubnetsOf returns the subnets of the interface called name, sorted as
// ifaceSubnets sorts them.
func (h *hostView) SubnetsOf(name string) []netip.Prefix {
	if h == nil {
		return nil
	}
	var out []netip.Prefix
	for _, s := range h.subnets {
		if s.Iface == name {
			out = append(out, s.Prefix)
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}
