package routetablefake

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/routetable"
)

// Call is a kind of Kernel call, for Inject and Calls.
type Call uint8

const (
	// CallReplace is an OpReplace in ApplyRoutes.
	CallReplace Call = iota + 1
	// CallAdd is an OpAdd in ApplyRoutes.
	CallAdd
	// CallDelete is an OpDelete in ApplyRoutes.
	CallDelete
	// CallDump is DumpRoutes.
	CallDump
	// CallLinks is Links.
	CallLinks
	// CallNeighbors is Neighbors.
	CallNeighbors
	// CallSetNeighbor is SetNeighbor.
	CallSetNeighbor
	// CallDeleteNeighbor is DeleteNeighbor.
	CallDeleteNeighbor
	// CallConntrack is DeleteConntrack.
	CallConntrack
	// CallDumpInterface is DumpInterfaceRoutes.
	CallDumpInterface
	numCalls
)

var callNames = [...]string{"", "replace", "add", "delete", "dump", "links", "neighbors", "set-neighbor",
	"delete-neighbor", "conntrack", "dump-interface"}

// String returns the call's name, such as "replace".
func (c Call) String() string {
	if c > 0 && c < numCalls {
		return callNames[c]
	}
	return fmt.Sprintf("Call(%d)", uint8(c))
}

// Fault makes calls fail.
type Fault struct {
	// Call is the kind of call that fails.
	Call Call
	// Dst, if set, limits a route fault (replace, add, delete) to routes
	// with this destination.
	Dst netip.Prefix
	// Err is what the call returns; nil means EIO (wrapped with
	// ErrInjected). For route calls use a syscall.Errno such as
	// syscall.ENODEV to mimic a kernel refusal.
	Err error
	// Times is how many matching calls fail: 0 means 1, negative means
	// every one until ClearFaults.
	Times int
	// Interrupt, for CallDump and CallDumpInterface, restarts the dump halfway instead of
	// failing it, as the kernel does when a concurrent change interrupts
	// a dump: the caller's reset function is called and every route is
	// reported again from the start.
	Interrupt bool
}

// Flow is a conntrack entry: its original-direction addresses.
type Flow struct {
	// Family is the flow's family.
	Family routetable.Family
	// Src and Dst are the original source and destination.
	Src, Dst netip.Addr
}

type link struct {
	name  string
	index int
	up    bool
	// noCarrier is set while the link has lost its carrier.
	noCarrier bool
}

type routeKey struct {
	family   routetable.Family
	table    uint32
	dst      netip.Prefix
	tos      uint8
	priority uint32
}

type neighKey struct {
	index int
	ip    netip.Addr
}

// Kernel is the in-memory kernel. The zero value is not usable; call New.
type Kernel struct {
	mu        sync.Mutex
	links     map[int]*link
	nextIndex int
	routes    map[routeKey]routetable.KernelRoute
	neighs    map[neighKey]routetable.Neighbor
	flows     []Flow
	faults    []*Fault
	calls     [numCalls]int
}

var _ routetable.Kernel = (*Kernel)(nil)

// New returns a Kernel with one link, lo (index 1, up).
func New() *Kernel {
	return &Kernel{
		links:     map[int]*link{1: {name: "lo", index: 1, up: true}},
		nextIndex: 2,
		routes:    map[routeKey]routetable.KernelRoute{},
		neighs:    map[neighKey]routetable.Neighbor{},
	}
}

// Inject adds a fault. Faults are checked in the order they were added.
func (k *Kernel) Inject(f Fault) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if f.Times == 0 {
		f.Times = 1
	}
	k.faults = append(k.faults, &f)
}

// ClearFaults removes every fault.
func (k *Kernel) ClearFaults() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.faults = nil
}

// Calls returns how many calls of kind c were made (every route operation
// counts as one call of its kind).
func (k *Kernel) Calls(c Call) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c >= numCalls {
		return 0
	}
	return k.calls[c]
}

// Writes returns the number of route operations made (replace, add and
// delete).
func (k *Kernel) Writes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[CallReplace] + k.calls[CallAdd] + k.calls[CallDelete]
}

