//go:build linux

package mtu_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/mtu"
)

// fsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h: no new entries, no
// renames, no removals in a directory with it, even for root.
const fsImmutableFL = 0x00000010

// makeUnwritable makes dir refuse new entries: with mode 0555 for a normal
// user, and with the immutable attribute for root, who ignores modes. It
// skips the test when the file system has no immutable attribute.
func makeUnwritable(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s has no immutable attribute: %v", dir, err)
	}
	require.NoError(t, err)
	err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsImmutableFL))
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("the file system of %s has no immutable attribute: %v", dir, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() {
		f, err := os.Open(dir)
		if err != nil {
			t.Errorf("reopen %s: %v", dir, err)
			return
		}
		defer f.Close()
		if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
			t.Errorf("clear the immutable attribute of %s: %v", dir, err)
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
	assert.NotErrorIs(t, err, mtu.ErrInvalid)
	got, rerr := mtu.ReadFile(path)
	require.NoError(t, rerr)
	assert.Equal(t, 1500, got, "the old file is intact")
	entries, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	assert.Len(t, entries, 1)
}
