package routetable

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/routetable/internal/delta"
)

// The kinds of the Table's objects in its Plan, State and errors.
const (
	kindRoute     dataplane.ObjectKind = "route"
	kindNeighbor  dataplane.ObjectKind = "neighbour"
	kindConntrack dataplane.ObjectKind = "conntrack"
)

// Plan returns the writes the next Apply would make, in its order: the
// deletion of conntrack entries still due, static neighbour entries,
// route deletions, route writes (with the conntrack deletion of routes
// that move first), neighbour deletions and the conntrack deletion of the
// host routes deleted. It writes nothing. It implements
// dataplane.Planner.
//
// It reads the kernel when the next Apply would (the first call, after
// QueueResync, the routes of an interface that came up), and that read
// serves the Apply; the queued interface and route events are taken in as
// well. Routes in their grace period, routes whose retry is not due and
// routes a foreign route blocks are not in it, as Apply would not write
// them. A nil ctx is context.Background().
func (t *Table) Plan(ctx context.Context) (dataplane.Plan, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now, err := t.read(ctx)
	if err != nil {
		return dataplane.Plan{}, err
	}
	var writes []dataplane.Write
	st := applyState{now: now, flush: append([]netip.Addr(nil), t.pendingFlush...), plan: &writes}
	t.write(ctx, &st)
	if err := ctx.Err(); err != nil {
		return dataplane.Plan{}, fmt.Errorf("%splan interrupted: %w", prefix, err)
	}
	return dataplane.Plan{Driver: t.Name(), Writes: writes}, nil
}

// State returns the routes and static neighbour entries of the Table in
// the kernel, every difference from the desired ones (also routes that
// wait: for their grace period, their retry, a foreign route in their
// place) and the failing objects. It writes nothing; it reads the kernel
// as Plan does. It implements dataplane.Stater. A nil ctx is
// context.Background().
func (t *Table) State(ctx context.Context) (dataplane.State, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.read(ctx); err != nil {
		return dataplane.State{}, err
	}
	s := dataplane.State{Driver: t.Name(), Failing: t.failed.Errors()}
	for k, v := range t.tr.Dataplane().All() {
		s.Owned = append(s.Owned, dataplane.Object{Kind: kindRoute, Text: t.routeText(k, v)})
	}
	for k, mac := range t.nbrs.Dataplane().All() {
		s.Owned = append(s.Owned, dataplane.Object{Kind: kindNeighbor, Text: t.neighborText(k, mac)})
	}
	t.tr.PendingUpdates().Iter(func(k rkey, v kroute) delta.IterAction {
		d := dataplane.Drift{Kind: kindRoute, Name: t.public(k).String(), Want: t.routeText(k, v)}
		if old, ok := t.tr.Dataplane().Get(k); ok {
			d.Have = t.routeText(k, old)
		}
		s.Drift = append(s.Drift, d)
		return delta.IterActionNoOp
	})
	t.tr.PendingDeletions().Iter(func(k rkey, v kroute) delta.IterAction {
		s.Drift = append(s.Drift, dataplane.Drift{Kind: kindRoute, Name: t.public(k).String(), Have: t.routeText(k, v)})
		return delta.IterActionNoOp
	})
	t.nbrs.PendingUpdates().Iter(func(k nbrKey, mac [6]byte) delta.IterAction {
		d := dataplane.Drift{Kind: kindNeighbor, Name: t.neighborName(k), Want: t.neighborText(k, mac)}
		if old, ok := t.nbrs.Dataplane().Get(k); ok {
			d.Have = t.neighborText(k, old)
		}
		s.Drift = append(s.Drift, d)
		return delta.IterActionNoOp
	})
	t.nbrs.PendingDeletions().Iter(func(k nbrKey, mac [6]byte) delta.IterAction {
		s.Drift = append(s.Drift, dataplane.Drift{Kind: kindNeighbor, Name: t.neighborName(k), Have: t.neighborText(k, mac)})
		return delta.IterActionNoOp
	})
	dataplane.SortState(&s)
	return s, nil
}

// updateWrite is the Plan's write of route k, v: an add when the Table
// has no route of key k in the kernel, else a replace of the one it has.
func (t *Table) updateWrite(k rkey, v kroute) dataplane.Write {
	w := dataplane.Write{Op: dataplane.WriteAdd, Kind: kindRoute, Object: t.routeText(k, v)}
	if old, ok := t.tr.Dataplane().Get(k); ok {
		w.Op, w.Detail = dataplane.WriteReplace, "was "+t.routeText(k, old)
	}
	return w
}

