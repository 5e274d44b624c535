// Size: the Table's state and every step from targets to the one kernel route per key (candidates, resolution, kernel form) share its private types; apply.go holds the kernel side.

package routetable

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable/internal/delta"
)

// Table keeps the routes it owns in one kernel routing table, for one IP
// family, equal to what its producers declared. See the package
// documentation.
//
// All methods are safe for concurrent use. Intent methods (SetRoutes,
// RouteUpdate, RouteRemove) wait for an Apply in progress;
// OnIfaceStateChanged, OnRouteUpdate and QueueResync never do: they queue
// their input for the next Apply.
//
// A Table is a dataplane.Wakeable driver: registered with a
// dataplane.Loop, OnIfaceStateChanged and OnRouteUpdate ask the loop for a
// pass, so routes held for an interface are written as soon as it comes
// up, and a route of ours someone deletes is written again at once.
type Table struct {
	opts Options

	// evMu guards the queued input of OnIfaceStateChanged, OnRouteUpdate
	// and QueueResync, so the interface monitor's callbacks never wait for
	// an Apply, and the loop's wake function.
	evMu         sync.Mutex
	events       []event
	resyncQueued bool
	wake         func()

	mu sync.Mutex // guards everything below; held by Apply throughout

	recs    map[string]*ifaceRec // by name
	byIndex map[int32]*ifaceRec  // present interfaces by index

	// groups holds the keys each (class, interface) pair declared.
	groups map[groupKey]map[rkey]struct{}
	// cands holds every declared candidate of every key.
	cands map[rkey]candSet
	// multipath counts the multipath candidates of each key; such keys
	// are re-resolved on every interface change.
	multipath map[rkey]int

	// tr tracks the winners (desired) against the kernel (dataplane).
	tr *delta.Tracker[rkey, kroute]
	// foreign holds the routes in the table that are not ours, as of the
	// last dump (of the table, or of their interface) and the route
	// events since.
	foreign map[rkey]foreignSet
	// graceSeen holds when each unwanted route with a grace period was
	// first seen.
	graceSeen map[rkey]time.Time

	// nbrs tracks static neighbour entries; nbrOf maps a key to the
	// neighbour its winner wants.
	nbrs  *delta.Tracker[nbrKey, [6]byte]
	nbrOf map[rkey]nbrKey

	// pendingFlush holds addresses of deleted routes whose conntrack
	// entries still have to be deleted.
	pendingFlush []netip.Addr

	// failed holds the routes, neighbour entries and conntrack deletion
	// whose last write failed, with their backoff.
	failed *dataplane.Ledger[failKey]

	needResync bool // next Apply dumps the table
	linksStale bool // next Apply lists the links
	stats      Counters
	// flushedIndex holds indexes whose routes the kernel removed since
	// the last forgetFlushed: true when the interface is gone, false when
	// it went down.
	flushedIndex map[int32]bool
	// rescan holds the indexes of interfaces that came up since the
	// table was last read: Apply re-reads their routes before writing.
	rescan map[int32]struct{}
}

// event is one queued OnIfaceStateChanged or OnRouteUpdate call.
type event struct {
	// route is the route of an OnRouteUpdate call; nil for an interface.
	route *kernel.Route
	gone  bool // the route is gone
	name  string
	index int32
	state kernel.LinkState
}

// ifaceRec is what the Table knows about one interface name.
type ifaceRec struct {
	name  string
	index int32 // 0 when gone or never seen
	state kernel.LinkState
	// classes lists the classes that declared routes on this interface.
	classes []RouteClass
	// hops counts multipath next hops that name this interface.
	hops int
}

func (r *ifaceRec) up() bool { return r.state == kernel.LinkUp && r.index > 0 }

// groupKey identifies a (class, interface) pair; iface is nil for
// InterfaceNone.
type groupKey struct {
	class RouteClass
	iface *ifaceRec
}

// hop is a declared next hop.
type hop struct {
	iface  *ifaceRec
	gw     netip.Addr
	weight uint8 // kernel form: weight minus one
	onlink bool
}

