//go:build linux

package bpftest_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/testkit/bpftest"
	"github.com/nodeplane/nodeplane/internal/testkit/kerneltest"
)

func TestKernelDir(t *testing.T) {
	kerneltest.RequireKernel(t)
	var dir string
	t.Run("mount", func(t *testing.T) {
		dir = bpftest.Dir(t)
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if uint32(st.Type) != uint32(unix.BPF_FS_MAGIC) {
			t.Fatalf("%s: magic %#x, want bpffs", dir, st.Type)
		}
	})
	if dir == "" {
		t.Fatal("the subtest made no directory")
	}
	// After the subtest the mount is gone and so is the directory.
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && uint32(st.Type) == uint32(unix.BPF_FS_MAGIC) {
		t.Fatalf("%s is still a bpffs after the test", dir)
	}
}
