package markbits

import (
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"slices"
	"strings"
)

// DefaultMask is the part of the packet mark an agent uses when it is not
// told otherwise: the upper 16 bits, leaving the lower half to kube-proxy and
// other users.
const DefaultMask uint32 = 0xffff0000

// KubeProxyMarks are the mark bits kube-proxy's iptables mode uses: 0x4000 to
// flag packets for masquerade and 0x8000 to flag packets to drop. Pass them to
// Reserve (or LayoutOptions.Reserved) when the agent's mask might include
// them.
const KubeProxyMarks uint32 = 0x00004000 | 0x00008000

// Owner names NewLayout uses for the bits it allocates and reserves. They,
// and "mask", cannot be used as LayoutOptions.Extra or LayoutOptions.Reserved
// names.
const (
	OwnerAccept    = "accept"
	OwnerPass      = "pass"
	OwnerScratch0  = "scratch0"
	OwnerScratch1  = "scratch1"
	OwnerWireGuard = "wireguard"
	OwnerEndpoint  = "endpoint"
	OwnerBPF       = "bpf"
)

// fixedOwners are the names of the single bits every layout has, in
// allocation order.
var fixedOwners = []string{OwnerAccept, OwnerPass, OwnerScratch0, OwnerScratch1}

// isLayoutOwner reports whether name is taken by the layout itself ("mask"
// is taken by its description).
func isLayoutOwner(name string) bool {
	switch name {
	case OwnerAccept, OwnerPass, OwnerScratch0, OwnerScratch1, OwnerWireGuard, OwnerEndpoint, OwnerBPF, "mask":
		return true
	}
	return false
}

// LayoutOptions says how NewLayout splits the agent's mark mask.
type LayoutOptions struct {
	// Mask is the part of the packet mark the agent may use. 0 means
	// DefaultMask.
	Mask uint32
	// WireGuard allocates a bit for WireGuard, right after scratch1.
	WireGuard bool
	// Extra names further single bits the agent needs (for example "drop"),
	// allocated in order after the WireGuard bit (or after scratch1). Names
	// must be non-empty, unique and not one of the Owner… constants or "mask".
	Extra []string
	// BPFReserved are the bits the agent's own BPF programs use. They must
	// lie inside Mask — the BPF programs and the agent's rules share the
	// agent's part of the mark — and are removed before anything is
	// allocated. Bits outside Mask fail with ErrOutsideMask.
	BPFReserved uint32
	// Reserved maps foreign users (for example "kube-proxy" to
	// KubeProxyMarks) to the bits they use. Bits inside Mask are removed
	// before anything is allocated; bits outside Mask are only recorded.
	// Reservations must be non-empty and must not overlap each other or
	// BPFReserved; names must be non-empty and differ from the Owner…
	// constants, "mask" and the Extra names.
	Reserved map[string]uint32
	// MinEndpointBits is the smallest endpoint block NewLayout accepts; 0
	// means 1. It must not exceed 32.
	MinEndpointBits int
}

// Layout is the standard split of an agent's mark mask, as allocated by
// NewLayout. All bits are disjoint. Allocation order, lowest free bit first,
// is accept, pass, scratch0, scratch1, wireguard (if enabled), the extra bits
// in the order given, then every remaining bit as the endpoint block.
type Layout struct {
	// Mask is the agent's mask the layout was allocated from.
	Mask uint32
	// Accept is the bit that marks a packet as accepted by policy.
	Accept uint32
	// Pass is the bit that marks a packet as passed to the next policy tier.
	Pass uint32
	// Scratch0 is a short-lived bit for use within one chain.
	Scratch0 uint32
	// Scratch1 is a second short-lived bit.
	Scratch1 uint32
	// WireGuard is the bit that marks WireGuard traffic, 0 when not enabled.
	WireGuard uint32
	// Extra holds the bits allocated for LayoutOptions.Extra, by name; nil
	// when none were asked for.
	Extra map[string]uint32
	// Endpoint is the block of all remaining bits, used to encode endpoint
	// numbers into the mark.
	Endpoint Block
	// BPF are the bits reserved for the agent's BPF programs.
	BPF uint32
	// Reserved are the foreign reservations, by owner; nil when none.
	Reserved map[string]uint32
}

