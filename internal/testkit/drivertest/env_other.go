//go:build !linux

package drivertest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Kernel runs the driver in a fresh network namespace of the running
// kernel. Network namespaces are Linux-only: elsewhere the test is skipped,
// or fails under CI=true or NODEPLANE_REQUIRE_KERNEL=1.
var Kernel = Environment{name: "kernel", open: openKernel, injectors: []string{injectRecorder}}

func openKernel(t testing.TB, _ []string) *env {
	t.Helper()
	for _, key := range []string{"CI", "NODEPLANE_REQUIRE_KERNEL"} {
		if v, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(key))); err == nil && v {
			t.Fatalf("drivertest: kernel tests need Linux; %s forbids skipping them", key)
		}
	}
	t.Skip("drivertest: kernel tests need Linux")
	return nil
}
