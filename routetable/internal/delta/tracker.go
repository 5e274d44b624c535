package delta

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
)

// IterAction is what a pending-view iteration callback asks the Tracker to
// do with the key it was just given.
type IterAction int

const (
	// IterActionNoOp leaves the key pending.
	IterActionNoOp IterAction = iota
	// IterActionUpdateDataplane records that the kernel now matches the
	// desired state for the key: for a pending update the dataplane value
	// becomes the desired value; for a pending deletion the key is removed
	// from the dataplane view.
	IterActionUpdateDataplane
)

// String returns the action's name.
func (a IterAction) String() string {
	switch a {
	case IterActionNoOp:
		return "NoOp"
	case IterActionUpdateDataplane:
		return "UpdateDataplane"
	default:
		return fmt.Sprintf("IterAction(%d)", int(a))
	}
}

// ErrNilFunc is returned when a required callback is nil.
var ErrNilFunc = errors.New("delta: callback must not be nil")

// Tracker records desired and dataplane state for keys of type K with values
// of type V and maintains the pending updates and deletions between them.
//
// Create one with New or NewComparable. The zero Tracker is usable and
// compares values with reflect.DeepEqual.
type Tracker[K comparable, V any] struct {
	equal func(a, b V) bool

	// The three stores below are disjoint and together hold every key that
	// is desired or in the dataplane.

	// inSync holds keys whose desired and dataplane values are equal. The
	// stored value is the desired one.
	inSync store[K, V]
	// updates holds the desired value of keys whose dataplane value is
	// missing or different.
	updates store[K, V]
	// deletions holds the dataplane value of keys that are not desired.
	deletions store[K, V]

	// stale holds the dataplane value of keys in updates that are present
	// in the dataplane with a different value. Its keys are a subset of
	// updates' keys.
	stale store[K, V]
}

// shrinkMin is the peak size from which a store that becomes empty gives
// its memory back. Go maps never shrink, and the pending maps are transient:
// without this, a first full sync of N keys would leave an empty map sized
// for N behind.
const shrinkMin = 256

// store is a map that is dropped when it empties after having been large.
// A nil map reads as empty, so readers use m directly.
type store[K comparable, V any] struct {
	m    map[K]V
	peak int
}

func (s *store[K, V]) get(k K) (V, bool) {
	v, ok := s.m[k]
	return v, ok
}

func (s *store[K, V]) put(k K, v V) {
	if s.m == nil {
		s.m = make(map[K]V)
	}
	s.m[k] = v
	s.peak = max(s.peak, len(s.m))
}

// del removes k. Deleting during a range over s.m is safe: the map is only
// dropped once empty, when the range has nothing left to produce.
func (s *store[K, V]) del(k K) {
	if len(s.m) == 0 {
		return
	}
	delete(s.m, k)
	if len(s.m) == 0 && s.peak >= shrinkMin {
		s.m, s.peak = nil, 0
	}
}

// New returns an empty Tracker that compares values with equal. A nil equal
// means reflect.DeepEqual.
func New[K comparable, V any](equal func(a, b V) bool) *Tracker[K, V] {
	return &Tracker[K, V]{equal: equal}
}

// NewComparable returns an empty Tracker for a comparable value type, which
// compares values with ==.
func NewComparable[K comparable, V comparable]() *Tracker[K, V] {
	return &Tracker[K, V]{equal: func(a, b V) bool { return a == b }}
}

func (t *Tracker[K, V]) eq(a, b V) bool {
	if t.equal == nil {
		return reflect.DeepEqual(a, b)
	}
	return t.equal(a, b)
}

// Desired returns the view of the state the driver wants.
func (t *Tracker[K, V]) Desired() Desired[K, V] { return Desired[K, V]{t} }

// Dataplane returns the view of the state the kernel holds, as last read or
// written.
func (t *Tracker[K, V]) Dataplane() Dataplane[K, V] { return Dataplane[K, V]{t} }

// PendingUpdates returns the view of keys whose desired value still has to
// be written to the kernel.
func (t *Tracker[K, V]) PendingUpdates() PendingUpdates[K, V] { return PendingUpdates[K, V]{t} }

// PendingDeletions returns the view of keys that still have to be removed
// from the kernel.
func (t *Tracker[K, V]) PendingDeletions() PendingDeletions[K, V] {
	return PendingDeletions[K, V]{t}
}

