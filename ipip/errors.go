package ipip

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is; its text names the package once.
var (
	// ErrInvalidOptions reports an Options or DriverOptions value out of
	// range.
	ErrInvalidOptions = errors.New("ipip: invalid options")
	// ErrInvalidInput reports a message or device that is malformed or not
	// IPv4. Nothing changes.
	ErrInvalidInput = errors.New("ipip: invalid input")
	// ErrDevice reports that the IPIP device could not be created or
	// changed — on a kernel without the ipip module, always (wrapping
	// kernel.ErrNotSupported). The driver retries it on its own backoff;
	// the direct routes and blackholes do not depend on it.
	ErrDevice = errors.New("ipip: device not in sync")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidInput}, args...)...)
}
