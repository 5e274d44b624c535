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
	// ErrInvalidService reports a malformed cluster.Service, ServiceRemove
	// or NodeAddrs (the error also wraps cluster.ErrInvalid); nothing of it
	// is written. It is also the Reason of the *dataplane.ObjectError of a
	// service that waits for a free service ID.
	ErrInvalidService = errors.New("proxy: invalid service")
	// ErrFrontendConflict reports a service that wants a frontend another
	// service already has. Nothing of the service is written until the
	// frontend is free; the one that had it first keeps it. Apply reports
	// it in its *dataplane.PartialError, and Status in Errors, while the
	// service waits.
	ErrFrontendConflict = errors.New("proxy: frontend held by another service")
	// ErrMapFull reports a service for which the frontend or the backend
	// map has no room (see Options.Frontends and Options.Backends).
	// Nothing of the service is written until there is room for all of
	// its entries. Apply reports each such service in its
	// *dataplane.PartialError (the Reason of the service's
	// *dataplane.ObjectError), and Status each in Errors, while they wait.
	ErrMapFull = errors.New("proxy: map full")
	// ErrNotSupported reports a kernel or platform without what the Proxy
	// needs (BPF, TCX attachments).
	ErrNotSupported = errors.New("proxy: not supported")
	// ErrAttach reports an interface (or cgroup hook) the programs could
	// not be attached to, as the Reason of its *dataplane.ObjectError; the
	// other interfaces and the maps are not held back, and the interface
	// is tried again.
	ErrAttach = errors.New("proxy: attach failed")
	// ErrLoad reports a failure to open the maps or load the program.
	ErrLoad = errors.New("proxy: loading the maps or the program failed")
	// ErrNotApplied reports a Plan or State of a Proxy that has not
	// applied yet: the first Apply opens (or creates) the maps and loads
	// the programs that they read.
	ErrNotApplied = errors.New("proxy: not applied yet")
)

// unsupported makes err match ErrNotSupported without printing it: the
// error that wraps it (ErrLoad, ErrAttach) already carries the package's
// prefix, which the text then shows once.
func unsupported(err error) error { return errs.Also(err, ErrNotSupported) }