// target is a validated Target in compact form.
type target struct {
	gw, src netip.Addr
	hops    *[]hop
	mtu     uint32
	mac     [6]byte
	hasMAC  bool
	typ     TargetType
}

// cand is one producer's wish for a key.
type cand struct {
	iface *ifaceRec // nil for InterfaceNone
	t     target
	class RouteClass
}

// candSet holds a key's candidates: one inline, the rest in more.
type candSet struct {
	first cand
	more  *[]cand
}

func (s *candSet) len() int {
	if s.more == nil {
		return 1
	}
	return 1 + len(*s.more)
}

func (s *candSet) at(i int) *cand {
	if i == 0 {
		return &s.first
	}
	return &(*s.more)[i-1]
}

// kroute is a route in the kernel form the Table compares: the winner's
// form on the desired side, a dumped route on the dataplane side.
type kroute struct {
	gw, src netip.Addr
	hops    *[]khop // sorted; nil unless multipath
	mtu     uint32
	oif     int32
	typ     uint8
	scope   uint8
	proto   uint8
	onlink  bool
	// nhid says the route uses a nexthop object: a route the Table never
	// writes (so never the desired one), deleted by its key alone.
	nhid bool
}

// khop is one next hop of a multipath kroute.
type khop struct {
	gw     netip.Addr
	oif    int32
	weight uint8
	onlink bool
}

func krouteEqual(a, b kroute) bool {
	if a.gw != b.gw || a.src != b.src || a.mtu != b.mtu || a.oif != b.oif || a.typ != b.typ ||
		a.scope != b.scope || a.proto != b.proto || a.onlink != b.onlink || a.nhid != b.nhid {
		return false
	}
	if a.hops == nil || b.hops == nil {
		return a.hops == b.hops
	}
	return slices.Equal(*a.hops, *b.hops)
}

// sameRoute reports whether a and b are the same route of one key, which
// a write with NLM_F_REPLACE replaces in place: routes of one key may
// coexist when their type or first hop differs (IPv6 keeps such routes
// side by side). Multipath routes have no first hop.
func sameRoute(a, b kroute) bool { return a.typ == b.typ && a.oif == b.oif && a.gw == b.gw }

// foreignSet holds the foreign routes of one key: one inline, the rest
// (routes of the key through other links) in more.
type foreignSet struct {
	first kroute
	more  *[]kroute
}

// all returns the routes of the set.
func (s *foreignSet) all() []kroute {
	if s.more == nil {
		return []kroute{s.first}
	}
	return append([]kroute{s.first}, *s.more...)
}

// addForeign records the foreign route v of key k, in place of the same
// route (sameRoute) if the key holds it.
func (t *Table) addForeign(k rkey, v kroute) {
	set, ok := t.foreign[k]
	if !ok {
		t.foreign[k] = foreignSet{first: v}
		return
	}
	rs := set.all()
	if i := slices.IndexFunc(rs, func(r kroute) bool { return sameRoute(r, v) }); i >= 0 {
		rs[i] = v
	} else {
		rs = append(rs, v)
	}
	t.storeForeign(k, rs)
}

// dropForeign forgets the foreign routes of key k that drop reports.
func (t *Table) dropForeign(k rkey, drop func(kroute) bool) {
	set, ok := t.foreign[k]
	switch {
	case !ok:
	case set.more == nil:
		if drop(set.first) {
			delete(t.foreign, k)
		}
	default:
		t.storeForeign(k, slices.DeleteFunc(set.all(), drop))
	}
}

// storeForeign stores rs as the foreign routes of key k.
func (t *Table) storeForeign(k rkey, rs []kroute) {
	switch len(rs) {
	case 0:
		delete(t.foreign, k)
	case 1:
		t.foreign[k] = foreignSet{first: rs[0]}
	default:
		more := rs[1:]
		t.foreign[k] = foreignSet{first: rs[0], more: &more}
	}
}