// ResetCalls zeroes the call counters.
func (k *Kernel) ResetCalls() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls = [numCalls]int{}
}

// fault returns the fault for a call of kind c on dst (zero for non-route
// calls), consuming one of its times, or nil.
func (k *Kernel) fault(c Call, dst netip.Prefix) *Fault {
	for i, f := range k.faults {
		if f.Call != c || (f.Dst.IsValid() && f.Dst != dst) {
			continue
		}
		hit := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				k.faults = slices.Delete(k.faults, i, i+1)
			}
		}
		if hit.Err == nil {
			hit.Err = errs.Also(fmt.Errorf("injected failure (%w)", syscall.EIO), ErrInjected)
		}
		return &hit
	}
	return nil
}

// AddLink creates a link, down, and returns its index. The name must be
// free.
func (k *Kernel) AddLink(name string) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if name == "" || k.byName(name) != nil {
		return 0, fmt.Errorf("routetablefake: link %q: %w", name, syscall.EEXIST)
	}
	idx := k.nextIndex
	k.nextIndex++
	k.links[idx] = &link{name: name, index: idx}
	return idx, nil
}

func (k *Kernel) byName(name string) *link {
	for _, l := range k.links {
		if l.name == name {
			return l
		}
	}
	return nil
}

// LinkIndex returns the index of the link called name.
func (k *Kernel) LinkIndex(name string) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.byName(name); l != nil {
		return l.index, true
	}
	return 0, false
}

// SetLinkUp brings a link up or down. Going down removes the routes
// through it (except IPv4 local routes) and its neighbour entries; a
// multipath route keeps its next hop through it, marked dead (FlagDead,
// FlagLinkdown), until all its next hops are dead. Coming up revives the
// dead next hops.
func (k *Kernel) SetLinkUp(name string, up bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byName(name)
	if l == nil {
		return fmt.Errorf("routetablefake: link %q: %w", name, syscall.ENODEV)
	}
	if l.up && !up {
		k.flushLink(l.index, false)
	}
	l.up = up
	k.markLink(l)
	return nil
}

// SetLinkCarrier gives a link its carrier or takes it away, as a cable
// or a veth peer going down does. Unlike SetLinkUp(false), losing the
// carrier keeps the routes through the link (the kernel marks them
// linkdown) and writes through it still succeed; Links reports the link
// down until the carrier is back.
func (k *Kernel) SetLinkCarrier(name string, carrier bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byName(name)
	if l == nil {
		return fmt.Errorf("routetablefake: link %q: %w", name, syscall.ENODEV)
	}
	l.noCarrier = !carrier
	k.markLink(l)
	return nil
}

// RenameLink renames a link. Like the kernel, it renames only a link that
// is down (EBUSY otherwise).
func (k *Kernel) RenameLink(name, newName string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byName(name)
	if l == nil {
		return fmt.Errorf("routetablefake: link %q: %w", name, syscall.ENODEV)
	}
	if l.up {
		return fmt.Errorf("routetablefake: rename %q: %w", name, syscall.EBUSY)
	}
	if newName == "" || k.byName(newName) != nil {
		return fmt.Errorf("routetablefake: link %q: %w", newName, syscall.EEXIST)
	}
	l.name = newName
	return nil
}

// DeleteLink deletes a link and everything through it. A multipath route
// through it goes in IPv4; in IPv6 only its next hop through the link
// goes (with one left, it becomes a single-path route).
func (k *Kernel) DeleteLink(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.byName(name)
	if l == nil {
		return fmt.Errorf("routetablefake: link %q: %w", name, syscall.ENODEV)
	}
	k.flushLink(l.index, true)
	delete(k.links, l.index)
	return nil
}

