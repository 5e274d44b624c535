package cluster

import (
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Block is a message: the pod address block CIDR belongs to Node. The
// node's own blocks are its local pods' (an overlay gives them a blackhole
// route, so unallocated addresses are dropped rather than sent back out);
// another node's blocks are routed to that node (through a tunnel,
// directly, or to its WireGuard peer). A later Block of the same CIDR
// replaces the earlier one.
type Block struct {
	// CIDR is the block: a network prefix without host bits. Its family
	// selects the managers that use it.
	CIDR netip.Prefix `json:"cidr"`
	// Node is the name of the node that owns the block. Required.
	Node string `json:"node"`
}

// BlockRemove is a message: the block is gone, and so are its routes.
type BlockRemove struct {
	// CIDR is the block.
	CIDR netip.Prefix `json:"cidr"`
}

// Validate reports, with an error wrapping ErrInvalid that names the
// block, a CIDR that is not a network prefix (host bits set: the error
// names the network) or a block without a node.
func (b *Block) Validate() error {
	if b == nil {
		return fmt.Errorf("%w block: nil", ErrInvalid)
	}
	if err := checkBlockCIDR(b.CIDR); err != nil {
		return err
	}
	if b.Node == "" {
		return fmt.Errorf("%w block %s: no node", ErrInvalid, b.CIDR)
	}
	return nil
}

// Validate reports, with an error wrapping ErrInvalid that names the
// block, a CIDR that is not a network prefix.
func (r *BlockRemove) Validate() error {
	if r == nil {
		return fmt.Errorf("%w block removal: nil", ErrInvalid)
	}
	return checkBlockCIDR(r.CIDR)
}

func checkBlockCIDR(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("%w block: no CIDR", ErrInvalid)
	}
	if m := p.Masked(); m != p {
		return errs.Also(fmt.Errorf("%w block %s: host bits set (the network is %s)", ErrInvalid, p, m), ipfamily.ErrHostBits)
	}
	return nil
}
