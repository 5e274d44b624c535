package overlay

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/routetable"
)

// routeMode says how remote blocks are routed: New derives it from
// Options.Encap and Options.CrossSubnet.
type routeMode uint8

const (
	// modeTunnel routes every remote block through the tunnel device.
	modeTunnel routeMode = iota
	// modeCrossSubnet routes the blocks of nodes on one of the host's subnets
	// directly (via the node's underlay address on that subnet's
	// interface) and the others through the tunnel.
	modeCrossSubnet
	// modeDirect routes the blocks of nodes on one of the host's subnets
	// directly and the others not at all: a flat network without a
	// tunnel.
	modeDirect
)

// String returns "tunnel", "cross-subnet" or "direct".
func (m routeMode) String() string { return m.name("tunnel", "cross-subnet", "direct") }

// name returns the name of m among names, one per mode in order.
func (m routeMode) name(names ...string) string {
	if int(m) < len(names) {
		return names[m]
	}
	return fmt.Sprintf("routeMode(%d)", uint8(m))
}

// routeSink is where routes are declared: a *routetable.Table.
type routeSink interface {
	// RouteUpdate declares one route of a (class, interface) pair.
	RouteUpdate(class routetable.RouteClass, iface string, target routetable.Target) error
	// RouteRemove withdraws one route of a (class, interface) pair.
	RouteRemove(class routetable.RouteClass, iface string, key routetable.RouteKey) error
}

// nodeInfo is what the route calculation knows of a node.
type nodeInfo struct {
	// Underlay is the node's underlay address of the family; invalid when
	// unknown.
	Underlay netip.Addr
	// Gateway is the next hop of the node's blocks through the tunnel
	// (its tunnel address for VXLAN, its underlay address for IPIP);
	// invalid when the node has none, and then its blocks have no tunnel
	// route.
	Gateway netip.Addr
}

// routeKind is how one block is routed.
type routeKind uint8

const (
	// kindNone: the block has no route (its node is unknown, or neither
	// direct nor tunnel routing can reach it).
	kindNone routeKind = iota
	// kindTunnel: via the node's gateway, onlink, on the tunnel device.
	kindTunnel
	// kindDirect: via the node's underlay address on the interface of its
	// subnet.
	kindDirect
	// Blackhole: the node's own block.
	kindBlackhole
)

// decl is one declared route, kept small (no routetable.Target: the
// target is rebuilt from it): the block is its map key, the interface
// name is shared (the device's, a subnet's, InterfaceNone).
type decl struct {
	kind    routeKind
	class   routetable.RouteClass
	mtu     uint32
	iface   string
	gateway netip.Addr
}

// target returns the routetable.Target of block.
func (d decl) target(block netip.Prefix) routetable.Target {
	switch d.kind {
	case kindBlackhole:
		return routetable.Target{CIDR: block, Type: routetable.TargetBlackhole}
	case kindTunnel:
		return routetable.Target{CIDR: block, Type: routetable.TargetOnlink, Gateway: d.gateway, MTU: d.mtu}
	}
	return routetable.Target{CIDR: block, Gateway: d.gateway}
}

// routeCalc computes the routes of blocks and declares them on a routeSink,
// incrementally: only blocks whose node, owner, subnet or tunnel changed
// are looked at again on Flush.
//
// A block of this node gets a blackhole, unless blackholes are off or a
// connected subnet of a host interface holds the block (a bridge CNI's
// bridge with the block's gateway address): the kernel's connected route
// then holds the block's key, or a blackhole more specific than it would
// swallow the local pods' traffic. Such a block gets no route and is a
// conflict, reported once (Conflicts, NewConflicts) until the host changes.
type routeCalc struct {
	sink         routeSink
	classes      Classes
	mode         routeMode
	local        string
	device       string
	noBlackholes bool

	host      *hostView
	tunnelOK  bool
	tunnelMTU uint32

	nodes    map[string]nodeInfo
	blocks   map[netip.Prefix]string
	byNode   map[string][]netip.Prefix
	declared map[netip.Prefix]decl
	dirty    map[netip.Prefix]struct{}
	all      bool
	counts   [4]int

	// conflicts are this node's blocks held by a connected subnet, with
	// the subnet that holds each; fresh those found since the last
	// NewConflicts.
	conflicts map[netip.Prefix]subnet
	fresh     []blockConflict
	// underlayConflicts are the blocks that hold a node's underlay
	// address or overlap a connected subnet that does (routed into the
	// tunnel, or blackholed, they would take the tunnel's own packets, or
	// the underlay's): they get no route. underlays is every known node's
	// underlay address, sorted; stale once a node's changed.
	underlayConflicts map[netip.Prefix]subnet
	underlays         []netip.Addr
	underlaysStale    bool
}

// blockConflict is a block of this node that a connected subnet of a host
// interface holds, so that it gets no blackhole.
type blockConflict struct {
	// Block is the block; subnet the connected subnet that holds it, on
	// the interface Iface.
	Block, Subnet netip.Prefix
	Iface         string
	// Underlay: the block is on the underlay (this node's or another's),
	// and Subnet the underlay address it holds (a single-address prefix)
	// or the underlay's connected subnet it overlaps.
	Underlay bool
}

