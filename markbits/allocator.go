package markbits

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"
)

// Allocator hands out the bits of one 32-bit mark mask to named owners.
//
// Each bit of the mask is either free, allocated to an owner (NextBit, Block,
// BlockAll) or reserved for a foreign user (Reserve). The lowest free bits are
// always handed out first. An owner may hold several bits, gathered over
// several calls; an owner name is used either for allocations or for
// reservations, never for both.
//
// All methods are safe for concurrent use. A failed call changes nothing.
// Use New to create one; the zero Allocator has an empty mask.
type Allocator struct {
	mu   sync.Mutex
	mask uint32
	free uint32
	held map[string]holding
}

type holding struct {
	bits     uint32
	reserved bool
}

// Allocation describes the bits held by one owner.
type Allocation struct {
	// Owner is the name given when the bits were allocated or reserved.
	Owner string
	// Bits is the union of the owner's bits.
	Bits uint32
	// Reserved is true when the bits were reserved for a foreign user with
	// Reserve; such bits may lie partly or wholly outside the mask.
	Reserved bool
}

// New returns an allocator over the bits of mask, all of them free. It fails
// with ErrEmptyMask if mask is 0.
func New(mask uint32) (*Allocator, error) {
	if mask == 0 {
		return nil, fmt.Errorf("%w: allocator needs at least one mark bit", ErrEmptyMask)
	}
	return &Allocator{mask: mask, free: mask, held: map[string]holding{}}, nil
}

// Mask returns the mask the allocator was created with.
func (a *Allocator) Mask() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mask
}

// Free returns the bits of the mask that are neither allocated nor reserved.
func (a *Allocator) Free() uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.free
}

// Available returns the number of free bits.
func (a *Allocator) Available() int {
	return bits.OnesCount32(a.Free())
}

// NextBit allocates the lowest free bit to owner and returns it. It fails with
// ErrExhausted when no bit is free.
func (a *Allocator) NextBit(owner string) (uint32, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOwner(owner, false); err != nil {
		return 0, err
	}
	if a.free == 0 {
		return 0, fmt.Errorf("%w: no free bit in mask 0x%08x for %q", ErrExhausted, a.mask, owner)
	}
	bit := a.free & -a.free
	a.take(owner, bit, false)
	return bit, nil
}

// Block allocates the n lowest free bits to owner and returns them as a Block.
// The bits need not be contiguous. It fails with ErrInvalidSize if n is not
// between 1 and 32, and with ErrExhausted if fewer than n bits are free; it
// never returns a smaller block than asked for.
func (a *Allocator) Block(owner string, n int) (Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < 1 || n > 32 {
		return Block{}, fmt.Errorf("%w: %d bits requested for %q, want 1 to 32", ErrInvalidSize, n, owner)
	}
	if err := a.checkOwner(owner, false); err != nil {
		return Block{}, err
	}
	if avail := bits.OnesCount32(a.free); avail < n {
		return Block{}, fmt.Errorf("%w: %d bits requested for %q, %d free in mask 0x%08x (free 0x%08x)",
			ErrExhausted, n, owner, avail, a.mask, a.free)
	}
	var block uint32
	for range n {
		block |= (a.free &^ block) & -(a.free &^ block)
	}
	a.take(owner, block, false)
	return Block{Mask: block}, nil
}

// BlockAll allocates every free bit to owner and returns them as a Block. It
// fails with ErrExhausted when no bit is free.
func (a *Allocator) BlockAll(owner string) (Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOwner(owner, false); err != nil {
		return Block{}, err
	}
	if a.free == 0 {
		return Block{}, fmt.Errorf("%w: no free bit in mask 0x%08x for %q", ErrExhausted, a.mask, owner)
	}
	block := a.free
	a.take(owner, block, false)
	return Block{Mask: block}, nil
}

