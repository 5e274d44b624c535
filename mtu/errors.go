package mtu

import (
	"errors"
	"fmt"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Sentinel errors, for errors.Is. Every error about bad input wraps
// ErrInvalid, together with ErrInvalidPattern or ErrInvalidMTU where one
// applies; failures of the file system wrap the os error. An error's text
// names the package once: one that matches ErrInvalid and ErrInvalidMTU
// reads "mtu: invalid MTU: …".
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

// invalidf returns an error about bad input: sentinel's text followed by
// the formatted detail. It matches sentinel and ErrInvalid.
func invalidf(sentinel error, format string, args ...any) error {
	err := fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	if sentinel == ErrInvalid {
		return err
	}
	return errs.Also(err, ErrInvalid)
}