// uses reports whether r leaves through interface index oif: as its
// interface or one of its next hops.
func (r kroute) uses(oif int32) bool {
	if r.oif == oif {
		return true
	}
	if r.hops != nil {
		for _, h := range *r.hops {
			if h.oif == oif {
				return true
			}
		}
	}
	return false
}

// owner is the interface index a host route's traffic leaves through, for
// conntrack cleanup: 0 for routes without a single interface.
func (r kroute) owner() int32 {
	if r.hops != nil {
		return 0
	}
	return r.oif
}

func compareKhop(a, b khop) int {
	if a.oif != b.oif {
		return int(a.oif) - int(b.oif)
	}
	return a.gw.Compare(b.gw)
}

// rkey is a RouteKey in compact form: no pointer, 24 bytes, hashed as
// plain memory. The family is the Table's.
type rkey struct {
	addr   [16]byte
	metric uint32
	bits   uint32
}

// compareKey orders keys by address, prefix length and metric.
func compareKey(a, b rkey) int {
	return cmp.Or(bytes.Compare(a.addr[:], b.addr[:]), cmp.Compare(a.bits, b.bits), cmp.Compare(a.metric, b.metric))
}

func keyOf(k RouteKey) rkey {
	return rkey{addr: k.CIDR.Addr().As16(), metric: k.Metric, bits: uint32(k.CIDR.Bits())}
}

// addrOf returns the destination address of k.
func (t *Table) addrOf(k rkey) netip.Addr {
	a := netip.AddrFrom16(k.addr)
	if t.opts.Family == IPv4 {
		a = a.Unmap()
	}
	return a
}

// prefixOf returns the destination of k.
func (t *Table) prefixOf(k rkey) netip.Prefix { return netip.PrefixFrom(t.addrOf(k), int(k.bits)) }

// public returns k as a RouteKey.
func (t *Table) public(k rkey) RouteKey { return RouteKey{CIDR: t.prefixOf(k), Metric: k.metric} }

// nbrKey identifies a neighbour entry.
type nbrKey struct {
	ip  netip.Addr
	oif int32
}

// failKind says what a failKey names.
type failKind uint8

const (
	failRoute failKind = iota
	failNeighbor
	failConntrack
)

// failKey names one object of the Table in its failure ledger: a route, a
// static neighbour entry, or the conntrack deletion (one, shared by the
// addresses waiting for it).
type failKey struct {
	kind  failKind
	route rkey
	nbr   nbrKey
}

func routeFail(k rkey) failKey { return failKey{kind: failRoute, route: k} }
func nbrFail(k nbrKey) failKey { return failKey{kind: failNeighbor, nbr: k} }
func conntrackFail() failKey   { return failKey{kind: failConntrack} }

// Counters are counters and sizes of a Table, for tests and metrics,
// beside the dataplane.DriverStats that Stats gives.
type Counters struct {
	// Declared is the number of keys with at least one candidate.
	Declared int
	// Desired is the number of keys with a winner (a candidate whose
	// interface is up).
	Desired int
	// InKernel is the number of routes of ours in the table, as last read
	// or written.
	InKernel int
	// PendingUpdates and PendingDeletions are the routes still to write
	// and delete.
	PendingUpdates, PendingDeletions int
	// RouteWrites counts route operations sent to the kernel (replaces and
	// deletes), successful or not.
	RouteWrites uint64
	// NeighborWrites counts neighbour sets and deletes sent.
	NeighborWrites uint64
	// Resyncs counts full reads of the table.
	Resyncs uint64
	// Rescans counts reads of the routes through one interface, made when
	// the interface comes up.
	Rescans uint64
	// ConntrackDeletions counts calls to the conntrack deleter.
	ConntrackDeletions uint64
}

