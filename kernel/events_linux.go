//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/kernel/internal/nlutil"
)

// Subscribe streams the kinds asked for through an nlutil.Watcher on the
// namespace (one socket for every kind, so events come in the kernel's
// order; a large receive buffer; resubscription after an overflow),
// decoding its messages with the codecs of the listings. The first event
// is a Resync (or an Err if subscribing failed, which is retried); a Resync
// after lost events has a Reason wrapping ErrOverflow. Cloned routes and
// routes of families other than IPv4 and IPv6 are not reported. Barriers
// are acknowledgements the kernel queues behind the messages already
// waiting on the socket (nlutil.Watcher.Barrier). The stream ends, and the
// channel is closed once everything Subscribe started has stopped, when
// ctx ends or ns is closed. The subscription holds its own duplicate of
// the namespace descriptor.
func (ns *Namespace) Subscribe(ctx context.Context, kinds EventKinds, opts ...SubscribeOptions) (<-chan Event, error) {
	if err := checkEventKinds(kinds); err != nil {
		return nil, err
	}
	o, err := CheckSubscribeOptions(opts...)
	if err != nil {
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
	wopts := ns.watch
	wopts.Kinds, wopts.Namespace, wopts.ReceiveBufferSize = watchKinds(kinds), &h, o.ReceiveBufferSize
	w, err := nlutil.NewWatcher(wopts)
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
	if o.Barriers != nil {
		o.Barriers(func() (uint64, error) {
			id, err := w.Barrier()
			if err != nil {
				return 0, fmt.Errorf("kernel: barrier: %w", err)
			}
			return id, nil
		})
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
	case e.Msg != nil:
		return messageEvent(e.Msg)
	case e.Barrier != nil:
		return Event{Barrier: &Barrier{ID: e.Barrier.ID}}, true
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

// messageEvent decodes a link, address or route message as the listings
// decode what they dump (Links, Addrs, DumpRoutes); ok is false for one
// that is malformed or not reported.
func messageEvent(m *nlutil.Message) (Event, bool) {
	switch m.Header.Type {
	case unix.RTM_NEWLINK, unix.RTM_DELLINK:
		if len(m.Data) < unix.SizeofIfInfomsg {
			return Event{}, false // the netlink library would index past it
		}
		nl, err := netlink.LinkDeserialize(&m.Header, m.Data)
		if err != nil || nl == nil || nl.Attrs() == nil {
			return Event{}, false
		}
		return Event{Link: &LinkEvent{Link: linkFromNetlink(nl), Deleted: m.Header.Type == unix.RTM_DELLINK}}, true
	case unix.RTM_NEWADDR, unix.RTM_DELADDR:
		a, ok := decodeAddr(m.Data)
		return Event{Addr: &AddrEvent{Addr: a, Deleted: m.Header.Type == unix.RTM_DELADDR}}, ok
	case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
		var r Route
		if ok, err := decodeRoute(m.Data, &r); !ok || err != nil || r.Flags&unix.RTM_F_CLONED != 0 {
			return Event{}, false
		}
		return Event{Route: &RouteEvent{Route: r, Deleted: m.Header.Type == unix.RTM_DELROUTE}}, true
	}
	return Event{}, false
}

// decodeAddr parses an ifaddrmsg and its attributes into the address as
// Addrs lists it: IFA_ADDRESS with the prefix length, but IFA_LOCAL as a
// host prefix when the message has one that is not an IPv4 IFA_ADDRESS
// (the kernel sends both only for a point-to-point address, whose prefix
// is the peer's). ok is false for a malformed
// message, a family other than IPv4 and IPv6, or no address.
func decodeAddr(payload []byte) (Addr, bool) {
	f, ok, err := headerFamily(payload, unix.SizeofIfAddrmsg, "address")
	if !ok || err != nil {
		return Addr{}, false
	}
	bits := int(payload[1])
	index := int(int32(ne.Uint32(payload[4:])))
	var address, local netip.Addr
	for attrs := payload[unix.SizeofIfAddrmsg:]; len(attrs) > 0; {
		t, v, rest, ok := nextAttr(attrs)
		if !ok {
			return Addr{}, false
		}
		attrs = rest
		switch t {
		case unix.IFA_ADDRESS:
			address, _ = addrOf(f, v)
		case unix.IFA_LOCAL:
			local, _ = addrOf(f, v)
		}
	}
	p := netip.PrefixFrom(address, bits)
	if local.IsValid() && (f != IPv4 || local != address) {
		p = netip.PrefixFrom(local, local.BitLen())
	}
	if !p.IsValid() || index <= 0 {
		return Addr{}, false
	}
	return Addr{LinkIndex: index, Prefix: p}, true
}
