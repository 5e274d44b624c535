//go:build linux

package command

import (
	"fmt"
	"os/exec"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nodeplane/nodeplane/internal/netnsutil"
)

// start starts cmd from a thread inside the namespace; the child inherits
// the thread's network namespace.
func (n NetNS) start(cmd *exec.Cmd) error {
	if err := netnsutil.Do(netns.NsHandle(n.FD), cmd.Start); err != nil {
		return fmt.Errorf("%w (fd %d): %w", ErrNetNS, n.FD, err)
	}
	return nil
}

// SameNetNS reports whether the descriptors a and b name the same network
// namespace (the same nsfs inode). It makes one fstat call per descriptor
// and changes nothing.
func SameNetNS(a, b int) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(a, &sa); err != nil {
		return false, fmt.Errorf("%w: fstat fd %d: %w", ErrNetNS, a, err)
	}
	if err := unix.Fstat(b, &sb); err != nil {
		return false, fmt.Errorf("%w: fstat fd %d: %w", ErrNetNS, b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}
