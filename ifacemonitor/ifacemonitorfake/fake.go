//go:build linux

package ifacemonitorfake

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/nodeplane/nodeplane/ifacemonitor"
	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// MTU bounds of AddLink and SetMTU: the IPv4 minimum, and the loopback's
// default, the largest common one.
const (
	MinMTU = 68
	MaxMTU = 65536
)

// maxNameLen is IFNAMSIZ minus the terminating NUL.
const maxNameLen = 15

// Link is a link of the fake kernel, as Links and Link show it.
type Link struct {
	// Index is the interface index, unique for the Kernel's lifetime.
	Index int
	// Name is the interface name.
	Name string
	// Type is the link kind ("device", "veth", "bridge"…), reported as
	// ifacemonitor.LinkUpdate.Type.
	Type string
	// MTU is the link's MTU.
	MTU int
	// Up is true when the link is administratively up with carrier
	// (ifacemonitor.StateUp).
	Up bool
}

// Kernel is an in-memory kernel of one network namespace and an
// ifacemonitor.Source. Create it with New. Its methods take a nil context
// as context.Background().
type Kernel struct {
	mu         sync.Mutex
	lastIndex  int
	links      map[int]*Link
	byName     map[string]int
	addrs      map[int]map[netip.Prefix]struct{}
	routes     map[ifacemonitor.RouteKey]ifacemonitor.Route
	subs       map[*subscription]struct{}
	fails      []error
	lists      int
	liveRename bool
}

// subscription is one Subscribe stream: the events not yet delivered.
type subscription struct {
	queue []ifacemonitor.Event
	gen   uint64        // bumped when Overflow replaces the queue
	wake  chan struct{} // signalled when the queue changes
}

var _ ifacemonitor.Source = (*Kernel)(nil)

// New returns an empty Kernel: no links (not even lo), no subscriptions.
func New() *Kernel {
	return &Kernel{
		links:  map[int]*Link{},
		byName: map[string]int{},
		addrs:  map[int]map[netip.Prefix]struct{}{},
		routes: map[ifacemonitor.RouteKey]ifacemonitor.Route{},
		subs:   map[*subscription]struct{}{},
	}
}

func errorf(op string, errno unix.Errno, format string, args ...any) error {
	return fmt.Errorf("ifacemonitorfake: %s: %s: %w", op, fmt.Sprintf(format, args...), errno)
}

func checkName(op, name string) error {
	if name == "" || len(name) > maxNameLen || name == "." || name == ".." ||
		strings.ContainsAny(name, "/: \t\n\r\v\f") {
		return errorf(op, unix.EINVAL, "invalid interface name %q", name)
	}
	return nil
}

func checkMTU(op string, mtu int) error {
	if mtu < MinMTU || mtu > MaxMTU {
		return errorf(op, unix.EINVAL, "MTU %d outside %d-%d", mtu, MinMTU, MaxMTU)
	}
	return nil
}

// withLink calls fn, under k.mu, with the link called name; an unknown
// link is ENODEV.
func (k *Kernel) withLink(op, name string, fn func(l *Link) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx, ok := k.byName[name]
	if !ok {
		return errorf(op, unix.ENODEV, "no link %q", name)
	}
	return fn(k.links[idx])
}

