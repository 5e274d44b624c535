// Package markbits hands out bits of the 32-bit packet-mark space that a node
// agent is allowed to use, and encodes numbers into non-contiguous groups of
// those bits.
//
// An agent is usually told which part of the mark it may use (a mask such as
// 0xffff0000) and must share the rest with kube-proxy, other CNIs and its own
// BPF programs. The package owns only the bookkeeping of that mask:
//
//   - Allocator tracks every bit of one mask: which are free, which were handed
//     out to a named owner (NextBit, Block, BlockAll) and which are reserved for
//     someone else (Reserve). Allocation is deterministic: the lowest free bits
//     are always handed out first, so the same sequence of calls on the same
//     mask always yields the same bits, which keeps marks stable across agent
//     restarts. Bits can be given back with Release or ReleaseBits.
//   - Block is a set of (possibly non-contiguous) bits used as a small integer
//     field: Mark scatters a number into the block's bits and Number gathers it
//     back, which is how per-endpoint marks are encoded.
//   - NewLayout allocates the standard agent layout in one call (accept, pass,
//     scratch0, scratch1, an optional WireGuard bit, optional extra named bits,
//     then every remaining bit as the endpoint block) after carving out the bits
//     of the agent's BPF programs and of foreign users, and describes the result
//     for logs.
//   - EndpointMarks hands out one mark of a Block per interface (the
//     endpoint block of a Layout, typically): the number is a hash of the
//     interface's name, moved to the next free number on a collision, never
//     0, and the same while the interface holds it, so rules that set or
//     match an endpoint's mark need not change when other endpoints come and
//     go. Release gives a mark back; a full block is an error
//     (ErrBlockFull), never a shared mark.
//
// Typical use at agent start-up:
//
//	layout, err := markbits.NewLayout(markbits.LayoutOptions{
//		Mask:      cfg.MarkMask, // 0 means DefaultMask
//		WireGuard: cfg.WireGuardEnabled,
//		Reserved:  map[string]uint32{"kube-proxy": markbits.KubeProxyMarks},
//	})
//	if err != nil {
//		return fmt.Errorf("mark layout: %w", err)
//	}
//	logger.Info("mark bits", "layout", layout)
//
// The package is pure logic: it performs no I/O, starts no goroutines, never
// reads or writes packet marks, iptables/nftables rules or BPF programs, and
// builds on every operating system. Every method reports bad input (an empty
// mask, an exhausted mask, overlapping reservations, a number too large for a
// block) with an error that wraps one of the package's sentinel errors, leaves
// the allocator unchanged when it fails, and never panics. An Allocator is safe
// for concurrent use.
package markbits
