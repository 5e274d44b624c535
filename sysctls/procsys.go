package sysctls

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
	"github.com/nodeplane/nodeplane/kernel"
)

// DefaultProcSysRoot is where the kernel shows its sysctls.
const DefaultProcSysRoot = "/proc/sys"

// ProcSys reads and writes machine-wide sysctls (keys outside net, such as
// kernel.unprivileged_bpf_disabled) through the files under Root. It is the
// usual Options.Host: those keys are not per network namespace, so package
// kernel, which reaches one namespace, does not serve them. It refuses net.*
// keys, whose files show the namespace of whichever thread opens them: use
// a kernel.Namespace for those.
//
// Writing through ProcSys changes the whole machine. Wrap it with ReadOnly
// to only read and report.
type ProcSys struct {
	// Root is the directory of the sysctl files; empty means
	// DefaultProcSysRoot. Tests point it at a directory of their own.
	Root string
}

func (p ProcSys) file(key string) (string, error) {
	rel, err := path(key)
	if err != nil {
		return "", errs.Also(fmt.Errorf("sysctls: %s", err), kernel.ErrInvalid)
	}
	if first, _, _ := strings.Cut(rel, "/"); first == "net" {
		return "", errs.Also(fmt.Errorf("sysctls: %q is per network namespace: use a kernel.Namespace", key), kernel.ErrInvalid)
	}
	root := p.Root
	if root == "" {
		root = DefaultProcSysRoot
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}

// Sysctl implements kernel.Sysctls: the value without its trailing newline.
// A missing key wraps kernel.ErrNotFound; a malformed or net.* key
// kernel.ErrInvalid.
func (p ProcSys) Sysctl(_ context.Context, key string) (string, error) {
	f, err := p.file(key)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fileError("read", key, err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// SetSysctl implements kernel.Sysctls: it writes value to the key's file,
// which must exist (a sysctl is never created). A missing key wraps
// kernel.ErrNotFound; a value the kernel refuses kernel.ErrInvalid.
func (p ProcSys) SetSysctl(_ context.Context, key, value string) error {
	f, err := p.file(key)
	if err != nil {
		return err
	}
	fh, err := os.OpenFile(f, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fileError("write", key, err)
	}
	_, werr := fh.WriteString(value)
	cerr := fh.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fileError("write", key, err)
	}
	return nil
}

func fileError(op, key string, err error) error {
	e := fmt.Errorf("sysctls: %s %s: %w", op, key, err)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errs.Also(e, kernel.ErrNotFound)
	case errors.Is(err, errEINVAL):
		return errs.Also(e, kernel.ErrInvalid)
	}
	return e
}

// ReadOnly wraps s so that reads go through and every write fails with
// ErrReadOnly: a Driver on it reports what it would change and changes
// nothing (a dry run, or a machine-wide key an agent must not touch).
func ReadOnly(s kernel.Sysctls) kernel.Sysctls { return readOnly{s} }

type readOnly struct{ s kernel.Sysctls }

func (r readOnly) Sysctl(ctx context.Context, key string) (string, error) {
	return r.s.Sysctl(ctx, key)
}

func (readOnly) SetSysctl(_ context.Context, key, value string) error {
	return fmt.Errorf("%w: %s = %s", ErrReadOnly, key, value)
}
