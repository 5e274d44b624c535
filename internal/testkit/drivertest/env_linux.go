//go:build linux

package drivertest

import (
	"testing"

	"github.com/nodeplane/nodeplane/clock"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
	"github.com/nodeplane/nodeplane/kernel"
)

// Kernel runs the driver in a fresh network namespace of the running
// kernel (kerneltest.NewNS, opened with kernel.Open), removed when the
// check ends, also when it fails. It needs root, and the binaries the
// Subject names: without them the test is skipped, or fails under CI=true
// or NODEPLANE_REQUIRE_KERNEL=1. Failures are injected by the Recorder
// ("recorder").
var Kernel = Environment{name: "kernel", open: openKernel, injectors: []string{injectRecorder}}

func openKernel(t testing.TB, binaries []string) *env {
	t.Helper()
	kerneltest.RequireKernel(t)
	if len(binaries) > 0 {
		kerneltest.RequireCommands(t, binaries...)
	}
	ns := kerneltest.NewNS(t)
	k, err := kernel.Open(ns.Path())
	if err != nil {
		t.Fatalf("drivertest: opening %s: %v", ns, err)
	}
	// Registered after NewNS's cleanup, so it runs first: the namespace
	// is closed before it is removed.
	t.Cleanup(func() { _ = k.Close() })
	return openKernelNamespace(t, k)
}

// openKernelNamespace returns an env on k, a namespace of the running
// kernel, whose failures the Recorder injects.
func openKernelNamespace(t testing.TB, k kernel.Kernel) *env {
	e := &env{rec: Record(k), admin: k, clock: clock.NewFake(t0)}
	e.arm = func(injector string, n int) {
		if injector != injectRecorder {
			t.Fatalf("drivertest: no injector %q in the kernel environment", injector)
		}
		e.rec.FailWrites(n)
	}
	e.disarm = func() { e.rec.FailWrites(0) }
	return e
}
