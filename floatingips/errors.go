package floatingips

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("floatingips: invalid options")
	// ErrInvalidEndpoint reports a cluster.Endpoint or
	// cluster.EndpointRemove that is malformed: no ID, no interface, an
	// invalid address, a NAT whose two addresses are of different families
	// or equal. The error also wraps cluster.ErrInvalid. The message
	// changes nothing.
	ErrInvalidEndpoint = errors.New("floatingips: invalid endpoint")
	// ErrConflict reports a floating IP, or an internal address, that two
	// endpoints claim: the endpoint first by ID keeps it, the other's NAT
	// is left out until the conflict is gone.
	ErrConflict = errors.New("floatingips: address claimed twice")
)