// neighborWrite is the Plan's write of the neighbour entry k with mac, by
// kind (kernel.OpReplace or kernel.OpDelete).
func (t *Table) neighborWrite(kind kernel.OpKind, k nbrKey, mac [6]byte) dataplane.Write {
	w := dataplane.Write{Op: dataplane.WriteDelete, Kind: kindNeighbor, Object: t.neighborText(k, mac)}
	if kind == kernel.OpDelete {
		return w
	}
	w.Op = dataplane.WriteAdd
	if old, ok := t.nbrs.Dataplane().Get(k); ok {
		w.Op, w.Detail = dataplane.WriteReplace, "was lladdr "+net.HardwareAddr(old[:]).String()
	}
	return w
}

// conntrackWrite is the Plan's deletion of the conntrack entries of addrs.
func conntrackWrite(addrs []netip.Addr) dataplane.Write {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return dataplane.Write{Op: dataplane.WriteDelete, Kind: kindConntrack, Object: "entries of " + strings.Join(s, " ")}
}

// routeText is the route k, v in the form `ip route` prints it, with the
// Table's protocol and interface names: "10.0.1.0/24 via 10.0.0.2 dev
// eth0 proto 80 metric 10", "blackhole 10.0.9.0/24 proto 80".
func (t *Table) routeText(k rkey, v kroute) string {
	var b strings.Builder
	switch v.typ {
	case kernel.RTNUnicast:
	case kernel.RTNLocal:
		b.WriteString("local ")
	case kernel.RTNBlackhole:
		b.WriteString("blackhole ")
	case kernel.RTNUnreachable:
		b.WriteString("unreachable ")
	case kernel.RTNProhibit:
		b.WriteString("prohibit ")
	case kernel.RTNThrow:
		b.WriteString("throw ")
	default:
		b.WriteString("type " + strconv.Itoa(int(v.typ)) + " ")
	}
	b.WriteString(t.prefixOf(k).String())
	if v.gw.IsValid() {
		b.WriteString(" via " + v.gw.String())
	}
	if v.oif != 0 {
		b.WriteString(" dev " + t.devText(v.oif))
	}
	if v.onlink {
		b.WriteString(" onlink")
	}
	if v.src.IsValid() {
		b.WriteString(" src " + v.src.String())
	}
	if v.mtu != 0 {
		b.WriteString(" mtu " + strconv.FormatUint(uint64(v.mtu), 10))
	}
	b.WriteString(" proto " + strconv.Itoa(int(v.proto)))
	if k.metric != 0 {
		b.WriteString(" metric " + strconv.FormatUint(uint64(k.metric), 10))
	}
	if v.hops != nil {
		for _, h := range *v.hops {
			b.WriteString(" nexthop")
			if h.gw.IsValid() {
				b.WriteString(" via " + h.gw.String())
			}
			b.WriteString(" dev " + t.devText(h.oif) + " weight " + strconv.Itoa(int(h.weight)+1))
			if h.onlink {
				b.WriteString(" onlink")
			}
		}
	}
	return b.String()
}

// devText names the interface with index oif, or gives its index when
// the Table does not know it ("if7").
func (t *Table) devText(oif int32) string {
	if name := t.nameOf(oif); name != "" {
		return name
	}
	return "if" + strconv.Itoa(int(oif))
}

// neighborName identifies the neighbour entry k: "10.0.0.5 dev eth0".
func (t *Table) neighborName(k nbrKey) string { return k.ip.String() + " dev " + t.devText(k.oif) }

// neighborText is the neighbour entry k with mac as `ip neigh` prints it:
// "10.0.0.5 dev eth0 lladdr 02:00:00:00:00:05 PERMANENT proto 80".
func (t *Table) neighborText(k nbrKey, mac [6]byte) string {
	return t.neighborName(k) + " lladdr " + net.HardwareAddr(mac[:]).String() + " PERMANENT proto " +
		strconv.Itoa(int(t.opts.Protocol))
}

var (
	_ dataplane.Planner = (*Table)(nil)
	_ dataplane.Stater  = (*Table)(nil)
)
