package kernelfake

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/nodeplane/nodeplane/kernel"
)

// subscription is one Subscribe stream: the events not yet delivered.
type subscription struct {
	kinds    kernel.EventKinds
	queue    []kernel.Event
	gen      uint64        // bumped when Overflow replaces the queue
	wake     chan struct{} // signalled when the queue changes
	barriers uint64        // the last barrier ID handed out
}

func (sub *subscription) signal() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// Subscribe implements kernel.Events. The stream starts with a Resync and
// then carries an event for every change of the kinds asked for, in the
// order of the changes, each change announced once the state shows it.
// As the kernel does, it announces no deletion of the IPv4 routes that go
// with an interface going down or away (but the deletion of its
// addresses' local routes when it goes away), no change of a route's
// linkdown or dead flags, and, when an IPv6 multipath route loses a path,
// the deletion of that path alone as a single-path route. Nothing is lost unless Overflow is called. The
// channel is closed once ctx has ended and the stream's goroutine has
// stopped. A failure injected with Fail(OpSubscribe, …) is a failed
// attempt to subscribe, which the kernel package retries: the stream
// starts with an Err event carrying it, then the Resync. Options are
// checked as the kernel package checks them; the receive buffer size is
// not modelled (Overflow drops events instead). A barrier
// (SubscribeOptions.Barriers) is queued behind the events not yet
// delivered, and Overflow keeps it, before the Resync.
func (ns *Namespace) Subscribe(ctx context.Context, kinds kernel.EventKinds, opts ...kernel.SubscribeOptions) (<-chan kernel.Event, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer ns.lock()()
	injected := ns.enter(OpSubscribe)
	if kinds == 0 || kinds&^(kernel.EventLinks|kernel.EventAddrs|kernel.EventRoutes) != 0 {
		return nil, invalidf("event kinds 0x%x", uint8(kinds))
	}
	o, err := kernel.CheckSubscribeOptions(opts...)
	if err != nil {
		return nil, err
	}
	sub := &subscription{
		kinds: kinds,
		queue: []kernel.Event{{Resync: &kernel.Resync{Kinds: kinds}}},
		wake:  make(chan struct{}, 1),
	}
	if injected != nil {
		sub.queue = append([]kernel.Event{{Err: injected}}, sub.queue...)
	}
	ns.s.subs[sub] = struct{}{}
	if o.Barriers != nil {
		o.Barriers(func() (uint64, error) { return ns.barrier(sub) })
	}
	out := make(chan kernel.Event)
	go ns.forward(ctx, sub, out)
	return out, nil
}

// barrier queues a barrier on sub, or fails once its stream has ended.
func (ns *Namespace) barrier(sub *subscription) (uint64, error) {
	defer ns.lock()()
	if _, ok := ns.s.subs[sub]; !ok {
		return 0, errors.New("kernelfake: barrier: the stream has ended")
	}
	sub.barriers++
	sub.queue = append(sub.queue, kernel.Event{Barrier: &kernel.Barrier{ID: sub.barriers}})
	sub.signal()
	return sub.barriers, nil
}

// forward delivers sub's queue in order until ctx ends. An event leaves
// the queue only once delivered, so Overflow can still drop it while the
// receiver is busy.
func (ns *Namespace) forward(ctx context.Context, sub *subscription, out chan<- kernel.Event) {
	defer close(out)
	defer func() {
		defer ns.lock()()
		delete(ns.s.subs, sub)
	}()
	for {
		unlock := ns.lock()
		var ev kernel.Event
		has, gen := len(sub.queue) > 0, sub.gen
		if has {
			ev = sub.queue[0]
		}
		unlock()
		if !has {
			select {
			case <-sub.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- ev:
			unlock := ns.lock()
			if sub.gen == gen {
				sub.queue[0] = kernel.Event{}
				sub.queue = sub.queue[1:]
			}
			unlock()
		case <-sub.wake: // the queue changed: look again
		case <-ctx.Done():
			return
		}
	}
}

// Overflow drops every event not yet delivered to a subscriber, but for
// its barriers, and queues a Resync whose Reason wraps kernel.ErrOverflow
// (and ENOBUFS), as a netlink socket whose receive buffer overflowed.
func (ns *Namespace) Overflow() {
	defer ns.lock()()
	reason := fmt.Errorf("kernelfake: %w (%w)", kernel.ErrOverflow, syscall.ENOBUFS)
	for sub := range ns.s.subs {
		sub.gen++
		var kept []kernel.Event
		for _, ev := range sub.queue {
			if ev.Barrier != nil {
				kept = append(kept, ev)
			}
		}
		sub.queue = append(kept, kernel.Event{Resync: &kernel.Resync{Kinds: sub.kinds, Reason: reason}})
		sub.signal()
	}
}

// emit queues ev for every subscription to kind. The caller holds the
// lock.
func (s *state) emit(kind kernel.EventKinds, ev kernel.Event) {
	for sub := range s.subs {
		if sub.kinds&kind != 0 {
			sub.queue = append(sub.queue, ev)
			sub.signal()
		}
	}
}

func (s *state) emitLink(l *link, deleted bool) {
	s.emit(kernel.EventLinks, kernel.Event{Link: &kernel.LinkEvent{Link: l.report(), Deleted: deleted}})
}

func (s *state) emitAddr(l *link, p netip.Prefix, deleted bool) {
	s.emit(kernel.EventAddrs, kernel.Event{Addr: &kernel.AddrEvent{Addr: kernel.Addr{LinkIndex: l.Index, Prefix: p}, Deleted: deleted}})
}

func (s *state) emitRoute(r *kernel.Route, deleted bool) {
	if len(s.subs) == 0 {
		return
	}
	c := *r
	c.NextHops = slices.Clone(r.NextHops)
	s.emit(kernel.EventRoutes, kernel.Event{Route: &kernel.RouteEvent{Route: c, Deleted: deleted}})
}
