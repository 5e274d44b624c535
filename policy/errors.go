package policy

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("policy: invalid options")
	// ErrInvalidRule reports a rule that cannot be rendered: an unknown
	// action, ports without a port protocol, a network with host bits.
	ErrInvalidRule = errors.New("policy: invalid rule")
	// ErrInvalidPolicy reports a policy with a bad ID or a bad rule.
	ErrInvalidPolicy = errors.New("policy: invalid policy")
	// ErrInvalidProfile reports a profile with a bad ID or a bad rule.
	ErrInvalidProfile = errors.New("policy: invalid profile")
	// ErrInvalidEndpoint reports an endpoint with a bad ID, interface or
	// tier.
	ErrInvalidEndpoint = errors.New("policy: invalid endpoint")
	// ErrInvalidSet reports a set with a bad ID, kind or member.
	ErrInvalidSet = errors.New("policy: invalid set")
	// ErrNotSupported reports what the Manager's Filter cannot do, such
	// as per-rule counters on a backend without them.
	ErrNotSupported = errors.New("policy: not supported")
)
