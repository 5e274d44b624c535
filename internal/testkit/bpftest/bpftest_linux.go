//go:build linux

package bpftest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

// Dir returns a directory on a fresh BPF file system, mounted for this
// test alone (unix.Mount("bpf", dir, "bpf", 0, "")) on a subdirectory of
// t.TempDir() and detached (MNT_DETACH) in t.Cleanup, before the temporary
// directory is removed. It calls kerneltest.RequireKernel first, and fails
// the test when the mount fails.
func Dir(t testing.TB) string {
	t.Helper()
	kerneltest.RequireKernel(t)
	dir := filepath.Join(t.TempDir(), "bpffs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("bpftest: %v", err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, ""); err != nil {
		t.Fatalf("bpftest: mount bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("bpftest: unmount %s: %v", dir, err)
		}
	})
	return dir
}
