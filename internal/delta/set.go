package delta

import "iter"

// SetTracker is the Tracker for sets: only membership matters, so a member
// is either in sync, pending addition or pending deletion. It is a thin
// wrapper over Tracker[K, struct{}], which stores nothing per member beyond
// the map entry.
//
// The zero SetTracker is ready to use.
type SetTracker[K comparable] struct {
	t Tracker[K, struct{}]
}

// NewSet returns an empty SetTracker.
func NewSet[K comparable]() *SetTracker[K] {
	s := &SetTracker[K]{}
	s.t.equal = func(struct{}, struct{}) bool { return true }
	return s
}

// Desired returns the view of the members the driver wants.
func (s *SetTracker[K]) Desired() DesiredSet[K] { return DesiredSet[K]{s.tr()} }

// Dataplane returns the view of the members the kernel holds.
func (s *SetTracker[K]) Dataplane() DataplaneSet[K] { return DataplaneSet[K]{s.tr()} }

// PendingAdds returns the view of desired members missing from the kernel.
func (s *SetTracker[K]) PendingAdds() PendingSet[K] {
	return PendingSet[K]{t: s.tr(), adds: true}
}

// PendingDeletions returns the view of kernel members that are not desired.
func (s *SetTracker[K]) PendingDeletions() PendingSet[K] {
	return PendingSet[K]{t: s.tr()}
}

// InSync reports whether the kernel's members equal the desired members.
func (s *SetTracker[K]) InSync() bool { return s.t.InSync() }

// tr returns the inner tracker, with its equality set for the zero value.
func (s *SetTracker[K]) tr() *Tracker[K, struct{}] {
	if s.t.equal == nil {
		s.t.equal = func(struct{}, struct{}) bool { return true }
	}
	return &s.t
}

// DesiredSet is the view of the desired members of a SetTracker.
type DesiredSet[K comparable] struct{ t *Tracker[K, struct{}] }

// Add records that k is desired.
func (d DesiredSet[K]) Add(k K) { d.t.setDesired(k, struct{}{}) }

// Delete records that k is no longer desired.
func (d DesiredSet[K]) Delete(k K) { d.t.deleteDesired(k) }

// DeleteAll records that no member is desired.
func (d DesiredSet[K]) DeleteAll() { d.t.Desired().DeleteAll() }

// Contains reports whether k is desired.
func (d DesiredSet[K]) Contains(k K) bool { _, ok := d.t.Desired().Get(k); return ok }

// Len returns the number of desired members.
func (d DesiredSet[K]) Len() int { return d.t.Desired().Len() }

// All iterates over the desired members in no particular order. The tracker
// must not be modified during the iteration.
func (d DesiredSet[K]) All() iter.Seq[K] { return keys(d.t.Desired().All()) }

// DataplaneSet is the view of the kernel's members of a SetTracker.
type DataplaneSet[K comparable] struct{ t *Tracker[K, struct{}] }

// Add records that the kernel holds k.
func (d DataplaneSet[K]) Add(k K) { d.t.setDataplane(k, struct{}{}) }

// Delete records that the kernel does not hold k.
func (d DataplaneSet[K]) Delete(k K) { d.t.deleteDataplane(k) }

// Contains reports whether the kernel holds k.
func (d DataplaneSet[K]) Contains(k K) bool { _, ok := d.t.Dataplane().Get(k); return ok }

// Len returns the number of members the kernel holds.
func (d DataplaneSet[K]) Len() int { return d.t.Dataplane().Len() }

// All iterates over the kernel's members in no particular order. The
// tracker must not be modified during the iteration.
func (d DataplaneSet[K]) All() iter.Seq[K] { return keys(d.t.Dataplane().All()) }

// ReplaceAll replaces the kernel's members with members, a fresh dump.
func (d DataplaneSet[K]) ReplaceAll(members iter.Seq[K]) {
	_ = d.ReplaceAllIter(func(add func(K)) error {
		if members != nil {
			for k := range members {
				add(k)
			}
		}
		return nil
	})
}

// ReplaceAllIter replaces the kernel's members with those dump reports,
// with the error rules of Dataplane.ReplaceAllIter.
func (d DataplaneSet[K]) ReplaceAllIter(dump func(add func(K)) error) error {
	if dump == nil {
		return ErrNilFunc
	}
	return d.t.Dataplane().ReplaceAllIter(func(add func(K, struct{})) error {
		return dump(func(k K) { add(k, struct{}{}) })
	})
}

// PendingSet is the view of the members of a SetTracker that are pending
// addition (PendingAdds) or pending deletion (PendingDeletions).
type PendingSet[K comparable] struct {
	t    *Tracker[K, struct{}]
	adds bool // PendingAdds, else PendingDeletions
}

func (p PendingSet[K]) store() *store[K, struct{}] {
	if p.t == nil {
		return &store[K, struct{}]{}
	}
	if p.adds {
		return &p.t.updates
	}
	return &p.t.deletions
}

// mark records that the kernel now reflects the pending change of k.
func (p PendingSet[K]) mark(k K) {
	if p.adds {
		if _, ok := p.t.updates.get(k); ok {
			p.t.markUpdated(k, struct{}{})
		}
		return
	}
	p.t.deletions.del(k)
}

// Contains reports whether k is pending.
func (p PendingSet[K]) Contains(k K) bool { _, ok := p.store().get(k); return ok }

// Len returns the number of pending members.
func (p PendingSet[K]) Len() int { return len(p.store().m) }

// Iter calls fn for each pending member in no particular order. When fn
// returns IterActionUpdateDataplane the kernel is recorded as done: an add
// makes the member present in the dataplane view, a deletion removes it.
// fn must not modify the tracker other than through its return value.
func (p PendingSet[K]) Iter(fn func(k K) IterAction) {
	if fn == nil {
		return
	}
	for k := range p.store().m {
		if fn(k) == IterActionUpdateDataplane {
			p.mark(k)
		}
	}
}

// IterBatched hands the pending members to send in batches of at most n.
// send returns how many members, from the start of the batch, the kernel
// now reflects; those are recorded. The rules of PendingUpdates.IterBatched
// apply.
func (p PendingSet[K]) IterBatched(n int, send func(batch []K) (programmed int, err error)) error {
	if send == nil {
		return ErrNilFunc
	}
	return iterBatched(p.store().m, n, func(k K, _ struct{}) K { return k }, func(k K) K { return k }, send, p.mark)
}

func keys[K, V any](seq iter.Seq2[K, V]) iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range seq {
			if !yield(k) {
				return
			}
		}
	}
}