// newRouteCalc returns a route calculation for the node called local, whose
// tunnel device is device, declaring on sink; noBlackholes gives this
// node's blocks no blackhole.
func newRouteCalc(sink routeSink, classes Classes, mode routeMode, local, device string, noBlackholes bool) *routeCalc {
	return &routeCalc{
		sink: sink, classes: classes, mode: mode, local: local, device: device, noBlackholes: noBlackholes,
		conflicts:         map[netip.Prefix]subnet{},
		underlayConflicts: map[netip.Prefix]subnet{},
		nodes:             map[string]nodeInfo{},
		blocks:            map[netip.Prefix]string{},
		byNode:            map[string][]netip.Prefix{},
		declared:          map[netip.Prefix]decl{},
		dirty:             map[netip.Prefix]struct{}{},
	}
}

// SetNode records what is known of a node.
func (r *routeCalc) SetNode(name string, n nodeInfo) {
	old, ok := r.nodes[name]
	if ok && old == n {
		return
	}
	r.nodes[name] = n
	r.markNode(name)
	if old.Underlay != n.Underlay {
		r.underlaysChanged()
	}
}

// underlaysChanged notes that the set of underlay addresses changed: every
// block's conflict is looked at again.
func (r *routeCalc) underlaysChanged() {
	r.underlaysStale = true
	r.all = true
}

// holdsUnderlay returns an underlay address of a known node that p
// holds, if any.
func (r *routeCalc) holdsUnderlay(p netip.Prefix) (netip.Addr, bool) {
	if r.underlaysStale {
		r.underlays = r.underlays[:0]
		for _, n := range r.nodes {
			if n.Underlay.IsValid() {
				r.underlays = append(r.underlays, n.Underlay)
			}
		}
		slices.SortFunc(r.underlays, netip.Addr.Compare)
		r.underlaysStale = false
	}
	p = p.Masked()
	i, _ := slices.BinarySearchFunc(r.underlays, p.Addr(), netip.Addr.Compare)
	if i < len(r.underlays) && p.Contains(r.underlays[i]) {
		return r.underlays[i], true
	}
	return netip.Addr{}, false
}

// RemoveNode forgets a node: its blocks lose their routes (they stay
// known and get routes again when it comes back).
func (r *routeCalc) RemoveNode(name string) {
	old, ok := r.nodes[name]
	if !ok {
		return
	}
	delete(r.nodes, name)
	r.markNode(name)
	if old.Underlay.IsValid() {
		r.underlaysChanged()
	}
}

func (r *routeCalc) markNode(name string) {
	for _, b := range r.byNode[name] {
		r.dirty[b] = struct{}{}
	}
}

// SetBlock records that block belongs to node.
func (r *routeCalc) SetBlock(block netip.Prefix, node string) {
	if old, ok := r.blocks[block]; ok {
		if old == node {
			return
		}
		r.unindex(block, old)
	}
	r.blocks[block] = node
	r.byNode[node] = append(r.byNode[node], block)
	r.dirty[block] = struct{}{}
}

// RemoveBlock forgets a block and its route.
func (r *routeCalc) RemoveBlock(block netip.Prefix) {
	old, ok := r.blocks[block]
	if !ok {
		return
	}
	r.unindex(block, old)
	delete(r.blocks, block)
	r.dirty[block] = struct{}{}
}

func (r *routeCalc) unindex(block netip.Prefix, node string) {
	bs := r.byNode[node]
	if i := slices.Index(bs, block); i >= 0 {
		bs = slices.Delete(bs, i, i+1)
	}
	if len(bs) == 0 {
		delete(r.byNode, node)
	} else {
		r.byNode[node] = bs
	}
}

// SetHost records the host view; when its subnets differ from the last
// one's, every block is looked at again.
func (r *routeCalc) SetHost(h *hostView) {
	if !r.host.SameSubnets(h) || r.host == nil {
		r.all = true
	}
	r.host = h
}

// SetTunnel says whether the tunnel device is wanted (tunnel routes are
// declared only then) and the MTU of its routes (0 for none).
func (r *routeCalc) SetTunnel(ok bool, mtu uint32) {
	if ok != r.tunnelOK || mtu != r.tunnelMTU {
		r.all = true
	}
	r.tunnelOK, r.tunnelMTU = ok, mtu
}

// checkConflict records whether block, if this node's and to get a
// blackhole, is held by a connected subnet of the host; if another node's,
// whether it holds a node's underlay address or overlaps a connected
// subnet that holds one (checkUnderlayConflict).
func (r *routeCalc) checkConflict(block netip.Prefix) {
	var s subnet
	held := false
	owner, known := r.blocks[block]
	r.checkUnderlayConflict(block, known)
	if known && owner == r.local && !r.noBlackholes {
		s, held = r.host.Holding(block)
	}
	switch {
	case !held:
		delete(r.conflicts, block)
	case r.conflicts[block] != s:
		r.conflicts[block] = s
		r.fresh = append(r.fresh, blockConflict{Block: block, Subnet: s.Prefix, Iface: s.Iface})
	}
}

