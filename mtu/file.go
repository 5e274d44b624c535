package mtu

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// FileMode is the permission of the file WriteFile writes: readable by
// every CNI plugin, writable by its owner.
const FileMode os.FileMode = 0o644

// dirMode is the permission of the parent directories WriteFile creates.
const dirMode os.FileMode = 0o755

// maxFileSize bounds what ReadFile reads; an MTU file is a few digits.
const maxFileSize = 64

// WriteFile atomically replaces the file at path with mtu in decimal, with
// no newline (the format CNI plugins read, as "1450"). It writes a
// temporary file in the same directory, sets FileMode, fsyncs it, renames it
// over path and fsyncs the directory, so readers see the old content or the
// new, never a partial file, and the new content survives a crash once
// WriteFile returns nil. Missing parent directories are created (0755).
//
// mtu must be between MinMTU and MaxMTU (else an error wrapping
// ErrInvalidMTU), and path must name a file (else, for an empty path or
// one ending in a separator, an error wrapping fs.ErrInvalid); nothing is
// written then. On any failure before the rename the old file is left
// untouched and the temporary file removed; if only the final directory
// fsync fails, the new file is in place and the error says it may not be
// durable.
func WriteFile(path string, mtu int) error {
	return osFiles.writeFile(path, mtu)
}

// ReadFile reads an MTU written by WriteFile (or by anything else writing a
// decimal number, surrounded by optional white space). A content that is
// not such a number, or is out of MinMTU–MaxMTU, returns an error wrapping
// ErrInvalidMTU.
func ReadFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("mtu: read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return 0, fmt.Errorf("mtu: read %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return 0, mtuErrorf("%s is longer than %d bytes", path, maxFileSize)
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, mtuErrorf("%s holds %q, not a number", path, s)
	}
	if err := checkFileMTU(v); err != nil {
		return 0, fmt.Errorf("%w (in %s)", err, path)
	}
	return v, nil
}

func checkFileMTU(mtu int) error {
	if mtu < MinMTU || mtu > MaxMTU {
		return mtuErrorf("%d is outside %d–%d", mtu, MinMTU, MaxMTU)
	}
	return nil
}

// tempFile is the part of *os.File that WriteFile uses.
type tempFile interface {
	Name() string
	Write(b []byte) (int, error)
	Chmod(mode os.FileMode) error
	Sync() error
	Close() error
}

// fileOps are the file-system calls WriteFile makes, so tests can make each
// of them fail.
type fileOps struct {
	mkdirAll   func(dir string, perm os.FileMode) error
	createTemp func(dir, pattern string) (tempFile, error)
	rename     func(oldpath, newpath string) error
	remove     func(path string) error
	syncDir    func(dir string) error
}

var osFiles = fileOps{
	mkdirAll:   os.MkdirAll,
	createTemp: func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) },
	rename:     os.Rename,
	remove:     os.Remove,
	syncDir:    syncDir,
}

func (ops fileOps) writeFile(path string, mtu int) (err error) {
	if err := checkFileMTU(mtu); err != nil {
		return err
	}
	if path == "" {
		return fmt.Errorf("mtu: write: empty path: %w", fs.ErrInvalid)
	}
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return fmt.Errorf("mtu: write %s: the path names no file: %w", path, fs.ErrInvalid)
	}
	if dir == "" {
		dir = "."
	}
	if err := ops.mkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("mtu: write %s: create directory: %w", path, err)
	}
	f, err := ops.createTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("mtu: write %s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	renamed, closed := false, false
	defer func() {
		if !closed {
			f.Close()
		}
		if !renamed {
			if rerr := ops.remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = fmt.Errorf("%w (removing the temporary file failed too: %w)", err, rerr)
			}
		}
	}()
	if _, err := f.Write([]byte(strconv.Itoa(mtu))); err != nil {
		return fmt.Errorf("mtu: write %s: %w", tmp, err)
	}
	if err := f.Chmod(FileMode); err != nil {
		return fmt.Errorf("mtu: write %s: chmod: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("mtu: write %s: fsync: %w", tmp, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("mtu: write %s: close: %w", tmp, err)
	}
	if err := ops.rename(tmp, path); err != nil {
		return fmt.Errorf("mtu: write %s: rename: %w", path, err)
	}
	renamed = true
	if err := ops.syncDir(dir); err != nil {
		return fmt.Errorf("mtu: wrote %s, but it may not survive a crash: fsync %s: %w", path, dir, err)
	}
	return nil
}

// syncDir fsyncs a directory so a rename in it is durable. Windows cannot
// fsync a directory (and needs not), so there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
