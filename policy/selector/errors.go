package selector

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches the sentinel it starts with.
var (
	// ErrInvalidSelector reports a requirement or selector that Validate
	// refuses: an empty or malformed key, an unknown operator, the wrong
	// number of values, a malformed value.
	ErrInvalidSelector = errors.New("selector: invalid selector")
	// ErrInvalidEndpoint reports an endpoint with a bad ID, a local
	// endpoint with a bad interface, an invalid address or named port.
	ErrInvalidEndpoint = errors.New("selector: invalid endpoint")
	// ErrInvalidPolicy reports a policy with a bad ID, tier, selector or
	// rule.
	ErrInvalidPolicy = errors.New("selector: invalid policy")
	// ErrInvalidTier reports a tier with an empty name or an end-of-tier
	// action other than Deny or Pass.
	ErrInvalidTier = errors.New("selector: invalid tier")
	// ErrInvalidNamespace reports a namespace with an empty name or a bad
	// label.
	ErrInvalidNamespace = errors.New("selector: invalid namespace")
)
