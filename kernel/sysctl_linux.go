//go:build linux

package kernel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/errs"
)

// Sysctl reads a net.* sysctl of the namespace, from a thread inside it
// (/proc/sys/net shows the namespace of the thread that opens a file), and
// returns the value without its trailing newline. The key is dotted or
// slashed (see Sysctls; an interface name with a dot needs the slash form:
// "net/ipv4/conf/eth0.100/rp_filter"); anything outside net/ or escaping
// it wraps ErrInvalid, a missing key ErrNotFound.
func (ns *Namespace) Sysctl(ctx context.Context, key string) (string, error) {
	path, err := SysctlPath(key)
	if err != nil {
		return "", err
	}
	if err := ns.acquire(orBackground(ctx)); err != nil {
		return "", err
	}
	defer ns.release()
	var value string
	err = ns.do(func() error {
		b, err := os.ReadFile("/proc/sys/" + path)
		if err != nil {
			return classify(fmt.Errorf("kernel: read sysctl %s: %w", key, err))
		}
		value = strings.TrimSuffix(string(b), "\n")
		return nil
	})
	return value, err
}

// SetSysctl writes a net.* sysctl of the namespace, from a thread inside
// it; the key is as for Sysctl. A value the kernel refuses (EINVAL) wraps
// ErrInvalid.
func (ns *Namespace) SetSysctl(ctx context.Context, key, value string) error {
	path, err := SysctlPath(key)
	if err != nil {
		return err
	}
	if err := ns.acquire(orBackground(ctx)); err != nil {
		return err
	}
	defer ns.release()
	return ns.do(func() error {
		f, err := os.OpenFile("/proc/sys/"+path, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(value)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINVAL):
			return errs.Also(fmt.Errorf("kernel: set sysctl %s=%q: %w", key, value, err), ErrInvalid)
		}
		return classify(fmt.Errorf("kernel: set sysctl %s: %w", key, err))
	})
}