// InSync reports whether there is nothing pending: the dataplane view equals
// the desired view.
func (t *Tracker[K, V]) InSync() bool {
	return len(t.updates.m) == 0 && len(t.deletions.m) == 0
}

// setDesired implements Desired.Set.
func (t *Tracker[K, V]) setDesired(k K, v V) {
	if cur, ok := t.inSync.get(k); ok {
		if t.eq(cur, v) {
			t.inSync.put(k, v)
			return
		}
		t.inSync.del(k)
		t.updates.put(k, v)
		t.stale.put(k, cur)
		return
	}
	if _, ok := t.updates.get(k); ok {
		if dp, ok := t.stale.get(k); ok && t.eq(dp, v) {
			t.updates.del(k)
			t.stale.del(k)
			t.inSync.put(k, v)
			return
		}
		t.updates.put(k, v)
		return
	}
	if dp, ok := t.deletions.get(k); ok {
		t.deletions.del(k)
		if t.eq(dp, v) {
			t.inSync.put(k, v)
			return
		}
		t.updates.put(k, v)
		t.stale.put(k, dp)
		return
	}
	t.updates.put(k, v)
}

// deleteDesired implements Desired.Delete.
func (t *Tracker[K, V]) deleteDesired(k K) {
	if cur, ok := t.inSync.get(k); ok {
		t.inSync.del(k)
		t.deletions.put(k, cur)
		return
	}
	if _, ok := t.updates.get(k); ok {
		t.updates.del(k)
		if dp, ok := t.stale.get(k); ok {
			t.stale.del(k)
			t.deletions.put(k, dp)
		}
	}
}

// setDataplane implements Dataplane.Set.
func (t *Tracker[K, V]) setDataplane(k K, v V) {
	if cur, ok := t.inSync.get(k); ok {
		if t.eq(cur, v) {
			return
		}
		t.inSync.del(k)
		t.updates.put(k, cur)
		t.stale.put(k, v)
		return
	}
	if want, ok := t.updates.get(k); ok {
		if t.eq(want, v) {
			t.markUpdated(k, want)
			return
		}
		t.stale.put(k, v)
		return
	}
	t.deletions.put(k, v)
}

// deleteDataplane implements Dataplane.Delete.
func (t *Tracker[K, V]) deleteDataplane(k K) {
	if cur, ok := t.inSync.get(k); ok {
		t.inSync.del(k)
		t.updates.put(k, cur)
		return
	}
	if _, ok := t.updates.get(k); ok {
		t.stale.del(k)
		return
	}
	t.deletions.del(k)
}

// markUpdated records that the kernel now holds the desired value v of k.
func (t *Tracker[K, V]) markUpdated(k K, v V) {
	t.updates.del(k)
	t.stale.del(k)
	t.inSync.put(k, v)
}

// Desired is the view of the desired state. Obtain it with
// Tracker.Desired.
type Desired[K comparable, V any] struct{ t *Tracker[K, V] }

// Get returns the desired value for k.
func (d Desired[K, V]) Get(k K) (V, bool) {
	if v, ok := d.t.inSync.get(k); ok {
		return v, true
	}
	return d.t.updates.get(k)
}

// Set records v as the desired value for k. Do not mutate v afterwards.
func (d Desired[K, V]) Set(k K, v V) { d.t.setDesired(k, v) }

// Delete records that k is no longer desired. Deleting an absent key does
// nothing.
func (d Desired[K, V]) Delete(k K) { d.t.deleteDesired(k) }

// Len returns the number of desired keys.
func (d Desired[K, V]) Len() int { return len(d.t.inSync.m) + len(d.t.updates.m) }

