//go:build linux

package mtu_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/mtu"
)

// makeUnwritable makes dir refuse new entries: with mode 0555 for a normal
// user, and for root, who ignores modes, with a read-only bind mount of dir
// made in a private mount namespace of this test's OS thread (which works on
// every file system and is never seen by the rest of the machine). The
// thread stays locked, so it ends, with its mount namespace, when the test
// goroutine does; the mount is also undone in cleanup so t.TempDir can be
// removed.
func makeUnwritable(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	runtime.LockOSThread() // never unlocked: see above
	require.NoError(t, unix.Unshare(unix.CLONE_NEWNS), "private mount namespace")
	require.NoError(t, unix.Mount("", "/", "", unix.MS_PRIVATE|unix.MS_REC, ""))
	require.NoError(t, unix.Mount(dir, dir, "", unix.MS_BIND, ""))
	require.NoError(t, unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

func TestWriteFileUnwritableDirLeavesOldFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o755))
	path := filepath.Join(dir, "mtu")
	require.NoError(t, mtu.WriteFile(path, 1500))
	makeUnwritable(t, dir)

	err := mtu.WriteFile(path, 1400)
	require.Error(t, err)
	assert.NotErrorIs(t, err, mtu.ErrInvalidMTU)
	got, rerr := mtu.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, 1500, got, "the old file is intact")
	entries, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	assert.Len(t, entries, 1)
}
