//go:build linux

package kerneltest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// EnvRequireKernel is the environment variable that, set to a true value
// ("1", "true"), turns every kernel-test skip into a failure. CI=true has the
// same effect, so CI cannot pass by skipping.
const EnvRequireKernel = "NODEPLANE_REQUIRE_KERNEL"

// RequireKernel stops the test unless the process can run kernel tests
// (effective UID 0). Without root the test is skipped with a message saying
// why; when CI=true or NODEPLANE_REQUIRE_KERNEL=1 it fails instead.
//
// NewNS and NewTopology call it, so a TestKernel… test that builds its
// namespaces with them needs no explicit call.
func RequireKernel(t testing.TB) {
	t.Helper()
	requireKernel(t, os.Geteuid(), os.Getenv)
}

// RequireCommands stops the test unless every named binary can be found in
// PATH or in /usr/sbin, /sbin, /usr/bin or /bin (the places NS.Exec looks).
// A missing binary skips the test, or fails it under CI=true or
// NODEPLANE_REQUIRE_KERNEL=1, with a message naming what is missing.
func RequireCommands(t testing.TB, names ...string) {
	t.Helper()
	var missing []string
	for _, name := range names {
		if _, err := lookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		skipOrFail(t, os.Getenv, "missing commands: %s (install them, e.g. apt-get install -y --no-install-recommends iptables ipset nftables iproute2 iputils-ping)",
			strings.Join(missing, ", "))
	}
}

// requireKernel is RequireKernel with its inputs injected, so the decision
// can be tested without changing the process's credentials.
func requireKernel(t testing.TB, euid int, getenv func(string) string) {
	t.Helper()
	if euid != 0 {
		skipOrFail(t, getenv, "kernel tests need root (effective uid %d); run them as root, e.g. sudo -E go test ./...", euid)
	}
}

// skipOrFail skips the test with the formatted reason, or fails it when the
// environment forbids skipping kernel tests.
func skipOrFail(t testing.TB, getenv func(string) string, format string, args ...any) {
	t.Helper()
	msg := "kerneltest: " + fmt.Sprintf(format, args...)
	if mustRunKernelTests(getenv) {
		t.Fatalf("%s; CI=true or %s=1 forbids skipping kernel tests", msg, EnvRequireKernel)
		return // only reached with a fake testing.TB
	}
	t.Skip(msg)
}

// mustRunKernelTests reports whether the environment forbids skipping
// kernel tests: CI or NODEPLANE_REQUIRE_KERNEL set to a true value.
func mustRunKernelTests(getenv func(string) string) bool {
	for _, key := range []string{"CI", EnvRequireKernel} {
		if v, err := strconv.ParseBool(strings.TrimSpace(getenv(key))); err == nil && v {
			return true
		}
	}
	return false
}
