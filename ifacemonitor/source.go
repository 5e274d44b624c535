//go:build linux

package ifacemonitor

import (
	"context"

	"github.com/nodeplane/nodeplane/internal/nlutil"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// source is where the monitor's events and listings come from: the kernel
// (netlinkSource) or, in tests, a scripted fake.
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