// New returns a Table. It validates opts and does no I/O: the first Apply
// reads the kernel.
func New(opts Options) (*Table, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Table{
		opts:         o,
		recs:         map[string]*ifaceRec{},
		byIndex:      map[int32]*ifaceRec{},
		groups:       map[groupKey]map[rkey]struct{}{},
		cands:        map[rkey]candSet{},
		multipath:    map[rkey]int{},
		tr:           delta.New[rkey, kroute](krouteEqual),
		foreign:      map[rkey]foreignSet{},
		graceSeen:    map[rkey]time.Time{},
		nbrs:         delta.NewComparable[nbrKey, [6]byte](),
		nbrOf:        map[rkey]nbrKey{},
		failed:       dataplane.NewLedger[failKey](dataplane.Backoff{}, o.Clock),
		needResync:   true,
		flushedIndex: map[int32]bool{},
		rescan:       map[int32]struct{}{},
	}, nil
}

// Family returns the Table's IP family.
func (t *Table) Family() Family { return t.opts.Family }

// Index returns the kernel routing table the Table owns routes in.
func (t *Table) Index() uint32 { return t.opts.Table }

// Phase implements dataplane.Driver: routes are written in PhaseRoutes.
func (t *Table) Phase() dataplane.Phase { return dataplane.PhaseRoutes }

// Name returns a name for logs, such as "routetable-ipv4-254".
func (t *Table) Name() string {
	return fmt.Sprintf("routetable-%s-%d", strings.ToLower(t.opts.Family.String()), t.opts.Table)
}

// Stats returns the Table's dataplane.DriverStats: the keys with a
// winner, our routes in the table (as last read or written), the objects
// failing (routes, neighbour entries, the conntrack deletion) and the
// route, neighbour and conntrack-deletion writes sent. It implements
// dataplane.StatsReporter.
func (t *Table) Stats() dataplane.DriverStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return dataplane.DriverStats{Desired: t.tr.Desired().Len(), InKernel: t.tr.Dataplane().Len(),
		Failing: t.failed.Len(), Writes: t.stats.RouteWrites + t.stats.NeighborWrites + t.stats.ConntrackDeletions}
}

// Counters returns the Table's counters and sizes.
func (t *Table) Counters() Counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	s.Declared = len(t.cands)
	s.Desired = t.tr.Desired().Len()
	s.InKernel = t.tr.Dataplane().Len()
	s.PendingUpdates = t.tr.PendingUpdates().Len()
	s.PendingDeletions = t.tr.PendingDeletions().Len()
	return s
}

// QueueResync makes the next Apply re-read the kernel table (and the
// interfaces) before it writes. It implements dataplane.Driver: a
// dataplane.Loop calls it every dataplane.Options.ResyncInterval, which
// repairs what changed behind the Table's back; a Table used without a loop
// re-reads only when its user calls QueueResync.
func (t *Table) QueueResync() {
	t.evMu.Lock()
	t.resyncQueued = true
	t.evMu.Unlock()
}

// SetWake implements dataplane.Wakeable: a dataplane.Loop calls it when the
// Table is registered, and OnIfaceStateChanged then calls wake, so that the
// loop applies the change without waiting for its next periodic pass.
func (t *Table) SetWake(wake func()) {
	t.evMu.Lock()
	t.wake = wake
	t.evMu.Unlock()
}

// OnIfaceStateChanged tells the Table that interface name has index and
// state, as ifacemonitor reports it (wire ifacemonitor's OnLinkState to it:
// tbl.OnIfaceStateChanged(u.Name, u.Index, u.State)). Routes declared on an
// interface are
// programmed while it is up and withdrawn (the next candidate takes over)
// while it is down or gone; a rename is the old name gone and the new name
// up; a name that comes back with a new index gets its routes again on the
// new index. The call queues the change for the next Apply and, when the
// Table is registered with a dataplane.Loop, wakes the loop for it; it
// never waits. Invalid input (a bad name, a negative index, an unknown
// state) is ignored.
func (t *Table) OnIfaceStateChanged(name string, index int, state kernel.LinkState) {
	if validIfaceName(name) != nil || index < 0 || int64(index) > int64(^uint32(0)>>1) || state > kernel.LinkUp {
		t.opts.Logger.Warn("routetable: ignoring invalid interface update", "iface", name, "index", index, "state", state)
		return
	}
	t.queue(event{name: name, index: int32(index), state: state})
}

