package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/nodeplane/nodeplane/kernel"
)

// InterfaceObserver is implemented by managers and drivers that follow the
// node's interfaces: their links and addresses. AddManager and AddDriver
// detect it once, at registration; the loop then delivers every link and
// address update it is given (see Loop.OnLink and Loop.OnAddrs) to each
// observer once, even one registered both as a manager and as a driver, in
// registration order, from the loop's goroutine, in order with the
// messages (before the manager sees a message sent after the update), never
// concurrently with OnUpdate, CompleteDeferredWork or the observer's own
// Apply. An observer records what it needs and returns at once, with no
// I/O; the loop runs an apply pass after the updates as after a message.
//
// A manager or driver without interest in addresses implements OnAddrs as a
// no-op, and one without interest in links OnLink.
type InterfaceObserver interface {
	// OnLink reports a new interface, a change of its state, MTU or kind,
	// or its disappearance (state kernel.LinkGone; link is then as last
	// known). link holds the interface's Name, Index, Kind and MTU; its
	// AdminUp and Running flags agree with state (both set for
	// kernel.LinkUp). A name deleted and created again is reported gone
	// with the old index, then present with the new one. link belongs to
	// the observer only for the call: keep copies, not its slices.
	OnLink(link kernel.Link, state kernel.LinkState)
	// OnAddrs reports the full, sorted set of an interface's addresses
	// whenever it changes, and nil when the interface is gone. addrs is the
	// observer's own copy.
	OnAddrs(name string, addrs []netip.Prefix)
}

// linkUpdate and addrsUpdate are the loop's own queue entries for OnLink
// and OnAddrs: only the loop makes them, and it hands them to its
// observers instead of its managers' OnUpdate.
type (
	linkUpdate struct {
		link  kernel.Link
		state kernel.LinkState
	}
	addrsUpdate struct {
		name  string
		addrs []netip.Prefix
	}
)

// OnLink queues a link update for the loop's InterfaceObservers, in order
// with the messages sent before and after it. An interface monitor's
// callback calls it (ifacemonitor.Options.OnLinkState with
// LinkUpdate.Link), so the agent wires the monitor to the loop once and
// the loop, not the agent, hands each update to every manager and driver
// that asks for it. The Loop is an InterfaceObserver itself.
//
// It never blocks (updates are not held back by Options.QueueSize, as the
// in-sync markers are not) and may be called from any goroutine, before
// and during Run; updates given after Run returned are dropped. Link
// updates sent before the monitor calls InterfacesInSync reach every
// observer before the loop takes that marker.
func (l *Loop) OnLink(link kernel.Link, state kernel.LinkState) {
	link.MAC = slices.Clone(link.MAC)
	_, _ = l.q.tryPush(linkUpdate{link: link, state: state}, true)
}

// OnAddrs queues an interface's addresses for the loop's
// InterfaceObservers, as OnLink queues a link update (ifacemonitor's
// Options.OnAddrs takes it as it is). It keeps its own copy of addrs.
func (l *Loop) OnAddrs(name string, addrs []netip.Prefix) {
	_, _ = l.q.tryPush(addrsUpdate{name: name, addrs: slices.Clone(addrs)}, true)
}

// addObserver records x as an observer when it is one and not yet
// recorded. The caller holds regMu.
func (l *Loop) addObserver(x any) {
	o, ok := x.(InterfaceObserver)
	if !ok {
		return
	}
	for _, have := range l.observers {
		if sameObject(have, o) {
			return
		}
	}
	l.observers = append(l.observers, o)
}

// observe delivers msg to every observer when it is a link or address
// update, and reports whether it was one; a panicking observer is an
// error, as a panicking manager is.
func (r *runner) observe(msg any) (bool, error) {
	var call func(InterfaceObserver)
	switch u := msg.(type) {
	case linkUpdate:
		call = func(o InterfaceObserver) { o.OnLink(u.link, u.state) }
	case addrsUpdate:
		call = func(o InterfaceObserver) { o.OnAddrs(u.name, slices.Clone(u.addrs)) }
	default:
		return false, nil
	}
	var errs []error
	for _, o := range r.l.observers {
		if err := safeDo(func() { call(o) }); err != nil {
			name := nameOf(o)
			err = fmt.Errorf("dataplane: observer %s %T: %w", name, msg, err)
			r.log.Error("dataplane: interface observer panicked", "observer", name, "error", err,
				"stack", string(stackOf(err)))
			errs = append(errs, err)
		}
	}
	return true, errors.Join(errs...)
}

var _ InterfaceObserver = (*Loop)(nil)
