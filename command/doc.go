// Package command is the seam between nodeplane's drivers and the few
// binaries they run (iptables-restore, iptables-save, ipset).
//
// Drivers never call os/exec. They run binaries through a Runner: the one
// of the namespace they are given (kernel.Commands, whose Runner starts
// processes inside that namespace; kernelfake's serves them from
// in-memory fakes) or, when they are given none, Local, which runs them in
// the process's own network namespace. NetNS runs them inside another
// network namespace, given an open descriptor of it; a kernel.Namespace's
// runner is built on it. A nil context is context.Background().
//
// Failures are reported the same way for every driver: a failed command is
// an *Error, which keeps the exit status and standard error, and a failed
// restore transaction a *RestoreError, which keeps the input, the line the
// binary blamed and what it said (the drivers wrap it in their own
// sentinel, such as iptables.ErrRestore or ipsets.ErrRestore).
//
// The package owns no kernel state; it never runs anything on its own.
package command
