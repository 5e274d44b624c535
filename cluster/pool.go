package cluster

import (
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/ipfamily"
)

// Pool is one IP pool, declared or changed: a range pods take their
// addresses from. A later Pool with the same ID replaces it. The
// masquerade manager consumes it.
type Pool struct {
	// ID names the pool; required.
	ID string
	// CIDR is the pool's range, a network (10.244.0.0/16, not
	// 10.244.0.1/16), IPv4 or IPv6.
	CIDR netip.Prefix
	// Masquerade makes traffic from the pool to destinations outside every
	// pool leave the node with the address of the interface it leaves by.
	Masquerade bool
}

// Validate reports whether p is well formed: an ID and a network CIDR. The
// error names the pool and wraps ErrInvalid (and, for host bits, the
// ipfamily sentinel CheckNet returns).
func (p Pool) Validate() error {
	if p.ID == "" {
		return fmt.Errorf("%w pool: empty ID", ErrInvalid)
	}
	f := ipfamily.Of(p.CIDR.Addr())
	if !p.CIDR.IsValid() || !f.Valid() {
		return fmt.Errorf("%w pool %q: no valid CIDR", ErrInvalid, p.ID)
	}
	if err := f.CheckNet(p.CIDR); err != nil {
		return errs.Also(fmt.Errorf("%w pool %q: %s has host bits set (the network is %s)",
			ErrInvalid, p.ID, p.CIDR, p.CIDR.Masked()), err)
	}
	return nil
}

// PoolRemove withdraws the pool with ID. Removing a pool that is not
// declared does nothing.
type PoolRemove struct {
	// ID names the pool; required.
	ID string
}

// Validate reports whether r names a pool; the error wraps ErrInvalid.
func (r PoolRemove) Validate() error {
	if r.ID == "" {
		return fmt.Errorf("%w pool remove: empty ID", ErrInvalid)
	}
	return nil
}
