package drivertest

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/kernel"
	"github.com/nodeplane/nodeplane/kernel/kernelfake"
	"github.com/nodeplane/nodeplane/kernel/kernelfake/iptablesfake"
)

// Environment is where the suite runs a driver: Fake, an in-memory
// namespace, or Kernel, a fresh network namespace of the running kernel.
// Every check opens its own namespaces, removed when the check ends.
type Environment struct {
	name string
	// open returns a fresh namespace for t; binaries are the programs the
	// driver runs (the kernel environment requires them).
	open func(t testing.TB, binaries []string) *env
	// injectors name the ways the environment fails writes, as env.arm
	// takes them.
	injectors []string
}

// String returns "fake" or "kernel".
func (e Environment) String() string { return e.name }

// Fake runs the driver on a kernelfake.Namespace. Failures are injected
// in two ways, each its own check: "kernelfake", the namespace's own
// vocabulary (Fail on every netlink write, the iptables and ipset fakes'
// FailNext on restores and destroys), and "recorder" (Recorder.FailWrites).
var Fake = FakeWith(kernelfake.Options{Name: "drivertest"})

// FakeWith is Fake on namespaces made with o: to model a kernel other than
// kernelfake's default, such as one with a module the running kernel
// lacks (o.Kinds with kernel.KindIPIP).
func FakeWith(o kernelfake.Options) Environment {
	return Environment{name: "fake", injectors: []string{injectKernelfake, injectRecorder},
		open: func(t testing.TB, _ []string) *env { return openFake(t, o) }}
}

// The names of the ways to inject failures.
const (
	injectKernelfake = "kernelfake"
	injectRecorder   = "recorder"
)

// t0 is when the fake clock of every environment starts.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is one namespace a check runs in.
type env struct {
	// rec is the driver's kernel: the namespace behind a Recorder.
	rec *Recorder
	// admin reaches the same namespace behind the driver's back: not
	// counted, never failed.
	admin kernel.Kernel
	// clock is the drivers' clock; the suite moves it.
	clock *clock.Fake
	// arm makes writes fail the way the injector named says, for the next
	// n writes (for "kernelfake", n of each kind); disarm stops it.
	arm    func(injector string, n int)
	disarm func()
}

// netlinkWrites are the methods of kernel.Kernel that change the
// namespace over netlink.
var netlinkWrites = []kernelfake.Op{
	kernelfake.OpAddLink, kernelfake.OpDeleteLink, kernelfake.OpSetLinkUp, kernelfake.OpSetLinkMTU,
	kernelfake.OpSetLinkMAC, kernelfake.OpAddAddr, kernelfake.OpDeleteAddr, kernelfake.OpApplyRoutes,
	kernelfake.OpAddRule, kernelfake.OpDeleteRule, kernelfake.OpApplyNeighbors, kernelfake.OpApplyFDB,
	kernelfake.OpSetSysctl, kernelfake.OpDeleteConntrack,
}

func openFake(t testing.TB, o kernelfake.Options) *env {
	ns := kernelfake.New(o)
	e := &env{rec: Record(ns), admin: ns.Admin(), clock: clock.NewFake(t0)}
	e.arm = func(injector string, n int) {
		switch injector {
		case injectRecorder:
			e.rec.FailWrites(n)
		case injectKernelfake:
			err := fmt.Errorf("%w (%w)", ErrInjected, syscall.EIO)
			for _, op := range netlinkWrites {
				ns.Fail(op, n, err)
			}
			ns.IPTables().FailNext(iptablesfake.OpRestore, n)
			ns.IPSets().FailNext(n, "restore", "")
			ns.IPSets().FailNext(n, "destroy", "")
		default:
			t.Fatalf("drivertest: no injector %q in the fake environment", injector)
		}
	}
	e.disarm = func() {
		e.rec.FailWrites(0)
		ns.ClearFailures()
		ns.IPTables().ClearFaults()
		ns.IPSets().ClearFailures()
	}
	return e
}