// AddLink creates a link that is down, of kind typ ("device", "veth"…),
// and returns its index. A name that is taken is EEXIST; a bad name, an
// empty typ or an MTU outside MinMTU–MaxMTU is EINVAL.
func (k *Kernel) AddLink(name, typ string, mtu int) (int, error) {
	const op = "add link"
	if err := checkName(op, name); err != nil {
		return 0, err
	}
	if typ == "" {
		return 0, errorf(op, unix.EINVAL, "empty link type for %q", name)
	}
	if err := checkMTU(op, mtu); err != nil {
		return 0, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, taken := k.byName[name]; taken {
		return 0, errorf(op, unix.EEXIST, "link %q exists", name)
	}
	k.lastIndex++
	l := &Link{Index: k.lastIndex, Name: name, Type: typ, MTU: mtu}
	k.links[l.Index] = l
	k.byName[name] = l.Index
	k.emitLink(l, unix.RTM_NEWLINK)
	return l.Index, nil
}

// SetUp makes the link administratively up, with carrier.
func (k *Kernel) SetUp(name string) error {
	return k.withLink("set up", name, func(l *Link) error {
		if !l.Up {
			l.Up = true
			k.emitLink(l, unix.RTM_NEWLINK)
		}
		return nil
	})
}

// SetDown makes the link administratively down. Its IPv6 addresses and
// routes go away with a message each, its IPv4 routes silently.
func (k *Kernel) SetDown(name string) error {
	return k.withLink("set down", name, func(l *Link) error {
		if l.Up {
			k.down(l)
		}
		return nil
	})
}

// down takes a link that is up down: the RTM_NEWLINK first, then what
// goes away with it. The caller holds k.mu.
func (k *Kernel) down(l *Link) {
	l.Up = false
	k.emitLink(l, unix.RTM_NEWLINK)
	for _, p := range k.sortedAddrs(l.Index) {
		if p.Addr().Is6() {
			delete(k.addrs[l.Index], p)
			k.emitAddr(l.Index, p, false)
		}
	}
	if len(k.addrs[l.Index]) == 0 {
		delete(k.addrs, l.Index)
	}
	k.flushRoutes(l.Index)
}

// SetMTU changes the link's MTU; outside MinMTU–MaxMTU is EINVAL.
func (k *Kernel) SetMTU(name string, mtu int) error {
	const op = "set mtu"
	if err := checkMTU(op, mtu); err != nil {
		return err
	}
	return k.withLink(op, name, func(l *Link) error {
		if l.MTU != mtu {
			l.MTU = mtu
			k.emitLink(l, unix.RTM_NEWLINK)
		}
		return nil
	})
}

// AllowLiveRename sets whether Rename may rename a link that is up, as
// kernels 6.2 and later allow. It is off in a new Kernel.
func (k *Kernel) AllowLiveRename(allow bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.liveRename = allow
}

// Rename renames a link, keeping its index, addresses and routes. A link
// that is up is EBUSY (unless AllowLiveRename), a taken name EEXIST.
func (k *Kernel) Rename(name, newName string) error {
	const op = "rename"
	if err := checkName(op, newName); err != nil {
		return err
	}
	return k.withLink(op, name, func(l *Link) error {
		if newName == name {
			return nil
		}
		if _, taken := k.byName[newName]; taken {
			return errorf(op, unix.EEXIST, "link %q exists", newName)
		}
		if l.Up && !k.liveRename {
			return errorf(op, unix.EBUSY, "link %q is up", name)
		}
		delete(k.byName, name)
		l.Name = newName
		k.byName[newName] = l.Index
		k.emitLink(l, unix.RTM_NEWLINK)
		return nil
	})
}

// DeleteLink deletes a link with its addresses and the routes through it.
// A link that is up is taken down first, as the kernel does.
func (k *Kernel) DeleteLink(name string) error {
	return k.withLink("delete link", name, func(l *Link) error {
		if l.Up {
			k.down(l)
		}
		for _, p := range k.sortedAddrs(l.Index) {
			k.emitAddr(l.Index, p, false)
		}
		delete(k.addrs, l.Index)
		k.flushRoutes(l.Index)
		delete(k.links, l.Index)
		delete(k.byName, name)
		k.emitLink(l, unix.RTM_DELLINK)
		return nil
	})
}

// AddAddr adds an address to a link (up or down); a duplicate is EEXIST,
// an invalid prefix EINVAL.
func (k *Kernel) AddAddr(name string, p netip.Prefix) error {
	const op = "add address"
	if !p.IsValid() || p.Addr().Zone() != "" {
		return errorf(op, unix.EINVAL, "invalid prefix %v", p)
	}
	return k.withLink(op, name, func(l *Link) error {
		set := k.addrs[l.Index]
		if _, dup := set[p]; dup {
			return errorf(op, unix.EEXIST, "%v on %q exists", p, name)
		}
		if set == nil {
			set = map[netip.Prefix]struct{}{}
			k.addrs[l.Index] = set
		}
		set[p] = struct{}{}
		k.emitAddr(l.Index, p, true)
		return nil
	})
}

// DelAddr removes an address from a link; a missing one is EADDRNOTAVAIL.
func (k *Kernel) DelAddr(name string, p netip.Prefix) error {
	const op = "delete address"
	return k.withLink(op, name, func(l *Link) error {
		if _, ok := k.addrs[l.Index][p]; !ok {
			return errorf(op, unix.EADDRNOTAVAIL, "no %v on %q", p, name)
		}
		delete(k.addrs[l.Index], p)
		if len(k.addrs[l.Index]) == 0 {
			delete(k.addrs, l.Index)
		}
		k.emitAddr(l.Index, p, false)
		return nil
	})
}

// normRoute fills in what the kernel fills in: table main, type unicast,
// IPv6 metric 1024.
func normRoute(r ifacemonitor.Route) ifacemonitor.Route {
	if r.Table == 0 {
		r.Table = unix.RT_TABLE_MAIN
	}
	if r.Type == 0 {
		r.Type = unix.RTN_UNICAST
	}
	if r.Dst.Addr().Is6() && r.Priority == 0 {
		r.Priority = 1024
	}
	if len(r.Nexthops) == 0 {
		r.Nexthops = nil
	} else {
		r.Nexthops = slices.Clone(r.Nexthops)
	}
	return r
}

func normKey(key ifacemonitor.RouteKey) ifacemonitor.RouteKey {
	return normRoute(ifacemonitor.Route{Table: key.Table, Dst: key.Dst, Priority: key.Priority, TOS: key.TOS, LinkIndex: key.LinkIndex}).Key()
}

// checkDst refuses a route destination that is not a valid network
// prefix: EINVAL, and ipfamily.ErrHostBits too for host bits set after the
// prefix length, as the kernel refuses them.
func checkDst(op string, dst netip.Prefix) error {
	if !dst.IsValid() {
		return errorf(op, unix.EINVAL, "invalid destination %v", dst)
	}
	if m := dst.Masked(); m != dst {
		return errs.Also(errorf(op, unix.EINVAL, "destination %v has host bits set (the network is %v)", dst, m), ipfamily.ErrHostBits)
	}
	return nil
}

// AddRoute adds a route. Its key (after table 0 becomes main and an IPv6
// metric of 0 becomes 1024) must be free (EEXIST); its destination must be
// a valid network prefix (EINVAL, with ipfamily.ErrHostBits for host bits)
// and its gateway and source of the same family (EINVAL); its output
// interfaces must exist (ENODEV) and be up (ENETDOWN).
func (k *Kernel) AddRoute(r ifacemonitor.Route) error {
	const op = "add route"
	if err := checkDst(op, r.Dst); err != nil {
		return err
	}
	v6 := r.Dst.Addr().Is6()
	addrs := []netip.Addr{r.Gw, r.Src}
	links := []int{r.LinkIndex}
	for _, nh := range r.Nexthops {
		addrs = append(addrs, nh.Gw)
		links = append(links, nh.LinkIndex)
	}
	for _, a := range addrs {
		if a.IsValid() && a.Is6() != v6 {
			return errorf(op, unix.EINVAL, "address %v does not match destination %v", a, r.Dst)
		}
	}
	r = normRoute(r)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, taken := k.routes[r.Key()]; taken {
		return errorf(op, unix.EEXIST, "route to %v exists", r.Dst)
	}
	for _, idx := range links {
		if idx == 0 {
			continue
		}
		l := k.links[idx]
		if l == nil {
			return errorf(op, unix.ENODEV, "no link #%d", idx)
		}
		if !l.Up {
			return errorf(op, unix.ENETDOWN, "link %q is down", l.Name)
		}
	}
	k.routes[r.Key()] = r
	k.emitRoute(r, unix.RTM_NEWROUTE)
	return nil
}

// DelRoute deletes the route with the key (normalised as in AddRoute); a
// destination that is not a valid network prefix is refused as in AddRoute,
// a missing route is ESRCH.
func (k *Kernel) DelRoute(key ifacemonitor.RouteKey) error {
	if err := checkDst("delete route", key.Dst); err != nil {
		return err
	}
	key = normKey(key)
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.routes[key]
	if !ok {
		return errorf("delete route", unix.ESRCH, "no route to %v", key.Dst)
	}
	delete(k.routes, key)
	k.emitRoute(r, unix.RTM_DELROUTE)
	return nil
}

// flushRoutes removes the routes through a link going down or away: IPv6
// ones with a message, IPv4 ones silently. The caller holds k.mu.
func (k *Kernel) flushRoutes(idx int) {
	for _, key := range slices.SortedFunc(maps.Keys(k.routes), ifacemonitor.CompareRouteKeys) {
		r := k.routes[key]
		through := r.LinkIndex == idx || slices.ContainsFunc(r.Nexthops, func(nh ifacemonitor.Nexthop) bool { return nh.LinkIndex == idx })
		if !through {
			continue
		}
		delete(k.routes, key)
		if r.Dst.Addr().Is6() {
			k.emitRoute(r, unix.RTM_DELROUTE)
		}
	}
}

// Overflow drops every event not yet delivered to a subscriber and queues
// a Resync whose reason wraps ifacemonitor.ErrOverflow, as a netlink socket
// does after ENOBUFS.
func (k *Kernel) Overflow() {
	k.mu.Lock()
	defer k.mu.Unlock()
	reason := errs.Also(fmt.Errorf("ifacemonitorfake: events lost: receive buffer overflow: %w", unix.ENOBUFS), ifacemonitor.ErrOverflow)
	for s := range k.subs {
		s.gen++
		s.queue = []ifacemonitor.Event{{Resync: &ifacemonitor.Resync{Reason: reason}}}
		s.signal()
	}
}

// FailNextList makes the next listing (ListLinks, ListAddrs or ListRoutes)
// return err; calls queue up, one error per listing. A nil err is ignored.
func (k *Kernel) FailNextList(err error) {
	if err == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fails = append(k.fails, err)
}

// Lists returns how many listings were asked for, failed ones included.
func (k *Kernel) Lists() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lists
}

