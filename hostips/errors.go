package hostips

import "errors"

// Sentinel errors. An error's text names the package once; errors.Is
// matches every sentinel it speaks of.
var (
	// ErrInvalidOptions reports an Options value that New refuses.
	ErrInvalidOptions = errors.New("hostips: invalid options")
	// ErrInvalidMessage reports an InterfaceAddrs message without a name,
	// or with an address that is not valid. The message changes nothing.
	ErrInvalidMessage = errors.New("hostips: invalid message")
)
