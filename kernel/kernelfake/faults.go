package kernelfake

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/kernel"
)

// Op names one method of kernel.Kernel, for Fail, Refuse and Calls.
type Op string

// The methods, named as in kernel.Kernel.
const (
	OpLinks               Op = "Links"
	OpLinkByName          Op = "LinkByName"
	OpAddLink             Op = "AddLink"
	OpDeleteLink          Op = "DeleteLink"
	OpSetLinkUp           Op = "SetLinkUp"
	OpSetLinkMTU          Op = "SetLinkMTU"
	OpSetLinkMAC          Op = "SetLinkMAC"
	OpAddrs               Op = "Addrs"
	OpAddAddr             Op = "AddAddr"
	OpDeleteAddr          Op = "DeleteAddr"
	OpDumpRoutes          Op = "DumpRoutes"
	OpDumpInterfaceRoutes Op = "DumpInterfaceRoutes"
	OpApplyRoutes         Op = "ApplyRoutes"
	OpRules               Op = "Rules"
	OpAddRule             Op = "AddRule"
	OpDeleteRule          Op = "DeleteRule"
	OpNeighbors           Op = "Neighbors"
	OpApplyNeighbors      Op = "ApplyNeighbors"
	OpFDB                 Op = "FDB"
	OpApplyFDB            Op = "ApplyFDB"
	OpSysctl              Op = "Sysctl"
	OpSetSysctl           Op = "SetSysctl"
	OpDeleteConntrack     Op = "DeleteConntrack"
	OpSubscribe           Op = "Subscribe"
	// OpRun is a Run of the runner Runner returns.
	OpRun Op = "Run"
)

// writeOps are the methods that change the kernel, for Writes.
var writeOps = []Op{
	OpAddLink, OpDeleteLink, OpSetLinkUp, OpSetLinkMTU, OpSetLinkMAC, OpAddAddr, OpDeleteAddr,
	OpApplyRoutes, OpAddRule, OpDeleteRule, OpApplyNeighbors, OpApplyFDB, OpSetSysctl, OpDeleteConntrack,
	OpConfigureWireGuard,
}

// ErrInjected is what a call made to fail by Fail with a nil error
// returns (with syscall.EIO).
var ErrInjected = errors.New("kernelfake: injected failure")

// ErrInterrupted, given to Fail for OpDumpRoutes or OpDumpInterfaceRoutes,
// interrupts a dump halfway instead of failing it: the dump's reset
// function is called and every route is reported again from the start,
// as when the kernel marks a dump interrupted by a concurrent change and
// the dump is retried.
var ErrInterrupted = errors.New("kernelfake: dump interrupted (restarted)")

// Fail makes the next n calls of op fail with err, before anything is
// checked or changed; n < 0 makes every call fail until ClearFailures. A
// nil err means ErrInjected (with EIO); pass a syscall.Errno such as
// syscall.ENODEV to mimic a kernel refusal (it gets the sentinel
// kernel.Namespace attaches: kernel.ErrNotFound for ENODEV). Failures
// queue: Fail(op, 1, a)
// then Fail(op, 1, b) fails the next call with a and the one after with
// b. For the batched writes (ApplyRoutes, ApplyNeighbors, ApplyFDB) the
// unit is one operation of a batch: its own error is the injected one,
// wrapped in a *kernel.OpError, and the batch's other operations go on.
func (ns *Namespace) Fail(op Op, n int, err error) {
	if err == nil {
		err = fmt.Errorf("%w (%w)", ErrInjected, syscall.EIO)
	}
	defer ns.lock()()
	s := ns.s
	switch {
	case n < 0:
		s.always[op] = err
	case n > 0:
		for range n {
			s.fails[op] = append(s.fails[op], err)
		}
	}
}

// ClearFailures removes every failure Fail queued and the refusal hook.
func (ns *Namespace) ClearFailures() {
	defer ns.lock()()
	clear(ns.s.fails)
	clear(ns.s.always)
	ns.s.refuse = nil
}

