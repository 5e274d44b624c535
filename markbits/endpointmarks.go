package markbits

import (
	"fmt"
	"hash/fnv"
	"sync"
)

// EndpointMarks gives each interface a mark of a Block: a number of the
// block, never 0, chosen from a hash of the interface's name, so that the
// same interface gets the same mark while it holds one, and the same calls
// in the same order always give the same marks (across agent restarts too).
// When the hashed number is taken, the next free one is used (linear
// probing, wrapping past the block's last number to 1).
//
// An EndpointMarks is safe for concurrent use.
type EndpointMarks struct {
	block Block
	slots uint64 // usable numbers: 1 … slots

	mu      sync.Mutex
	byIface map[string]uint64
	byNum   map[uint64]string
}

// NewEndpointMarks returns the marks of block. It fails with ErrEmptyMask
// for a block with no bits (whose only number is the zero mark).
func NewEndpointMarks(block Block) (*EndpointMarks, error) {
	if block.Mask == 0 {
		return nil, fmt.Errorf("%w: endpoint mark block has no bits", ErrEmptyMask)
	}
	return &EndpointMarks{
		block:   block,
		slots:   block.Capacity() - 1,
		byIface: map[string]uint64{},
		byNum:   map[uint64]string{},
	}, nil
}

// Block returns the block the marks are taken from.
func (e *EndpointMarks) Block() Block { return e.block }

// Mark returns the mark of iface, giving it one if it has none. It fails
// with ErrInvalidOwner for an empty name and with ErrBlockFull when every
// number of the block but 0 is held by another interface.
func (e *EndpointMarks) Mark(iface string) (uint32, error) {
	if iface == "" {
		return 0, fmt.Errorf("%w: empty interface name", ErrInvalidOwner)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.byIface[iface]; ok {
		return e.block.Mark(n)
	}
	if uint64(len(e.byIface)) >= e.slots {
		return 0, fmt.Errorf("%w: all %d marks of block %s are held; no mark for %s",
			ErrBlockFull, e.slots, e.block, iface)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(iface))
	n := h.Sum64()%e.slots + 1
	for {
		if _, taken := e.byNum[n]; !taken {
			break
		}
		if n == e.slots {
			n = 1
		} else {
			n++
		}
	}
	e.byIface[iface] = n
	e.byNum[n] = iface
	return e.block.Mark(n)
}

// Release gives back the mark of iface; it does nothing when iface holds
// none.
func (e *EndpointMarks) Release(iface string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.byIface[iface]; ok {
		delete(e.byIface, iface)
		delete(e.byNum, n)
	}
}

// Iface returns the interface that holds mark, if any. Bits of mark
// outside the block are ignored.
func (e *EndpointMarks) Iface(mark uint32) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	name, ok := e.byNum[e.block.Number(mark)]
	return name, ok
}

// Len returns how many interfaces hold a mark.
func (e *EndpointMarks) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byIface)
}
