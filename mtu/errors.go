package mtu

import "errors"

// Sentinel errors. Every error returned by this package wraps one of them,
// so callers can test with errors.Is; errors about bad input also wrap
// ErrInvalid.
var (
	// ErrInvalid is wrapped by every error about bad input: options,
	// patterns, MTU values, paths.
	ErrInvalid = errors.New("mtu: invalid input")
	// ErrInvalidPattern reports an Include or Exclude pattern that is not
	// a valid regular expression. It comes with ErrInvalid.
	ErrInvalidPattern = errors.New("mtu: invalid interface pattern")
	// ErrInvalidMTU reports an MTU value out of range: an override, an
	// argument of WriteFile or the content of a file read by ReadFile. It
	// comes with ErrInvalid.
	ErrInvalidMTU = errors.New("mtu: invalid MTU")
	// ErrMTUTooSmall reports a pod MTU that, after subtracting the
	// overheads, is below the minimum its IP families need.
	ErrMTUTooSmall = errors.New("mtu: pod MTU too small")
	// ErrListLinks reports that the LinkLister failed.
	ErrListLinks = errors.New("mtu: listing links failed")
	// ErrStarted is returned by Monitor.Run when the Monitor has already
	// been run.
	ErrStarted = errors.New("mtu: monitor already started")
)