// flushLink removes the routes and neighbours through link index, which
// went down or (deleted) away. A multipath route keeps its other next
// hops: the ones through a link that went down are marked dead, and the
// route goes when all are; IPv6 drops the next hops through a deleted link
// (the route becomes single-path with one left), IPv4 the whole route.
func (k *Kernel) flushLink(index int, deleted bool) {
	dead := uint8(routetable.FlagDead | routetable.FlagLinkdown)
	for key, r := range k.routes {
		if !through(&r, index) || (!deleted && r.Family == routetable.IPv4 && r.Type == routetable.RTNLocal) {
			continue
		}
		if len(r.NextHops) < 2 || (deleted && r.Family == routetable.IPv4) {
			delete(k.routes, key)
			continue
		}
		hops, alive := make([]routetable.KernelNextHop, 0, len(r.NextHops)), 0
		for _, h := range r.NextHops {
			if h.OIF == index {
				if deleted {
					continue
				}
				h.Flags |= dead
			}
			if h.Flags&dead != dead {
				alive++
			}
			hops = append(hops, h)
		}
		switch {
		case alive == 0:
			delete(k.routes, key)
			continue
		case len(hops) == 1:
			h := hops[0]
			r.OIF, r.Gateway, r.Flags, r.NextHops = h.OIF, h.Gateway, uint32(h.Flags), nil
		default:
			r.NextHops = hops
		}
		k.routes[key] = r
	}
	for key := range k.neighs {
		if key.index == index {
			delete(k.neighs, key)
		}
	}
}

// markLink sets the dead and linkdown flags of the routes and next hops
// through l from its state: the kernel revives a dead next hop when its
// link comes back up, and marks what goes through a link without carrier
// linkdown.
func (k *Kernel) markLink(l *link) {
	for key, r := range k.routes {
		if through(&r, l.index) {
			markRoute(&r, l)
			k.routes[key] = r
		}
	}
}

// markRoute sets the flags of r and of its next hops through l from l's
// state. Local routes are never marked.
func markRoute(r *routetable.KernelRoute, l *link) {
	if r.Type == routetable.RTNLocal {
		return
	}
	r.NextHops = slices.Clone(r.NextHops)
	if r.OIF == l.index {
		r.Flags = linkFlags(r.Flags, l)
	}
	for i := range r.NextHops {
		if r.NextHops[i].OIF == l.index {
			r.NextHops[i].Flags = uint8(linkFlags(uint32(r.NextHops[i].Flags), l))
		}
	}
}

// linkFlags returns flags with FlagDead and FlagLinkdown as link l's
// state says (a down link's next hops are already dead: kept).
func linkFlags(flags uint32, l *link) uint32 {
	if !l.up {
		return flags
	}
	flags &^= routetable.FlagDead | routetable.FlagLinkdown
	if l.noCarrier {
		flags |= routetable.FlagLinkdown
	}
	return flags
}

// through reports whether r leaves through link index: as its interface or
// one of its next hops.
func through(r *routetable.KernelRoute, index int) bool {
	if r.OIF == index {
		return true
	}
	for _, h := range r.NextHops {
		if h.OIF == index {
			return true
		}
	}
	return false
}

// AddFlow adds a conntrack flow.
func (k *Kernel) AddFlow(f Flow) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.flows = append(k.flows, f)
}

// Flows returns the conntrack flows.
func (k *Kernel) Flows() []Flow {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.flows)
}

// normalise stores r as the kernel reports it.
func normalise(r routetable.KernelRoute) routetable.KernelRoute {
	if r.Table == 0 {
		r.Table = routetable.TableMain
	}
	r.Flags &= routetable.FlagOnlink
	r.MTU = min(r.MTU, routetable.MaxMTU) // the kernel caps it
	r.NextHops = slices.Clone(r.NextHops)
	for i := range r.NextHops {
		r.NextHops[i].Flags &= uint8(routetable.FlagOnlink)
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		r.OIF, r.Gateway, r.NextHops = h.OIF, h.Gateway, nil
		r.Flags |= uint32(h.Flags)
	}
	if r.Family == routetable.IPv6 {
		if r.Priority == 0 {
			r.Priority = 1024
		}
		r.Scope = routetable.ScopeUniverse
		switch r.Type {
		case routetable.RTNBlackhole, routetable.RTNUnreachable, routetable.RTNProhibit, routetable.RTNThrow:
			r.OIF = 1
		}
	}
	return r
}

