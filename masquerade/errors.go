package masquerade

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of, and the drivers' own sentinels where
// a driver refused a declaration.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("masquerade: invalid options")
	// ErrInvalidPool reports a cluster.Pool or cluster.PoolRemove that is
	// malformed: an empty ID, or a CIDR that is not a network (host bits
	// set). The error also wraps cluster.ErrInvalid. The message changes
	// nothing.
	ErrInvalidPool = errors.New("masquerade: invalid pool")
)