// All iterates over the desired keys and values, in no particular order.
// The tracker must not be modified during the iteration.
func (d Desired[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range d.t.inSync.m {
			if !yield(k, v) {
				return
			}
		}
		for k, v := range d.t.updates.m {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Dataplane is the view of the kernel's state as last read or written.
// Obtain it with Tracker.Dataplane.
type Dataplane[K comparable, V any] struct{ t *Tracker[K, V] }

// Get returns the dataplane value for k. When it equals the desired value,
// the desired value is returned.
func (d Dataplane[K, V]) Get(k K) (V, bool) {
	t := d.t
	if v, ok := t.inSync.get(k); ok {
		return v, true
	}
	if v, ok := t.stale.get(k); ok {
		return v, true
	}
	return t.deletions.get(k)
}

// Set records that the kernel holds v for k, for example after reading it
// back or after an event. Do not mutate v afterwards.
func (d Dataplane[K, V]) Set(k K, v V) { d.t.setDataplane(k, v) }

// Delete records that the kernel does not hold k.
func (d Dataplane[K, V]) Delete(k K) { d.t.deleteDataplane(k) }

// Len returns the number of keys in the dataplane view.
func (d Dataplane[K, V]) Len() int {
	return len(d.t.inSync.m) + len(d.t.stale.m) + len(d.t.deletions.m)
}

// All iterates over the dataplane keys and values, in no particular order.
// The tracker must not be modified during the iteration.
func (d Dataplane[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, m := range [...]map[K]V{d.t.inSync.m, d.t.stale.m, d.t.deletions.m} {
			for k, v := range m {
				if !yield(k, v) {
					return
				}
			}
		}
	}
}

// ReplaceAllIter replaces the whole dataplane view with what dump reports.
// dump calls add once per key found in the kernel (a later call for the
// same key wins) and returns the dump's error.
//
// On success every key that dump did not report is removed from the
// dataplane view. If dump returns an error, the keys reported so far are
// recorded but nothing is removed, so an incomplete dump never turns into
// spurious updates; the error is returned and the caller should retry.
// Calls to add after dump has returned are ignored.
func (d Dataplane[K, V]) ReplaceAllIter(dump func(add func(K, V)) error) error {
	if dump == nil {
		return ErrNilFunc
	}
	t := d.t
	seen := make(map[K]struct{}, d.Len())
	open := true
	err := dump(func(k K, v V) {
		if !open {
			return
		}
		seen[k] = struct{}{}
		t.setDataplane(k, v)
	})
	open = false
	if err != nil {
		return err
	}
	for k := range t.inSync.m {
		if _, ok := seen[k]; !ok {
			t.deleteDataplane(k)
		}
	}
	for k := range t.stale.m {
		if _, ok := seen[k]; !ok {
			t.stale.del(k)
		}
	}
	for k := range t.deletions.m {
		if _, ok := seen[k]; !ok {
			t.deletions.del(k)
		}
	}
	return nil
}

// PendingUpdates is the view of keys whose desired value is missing from, or
// different in, the dataplane. Obtain it with Tracker.PendingUpdates.
type PendingUpdates[K comparable, V any] struct{ t *Tracker[K, V] }

// Get returns the desired value of k if k has a pending update.
func (p PendingUpdates[K, V]) Get(k K) (V, bool) {
	return p.t.updates.get(k)
}

// Len returns the number of pending updates.
func (p PendingUpdates[K, V]) Len() int { return len(p.t.updates.m) }

// Iter calls fn for each pending update with the key and its desired value,
// in no particular order. When fn returns IterActionUpdateDataplane the
// dataplane value becomes the desired value and the key is no longer
// pending. fn must not modify the tracker other than through its return
// value.
func (p PendingUpdates[K, V]) Iter(fn func(k K, v V) IterAction) {
	if fn == nil {
		return
	}
	for k, v := range p.t.updates.m {
		if fn(k, v) == IterActionUpdateDataplane {
			p.t.markUpdated(k, v)
		}
	}
}

// PendingDeletions is the view of keys in the dataplane that are not
// desired. Obtain it with Tracker.PendingDeletions.
type PendingDeletions[K comparable, V any] struct{ t *Tracker[K, V] }

// Get returns the dataplane value of k if k is pending deletion.
func (p PendingDeletions[K, V]) Get(k K) (V, bool) {
	return p.t.deletions.get(k)
}

// Len returns the number of pending deletions.
func (p PendingDeletions[K, V]) Len() int { return len(p.t.deletions.m) }

// Iter calls fn for each pending deletion with the key and its dataplane
// value, in no particular order. When fn returns IterActionUpdateDataplane
// the key is removed from the dataplane view. fn must not modify the
// tracker other than through its return value.
func (p PendingDeletions[K, V]) Iter(fn func(k K, v V) IterAction) {
	if fn == nil {
		return
	}
	for k, v := range p.t.deletions.m {
		if fn(k, v) == IterActionUpdateDataplane {
			p.t.deletions.del(k)
		}
	}
}