// Links returns every link, sorted by index.
func (k *Kernel) Links() []Link {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Link, 0, len(k.links))
	for _, idx := range slices.Sorted(maps.Keys(k.links)) {
		out = append(out, *k.links[idx])
	}
	return out
}

// Link returns the link called name, and false if there is none.
func (k *Kernel) Link(name string) (Link, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	idx, ok := k.byName[name]
	if !ok {
		return Link{}, false
	}
	return *k.links[idx], true
}

// Addrs returns the addresses of the link called name, in
// ifacemonitor.ComparePrefixes order (nil when it has none); an unknown
// link is ENODEV.
func (k *Kernel) Addrs(name string) ([]netip.Prefix, error) {
	var ps []netip.Prefix
	err := k.withLink("addresses", name, func(l *Link) error {
		ps = k.sortedAddrs(l.Index)
		return nil
	})
	return ps, err
}

// Routes returns every route, sorted by ifacemonitor.CompareRouteKeys (nil
// when there is none).
func (k *Kernel) Routes() []ifacemonitor.Route {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []ifacemonitor.Route
	for _, key := range slices.SortedFunc(maps.Keys(k.routes), ifacemonitor.CompareRouteKeys) {
		r := k.routes[key]
		r.Nexthops = slices.Clone(r.Nexthops)
		out = append(out, r)
	}
	return out
}

