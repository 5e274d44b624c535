package mtu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingFile wraps a real temporary file and fails one of its calls.
type failingFile struct {
	*os.File
	failOn string
	err    error
}

func (f failingFile) Write(b []byte) (int, error) {
	if f.failOn == "write" {
		return 0, f.err
	}
	return f.File.Write(b)
}

func (f failingFile) Chmod(m os.FileMode) error {
	if f.failOn == "chmod" {
		return f.err
	}
	return f.File.Chmod(m)
}

func (f failingFile) Sync() error {
	if f.failOn == "sync" {
		return f.err
	}
	return f.File.Sync()
}

func (f failingFile) Close() error {
	if f.failOn == "close" {
		f.File.Close()
		return f.err
	}
	return f.File.Close()
}

// TestWriteFileFailureKeepsOldFile makes each step of WriteFile fail in turn
// and checks that the old file survives untouched and no temporary file is
// left, except for a failing directory fsync, which comes after the rename.
func TestWriteFileFailureKeepsOldFile(t *testing.T) {
	boom := errors.New("injected failure")
	steps := []string{"mkdir", "create", "write", "chmod", "sync", "close", "rename", "syncdir"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "mtu")
			require.NoError(t, os.WriteFile(path, []byte("1500"), 0o644))

			ops := osFiles
			fail := func(s string) error {
				if s == step {
					return boom
				}
				return nil
			}
			ops.mkdirAll = func(d string, p os.FileMode) error {
				if err := fail("mkdir"); err != nil {
					return err
				}
				return os.MkdirAll(d, p)
			}
			ops.createTemp = func(d, pattern string) (tempFile, error) {
				if err := fail("create"); err != nil {
					return nil, err
				}
				f, err := os.CreateTemp(d, pattern)
				if err != nil {
					return nil, err
				}
				return failingFile{File: f, failOn: step, err: boom}, nil
			}
			ops.rename = func(o, n string) error {
				if err := fail("rename"); err != nil {
					return err
				}
				return os.Rename(o, n)
			}
			ops.syncDir = func(d string) error {
				if err := fail("syncdir"); err != nil {
					return err
				}
				return syncDir(d)
			}

			err := ops.writeFile(path, 1400)
			require.ErrorIs(t, err, boom)
			assert.NotErrorIs(t, err, ErrInvalidMTU)

			b, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			want := "1500"
			if step == "syncdir" {
				want = "1400" // renamed already; the error warns about durability
				assert.Contains(t, err.Error(), "may not survive a crash")
			}
			assert.Equal(t, want, string(b))
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			assert.Len(t, entries, 1, "no temporary file left behind")
		})
	}
}

func TestWriteFileReportsFailedCleanup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "value") // not "mtu": the path is in the text
	boom, stuck := errors.New("rename failed"), errors.New("remove failed")
	ops := osFiles
	ops.rename = func(string, string) error { return boom }
	ops.remove = func(p string) error { os.Remove(p); return stuck }
	err := ops.writeFile(path, 1400)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, stuck)
	assert.Equal(t, 1, strings.Count(err.Error(), "mtu: "), "one package prefix: %q", err)
	assert.NoFileExists(t, path)
}