// OnRouteUpdate tells the Table that route r is new or changed, or gone,
// as ifacemonitor reports routes with Options.WatchRoutes (wire its
// OnRoute to it: tbl.OnRouteUpdate(u.Route, u.Gone)). A route of ours that
// someone deletes or changes is then written again by the next Apply, and
// a foreign route that frees a key the Table wants lets it write its own
// there, without waiting for a resync and without reading the table
// again; a route someone adds is owned or left alone as a resync would.
// Routes of other tables and families, and routes with a TOS or a source
// prefix, are ignored. The call queues the route for the next Apply and
// wakes the loop (see SetWake); it never waits and makes no system call.
// Events older than the next re-read of the table (the first Apply,
// QueueResync) are dropped: the re-read supersedes them.
func (t *Table) OnRouteUpdate(r kernel.Route, gone bool) {
	if r.Family != t.opts.Family || r.Table != t.opts.Table || r.TOS != 0 || r.SrcLen != 0 || !r.Dst.IsValid() ||
		r.Dst.Addr().Is4() != (t.opts.Family == IPv4) {
		return
	}
	t.queue(event{route: &r, gone: gone})
}

// queue queues ev for the next Apply and wakes the loop.
func (t *Table) queue(ev event) {
	t.evMu.Lock()
	t.events = append(t.events, ev)
	wake := t.wake
	t.evMu.Unlock()
	if wake != nil {
		wake()
	}
}

