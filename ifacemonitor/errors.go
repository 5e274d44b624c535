//go:build linux

package ifacemonitor

import "errors"

// Sentinel errors, for errors.Is. An error's text names the package once.
var (
	// ErrInvalidOptions is wrapped by New's errors about bad options.
	ErrInvalidOptions = errors.New("ifacemonitor: invalid options")
	// ErrAlreadyStarted is returned by a second call to Start.
	ErrAlreadyStarted = errors.New("ifacemonitor: already started")
	// ErrSubscribe is wrapped, together with the cause, by Start's error
	// when the subscription to the namespace's events (or to the Source's
	// stream) fails.
	ErrSubscribe = errors.New("ifacemonitor: subscribe failed")
	// ErrOverflow is the Resync.Reason (wrapped or not) of a Source that
	// lost events because its receive buffer was full, as the kernel's
	// ENOBUFS.
	ErrOverflow = errors.New("ifacemonitor: events lost: receive buffer overflow (ENOBUFS)")
)
