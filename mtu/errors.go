package mtu

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Sentinel errors, for errors.Is. Bad options wrap ErrInvalidOptions,
// together with ErrInvalidPattern or ErrInvalidMTU where one applies; an
// MTU out of range given to WriteFile or read by ReadFile wraps
// ErrInvalidMTU alone; a WriteFile path that names no file wraps
// fs.ErrInvalid; failures of the file system wrap the os error. An error's
// text names the package once: one that matches ErrInvalidOptions and
// ErrInvalidMTU reads "mtu: invalid MTU: …".
var (
	// ErrInvalidOptions is wrapped by every error about bad options: of
	// NewDetector, NewMonitor and PodMTU.
	ErrInvalidOptions = errors.New("mtu: invalid options")
	// ErrInvalidPattern reports an Include or Exclude pattern that is not
	// a valid regular expression. It comes with ErrInvalidOptions.
	ErrInvalidPattern = errors.New("mtu: invalid interface pattern")
	// ErrInvalidMTU reports an MTU value out of range: an option
	// (Fallback, Override: with ErrInvalidOptions), an argument of
	// WriteFile or the content of a file read by ReadFile.
	ErrInvalidMTU = errors.New("mtu: invalid MTU")
	// ErrMTUTooSmall reports a pod MTU that, after subtracting the
	// overheads, is below the minimum its IP families need.
	ErrMTUTooSmall = errors.New("mtu: pod MTU too small")
	// ErrListLinks reports that listing the links failed; it comes with
	// the Kernel's error.
	ErrListLinks = errors.New("mtu: listing links failed")
	// ErrAlreadyStarted is returned by Monitor.Run when the Monitor has
	// already been run.
	ErrAlreadyStarted = errors.New("mtu: monitor already started")
)

// invalidf returns an error about bad options: sentinel's text followed by
// the formatted detail. It matches sentinel and ErrInvalidOptions.
func invalidf(sentinel error, format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	if sentinel == ErrInvalidOptions {
		return err
	}
	return errs.Also(err, ErrInvalidOptions)
}

// mtuErrorf returns an error about an MTU value that is no option: it
// matches ErrInvalidMTU alone.
func mtuErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidMTU}, args...)...)
}