func (k *Kernel) sortedAddrs(idx int) []netip.Prefix {
	if len(k.addrs[idx]) == 0 {
		return nil
	}
	ps := slices.Collect(maps.Keys(k.addrs[idx]))
	ifacemonitor.SortPrefixes(ps)
	return ps
}

// Subscribe starts a stream whose first event is a Resync, followed by a
// message for every change made after it. The channel is closed once ctx
// has ended and the stream's goroutine has stopped. A nil ctx is taken as
// context.Background(): that stream never ends.
func (k *Kernel) Subscribe(ctx context.Context) (<-chan ifacemonitor.Event, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	s := &subscription{
		queue: []ifacemonitor.Event{{Resync: &ifacemonitor.Resync{}}},
		wake:  make(chan struct{}, 1),
	}
	k.mu.Lock()
	k.subs[s] = struct{}{}
	k.mu.Unlock()
	out := make(chan ifacemonitor.Event)
	go k.forward(ctx, s, out)
	return out, nil
}

// forward delivers s's queue in order until ctx ends. An event is taken
// off the queue only once delivered, so Overflow can still drop it while
// the receiver is busy.
func (k *Kernel) forward(ctx context.Context, s *subscription, out chan<- ifacemonitor.Event) {
	defer close(out)
	defer func() {
		k.mu.Lock()
		delete(k.subs, s)
		k.mu.Unlock()
	}()
	for {
		k.mu.Lock()
		var (
			ev  ifacemonitor.Event
			has = len(s.queue) > 0
			gen = s.gen
		)
		if has {
			ev = s.queue[0]
		}
		k.mu.Unlock()
		if !has {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- ev:
			k.mu.Lock()
			if s.gen == gen {
				s.queue[0] = ifacemonitor.Event{}
				s.queue = s.queue[1:]
			}
			k.mu.Unlock()
		case <-s.wake: // the queue changed; look again
		case <-ctx.Done():
			return
		}
	}
}

