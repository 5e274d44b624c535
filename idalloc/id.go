package idalloc

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
)

// maxHashAttempts bounds the hash retries of one allocation. With SHA-256
// and any realistic number of names it is never reached; past it the
// allocator probes upwards from the last candidate, which always ends
// because there are far fewer names than IDs.
const maxHashAttempts = 1 << 10

// IDAllocator maps names (such as BPF IP-set or service names) to stable,
// non-zero uint64 IDs and back. It is safe for concurrent use.
//
// A name's ID is the first candidate, for attempt = 0, 1, 2, …, that is
// neither 0 nor held by another name, where candidate(attempt, name) is the
// first 8 bytes, read little-endian, of SHA-256(attempt as 8 little-endian
// bytes ‖ name). Nothing else feeds the hash, so in a fresh allocator
// (after a restart, say) a name whose attempt-0 candidate is free gets the
// same ID as before, whatever order the names are registered in. Only when
// two names collide does order matter: the name registered second moves to
// a later attempt, and after a restart the roles may swap. Collisions are
// vanishingly rare (about n²/2⁶⁵ for n names), but consumers that must
// never renumber should persist or re-read the IDs they use and pin them
// with ReserveWellKnown.
type IDAllocator struct {
	mu     sync.Mutex
	byName map[string]uint64
	byID   map[uint64]string
	// hash computes candidates; tests replace it to force collisions.
	hash func(attempt uint64, name string) uint64
}

// NewIDAllocator returns an empty IDAllocator.
func NewIDAllocator() *IDAllocator {
	return &IDAllocator{
		byName: make(map[string]uint64),
		byID:   make(map[uint64]string),
		hash:   candidate,
	}
}

// candidate is the default hash: the first 8 bytes, little-endian, of
// SHA-256(attempt as 8 little-endian bytes ‖ name).
func candidate(attempt uint64, name string) uint64 {
	var stack [128]byte // typical names fit without a heap allocation
	buf := binary.LittleEndian.AppendUint64(stack[:0], attempt)
	buf = append(buf, name...)
	sum := sha256.Sum256(buf)
	return binary.LittleEndian.Uint64(sum[:8])
}

// GetOrAlloc returns name's ID, allocating one if name has none. The result
// is never 0. Any string, including "", is a valid name.
func (a *IDAllocator) GetOrAlloc(name string) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id, ok := a.byName[name]; ok {
		return id
	}
	id := a.pick(name)
	a.byName[name] = id
	a.byID[id] = name
	return id
}

// pick finds a free ID for name. The caller holds mu.
func (a *IDAllocator) pick(name string) uint64 {
	var id uint64
	for attempt := range uint64(maxHashAttempts) {
		id = a.hash(attempt, name)
		if a.free(id) {
			return id
		}
	}
	for {
		id++
		if a.free(id) {
			return id
		}
	}
}

func (a *IDAllocator) free(id uint64) bool {
	if id == 0 {
		return false
	}
	_, taken := a.byID[id]
	return !taken
}

// Get returns name's ID without allocating one; ok is false when name has
// none.
func (a *IDAllocator) Get(name string) (id uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok = a.byName[name]
	return id, ok
}

// ReserveWellKnown pins name to id, for IDs that are fixed by convention or
// were read back from the kernel. Reserving a pair that already exists is a
// no-op. It returns an error wrapping ErrInvalidID for id 0, and
// ErrConflict when id belongs to another name or name already has another
// ID; nothing changes then.
func (a *IDAllocator) ReserveWellKnown(name string, id uint64) error {
	if id == 0 {
		return fmt.Errorf("reserve %q: %w: 0 is never used", name, ErrInvalidID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if owner, ok := a.byID[id]; ok {
		if owner == name {
			return nil
		}
		return fmt.Errorf("reserve %q as %d: %w: id belongs to %q", name, id, ErrConflict, owner)
	}
	if old, ok := a.byName[name]; ok {
		return fmt.Errorf("reserve %q as %d: %w: name already has id %d", name, id, ErrConflict, old)
	}
	a.byName[name] = id
	a.byID[id] = name
	return nil
}

// Release forgets name's ID so that it may be reused. It reports whether
// name had one.
func (a *IDAllocator) Release(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	id, ok := a.byName[name]
	if !ok {
		return false
	}
	delete(a.byName, name)
	delete(a.byID, id)
	return true
}

// Reverse returns the name that holds id; ok is false when no name does.
func (a *IDAllocator) Reverse(id uint64) (name string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	name, ok = a.byID[id]
	return name, ok
}

// Len returns the number of names that hold an ID.
func (a *IDAllocator) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byName)
}