func keyOf(r *routetable.KernelRoute) routeKey {
	return routeKey{family: r.Family, table: r.Table, dst: r.Dst, tos: r.TOS, priority: r.Priority}
}

// check validates a route to write, as the kernel would.
func (k *Kernel) check(r *routetable.KernelRoute) error {
	if !r.Family.Valid() || !r.Dst.IsValid() || r.Dst.Masked() != r.Dst || (r.Family == routetable.IPv4) != r.Dst.Addr().Is4() {
		return syscall.EINVAL
	}
	addrs := []netip.Addr{r.Gateway, r.PrefSrc}
	for _, h := range r.NextHops {
		addrs = append(addrs, h.Gateway)
	}
	for _, a := range addrs {
		if a.IsValid() && a.IsUnspecified() {
			return syscall.EINVAL // refused before it is sent (rtnl), or by the kernel
		}
	}
	hasPath := r.OIF != 0 || r.Gateway.IsValid() || len(r.NextHops) > 0
	switch r.Type {
	case routetable.RTNUnicast:
		if !hasPath {
			return syscall.EINVAL
		}
	case routetable.RTNLocal:
	case routetable.RTNBlackhole, routetable.RTNUnreachable, routetable.RTNProhibit, routetable.RTNThrow:
		if hasPath {
			return syscall.EINVAL
		}
		return nil
	default:
		return syscall.EINVAL
	}
	oifs := []int{r.OIF}
	for _, h := range r.NextHops {
		oifs = append(oifs, h.OIF)
	}
	for _, oif := range oifs {
		if oif == 0 {
			continue
		}
		l := k.links[oif]
		if l == nil {
			return syscall.ENODEV
		}
		if !l.up {
			return syscall.ENETDOWN
		}
	}
	return nil
}

// AddRoute adds a route as another agent would (NLM_F_EXCL), without
// counting a call.
func (k *Kernel) AddRoute(r routetable.KernelRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.write(routetable.OpAdd, r)
}

// DeleteRoute deletes the route with the key of r as an administrator
// would, without counting a call. Fields set in r must match as in an
// OpDelete.
func (k *Kernel) DeleteRoute(r routetable.KernelRoute) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.write(routetable.OpDelete, r)
}

// write performs one route operation.
func (k *Kernel) write(kind routetable.OpKind, r routetable.KernelRoute) error {
	if r.Table == 0 {
		r.Table = routetable.TableMain
	}
	switch kind {
	case routetable.OpAdd, routetable.OpReplace:
		if err := k.check(&r); err != nil {
			return err
		}
		r = normalise(r)
		for _, l := range k.links {
			if through(&r, l.index) {
				markRoute(&r, l)
			}
		}
		key := keyOf(&r)
		if _, ok := k.routes[key]; ok && kind == routetable.OpAdd {
			return syscall.EEXIST
		}
		k.routes[key] = r
		return nil
	case routetable.OpDelete:
		if !r.Family.Valid() || !r.Dst.IsValid() {
			return syscall.EINVAL
		}
		if r.Family == routetable.IPv6 && r.Type >= routetable.RTNBlackhole && r.Type <= routetable.RTNThrow {
			r.OIF = 0
		}
		for _, key := range k.sortedKeys(r.Family, r.Table) {
			got := k.routes[key]
			if got.Dst != r.Dst || got.TOS != r.TOS ||
				(r.Priority != 0 && got.Priority != r.Priority) ||
				(r.Type != 0 && got.Type != r.Type) ||
				(r.Protocol != 0 && got.Protocol != r.Protocol) ||
				(r.Family == routetable.IPv4 && r.Scope != routetable.ScopeNowhere && got.Scope != r.Scope) ||
				(r.OIF != 0 && firstOIF(&got) != r.OIF) {
				continue
			}
			delete(k.routes, key)
			return nil
		}
		return syscall.ESRCH
	}
	return syscall.EOPNOTSUPP
}

func firstOIF(r *routetable.KernelRoute) int {
	if r.OIF == 0 && len(r.NextHops) > 0 {
		return r.NextHops[0].OIF
	}
	return r.OIF
}