// SetRoutes replaces every route the pair (class, iface) wants with
// targets (nil or empty withdraws them all). iface is the routes' output
// interface, or InterfaceNone for routes without one (blackhole and such,
// and multipath routes). Every target is validated first: on any error
// nothing changes.
func (t *Table) SetRoutes(class RouteClass, iface string, targets []Target) error {
	if err := validGroupIface(iface); err != nil {
		return err
	}
	valid := make([]Target, len(targets))
	seen := make(map[rkey]struct{}, len(targets))
	for i, tg := range targets {
		v, err := tg.validate(t.opts.Family, iface)
		if err != nil {
			return err
		}
		k := keyOf(v.Key())
		if _, dup := seen[k]; dup {
			return fmt.Errorf("%w: %v twice for class %d on %s", ErrDuplicateRoute, v.Key(), class, iface)
		}
		seen[k] = struct{}{}
		valid[i] = v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	gk := groupKey{class: class, iface: t.recFor(iface)}
	for k := range t.groups[gk] {
		if _, keep := seen[k]; !keep {
			t.removeCand(k, gk)
		}
	}
	for _, v := range valid {
		t.putCand(keyOf(v.Key()), gk, t.compact(v))
	}
	if len(seen) == 0 {
		seen = nil
	}
	keys := seen
	t.setGroup(gk, keys)
	return nil
}

// RouteUpdate adds target to, or replaces it in, the routes the pair
// (class, iface) wants.
func (t *Table) RouteUpdate(class RouteClass, iface string, target Target) error {
	if err := validGroupIface(iface); err != nil {
		return err
	}
	v, err := target.validate(t.opts.Family, iface)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	gk := groupKey{class: class, iface: t.recFor(iface)}
	k := keyOf(v.Key())
	t.putCand(k, gk, t.compact(v))
	keys := t.groups[gk]
	if keys == nil {
		keys = map[rkey]struct{}{}
	}
	keys[k] = struct{}{}
	t.setGroup(gk, keys)
	return nil
}

// RouteRemove withdraws the route with key from the routes the pair
// (class, iface) wants. Removing a route the pair does not want does
// nothing. The key is checked as a Target's destination and normalised as
// Target.Key does.
func (t *Table) RouteRemove(class RouteClass, iface string, key RouteKey) error {
	if err := validGroupIface(iface); err != nil {
		return err
	}
	if err := checkDest(t.opts.Family, key.CIDR); err != nil {
		return err
	}
	k := keyOf(Target{CIDR: key.CIDR, Metric: key.Metric}.Key())
	t.mu.Lock()
	defer t.mu.Unlock()
	rec := t.recs[iface]
	if iface == InterfaceNone {
		rec = nil
	} else if rec == nil {
		return nil
	}
	gk := groupKey{class: class, iface: rec}
	keys := t.groups[gk]
	if _, ok := keys[k]; !ok {
		return nil
	}
	t.removeCand(k, gk)
	delete(keys, k)
	t.setGroup(gk, keys)
	return nil
}

// recFor returns the record of interface name, creating it; nil for
// InterfaceNone.
func (t *Table) recFor(name string) *ifaceRec {
	if name == InterfaceNone {
		return nil
	}
	r := t.recs[name]
	if r == nil {
		r = &ifaceRec{name: name}
		t.recs[name] = r
	}
	return r
}

// releaseRec forgets r once nothing refers to it and it is gone.
func (t *Table) releaseRec(r *ifaceRec) {
	if r == nil || r.state != kernel.LinkGone || len(r.classes) > 0 || r.hops > 0 {
		return
	}
	if t.recs[r.name] == r {
		delete(t.recs, r.name)
	}
	if r.index != 0 && t.byIndex[r.index] == r {
		delete(t.byIndex, r.index)
	}
}

// setGroup stores keys as the key set of gk (deleting it when empty) and
// maintains the interface's class list.
func (t *Table) setGroup(gk groupKey, keys map[rkey]struct{}) {
	if len(keys) == 0 {
		delete(t.groups, gk)
		if gk.iface != nil {
			gk.iface.classes = slices.DeleteFunc(gk.iface.classes, func(c RouteClass) bool { return c == gk.class })
			t.releaseRec(gk.iface)
		}
		return
	}
	t.groups[gk] = keys
	if gk.iface != nil && !slices.Contains(gk.iface.classes, gk.class) {
		gk.iface.classes = append(gk.iface.classes, gk.class)
	}
}

// compact turns a validated Target into its stored form, taking
// references on the interfaces of its next hops.
func (t *Table) compact(v Target) target {
	c := target{gw: v.Gateway, src: v.Src, mtu: v.MTU, typ: v.Type}
	if len(v.DestMAC) == 6 {
		c.hasMAC = true
		copy(c.mac[:], v.DestMAC)
	}
	if len(v.NextHops) > 0 {
		hops := make([]hop, len(v.NextHops))
		for i, nh := range v.NextHops {
			w := nh.Weight
			if w > 0 {
				w--
			}
			r := t.recFor(nh.Iface)
			r.hops++
			hops[i] = hop{iface: r, gw: nh.Gateway, weight: w, onlink: nh.Onlink}
		}
		c.hops = &hops
	}
	return c
}

// dropTarget releases the interface references of a stored target.
func (t *Table) dropTarget(c *target) {
	if c.hops == nil {
		return
	}
	for _, h := range *c.hops {
		h.iface.hops--
		t.releaseRec(h.iface)
	}
}

// putCand records gk's wish tg for k, replacing gk's previous one, and
// resolves k.
func (t *Table) putCand(k rkey, gk groupKey, tg target) {
	nc := cand{iface: gk.iface, t: tg, class: gk.class}
	set, ok := t.cands[k]
	switch {
	case !ok:
		set = candSet{first: nc}
	default:
		found := false
		for i := range set.len() {
			c := set.at(i)
			if c.class == gk.class && c.iface == gk.iface {
				t.dropTarget(&c.t)
				*c = nc
				found = true
				break
			}
		}
		if !found {
			if set.more == nil {
				set.more = &[]cand{}
			}
			*set.more = append(*set.more, nc)
		}
	}
	t.cands[k] = set
	t.countMultipath(k, set)
	t.resolve(k)
}

// removeCand drops gk's wish for k and resolves k.
func (t *Table) removeCand(k rkey, gk groupKey) {
	set, ok := t.cands[k]
	if !ok {
		return
	}
	n := set.len()
	for i := range n {
		c := set.at(i)
		if c.class != gk.class || c.iface != gk.iface {
			continue
		}
		t.dropTarget(&c.t)
		switch {
		case n == 1:
			delete(t.cands, k)
			delete(t.multipath, k)
			t.resolve(k)
			return
		case i == 0:
			set.first = (*set.more)[0]
			*set.more = slices.Delete(*set.more, 0, 1)
		default:
			*set.more = slices.Delete(*set.more, i-1, i)
		}
		if len(*set.more) == 0 {
			set.more = nil
		}
		t.cands[k] = set
		t.countMultipath(k, set)
		t.resolve(k)
		return
	}
}

func (t *Table) countMultipath(k rkey, set candSet) {
	n := 0
	for i := range set.len() {
		if set.at(i).t.hops != nil {
			n++
		}
	}
	if n == 0 {
		delete(t.multipath, k)
	} else {
		t.multipath[k] = n
	}
}

// resolve recomputes k's winner and records it as desired. A winner that
// changes (another route, or none) ends the backoff of a failed write of
// k: the next Apply writes the new declaration at once.
func (t *Table) resolve(k rkey) {
	set, ok := t.cands[k]
	var best *cand
	var bestForm kroute
	if ok {
		for i := range set.len() {
			c := set.at(i)
			form, eligible := t.kernelForm(c)
			if !eligible {
				continue
			}
			if best == nil || c.class < best.class || (c.class == best.class && form.oif > bestForm.oif) {
				best, bestForm = c, form
			}
		}
	}
	t.setNeighbor(k, best)
	old, had := t.tr.Desired().Get(k)
	if best == nil {
		if had {
			t.failed.Forget(routeFail(k))
			t.tr.Desired().Delete(k)
		}
		return
	}
	if !had || !krouteEqual(old, bestForm) {
		t.failed.Forget(routeFail(k))
		t.tr.Desired().Set(k, bestForm)
	}
}

// setNeighbor records the static neighbour k's winner wants, if any.
func (t *Table) setNeighbor(k rkey, best *cand) {
	old, had := t.nbrOf[k]
	var want nbrKey
	wanted := best != nil && best.t.hasMAC && best.iface != nil
	if wanted {
		want = nbrKey{ip: t.addrOf(k), oif: best.iface.index}
	}
	if had && (!wanted || old != want) {
		t.nbrs.Desired().Delete(old)
		delete(t.nbrOf, k)
		t.failed.Forget(nbrFail(old))
	}
	if wanted {
		if mac, ok := t.nbrs.Desired().Get(want); !ok || mac != best.t.mac {
			t.failed.Forget(nbrFail(want))
			t.nbrs.Desired().Set(want, best.t.mac)
		}
		t.nbrOf[k] = want
	}
}

// kernelForm returns the route c asks for as the kernel would hold it, and
// whether c can be programmed now (its interface, or one of its next hops'
// interfaces, is up).
func (t *Table) kernelForm(c *cand) (kroute, bool) {
	r := kroute{gw: c.t.gw, src: c.t.src, mtu: c.t.mtu, proto: t.opts.Protocol, typ: kernel.RTNUnicast}
	if c.iface != nil {
		if !c.iface.up() {
			return r, false
		}
		r.oif = c.iface.index
	}
	switch c.t.typ {
	case TargetUnicast:
		if c.t.hops != nil {
			var hops []khop
			for _, h := range *c.t.hops {
				if h.iface.up() {
					hops = append(hops, khop{gw: h.gw, oif: h.iface.index, weight: h.weight, onlink: h.onlink})
				}
			}
			switch len(hops) {
			case 0:
				return r, false
			case 1:
				r.oif, r.gw, r.onlink = hops[0].oif, hops[0].gw, hops[0].onlink
			default:
				slices.SortFunc(hops, compareKhop)
				r.hops = &hops
			}
		}
		if r.gw.IsValid() || r.hops != nil {
			r.scope = kernel.ScopeUniverse
		} else {
			r.scope = kernel.ScopeLink
		}
	case TargetOnlink:
		r.onlink, r.scope = true, kernel.ScopeUniverse
	case TargetLocal:
		r.typ, r.scope = kernel.RTNLocal, kernel.ScopeHost
	case TargetBlackhole:
		r.typ = kernel.RTNBlackhole
	case TargetUnreachable:
		r.typ = kernel.RTNUnreachable
	case TargetProhibit:
		r.typ = kernel.RTNProhibit
	case TargetThrow:
		r.typ = kernel.RTNThrow
	}
	if t.opts.Family == IPv6 {
		r.scope = kernel.ScopeUniverse // the kernel reports every IPv6 route so
	}
	return r, true
}

// fromKernel converts a dumped route to its key and compared form, and says
// whether it can be one of ours at all (routes with a TOS or a source
// prefix never are, and hold no key of ours: the kernel keeps them apart).
func (t *Table) fromKernel(r *kernel.Route) (rkey, kroute, bool) {
	k := keyOf(RouteKey{CIDR: r.Dst.Masked(), Metric: r.Priority})
	v := kroute{gw: r.Gateway, src: r.PrefSrc, mtu: r.MTU, oif: int32(r.OIF), typ: r.Type, scope: r.Scope,
		proto: r.Protocol, onlink: r.Flags&kernel.FlagOnlink != 0, nhid: r.NexthopID != 0}
	switch r.Type {
	case kernel.RTNBlackhole, kernel.RTNUnreachable, kernel.RTNProhibit, kernel.RTNThrow:
		v.oif = 0 // IPv6 reports them on lo
	}
	switch len(r.NextHops) {
	case 0:
	case 1:
		h := r.NextHops[0]
		v.oif, v.gw, v.onlink = int32(h.OIF), h.Gateway, h.Flags&kernel.FlagOnlink != 0
	default:
		hops := make([]khop, len(r.NextHops))
		for i, h := range r.NextHops {
			hops[i] = khop{gw: h.Gateway, oif: int32(h.OIF), weight: h.Weight, onlink: h.Flags&kernel.FlagOnlink != 0}
		}
		slices.SortFunc(hops, compareKhop)
		v.hops = &hops
		v.oif = 0
	}
	if t.opts.Family == IPv6 {
		v.scope = kernel.ScopeUniverse
	}
	return k, v, r.TOS == 0 && r.SrcLen == 0
}

// toKernel builds the route to write for key k.
func (t *Table) toKernel(k rkey, v kroute) kernel.Route {
	r := kernel.Route{
		Family: t.opts.Family, Table: t.opts.Table, Dst: t.prefixOf(k), Type: v.typ, Protocol: v.proto, Scope: v.scope,
		Priority: k.metric, OIF: int(v.oif), Gateway: v.gw, PrefSrc: v.src, MTU: v.mtu,
	}
	if v.onlink {
		r.Flags = kernel.FlagOnlink
	}
	if v.hops != nil {
		r.NextHops = make([]kernel.NextHop, len(*v.hops))
		for i, h := range *v.hops {
			nh := kernel.NextHop{OIF: int(h.oif), Gateway: h.gw, Weight: h.weight}
			if h.onlink {
				nh.Flags = kernel.FlagOnlink
			}
			r.NextHops[i] = nh
		}
	}
	return r
}

// deleteOp builds the delete of the route v that holds key k: its type,
// protocol and interface must match (so that a route that took its place
// in the meantime is not deleted), any scope.
func (t *Table) deleteOp(k rkey, v kroute) kernel.RouteOp {
	op := kernel.RouteOp{Kind: kernel.OpDelete, Route: kernel.Route{
		Family: t.opts.Family, Table: t.opts.Table, Dst: t.prefixOf(k), Priority: k.metric,
		Type: v.typ, Protocol: v.proto, OIF: int(v.owner()),
	}}
	if v.nhid {
		op.Route.OIF = 0 // the kernel matches no interface of a nexthop object's route
	}
	return op
}

// ifaceName names the interface a kernel route leaves through, for the
// ownership policy.
func (t *Table) ifaceName(r *kernel.Route) string {
	oif := r.OIF
	if oif == 0 && len(r.NextHops) > 0 {
		oif = r.NextHops[0].OIF
	}
	if rec := t.byIndex[int32(oif)]; rec != nil {
		return rec.name
	}
	return ""
}