// NewLayout allocates the standard layout from opts.Mask (DefaultMask if 0).
// It first removes opts.BPFReserved and the reservations in opts.Reserved,
// then allocates accept, pass, scratch0, scratch1, the WireGuard bit if
// enabled, the extra bits, and gives all remaining bits to the endpoint block.
//
// It fails with ErrOutsideMask if BPF bits lie outside the mask, with
// ErrOverlap if reservations overlap each other or the BPF bits, with
// ErrInvalidOwner for bad Extra or Reserved names, with ErrEmptyMask for an
// empty reservation, with ErrInvalidSize for a bad MinEndpointBits, and with
// ErrExhausted if the mask is too small for the layout.
func NewLayout(opts LayoutOptions) (Layout, error) {
	mask := opts.Mask
	if mask == 0 {
		mask = DefaultMask
	}
	minEP := opts.MinEndpointBits
	if minEP < 0 || minEP > 32 {
		return Layout{}, fmt.Errorf("%w: MinEndpointBits is %d, want 0 to 32", ErrInvalidSize, minEP)
	}
	if minEP == 0 {
		minEP = 1
	}
	seen := map[string]bool{}
	for _, name := range opts.Extra {
		switch {
		case name == "":
			return Layout{}, fmt.Errorf("%w: empty extra bit name", ErrInvalidOwner)
		case isLayoutOwner(name):
			return Layout{}, fmt.Errorf("%w: extra bit name %q is used by the layout itself", ErrInvalidOwner, name)
		case seen[name]:
			return Layout{}, fmt.Errorf("%w: extra bit name %q given twice", ErrInvalidOwner, name)
		}
		seen[name] = true
	}
	reservedNames := slices.Sorted(maps.Keys(opts.Reserved))
	for _, name := range reservedNames {
		switch {
		case name == "":
			return Layout{}, fmt.Errorf("%w: empty reservation name", ErrInvalidOwner)
		case isLayoutOwner(name):
			return Layout{}, fmt.Errorf("%w: reservation name %q is used by the layout itself", ErrInvalidOwner, name)
		case seen[name]:
			return Layout{}, fmt.Errorf("%w: reservation name %q is also an extra bit name", ErrInvalidOwner, name)
		}
	}
	if outside := opts.BPFReserved &^ mask; outside != 0 {
		return Layout{}, fmt.Errorf("%w: BPF bits 0x%08x are not in mask 0x%08x", ErrOutsideMask, outside, mask)
	}

	a, err := New(mask)
	if err != nil {
		return Layout{}, err
	}
	if opts.BPFReserved != 0 {
		if err := a.Reserve(OwnerBPF, opts.BPFReserved); err != nil {
			return Layout{}, err
		}
	}
	for _, name := range reservedNames {
		if err := a.Reserve(name, opts.Reserved[name]); err != nil {
			return Layout{}, err
		}
	}

	singles := slices.Clone(fixedOwners)
	if opts.WireGuard {
		singles = append(singles, OwnerWireGuard)
	}
	singles = append(singles, opts.Extra...)
	if need, avail := len(singles)+minEP, a.Available(); avail < need {
		return Layout{}, fmt.Errorf("%w: mask 0x%08x has %d free bits (0x%08x) after removing BPF bits 0x%08x and reservations 0x%08x; "+
			"layout needs %d (%d single bits and at least %d endpoint bits)",
			ErrExhausted, mask, avail, a.Free(), opts.BPFReserved, a.Reserved()&mask&^opts.BPFReserved, need, len(singles), minEP)
	}

	got := make(map[string]uint32, len(singles))
	for _, name := range singles {
		bit, err := a.NextBit(name)
		if err != nil {
			return Layout{}, err
		}
		got[name] = bit
	}
	endpoint, err := a.BlockAll(OwnerEndpoint)
	if err != nil {
		return Layout{}, err
	}

	l := Layout{
		Mask:      mask,
		Accept:    got[OwnerAccept],
		Pass:      got[OwnerPass],
		Scratch0:  got[OwnerScratch0],
		Scratch1:  got[OwnerScratch1],
		WireGuard: got[OwnerWireGuard],
		Endpoint:  endpoint,
		BPF:       opts.BPFReserved,
	}
	if len(opts.Extra) > 0 {
		l.Extra = make(map[string]uint32, len(opts.Extra))
		for _, name := range opts.Extra {
			l.Extra[name] = got[name]
		}
	}
	if len(opts.Reserved) > 0 {
		l.Reserved = maps.Clone(opts.Reserved)
	}
	return l, nil
}

