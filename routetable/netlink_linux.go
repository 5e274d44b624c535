//go:build linux

package routetable

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/nodeplane/nodeplane/internal/rtnl"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// NetlinkKernel is the real Kernel: routes through a batched rtnetlink
// connection (many route messages per send, acknowledgements drained in
// bulk, dumps streamed without a per-route allocation), links, neighbours
// and conntrack through a netlink handle. Both are bound to one network
// namespace.
type NetlinkKernel struct {
	conn *rtnl.Conn
	h    *netlink.Handle

	mu     sync.Mutex
	closed bool
}

// OpenKernel opens netlink sockets in the network namespace ns (netns.Get
// for the caller's own, netns.GetFromName…). The caller keeps ns open only
// for the call; Close the kernel when done.
func OpenKernel(ns netns.NsHandle) (*NetlinkKernel, error) {
	if !ns.IsOpen() {
		return nil, fmt.Errorf("%w: namespace handle is not open", ErrInvalidOptions)
	}
	conn, err := rtnl.Open(ns)
	if err != nil {
		return nil, fmt.Errorf("routetable: open rtnetlink: %w", err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("routetable: open netlink handle: %w", err)
	}
	return &NetlinkKernel{conn: conn, h: h}, nil
}

// Close closes the sockets. Calls after Close fail.
func (k *NetlinkKernel) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	k.h.Close()
	return k.conn.Close()
}

func (k *NetlinkKernel) handle() (*netlink.Handle, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, errors.New("routetable: kernel closed")
	}
	return k.h, nil
}

// DumpRoutes implements Kernel with a streamed rtnetlink dump.
func (k *NetlinkKernel) DumpRoutes(ctx context.Context, family Family, table uint32, fn func(*KernelRoute) error, reset func()) error {
	return k.conn.DumpRoutes(ctx, uint8(family.AF()), table, converted(fn), reset)
}

// DumpInterfaceRoutes implements Kernel with a streamed rtnetlink dump that
// the kernel filters by interface.
func (k *NetlinkKernel) DumpInterfaceRoutes(ctx context.Context, family Family, table uint32, oif int, fn func(*KernelRoute) error, reset func()) error {
	if oif <= 0 || int64(oif) > math.MaxInt32 {
		return fmt.Errorf("routetable: interface index %d out of range", oif)
	}
	return k.conn.DumpInterfaceRoutes(ctx, uint8(family.AF()), table, int32(oif), converted(fn), reset)
}

// converted adapts fn to the dumped rtnl routes, reusing one KernelRoute.
func converted(fn func(*KernelRoute) error) func(*rtnl.Route) error {
	var kr KernelRoute
	return func(r *rtnl.Route) error {
		fromRtnl(r, &kr)
		return fn(&kr)
	}
}

// ApplyRoutes implements Kernel with batched rtnetlink writes.
func (k *NetlinkKernel) ApplyRoutes(ctx context.Context, ops []RouteOp) []error {
	rops := make([]rtnl.RouteOp, len(ops))
	for i := range ops {
		rops[i] = rtnl.RouteOp{Kind: rtnl.OpKind(ops[i].Kind), Route: toRtnl(&ops[i].Route)}
	}
	return k.conn.ApplyRoutes(ctx, rops)
}

// fromRtnl converts a dumped route into kr, reusing kr's storage.
func fromRtnl(r *rtnl.Route, kr *KernelRoute) {
	hops := kr.NextHops[:0]
	fam, _ := ipfamily.FromAF(int(r.Family)) // 0 (invalid) for any other family
	*kr = KernelRoute{
		Family: fam, Table: r.Table, Dst: r.Dst, Type: r.Type, Protocol: r.Protocol, Scope: r.Scope,
		TOS: r.TOS, Priority: r.Priority, OIF: int(r.OIF), Gateway: r.Gateway, PrefSrc: r.PrefSrc,
		Flags: r.Flags, MTU: r.MTU,
	}
	if len(r.NextHops) > 0 {
		for _, h := range r.NextHops {
			hops = append(hops, KernelNextHop{OIF: int(h.OIF), Gateway: h.Gateway, Weight: h.Weight, Flags: h.Flags})
		}
		kr.NextHops = hops
	}
}

