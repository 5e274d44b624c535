package iptables_test

import (
	"github.com/nodeplane/nodeplane/command"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// runnerKernel is a kernel.Commands of a runner of the test's own (one
// that counts, slows down or fails calls).
type runnerKernel struct{ r command.Runner }

func (k runnerKernel) Runner() command.Runner { return k.r }

// commands returns r as a Table's Kernel.
func commands(r command.Runner) kernel.Commands { return runnerKernel{r} }

// newFake returns a fake namespace and its iptables fake, which its Runner
// serves the binaries from.
func newFake() (*kernelfake.Namespace, *iptablesfake.Kernel) {
	ns := kernelfake.New(kernelfake.Options{})
	return ns, ns.IPTables()
}