// Refuse installs fn (nil removes it), which every write consults, after
// validation and before it changes anything, with the object it writes; a
// non-nil error (wrapped, with the sentinel kernel.Namespace attaches to
// an errno) refuses that object (for a batched write, that operation
// alone), as a kernel that always refuses it would. The objects are:
// kernel.Link for AddLink (as given) and for DeleteLink, SetLinkUp,
// SetLinkMTU and SetLinkMAC (as it is); kernel.Addr for AddAddr and
// DeleteAddr; kernel.RouteOp, kernel.NeighborOp and kernel.FDBOp for the
// batched writes; kernel.Rule for AddRule and DeleteRule; Sysctl for
// SetSysctl; []netip.Addr for DeleteConntrack; each
// kernel.WireGuardPeerConfig of a ConfigureWireGuard (a refusal stops the
// change at that peer). fn runs with the namespace
// locked: it must not call the Namespace.
func (ns *Namespace) Refuse(fn func(op Op, obj any) error) {
	defer ns.lock()()
	ns.s.refuse = fn
}

// Sysctl is a sysctl write, as Refuse sees it.
type Sysctl struct {
	// Key is the key as given to SetSysctl.
	Key string
	// Value is the value to write.
	Value string
}

// Calls returns how many calls of op were made, failed ones included (for
// a batched write, how many operations); calls through an Admin view are
// not counted.
func (ns *Namespace) Calls(op Op) int {
	defer ns.lock()()
	return ns.s.calls[op]
}

// Writes returns how many writes were made: calls of every method that
// changes the kernel, each operation of a batched write counting once.
// Runner's commands are not counted (see Calls(OpRun)).
func (ns *Namespace) Writes() int {
	defer ns.lock()()
	n := 0
	for _, op := range writeOps {
		n += ns.s.calls[op]
	}
	return n
}

// ResetCounts sets every call count back to zero.
func (ns *Namespace) ResetCounts() {
	defer ns.lock()()
	clear(ns.s.calls)
}

// enter counts a call of op and returns the injected error it must fail
// with, if any. An Admin view neither counts nor fails. The caller holds
// the lock.
func (ns *Namespace) enter(op Op) error {
	if ns.admin {
		return nil
	}
	s := ns.s
	s.calls[op]++
	if q := s.fails[op]; len(q) > 0 {
		s.fails[op] = q[1:]
		return classify(q[0])
	}
	return classify(s.always[op])
}

// refused asks the refusal hook about obj. The caller holds the lock.
func (ns *Namespace) refused(op Op, obj any) error {
	if ns.admin || ns.s.refuse == nil {
		return nil
	}
	if err := ns.s.refuse(op, obj); err != nil {
		return classify(fmt.Errorf("kernelfake: %s refused: %w", op, err))
	}
	return nil
}

// errnof returns an error with a formatted text that wraps errno, with
// the kernel package's sentinel attached as kernel.Namespace attaches it
// (see classify).
func errnof(errno syscall.Errno, format string, args ...any) error {
	return classify(fmt.Errorf("kernelfake: %s: %w", fmt.Sprintf(format, args...), errno))
}

// classify attaches to a kernel refusal the sentinel kernel.Namespace
// attaches: ErrExists to EEXIST; ErrNotFound to ENOENT, ESRCH, ENODEV and
// EADDRNOTAVAIL; ErrNotSupported to EOPNOTSUPP.
func classify(err error) error {
	var s error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EEXIST):
		s = kernel.ErrExists
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ESRCH), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.EADDRNOTAVAIL):
		s = kernel.ErrNotFound
	case errors.Is(err, syscall.EOPNOTSUPP):
		s = kernel.ErrNotSupported
	default:
		return err
	}
	if errors.Is(err, s) {
		return err
	}
	return errs.Also(err, s)
}

// invalidf returns an error wrapping kernel.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("kernelfake: %s: %w", fmt.Sprintf(format, args...), kernel.ErrInvalid)
}
