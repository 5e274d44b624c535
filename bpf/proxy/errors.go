package proxy

import (
	"errors"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Sentinel errors. Every error the package returns wraps one of them, so
// callers can test with errors.Is.
var (
	// ErrInvalidOptions reports an Options value out of range.
	ErrInvalidOptions = errors.New("proxy: invalid options")
	// ErrInvalidService reports a malformed Service or message; nothing of
	// it is written.
	ErrInvalidService = errors.New("proxy: invalid service")
	// ErrFrontendConflict reports a service that wants a frontend another
	// service already has. The service is not written until the frontend
	// is free; the one that had it first keeps it.
	ErrFrontendConflict = errors.New("proxy: frontend held by another service")
	// ErrNotSupported reports a kernel or platform without what the Proxy
	// needs (BPF, TCX attachments).
	ErrNotSupported = errors.New("proxy: not supported")
	// ErrAttach reports an interface the programs could not be attached
	// to or detached from; the other interfaces and the maps are not held
	// back, and the interface is tried again.
	ErrAttach = errors.New("proxy: attach failed")
	// ErrLoad reports a failure to open the maps or load the program.
	ErrLoad = errors.New("proxy: loading the maps or the program failed")
)

// unsupported makes err match ErrNotSupported without printing it: the
// error that wraps it (ErrLoad, ErrAttach) already carries the package's
// prefix, which the text then shows once.
func unsupported(err error) error { return errs.Also(err, ErrNotSupported) }