func toRtnl(kr *KernelRoute) rtnl.Route {
	r := rtnl.Route{
		Family: uint8(kr.Family.AF()), Table: kr.Table, Dst: kr.Dst, Type: kr.Type, Protocol: kr.Protocol,
		Scope: kr.Scope, TOS: kr.TOS, Priority: kr.Priority, OIF: int32(kr.OIF), Gateway: kr.Gateway,
		PrefSrc: kr.PrefSrc, Flags: kr.Flags, MTU: kr.MTU,
	}
	if len(kr.NextHops) > 0 {
		r.NextHops = make([]rtnl.NextHop, len(kr.NextHops))
		for i, h := range kr.NextHops {
			r.NextHops[i] = rtnl.NextHop{OIF: int32(h.OIF), Gateway: h.Gateway, Weight: h.Weight, Flags: h.Flags}
		}
	}
	return r
}

// Links implements Kernel.
func (k *NetlinkKernel) Links(ctx context.Context) ([]Link, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	ls, err := nlutil.LinkList(ctx, h)
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(ls))
	for _, l := range ls {
		a := l.Attrs()
		if a == nil || a.Index <= 0 {
			continue
		}
		out = append(out, Link{Name: a.Name, Index: a.Index, Up: a.Flags&net.FlagUp != 0 && a.Flags&net.FlagRunning != 0})
	}
	return out, nil
}

// Neighbors implements Kernel.
func (k *NetlinkKernel) Neighbors(ctx context.Context, family Family) ([]Neighbor, error) {
	h, err := k.handle()
	if err != nil {
		return nil, err
	}
	ns, err := nlutil.NeighList(ctx, h, 0, family.AF())
	if err != nil {
		return nil, err
	}
	out := make([]Neighbor, 0, len(ns))
	for _, n := range ns {
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		if family == IPv4 {
			ip = ip.Unmap()
		}
		out = append(out, Neighbor{LinkIndex: n.LinkIndex, IP: ip, MAC: n.HardwareAddr, Permanent: n.State&netlink.NUD_PERMANENT != 0})
	}
	return out, nil
}

func toNeigh(n Neighbor) *netlink.Neigh {
	fam := netlink.FAMILY_V4
	if n.IP.Is6() && !n.IP.Is4In6() {
		fam = netlink.FAMILY_V6
	}
	return &netlink.Neigh{LinkIndex: n.LinkIndex, Family: fam, State: netlink.NUD_PERMANENT,
		IP: net.IP(n.IP.AsSlice()), HardwareAddr: n.MAC}
}

// SetNeighbor implements Kernel.
func (k *NetlinkKernel) SetNeighbor(_ context.Context, n Neighbor) error {
	h, err := k.handle()
	if err != nil {
		return err
	}
	return h.NeighSet(toNeigh(n))
}

// DeleteNeighbor implements Kernel.
func (k *NetlinkKernel) DeleteNeighbor(_ context.Context, n Neighbor) error {
	h, err := k.handle()
	if err != nil {
		return err
	}
	if err := h.NeighDel(toNeigh(n)); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// DeleteConntrack implements ConntrackDeleter through netlink
// (ConntrackDeleteFilters), not the conntrack CLI: one dump of the
// family's conntrack table, and a delete of each entry in which one of
// addrs is the source or destination of either direction.
func (k *NetlinkKernel) DeleteConntrack(_ context.Context, family Family, addrs []netip.Addr) (int, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	h, err := k.handle()
	if err != nil {
		return 0, err
	}
	f := addrFilter{addrs: make(map[netip.Addr]struct{}, len(addrs))}
	for _, a := range addrs {
		f.addrs[a.Unmap()] = struct{}{}
	}
	n, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(family.AF()), f)
	return int(n), err
}

// addrFilter matches a conntrack flow that has one of its addresses in
// either direction.
type addrFilter struct{ addrs map[netip.Addr]struct{} }

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f addrFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	for _, ip := range []net.IP{flow.Forward.SrcIP, flow.Forward.DstIP, flow.Reverse.SrcIP, flow.Reverse.DstIP} {
		if a, ok := netip.AddrFromSlice(ip); ok {
			if _, hit := f.addrs[a.Unmap()]; hit {
				return true
			}
		}
	}
	return false
}
