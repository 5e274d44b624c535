package ifacemonitor

import "errors"

// Sentinel errors, for errors.Is. An error's text names the package once.
var (
	// ErrInvalidOptions is wrapped by New's errors about bad options.
	ErrInvalidOptions = errors.New("ifacemonitor: invalid options")
	// ErrAlreadyStarted is returned by a second call to Run.
	ErrAlreadyStarted = errors.New("ifacemonitor: already started")
	// ErrSubscribe is wrapped by Run's error when the subscription to the
	// namespace's events fails (together with the Kernel's error), or when
	// its stream ends before Run's context does (the namespace was
	// closed under the monitor).
	ErrSubscribe = errors.New("ifacemonitor: subscribe failed")
)
