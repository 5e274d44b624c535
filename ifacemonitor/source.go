//go:build linux

package ifacemonitor

import (
	"context"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Source is where a Monitor's events and listings come from when
// Options.Source is set, instead of the kernel: package ifacemonitorfake
// has an in-memory kernel for tests, and a wrapper around one can count or
// break calls. The monitor calls Subscribe once, from Start, and the
// listing methods from its one goroutine, never concurrently.
//
// A Source must behave as the kernel does: a listing shows the state after
// every event already sent on the stream, and events that are lost are
// announced by a Resync, after which the monitor lists everything again.
type Source interface {
	// Subscribe starts the event stream. Its first event must be a Resync
	// (the monitor lists nothing before it); the channel is closed once
	// ctx has ended and everything Subscribe started has stopped.
	Subscribe(ctx context.Context) (<-chan Event, error)
	// ListLinks lists every link, as a netlink dump would.
	ListLinks(ctx context.Context) ([]netlink.Link, error)
	// ListAddrs lists every address of both families.
	ListAddrs(ctx context.Context) ([]netlink.Addr, error)
	// ListRoutes lists every route of both families and all tables; it is
	// called only with Options.WatchRoutes.
	ListRoutes(ctx context.Context) ([]netlink.Route, error)
}

// Event is one message of a Source's stream. Exactly one field is set;
// an Event with none is ignored.
type Event struct {
	// Link is an RTM_NEWLINK or RTM_DELLINK message.
	Link *netlink.LinkUpdate
	// Addr is an RTM_NEWADDR or RTM_DELADDR message.
	Addr *netlink.AddrUpdate
	// Route is an RTM_NEWROUTE or RTM_DELROUTE message; ignored without
	// Options.WatchRoutes.
	Route *netlink.RouteUpdate
	// Resync says that the stream (re)started and that events may have
	// been lost before it: the monitor lists everything again and reports
	// the differences.
	Resync *Resync
	// Err reports a failed attempt to subscribe that the Source retries;
	// the monitor logs and counts it (Stats.SubscribeErrors).
	Err error
}

// Resync is the notice that a Source's stream (re)started.
type Resync struct {
	// Reason is nil for the first Resync of a stream, and says why events
	// were lost otherwise; a Reason wrapping ErrOverflow is counted in
	// Stats.Overflows as well as Stats.SubscriptionLosses.
	Reason error
}

// source is where the monitor's events and listings come from when
// Options.Source is nil: the kernel (netlinkSource) or, in the package's
// own tests, a scripted fake.
type source interface {
	// subscribe starts the event stream. Its first event for each kind is
	// a Resync (see nlutil.Watcher); it is closed once ctx has ended and
	// everything subscribe started has stopped.
	subscribe(ctx context.Context) (<-chan nlutil.Event, error)
	links(ctx context.Context) ([]netlink.Link, error)
	addrs(ctx context.Context) ([]netlink.Addr, error)
	routes(ctx context.Context) ([]netlink.Route, error)
}

// netlinkSource is the kernel: an nlutil.Watcher for events and a handle
// bound to the same namespace for dumps.
type netlinkSource struct {
	h *netlink.Handle
	w *nlutil.Watcher
}

func (s *netlinkSource) subscribe(ctx context.Context) (<-chan nlutil.Event, error) {
	return s.w.Start(ctx)
}

func (s *netlinkSource) links(ctx context.Context) ([]netlink.Link, error) {
	return nlutil.LinkList(ctx, s.h)
}

func (s *netlinkSource) addrs(ctx context.Context) ([]netlink.Addr, error) {
	return nlutil.AddrList(ctx, s.h, nil, netlink.FAMILY_ALL)
}

// routes lists every table of both families; the two dumps are separate so
// that multicast routing tables (which an AF_UNSPEC dump includes) stay
// out.
func (s *netlinkSource) routes(ctx context.Context) ([]netlink.Route, error) {
	all := &netlink.Route{Table: unix.RT_TABLE_UNSPEC}
	v4, err := nlutil.RouteListFiltered(ctx, s.h, netlink.FAMILY_V4, all, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	all = &netlink.Route{Table: unix.RT_TABLE_UNSPEC}
	v6, err := nlutil.RouteListFiltered(ctx, s.h, netlink.FAMILY_V6, all, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	return append(v4, v6...), nil
}

// The listing calls go to Options.Source when it is set, to the internal
// source otherwise.

func (m *Monitor) listLinks(ctx context.Context) ([]netlink.Link, error) {
	if m.pub != nil {
		return m.pub.ListLinks(ctx)
	}
	return m.src.links(ctx)
}

func (m *Monitor) listAddrs(ctx context.Context) ([]netlink.Addr, error) {
	if m.pub != nil {
		return m.pub.ListAddrs(ctx)
	}
	return m.src.addrs(ctx)
}

func (m *Monitor) listRoutes(ctx context.Context) ([]netlink.Route, error) {
	if m.pub != nil {
		return m.pub.ListRoutes(ctx)
	}
	return m.src.routes(ctx)
}
