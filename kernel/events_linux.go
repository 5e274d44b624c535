//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/internal/nlutil"
)

// Subscribe streams the kinds asked for through an nlutil.Watcher on the
// namespace (large receive buffer, resubscription after an overflow),
// converting its events to this package's types. The first event is a
// Resync (or an Err if subscribing failed, which is retried); a Resync
// after lost events has a Reason wrapping ErrOverflow. Cloned routes and
// routes of families other than IPv4 and IPv6 are not reported. The stream
// ends, and the channel is closed once everything Subscribe started has
// stopped, when ctx ends or ns is closed. The subscription holds its own
// duplicate of the namespace descriptor.
func (ns *Namespace) Subscribe(ctx context.Context, kinds EventKinds) (<-chan Event, error) {
	if err := checkEventKinds(kinds); err != nil {
		return nil, err
	}
	ctx = orBackground(ctx)
	if err := ns.acquire(ctx); err != nil {
		return nil, err
	}
	fd, err := unix.FcntlInt(uintptr(ns.fd), unix.F_DUPFD_CLOEXEC, 3)
	ns.release()
	if err != nil {
		return nil, fmt.Errorf("kernel: subscribe: duplicate the namespace descriptor: %w", err)
	}
	h := netns.NsHandle(fd)
	opts := ns.watch
	opts.Kinds, opts.Namespace = watchKinds(kinds), &h
	w, err := nlutil.NewWatcher(opts)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("kernel: subscribe: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	in, err := w.Start(wctx)
	if err != nil {
		cancel()
		unix.Close(fd)
		return nil, fmt.Errorf("kernel: subscribe: %w", err)
	}
	// Close ends the stream: done is closed then.
	stop := context.AfterFunc(ns.closing, cancel)
	out := make(chan Event, cap(in))
	go func() {
		defer close(out)
		defer unix.Close(fd) // the watcher is gone: in is closed
		defer cancel()
		defer stop()
		for nev := range in {
			ev, ok := eventOf(&nev)
			if !ok {
				continue
			}
			select {
			case out <- ev:
			case <-wctx.Done(): // drain in until the watcher has stopped
			}
		}
	}()
	return out, nil
}

// watchKinds converts EventKinds to the watcher's kinds.
func watchKinds(k EventKinds) nlutil.Kinds {
	var out nlutil.Kinds
	if k&EventLinks != 0 {
		out |= nlutil.Links
	}
	if k&EventAddrs != 0 {
		out |= nlutil.Addrs
	}
	if k&EventRoutes != 0 {
		out |= nlutil.Routes
	}
	return out
}

// eventKinds converts the watcher's kinds to EventKinds.
func eventKinds(k nlutil.Kinds) EventKinds {
	var out EventKinds
	if k&nlutil.Links != 0 {
		out |= EventLinks
	}
	if k&nlutil.Addrs != 0 {
		out |= EventAddrs
	}
	if k&nlutil.Routes != 0 {
		out |= EventRoutes
	}
	return out
}

// eventOf converts one watcher event; ok is false for one not reported.
func eventOf(e *nlutil.Event) (Event, bool) {
	switch {
	case e.Link != nil:
		if e.Link.Link == nil {
			return Event{}, false
		}
		return Event{Link: &LinkEvent{Link: linkFromNetlink(e.Link.Link), Deleted: e.Link.Header.Type == unix.RTM_DELLINK}}, true
	case e.Addr != nil:
		a := Addr{LinkIndex: e.Addr.LinkIndex, Prefix: prefixOfIPNet(&e.Addr.LinkAddress)}
		return Event{Addr: &AddrEvent{Addr: a, Deleted: !e.Addr.NewAddr}}, a.Prefix.IsValid()
	case e.Route != nil:
		r, ok := routeFromNetlink(&e.Route.Route)
		if !ok || r.Flags&unix.RTM_F_CLONED != 0 {
			return Event{}, false
		}
		return Event{Route: &RouteEvent{Route: r, Deleted: e.Route.Type == unix.RTM_DELROUTE}}, true
	case e.Resync != nil:
		reason := e.Resync.Reason
		if errors.Is(reason, nlutil.ErrOverflow) {
			reason = errs.Also(reason, ErrOverflow)
		}
		return Event{Resync: &Resync{Kinds: eventKinds(e.Resync.Kinds), Reason: reason}}, true
	case e.Err != nil:
		return Event{Err: fmt.Errorf("kernel: %w", e.Err)}, true
	}
	return Event{}, false
}

// routeFromNetlink converts a route of the netlink library; ok is false
// for a family other than IPv4 and IPv6.
func routeFromNetlink(nr *netlink.Route) (Route, bool) {
	f, ok := familyOfAF(uint8(nr.Family))
	if !ok {
		return Route{}, false
	}
	r := Route{
		Family: f, Table: uint32(nr.Table), Type: uint8(nr.Type), Protocol: uint8(nr.Protocol),
		Scope: uint8(nr.Scope), TOS: uint8(nr.Tos), Priority: uint32(nr.Priority), OIF: nr.LinkIndex,
		Gateway: familyAddr(nr.Gw, f), PrefSrc: familyAddr(nr.Src, f), Flags: uint32(nr.Flags), MTU: uint32(nr.MTU),
		Dst: netip.PrefixFrom(zeroAddr(f), 0),
	}
	if nr.Dst != nil {
		ones, _ := nr.Dst.Mask.Size()
		r.Dst = netip.PrefixFrom(familyAddr(nr.Dst.IP, f), ones)
	}
	if v, ok := nr.Via.(*netlink.Via); ok {
		r.Gateway = viaOf(v)
	}
	for _, h := range nr.MultiPath {
		nh := NextHop{OIF: h.LinkIndex, Gateway: familyAddr(h.Gw, f), Weight: uint8(h.Hops), Flags: uint32(h.Flags)}
		if v, ok := h.Via.(*netlink.Via); ok {
			nh.Gateway = viaOf(v)
		}
		r.NextHops = append(r.NextHops, nh)
	}
	return r, true
}

// familyAddr converts a net.IP of family f (nil: the zero Addr).
func familyAddr(ip net.IP, f Family) netip.Addr {
	if ip == nil {
		return netip.Addr{}
	}
	if f == IPv4 {
		ip = ip.To4()
	} else {
		ip = ip.To16()
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// viaOf converts an RTA_VIA gateway.
func viaOf(v *netlink.Via) netip.Addr {
	if f, ok := familyOfAF(uint8(v.AddrFamily)); ok {
		return familyAddr(v.Addr, f)
	}
	return netip.Addr{}
}