// Reserve records that bits are used by a foreign owner (for example
// kube-proxy's 0x4000 and 0x8000, see KubeProxyMarks) so they are never
// allocated. Bits inside the mask are removed from the free bits. Bits outside
// the mask cannot be allocated anyway; they are still recorded, so Owner and
// Allocations report who uses them and a later overlapping reservation is
// caught.
//
// Reserving bits the same owner already reserved is not an error. It fails
// with ErrEmptyMask if bits is 0, with ErrInvalidOwner if owner is empty or
// holds allocated bits, and with ErrOverlap if any bit is allocated to or
// reserved by another owner.
func (a *Allocator) Reserve(owner string, bits uint32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.checkOwner(owner, true); err != nil {
		return err
	}
	if bits == 0 {
		return fmt.Errorf("%w: nothing to reserve for %q", ErrEmptyMask, owner)
	}
	for _, other := range a.sortedLocked() {
		if other.Owner == owner {
			continue
		}
		if clash := other.Bits & bits; clash != 0 {
			kind := "allocated to"
			if other.Reserved {
				kind = "reserved by"
			}
			return fmt.Errorf("%w: reserving 0x%08x for %q: bits 0x%08x already %s %q",
				ErrOverlap, bits, owner, clash, kind, other.Owner)
		}
	}
	a.take(owner, bits, true)
	return nil
}

// Release frees every bit held by owner, allocated or reserved, and returns
// them (0 if owner holds nothing).
func (a *Allocator) Release(owner string) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.held[owner]
	if !ok {
		return 0
	}
	delete(a.held, owner)
	a.free |= h.bits & a.mask
	return h.bits
}

// ReleaseBits frees the given bits whoever holds them and returns the bits
// that were actually held. Bits that were already free are ignored. An owner
// that loses some bits of a Block keeps the rest; its Block value is not
// updated.
func (a *Allocator) ReleaseBits(bits uint32) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var released uint32
	for owner, h := range a.held {
		lost := h.bits & bits
		if lost == 0 {
			continue
		}
		released |= lost
		h.bits &^= lost
		if h.bits == 0 {
			delete(a.held, owner)
		} else {
			a.held[owner] = h
		}
	}
	a.free |= released & a.mask
	return released
}

// Owner returns the owner of a single bit, and whether it has one. It returns
// false when bit is not exactly one bit or the bit is free.
func (a *Allocator) Owner(bit uint32) (string, bool) {
	if bits.OnesCount32(bit) != 1 {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for owner, h := range a.held {
		if h.bits&bit != 0 {
			return owner, true
		}
	}
	return "", false
}

// Bits returns the union of the bits held by owner (0 if none).
func (a *Allocator) Bits(owner string) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[owner].bits
}

// Allocated returns the union of all allocated bits, leaving out reservations.
// These are the bits the agent itself uses, for example the bits its rules
// must clear.
func (a *Allocator) Allocated() uint32 {
	return a.union(false)
}

// Reserved returns the union of all reserved bits, including those outside
// the mask.
func (a *Allocator) Reserved() uint32 {
	return a.union(true)
}

// Allocations lists every owner and its bits, ordered by lowest bit.
func (a *Allocator) Allocations() []Allocation {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sortedLocked()
}

func (a *Allocator) union(reserved bool) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var u uint32
	for _, h := range a.held {
		if h.reserved == reserved {
			u |= h.bits
		}
	}
	return u
}

// checkOwner validates owner for a new allocation (reserved=false) or
// reservation (reserved=true). Callers hold a.mu.
func (a *Allocator) checkOwner(owner string, reserved bool) error {
	if owner == "" {
		return fmt.Errorf("%w: owner name is empty", ErrInvalidOwner)
	}
	h, ok := a.held[owner]
	if !ok || h.reserved == reserved {
		return nil
	}
	if reserved {
		return fmt.Errorf("%w: %q holds allocated bits 0x%08x and cannot also reserve", ErrInvalidOwner, owner, h.bits)
	}
	return fmt.Errorf("%w: %q holds reserved bits 0x%08x and cannot also allocate", ErrInvalidOwner, owner, h.bits)
}

// take gives bits to owner. Callers hold a.mu and have checked for overlaps.
func (a *Allocator) take(owner string, bits uint32, reserved bool) {
	if a.held == nil {
		a.held = map[string]holding{}
	}
	h := a.held[owner]
	a.held[owner] = holding{bits: h.bits | bits, reserved: reserved}
	a.free &^= bits
}

// sortedLocked lists holdings by lowest bit, then owner. Callers hold a.mu.
func (a *Allocator) sortedLocked() []Allocation {
	out := make([]Allocation, 0, len(a.held))
	for owner, h := range a.held {
		out = append(out, Allocation{Owner: owner, Bits: h.bits, Reserved: h.reserved})
	}
	slices.SortFunc(out, func(x, y Allocation) int {
		if c := bits.TrailingZeros32(x.Bits) - bits.TrailingZeros32(y.Bits); c != 0 {
			return c
		}
		return strings.Compare(x.Owner, y.Owner)
	})
	return out
}