// checkUnderlayConflict records whether block, when known, holds a node's
// underlay address or overlaps a connected subnet of the host that holds
// one.
func (r *routeCalc) checkUnderlayConflict(block netip.Prefix, known bool) {
	var s subnet
	held := false
	if known {
		if a, ok := r.holdsUnderlay(block); ok {
			s, held = subnet{Prefix: netip.PrefixFrom(a, a.BitLen())}, true
		} else if r.host != nil {
			for _, hs := range r.host.subnets {
				if hs.Prefix.Overlaps(block) {
					if _, ok := r.holdsUnderlay(hs.Prefix); ok {
						s, held = hs, true
						break
					}
				}
			}
		}
	}
	switch {
	case !held:
		delete(r.underlayConflicts, block)
	case r.underlayConflicts[block] != s:
		r.underlayConflicts[block] = s
		r.fresh = append(r.fresh, blockConflict{Block: block, Subnet: s.Prefix, Iface: s.Iface, Underlay: true})
	}
}

// UnderlayConflicts returns the number of blocks that get no route
// because they hold a node's underlay address or overlap the
// underlay's subnet, at the last Flush.
func (r *routeCalc) UnderlayConflicts() int { return len(r.underlayConflicts) }

// Conflicts returns the number of this node's blocks that get no blackhole
// because a connected subnet holds them, at the last Flush.
func (r *routeCalc) Conflicts() int { return len(r.conflicts) }

// NewConflicts returns the conflicts found since the last call, once
// each: a block is reported again only after its conflict ended or another
// subnet came to hold it.
func (r *routeCalc) NewConflicts() []blockConflict {
	out := r.fresh
	r.fresh = nil
	return out
}

// Kind returns how block is routed at the last Flush.
func (r *routeCalc) Kind(block netip.Prefix) routeKind { return r.declared[block].kind }

// Count returns how many blocks are routed as kind at the last Flush.
func (r *routeCalc) Count(kind routeKind) int {
	if kind == kindNone {
		return len(r.blocks) - r.counts[kindTunnel] - r.counts[kindDirect] - r.counts[kindBlackhole]
	}
	return r.counts[kind]
}

// Pending reports whether Flush has work.
func (r *routeCalc) Pending() bool { return r.all || len(r.dirty) > 0 }

// want computes the route of block.
func (r *routeCalc) want(block netip.Prefix) (decl, bool) {
	owner, ok := r.blocks[block]
	if !ok {
		return decl{}, false
	}
	if _, held := r.underlayConflicts[block]; held {
		return decl{}, false
	}
	if owner == r.local {
		if _, held := r.conflicts[block]; held || r.noBlackholes {
			return decl{}, false
		}
		return decl{kind: kindBlackhole, class: r.classes.Blackhole, iface: routetable.InterfaceNone}, true
	}
	n, ok := r.nodes[owner]
	if !ok {
		return decl{}, false
	}
	if r.mode != modeTunnel && n.Underlay.IsValid() {
		if s, ok := r.host.SubnetOf(n.Underlay); ok {
			return decl{kind: kindDirect, class: r.classes.Direct, iface: s.Iface, gateway: n.Underlay}, true
		}
	}
	if r.mode != modeDirect && r.tunnelOK && n.Gateway.IsValid() {
		return decl{kind: kindTunnel, class: r.classes.Tunnel, iface: r.device, gateway: n.Gateway, mtu: r.tunnelMTU}, true
	}
	return decl{}, false
}

// Flush declares the routes of every block looked at again since the last
// Flush. A block whose route changes kind (a node moving between subnets)
// has its old route withdrawn and its new one declared under the same key,
// so the table replaces it in one write. Errors (the sink refusing a
// route) are joined; the other blocks are declared all the same.
func (r *routeCalc) Flush() error {
	var errs []error
	visit := func(block netip.Prefix) {
		r.checkConflict(block)
		old, had := r.declared[block]
		now, has := r.want(block)
		if had == has && (!had || old == now) {
			return
		}
		if had && (!has || old.class != now.class || old.iface != now.iface) {
			if err := r.sink.RouteRemove(old.class, old.iface, old.target(block).Key()); err != nil {
				errs = append(errs, err)
			}
		}
		if had {
			r.counts[old.kind]--
			delete(r.declared, block)
		}
		if has {
			if err := r.sink.RouteUpdate(now.class, now.iface, now.target(block)); err != nil {
				errs = append(errs, fmt.Errorf("route %s: %w", block, err))
				return
			}
			r.declared[block] = now
			r.counts[now.kind]++
		}
	}
	if r.all {
		for block := range r.declared {
			visit(block)
		}
		for block := range r.blocks {
			visit(block)
		}
	} else {
		for block := range r.dirty {
			visit(block)
		}
	}
	r.all = false
	// A fresh map rather than clear: iterating a map costs its capacity,
	// and after the first load that would be every block.
	r.dirty = map[netip.Prefix]struct{}{}
	return errors.Join(errs...)
}