func (s *subscription) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// emit queues ev for every subscription; the caller holds k.mu.
func (k *Kernel) emit(ev ifacemonitor.Event) {
	for s := range k.subs {
		s.queue = append(s.queue, ev)
		s.signal()
	}
}

func (k *Kernel) emitLink(l *Link, typ uint16) {
	u := &netlink.LinkUpdate{Header: unix.NlMsghdr{Type: typ}, Link: toNetlinkLink(*l)}
	u.IfInfomsg.Index = int32(l.Index)
	k.emit(ifacemonitor.Event{Link: u})
}

func (k *Kernel) emitAddr(idx int, p netip.Prefix, add bool) {
	k.emit(ifacemonitor.Event{Addr: &netlink.AddrUpdate{LinkAddress: *ipNet(p), LinkIndex: idx, NewAddr: add}})
}

func (k *Kernel) emitRoute(r ifacemonitor.Route, typ uint16) {
	k.emit(ifacemonitor.Event{Route: &netlink.RouteUpdate{Type: typ, Route: toNetlinkRoute(r)}})
}

// listing returns ctx's error, or counts a listing and returns the injected
// failure, if any; a nil ctx is taken as context.Background(). The caller
// holds k.mu.
func (k *Kernel) listing(ctx context.Context) error {
	if ctx != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	k.lists++
	if len(k.fails) > 0 {
		err := k.fails[0]
		k.fails = k.fails[1:]
		return err
	}
	return nil
}

// ListLinks lists every link as a netlink dump would, sorted by index.
func (k *Kernel) ListLinks(ctx context.Context) ([]netlink.Link, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.listing(ctx); err != nil {
		return nil, err
	}
	out := make([]netlink.Link, 0, len(k.links))
	for _, idx := range slices.Sorted(maps.Keys(k.links)) {
		out = append(out, toNetlinkLink(*k.links[idx]))
	}
	return out, nil
}

// ListAddrs lists every address of every link.
func (k *Kernel) ListAddrs(ctx context.Context) ([]netlink.Addr, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.listing(ctx); err != nil {
		return nil, err
	}
	var out []netlink.Addr
	for _, idx := range slices.Sorted(maps.Keys(k.addrs)) {
		for _, p := range k.sortedAddrs(idx) {
			out = append(out, netlink.Addr{IPNet: ipNet(p), LinkIndex: idx})
		}
	}
	return out, nil
}

// ListRoutes lists every route.
func (k *Kernel) ListRoutes(ctx context.Context) ([]netlink.Route, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.listing(ctx); err != nil {
		return nil, err
	}
	out := make([]netlink.Route, 0, len(k.routes))
	for _, key := range slices.SortedFunc(maps.Keys(k.routes), ifacemonitor.CompareRouteKeys) {
		out = append(out, toNetlinkRoute(k.routes[key]))
	}
	return out, nil
}

func toNetlinkLink(l Link) netlink.Link {
	attrs := netlink.LinkAttrs{Index: l.Index, Name: l.Name, MTU: l.MTU, OperState: netlink.OperDown}
	if l.Up {
		attrs.Flags = net.FlagUp | net.FlagRunning
		attrs.RawFlags = unix.IFF_UP | unix.IFF_RUNNING | unix.IFF_LOWER_UP
		attrs.OperState = netlink.OperUp
	}
	return &netlink.GenericLink{LinkAttrs: attrs, LinkType: l.Type}
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}

func ipOf(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return a.AsSlice()
}

func toNetlinkRoute(r ifacemonitor.Route) netlink.Route {
	family := netlink.FAMILY_V4
	if r.Dst.Addr().Is6() {
		family = netlink.FAMILY_V6
	}
	nr := netlink.Route{
		Family:    family,
		LinkIndex: r.LinkIndex,
		Dst:       ipNet(r.Dst),
		Gw:        ipOf(r.Gw),
		Src:       ipOf(r.Src),
		Table:     r.Table,
		Priority:  r.Priority,
		Tos:       r.TOS,
		Type:      r.Type,
		Protocol:  netlink.RouteProtocol(r.Protocol),
		Scope:     netlink.Scope(r.Scope),
	}
	for _, nh := range r.Nexthops {
		nr.MultiPath = append(nr.MultiPath, &netlink.NexthopInfo{LinkIndex: nh.LinkIndex, Gw: ipOf(nh.Gw)})
	}
	return nr
}
