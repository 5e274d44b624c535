package serviceloop

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("serviceloop: invalid options")
	// ErrInvalidCIDR reports a ServiceCIDRs message with a prefix that is
	// not a network (host bits set) or not valid. The message changes
	// nothing.
	ErrInvalidCIDR = errors.New("serviceloop: invalid service CIDR")
)