// sortedKeys returns the keys of family's routes in table (0: every
// table), ordered by destination and metric.
func (k *Kernel) sortedKeys(family routetable.Family, table uint32) []routeKey {
	var keys []routeKey
	for key := range k.routes {
		if key.family == family && (table == 0 || key.table == table) {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b routeKey) int {
		return cmp.Or(cmp.Compare(a.table, b.table), a.dst.Addr().Compare(b.dst.Addr()), cmp.Compare(a.dst.Bits(), b.dst.Bits()),
			cmp.Compare(a.tos, b.tos), cmp.Compare(a.priority, b.priority))
	})
	return keys
}

// Routes returns family's routes in table (0 = main), ordered by
// destination and metric.
func (k *Kernel) Routes(family routetable.Family, table uint32) []routetable.KernelRoute {
	k.mu.Lock()
	defer k.mu.Unlock()
	if table == 0 {
		table = routetable.TableMain
	}
	keys := k.sortedKeys(family, table)
	out := make([]routetable.KernelRoute, len(keys))
	for i, key := range keys {
		out[i] = k.routes[key]
		out[i].NextHops = slices.Clone(out[i].NextHops)
	}
	return out
}

// Route returns the route with dst and metric (as stored: 1024 for an IPv6
// metric 0) in table.
func (k *Kernel) Route(family routetable.Family, table uint32, dst netip.Prefix, metric uint32) (routetable.KernelRoute, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if table == 0 {
		table = routetable.TableMain
	}
	r, ok := k.routes[routeKey{family: family, table: table, dst: dst, priority: metric}]
	r.NextHops = slices.Clone(r.NextHops)
	return r, ok
}

// DumpRoutes implements routetable.Kernel; table 0 dumps every table.
func (k *Kernel) DumpRoutes(ctx context.Context, family routetable.Family, table uint32, fn func(*routetable.KernelRoute) error, reset func()) error {
	return k.dump(ctx, CallDump, family, table, 0, fn, reset)
}

// DumpInterfaceRoutes implements routetable.Kernel: DumpRoutes limited to
// the routes through link oif (as their interface or one of their next
// hops).
func (k *Kernel) DumpInterfaceRoutes(ctx context.Context, family routetable.Family, table uint32, oif int, fn func(*routetable.KernelRoute) error, reset func()) error {
	if oif <= 0 {
		return fmt.Errorf("routetablefake: interface index %d: %w", oif, syscall.EINVAL)
	}
	return k.dump(ctx, CallDumpInterface, family, table, oif, fn, reset)
}

// dump implements DumpRoutes (oif 0) and DumpInterfaceRoutes.
func (k *Kernel) dump(ctx context.Context, call Call, family routetable.Family, table uint32, oif int, fn func(*routetable.KernelRoute) error, reset func()) error {
	k.mu.Lock()
	k.calls[call]++
	f := k.fault(call, netip.Prefix{})
	keys := k.sortedKeys(family, table)
	routes := make([]routetable.KernelRoute, 0, len(keys))
	for _, key := range keys {
		r := k.routes[key]
		if oif == 0 || through(&r, oif) {
			r.NextHops = slices.Clone(r.NextHops)
			routes = append(routes, r)
		}
	}
	k.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	emit := func(rs []routetable.KernelRoute) error {
		for i := range rs {
			r := rs[i]
			if err := fn(&r); err != nil {
				return err
			}
		}
		return nil
	}
	if f != nil {
		half := routes[:len(routes)/2]
		if err := emit(half); err != nil {
			return err
		}
		if !f.Interrupt {
			return f.Err
		}
		if reset != nil {
			reset()
		}
	}
	return emit(routes)
}