// Owned returns the union of every bit the layout allocated to the agent's
// rules: the single bits and the endpoint block. It leaves out the BPF bits
// and foreign reservations. Rules that must reset the agent's mark state clear
// exactly these bits.
func (l Layout) Owned() uint32 {
	u := l.Accept | l.Pass | l.Scratch0 | l.Scratch1 | l.WireGuard | l.Endpoint.Mask
	for _, bit := range l.Extra {
		u |= bit
	}
	return u
}

// ReservedInMask returns the bits of foreign reservations that fell inside
// the mask and were therefore removed from it. A non-zero result means the
// configured mask overlaps another user's bits; the layout avoids them, but an
// agent may want to warn about it.
func (l Layout) ReservedInMask() uint32 {
	var u uint32
	for _, bits := range l.Reserved {
		u |= bits
	}
	return u & l.Mask
}

// Allocations lists every named holding of the layout — allocated bits, the
// BPF bits and foreign reservations — ordered by lowest bit.
func (l Layout) Allocations() []Allocation {
	var out []Allocation
	add := func(owner string, bits uint32, reserved bool) {
		if bits != 0 {
			out = append(out, Allocation{Owner: owner, Bits: bits, Reserved: reserved})
		}
	}
	add(OwnerAccept, l.Accept, false)
	add(OwnerPass, l.Pass, false)
	add(OwnerScratch0, l.Scratch0, false)
	add(OwnerScratch1, l.Scratch1, false)
	add(OwnerWireGuard, l.WireGuard, false)
	for name, bit := range l.Extra {
		add(name, bit, false)
	}
	add(OwnerEndpoint, l.Endpoint.Mask, false)
	add(OwnerBPF, l.BPF, true)
	for name, bits := range l.Reserved {
		add(name, bits, true)
	}
	slices.SortFunc(out, func(x, y Allocation) int {
		if c := bits.TrailingZeros32(x.Bits) - bits.TrailingZeros32(y.Bits); c != 0 {
			return c
		}
		return strings.Compare(x.Owner, y.Owner)
	})
	return out
}

// String describes the layout for logs, in allocation order, for example
// "mask=0xffff0000 accept=0x00010000 pass=0x00020000 scratch0=0x00040000
// scratch1=0x00080000 endpoint=0xfff00000 (12 bits)". The WireGuard bit,
// extra bits, BPF bits and reservations are listed only when present; each
// reservation appears as "reserved:<owner>=<bits>" followed by either
// "(outside mask)" or the part of it that fell inside the mask.
func (l Layout) String() string {
	var b strings.Builder
	for i, kv := range l.describe() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(kv[1])
	}
	return b.String()
}

// LogValue implements slog.LogValuer, so a Layout logged as an attribute
// becomes a group with one hex string per field.
func (l Layout) LogValue() slog.Value {
	kvs := l.describe()
	attrs := make([]slog.Attr, 0, len(kvs))
	for _, kv := range kvs {
		attrs = append(attrs, slog.String(kv[0], kv[1]))
	}
	return slog.GroupValue(attrs...)
}

func (l Layout) describe() [][2]string {
	hex := func(v uint32) string { return fmt.Sprintf("0x%08x", v) }
	kvs := [][2]string{
		{"mask", hex(l.Mask)},
		{OwnerAccept, hex(l.Accept)},
		{OwnerPass, hex(l.Pass)},
		{OwnerScratch0, hex(l.Scratch0)},
		{OwnerScratch1, hex(l.Scratch1)},
	}
	if l.WireGuard != 0 {
		kvs = append(kvs, [2]string{OwnerWireGuard, hex(l.WireGuard)})
	}
	extra := slices.SortedFunc(maps.Keys(l.Extra), func(x, y string) int {
		return int(bits.TrailingZeros32(l.Extra[x])) - int(bits.TrailingZeros32(l.Extra[y]))
	})
	for _, name := range extra {
		kvs = append(kvs, [2]string{name, hex(l.Extra[name])})
	}
	kvs = append(kvs, [2]string{OwnerEndpoint, l.Endpoint.String()})
	if l.BPF != 0 {
		kvs = append(kvs, [2]string{OwnerBPF, hex(l.BPF)})
	}
	for _, name := range slices.Sorted(maps.Keys(l.Reserved)) {
		v := hex(l.Reserved[name])
		if in := l.Reserved[name] & l.Mask; in == 0 {
			v += " (outside mask)"
		} else {
			v += " (" + hex(in) + " in mask)"
		}
		kvs = append(kvs, [2]string{"reserved:" + name, v})
	}
	return kvs
}