// ApplyRoutes implements routetable.Kernel.
func (k *Kernel) ApplyRoutes(ctx context.Context, ops []routetable.RouteOp) []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	errs := make([]error, len(ops))
	for i, op := range ops {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		var c Call
		switch op.Kind {
		case routetable.OpReplace:
			c = CallReplace
		case routetable.OpAdd:
			c = CallAdd
		case routetable.OpDelete:
			c = CallDelete
		default:
			errs[i] = fmt.Errorf("routetablefake: %v: %w", op.Kind, syscall.EOPNOTSUPP)
			continue
		}
		k.calls[c]++
		if f := k.fault(c, op.Route.Dst); f != nil {
			errs[i] = fmt.Errorf("routetablefake: %v %v: %w", op.Kind, op.Route.Dst, f.Err)
			continue
		}
		if err := k.write(op.Kind, op.Route); err != nil {
			errs[i] = fmt.Errorf("routetablefake: %v %v: %w", op.Kind, op.Route.Dst, err)
		}
	}
	return errs
}

// Links implements routetable.Kernel.
func (k *Kernel) Links(context.Context) ([]routetable.Link, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[CallLinks]++
	if f := k.fault(CallLinks, netip.Prefix{}); f != nil {
		return nil, f.Err
	}
	out := make([]routetable.Link, 0, len(k.links))
	for _, l := range k.links {
		out = append(out, routetable.Link{Name: l.name, Index: l.index, Up: l.up && !l.noCarrier})
	}
	slices.SortFunc(out, func(a, b routetable.Link) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// Neighbors implements routetable.Kernel.
func (k *Kernel) Neighbors(_ context.Context, family routetable.Family) ([]routetable.Neighbor, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[CallNeighbors]++
	if f := k.fault(CallNeighbors, netip.Prefix{}); f != nil {
		return nil, f.Err
	}
	return k.neighborsLocked(family), nil
}

func (k *Kernel) neighborsLocked(family routetable.Family) []routetable.Neighbor {
	var out []routetable.Neighbor
	for _, n := range k.neighs {
		if n.IP.Is4() == (family == routetable.IPv4) {
			n.MAC = slices.Clone(n.MAC)
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b routetable.Neighbor) int {
		return cmp.Or(cmp.Compare(a.LinkIndex, b.LinkIndex), a.IP.Compare(b.IP))
	})
	return out
}

// NeighborList returns family's neighbour entries, without counting a
// call.
func (k *Kernel) NeighborList(family routetable.Family) []routetable.Neighbor {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.neighborsLocked(family)
}

// SetNeighbor implements routetable.Kernel.
func (k *Kernel) SetNeighbor(_ context.Context, n routetable.Neighbor) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[CallSetNeighbor]++
	if f := k.fault(CallSetNeighbor, netip.Prefix{}); f != nil {
		return f.Err
	}
	if k.links[n.LinkIndex] == nil {
		return syscall.ENODEV
	}
	if !n.IP.IsValid() || len(n.MAC) == 0 {
		return syscall.EINVAL
	}
	n.MAC = slices.Clone(n.MAC)
	k.neighs[neighKey{index: n.LinkIndex, ip: n.IP}] = n
	return nil
}

// DeleteNeighbor implements routetable.Kernel.
func (k *Kernel) DeleteNeighbor(_ context.Context, n routetable.Neighbor) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[CallDeleteNeighbor]++
	if f := k.fault(CallDeleteNeighbor, netip.Prefix{}); f != nil {
		return f.Err
	}
	delete(k.neighs, neighKey{index: n.LinkIndex, ip: n.IP})
	return nil
}

// AddNeighbor adds a neighbour entry as another agent would, without
// counting a call.
func (k *Kernel) AddNeighbor(n routetable.Neighbor) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n.MAC = slices.Clone(n.MAC)
	k.neighs[neighKey{index: n.LinkIndex, ip: n.IP}] = n
}

// DeleteConntrack implements routetable.ConntrackDeleter: it deletes the
// flows of family in which one of addrs is the source or destination.
func (k *Kernel) DeleteConntrack(_ context.Context, family routetable.Family, addrs []netip.Addr) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[CallConntrack]++
	if f := k.fault(CallConntrack, netip.Prefix{}); f != nil {
		return 0, f.Err
	}
	n := 0
	k.flows = slices.DeleteFunc(k.flows, func(f Flow) bool {
		hit := f.Family == family && (slices.Contains(addrs, f.Src) || slices.Contains(addrs, f.Dst))
		if hit {
			n++
		}
		return hit
	})
	return n, nil
}
